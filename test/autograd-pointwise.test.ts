/**
 * Backward formulas of the pointwise ops: gradcheck (float64 central differences) for every
 * differentiable op, with broadcasting and non-contiguous inputs; exact gradients at the points
 * where PyTorch fixes a convention (relu'(0), abs'(0), clamp bounds, maximum ties, pow at 0).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import * as P from '../src/ops/defs/pointwise.js';
import { listOps } from '../src/ops/registry.js';
import { Device } from '../src/runtime/device.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeTensor, randomValues, rng } from './helpers/make.js';
import { erfRef } from './helpers/pointwise-ref.js';

const { gradcheck } = kiln;

/** A float64 leaf that requires grad. */
function leaf(values: readonly number[], shape: readonly number[], layout: Layout = 'contiguous'): Tensor {
  return makeTensor(values, shape, 'float64', layout).requiresGrad_();
}

function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Random values in [lo, hi]. */
function uniform(shape: readonly number[], seed: number, lo: number, hi: number, layout: Layout = 'contiguous'): Tensor {
  return leaf(randomValues(numelOf(shape), seed, lo, hi), shape, layout);
}

/** Random values with |x| in [0.3, 2], either sign (away from kinks at 0). */
function awayFromZero(shape: readonly number[], seed: number, layout: Layout = 'contiguous'): Tensor {
  const r = rng(seed);
  const v = Array.from({ length: numelOf(shape) }, () => (r() < 0.5 ? -1 : 1) * (0.3 + 1.7 * r()));
  return leaf(v, shape, layout);
}

function gradOf(x: Tensor): number[] {
  assert.ok(x.grad, 'expected a gradient');
  return x.grad.toFlatArray();
}

/** Backward from a non-scalar output with an all-ones seed (sum's own formula belongs to the reduction group). */
function back(y: Tensor): void {
  y.backward(kiln.onesLike(y));
}

const LAYOUTS: Layout[] = ['transposed', 'strided'];

// ---------------------------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------------------------

/** [name, fn, input range]; ranges avoid singular and non-differentiable points. */
const UNARY: [string, (x: Tensor) => Tensor, number, number][] = [
  ['exp', (x) => x.exp(), -2, 2],
  ['expm1', (x) => x.expm1(), -2, 2],
  ['log', (x) => x.log(), 0.2, 3],
  ['log2', (x) => x.log2(), 0.2, 3],
  ['log10', (x) => x.log10(), 0.2, 3],
  ['log1p', (x) => x.log1p(), -0.6, 3],
  ['sqrt', (x) => x.sqrt(), 0.2, 3],
  ['rsqrt', (x) => x.rsqrt(), 0.2, 3],
  ['square', (x) => x.square(), -2, 2],
  ['sin', (x) => x.sin(), -3, 3],
  ['cos', (x) => x.cos(), -3, 3],
  ['tan', (x) => x.tan(), -1.2, 1.2],
  ['tanh', (x) => x.tanh(), -2, 2],
  ['sigmoid', (x) => x.sigmoid(), -3, 3],
  ['erf', (x) => x.erf(), -2, 2],
  ['silu', (x) => x.silu(), -3, 3],
  ['gelu(none)', (x) => x.gelu(), -3, 3],
  ['gelu(tanh)', (x) => x.gelu('tanh'), -3, 3],
  ['softplus', (x) => x.softplus(), -3, 3],
  ['softplus(beta 0.5)', (x) => x.softplus(0.5, 20), -3, 3],
];

test('unary ops: gradcheck on non-contiguous inputs', () => {
  let seed = 1;
  for (const [name, fn, lo, hi] of UNARY) {
    for (const layout of LAYOUTS) {
      const x = uniform([2, 3], seed++, lo, hi, layout);
      assert.doesNotThrow(() => gradcheck(fn, [x]), `${name} ${layout}`);
    }
  }
});

test('unary ops with kinks at 0: gradcheck away from 0 (neg, abs, reciprocal, relu)', () => {
  const fns: [string, (x: Tensor) => Tensor][] = [
    ['neg', (x) => x.neg()],
    ['abs', (x) => x.abs()],
    ['reciprocal', (x) => x.reciprocal()],
    ['relu', (x) => x.relu()],
  ];
  let seed = 100;
  for (const [name, fn] of fns) {
    for (const layout of LAYOUTS) assert.doesNotThrow(() => gradcheck(fn, [awayFromZero([3, 2], seed++, layout)]), `${name} ${layout}`);
  }
});

