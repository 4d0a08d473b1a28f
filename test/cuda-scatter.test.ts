/**
 * cuda scatter / scatterAdd / indexPut (and their in-place forms) against the CPU kernels: plain
 * writes with duplicate indices (the last write wins on both devices), every scatter reduce,
 * accumulate, negative indices, None and bool-mask indices, broadcast values, scalar sources,
 * strided self, fp32/bf16/int64, and the CPU's error for an out-of-range index. Skips where no
 * CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand, randomInts } from './helpers/make.js';
import { checkOp, skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const ints = (n: number, seed: number, lo: number, hi: number, shape: number[]): Tensor => makeTensor(randomInts(n, seed, lo, hi), shape, 'int64');

test('cuda scatter and scatterAdd match the CPU: duplicates, every reduce, scalars, strided self, dtypes', { skip }, () => {
  const idx = ints(4 * 5, 1, 0, 6, [4, 5]); // duplicates along dim 0 (6 rows, 20 writes)
  for (const dtype of ['float32', 'bfloat16'] as const) {
    const self = rand([6, 5], 2, 'contiguous', dtype);
    const src = rand([4, 5], 3, 'contiguous', dtype);
    checkOp(`scatter ${dtype} (duplicates: last write wins)`, (s, i, x) => kiln.scatter(s, 0, i, x), [self, idx, src]);
    checkOp(`scatterAdd ${dtype}`, (s, i, x) => kiln.scatterAdd(s, 0, i, x), [self, idx, src], { atol: dtype === 'bfloat16' ? 3e-2 : 1e-6 });
    for (const reduce of ['add', 'multiply'] as const) checkOp(`scatter reduce ${reduce} ${dtype}`, (s, i, x) => kiln.scatter(s, 0, i, x, reduce), [self, idx, src], { atol: dtype === 'bfloat16' ? 3e-2 : 1e-6 });
    checkOp(`scatter scalar ${dtype}`, (s, i) => kiln.scatter(s, 1, i, 2.5), [self, ints(6 * 2, 4, 0, 5, [6, 2])]);
  }
  const t = rand([5, 6], 5).transpose(0, 1); // strided self [6, 5]
  checkOp('scatter_ in place on a transposed self', (s, i, x) => kiln.scatter_(s.clone(), 1, i, x), [t, ints(6 * 3, 6, 0, 5, [6, 3]), rand([6, 3], 7)]);
  checkOp('scatterAdd_ int64', (s, i, x) => kiln.scatterAdd_(s.clone(), 0, i, x), [ints(12, 8, -9, 9, [3, 4]), ints(8, 9, 0, 3, [2, 4]), ints(8, 10, -5, 5, [2, 4])]);
});

test('cuda indexPut matches the CPU: tensors, None, bool masks, negative indices, broadcast values, accumulate', { skip }, () => {
  const self = rand([5, 4, 3], 11);
  checkOp('indexPut [i, j]', (s, i, j, v) => kiln.indexPut(s, [i, j], v), [self, ints(6, 12, -5, 5, [6]), ints(6, 13, 0, 4, [6]), rand([6, 3], 14)]);
  checkOp('indexPut [None, j] broadcast row', (s, j, v) => kiln.indexPut(s, [null, j], v), [self, ints(2, 15, 0, 4, [2]), rand([3], 16)]);
  const mask = makeTensor([1, 0, 1, 1, 0], [5], 'bool');
  checkOp('indexPut bool mask, scalar', (s, m) => kiln.indexPut(s, [m], -1), [self, mask]);
  checkOp('indexPut accumulate with duplicates', (s, i, v) => kiln.indexPut(s, [i], v, true), [self, ints(7, 17, 0, 5, [7]), rand([7, 4, 3], 18)], { atol: 1e-5 });
  checkOp('indexPut_ in place', (s, i, v) => kiln.indexPut_(s.clone(), [null, null, i], v), [self, ints(2, 19, 0, 3, [2]), rand([5, 4, 2], 20)]);
});

test('cuda scatter / indexPut: an out-of-range index raises the CPU error, nothing is written', { skip }, () => {
  const self = kiln.zeros([3, 4]).to('cuda');
  const bad = makeTensor([0, 3], [2, 1], 'int64').to('cuda');
  assert.throws(() => kiln.scatter(self, 0, bad, 1), /scatter: .*index 3.* out of .*bounds|out of range/i);
  assert.throws(() => kiln.indexPut(self, [makeTensor([5], [1], 'int64').to('cuda')], 1), /indexPut/);
  assert.deepEqual(self.to('cpu').toFlatArray(), new Array(12).fill(0));
});
