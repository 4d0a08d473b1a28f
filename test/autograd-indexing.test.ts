/** Backward formulas of the indexing group: gradchecks (duplicates, layouts, dims) and exact conventions. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import * as ix from '../src/ops/defs/indexing.js';
import { listOps } from '../src/ops/registry.js';
import { numel } from '../src/tensor/layout.js';
import { type Layout, makeTensor, randomValues } from './helpers/make.js';

const { gradcheck } = kiln;

function leaf(shape: number[], seed = 1, layout: Layout = 'contiguous'): Tensor {
  return makeTensor(randomValues(numel(shape), seed), shape, 'float64', layout).requiresGrad_();
}
const ints = (values: number[], shape: number[], layout: Layout = 'contiguous'): Tensor => makeTensor(values, shape, 'int64', layout);
const bools = (values: number[], shape: number[]): Tensor => makeTensor(values, shape, 'bool');
const grad = (x: Tensor): number[] => x.grad!.toFlatArray();
const f64 = (values: number[], shape: number[]): Tensor => makeTensor(values, shape, 'float64');

test('embedding: weight gradient accumulates duplicates; paddingIdx rows get none', () => {
  const input = ints([0, 2, 2, 4, 1, 2], [2, 3]);
  gradcheck((w) => kiln.embedding(input, w), [leaf([5, 3], 1)]);
  // paddingIdx is a gradient convention (the forward still reads that row), so gradcheck can only
  // run with a paddingIdx that the input doesn't hit; the convention is checked exactly below.
  gradcheck((w) => kiln.embedding(input, w, 3), [leaf([5, 3], 2, 'transposed')]);
  gradcheck((w) => kiln.embedding(ints([3], [1]), w, -1), [leaf([5, 2], 3, 'strided')]);

  const w = leaf([4, 2], 4);
  kiln.embedding(ints([1, 3, 1, 1, 0], [5]), w, 3).backward(kiln.ones([5, 2], { dtype: 'float64' }));
  assert.deepEqual(grad(w), [1, 1, 3, 3, 0, 0, 0, 0]);
  const w2 = leaf([4, 2], 5);
  kiln.embedding(ints([1, 3, 3], [3]), w2, -1).sum().backward();
  assert.deepEqual(grad(w2), [0, 0, 1, 1, 0, 0, 0, 0], 'a negative paddingIdx counts from the end');
});

test('indexSelect: dims, negative dims, duplicates, layouts, 0-d index and 0-d self', () => {
  const idx = ints([2, 0, 2, 1], [4]);
  gradcheck((t) => kiln.indexSelect(t, 0, idx), [leaf([3, 4], 10)]);
  gradcheck((t) => kiln.indexSelect(t, -1, idx), [leaf([3, 4], 11, 'transposed')]);
  gradcheck((t) => kiln.indexSelect(t, 1, idx), [leaf([2, 3, 4], 12, 'strided')]);
  gradcheck((t) => kiln.indexSelect(t, 1, ints([2, 2, 0], [3])), [leaf([2, 3, 2, 2], 13, 'channelsLast')]);
  gradcheck((t) => kiln.indexSelect(t, 0, ints([1], [])), [leaf([3, 2], 14)]);
  gradcheck((t) => kiln.indexSelect(t, 0, ints([0], [1])), [leaf([], 15)]);
  const x = leaf([3], 16);
  kiln.indexSelect(x, 0, ints([2, 2, 0], [3])).sum().backward();
  assert.deepEqual(grad(x), [1, 0, 2]);
});

test('gather: dims, negative dims, duplicates, an index smaller than self, layouts', () => {
  const idx = ints([0, 2, 2, 1, 1, 1], [2, 3]);
  gradcheck((t) => kiln.gather(t, 1, idx), [leaf([2, 4], 20)]);
  gradcheck((t) => kiln.gather(t, -1, idx), [leaf([3, 5], 21, 'transposed')]);
  gradcheck((t) => kiln.gather(t, 0, ints([1, 0, 1, 1], [2, 2])), [leaf([2, 3], 22, 'strided')]);
  gradcheck((t) => kiln.gather(t, 1, ints([0, 2, 1, 1, 2, 0, 0, 0], [2, 2, 2, 1])), [leaf([2, 3, 2, 2], 23, 'channelsLast')]);
});

test('scatter (reduce null): self masked where overwritten, src gathered; scalar src; src larger than index', () => {
  // Indices distinct along dim: which duplicate wins is unspecified, as in PyTorch.
  const idx = ints([2, 0, 1, 0, 1, 2], [2, 3]);
  gradcheck((s, src) => kiln.scatter(s, 0, ints([1, 0, 2, 0, 2, 1], [2, 3]), src), [leaf([3, 3], 30), leaf([2, 3], 31)]);
  gradcheck((s, src) => kiln.scatter(s, -1, idx, src), [leaf([2, 4], 32, 'transposed'), leaf([3, 4], 33, 'strided')]);
  gradcheck((s) => kiln.scatter(s, 1, idx, 2.5), [leaf([2, 3], 34)]);
  gradcheck((s, src) => kiln.scatter(s, 1, ints([1, 0, 0, 1], [1, 2, 1, 2]), src), [leaf([2, 2, 2, 2], 35, 'channelsLast'), leaf([1, 2, 1, 2], 36)]);
  // Exact: self's gradient is zero where written; src's is the gradient read at the index.
  const s = leaf([2, 3], 37);
  const src = leaf([2, 3], 38);
  const gOut = f64([1, 2, 3, 4, 5, 6], [2, 3]);
  kiln.scatter(s, 1, ints([2, 0], [2, 1]), src).backward(gOut);
  assert.deepEqual(grad(s), [1, 2, 0, 0, 5, 6]);
  assert.deepEqual(grad(src), [3, 0, 0, 4, 0, 0]);
});

test('scatter with reduce sum/add/mean (duplicate indices); other reduces throw at backward', () => {
  const idx = ints([0, 0, 2, 1, 0, 2], [2, 3]);
  for (const reduce of ['sum', 'add', 'mean'] as const) {
    gradcheck((s, src) => kiln.scatter(s, 1, idx, src, reduce), [leaf([2, 3], 40), leaf([2, 4], 41, 'transposed')]);
    gradcheck((s, src) => kiln.scatter(s, 0, ints([1, 1, 1, 1, 1, 0], [2, 3]), src, reduce), [leaf([2, 3], 42, 'strided'), leaf([2, 3], 43)]);
    gradcheck((s) => kiln.scatter(s, 1, idx, 1.5, reduce), [leaf([2, 3], 44)]);
  }
  for (const reduce of ['prod', 'multiply', 'amax', 'amin'] as const) {
    const s = leaf([2, 3], 45);
    const out = kiln.scatter(s, 1, idx, leaf([2, 3], 46), reduce);
    assert.throws(() => out.sum().backward(), new RegExp(`scatter with reduce='${reduce}' is not implemented`));
  }
});

test('scatterAdd and the in-place scatter_/scatterAdd_: duplicates, layouts', () => {
  const idx = ints([0, 0, 2, 1, 0, 2], [2, 3]);
  gradcheck((s, src) => kiln.scatterAdd(s, 1, idx, src), [leaf([2, 3], 50), leaf([2, 3], 51)]);
  gradcheck((s, src) => kiln.scatterAdd(s, -2, ints([1, 1, 0, 1], [2, 2]), src), [leaf([3, 2], 52, 'transposed'), leaf([2, 3], 53, 'strided')]);
  gradcheck((s, src) => kiln.scatterAdd_(kiln.clone(s), 1, idx, src), [leaf([2, 3], 54), leaf([2, 3], 55)]);
  gradcheck((s, src) => kiln.scatter_(kiln.clone(s), 1, ints([2, 0, 1, 2], [2, 2]), src), [leaf([2, 3], 56), leaf([2, 3], 57)]);
  gradcheck((s, src) => kiln.scatter_(kiln.clone(s), 1, idx, src, 'sum'), [leaf([2, 3], 58), leaf([2, 3], 59)]);
  const s = leaf([3], 60);
  const src = leaf([4], 61);
  kiln.scatterAdd(s, 0, ints([1, 1, 1, 0], [4]), src).backward(f64([1, 2, 3], [3]));
  assert.deepEqual(grad(s), [1, 2, 3]);
  assert.deepEqual(grad(src), [2, 2, 2, 1]);
});

test('indexPut/indexPut_: accumulate with duplicates, overwrite, nulls, masks, broadcasting, negative indices', () => {
  const i0 = ints([0, 2, 0, -1], [4]);
  // accumulate: duplicates add up.
  gradcheck((s, v) => kiln.indexPut(s, [i0], v, true), [leaf([3, 2], 70), leaf([4, 2], 71)]);
  gradcheck((s, v) => kiln.indexPut(s, [i0], v, true), [leaf([3, 2], 72, 'transposed'), leaf([2], 73)]);
  gradcheck((s, v) => kiln.indexPut(s, [null, ints([1, 1, 0], [3])], v, true), [leaf([2, 3], 74, 'strided'), leaf([2, 3], 75)]);
  // overwrite (distinct positions): self's gradient is zeroed where written.
  gradcheck((s, v) => kiln.indexPut(s, [ints([2, 0], [2])], v, false), [leaf([3, 2], 76), leaf([2, 2], 77)]);
  gradcheck((s, v) => kiln.indexPut(s, [ints([0, 1], [2]), ints([2, -3], [2])], v, false), [leaf([2, 3], 78, 'transposed'), leaf([2], 79)]);
  // Non-consecutive advanced dims put the broadcast dims first; consecutive ones keep their place.
  gradcheck((s, v) => kiln.indexPut(s, [ints([1, 0], [2]), null, ints([1, 0], [2])], v, false), [leaf([2, 3, 2], 80), leaf([2, 3], 81)]);
  gradcheck((s, v) => kiln.indexPut(s, [null, ints([1, 0], [2, 1]), ints([0, 1, 1], [1, 3])], v, true), [leaf([2, 3, 2], 82), leaf([2, 2, 3], 83)]);
  gradcheck((s, v) => kiln.indexPut(s, [null, ints([2, 0], [2])], v, false), [leaf([2, 3, 2, 2], 84, 'channelsLast'), leaf([2, 2, 2, 2], 85)]);
  // Masks (one mask over two dims; a mask after a slice) and a scalar value.
  gradcheck((s, v) => kiln.indexPut(s, [bools([1, 0, 0, 1, 1, 0], [2, 3])], v, false), [leaf([2, 3, 2], 86), leaf([3, 2], 87)]);
  gradcheck((s, v) => kiln.indexPut(s, [null, bools([0, 1, 1], [3])], v, true), [leaf([2, 3], 88), leaf([1], 89)]);
  gradcheck((s) => kiln.indexPut(s, [ints([1], [1])], 3, false), [leaf([2, 2], 90)]);
  // In place on a non-leaf.
  gradcheck((s, v) => kiln.indexPut_(kiln.clone(s), [i0], v, true), [leaf([3, 2], 91), leaf([4, 2], 92)]);
  gradcheck((s, v) => kiln.indexPut_(kiln.clone(s), [ints([1], [1])], v, false), [leaf([3, 2], 93), leaf([2], 94)]);

  // Exact: with accumulate=false and duplicate indices, every duplicate's value gets the gradient read there.
  const s = leaf([3], 95);
  const v = leaf([3], 96);
  kiln.indexPut(s, [ints([1, 1, 2], [3])], v, false).backward(f64([1, 2, 3], [3]));
  assert.deepEqual(grad(s), [1, 0, 0]);
  assert.deepEqual(grad(v), [2, 2, 3]);
  const s2 = leaf([3], 97);
  const v2 = leaf([3], 98);
  kiln.indexPut(s2, [ints([1, 1, 2], [3])], v2, true).backward(f64([1, 2, 3], [3]));
  assert.deepEqual(grad(s2), [1, 2, 3]);
  assert.deepEqual(grad(v2), [2, 2, 3]);
});

test('maskedFill/maskedFill_: no gradient where masked; broadcasting; a tensor value gets the masked sum', () => {
  const mask = bools([1, 0, 0, 1, 1, 0], [2, 3]);
  gradcheck((s) => kiln.maskedFill(s, mask, -1), [leaf([2, 3], 100, 'transposed')]);
  gradcheck((s) => kiln.maskedFill(s, bools([0, 1, 1], [3]), 0.5), [leaf([2, 3], 101, 'strided')]);
  gradcheck((s) => kiln.maskedFill(s, mask, 2), [leaf([3], 102)]); // self broadcast up to the mask
  gradcheck((s, v) => kiln.maskedFill(s, mask, v), [leaf([2, 3], 103), leaf([], 104)]);
  gradcheck((s, v) => kiln.maskedFill_(kiln.clone(s), bools([1, 0], [2, 1]), v), [leaf([2, 3], 105), leaf([], 106)]);
  gradcheck((s) => kiln.maskedFill(s, bools([1, 0, 0, 1], [1, 1, 2, 2]), 0), [leaf([2, 2, 2, 2], 107, 'channelsLast')]);
  const s = leaf([2, 3], 108);
  const v = leaf([], 109);
  kiln.maskedFill(s, mask, v).backward(f64([1, 2, 3, 4, 5, 6], [2, 3]));
  assert.deepEqual(grad(s), [0, 2, 3, 0, 0, 6]);
  assert.deepEqual(grad(v), [10]);
});

test('cat/stack: gradients split back; negative dims, layouts, legacy empty tensors', () => {
  gradcheck((a, b, c) => kiln.cat([a, b, c], 1), [leaf([2, 1], 110), leaf([2, 3], 111, 'transposed'), leaf([2, 2], 112, 'strided')]);
  gradcheck((a, b) => kiln.cat([a, b], -3), [leaf([1, 2, 2], 113), leaf([2, 2, 2], 114)]);
  gradcheck((a, b) => kiln.cat([a, b], 1), [leaf([2, 2, 2, 2], 115, 'channelsLast'), leaf([2, 1, 2, 2], 116, 'channelsLast')]);
  gradcheck((a, e, b) => kiln.cat([a, e, b], 0), [leaf([2, 2], 117), leaf([0], 118), leaf([1, 2], 119)]);
  for (const dim of [0, 1, 2, -1]) {
    gradcheck((a, b, c) => kiln.stack([a, b, c], dim), [leaf([2, 3], 120 + dim), leaf([2, 3], 130 + dim, 'transposed'), leaf([2, 3], 140 + dim, 'strided')]);
  }
  gradcheck((a, b) => kiln.stack([a, b]), [leaf([], 150), leaf([], 151)]);
});

test('split/splitWithSizes/chunk: multi-output views; outputs without a gradient contribute zeros', () => {
  gradcheck((t) => kiln.split(t, 2, 1), [leaf([3, 5], 160)]);
  gradcheck((t) => kiln.split(t, 2, -2)[1]!, [leaf([5, 3], 161, 'transposed')]);
  gradcheck((t) => kiln.split(t, [1, 0, 3], 0), [leaf([4, 2], 162, 'strided')]);
  gradcheck((t) => { const p = kiln.split(t, [2, 1], -1); return [p[1]!]; }, [leaf([2, 3], 163)]);
  gradcheck((t) => kiln.chunk(t, 2, 1), [leaf([2, 3, 2, 2], 164, 'channelsLast')]);
  gradcheck((t) => [kiln.chunk(t, 3, 0)[2]!], [leaf([5], 165)]);
  const x = leaf([5], 166);
  const parts = kiln.chunk(x, 3);
  parts[1]!.backward(f64([7, 8], [2]));
  assert.deepEqual(grad(x), [0, 0, 7, 8, 0]);
});

test('tril/triu: the gradient masked like the output; diagonals, batches, layouts', () => {
  for (const diagonal of [0, 1, -1, 5, -5]) {
    gradcheck((t) => kiln.tril(t, diagonal), [leaf([3, 4], 170)]);
    gradcheck((t) => kiln.triu(t, diagonal), [leaf([4, 3], 171, 'transposed')]);
  }
  gradcheck((t) => kiln.tril(t, 1), [leaf([2, 3, 3], 172, 'strided')]);
  gradcheck((t) => kiln.triu(t, -1), [leaf([2, 3, 2, 2], 173, 'channelsLast')]);
  const x = leaf([2, 2], 174);
  kiln.triu(x).sum().backward();
  assert.deepEqual(grad(x), [1, 1, 0, 1]);
});

// Ops of the indexing group without a backward formula, and why: none — every op has a floating
// output for floating inputs (the index arguments themselves never receive gradients).
const NON_DIFFERENTIABLE = new Set<string>([]);

test('every floating-output op of the indexing group has a backward formula', () => {
  const names = new Set(Object.values(ix).flatMap((v) => (typeof v === 'object' && v !== null && 'name' in v && 'meta' in v ? [(v as { name: string }).name] : [])));
  const ops = listOps().filter((op) => names.has(op.name));
  assert.ok(ops.length === 18, `found ${ops.length} indexing ops`);
  for (const op of ops) {
    if (NON_DIFFERENTIABLE.has(op.name)) continue;
    assert.ok(op.backward !== undefined, `indexing op '${op.name}' has no backward formula`);
  }
});

test('an index saved for backward and modified in place afterwards is reported', () => {
  const x = leaf([2, 3], 180);
  const idx = ints([0, 2, 1, 1], [2, 2]);
  const y = kiln.gather(x, 1, idx);
  kiln.add_(idx, 0);
  assert.throws(() => y.sum().backward(), /modified by an in-place operation/);
});
