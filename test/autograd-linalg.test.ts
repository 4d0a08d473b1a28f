/**
 * Backward formulas of the linalg group: gradchecks (float64 finite differences) for every
 * differentiable op, with broadcasting and non-contiguous inputs, plus exact checks of conventions
 * (running statistics get no gradient, addmm's beta = 0, mode switches of batchNorm).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { gradcheck } from '../src/autograd/gradcheck.js';
import * as L from '../src/ops/defs/linalg.js';
import { listOps } from '../src/ops/registry.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose } from './helpers/assert.js';
import { type Layout, makeTensor, randomValues } from './helpers/make.js';

let seed = 100;
/** A float64 leaf that requires grad, with values in [-2, 2). */
function leaf(shape: number[], layout: Layout = 'contiguous', lo = -2, hi = 2): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(randomValues(n, seed++, lo, hi), shape, 'float64', layout).requiresGrad_();
}
/** Backward with a ones gradient (without sum(), whose formula belongs to another group). */
function backwardOnes(y: Tensor): void {
  y.backward(kiln.onesLike(y));
}
function constant(shape: number[], lo = -2, hi = 2): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(randomValues(n, seed++, lo, hi), shape, 'float64');
}

test('every linalg op with a floating output has a backward formula', () => {
  const names = new Set(Object.values(L).flatMap((v) => (typeof v === 'object' && v !== null && 'name' in v && 'meta' in v ? [(v as { name: string }).name] : [])));
  // Non-differentiable linalg ops: none (every op of the group is differentiable).
  const allowList = new Set<string>([]);
  const ops = listOps().filter((op) => names.has(op.name));
  assert.ok(ops.length >= 10, `found ${ops.length} linalg ops`);
  const missing = ops.filter((op) => !allowList.has(op.name) && op.backward === undefined).map((op) => op.name);
  assert.deepEqual(missing, []);
});

test('matmul gradients: 1-d x 1-d, 1-d x n-d, n-d x 1-d, 2-d x 2-d', () => {
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([4]), leaf([4])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([3]), leaf([3, 2])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([3]), leaf([2, 3, 2])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 2, 3]), leaf([3])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 3]), leaf([3])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 3]), leaf([3, 4])]);
});

test('matmul gradients with batch broadcasting are reduced over the broadcast batch dims', () => {
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 1, 2, 3]), leaf([3, 3, 2])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 3]), leaf([2, 3, 2])]);
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([2, 2, 3]), leaf([3, 2])]);
  // Exact: a [2, 3] shared by every batch of b [4, 3, 2] gets the sum of the per-batch gradients.
  const a = leaf([2, 3]);
  const b = leaf([4, 3, 2]);
  backwardOnes(kiln.matmul(a, b));
  const bv = b.toArray() as number[][][];
  const expected: number[] = [];
  for (let i = 0; i < 2; i++) for (let k = 0; k < 3; k++) expected.push(bv.reduce((s, m) => s + m[k]![0]! + m[k]![1]!, 0));
  assertClose(a.grad!, expected, [2, 3], { atol: 1e-12, rtol: 1e-12 });
});

test('matmul, mm, bmm, dot gradients with non-contiguous inputs', () => {
  gradcheck((a, b) => kiln.matmul(a!, b!), [leaf([3, 2], 'transposed'), leaf([2, 2, 4], 'strided')]);
  gradcheck((a, b) => kiln.mm(a!, b!), [leaf([3, 4]), leaf([4, 2])]);
  gradcheck((a, b) => kiln.mm(a!, b!), [leaf([3, 4], 'transposed'), leaf([4, 2], 'strided')]);
  gradcheck((a, b) => kiln.bmm(a!, b!), [leaf([2, 3, 4]), leaf([2, 4, 2], 'transposed')]);
  gradcheck((a, b) => kiln.dot(a!, b!), [leaf([5]), leaf([5], 'strided')]);
  // Only one operand requiring grad.
  gradcheck((a, b) => kiln.mm(a!, b!), [constant([3, 4]), leaf([4, 2])]);
});

