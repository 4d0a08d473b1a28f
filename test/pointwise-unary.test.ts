import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, randomInts, randomValues } from './helpers/make.js';
import { erfRef, roundRef, sigmoidRef, stored } from './helpers/pointwise-ref.js';

type Ref = (x: number) => number;

const SQRT2 = Math.sqrt(2);
const geluErfRef: Ref = (x) => 0.5 * x * (1 + erfRef(x / SQRT2));
const geluTanhRef: Ref = (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
const softplusRef = (beta: number, threshold: number): Ref => (x) => (beta * x > threshold ? x : Math.log(1 + Math.exp(beta * x)) / beta);

/** [op, float64 reference, input range]. */
const floatOps: [string, Ref, number, number][] = [
  ['neg', (x) => -x, -3, 3],
  ['abs', (x) => (x < 0 ? -x : x), -3, 3],
  ['sign', (x) => (x > 0 ? 1 : x < 0 ? -1 : 0), -3, 3],
  ['exp', (x) => Math.E ** x, -4, 4],
  ['expm1', (x) => (Math.abs(x) < 1e-5 ? x + (x * x) / 2 : Math.exp(x) - 1), -2, 2],
  ['log', Math.log, 0.05, 5],
  ['log2', (x) => Math.log(x) / Math.LN2, 0.05, 5],
  ['log10', (x) => Math.log(x) / Math.LN10, 0.05, 5],
  ['log1p', (x) => Math.log(1 + x), -0.9, 3],
  ['sqrt', (x) => x ** 0.5, 0, 9],
  ['rsqrt', (x) => x ** -0.5, 0.1, 9],
  ['reciprocal', (x) => 1 / x, 0.2, 4],
  ['square', (x) => x * x, -3, 3],
  ['sin', Math.sin, -4, 4],
  ['cos', Math.cos, -4, 4],
  ['tan', Math.tan, -1.2, 1.2],
  ['tanh', (x) => (Math.exp(2 * x) - 1) / (Math.exp(2 * x) + 1), -3, 3],
  ['sigmoid', sigmoidRef, -8, 8],
  ['erf', erfRef, -3.5, 3.5],
  ['relu', (x) => (x > 0 ? x : 0), -3, 3],
  ['silu', (x) => x * sigmoidRef(x), -6, 6],
  ['floor', Math.floor, -5, 5],
  ['ceil', Math.ceil, -5, 5],
  ['round', roundRef, -5, 5],
  ['trunc', (x) => (x < 0 ? Math.ceil(x) : Math.floor(x)), -5, 5],
];

const call = (name: string, x: Tensor): Tensor => (kiln as unknown as Record<string, (t: Tensor) => Tensor>)[name]!(x);
const method = (name: string, x: Tensor): Tensor => (x as unknown as Record<string, () => Tensor>)[name]!.call(x);

const SHAPE = [2, 3, 2, 3];
const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'strided', 'channelsLast'];

function checkLayout(out: Tensor, layout: Layout, input: Tensor): void {
  if (layout === 'channelsLast') assert.ok(out.isContiguous('channelsLast'), `channels_last kept: strides [${out.strides}]`);
  else if (layout === 'transposed') assert.deepEqual([...out.strides], [...input.strides], 'transposed layout kept');
  else assert.ok(out.isContiguous(), `contiguous output: strides [${out.strides}]`);
}

for (const [name, ref, lo, hi] of floatOps) {
  test(`${name}: float32 on every layout and broadcast input vs float64 reference`, () => {
    for (const [k, layout] of LAYOUTS.entries()) {
      let vals = randomValues(36, 10 + k, lo, hi);
      // Rounding ops also see exact halves (ties) and integers.
      if (['round', 'floor', 'ceil', 'trunc'].includes(name)) vals = vals.map((v, i) => (i % 3 === 0 ? Math.round(v * 2) / 2 : v));
      const x = makeTensor(vals, SHAPE, 'float32', layout);
      const expected = stored(vals, 'float32').map(ref);
      const out = call(name, x);
      assert.equal(out.dtype, 'float32');
      assertClose(out, expected, SHAPE);
      checkLayout(out, layout, x);
      assertClose(method(name, x), expected, SHAPE);
    }
    const row = randomValues(3, 99, lo, hi);
    const ex = makeExpanded(row, [3], [4, 3]);
    const exp = Array.from({ length: 12 }, (_, i) => ref(Math.fround(row[i % 3]!)));
    assertClose(call(name, ex), exp, [4, 3]);
  });

  test(`${name}: float16 and bfloat16 keep their dtype, within half tolerances`, () => {
    for (const dtype of ['float16', 'bfloat16'] as DType[]) {
      const vals = randomValues(24, 7, lo, hi);
      const x = makeTensor(vals, [4, 6], dtype, 'transposed');
      const out = call(name, x);
      assert.equal(out.dtype, dtype);
      assertClose(out, stored(vals, dtype).map(ref), [4, 6], tolFor(dtype));
    }
  });
}