test('softplus: gradcheck across the threshold (linear region) with beta and threshold', () => {
  // beta x = 2x; threshold 1: values on both sides, none near 2x = 1.
  const x = leaf([-1.5, -0.2, 0.1, 0.3, 0.8, 1.7], [2, 3], 'strided');
  gradcheck((t) => t.softplus(2, 1), [x]);
  // In the linear region the gradient is exactly g.
  const y = leaf([30, 40], [2]);
  back(y.softplus());
  assert.deepEqual(gradOf(y), [1, 1]);
});

test('step functions (sign, floor, ceil, round, trunc): zero gradient, like PyTorch', () => {
  const vals = [0.2, -1.3, 2.35, -0.15, 1.1, -2.2];
  for (const name of ['sign', 'floor', 'ceil', 'round', 'trunc'] as const) {
    const x = leaf(vals, [2, 3], 'transposed');
    gradcheck((t) => t[name]().mul(t), [x]);
    const y = leaf(vals, [6]);
    back(y[name]());
    assert.deepEqual(gradOf(y), [0, 0, 0, 0, 0, 0], name);
  }
});

test('conventions: relu\'(0) = 0, abs\'(0) = 0, sqrt\'(0) = inf, log\'(0) = inf', () => {
  const x = leaf([-1, 0, 2], [3]);
  back(x.relu());
  assert.deepEqual(gradOf(x), [0, 0, 1]);
  const a = leaf([-1, 0, 2], [3]);
  back(a.abs());
  assert.deepEqual(gradOf(a), [-1, 0, 1]);
  const s = leaf([0, 4], [2]);
  back(s.sqrt());
  assert.deepEqual(gradOf(s), [Infinity, 0.25]);
  const l = leaf([0, 4], [2]);
  back(l.log());
  assert.deepEqual(gradOf(l), [Infinity, 0.25]);
});

test('gelu: exact derivative values (erf and tanh forms)', () => {
  const pts = [-1.5, 0, 0.7];
  const phi = (v: number): number => Math.exp(-v * v / 2) / Math.sqrt(2 * Math.PI);
  const x = leaf(pts, [3]);
  back(x.gelu());
  const dRef = (v: number): number => 0.5 * (1 + erfRef(v / Math.SQRT2)) + v * phi(v);
  assertClose(x.grad!, pts.map(dRef), [3], { atol: 1e-7, rtol: 1e-7 });
  const y = leaf(pts, [3]);
  back(y.gelu('tanh'));
  const b = Math.sqrt(2 / Math.PI);
  const k = 0.044715;
  const tanhRef = (v: number): number => {
    const t = Math.tanh(b * (v + k * v ** 3));
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * b * (1 + 3 * k * v * v);
  };
  assertClose(y.grad!, pts.map(tanhRef), [3], { atol: 1e-12, rtol: 1e-12 });
});

test('in-place unary ops on non-leaves: gradcheck (relu_, neg_, exp_, sigmoid_, tanh_)', () => {
  const fns: [string, (x: Tensor) => Tensor][] = [
    ['relu_', (x) => x.mul(1.5).relu_()],
    ['neg_', (x) => x.mul(1.5).neg_()],
    ['exp_', (x) => x.mul(1.5).exp_()],
    ['sigmoid_', (x) => x.mul(1.5).sigmoid_()],
    ['tanh_', (x) => x.mul(1.5).tanh_()],
  ];
  let seed = 200;
  for (const [name, fn] of fns) assert.doesNotThrow(() => gradcheck(fn, [awayFromZero([2, 3], seed++, 'transposed')]), name);
});

test('in-place ops on a leaf that requires grad are rejected', () => {
  const x = leaf([1, 2], [2]);
  assertThrowsWith(() => x.relu_(), 'relu_', 'leaf');
  assertThrowsWith(() => x.mul_(2), 'mul_', 'leaf');
});

// ---------------------------------------------------------------------------------------------
// Binary
// ---------------------------------------------------------------------------------------------

test('sub / mul / div: gradcheck with broadcasting, scalars and non-contiguous inputs', () => {
  const a = uniform([2, 3], 1, -2, 2, 'transposed');
  const b = uniform([3], 2, -2, 2, 'strided');
  gradcheck((x, y) => x.sub(y, 2.5), [a, b]);
  gradcheck((x, y) => y.sub(x), [a, b]);
  gradcheck((x) => x.sub(0.5), [a]);
  const c = uniform([2, 1, 3], 3, -2, 2, 'strided');
  const d = uniform([4, 1], 4, -2, 2, 'transposed');
  gradcheck((x, y) => x.mul(y), [c, d]);
  gradcheck((x) => x.mul(-1.75), [c]);
  const e = awayFromZero([4, 1], 5, 'transposed');
  gradcheck((x, y) => x.div(y), [c, e]);
  gradcheck((x, y) => y.div(x), [awayFromZero([2, 1, 3], 6, 'strided'), d]);
  gradcheck((x) => x.div(3), [c]);
});

