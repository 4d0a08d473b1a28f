/** gather, indexSelect, embedding, scatter, scatterAdd against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { contiguousStrides, channelsLastStrides, preservedStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeTensor, rand, randomInts, randomValues } from './helpers/make.js';
import { refGather, refIndexSelect, refScatter, size } from './helpers/indexing-ref.js';

const LAYOUTS_2D: Layout[] = ['contiguous', 'transposed', 'strided'];
const intT = (vals: number[], shape: number[], dtype: DType = 'int64', layout: Layout = 'contiguous') => makeTensor(vals, shape, dtype, layout);

/** A tensor of `shape` in `layout` with values representable in dtype. */
function input(shape: number[], seed: number, dtype: DType, layout: Layout): kiln.Tensor {
  const n = size(shape);
  const vals = dtype === 'bool' ? randomInts(n, seed, 0, 2) : dtype === 'int32' || dtype === 'int64' || dtype === 'uint8' ? randomInts(n, seed, 0, 50) : randomValues(n, seed);
  return makeTensor(vals, shape, dtype, layout);
}

test('gather matches the reference on every layout, dim and index dtype', () => {
  const cases: { shape: number[]; layout: Layout; dim: number; ishape: number[] }[] = [];
  for (const layout of LAYOUTS_2D) {
    cases.push({ shape: [4, 5], layout, dim: 0, ishape: [3, 5] }, { shape: [4, 5], layout, dim: 1, ishape: [4, 7] }, { shape: [4, 5], layout, dim: -1, ishape: [2, 3] });
  }
  cases.push({ shape: [2, 3, 4, 5], layout: 'channelsLast', dim: 1, ishape: [2, 6, 3, 5] }, { shape: [2, 3, 4, 5], layout: 'channelsLast', dim: 3, ishape: [1, 2, 4, 9] });
  let seed = 1;
  for (const c of cases) {
    for (const idt of ['int64', 'int32'] as const) {
      const x = rand(c.shape, seed++, c.layout);
      const d = c.dim < 0 ? c.dim + c.shape.length : c.dim;
      const idx = randomInts(size(c.ishape), seed++, 0, c.shape[d]!);
      const index = intT(idx, c.ishape, idt, c.ishape.length === 2 ? 'transposed' : 'contiguous');
      const out = kiln.gather(x, c.dim, index);
      assertClose(out, refGather(x.toFlatArray(), c.shape, d, idx, c.ishape), c.ishape);
      assert.deepEqual([...out.strides], contiguousStrides(c.ishape), 'gather output is contiguous');
      assertClose(x.gather(c.dim, index), refGather(x.toFlatArray(), c.shape, d, idx, c.ishape), c.ishape);
    }
  }
});

test('gather works for float16, bfloat16, bool, int32, int64, uint8 and empty / size-1 cases', () => {
  for (const dt of ['float16', 'bfloat16', 'bool', 'int32', 'int64', 'uint8'] as DType[]) {
    const x = input([3, 4], 7, dt, 'transposed');
    const idx = randomInts(6, 8, 0, 3);
    const out = kiln.gather(x, 0, intT(idx, [2, 3]));
    assert.equal(out.dtype, dt);
    assertClose(out, refGather(x.toFlatArray(), [3, 4], 0, idx, [2, 3]), [2, 3], tolFor('float64'));
  }
  const x = rand([3, 1], 2);
  assertClose(kiln.gather(x, 1, intT([0, 0, 0, 0, 0, 0], [3, 2])), refGather(x.toFlatArray(), [3, 1], 1, [0, 0, 0, 0, 0, 0], [3, 2]), [3, 2]);
  assertClose(kiln.gather(x, 0, intT([], [0, 1])), [], [0, 1]);
  const special = kiln.tensor([NaN, Infinity, -Infinity, 0]);
  assertClose(kiln.gather(special, 0, intT([3, 2, 1, 0, 0], [5])), [0, -Infinity, Infinity, NaN, NaN], [5]);
});