test('erf is accurate to float32 precision (relative error <= 2e-7) from 0 to 7', () => {
  const xs: number[] = [];
  for (let i = -700; i <= 700; i += 3) xs.push(i / 100);
  xs.push(1e-6, -1e-6, 1e-20, 0.5, 0.84375, 1.25, 2.857, 5.9, 6, 6.1);
  const x = makeTensor(xs, [xs.length]);
  const expected = stored(xs, 'float32').map(erfRef);
  assertClose(kiln.erf(x), expected, [xs.length], { atol: 0, rtol: 2e-7 });
});

test('gelu (erf and tanh forms) and softplus (beta, threshold) vs float64 references', () => {
  for (const layout of LAYOUTS) {
    const vals = randomValues(36, 3, -5, 5);
    const x = makeTensor(vals, SHAPE, 'float32', layout);
    const xs = stored(vals, 'float32');
    const g = kiln.gelu(x);
    assertClose(g, xs.map(geluErfRef), SHAPE);
    checkLayout(g, layout, x);
    assertClose(x.gelu('tanh'), xs.map(geluTanhRef), SHAPE);
    assertClose(kiln.softplus(x), xs.map(softplusRef(1, 20)), SHAPE);
    assertClose(x.softplus(2, 3), xs.map(softplusRef(2, 3)), SHAPE);
  }
  // The tanh form differs from the erf form by up to ~5e-4; make sure the right one runs.
  const x = makeTensor([-2.5, -1.7, 1.3, 2.2], [4]);
  const gErf = kiln.gelu(x).toFlatArray();
  const gTanh = kiln.gelu(x, 'tanh').toFlatArray();
  assert.ok(gErf.some((v, i) => Math.abs(v - gTanh[i]!) > 1e-5), 'erf and tanh gelu differ');
  // softplus above the threshold is linear (exactly x), below is the log1p form.
  assert.deepEqual(kiln.softplus(makeTensor([30, 100], [2])).toArray(), [30, 100]);
  for (const dtype of ['float16', 'bfloat16'] as DType[]) {
    const v = randomValues(12, 5, -4, 4);
    const t = makeTensor(v, [3, 4], dtype, 'strided');
    assertClose(kiln.gelu(t), stored(v, dtype).map(geluErfRef), [3, 4], tolFor(dtype));
    assertClose(kiln.softplus(t), stored(v, dtype).map(softplusRef(1, 20)), [3, 4], tolFor(dtype));
  }
  assertThrowsWith(() => kiln.gelu(x, 'fast' as never), 'gelu', "'approximate'", 'fast');
  assertThrowsWith(() => kiln.softplus(x, 0), 'softplus', "'beta'", '0');
});

