import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, randomInts, randomValues } from './helpers/make.js';
import { mapRef, stored } from './helpers/pointwise-ref.js';

const clampRef = (lo: number, hi: number) => (x: number): number => {
  if (Number.isNaN(x) || Number.isNaN(lo) || Number.isNaN(hi)) return NaN;
  const a = x < lo ? lo : x;
  return a > hi ? hi : a;
};

const SHAPE = [2, 3, 2, 3];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'strided', 'channelsLast'];

test('clamp with scalar bounds on every layout and half dtypes vs reference', () => {
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    for (const layout of LAYOUTS) {
      const vals = randomValues(36, 3, -2, 2);
      const x = makeTensor(vals, SHAPE, dtype, layout);
      const xs = stored(vals, dtype);
      const both = kiln.clamp(x, -0.5, 0.75);
      assert.equal(both.dtype, dtype);
      assertClose(both, xs.map(clampRef(-0.5, 0.75)), SHAPE, tolFor(dtype));
      if (layout === 'channelsLast') assert.ok(both.isContiguous('channelsLast'));
      if (layout === 'transposed') assert.deepEqual([...both.strides], [...x.strides]);
      assertClose(x.clamp(0.25), xs.map(clampRef(0.25, Infinity)), SHAPE, tolFor(dtype));
      assertClose(x.clamp(null, 0.25), xs.map(clampRef(-Infinity, 0.25)), SHAPE, tolFor(dtype));
      assertClose(kiln.clamp(x, undefined, -1), xs.map(clampRef(-Infinity, -1)), SHAPE, tolFor(dtype));
    }
  }
  // min > max: every element becomes max (PyTorch's documented behaviour).
  assert.deepEqual(kiln.clamp(makeTensor([-5, 0, 5], [3]), 2, 1).toArray(), [1, 1, 1]);
  // Expanded input.
  assertClose(kiln.clamp(makeExpanded([-3, 0.5, 3], [3], [2, 3]), -1, 1), [-1, 0.5, 1, -1, 0.5, 1], [2, 3]);
});

test('clamp with tensor bounds (broadcast, mixed with scalars) vs reference', () => {
  const xv = randomValues(24, 5, -3, 3);
  const lov = randomValues(4, 6, -2, 0);
  const hiv = randomValues(3, 7, 0, 2);
  for (const layout of ['contiguous', 'transposed', 'strided'] as Layout[]) {
    const x = makeTensor(xv, [2, 3, 4], 'float32', layout);
    const lo = makeTensor(lov, [4]);
    const hi = makeTensor(hiv, [3, 1], 'float32', 'strided');
    const exp = mapRef(
      [{ values: stored(xv, 'float32'), shape: [2, 3, 4] }, { values: stored(lov, 'float32'), shape: [4] }, { values: stored(hiv, 'float32'), shape: [3, 1] }],
      (v, l, h) => clampRef(l, h)(v),
    );
    assertClose(kiln.clamp(x, lo, hi), exp.values, exp.shape);
    assertClose(x.clamp(lo), mapRef([{ values: stored(xv, 'float32'), shape: [2, 3, 4] }, { values: stored(lov, 'float32'), shape: [4] }], (v, l) => clampRef(l, Infinity)(v)).values, [2, 3, 4]);
    // A tensor bound with a scalar bound on the other side.
    assertClose(kiln.clamp(x, lo, 0.5), mapRef([{ values: stored(xv, 'float32'), shape: [2, 3, 4] }, { values: stored(lov, 'float32'), shape: [4] }], (v, l) => clampRef(l, 0.5)(v)).values, [2, 3, 4]);
    assertClose(kiln.clamp(x, -0.5, hi), mapRef([{ values: stored(xv, 'float32'), shape: [2, 3, 4] }, { values: stored(hiv, 'float32'), shape: [3, 1] }], (v, h) => clampRef(-0.5, h)(v)).values, [2, 3, 4]);
  }
  // Bounds can broadcast the output larger than self.
  const grown = kiln.clamp(makeTensor([0, 5], [2]), makeTensor([1, 2, 3], [3, 1]));
  assert.deepEqual(grown.toArray(), [[1, 5], [2, 5], [3, 5]]);
});