test('mul/div: only the tensor that requires grad gets one', () => {
  const x = leaf([1, 2, 3], [3]);
  const k = makeTensor([4, 5, 6], [3], 'float64');
  back(x.mul(k).div(k.mul(2)));
  assertClose(x.grad!, [0.5, 0.5, 0.5], [3]);
  assert.equal(k.grad, null);
});

test('div with roundingMode trunc/floor: zero gradients for both inputs', () => {
  for (const mode of ['trunc', 'floor'] as const) {
    const x = leaf([1.5, -2.7, 3.2], [3]);
    const y = leaf([0.7, 1.3, -2.1], [3]);
    back(x.div(y, mode));
    assert.deepEqual(gradOf(x), [0, 0, 0]);
    assert.deepEqual(gradOf(y), [0, 0, 0]);
  }
});

test('remainder: gradcheck tensor-tensor (broadcast), tensor-scalar and scalar-tensor', () => {
  // a / b has fractional part in [0.2, 0.8]: away from the jumps.
  const r = rng(7);
  const bv = Array.from({ length: 3 }, () => (r() < 0.5 ? -1 : 1) * (1 + r()));
  const av: number[] = [];
  for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) av.push(bv[j]! * (Math.floor(r() * 6) - 3 + 0.2 + 0.6 * r()));
  const a = leaf(av, [2, 3], 'strided');
  const b = leaf(bv, [3]);
  gradcheck((x, y) => x.remainder(y), [a, b]);
  gradcheck((x) => x.remainder(1.3), [leaf([0.4, 2.1, -0.5, -3.4], [4], 'transposed')]);
  // 5 / y has fractional parts 0.5, 0.333.., 0.25, 0.75.
  gradcheck((y) => kiln.remainder(5, y), [leaf([2, 1.5, 4, -2], [2, 2], 'transposed')]);
  const y = leaf([2, 1.5, 4, -2], [4]);
  back(kiln.remainder(5, y));
  assert.deepEqual(gradOf(y), [-2, -3, -1, 3]);
});

test('pow: tensor^scalar, tensor^tensor (broadcast), scalar^tensor', () => {
  const pos = uniform([2, 3], 8, 0.3, 2, 'transposed');
  gradcheck((x) => x.pow(2.5), [pos]);
  gradcheck((x) => x.pow(-1.5), [pos]);
  gradcheck((x) => x.pow(3), [uniform([2, 3], 9, -2, 2, 'strided')]);
  const e = uniform([3], 10, -2, 2, 'strided');
  gradcheck((x, y) => x.pow(y), [pos, e]);
  gradcheck((y) => kiln.pow(2.5, y), [uniform([2, 2], 11, -2, 2, 'transposed')]);
  gradcheck((y) => kiln.pow(0.5, y), [uniform([3], 12, -2, 2)]);
});

test('pow conventions: x^0 has zero gradient; d/dexponent is 0 where base == 0 and exponent >= 0', () => {
  const x = leaf([0, 2, -3], [3]);
  back(x.pow(0));
  assert.deepEqual(gradOf(x), [0, 0, 0]);
  const b = leaf([0, 0, 2], [3]);
  const e = leaf([0, 2, 3], [3]);
  back(b.pow(e));
  assert.deepEqual(gradOf(b), [0, 0, 12]); // exponent 0 -> 0; 2 * 0^1 = 0; 3 * 2^2
  assertClose(e.grad!, [0, 0, 8 * Math.log(2)], [3]);
  const y = leaf([0, 1.5, -1], [3]);
  back(kiln.pow(0, y));
  const gy = gradOf(y);
  assert.equal(gy[0], 0);
  assert.equal(gy[1], 0);
  assert.ok(Number.isNaN(gy[2]!) || !Number.isFinite(gy[2]!), `0^-1: got ${gy[2]}`);
});

test('maximum / minimum / atan2: gradcheck with broadcasting (no ties)', () => {
  const a = uniform([2, 3], 13, -2, 2, 'transposed');
  const b = uniform([3], 14, -2, 2, 'strided');
  gradcheck((x, y) => x.maximum(y), [a, b]);
  gradcheck((x, y) => x.minimum(y), [a, b]);
  gradcheck((x, y) => x.atan2(y), [a, b]);
  gradcheck((x, y) => y.atan2(x), [awayFromZero([2, 3], 15, 'strided'), b]);
});