test('NaN and infinities propagate through unary ops as in PyTorch', () => {
  const edge = [NaN, Infinity, -Infinity, 0, -0];
  const x = makeTensor(edge, [5]);
  const cases: [string, number[]][] = [
    ['exp', [NaN, Infinity, 0, 1, 1]],
    ['log', [NaN, Infinity, NaN, -Infinity, -Infinity]],
    ['sqrt', [NaN, Infinity, NaN, 0, 0]],
    ['sigmoid', [NaN, 1, 0, 0.5, 0.5]],
    ['tanh', [NaN, 1, -1, 0, 0]],
    ['erf', [NaN, 1, -1, 0, 0]],
    ['relu', [NaN, Infinity, 0, 0, 0]],
    ['abs', [NaN, Infinity, Infinity, 0, 0]],
    ['sign', [0, 1, -1, 0, 0]], // PyTorch's sign(NaN) is 0
    ['reciprocal', [NaN, 0, 0, Infinity, -Infinity]],
    ['floor', [NaN, Infinity, -Infinity, 0, 0]],
    ['round', [NaN, Infinity, -Infinity, 0, 0]],
    ['softplus', [NaN, Infinity, 0, Math.LN2, Math.LN2]],
    ['gelu', [NaN, Infinity, NaN, 0, 0]],
  ];
  for (const [name, expected] of cases) assertClose(call(name, x), expected, [5]);
  assert.deepEqual(kiln.isnan(x).toArray(), [true, false, false, false, false]);
  assert.deepEqual(kiln.isinf(x).toArray(), [false, true, true, false, false]);
  assert.deepEqual(kiln.isfinite(x).toArray(), [false, false, false, true, true]);
  assert.deepEqual(kiln.logicalNot(x).toArray(), [false, false, false, true, true]);
  assert.ok(Object.is(kiln.neg(makeTensor([0], [1])).toFlatArray()[0], -0), 'neg(0) is -0');
  const h = makeTensor(edge, [5], 'float16');
  assert.deepEqual(kiln.isnan(h).toArray(), [true, false, false, false, false]);
  assert.deepEqual(kiln.isinf(makeTensor([70000, 1], [2], 'float16')).toArray(), [true, false], '70000 overflows float16 to inf');
});

test('round is half-to-even, floor/ceil/trunc round the right way on negative halves', () => {
  const x = makeTensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.7, 2.2], [9], 'float32', 'strided');
  assert.deepEqual(kiln.round(x).toFlatArray(), [-2, -2, -0, 0, 2, 2, 4, -4, 2]);
  assert.deepEqual(kiln.floor(x).toArray(), [-3, -2, -1, 0, 1, 2, 3, -4, 2]);
  assert.deepEqual(kiln.ceil(x).toFlatArray(), [-2, -1, -0, 1, 2, 3, 4, -3, 3]);
  assert.deepEqual(kiln.trunc(x).toFlatArray(), [-2, -1, -0, 0, 1, 2, 3, -3, 2]);
});

test('dtype rules: float math on ints/bool gives float32 (gelu raises, as torch), neg/abs/relu/sign/square keep ints, predicates give bool', () => {
  const iv = randomInts(12, 4, -6, 7);
  for (const dtype of ['int32', 'int64', 'uint8'] as DType[]) {
    const vals = stored(iv, dtype);
    const x = makeTensor(vals, [3, 4], dtype, 'transposed');
    for (const [name, ref] of [['exp', Math.exp], ['sqrt', Math.sqrt], ['sigmoid', sigmoidRef], ['erf', erfRef], ['sin', Math.sin], ['log1p', Math.log1p]] as [string, Ref][]) {
      const out = call(name, x);
      assert.equal(out.dtype, 'float32', `${name}(${dtype})`);
      assertClose(out, stored(vals.map(ref), 'float32'), [3, 4]);
    }
    // torch has no integer gelu kernel: F.gelu on int64 raises NotImplementedError ("GeluKernelImpl"
    // not implemented for 'Long', fuzz fixture case 2668), on every integer dtype and bool alike.
    assertThrowsWith(() => kiln.gelu(x), 'gelu', dtype, 'not implemented');
    for (const [name, ref] of [['neg', (v: number) => -v], ['abs', Math.abs], ['relu', (v: number) => Math.max(v, 0)], ['sign', Math.sign], ['square', (v: number) => v * v], ['floor', (v: number) => v], ['round', (v: number) => v]] as [string, Ref][]) {
      const out = call(name, x);
      assert.equal(out.dtype, dtype, `${name}(${dtype}) keeps the dtype`);
      assertClose(out, stored(vals.map(ref), dtype), [3, 4], { atol: 0, rtol: 0 });
    }
    for (const name of ['isnan', 'isinf']) assert.deepEqual(call(name, x).toFlatArray(), new Array<number>(12).fill(0));
    assert.deepEqual(kiln.isfinite(x).toFlatArray(), new Array<number>(12).fill(1));
    assert.deepEqual(kiln.logicalNot(x).toFlatArray(), vals.map((v) => (v === 0 ? 1 : 0)));
    assert.equal(kiln.logicalNot(x).dtype, 'bool');
  }
  // uint8 negation wraps (PyTorch: -3 as uint8 is 253); int32 square wraps modulo 2^32.
  assert.deepEqual(kiln.neg(makeTensor([3, 0], [2], 'uint8')).toArray(), [253, 0]);
  assert.deepEqual(kiln.square(makeTensor([65536, -3], [2], 'int32')).toArray(), [0, 9]);
  const b = makeTensor([1, 0, 1], [3], 'bool');
  assert.equal(kiln.exp(b).dtype, 'float32');
  assertClose(kiln.exp(b), [Math.E, 1, Math.E], [3]);
  assert.equal(kiln.sign(b).dtype, 'bool');
  assert.deepEqual(kiln.sign(b).toArray(), [true, false, true]);
  assert.equal(kiln.square(b).dtype, 'int64');
  assert.deepEqual(kiln.square(b).toArray(), [1, 0, 1]);
  assert.deepEqual(kiln.logicalNot(b).toArray(), [false, true, false]);
});

