/** indexPut / indexPut_ and maskedFill / maskedFill_ against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { castValue } from '../src/tensor/typed.js';
import { preservedStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, rand, randomInts } from './helpers/make.js';
import { refIndexPut, refMaskedFill, size } from './helpers/indexing-ref.js';

const intT = (vals: number[], shape: number[], dtype: DType = 'int64', layout: Layout = 'contiguous') => makeTensor(vals, shape, dtype, layout);
const boolT = (vals: number[], shape: number[]) => makeTensor(vals, shape, 'bool');
type RefIdx = { values: number[]; shape: number[] } | null;

/** Nonzero coordinates of a mask, one list per mask dim (row-major order), as reference entries. */
function maskCoords(m: number[], ms: number[]): RefIdx[] {
  const out: number[][] = ms.map(() => []);
  m.forEach((v, i) => {
    if (!v) return;
    let rem = i;
    for (let d = ms.length - 1; d >= 0; d--) {
      out[d]!.push(rem % ms[d]!);
      rem = Math.floor(rem / ms[d]!);
    }
  });
  return out.map((c) => ({ values: c, shape: [c.length] }));
}

const LAYOUTS_3D: Layout[] = ['contiguous', 'transposed', 'strided'];

test('indexPut with integer indices (adjacent, non-adjacent, leading/trailing slices, broadcast, negative) matches the reference', () => {
  const xs = [4, 5, 6];
  // [kiln index list, reference list, values shape]; all index combinations hit distinct targets.
  const cases: [(kiln.Tensor | null)[], RefIdx[], number[]][] = [
    [[intT([2, 0, 3], [3])], [{ values: [2, 0, 3], shape: [3] }], [3, 5, 6]],
    [[intT([2, 0, 3], [3], 'int32')], [{ values: [2, 0, 3], shape: [3] }], [6]],
    [[null, intT([-1, 0, -4], [3])], [null, { values: [-1, 0, -4], shape: [3] }], [4, 3, 6]],
    [[intT([1, -1], [2, 1]), intT([0, 2, 4], [3], 'int32')], [{ values: [1, -1], shape: [2, 1] }, { values: [0, 2, 4], shape: [3] }], [2, 3, 6]],
    [[intT([1, 3], [2]), null, intT([5, -6], [2])], [{ values: [1, 3], shape: [2] }, null, { values: [5, -6], shape: [2] }], [2, 5]],
    [[intT([0, 3, 2], [3, 1]), null, intT([1, 4], [1, 2])], [{ values: [0, 3, 2], shape: [3, 1] }, null, { values: [1, 4], shape: [1, 2] }], [1, 5]],
    [[null, null, intT([5, 1], [2])], [null, null, { values: [5, 1], shape: [2] }], [4, 5, 2]],
    [[intT([3, 1], [2]), null], [{ values: [3, 1], shape: [2] }], [2, 5, 6]],
    [[null, intT([4, 0], [2]), intT([2, 3], [2])], [null, { values: [4, 0], shape: [2] }, { values: [2, 3], shape: [2] }], [4, 2]],
    [[], [], [4, 5, 6]],
  ];
  let seed = 100;
  for (const layout of LAYOUTS_3D) {
    for (const [indices, ref, vs] of cases) {
      const x = rand(xs, seed++, layout);
      const xv = x.toFlatArray();
      const v = rand(vs, seed++, 'transposed');
      const expected = refIndexPut(xv, xs, ref, v.toFlatArray(), vs, false);
      const out = kiln.indexPut(x, indices, v);
      assertClose(out, expected, xs);
      assert.deepEqual([...out.strides], preservedStrides(xs, xs, x.strides), 'indexPut keeps the layout');
      assert.deepEqual(x.toFlatArray(), xv, 'out-of-place indexPut leaves self alone');
      const r = x.indexPut_(indices, v);
      assert.equal(r, x);
      assertClose(x, expected, xs);
    }
  }
});