test('clamp dtypes and NaN: int tensors stay int with int bounds, float bounds promote, NaN stays NaN', () => {
  const iv = randomInts(12, 9, -10, 10);
  for (const dtype of ['int32', 'int64', 'uint8'] as DType[]) {
    const vals = stored(iv, dtype);
    const x = makeTensor(vals, [3, 4], dtype, 'transposed');
    const out = kiln.clamp(x, -3, 5);
    assert.equal(out.dtype, dtype);
    assert.deepEqual(out.toFlatArray(), vals.map(clampRef(-3, 5)));
    const f = kiln.clamp(x, null, 2.5);
    assert.equal(f.dtype, 'float32');
    assert.deepEqual(f.toFlatArray(), vals.map(clampRef(-Infinity, 2.5)));
  }
  assertClose(kiln.clamp(makeTensor([NaN, 1, -Infinity, Infinity], [4]), -1, 0.5), [NaN, 0.5, -1, 0.5], [4]);
  assertClose(kiln.clamp(makeTensor([NaN, 3], [2], 'float16'), makeTensor([0, 0], [2], 'float16'), makeTensor([1, 1], [2], 'float16')), [NaN, 1], [2]);
  assertClose(kiln.clamp(makeTensor([0, 3], [2]), NaN), [NaN, NaN], [2]);
});

test('clamp errors: no bounds, bool tensors, bad bound types, broadcast mismatch', () => {
  const x = makeTensor([1, 2, 3], [3]);
  assertThrowsWith(() => kiln.clamp(x), 'clamp', "'min' or 'max'", '[3]');
  assertThrowsWith(() => x.clamp(null, null), 'clamp', "'min' or 'max'");
  assertThrowsWith(() => x.clamp_(), 'clamp_', "'min' or 'max'");
  // A bool computation has no kernel in torch either; bool self with number bounds promotes (below).
  assertThrowsWith(() => kiln.clamp(makeTensor([1, 0], [2], 'bool'), false, true), 'clamp', 'bool');
  assertThrowsWith(() => kiln.clamp(makeTensor([1, 0], [2], 'bool'), kiln.tensor(false)), 'clamp', 'bool');
  assertThrowsWith(() => kiln.clamp(x, 'a' as never), 'clamp', "'min'", 'string');
  assertThrowsWith(() => kiln.clamp(x, makeTensor([0, 0], [2])), 'clamp', '[3]', '[2]', 'broadcast');
});

test('clamp of a bool tensor with integer bounds promotes to int64, as torch (fuzz case 1196)', () => {
  // torch 2.11: torch.clamp(torch.tensor([[0, 0, 1, 0, 0]], dtype=torch.bool), -1, 1) is int64 [[0, 0, 1, 0, 0]].
  const b = makeTensor([0, 0, 1, 0, 0], [1, 5], 'bool', 'transposed');
  const eager = kiln.clamp(b, -1, 1);
  assert.equal(eager.dtype, 'int64');
  assert.deepEqual(eager.toFlatArray(), [0, 0, 1, 0, 0]);
  const compiled = kiln.compile((t: Tensor) => t.clamp(-1, 1))(b);
  assert.equal(compiled.dtype, 'int64');
  assert.deepEqual(compiled.toFlatArray(), [0, 0, 1, 0, 0]);
  // Bounds that bite: clamp(bool, 2, 3) is 2 everywhere; a float bound gives float32 (torch's promotion).
  assert.deepEqual(kiln.clamp(b, 2, 3).toFlatArray(), [2, 2, 2, 2, 2]);
  assert.equal(kiln.clamp(b, 0.5).dtype, 'float32');
  assert.deepEqual(kiln.clamp(b, 0.5).toFlatArray(), [0.5, 0.5, 1, 0.5, 0.5]);
  // In place, int64 cannot be written into bool (torch: result type Long can't be cast to Bool).
  assertThrowsWith(() => makeTensor([0, 1], [2], 'bool').clamp_(-1, 1), 'clamp_', 'bool');
});