test('unary ops reject bool where PyTorch does, and non-tensors', () => {
  const b = makeTensor([1, 0], [2], 'bool');
  for (const name of ['neg', 'abs', 'relu', 'floor', 'ceil', 'round', 'trunc']) assertThrowsWith(() => call(name, b), name, 'bool', '[2]');
  assertThrowsWith(() => kiln.gelu(b), 'gelu', 'bool', 'not implemented');
  assertThrowsWith(() => kiln.exp(3 as unknown as Tensor), 'exp', "'self'", 'Tensor');
});

test('unary ops on empty, zero-dim and size-1 tensors', () => {
  const e = makeTensor([], [0, 3]);
  const out = kiln.exp(e);
  assert.deepEqual([...out.shape], [0, 3]);
  assert.equal(out.numel(), 0);
  const z = makeTensor([0.25], []);
  assertClose(kiln.sigmoid(z), [sigmoidRef(0.25)], []);
  assert.deepEqual([...kiln.erf(makeTensor([0.5], [1, 1, 1])).shape], [1, 1, 1]);
});

test('in-place unary ops write through strides, keep the storage and leave gaps untouched', () => {
  const cases: [string, Ref][] = [
    ['relu_', (x) => Math.max(x, 0)],
    ['neg_', (x) => -x],
    ['exp_', Math.exp],
    ['sigmoid_', sigmoidRef],
    ['tanh_', Math.tanh],
  ];
  for (const [name, ref] of cases) {
    for (const [layout, dtype] of [['strided', 'float32'], ['transposed', 'float16'], ['channelsLast', 'bfloat16'], ['contiguous', 'float32']] as [Layout, DType][]) {
      const vals = randomValues(36, 8, -2, 2);
      const x = makeTensor(vals, SHAPE, dtype, layout);
      const storage = x.storage;
      const before = new Uint8Array(storage.cpuArrayBuffer().slice(0));
      const r = (kiln as unknown as Record<string, (t: Tensor) => Tensor>)[name]!(x);
      assert.equal(r, x, `${name} returns self`);
      assert.equal(x.storage, storage);
      assertClose(x, stored(vals, dtype).map(ref), SHAPE, tolFor(dtype));
      if (layout === 'strided') {
        // Elements outside the view (the junk between strided elements) are unchanged.
        const after = new Float32Array(storage.cpuArrayBuffer());
        const orig = new Float32Array(before.buffer);
        assert.equal(after[0], orig[0]);
        assert.equal(after[4], orig[4], 'gap element kept');
      }
    }
  }
  const i = makeTensor([-3, 4], [2], 'int32');
  assert.deepEqual(i.relu_().toArray(), [0, 4]);
  assert.deepEqual(i.neg_().toArray(), [0, -4]);
  assert.equal(i.dtype, 'int32');
  assertThrowsWith(() => makeTensor([1, 2], [2], 'int32').exp_(), 'exp_', 'float32', 'int32', "can't be cast");
  assertThrowsWith(() => makeTensor([1, 2], [2], 'int64').sigmoid_(), 'sigmoid_', 'int64');
  assertThrowsWith(() => makeTensor([1, 0], [2], 'bool').relu_(), 'relu_', 'bool');
  assertThrowsWith(() => makeExpanded([1, 2], [2], [3, 2]).tanh_(), 'tanh_', 'single memory location', '[3, 2]');
});