test('gather errors: out of range (positive and negative), index dtype, rank and size mismatch', () => {
  const x = rand([3, 4], 1);
  assertThrowsWith(() => kiln.gather(x, 1, intT([0, 4], [1, 2])), 'gather', 'index 4', 'dim 1', 'size 4');
  assertThrowsWith(() => kiln.gather(x, 0, intT([-1], [1, 1], 'int32')), 'gather', 'index -1', 'dim 0', 'size 3');
  assertThrowsWith(() => kiln.gather(x, 0, rand([1, 1], 1)), 'gather', 'index', 'float32');
  assertThrowsWith(() => kiln.gather(x, 0, intT([0], [1])), 'gather', '[1]', '[3, 4]', 'same number of dimensions');
  assertThrowsWith(() => kiln.gather(x, 0, intT([0, 0, 0, 0, 0], [1, 5])), 'gather', '[1, 5]', '[3, 4]', 'dim 1');
  assertThrowsWith(() => kiln.gather(x, 2, intT([0], [1, 1])), 'gather', 'dim 2');
});

test('indexSelect matches the reference on every layout, dim, dtype and index dtype', () => {
  let seed = 10;
  for (const layout of [...LAYOUTS_2D, 'channelsLast'] as Layout[]) {
    const shape = layout === 'channelsLast' ? [2, 3, 4, 5] : [4, 5];
    for (let dim = 0; dim < shape.length; dim++) {
      for (const idt of ['int64', 'int32'] as const) {
        const x = rand(shape, seed++, layout);
        const idx = randomInts(6, seed++, 0, shape[dim]!);
        const { values, shape: os } = refIndexSelect(x.toFlatArray(), shape, dim, idx);
        const out = kiln.indexSelect(x, dim - shape.length, intT(idx, [6], idt, 'strided'));
        assertClose(out, values, os);
        assert.deepEqual([...out.strides], contiguousStrides(os));
      }
    }
  }
  for (const dt of ['float16', 'bfloat16', 'bool', 'int32', 'int64'] as DType[]) {
    const x = input([3, 4], 3, dt, 'strided');
    const { values, shape } = refIndexSelect(x.toFlatArray(), [3, 4], 1, [3, 3, 0]);
    assertClose(x.indexSelect(1, intT([3, 3, 0], [3])), values, shape);
  }
  assertClose(kiln.indexSelect(rand([3, 4], 1), 0, intT([], [0])), [], [0, 4]);
  assertClose(kiln.indexSelect(kiln.tensor([[1, 2], [3, 4]]), 1, intT([1], [])), [2, 4], [2, 1]);
});

test('indexSelect errors: negative and too-large indices, 2-d index, float index', () => {
  const x = rand([3, 4], 1);
  assertThrowsWith(() => kiln.indexSelect(x, 1, intT([1, 4], [2])), 'indexSelect', 'index 4', 'dim 1', 'size 4');
  assertThrowsWith(() => kiln.indexSelect(x, 0, intT([-1], [1])), 'indexSelect', 'index -1', 'dim 0', 'size 3');
  assertThrowsWith(() => kiln.indexSelect(x, 0, intT([0, 1], [1, 2])), 'indexSelect', '[1, 2]');
  assertThrowsWith(() => kiln.indexSelect(x, 0, kiln.tensor([0, 1], { dtype: 'uint8' })), 'indexSelect', 'uint8');
});

test('embedding looks up rows for int32/int64 indices of any shape, any weight layout and dtype', () => {
  let seed = 30;
  for (const layout of LAYOUTS_2D) {
    for (const dt of ['float32', 'float16', 'bfloat16'] as DType[]) {
      for (const idt of ['int64', 'int32'] as const) {
        const w = rand([6, 3], seed++, layout, dt);
        const idx = randomInts(8, seed++, 0, 6);
        const ix = intT(idx, [2, 4], idt, 'transposed');
        const wv = w.toFlatArray();
        const expected = idx.flatMap((r) => wv.slice(r * 3, r * 3 + 3));
        const out = kiln.embedding(ix, w, 0);
        assert.equal(out.dtype, dt);
        assertClose(out, expected, [2, 4, 3], tolFor('float64'));
        assert.deepEqual([...out.strides], [12, 3, 1]);
      }
    }
  }
  const w = rand([4, 2], 3);
  const wv = w.toFlatArray();
  assertClose(kiln.embedding(intT([2], []), w), wv.slice(4, 6), [2]);
  assertClose(kiln.embedding(intT([], [0, 5]), w), [], [0, 5, 2]);
});