test('maximum / minimum ties split the gradient half/half (PyTorch)', () => {
  for (const op of ['maximum', 'minimum'] as const) {
    const x = leaf([1, 2, 3], [3]);
    const y = leaf([1, 5, 0], [3]);
    back(x[op](y).mul(makeTensor([2, 2, 2], [3], 'float64')));
    const hi = op === 'maximum';
    assert.deepEqual(gradOf(x), [1, hi ? 0 : 2, hi ? 2 : 0], `${op} self`);
    assert.deepEqual(gradOf(y), [1, hi ? 2 : 0, hi ? 0 : 2], `${op} other`);
  }
  // Broadcast tie: y (1 element) ties with two entries of x.
  const x = leaf([1, 1, 0], [3]);
  const y = leaf([1], [1]);
  back(x.maximum(y));
  assert.deepEqual(gradOf(x), [0.5, 0.5, 0]);
  assert.deepEqual(gradOf(y), [2]);
});

// ---------------------------------------------------------------------------------------------
// clamp, where, lerp
// ---------------------------------------------------------------------------------------------

test('clamp with scalar bounds: gradcheck (min, max, both) away from the bounds', () => {
  const x = leaf([-1.7, -0.8, -0.2, 0.3, 0.9, 1.6], [2, 3], 'transposed');
  gradcheck((t) => t.clamp(-0.5, 0.5), [x]);
  gradcheck((t) => t.clamp(0), [x]);
  gradcheck((t) => t.clamp(null, 0.6), [x]);
});

test('clamp passes the gradient where min <= x <= max (bounds included)', () => {
  const x = leaf([-2, -1, 0, 1, 2], [5]);
  back(x.clamp(-1, 1));
  assert.deepEqual(gradOf(x), [0, 1, 1, 1, 0]);
  const t = leaf([-2, -1, 0, 1, 2], [5]);
  const lo = leaf([-1], [1]);
  const hi = leaf([1, 1, 1, 1, 1], [5]);
  back(t.clamp(lo, hi));
  assert.deepEqual(gradOf(t), [0, 1, 1, 1, 0]);
  assert.deepEqual(gradOf(lo), [1]);
  assert.deepEqual(gradOf(hi), [0, 0, 0, 0, 1]);
  // min > max: the result is max everywhere, so max gets every gradient.
  const u = leaf([0, 5], [2]);
  const mn = leaf([2, 2], [2]);
  const mx = leaf([1, 1], [2]);
  back(u.clamp(mn, mx));
  assert.deepEqual(gradOf(u), [0, 0]);
  assert.deepEqual(gradOf(mn), [0, 0]);
  assert.deepEqual(gradOf(mx), [1, 1]);
});

test('clamp with tensor bounds: gradcheck with broadcasting (min and max, min only, max only)', () => {
  const x = leaf([-1.7, -0.8, -0.2, 0.3, 0.9, 1.6], [2, 3], 'strided');
  const lo = leaf([-0.5, 0.1, -1.2], [3], 'transposed');
  const hi = leaf([0.5, 1.2], [2, 1]);
  gradcheck((t, a, b) => t.clamp(a, b), [x, lo, hi]);
  gradcheck((t, a) => t.clamp(a), [x, lo]);
  gradcheck((t, b) => t.clamp(null, b), [x, hi]);
  // A scalar bound mixed with a tensor bound becomes a 0-dim tensor (no grad).
  gradcheck((t, b) => t.clamp(-0.5, b), [x, hi]);
});

test('in-place binary ops and clamp_ on non-leaves: gradcheck, other broadcast', () => {
  const x = uniform([2, 3], 16, -2, 2, 'transposed');
  const o = awayFromZero([3], 17, 'strided');
  gradcheck((a, b) => a.mul(1).sub_(b, 2), [x, o]);
  gradcheck((a, b) => a.mul(1).mul_(b), [x, o]);
  gradcheck((a, b) => a.mul(1).div_(b), [x, o]);
  gradcheck((a) => a.mul(1).div_(2.5), [x]);
  gradcheck((a) => a.mul(1).mul_(a), [x]);
  const c = leaf([-1.7, -0.8, -0.2, 0.3, 0.9, 1.6], [2, 3], 'strided');
  gradcheck((a) => a.mul(1).clamp_(-0.5, 0.5), [c]);
  const lo = leaf([-0.5, 0.1, -1.2], [3]);
  const hi = leaf([0.5, 1.2], [2, 1]);
  gradcheck((a, l, h) => a.mul(1).clamp_(l, h), [c, lo, hi]);
});