test('clamp_ in place: scalar and tensor bounds, strided self, cast and growth checks', () => {
  for (const dtype of ['float32', 'float16'] as DType[]) {
    const vals = randomValues(12, 11, -2, 2);
    const x = makeTensor(vals, [3, 4], dtype, 'strided');
    const st = x.storage;
    assert.equal(x.clamp_(-1, 1), x);
    assert.equal(x.storage, st);
    assertClose(x, stored(vals, dtype).map(clampRef(-1, 1)), [3, 4], tolFor(dtype));
    const lo = randomValues(4, 12, -0.5, 0.5);
    const y = makeTensor(vals, [3, 4], dtype, 'transposed');
    assert.equal(kiln.clamp_(y, makeTensor(lo, [4], dtype)), y);
    const exp = mapRef([{ values: stored(vals, dtype), shape: [3, 4] }, { values: stored(lo, dtype), shape: [4] }], (v, l) => clampRef(l, Infinity)(v));
    assertClose(y, exp.values, [3, 4], tolFor(dtype));
    assert.equal(y.dtype, dtype);
  }
  const i = makeTensor([-5, 0, 5], [3], 'int32');
  i.clamp_(-1, 2);
  assert.deepEqual(i.toArray(), [-1, 0, 2]);
  assertThrowsWith(() => i.clamp_(0.5), 'clamp_', "can't be cast", 'int32');
  assertThrowsWith(() => makeTensor([0, 5], [2]).clamp_(makeTensor([1, 2, 3], [3, 1])), 'clamp_', '[2]', '[3, 2]');
});

test('where: broadcasting condition/input/other on every layout vs reference', () => {
  for (const [k, layout] of LAYOUTS.entries()) {
    const cv = randomInts(9, 20 + k, 0, 2);
    const xv = randomValues(36, 30 + k);
    const yv = randomValues(3, 40 + k);
    const cond = makeExpanded(cv, [3, 1, 3], SHAPE, 'bool');
    const x = makeTensor(xv, SHAPE, 'float32', layout);
    const y = makeTensor(yv, [3]);
    const exp = mapRef([{ values: cv, shape: [3, 1, 3] }, { values: stored(xv, 'float32'), shape: SHAPE }, { values: stored(yv, 'float32'), shape: [3] }], (c, a, b) => (c ? a : b));
    const out = kiln.where(cond, x, y);
    assert.equal(out.dtype, 'float32');
    assertClose(out, exp.values, exp.shape);
    if (layout === 'channelsLast') assert.ok(out.isContiguous('channelsLast'), 'condition broadcast, input channels_last -> channels_last');
    // Scalar branches.
    const s = kiln.where(cond, x, -1.5);
    assertClose(s, mapRef([{ values: cv, shape: [3, 1, 3] }, { values: stored(xv, 'float32'), shape: SHAPE }], (c, a) => (c ? a : -1.5)).values, SHAPE);
  }
  const c = makeTensor([1, 0, 1], [3], 'bool');
  // The condition alone can set the output shape.
  assert.deepEqual(kiln.where(makeTensor([1, 0, 1, 0], [2, 2], 'bool'), 1.5, 0).toArray(), [[1.5, 0], [1.5, 0]]);
  assert.deepEqual(kiln.where(c, makeTensor([NaN, 1, Infinity], [3]), 0).toFlatArray(), [NaN, 0, Infinity]);
  // Empty.
  assert.deepEqual([...kiln.where(makeTensor([], [0, 3], 'bool'), 1, 0).shape], [0, 3]);
});