test('indexPut accumulate sums duplicate indices; scalar values; channels_last; dtypes', () => {
  const xs = [2, 3, 4, 5];
  const x = rand(xs, 3, 'channelsLast');
  const idx = [1, 0, 1, 1, 0, 1];
  const v = rand([6, 4, 5], 4);
  const expected = refIndexPut(x.toFlatArray(), xs, [null, { values: idx, shape: [6] }], v.toFlatArray(), [6, 4, 5], true);
  const out = kiln.indexPut(x, [null, intT(idx, [6])], v, true);
  assertClose(out, expected, xs);
  assert.deepEqual([...out.strides], [60, 1, 15, 3]);
  x.indexPut_([null, intT(idx, [6])], v, true);
  assertClose(x, expected, xs);
  for (const dt of ['float16', 'bfloat16', 'int32', 'int64', 'uint8'] as DType[]) {
    const y = makeTensor(randomInts(12, 5, 0, 9), [3, 4], dt, 'transposed');
    const vals = makeTensor([1, 2, 3, 4, 5], [5], dt);
    const id = [2, 0, 2, -1, 1];
    const got = kiln.indexPut(y, [intT([1], [1]), intT(id, [5], 'int32')], vals, true);
    assert.equal(got.dtype, dt);
    // Row 1 only: the 2-d index [1] x id broadcasts to 5 targets in row 1.
    const exp1 = refIndexPut(y.toFlatArray(), [3, 4], [{ values: [1], shape: [1] }, { values: id, shape: [5] }], [1, 2, 3, 4, 5], [5], true);
    assertClose(got, exp1, [3, 4]);
  }
  const s = kiln.indexPut(rand([3, 4], 1, 'strided'), [intT([0, 2], [2])], 7.5);
  const sv = rand([3, 4], 1, 'strided').toFlatArray();
  assertClose(s, refIndexPut(sv, [3, 4], [{ values: [0, 2], shape: [2] }], 7.5, [], false), [3, 4]);
  // bool self: accumulate is a logical or.
  const b = boolT([0, 1, 0, 0], [4]);
  assert.deepEqual(kiln.indexPut(b, [intT([0, 0, 2], [3])], boolT([1, 0, 0], [3]), true).toArray(), [true, true, false, false]);
  assert.deepEqual(kiln.indexPut(b, [intT([3], [1])], true).toArray(), [false, true, false, true]);
});

test('indexPut with bool masks (full, partial, after a slice, mixed with an int index)', () => {
  const xs = [4, 5, 6];
  let seed = 200;
  for (const layout of LAYOUTS_3D) {
    const x = rand(xs, seed++, layout);
    const xv = x.toFlatArray();
    const m2 = randomInts(20, seed++, 0, 2);
    const c2 = maskCoords(m2, [4, 5]);
    const nnz = m2.filter((v) => v).length;
    const v2 = rand([nnz, 6], seed++);
    assertClose(kiln.indexPut(x, [boolT(m2, [4, 5])], v2), refIndexPut(xv, xs, c2, v2.toFlatArray(), [nnz, 6], false), xs);
    const m3 = randomInts(120, seed++, 0, 2);
    assertClose(kiln.indexPut(x, [boolT(m3, xs)], -3), refIndexPut(xv, xs, maskCoords(m3, xs), -3, [], false), xs);
    const m1 = [1, 0, 1, 1, 0];
    const c1 = maskCoords(m1, [5]);
    const v1 = rand([6], seed++);
    assertClose(kiln.indexPut(x, [null, boolT(m1, [5])], v1), refIndexPut(xv, xs, [null, ...c1], v1.toFlatArray(), [6], false), xs);
    // A mask, a slice, an int index: non-adjacent, so [nnz] comes first, then the sliced dim.
    const mk = [0, 1, 1, 0];
    const ck = maskCoords(mk, [4]);
    const vk = rand([2, 5], seed++);
    assertClose(
      kiln.indexPut(x, [boolT(mk, [4]), null, intT([5, 0], [2])], vk),
      refIndexPut(xv, xs, [ck[0]!, null, { values: [5, 0], shape: [2] }], vk.toFlatArray(), [2, 5], false),
      xs,
    );
    const y = rand(xs, seed++, layout);
    const yv = y.toFlatArray();
    y.indexPut_([boolT(m2, [4, 5])], v2, true);
    assertClose(y, refIndexPut(yv, xs, c2, v2.toFlatArray(), [nnz, 6], true), xs);
  }
});

test('indexPut errors: out of range, index dtype, values shape/dtype, too many indices, mask shape, unbroadcastable indices', () => {
  const x = rand([3, 4], 1);
  const xv = x.toFlatArray();
  assertThrowsWith(() => kiln.indexPut(x, [intT([0, 3], [2])], 1), 'indexPut', 'index 3', 'dim 0', 'size 3');
  assertThrowsWith(() => kiln.indexPut(x, [null, intT([-5], [1])], 1), 'indexPut', 'index -5', 'dim 1', 'size 4');
  assertThrowsWith(() => x.indexPut_([intT([0, 1], [2]), intT([1, 9], [2])], 1), 'indexPut_', 'index 9', 'dim 1', 'size 4');
  assert.deepEqual(x.toFlatArray(), xv, 'a failed indexPut_ writes nothing');
  assertThrowsWith(() => kiln.indexPut(x, [rand([2], 1)], 1), 'indexPut', 'float32', 'indices[0]');
  assertThrowsWith(() => kiln.indexPut(x, [intT([0, 1], [2])], rand([3, 4], 2)), 'indexPut', '[3, 4]', '[2, 4]');
  assertThrowsWith(() => kiln.indexPut(x, [intT([0, 1], [2])], rand([4], 2, 'contiguous', 'float16')), 'indexPut', 'float16', 'float32');
  assertThrowsWith(() => kiln.indexPut(x, [null, null, intT([0], [1])], 1), 'indexPut', 'too many indices', '2');
  assertThrowsWith(() => kiln.indexPut(x, [intT([0], [1]), null, null], 1), 'indexPut', 'too many indices', '2');
  assertThrowsWith(() => kiln.indexPut(x, [boolT([1, 0, 1], [3, 1])], 1), 'indexPut', 'mask', '[3, 1]', '[3, 4]');
  assertThrowsWith(() => kiln.indexPut(x, [intT([0, 1], [2]), intT([0, 1, 2], [3])], 1), 'indexPut', '[2]', '[3]');
  assertThrowsWith(() => kiln.indexPut(x, [boolT([1, 0, 1], [3])], rand([3, 4], 1)), 'indexPut', '[3, 4]', '[2, 4]');
});