test('linear gradients: input, weight and bias, any leading dims, 1-d weight', () => {
  gradcheck((x, w, b) => kiln.linear(x!, w!, b!), [leaf([2, 3, 4]), leaf([5, 4]), leaf([5])]);
  gradcheck((x, w) => kiln.linear(x!, w!), [leaf([4]), leaf([3, 4], 'transposed')]);
  gradcheck((x, w, b) => kiln.linear(x!, w!, b!), [leaf([3, 4], 'strided'), leaf([2, 4]), leaf([1])]);
  gradcheck((x, w, b) => kiln.linear(x!, w!, b!), [leaf([2, 3]), leaf([3]), leaf([])]);
  gradcheck((x, w) => kiln.linear(x!, w!), [leaf([3]), leaf([3])]);
});

test('addmm gradients with beta and alpha, and broadcast self', () => {
  gradcheck((s, a, b) => kiln.addmm(s!, a!, b!, 0.5, -2), [leaf([3, 2]), leaf([3, 4]), leaf([4, 2], 'transposed')]);
  gradcheck((s, a, b) => kiln.addmm(s!, a!, b!), [leaf([2]), leaf([3, 4], 'strided'), leaf([4, 2])]);
  gradcheck((s, a, b) => kiln.addmm(s!, a!, b!, 2, 1), [leaf([1, 1]), leaf([3, 4]), leaf([4, 2])]);
  // beta = 0: self is ignored and gets a zero gradient.
  const s = leaf([3, 2]);
  const a = leaf([3, 4]);
  const b = leaf([4, 2]);
  backwardOnes(kiln.addmm(s, a, b, 0, 3));
  assert.deepEqual(s.grad!.toFlatArray(), [0, 0, 0, 0, 0, 0]);
  assert.equal(s.grad!.dtype, 'float64');
  const rowSums = (b.toArray() as number[][]).map((r) => 3 * (r[0]! + r[1]!));
  assertClose(a.grad!, [0, 1, 2].flatMap(() => rowSums), [3, 4], { atol: 1e-12, rtol: 1e-12 });
});

test('layerNorm gradients: input, weight, bias, one and two normalized dims', () => {
  gradcheck((x, w, b) => kiln.layerNorm(x!, [4], w!, b!), [leaf([2, 3, 4]), leaf([4]), leaf([4])]);
  gradcheck((x, w, b) => kiln.layerNorm(x!, [3, 4], w!, b!, 1e-3), [leaf([2, 3, 4], 'transposed'), leaf([3, 4], 'strided'), leaf([3, 4])]);
  gradcheck((x) => kiln.layerNorm(x!, [5]), [leaf([5], 'strided')]);
  gradcheck((x, b) => kiln.layerNorm(x!, [4], null, b!), [leaf([3, 4]), leaf([4])]);
});

test('rmsNorm gradients: input and weight', () => {
  gradcheck((x, w) => kiln.rmsNorm(x!, [4], w!), [leaf([2, 3, 4]), leaf([4])]);
  gradcheck((x, w) => kiln.rmsNorm(x!, [3, 4], w!, 1e-2), [leaf([2, 3, 4], 'transposed'), leaf([3, 4], 'strided')]);
  gradcheck((x) => kiln.rmsNorm(x!, 6), [leaf([6])]);
});

test('groupNorm gradients: input, weight, bias, channels_last and 3-d input', () => {
  gradcheck((x, w, b) => kiln.groupNorm(x!, 2, w!, b!), [leaf([2, 4, 3, 2]), leaf([4]), leaf([4])]);
  gradcheck((x, w, b) => kiln.groupNorm(x!, 4, w!, b!, 1e-3), [leaf([2, 4, 2, 3], 'channelsLast'), leaf([4], 'strided'), leaf([4])]);
  gradcheck((x) => kiln.groupNorm(x!, 1), [leaf([3, 2, 4], 'transposed')]);
  gradcheck((x, w) => kiln.groupNorm(x!, 3, w!), [leaf([2, 6]), leaf([6])]);
});

