/**
 * webgpu reads (worker.ts read): small reads share one staging buffer, larger ones take their
 * own. Reads of different tensors, sizes, dtypes and unaligned offsets, alternating small and
 * large, each must return its own bytes (a reused staging buffer returning a previous read's data,
 * or a range mapped short, fails here). Needs a real adapter (SwiftShader in CI).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

test('webgpu reads of small and large tensors at odd offsets return their own values', { skip }, () => {
  const int = (n: number, base: number): number[] => Array.from({ length: n }, (_, i) => base + i * 7);
  const reads: [string, () => unknown, unknown][] = [];
  for (let round = 0; round < 2; round++) {
    for (const [n, base] of [[1, 11], [1, 12], [3, 100], [1500, 5], [2, 9]] as const) {
      const v = int(n, base + round);
      const t = kiln.tensor(v, { dtype: 'int32', device: 'webgpu' });
      reads.push([`int32 [${n}]`, () => t.toFlatArray(), v]);
    }
    // float16 at an odd element offset: the read's start and end are not whole words.
    const h = [1, 2, 3, 4, 5, 6, 7].map((x) => x + round);
    const ht = kiln.tensor(h, { dtype: 'float16', device: 'webgpu' });
    reads.push(['float16 [1:4]', () => ht.slice(0, 1, 4).toFlatArray(), h.slice(1, 4)]);
    reads.push(['float16 [3:4]', () => ht.slice(0, 3, 4).toFlatArray(), h.slice(3, 4)]);
    // Larger than the small-read staging buffer (4096 bytes).
    const big = int(3000, round);
    const bt = kiln.tensor(big, { dtype: 'int32', device: 'webgpu' });
    reads.push(['int32 [3000]', () => bt.toFlatArray(), big]);
  }
  for (const [label, read, want] of reads) assert.deepEqual(read(), want, label);
});