test('where: type promotion of input and other', () => {
  const c = makeTensor([1, 0, 1], [3], 'bool');
  const i = makeTensor([1, 2, 3], [3], 'int32');
  const r1 = kiln.where(c, i, 0.5);
  assert.equal(r1.dtype, 'float32');
  assert.deepEqual(r1.toArray(), [1, 0.5, 3]);
  const r2 = kiln.where(c, i, 7);
  assert.equal(r2.dtype, 'int32');
  assert.deepEqual(r2.toArray(), [1, 7, 3]);
  assert.equal(kiln.where(c, 1, 0).dtype, 'int64');
  assert.equal(kiln.where(c, 1.5, 0).dtype, 'float32');
  assert.equal(kiln.where(c, true, false).dtype, 'bool');
  assert.deepEqual(kiln.where(c, true, false).toArray(), [true, false, true]);
  const h = makeTensor([1, 2, 3], [3], 'float16');
  assert.equal(kiln.where(c, h, 0.1).dtype, 'float16');
  assertClose(kiln.where(c, h, 0.1), [1, 0.1, 3], [3], tolFor('float16'));
  assert.equal(kiln.where(c, h, makeTensor([0, 0, 0], [3], 'bfloat16')).dtype, 'float32');
  assert.equal(kiln.where(c, makeTensor([1, 2, 3], [3], 'uint8'), i).dtype, 'int32');
  assert.deepEqual(kiln.where(c, makeTensor([250, 2, 3], [3], 'uint8'), makeTensor([-1, -2, -3], [3], 'int64')).toArray(), [250, -2, 3]);
});

test('where errors: non-bool condition and broadcast mismatch', () => {
  const x = makeTensor([1, 2, 3], [3]);
  assertThrowsWith(() => kiln.where(makeTensor([1, 0, 1], [3], 'uint8'), x, 0), 'where', "'condition'", 'bool', 'uint8');
  assertThrowsWith(() => kiln.where(makeTensor([1, 0, 1], [3]), x, 0), 'where', "'condition'", 'float32');
  assertThrowsWith(() => kiln.where(makeTensor([1, 0], [2], 'bool'), x, 0), 'where', '[2]', '[3]', 'broadcast');
  assertThrowsWith(() => kiln.where(makeTensor([1, 0, 1], [3], 'bool'), x, makeTensor([1, 2], [2])), 'where', '[3]', '[2]');
});

test('lerp with scalar and tensor weights vs reference, and its dtype checks', () => {
  const sv = randomValues(36, 61);
  const ev = randomValues(36, 62);
  const wv = randomValues(3, 63, -0.5, 1.5);
  const lerpRef = (s: number, e: number, w: number) => s + w * (e - s);
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    for (const layout of LAYOUTS) {
      const s = makeTensor(sv, SHAPE, dtype, layout);
      const e = makeTensor(ev, SHAPE, dtype);
      const ss = stored(sv, dtype);
      const es = stored(ev, dtype);
      const out = kiln.lerp(s, e, 0.3);
      assert.equal(out.dtype, dtype);
      assertClose(out, ss.map((v, k) => lerpRef(v, es[k]!, 0.3)), SHAPE, tolFor(dtype));
      if (layout === 'channelsLast') assert.ok(out.isContiguous('channelsLast'));
      assertClose(s.lerp(e, 0.8), ss.map((v, k) => lerpRef(v, es[k]!, 0.8)), SHAPE, tolFor(dtype));
      const w = makeTensor(wv, [3], dtype);
      const exp = mapRef([{ values: ss, shape: SHAPE }, { values: es, shape: SHAPE }, { values: stored(wv, dtype), shape: [3] }], lerpRef);
      assertClose(kiln.lerp(s, e, w), exp.values, SHAPE, tolFor(dtype));
    }
  }
  // Weight 1 gives exactly `end` (the formula switches to the end point for |w| >= 0.5).
  const e = makeTensor([0.1, 1e8, -3], [3]);
  assert.deepEqual(kiln.lerp(makeTensor([7, -1e-8, 5], [3]), e, 1).toFlatArray(), e.toFlatArray());
  assertThrowsWith(() => kiln.lerp(makeTensor([1], [1], 'int32'), makeTensor([1], [1], 'int32'), 0.5), 'lerp', 'int32', 'floating');
  assertThrowsWith(() => kiln.lerp(makeTensor([1], [1]), makeTensor([1], [1], 'float16'), 0.5), 'lerp', "'end'", 'float16');
  assertThrowsWith(() => kiln.lerp(makeTensor([1, 2], [2]), makeTensor([1, 2, 3], [3]), 0.5), 'lerp', '[2]', '[3]');
});

