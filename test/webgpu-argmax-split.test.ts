/**
 * The split argmax / argmin of webgpu (kernels/webgpu/argreduce-split.ts: long rows over several
 * workgroups, merged by a second dispatch) against a float64 reference computed here: the first
 * index of the largest (smallest) value, NaN before any number. Rows of a Qwen3 vocabulary
 * (151936) with the maximum in the last workgroup's chunk, ties across chunks (the first must win),
 * NaN, -Infinity everywhere, several rows, float16 / bfloat16 / int32 inputs, a row view of a
 * larger tensor, and the layouts the split does not take (a transposed input) still correct
 * through the fused kernel. Dispatch counts show which kernel ran. Needs an adapter that computes
 * (SwiftShader here, the GPU on the device machine).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import { splitArgPlan } from '../src/kernels/webgpu/argreduce-split.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const VOCAB = 151936;

/** The reference arg reduction of each row of `rows` (float64 values as they are after rounding to the dtype). */
function refArg(rows: number[][], kind: 'argmax' | 'argmin'): number[] {
  return rows.map((r) => {
    let best = 0;
    for (let j = 1; j < r.length; j++) {
      const v = r[j]!;
      const b = r[best]!;
      if (Number.isNaN(b)) continue;
      if (Number.isNaN(v) || (kind === 'argmax' ? v > b : v < b)) best = j;
    }
    return best;
  });
}

/** A seeded row of small integers (exact in every dtype; many ties). */
function row(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 20) % 200 - 100;
  });
}

function run(rows: number[][], dtype: DType, kind: 'argmax' | 'argmin'): { got: number[]; dispatches: number } {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const x = kiln.tensor(rows, { dtype, device: 'webgpu' });
  const d0 = acc.dispatchCount;
  const r = kind === 'argmax' ? kiln.argmax(x, 1) : kiln.argmin(x, 1);
  const dispatches = acc.dispatchCount - d0;
  assert.equal(r.dtype, 'int64');
  const got = (r.toFlatArray() as (number | bigint)[]).map(Number);
  x.dispose();
  r.dispose();
  return { got, dispatches };
}

test('the split plan: long rows, few of them', () => {
  assert.equal(splitArgPlan(1, VOCAB), 75);
  assert.equal(splitArgPlan(1, 8191), 0);
  assert.equal(splitArgPlan(128, VOCAB), 0);
  assert.equal(splitArgPlan(64, VOCAB), 64);
  assert.equal(splitArgPlan(1, 8192), 4);
});

test('split argmax over a vocabulary row: the maximum in the last chunk, ties across chunks', { skip }, () => {
  const r = row(VOCAB, 7);
  // A tie of the maximum in chunks 3 and 74 (the last: 151936 = 74 x 2048 + 448): the first wins;
  // then only the last chunk's copy is left as the maximum.
  r[3 * 2048 + 17] = 1000;
  r[VOCAB - 5] = 1000;
  for (const dtype of ['float32', 'float16', 'bfloat16', 'int32'] as DType[]) {
    const a = run([r], dtype, 'argmax');
    assert.deepEqual(a.got, refArg([r], 'argmax'), dtype);
    assert.equal(a.dispatches, 2, `${dtype}: the split kernel's two dispatches`);
  }
  const last = [...r];
  last[3 * 2048 + 17] = 0;
  assert.deepEqual(run([last], 'float16', 'argmax').got, [VOCAB - 5]);
  // The very last element, alone.
  const end = row(VOCAB, 9);
  end[VOCAB - 1] = 5000;
  assert.deepEqual(run([end], 'float32', 'argmax').got, [VOCAB - 1]);
});

test('split argmin, NaN first, -Infinity rows, several rows', { skip }, () => {
  const rows = [row(20000, 1), row(20000, 2), row(20000, 3)];
  rows[0]![19999] = -500;
  rows[1]![12345] = NaN;
  rows[1]![17000] = NaN;
  rows[2] = rows[2]!.map(() => -Infinity);
  for (const kind of ['argmax', 'argmin'] as const) {
    const a = run(rows, 'float32', kind);
    assert.deepEqual(a.got, refArg(rows, kind), kind);
    assert.equal(a.dispatches, 2);
  }
  // Every value equal: index 0.
  assert.deepEqual(run([new Array(9000).fill(3)], 'float16', 'argmin').got, [0]);
});

test('split argmax of a row view and of a whole tensor; a transposed input keeps the fused kernel', { skip }, () => {
  const rows = [row(10000, 11), row(10000, 12)];
  const x = kiln.tensor(rows, { dtype: 'float32', device: 'webgpu' });
  // Row 1 as a view (offset 10000).
  const v = kiln.narrow(x, 0, 1, 1);
  assert.deepEqual((kiln.argmax(v, 1).toFlatArray() as (number | bigint)[]).map(Number), refArg([rows[1]!], 'argmax'));
  // No dim: the flattened index.
  const flat = refArg([[...rows[0]!, ...rows[1]!]], 'argmax')[0]!;
  assert.equal(Number((kiln.argmax(x).toFlatArray() as (number | bigint)[])[0]), flat);
  // Transposed [10000, 2] reduced over dim 0: rows are strided; the result must still be right.
  const t = kiln.transpose(x, 0, 1);
  assert.deepEqual((kiln.argmax(t, 0).toFlatArray() as (number | bigint)[]).map(Number), refArg(rows, 'argmax'));
  x.dispose();
});
