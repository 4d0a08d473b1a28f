import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, randomInts, randomValues, rng } from './helpers/make.js';
import { floorDivInt, mapRef, numelOf, pyModFloat, pyModInt, stored } from './helpers/pointwise-ref.js';

type Ref2 = (x: number, y: number) => number;
type Call = (a: Tensor, b: Tensor | number) => Tensor;

interface BinaryCase {
  name: string;
  call: Call;
  ref: Ref2;
  /** Value generator for each side: (count, seed) => values. */
  gen: [(n: number, seed: number) => number[], (n: number, seed: number) => number[]];
  bool?: boolean;
  scalarOk?: boolean;
}

const uniform = (lo: number, hi: number) => (n: number, seed: number) => randomValues(n, seed, lo, hi);
/** Magnitudes in [lo, hi] with random signs (divisors away from zero). */
const signed = (lo: number, hi: number) => (n: number, seed: number) => {
  const r = rng(seed + 1000);
  return randomValues(n, seed, lo, hi).map((v) => (r() < 0.5 ? -v : v));
};
/** Small integers as floats, so that equal pairs occur in comparisons. */
const smallInts = (n: number, seed: number) => randomInts(n, seed, -2, 3);

const fn = (name: string) => (kiln as unknown as Record<string, (...a: unknown[]) => Tensor>)[name]!;