test('embedding errors: index out of range, index dtype, weight rank, paddingIdx', () => {
  const w = rand([4, 2], 3);
  assertThrowsWith(() => kiln.embedding(intT([0, 4], [2]), w), 'embedding', 'index 4', 'dim 0', 'size 4');
  assertThrowsWith(() => kiln.embedding(intT([-1], [1], 'int32'), w), 'embedding', 'index -1', 'size 4');
  assertThrowsWith(() => kiln.embedding(rand([2], 1), w), 'embedding', 'input', 'float32');
  assertThrowsWith(() => kiln.embedding(intT([0], [1]), rand([4], 1)), 'embedding', 'weight', '[4]');
  assertThrowsWith(() => kiln.embedding(intT([0], [1]), w, 4), 'embedding', 'paddingIdx 4');
});

test('scatter with a tensor src (no duplicates) and with a scalar, every layout, preserves the layout', () => {
  let seed = 50;
  const shapes: [number[], Layout][] = [...LAYOUTS_2D.map((l) => [[4, 5], l] as [number[], Layout]), [[2, 3, 4, 5], 'channelsLast']];
  for (const [shape, layout] of shapes) {
    for (let dim = 0; dim < shape.length; dim++) {
      const x = rand(shape, seed++, layout);
      const xv = x.toFlatArray();
      // Index: per fixed other coordinates, a permutation prefix along dim (no duplicate targets).
      const ishape = shape.map((s, d) => (d === dim ? Math.max(1, s - 1) : s));
      const idx: number[] = [];
      for (let i = 0; i < size(ishape); i++) idx.push(0);
      const perm = Array.from({ length: shape[dim]! }, (_, i) => (i * 3 + seed) % shape[dim]!);
      const isDistinct = new Set(perm).size === perm.length;
      const p = isDistinct ? perm : Array.from({ length: shape[dim]! }, (_, i) => shape[dim]! - 1 - i);
      const ist = contiguousStrides(ishape);
      for (let i = 0; i < idx.length; i++) idx[i] = p[Math.floor(i / ist[dim]!) % ishape[dim]!]!;
      const srcShape = shape.map((s, d) => (d === dim ? s : s + 1));
      const src = rand(srcShape, seed++, 'transposed');
      const index = intT(idx, ishape, dim % 2 ? 'int32' : 'int64');
      const out = kiln.scatter(x, dim, index, src);
      assertClose(out, refScatter(xv, shape, dim, idx, ishape, src.toFlatArray(), srcShape, null), shape);
      assert.deepEqual([...out.strides], preservedStrides(shape, shape, x.strides), `${layout}: scatter keeps the layout`);
      if (layout === 'channelsLast') assert.deepEqual([...out.strides], channelsLastStrides(shape));
      const s2 = x.scatter(dim, index, 1.5);
      assertClose(s2, refScatter(xv, shape, dim, idx, ishape, 1.5, [], null), shape);
      assert.deepEqual(x.toFlatArray(), xv, 'out-of-place scatter leaves self alone');
    }
  }
});

test('scatter reduce sum/prod/mean/amax/amin (duplicates combine with self)', () => {
  const shape = [3, 4];
  const idx = [0, 2, 0, 0, 1, 2, 2, 3, 0, 0, 0, 0];
  const ishape = [3, 4];
  for (const layout of LAYOUTS_2D) {
    for (const reduce of ['sum', 'prod', 'mean', 'amax', 'amin'] as const) {
      const x = rand(shape, 5, layout);
      const src = rand([3, 5], 6, 'strided');
      const out = kiln.scatter(x, 1, intT(idx, ishape), src, reduce);
      assertClose(out, refScatter(x.toFlatArray(), shape, 1, idx, ishape, src.toFlatArray(), [3, 5], reduce), shape);
    }
  }
  assertClose(kiln.scatter(rand(shape, 5), 1, intT(idx, ishape), 2, 'multiply'), refScatter(rand(shape, 5).toFlatArray(), shape, 1, idx, ishape, 2, [], 'prod'), shape);
  assertClose(kiln.scatter(rand(shape, 5), 1, intT(idx, ishape), 2, 'add'), refScatter(rand(shape, 5).toFlatArray(), shape, 1, idx, ishape, 2, [], 'sum'), shape);
  // Integer mean floors; amax propagates NaN.
  const xi = makeTensor([1, 2, 3, 4], [4], 'int64');
  const si = makeTensor([4, 4, 7, 0], [4], 'int64');
  assertClose(kiln.scatter(xi, 0, intT([0, 0, 1, 3], [4]), si, 'mean'), refScatter([1, 2, 3, 4], [4], 0, [0, 0, 1, 3], [4], [4, 4, 7, 0], [4], 'mean', true), [4]);
  assertClose(kiln.scatter(kiln.tensor([1, NaN, 3]), 0, intT([0, 2], [2]), kiln.tensor([NaN, 5]), 'amax'), [NaN, NaN, 5], [3]);
});

