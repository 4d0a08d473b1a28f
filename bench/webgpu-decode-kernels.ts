/**
 * Device time of the kernels of a Qwen3-0.6B batch-1 decode step on webgpu, one at a time (issue
 * #20), without the per-dispatch stamp overhead of webgpu-decode-profile.ts (there, a stamp before
 * every dispatch ends the compute pass and adds 20-30 us to each): `reps` calls of one op are
 * queued back to back between two device events (one batch: the bridge flushes at 256 commands or
 * a call), so the time per call is the kernel plus the GPU's own gap between dependent dispatches.
 * Rows: a tiny pointwise op (that floor), each projection's GEMV (and the weight bytes over the
 * time, GB/s), the final RMSNorm, the greedy argmax over the vocabulary, paged decode attention
 * at a 300-token context (--context) in a table of --capacity tokens (default 40960: Qwen3's 40960
 * positions; the engine's tables are min(that, its cache's blocks) wide).
 *
 *   node dist/bench/webgpu-decode-kernels.js [--dtype float16] [--reps 50] [--json out.json]
 *   KILN_WEBGPU_SPLIT_ARG=0 node dist/bench/webgpu-decode-kernels.js --only argmax   (one workgroup, for comparison)
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

const { values: a } = parseArgs({ options: { dtype: { type: 'string', default: 'float16' }, reps: { type: 'string', default: '50' }, only: { type: 'string', default: '' }, context: { type: 'string', default: '300' }, capacity: { type: 'string', default: '40960' }, json: { type: 'string' } } });
const dtype = a.dtype as DType;
const reps = Number(a.reps);
const dev = 'webgpu';
const bytes = dtype === 'float32' ? 4 : 2;

/** Median device microseconds per call of `f` (reps calls between two events; 5 trials). */
function time(f: () => Tensor): number {
  kiln.noGrad(() => kiln.scope(() => void f()));
  kiln.synchronize(dev);
  const trials: number[] = [];
  for (let t = 0; t < 5; t++) {
    kiln.noGrad(() =>
      kiln.scope(() => {
        const e0 = new kiln.Event(dev, { enableTiming: true }).record();
        for (let i = 0; i < reps; i++) f();
        const e1 = new kiln.Event(dev, { enableTiming: true }).record();
        kiln.synchronize(dev);
        trials.push((1000 * e0.elapsedTime(e1)) / reps);
      }),
    );
  }
  return trials.sort((x, y) => x - y)[2]!;
}

const rows: { kernel: string; us: number; gbps?: number }[] = [];
/** --only: the rows whose name contains it (the others are neither set up nor run). */
const want = (name: string): boolean => a.only === '' || name.includes(a.only);
const report = (kernel: string, us: number, moved?: number): void => {
  const gbps = moved === undefined ? undefined : moved / us / 1e3;
  rows.push({ kernel, us: Number(us.toFixed(2)), ...(gbps === undefined ? {} : { gbps: Number(gbps.toFixed(0)) }) });
  console.log(`${kernel.padEnd(40)} ${us.toFixed(2).padStart(9)} us${gbps === undefined ? '' : `  ${gbps.toFixed(0).padStart(6)} GB/s`}`);
};

kiln.manualSeed(0);
const small = kiln.randn([1024], { device: dev }).to(dtype);
if (want('pointwise')) report('pointwise add [1024] (dispatch floor)', time(() => kiln.add(small, small)));

for (const [name, n, k] of [['qkv 4096x1024', 4096, 1024], ['o 1024x2048', 1024, 2048], ['gate_up 6144x1024', 6144, 1024], ['down 1024x3072', 1024, 3072], ['lm_head 151936x1024', 151936, 1024]] as const) {
  if (!want(`gemv ${name}`)) continue;
  const w = kiln.randn([n, k], { device: dev }).to(dtype);
  const x = kiln.randn([1, k], { device: dev }).to(dtype);
  report(`gemv ${name}`, time(() => kiln.linear(x, w)), n * k * bytes);
  w.dispose();
  x.dispose();
}

const h = kiln.randn([1, 1024], { device: dev }).to(dtype);
const g = kiln.randn([1024], { device: dev }).to(dtype);
if (want('rmsNorm')) report('rmsNorm [1, 1024]', time(() => kiln.llm.rmsNorm(h, g, 1e-6)));

const logits = want('argmax') ? kiln.randn([1, 151936], { device: dev }).to(dtype) : small;
if (want('argmax')) report(`argmax [1, 151936] (split ${process.env.KILN_WEBGPU_SPLIT_ARG ?? '1'})`, time(() => kiln.argmax(logits, 1)), 151936 * bytes);

// Paged decode attention: 16 query heads over 8 kv heads of 128, blocks of 16, a 300-token context.
const bs = 16;
const capacity = Number(a.capacity);
const maxBlocks = Math.ceil(capacity / bs);
const ctx = Number(a.context);
if (want('pagedAttention')) pagedRow();
function pagedRow(): void {
  const kc = kiln.randn([maxBlocks, bs, 8, 128], { device: dev }).to(dtype);
  const vc = kiln.randn([maxBlocks, bs, 8, 128], { device: dev }).to(dtype);
  const q = kiln.randn([1, 16, 128], { device: dev }).to(dtype);
  const tables = kiln.tensor([Array.from({ length: maxBlocks }, (_, i) => i)], { dtype: 'int32', device: dev });
  const lens = kiln.tensor([ctx], { dtype: 'int32', device: dev });
  report(`pagedAttention ctx ${ctx} (capacity ${capacity})`, time(() => kiln.llm.pagedAttention(q, kc, vc, tables, lens, 1 / Math.sqrt(128))), 2 * ctx * 8 * 128 * bytes);
}

if (a.json) fs.writeFileSync(a.json, JSON.stringify({ dtype, reps, rows }, null, 2));
process.exit(0);