test('fill_ and zero_ write every element through any layout and keep the storage', () => {
  for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    for (const layout of LAYOUTS) {
      const x = makeTensor(randomValues(36, 70), SHAPE, dtype, layout);
      const st = x.storage;
      assert.equal(x.fill_(3), x);
      assert.equal(x.storage, st);
      assert.deepEqual(x.toFlatArray(), new Array<number>(36).fill(dtype === 'bool' ? 1 : 3));
      assert.equal(kiln.zero_(x), x);
      assert.deepEqual(x.toFlatArray(), new Array<number>(36).fill(0));
    }
  }
  // Values are cast to self's dtype: floats truncate into ints (as torch's fill_), round into halves.
  assert.deepEqual(makeTensor([0, 0], [2], 'int32').fill_(2.7).toArray(), [2, 2]);
  assert.deepEqual(makeTensor([0, 0], [2], 'int64').fill_(-2.7).toArray(), [-2, -2]);
  assert.deepEqual(makeTensor([0, 0], [2], 'float16').fill_(0.1).toArray(), [0.0999755859375, 0.0999755859375]);
  assert.deepEqual(makeTensor([0, 0], [2], 'bool').fill_(0.5).toArray(), [true, true]);
  assert.deepEqual(makeTensor([1], [1], 'bool').fill_(false).toArray(), [false]);
  assertClose(makeTensor([0, 0], [2]).fill_(NaN), [NaN, NaN], [2]);
  // A zero-dim tensor value.
  assert.deepEqual(makeTensor([0, 0, 0], [3], 'float32', 'strided').fill_(makeTensor([4.5], [], 'float16')).toArray(), [4.5, 4.5, 4.5]);
  assert.deepEqual(makeTensor([1, 2], [2], 'int32').fill_(makeTensor([9], [], 'int64')).toArray(), [9, 9]);
  // Strided fill leaves the gaps alone.
  const g = makeTensor([1, 2, 3], [3], 'float32', 'strided');
  g.fill_(5);
  const words = new Float32Array(g.storage.cpuArrayBuffer());
  assert.deepEqual([words[3], words[4], words[5], words[6], words[7]], [5, 777, 5, 777, 5]);
  assertThrowsWith(() => makeTensor([1, 2], [2]).fill_(makeTensor([1, 2], [2])), 'fill_', '0-dimension', '[2]');
  assertThrowsWith(() => makeExpanded([1], [1], [3]).fill_(2), 'fill_', 'single memory location');
  assertThrowsWith(() => makeExpanded([1], [1], [3]).zero_(), 'zero_', 'single memory location');
  assertThrowsWith(() => makeTensor([1, 2], [2]).fill_('x' as never), 'fill_', "'value'");
});

test('Tensor methods and functions agree, and methods exist for every public op', () => {
  const names = ['neg', 'abs', 'exp', 'sigmoid', 'gelu', 'softplus', 'sub', 'mul', 'div', 'remainder', 'pow', 'maximum', 'minimum', 'atan2', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logicalAnd', 'logicalOr', 'logicalXor', 'logicalNot', 'clamp', 'clamp_', 'lerp', 'fill_', 'zero_', 'sub_', 'mul_', 'div_', 'relu_', 'neg_', 'exp_', 'sigmoid_', 'tanh_'];
  const proto = Object.getPrototypeOf(makeTensor([1], [1])) as Record<string, unknown>;
  for (const n of names) assert.equal(typeof proto[n], 'function', `Tensor.${n}`);
  const a = makeTensor([1, -2, 3], [3]);
  const b = makeTensor([2, 2, -1], [3]);
  assert.deepEqual(a.sub(b, 2).toArray(), kiln.sub(a, b, 2).toArray());
  assert.deepEqual(a.remainder(b).toArray(), kiln.remainder(a, b).toArray());
  assert.deepEqual(a.pow(2).toArray(), [1, 4, 9]);
  assert.deepEqual(a.logicalAnd(b).toArray(), [true, true, true]);
  const t = a.sigmoid() as Tensor;
  assert.equal(t.dtype, 'float32');
});