test('maskedFill broadcasts the mask (and self), keeps the layout, takes scalar or 0-d tensor values', () => {
  const cases: [number[], Layout, number[] | 'expanded'][] = [
    [[4, 5], 'contiguous', [4, 5]],
    [[4, 5], 'transposed', [5]],
    [[4, 5], 'strided', [4, 1]],
    [[2, 3, 4, 5], 'channelsLast', [3, 1, 5]],
    [[2, 3, 4, 5], 'channelsLast', 'expanded'],
    [[5], 'contiguous', [3, 1, 5]],
  ];
  let seed = 300;
  for (const [xs, layout, msSpec] of cases) {
    const x = rand(xs, seed++, layout);
    const xv = x.toFlatArray();
    const ms = msSpec === 'expanded' ? xs : msSpec;
    const mv = msSpec === 'expanded' ? [] : randomInts(size(ms), seed++, 0, 2);
    let mask: kiln.Tensor;
    let mref: number[];
    if (msSpec === 'expanded') {
      mask = makeExpanded([1, 0, 0, 1, 1], [5], xs, 'bool');
      mref = Array.from({ length: size(xs) }, (_, i) => [1, 0, 0, 1, 1][i % 5]!);
    } else {
      mask = boolT(mv, ms);
      mref = mv;
    }
    for (const value of [2.5, -Infinity, NaN]) {
      const { values, shape } = refMaskedFill(xv, xs, mref, ms, value);
      const out = kiln.maskedFill(x, mask, value);
      assertClose(out, values, shape);
      if (shape.length === xs.length) assert.deepEqual([...out.strides], preservedStrides(xs, xs, x.strides), 'maskedFill keeps the layout');
    }
    const { values, shape } = refMaskedFill(xv, xs, mref, ms, 7);
    assertClose(x.maskedFill(mask, kiln.tensor(7)), values, shape);
    if (shape.length === xs.length && shape.every((s, i) => s === xs[i])) {
      const r = x.maskedFill_(mask, 7);
      assert.equal(r, x);
      assertClose(x, values, shape);
    }
  }
});

test('maskedFill on float16, bfloat16, int and bool tensors casts the value to the dtype', () => {
  const m = boolT([1, 0, 1, 0, 0, 1], [2, 3]);
  for (const dt of ['float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    const x = makeTensor([0, 1, 2, 3, 0, 5], [2, 3], dt, 'transposed');
    const xv = x.toFlatArray();
    for (const value of [0.1, 2.7, -1]) {
      const out = kiln.maskedFill(x, m, value);
      assert.equal(out.dtype, dt);
      const cv = castValue(value, dt);
      assertClose(out, refMaskedFill(xv, [2, 3], [1, 0, 1, 0, 0, 1], [2, 3], cv).values, [2, 3], { atol: 0, rtol: 0 });
    }
  }
  assert.deepEqual(kiln.maskedFill(kiln.tensor([1, 2, 3], { dtype: 'int32' }), boolT([0, 1, 0], [3]), true).toArray(), [1, 1, 3]);
  assertClose(kiln.maskedFill(rand([0, 3], 1), boolT([1, 0, 1], [3]), 1), [], [0, 3]);
});

test('maskedFill errors: non-bool mask, unbroadcastable mask, value with dims, in-place growth', () => {
  const x = rand([3, 4], 1);
  assertThrowsWith(() => kiln.maskedFill(x, rand([3, 4], 1), 0), 'maskedFill', 'float32', 'bool');
  assertThrowsWith(() => kiln.maskedFill(x, makeTensor([1, 0, 1, 0], [4], 'uint8'), 0), 'maskedFill', 'uint8');
  assertThrowsWith(() => kiln.maskedFill(x, boolT([1, 0, 1], [3]), 0), 'maskedFill', '[3]', '[3, 4]', 'broadcast');
  assertThrowsWith(() => kiln.maskedFill(x, boolT([1, 0, 1, 1], [4]), kiln.tensor([1, 2])), 'maskedFill', 'value', '1 dimension');
  assertThrowsWith(() => x.maskedFill_(boolT([1, 0, 1, 1, 0, 0, 0, 0], [2, 1, 4]), 0), 'maskedFill_', '[2, 1, 4]', '[3, 4]');
});
