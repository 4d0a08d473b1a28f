/**
 * Host latency of a small webgpu read (issue #20: a batch-1 decode step's sampler reads 4 bytes,
 * the token id, and its "sample" share was 1.1 ms on the H200). Rows, median wall microseconds of
 * `reps` reads each:
 * - idle: a 4-byte read of a buffer no queued work writes (the bridge round trip, staging buffer,
 *   submit, mapAsync and its event polling: the fixed cost of any read);
 * - after add: one tiny dispatch (int32 [1]), then its 4 bytes (adds a dispatch's encode + completion);
 * - after argmax: argmax over a [1, 151936] row, then the id (the sampler's own kernel + read).
 * The difference between the decode step's "sample" and these is GPU work still running when the
 * sampler starts waiting.
 *
 *   node dist/bench/webgpu-readback.js [--reps 200]
 */
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';

const { values: a } = parseArgs({ options: { reps: { type: 'string', default: '200' } } });
const reps = Number(a.reps);
const dev = 'webgpu';

function median(f: () => void): number {
  f();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    f();
    t.push((performance.now() - t0) * 1000);
  }
  return t.sort((x, y) => x - y)[t.length >> 1]!;
}

kiln.manualSeed(0);
const one = kiln.tensor([7], { dtype: 'int32', device: dev });
const logits = kiln.randn([1, 151936], { device: dev }).to('float16');
kiln.synchronize(dev);
const rows: [string, number][] = [
  ['read 4 bytes, idle', median(() => void one.toArray())],
  ['add [1] int32, then read its 4 bytes', median(() => kiln.noGrad(() => kiln.scope(() => void kiln.add(one, one).toArray())))],
  ['argmax [1, 151936] f16, then read the id', median(() => kiln.noGrad(() => kiln.scope(() => void kiln.argmax(logits, 1).toArray())))],
];
for (const [k, us] of rows) console.log(`${k.padEnd(44)} ${us.toFixed(1).padStart(9)} us`);
process.exit(0);