test('scatterAdd sums duplicates; scatter_ / scatterAdd_ mutate self in place', () => {
  let seed = 70;
  for (const [shape, layout] of [[[4, 5], 'contiguous'], [[4, 5], 'transposed'], [[4, 5], 'strided'], [[2, 3, 4, 5], 'channelsLast']] as [number[], Layout][]) {
    for (let dim = 0; dim < shape.length; dim++) {
      const ishape = shape.map((s, d) => (d === dim ? s + 3 : s));
      const idx = randomInts(size(ishape), seed++, 0, shape[dim]!);
      for (const dt of ['float32', 'float16', 'bfloat16', 'int64', 'int32'] as DType[]) {
        const x = input(shape, seed++, dt, layout);
        const src = input(ishape, seed++, dt, 'contiguous');
        const expected = refScatter(x.toFlatArray(), shape, dim, idx, ishape, src.toFlatArray(), ishape, 'sum');
        const tol = dt === 'float16' ? { atol: 1e-2, rtol: 4e-3 } : dt === 'bfloat16' ? { atol: 8e-2, rtol: 2e-2 } : {};
        const out = kiln.scatterAdd(x, dim, intT(idx, ishape, 'int32'), src);
        assertClose(out, expected, shape, tol);
        assert.deepEqual([...out.strides], preservedStrides(shape, shape, x.strides));
        const storage = x.storage;
        const strides = [...x.strides];
        const r = x.scatterAdd_(dim, intT(idx, ishape), src);
        assert.equal(r, x);
        assert.equal(x.storage, storage);
        assert.deepEqual([...x.strides], strides);
        assertClose(x, expected, shape, tol);
      }
    }
  }
  const x = rand([3, 4], 1, 'strided');
  const xv = x.toFlatArray();
  const r = x.scatter_(0, intT([2, 0, 1, 0], [1, 4]), 9);
  assert.equal(r, x);
  assertClose(x, refScatter(xv, [3, 4], 0, [2, 0, 1, 0], [1, 4], 9, [], null), [3, 4]);
  // Bool scatter writes 0/1.
  const b = makeTensor([0, 0, 0, 0], [4], 'bool');
  assert.deepEqual(kiln.scatterAdd(b, 0, intT([1, 1, 3], [3]), makeTensor([1, 1, 1], [3], 'bool')).toArray(), [false, true, false, true]);
});

test('scatter errors: out of range (positive and negative), index dtype, dtype mismatch, bad reduce; no partial write', () => {
  const x = rand([3, 4], 1);
  const xv = x.toFlatArray();
  assertThrowsWith(() => kiln.scatter(x, 1, intT([0, 4], [1, 2]), 1), 'scatter', 'index 4', 'dim 1', 'size 4');
  assertThrowsWith(() => kiln.scatterAdd(x, 0, intT([-2], [1, 1]), rand([1, 1], 2)), 'scatterAdd', 'index -2', 'dim 0', 'size 3');
  assertThrowsWith(() => x.scatter_(0, intT([0, 1, 3, 0], [1, 4]), rand([1, 4], 2)), 'scatter_', 'index 3', 'dim 0', 'size 3');
  assert.deepEqual(x.toFlatArray(), xv, 'a failed in-place scatter writes nothing');
  assertThrowsWith(() => kiln.scatter(x, 0, rand([1, 4], 1), 1), 'scatter', 'index', 'float32');
  assertThrowsWith(() => kiln.scatterAdd(x, 0, intT([0], [1, 1]), rand([1, 1], 1, 'contiguous', 'float16')), 'scatterAdd', 'float16', 'float32');
  assertThrowsWith(() => kiln.scatter(x, 0, intT([0], [1, 1]), 1, 'max' as 'amax'), 'scatter', "'max'");
  assertThrowsWith(() => kiln.scatter(x, 0, intT([0, 0, 0, 0, 0], [1, 5]), 1), 'scatter', '[1, 5]', '[3, 4]');
  assertThrowsWith(() => kiln.scatterAdd(x, 0, intT([0, 0, 0, 0], [1, 4]), rand([1, 3], 1)), 'scatterAdd', 'src', '[1, 3]');
});