test('batchNorm gradients in training mode go through the batch statistics', () => {
  gradcheck((x, w, b) => kiln.batchNorm(x!, null, null, w!, b!, true), [leaf([3, 2, 2, 2]), leaf([2]), leaf([2])]);
  gradcheck((x, w, b) => kiln.batchNorm(x!, null, null, w!, b!, true, 0.1, 1e-3), [leaf([2, 3, 2, 3], 'channelsLast'), leaf([3]), leaf([3])]);
  gradcheck((x) => kiln.batchNorm(x!, null, null, null, null, true), [leaf([4, 3], 'transposed')]);
  // With running statistics: fresh copies each call (the op updates them in place).
  const rm0 = randomValues(2, 7, -1, 1);
  const rv0 = randomValues(2, 8, 0.5, 2);
  gradcheck(
    (x, w) => kiln.batchNorm(x!, makeTensor(rm0, [2], 'float64'), makeTensor(rv0, [2], 'float64'), w!, null, true),
    [leaf([3, 2, 4]), leaf([2])],
  );
});

test('batchNorm gradients in eval mode: affine with the running statistics as constants', () => {
  const rm = constant([3], -1, 1);
  const rv = constant([3], 0.5, 2);
  gradcheck((x, w, b) => kiln.batchNorm(x!, rm, rv, w!, b!, false), [leaf([2, 3, 2, 2], 'channelsLast'), leaf([3]), leaf([3])]);
  gradcheck((x) => kiln.batchNorm(x!, rm, rv, null, null, false, 0.1, 1e-2), [leaf([4, 3], 'strided')]);
  // Exact: dL/dx = w / sqrt(rv + eps) per channel for L = sum(y).
  const x = leaf([2, 3]);
  const w = leaf([3]);
  backwardOnes(kiln.batchNorm(x, rm, rv, w, null, false, 0.1, 1e-5));
  const wv = w.toFlatArray();
  const rvv = rv.toFlatArray();
  const per = wv.map((wi, c) => wi / Math.sqrt(rvv[c]! + 1e-5));
  assertClose(x.grad!, [...per, ...per], [2, 3], { atol: 1e-12, rtol: 1e-12 });
});

test('batchNorm running statistics get no gradient, even when they require grad', () => {
  // Leaves that require grad cannot be passed as (in-place updated) running statistics, so they
  // come through clone(); the clones' nodes receive nothing (zeros) from batchNorm.
  for (const training of [false, true]) {
    const rmLeaf = constant([2], -1, 1).requiresGrad_();
    const rvLeaf = constant([2], 0.5, 2).requiresGrad_();
    const x = leaf([3, 2]);
    backwardOnes(kiln.batchNorm(x, kiln.clone(rmLeaf), kiln.clone(rvLeaf), null, null, training));
    for (const t of [rmLeaf, rvLeaf]) assert.ok(t.grad === null || t.grad.toFlatArray().every((v) => v === 0));
    assert.notEqual(x.grad, null);
  }
});

test('training-mode batchNorm: the sum of the normalised output has zero input gradient', () => {
  const x = leaf([4, 2, 3]);
  backwardOnes(kiln.batchNorm(x, null, null, null, null, true));
  assertClose(x.grad!, new Array<number>(24).fill(0), [4, 2, 3], { atol: 1e-12, rtol: 0 });
});

test('float32 and float16 norm gradients keep the input dtype', () => {
  const x = makeTensor(randomValues(12, 3), [3, 4], 'float16').requiresGrad_();
  const w = makeTensor(randomValues(4, 4), [4], 'float32').requiresGrad_();
  backwardOnes(kiln.layerNorm(x, [4]));
  assert.equal(x.grad!.dtype, 'float16');
  backwardOnes(kiln.rmsNorm(makeTensor(randomValues(8, 5), [2, 4], 'float32'), [4], w));
  assert.equal(w.grad!.dtype, 'float32');
});