test('where: gradcheck with broadcasting and a scalar branch; the condition gets no gradient', () => {
  const cond = makeTensor([1, 0, 0, 1, 1, 0], [2, 3], 'bool', 'transposed');
  const a = uniform([2, 3], 18, -2, 2, 'strided');
  const b = uniform([3], 19, -2, 2);
  gradcheck((x, y) => kiln.where(cond, x, y), [a, b]);
  gradcheck((x) => kiln.where(cond, 1.5, x), [b]);
  const x = leaf([1, 2, 3], [3]);
  const y = leaf([4], [1]);
  back(kiln.where(makeTensor([1, 0, 1], [3], 'bool'), x, y));
  assert.deepEqual(gradOf(x), [1, 0, 1]);
  assert.deepEqual(gradOf(y), [1]);
});

test('lerp: gradcheck with tensor weight (broadcast) and scalar weight', () => {
  const a = uniform([2, 3], 20, -2, 2, 'transposed');
  const b = uniform([3], 21, -2, 2, 'strided');
  const w = uniform([2, 1], 22, 0, 1);
  gradcheck((x, y, z) => x.lerp(y, z), [a, b, w]);
  gradcheck((x, y) => x.lerp(y, 0.3), [a, b]);
  gradcheck((x, y) => y.lerp(x, 0.7), [a, b]);
});

test('fill_ / zero_: no gradient to the old value of self; a tensor fill value gets the sum', () => {
  const x = uniform([2, 3], 23, -2, 2, 'transposed');
  const v = leaf([0.7], []);
  gradcheck(
    (a, val) => {
      const h = a.mul(2);
      h.fill_(val);
      return h.mul(a);
    },
    [x, v],
  );
  gradcheck(
    (a) => {
      const h = a.mul(2);
      h.zero_();
      return h.add(a.mul(a));
    },
    [x],
  );
  const y = leaf([1, 2, 3], [3]);
  const h = y.mul(2);
  h.fill_(5);
  back(h);
  assert.deepEqual(gradOf(y), [0, 0, 0]);
  const z = leaf([1, 2, 3], [3]);
  const val = leaf([4], []);
  const k = z.mul(1);
  k.fill_(val);
  back(k.mul(makeTensor([1, 2, 3], [3], 'float64')));
  assert.deepEqual(gradOf(val), [6]);
  assert.deepEqual(gradOf(z), [0, 0, 0]);
});

test('float32 inputs get float32 gradients', () => {
  const x = makeTensor([0.5, 1, 2], [3], 'float32').requiresGrad_();
  const y = makeTensor([1, 2, 3], [3], 'float64').requiresGrad_();
  back(x.mul(y).exp());
  assert.equal(x.grad!.dtype, 'float32');
  assert.equal(y.grad!.dtype, 'float64');
  assertClose(x.grad!, [0.5, 1, 2].map((v, i) => (i + 1) * Math.exp(v * (i + 1))), [3], { rtol: 1e-6 });
});

// ---------------------------------------------------------------------------------------------
// Coverage
// ---------------------------------------------------------------------------------------------

/**
 * Pointwise ops deliberately left without a formula: every one has a bool output, which never
 * requires grad (comparisons, logical ops, and the isnan/isinf/isfinite predicates).
 */
const NON_DIFFERENTIABLE = new Set(['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logicalAnd', 'logicalOr', 'logicalXor', 'logicalNot', 'isnan', 'isinf', 'isfinite']);

test('every pointwise op has a backward formula, except the allow-listed bool-output ops', () => {
  const names = new Set(Object.values(P).flatMap((v) => (typeof v === 'object' && v !== null && 'kernels' in v && 'name' in v ? [(v as { name: string }).name] : [])));
  const ops = listOps().filter((op) => names.has(op.name));
  assert.ok(ops.length >= 60, `found only ${ops.length} pointwise ops`);
  const f32 = { shape: [2], strides: [1], dtype: 'float32' as const, device: new Device('cpu') };
  const missing: string[] = [];
  for (const op of ops) {
    if (NON_DIFFERENTIABLE.has(op.name)) {
      // The allow-list holds only ops whose output is bool even for float inputs.
      const metaArgs = op.args.map(() => f32);
      const out = (op.meta as (...a: unknown[]) => { dtype: string })(...metaArgs);
      assert.equal(out.dtype, 'bool', `${op.name} is allow-listed but its output is ${out.dtype}`);
      assert.equal(op.backward, undefined, `${op.name} is allow-listed but has a formula`);
    } else if (op.backward === undefined) missing.push(op.name);
  }
  assert.deepEqual(missing, [], `pointwise ops without a backward formula: ${missing.join(', ')}`);
});