const cases: BinaryCase[] = [
  { name: 'sub', call: (a, b) => kiln.sub(a, b), ref: (x, y) => x - y, gen: [uniform(-3, 3), uniform(-3, 3)], scalarOk: true },
  { name: 'sub alpha', call: (a, b) => kiln.sub(a, b, 2.5), ref: (x, y) => x - 2.5 * y, gen: [uniform(-3, 3), uniform(-3, 3)], scalarOk: true },
  { name: 'mul', call: (a, b) => a.mul(b), ref: (x, y) => x * y, gen: [uniform(-3, 3), uniform(-3, 3)], scalarOk: true },
  { name: 'div', call: (a, b) => kiln.div(a, b), ref: (x, y) => x / y, gen: [uniform(-3, 3), signed(0.5, 2)], scalarOk: true },
  { name: 'div trunc', call: (a, b) => kiln.div(a, b, 'trunc'), ref: (x, y) => (x / y < 0 ? Math.ceil(x / y) : Math.floor(x / y)), gen: [uniform(-6, 6), signed(0.5, 2)], scalarOk: true },
  { name: 'div floor', call: (a, b) => a.div(b, 'floor'), ref: (x, y) => Math.floor(x / y), gen: [uniform(-6, 6), signed(0.5, 2)], scalarOk: true },
  { name: 'remainder', call: (a, b) => kiln.remainder(a, b), ref: pyModFloat, gen: [uniform(-6, 6), signed(0.5, 2)], scalarOk: true },
  { name: 'pow', call: (a, b) => kiln.pow(a, b), ref: (x, y) => Math.exp(y * Math.log(x)), gen: [uniform(0.5, 2), uniform(-2, 2)], scalarOk: true },
  { name: 'maximum', call: (a, b) => kiln.maximum(a, b as Tensor), ref: (x, y) => (x > y ? x : y), gen: [uniform(-3, 3), uniform(-3, 3)] },
  { name: 'minimum', call: (a, b) => a.minimum(b as Tensor), ref: (x, y) => (x < y ? x : y), gen: [uniform(-3, 3), uniform(-3, 3)] },
  { name: 'atan2', call: (a, b) => kiln.atan2(a, b as Tensor), ref: Math.atan2, gen: [uniform(-3, 3), uniform(-3, 3)] },
  { name: 'eq', call: (a, b) => kiln.eq(a, b), ref: (x, y) => +(x === y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'ne', call: (a, b) => a.ne(b), ref: (x, y) => +(x !== y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'lt', call: (a, b) => kiln.lt(a, b), ref: (x, y) => +(x < y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'le', call: (a, b) => a.le(b), ref: (x, y) => +(x <= y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'gt', call: (a, b) => kiln.gt(a, b), ref: (x, y) => +(x > y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'ge', call: (a, b) => a.ge(b), ref: (x, y) => +(x >= y), gen: [smallInts, smallInts], bool: true, scalarOk: true },
  { name: 'logicalAnd', call: (a, b) => kiln.logicalAnd(a, b as Tensor), ref: (x, y) => +(x !== 0 && y !== 0), gen: [smallInts, smallInts], bool: true },
  { name: 'logicalOr', call: (a, b) => a.logicalOr(b as Tensor), ref: (x, y) => +(x !== 0 || y !== 0), gen: [smallInts, smallInts], bool: true },
  { name: 'logicalXor', call: (a, b) => kiln.logicalXor(a, b as Tensor), ref: (x, y) => +((x !== 0) !== (y !== 0)), gen: [smallInts, smallInts], bool: true },
];

function check(c: BinaryCase, av: number[], ashape: number[], a: Tensor, bv: number[], bshape: number[], b: Tensor, dtype: DType): Tensor {
  const out = c.call(a, b);
  const exp = mapRef([{ values: stored(av, dtype), shape: ashape }, { values: stored(bv, dtype), shape: bshape }], c.ref);
  assert.equal(out.dtype, c.bool ? 'bool' : dtype, `${c.name} dtype`);
  assertClose(out, c.bool ? exp.values : stored(exp.values, dtype), exp.shape, tolFor(dtype));
  return out;
}

for (const c of cases) {
  test(`${c.name}: float32 across layouts and broadcasting vs float64 reference`, () => {
    const [ga, gb] = c.gen;
    // Same shape: contiguous with contiguous, transposed with strided.
    for (const [la, lb] of [['contiguous', 'contiguous'], ['transposed', 'strided'], ['strided', 'transposed']] as [Layout, Layout][]) {
      const av = ga(12, 1);
      const bv = gb(12, 2);
      const a = makeTensor(av, [3, 4], 'float32', la);
      const out = check(c, av, [3, 4], a, bv, [3, 4], makeTensor(bv, [3, 4], 'float32', lb), 'float32');
      if (la === 'transposed') assert.deepEqual([...out.strides], [...a.strides], 'output follows the transposed first operand');
    }
    // channels_last with an expanded (stride-0) channel vector: output stays channels_last.
    const shape = [2, 3, 2, 3];
    const av = ga(36, 3);
    const bv = gb(3, 4);
    const out = check(c, av, shape, makeTensor(av, shape, 'float32', 'channelsLast'), bv, [3], makeExpanded(bv, [3], shape), 'float32');
    assert.ok(out.isContiguous('channelsLast'), `channels_last output, strides [${out.strides}]`);
    // Broadcasting that grows the rank on both sides: [3, 1] (strided) with [2, 1, 4].
    const cv = ga(3, 5);
    const dv = gb(8, 6);
    const o2 = check(c, cv, [3, 1], makeTensor(cv, [3, 1], 'float32', 'strided'), dv, [2, 1, 4], makeTensor(dv, [2, 1, 4]), 'float32');
    assert.deepEqual([...o2.shape], [2, 3, 4]);
    // Size-1 dims and zero-dim operands.
    const ev = ga(4, 7);
    const fv = gb(1, 8);
    check(c, ev, [4, 1], makeTensor(ev, [4, 1]), fv, [], makeTensor(fv, []), 'float32');
    // Empty tensors broadcast to empty outputs.
    const empty = c.call(makeTensor([], [0, 4]), makeTensor(gb(4, 9), [4]));
    assert.deepEqual([...empty.shape], [0, 4]);
  });

  test(`${c.name}: float16 and bfloat16 operands keep their dtype`, () => {
    const [ga, gb] = c.gen;
    for (const dtype of ['float16', 'bfloat16'] as DType[]) {
      const av = ga(12, 11);
      const bv = gb(12, 12);
      check(c, av, [3, 4], makeTensor(av, [3, 4], dtype, 'transposed'), bv, [3, 4], makeTensor(bv, [3, 4], dtype, 'strided'), dtype);
    }
  });

  if (c.scalarOk) {
    test(`${c.name}: tensor with a JS scalar on the right`, () => {
      const [ga, gb] = c.gen;
      const av = ga(36, 13);
      const s = stored(gb(1, 14), 'float32')[0]!;
      const shape = [2, 3, 2, 3];
      const out = c.call(makeTensor(av, shape, 'float32', 'channelsLast'), s);
      assert.ok(out.isContiguous('channelsLast'));
      assertClose(out, mapRef([{ values: stored(av, 'float32'), shape }, s], c.ref).values, shape);
    });
  }
}

test('promotion: int32 + float scalar -> float32, int32 * int scalar stays int32, int / int -> float32', () => {
  const a = makeTensor([1, -2, 7], [3], 'int32');
  const r1 = kiln.sub(a, 2.5);
  assert.equal(r1.dtype, 'float32');
  assert.deepEqual(r1.toArray(), [-1.5, -4.5, 4.5]);
  const r2 = kiln.mul(a, 3);
  assert.equal(r2.dtype, 'int32');
  assert.deepEqual(r2.toArray(), [3, -6, 21]);
  const r3 = kiln.div(a, makeTensor([2, 4, -2], [3], 'int32'));
  assert.equal(r3.dtype, 'float32');
  assert.deepEqual(r3.toArray(), [0.5, -0.5, -3.5]);
  assert.equal(kiln.div(a, 2).dtype, 'float32');
  assert.equal(kiln.pow(a, 2).dtype, 'int32');
  assert.equal(kiln.pow(a, 0.5).dtype, 'float32');
  assert.equal(kiln.mul(a, makeTensor([1, 2, 3], [3], 'int64')).dtype, 'int64');
  assert.equal(kiln.mul(a, makeTensor([2], [], 'int64')).dtype, 'int32', 'a zero-dim int64 tensor does not widen an int32 tensor');
  assert.equal(kiln.mul(a, makeTensor([2], [], 'float32')).dtype, 'float32', 'a zero-dim float tensor lifts ints to its dtype');
  assert.equal(kiln.atan2(a, a).dtype, 'float32');
  assert.equal(kiln.maximum(a, makeTensor([0.5, 0.5, 0.5], [3], 'float16')).dtype, 'float16');
  const h = makeTensor([1, 2], [2], 'float16');
  assert.equal(kiln.mul(h, makeTensor([3], [], 'float32')).dtype, 'float16');
  assert.equal(kiln.mul(h, makeTensor([3, 1], [2], 'float32')).dtype, 'float32');
  assert.equal(kiln.sub(h, makeTensor([1, 1], [2], 'bfloat16')).dtype, 'float32', 'float16 with bfloat16 gives float32');
});

test('promotion: uint8 with int32 -> int32, bool with bool in arithmetic and comparisons', () => {
  const u = makeTensor([250, 3, 0], [3], 'uint8');
  const i = makeTensor([10, -5, 1], [3], 'int32');
  const s = kiln.sub(u, i);
  assert.equal(s.dtype, 'int32');
  assert.deepEqual(s.toArray(), [240, 8, -1]);
  assert.equal(kiln.mul(u, i).dtype, 'int32');
  assert.deepEqual(kiln.mul(u, i).toArray(), [2500, -15, 0]);
  // uint8 arithmetic wraps modulo 256, as in PyTorch.
  assert.deepEqual(kiln.sub(u, 5).toArray(), [245, 254, 251]);
  assert.deepEqual(kiln.mul(u, 2).toArray(), [244, 6, 0]);
  // int32 multiplication wraps modulo 2^32 exactly (no float64 rounding of the product).
  assert.deepEqual(kiln.mul(makeTensor([65536, 123456789], [2], 'int32'), makeTensor([65536, 987654321], [2], 'int32')).toArray(), [0, Math.imul(123456789, 987654321)]);
  const t = makeTensor([1, 1, 0, 0], [4], 'bool');
  const f = makeTensor([1, 0, 1, 0], [4], 'bool');
  const m = kiln.mul(t, f);
  assert.equal(m.dtype, 'bool');
  assert.deepEqual(m.toArray(), [true, false, false, false]);
  assert.deepEqual(kiln.eq(t, f).toArray(), [true, false, false, true]);
  assert.deepEqual(kiln.lt(t, f).toArray(), [false, false, true, false]);
  assert.deepEqual(kiln.gt(t, true).toArray(), [false, false, false, false]);
  assert.deepEqual(kiln.ge(t, f).toArray(), [true, true, false, true]);
  assert.deepEqual(kiln.maximum(t, f).toArray(), [true, true, true, false]);
  assert.equal(kiln.maximum(t, f).dtype, 'bool');
  assert.equal(kiln.div(t, f).dtype, 'float32');
  // Comparisons across dtypes compare values in the promoted dtype.
  assert.deepEqual(kiln.lt(i, 1.5).toArray(), [false, true, true]);
  assert.deepEqual(kiln.eq(u, makeTensor([250, 3, 0.5], [3])).toArray(), [true, true, false]);
  // float16 == 0.1 compares against float16(0.1), as PyTorch casts the scalar to the common dtype.
  assert.deepEqual(kiln.eq(makeTensor([0.1, 0.2], [2], 'float16'), 0.1).toArray(), [true, false]);
  assert.deepEqual(kiln.eq(makeTensor([0.1], [1], 'float32'), 0.1).toArray(), [true]);
  // logical ops take any dtypes; NaN counts as true.
  assert.deepEqual(kiln.logicalAnd(makeTensor([NaN, 0, 2], [3]), makeTensor([1, 1, 0], [3], 'int32')).toArray(), [true, false, false]);
});

test('bool arithmetic in place stores True as 1, as torch (add_ is logical or, mul_ logical and)', () => {
  // torch: a = torch.tensor([True, True, False]); a.add_(a) is tensor([True, True, False]), and its
  // storage bytes are 1 (a.view(torch.uint8) is [1, 1, 0]); a.sum() is then 2, not 4.
  const bytes = (t: Tensor): number[] => Array.from(new Uint8Array(t.storage.cpuArrayBuffer(), t.offset, t.numel()));
  const a = makeTensor([1, 1, 0], [3], 'bool');
  a.add_(a);
  assert.deepEqual(bytes(a), [1, 1, 0]);
  assert.equal(kiln.sum(a).item(), 2);
  assert.deepEqual(kiln.eq(a, true).toArray(), [true, true, false]);
  const b = makeTensor([1, 0, 1], [3], 'bool');
  b.add_(true);
  assert.deepEqual(bytes(b), [1, 1, 1]);
  // Strided and transposed bool selves, a broadcast other, and the compiled in-place form.
  const c = makeTensor([1, 0, 1, 1, 0, 1], [2, 3], 'bool', 'transposed');
  c.add_(makeTensor([1, 1, 0], [3], 'bool'));
  assert.deepEqual(c.toArray(), [[true, true, true], [true, true, true]]);
  assert.deepEqual([...new Uint8Array(c.storage.cpuArrayBuffer())].filter((v) => v > 1), []);
  const d = makeTensor([1, 1, 0], [3], 'bool');
  kiln.compile((t: Tensor) => t.add_(t))(d);
  assert.deepEqual(bytes(d), [1, 1, 0]);
  const e = makeTensor([1, 1, 0], [3], 'bool');
  e.mul_(e);
  assert.deepEqual(bytes(e), [1, 1, 0]);
  // Subtraction of bools is an error in torch too; a number result cannot be written into bool.
  assertThrowsWith(() => makeTensor([1, 0], [2], 'bool').sub_(makeTensor([1, 1], [2], 'bool')), 'sub', 'bool');
  assertThrowsWith(() => makeTensor([1, 0], [2], 'bool').mul_(2), 'mul_', 'bool');
});

test('integer division and remainder follow Python (floor) and C (trunc) conventions', () => {
  const av = randomInts(40, 21, -20, 21);
  const bv = randomInts(40, 22, 1, 7).map((v, k) => (k % 2 ? -v : v));
  for (const dtype of ['int32', 'int64'] as DType[]) {
    const a = makeTensor(av, [5, 8], dtype, 'transposed');
    const b = makeTensor(bv, [5, 8], dtype, 'strided');
    const fl = kiln.div(a, b, 'floor');
    assert.equal(fl.dtype, dtype);
    assert.deepEqual(fl.toFlatArray(), av.map((x, k) => floorDivInt(x, bv[k]!)));
    assert.deepEqual(kiln.div(a, b, 'trunc').toFlatArray(), av.map((x, k) => (x - (x % bv[k]!)) / bv[k]! + 0));
    const r = kiln.remainder(a, b);
    assert.equal(r.dtype, dtype);
    assert.deepEqual(r.toFlatArray(), av.map((x, k) => pyModInt(x, bv[k]!)));
  }
  const u = makeTensor([7, 200], [2], 'uint8');
  assert.deepEqual(kiln.div(u, 3, 'floor').toArray(), [2, 66]);
  assert.deepEqual(kiln.remainder(u, 3).toArray(), [1, 2]);
  // Floats: -7.5 // 2 = -4, -7.5 % 2 = 0.5, 7.5 % -2 = -0.5.
  const f = makeTensor([-7.5, 7.5, -7, 7], [4]);
  assert.deepEqual(kiln.div(f, 2, 'floor').toArray(), [-4, 3, -4, 3]);
  assert.deepEqual(kiln.div(f, 2, 'trunc').toArray(), [-3, 3, -3, 3]);
  assert.deepEqual(kiln.remainder(f, 2).toArray(), [0.5, 1.5, 1, 1]);
  assert.deepEqual(kiln.remainder(f, -2).toArray(), [-1.5, -0.5, -1, -1]);
  // Scalar dividend (remainder.Scalar_Tensor): 7 % [-3, 3, 4] = [-2, 1, 3].
  const sr = kiln.remainder(7, makeTensor([-3, 3, 4], [3], 'int32'));
  assert.equal(sr.dtype, 'int32');
  assert.deepEqual(sr.toArray(), [-2, 1, 3]);
  assertClose(kiln.remainder(5.5, makeTensor([2, -2], [2])), [1.5, -0.5], [2]);
});

test('division by zero: floats give inf/nan, integer rounding division and remainder throw', () => {
  const f = makeTensor([1, -1, 0], [3]);
  assertClose(kiln.div(f, 0), [Infinity, -Infinity, NaN], [3]);
  assertClose(kiln.div(f, makeTensor([0, 0, 0], [3])), [Infinity, -Infinity, NaN], [3]);
  assertClose(kiln.div(f, 0, 'floor'), [Infinity, -Infinity, NaN], [3]);
  assertClose(kiln.div(f, 0, 'trunc'), [Infinity, -Infinity, NaN], [3]);
  assertClose(kiln.remainder(f, 0), [NaN, NaN, NaN], [3]);
  const i = makeTensor([1, -1, 0], [3], 'int32');
  assertClose(kiln.div(i, makeTensor([0, 0, 0], [3], 'int32')), [Infinity, -Infinity, NaN], [3]);
  assert.equal(kiln.div(i, 0).dtype, 'float32');
  const zeros = makeTensor([2, 0, 1], [3], 'int64');
  assertThrowsWith(() => kiln.div(i, zeros, 'floor'), 'div', 'ZeroDivisionError', 'int64', "'floor'");
  assertThrowsWith(() => kiln.div(i, zeros, 'trunc'), 'div', 'ZeroDivisionError', "'trunc'");
  assertThrowsWith(() => kiln.div(i, 0, 'floor'), 'div', 'division by zero', 'scalar 0');
  assertThrowsWith(() => kiln.remainder(i, zeros), 'remainder', 'ZeroDivisionError');
  assertThrowsWith(() => kiln.remainder(i, 0), 'remainder', 'by zero');
  assertThrowsWith(() => kiln.remainder(5, makeTensor([1, 0], [2], 'int32')), 'remainder', 'ZeroDivisionError');
  // A failed in-place integer division leaves self untouched.
  const s = makeTensor([5, 6, 7], [3], 'int32');
  assertThrowsWith(() => s.div_(makeTensor([1, 1, 0], [3], 'int32'), 'floor'), 'div_', 'ZeroDivisionError');
  assert.deepEqual(s.toArray(), [5, 6, 7]);
});

test('pow: tensor^tensor, tensor^scalar, scalar^tensor, integer powers and C edge cases', () => {
  const bv = randomValues(12, 31, 0.2, 3);
  const ev = randomValues(12, 32, -2, 2);
  const base = makeTensor(bv, [3, 4], 'float32', 'transposed');
  const expo = makeTensor(ev, [3, 4], 'float32', 'strided');
  const bs = stored(bv, 'float32');
  const es = stored(ev, 'float32');
  assertClose(kiln.pow(base, expo), bs.map((b, k) => Math.exp(es[k]! * Math.log(b))), [3, 4]);
  for (const e of [2, 3, 0.5, -1, -0.5, 0, 1.7]) assertClose(base.pow(e), bs.map((b) => Math.exp(e * Math.log(b))), [3, 4]);
  const sp = kiln.pow(2, expo);
  assert.equal(sp.dtype, 'float32');
  assertClose(sp, es.map((e) => Math.exp(e * Math.LN2)), [3, 4]);
  assert.ok(sp.strides[0] === 4 && sp.strides[1] === 1, 'scalar^strided gives contiguous');
  // Integer powers are exact and wrap like int32 arithmetic.
  const ib = makeTensor([2, -3, 5, 0, 46341], [5], 'int32');
  assert.deepEqual(kiln.pow(ib, 3).toArray(), [8, -27, 125, 0, Math.imul(Math.imul(46341, 46341), 46341)]);
  assert.deepEqual(kiln.pow(ib, makeTensor([10, 3, 0, 0, 2], [5], 'int32')).toArray(), [1024, -27, 1, 1, Math.imul(46341, 46341)]);
  const ip = kiln.pow(3, makeTensor([0, 1, 4], [3], 'int64'));
  assert.equal(ip.dtype, 'int64');
  assert.deepEqual(ip.toArray(), [1, 3, 81]);
  assert.equal(kiln.pow(2.5, makeTensor([1, 2], [2], 'int32')).dtype, 'float32');
  assertClose(kiln.pow(2.5, makeTensor([1, 2], [2], 'int32')), [2.5, 6.25], [2]);
  // Negative integer exponents from a tensor follow PyTorch: 1 -> 1, -1 -> +-1, others -> 0.
  assert.deepEqual(kiln.pow(makeTensor([1, -1, -1, 2, 0], [5], 'int32'), makeTensor([-2, -3, -2, -1, 2], [5], 'int32')).toArray(), [1, -1, 1, 0, 0]);
  assertThrowsWith(() => kiln.pow(makeTensor([2], [1], 'int32'), -1), 'pow', 'negative integer powers', '-1');
  // C semantics: pow(1, nan) = 1, pow(nan, 0) = 1, pow(-1, inf) = 1, pow(-8, 1/3) = nan.
  assertClose(kiln.pow(makeTensor([1, NaN, -1, -8], [4]), makeTensor([NaN, 0, Infinity, 1 / 3], [4])), [1, 1, 1, NaN], [4]);
  assertClose(kiln.pow(makeTensor([0, 0], [2]), makeTensor([-1, 0], [2])), [Infinity, 1], [2]);
  assertThrowsWith(() => kiln.pow(2, 3), 'pow', 'must be a Tensor');
  assertThrowsWith(() => kiln.pow(makeTensor([1, 0], [2], 'bool'), makeTensor([1, 0], [2], 'bool')), 'pow', 'bool');
});

test('pow of a signed zero by a negative odd integer keeps the sign (C99 pow, as torch)', () => {
  // torch: torch.tensor([-0., 0., -0., -0.], dtype=torch.float64) ** torch.tensor([-5, -5, -4, 3],
  // dtype=torch.int32) is [-inf, inf, inf, -0.] (fuzz case 2905's last step, given the -0 it saw).
  const b = kiln.tensor([-0, 0, -0, -0], { dtype: 'float64' });
  const e = kiln.tensor([-5, -5, -4, 3], { dtype: 'int32' });
  const want = [-Infinity, Infinity, Infinity, -0];
  for (const got of [kiln.pow(b, e), kiln.compile((x: Tensor, y: Tensor) => kiln.pow(x, y))(b, e), kiln.pow(b.float(), e)]) {
    got.toFlatArray().forEach((v, i) => assert.ok(Object.is(v, want[i]), `element ${i}: ${v}, torch ${want[i]}`));
  }
  assert.ok(Object.is(kiln.pow(kiln.tensor([-0], { dtype: 'float64' }), -3).item(), -Infinity));
});

test('NaN and infinity propagation in binary ops', () => {
  const a = makeTensor([NaN, 1, NaN, Infinity, -Infinity, 0], [6]);
  const b = makeTensor([1, NaN, NaN, 5, 5, -0], [6]);
  assertClose(kiln.maximum(a, b), [NaN, NaN, NaN, Infinity, 5, 0], [6]);
  assertClose(kiln.minimum(a, b), [NaN, NaN, NaN, 5, -Infinity, -0], [6]);
  assert.deepEqual(kiln.eq(a, b).toArray(), [false, false, false, false, false, true]);
  assert.deepEqual(kiln.ne(a, b).toArray(), [true, true, true, true, true, false]);
  assert.deepEqual(kiln.lt(a, b).toArray(), [false, false, false, false, true, false]);
  assertClose(kiln.sub(a, b), [NaN, NaN, NaN, Infinity, -Infinity, 0], [6]);
  assertClose(kiln.mul(a, b), [NaN, NaN, NaN, Infinity, -Infinity, -0], [6]);
  assertClose(kiln.atan2(makeTensor([1, -1, 0], [3]), makeTensor([Infinity, -Infinity, -1], [3])), [0, -Math.PI, Math.PI], [3]);
  // float16 overflow gives inf in the float16 result.
  assertClose(kiln.mul(makeTensor([300, 2], [2], 'float16'), 300), [Infinity, 600], [2]);
});

test('binary errors: broadcast mismatch, bool subtraction, scalar-only operands, bad rounding mode', () => {
  const a = makeTensor(randomValues(6, 1), [2, 3]);
  const b = makeTensor(randomValues(4, 2), [4]);
  for (const name of ['sub', 'mul', 'div', 'remainder', 'pow', 'maximum', 'minimum', 'atan2', 'eq', 'lt', 'logicalAnd', 'logicalXor']) {
    assertThrowsWith(() => fn(name)(a, b), name, '[2, 3]', '[4]', 'broadcast');
  }
  const t = makeTensor([1, 0], [2], 'bool');
  assertThrowsWith(() => kiln.sub(t, t), 'sub', 'bool', 'logicalXor');
  assertThrowsWith(() => kiln.sub(makeTensor([1, 2], [2]), true), 'sub', 'bool');
  assertThrowsWith(() => kiln.sub(makeTensor([1, 2], [2], 'int32'), 1, 0.5), 'sub', 'alpha', '0.5', 'int32');
  assertThrowsWith(() => kiln.div(a, 2, 'round' as never), 'div', 'roundingMode', 'round');
  assertThrowsWith(() => kiln.div(t, t, 'floor'), 'div', 'bool');
  assertThrowsWith(() => kiln.remainder(t, t), 'remainder', 'bool');
  assertThrowsWith(() => kiln.maximum(a, 2 as unknown as Tensor), 'maximum', "'other'", 'Tensor');
  assertThrowsWith(() => kiln.logicalOr(a, null as unknown as Tensor), 'logicalOr', "'other'");
  assertThrowsWith(() => kiln.mul(a, 'x' as unknown as number), 'mul', "'other'", 'string');
  assertThrowsWith(() => kiln.remainder(2, 3), 'remainder', 'must be a Tensor');
});

test('in-place binary ops: values, aliasing, strides, promotion and cast checks', () => {
  const av = randomValues(12, 41);
  const bv = randomValues(4, 42, 0.5, 2);
  for (const layout of ['contiguous', 'transposed', 'strided'] as Layout[]) {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
      const run = (name: string, ref: Ref2, call: (x: Tensor, y: Tensor) => Tensor) => {
        const x = makeTensor(av, [3, 4], dtype, layout);
        const storage = x.storage;
        const strides = [...x.strides];
        const r = call(x, makeTensor(bv, [4], 'float32'));
        assert.equal(r, x, `${name} returns self`);
        assert.equal(x.storage, storage);
        assert.deepEqual([...x.strides], strides);
        assert.equal(x.dtype, dtype, `${name} keeps self's dtype`);
        const exp = mapRef([{ values: stored(av, dtype), shape: [3, 4] }, { values: stored(bv, 'float32'), shape: [4] }], ref);
        assertClose(x, stored(exp.values, dtype), [3, 4], tolFor(dtype));
      };
      run('sub_', (p, q) => p - 2 * q, (x, y) => x.sub_(y, 2));
      run('mul_', (p, q) => p * q, (x, y) => kiln.mul_(x, y));
      run('div_', (p, q) => p / q, (x, y) => x.div_(y));
      run('div_ floor', (p, q) => Math.floor(p / q), (x, y) => x.div_(y, 'floor'));
    }
  }
  // Integer in-place with integer operands stays exact; floor division keeps ints.
  const i = makeTensor([7, -7, 9], [3], 'int32', 'strided');
  i.mul_(3);
  assert.deepEqual(i.toArray(), [21, -21, 27]);
  i.sub_(makeTensor([1, 1, 1], [3], 'uint8'));
  assert.deepEqual(i.toArray(), [20, -22, 26]);
  i.div_(4, 'floor');
  assert.deepEqual(i.toArray(), [5, -6, 6]);
  i.div_(4, 'trunc');
  assert.deepEqual(i.toArray(), [1, -1, 1]);
  // An int32 self multiplied by an int64 tensor keeps the exact low 32 bits.
  const w = makeTensor([65536], [1], 'int32');
  w.mul_(makeTensor([65537], [1], 'int64'));
  assert.deepEqual(w.toArray(), [65536]);
  // Dtype downcasts are rejected before anything is written.
  const k = makeTensor([1, 2], [2], 'int32');
  assertThrowsWith(() => k.mul_(0.5), 'mul_', "can't be cast", 'float32', 'int32');
  assertThrowsWith(() => k.div_(2), 'div_', "can't be cast", 'int32');
  assertThrowsWith(() => k.sub_(makeTensor([1, 1], [2])), 'sub_', "can't be cast");
  assertThrowsWith(() => makeTensor([1, 0], [2], 'bool').mul_(makeTensor([2, 2], [2], 'int32')), 'mul_', "can't be cast", 'bool');
  assert.deepEqual(k.toArray(), [1, 2]);
  // self cannot grow through broadcasting, and a stride-0 self cannot be written.
  assertThrowsWith(() => makeTensor([1, 2], [2]).sub_(makeTensor([1, 2, 3, 4], [2, 2])), 'sub_', '[2]', '[2, 2]');
  assertThrowsWith(() => makeExpanded([1, 2], [2], [3, 2]).mul_(2), 'mul_', 'single memory location');
  // float16 self with a float32 tensor: computed in float32, stored rounded to float16.
  const h = makeTensor([1, 2], [2], 'float16');
  h.mul_(makeTensor([1.0001, 3], [2]));
  assert.deepEqual(h.toArray(), [1, 6]);
});

test('every in-place result matches its out-of-place op on random broadcast inputs', () => {
  const shape = [2, 3, 4];
  const xv = randomValues(numelOf(shape), 51);
  const yv = randomValues(4, 52, 0.5, 2);
  const pairs: [string, (x: Tensor, y: Tensor) => Tensor, (x: Tensor, y: Tensor) => Tensor][] = [
    ['sub', (x, y) => kiln.sub(x, y, 0.5), (x, y) => kiln.sub_(x, y, 0.5)],
    ['mul', kiln.mul, kiln.mul_],
    ['div', (x, y) => kiln.div(x, y, 'trunc'), (x, y) => kiln.div_(x, y, 'trunc')],
  ];
  for (const [name, outOfPlace, inPlace] of pairs) {
    const y = makeTensor(yv, [4]);
    const expected = outOfPlace(makeTensor(xv, shape, 'float32', 'transposed'), y).toFlatArray();
    const x = makeTensor(xv, shape, 'float32', 'transposed');
    inPlace(x, y);
    assert.deepEqual(x.toFlatArray(), expected, name);
  }
});

test('in-place ops read an overlapping view of self as it was before the write', () => {
  const v = randomValues(9, 71);
  const x = makeTensor(v, [3, 3]);
  const xs = stored(v, 'float32');
  const xt = new Tensor(x.storage, 'float32', [3, 3], [1, 3], x.offset); // x.t(), sharing storage
  x.sub_(xt);
  assertClose(x, xs.map((a, k) => a - xs[(k % 3) * 3 + Math.floor(k / 3)]!), [3, 3]);
  const y = makeTensor(v, [3, 3]);
  const row0 = new Tensor(y.storage, 'float32', [3], [1], y.offset); // y[0]
  y.mul_(row0);
  assertClose(y, xs.map((a, k) => a * xs[k % 3]!), [3, 3]);
  const z = makeTensor(v, [3, 3]);
  z.mul_(z); // the identical view is read element by element before each write
  assertClose(z, xs.map((a) => a * a), [3, 3]);
});
