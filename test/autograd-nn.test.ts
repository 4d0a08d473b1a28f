/**
 * Backward formulas of the nn group: gradchecks (float64 finite differences) for conv2d, pooling,
 * attention and dropout, with non-contiguous / channels_last inputs, plus exact checks of the
 * conventions (max pooling's gradient goes to the first maximum of each window; dropout's mask).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { gradcheck, type GradcheckOptions } from '../src/autograd/gradcheck.js';
import * as NN from '../src/ops/defs/nn.js';
import { listOps } from '../src/ops/registry.js';
import { Generator } from '../src/tensor/random.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose } from './helpers/assert.js';
import { type Layout, makeTensor, randomValues } from './helpers/make.js';

let seed = 500;
function leaf(shape: number[], layout: Layout = 'contiguous', lo = -2, hi = 2): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(randomValues(n, seed++, lo, hi), shape, 'float64', layout).requiresGrad_();
}
function constant(shape: number[], lo = -2, hi = 2): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(randomValues(n, seed++, lo, hi), shape, 'float64');
}
/** Backward with a ones gradient (without sum(), whose formula belongs to another group). */
function backwardOnes(y: Tensor): void {
  y.backward(kiln.onesLike(y));
}

/**
 * conv2d's CPU kernel builds its im2col patches in float32 even for float64 tensors, so the forward
 * is only float32-accurate. conv2d is linear in the input and in the weight, so central differences
 * are exact for any step: a large step keeps the float32 rounding of the perturbed values small
 * relative to it. One random projection suffices for a map linear in each argument.
 */
const CONV: GradcheckOptions = { eps: 1e-2, projections: 1 };

test('every nn op with a floating output has a backward formula', () => {
  const names = new Set(Object.values(NN).flatMap((v) => (typeof v === 'object' && v !== null && 'name' in v && 'meta' in v ? [(v as { name: string }).name] : [])));
  // Non-differentiable nn ops: none (every op of the group has a floating, differentiable output).
  const allowList = new Set<string>([]);
  const ops = listOps().filter((op) => names.has(op.name));
  assert.deepEqual(ops.map((o) => o.name).sort(), ['avgPool2d', 'conv2d', 'dropout', 'maxPool2d', 'maxPool2dWithIndices', 'scaledDotProductAttention']);
  const missing = ops.filter((op) => !allowList.has(op.name) && op.backward === undefined).map((op) => op.name);
  assert.deepEqual(missing, []);
});

// ---------------------------------------------------------------------------------------------
// conv2d

test('conv2d gradients (input, weight, bias): padding, stride 2, dilation 2', () => {
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 1, 1), [leaf([2, 4, 5, 5]), leaf([3, 4, 3, 3]), leaf([3])], CONV);
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 2, 1), [leaf([2, 4, 5, 5]), leaf([3, 4, 3, 3]), leaf([3])], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!, null, 1, [2, 1], 2), [leaf([2, 4, 5, 5]), leaf([2, 4, 2, 3])], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!, null, [2, 1], 0, [1, 2]), [leaf([2, 4, 5, 5]), leaf([2, 4, 3, 2])], CONV);
});

test('conv2d gradients: groups 2, asymmetric 4-value padding, unbatched input', () => {
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 1, 1, 1, 2), [leaf([2, 4, 5, 5]), leaf([4, 2, 3, 3]), leaf([4])], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!, null, 2, 0, 2, 2), [leaf([2, 4, 5, 5]), leaf([2, 2, 2, 2])], CONV);
  // [top, bottom, left, right]
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 1, [1, 0, 2, 1]), [leaf([2, 4, 5, 5]), leaf([2, 4, 3, 3]), leaf([2])], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!, null, 1, 'same', 2), [leaf([1, 4, 5, 5]), leaf([2, 4, 2, 2])], CONV);
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 1, 1), [leaf([4, 5, 5]), leaf([2, 4, 3, 3]), leaf([2])], CONV);
});

test('conv2d gradients with channels_last / strided input and weight', () => {
  gradcheck((x, w, b) => kiln.conv2d(x!, w!, b!, 2, 1, 1, 2), [leaf([2, 4, 5, 5], 'channelsLast'), leaf([4, 2, 3, 3]), leaf([4])], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!, null, 1, 1, 2), [leaf([2, 4, 5, 5], 'strided'), leaf([2, 4, 3, 3], 'channelsLast')], CONV);
  gradcheck((x, w) => kiln.conv2d(x!, w!), [leaf([2, 4, 5, 5], 'transposed'), leaf([2, 4, 2, 2], 'strided')], CONV);
});

test('conv2d input gradient equals the transposed convolution (exact sums for a ones kernel)', () => {
  // 1 channel, 3x3 ones kernel, padding 1: dL/dx[i, j] = number of outputs whose window covers (i, j).
  const x = leaf([1, 1, 4, 4]);
  const w = makeTensor(new Array<number>(9).fill(1), [1, 1, 3, 3], 'float64').requiresGrad_();
  backwardOnes(kiln.conv2d(x, w, null, 1, 1));
  const cover = (i: number): number => (i === 0 || i === 3 ? 2 : 3);
  const expected: number[] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) expected.push(cover(i) * cover(j));
  assertClose(x.grad!, expected, [1, 1, 4, 4], { atol: 0, rtol: 0 });
  // dL/dw[a, b] = sum of the input values the tap (a, b) saw.
  const xv = x.toFlatArray();
  const wExp: number[] = [];
  for (let a = 0; a < 3; a++) {
    for (let b = 0; b < 3; b++) {
      let s = 0;
      for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) if (i + a - 1 >= 0 && i + a - 1 < 4 && j + b - 1 >= 0 && j + b - 1 < 4) s += xv[(i + a - 1) * 4 + j + b - 1]!;
      wExp.push(s);
    }
  }
  assertClose(w.grad!, wExp, [1, 1, 3, 3], { atol: 1e-6, rtol: 1e-6 });
});

// ---------------------------------------------------------------------------------------------
// pooling

test('maxPool2d and maxPool2dWithIndices gradients', () => {
  gradcheck((x) => kiln.maxPool2d(x!, 2), [leaf([2, 3, 4, 4])]);
  gradcheck((x) => kiln.maxPool2d(x!, 3, 1, 1), [leaf([2, 2, 5, 5], 'channelsLast')]);
  gradcheck((x) => kiln.maxPool2d(x!, 2, 2, 1, 2, true), [leaf([1, 2, 5, 5], 'strided')]);
  gradcheck((x) => kiln.maxPool2d(x!, [3, 2], [2, 1], [1, 0], 1, true), [leaf([3, 5, 4], 'transposed')]);
  gradcheck((x) => kiln.maxPool2dWithIndices(x!, 3, 2, 1).values, [leaf([2, 2, 5, 5])]);
  gradcheck((x) => {
    const r = kiln.maxPool2dWithIndices(x!, 2, 1);
    return [r.values, r.indices];
  }, [leaf([2, 4, 4], 'strided')]);
});

test('max pooling sends each window gradient to its first maximum; overlapping windows accumulate', () => {
  // 1x1x3x3, kernel 2, stride 1: four windows. The 9 is the max of all four; ties (the two 5s in
  // one window) go to the first one in scan order, as torch's kernel picks it.
  const vals = [1, 5, 5, 2, 9, 3, 0, 4, 8];
  for (const withIdx of [false, true]) {
    const x = makeTensor(vals, [1, 1, 3, 3], 'float64').requiresGrad_();
    const y = withIdx ? kiln.maxPool2dWithIndices(x, 2, 1).values : kiln.maxPool2d(x, 2, 1);
    y.backward(makeTensor([1, 2, 3, 4], [1, 1, 2, 2], 'float64'));
    assert.deepEqual(x.grad!.toFlatArray(), [0, 0, 0, 0, 10, 0, 0, 0, 0]);
  }
  const x = makeTensor([7, 7, 1, 2, 6, 6, 3, 4], [1, 2, 2, 2], 'float64').requiresGrad_();
  backwardOnes(kiln.maxPool2d(x, 2));
  assert.deepEqual(x.grad!.toFlatArray(), [1, 0, 0, 0, 1, 0, 0, 0]);
});

test('avgPool2d gradients for every option', () => {
  gradcheck((x) => kiln.avgPool2d(x!, 2), [leaf([2, 3, 4, 4])]);
  gradcheck((x) => kiln.avgPool2d(x!, 3, 2, 1), [leaf([2, 2, 5, 5], 'channelsLast')]);
  gradcheck((x) => kiln.avgPool2d(x!, 3, 2, 1, false, false), [leaf([1, 2, 5, 5], 'strided')]);
  gradcheck((x) => kiln.avgPool2d(x!, 3, 2, 1, true, true), [leaf([1, 2, 6, 6])]);
  gradcheck((x) => kiln.avgPool2d(x!, 3, 2, 1, true, false), [leaf([1, 2, 6, 6])]);
  gradcheck((x) => kiln.avgPool2d(x!, [2, 3], [1, 2], [1, 1], true, true, 5), [leaf([2, 5, 5], 'transposed')]);
  gradcheck((x) => kiln.avgPool2d(x!, 2, null, 0, false, true, -3), [leaf([1, 1, 4, 5])]);
  // Exact: kernel 2, stride 1 on 3x3: the centre is in all 4 windows, each dividing by 4.
  const x = leaf([1, 1, 3, 3]);
  backwardOnes(kiln.avgPool2d(x, 2, 1));
  assert.deepEqual(x.grad!.toFlatArray(), [0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25]);
});

// ---------------------------------------------------------------------------------------------
// scaled dot-product attention

const sdpa = kiln.scaledDotProductAttention;

test('scaledDotProductAttention gradients for query, key and value', () => {
  gradcheck((q, k, v) => sdpa(q!, k!, v!), [leaf([2, 2, 3, 4]), leaf([2, 2, 5, 4]), leaf([2, 2, 5, 3])]);
  gradcheck((q, k, v) => sdpa(q!, k!, v!, null, 0, false, 0.7), [leaf([3, 4], 'transposed'), leaf([2, 4], 'strided'), leaf([2, 2])]);
  // Batch broadcasting: key/value without the batch dim, query with it.
  gradcheck((q, k, v) => sdpa(q!, k!, v!), [leaf([2, 2, 3, 4]), leaf([2, 4, 4]), leaf([1, 2, 4, 3])]);
});

test('scaledDotProductAttention gradients with causal, bool and additive masks', () => {
  gradcheck((q, k, v) => sdpa(q!, k!, v!, null, 0, true), [leaf([2, 4, 3]), leaf([2, 4, 3]), leaf([2, 4, 2])]);
  gradcheck((q, k, v) => sdpa(q!, k!, v!, null, 0, true), [leaf([1, 3, 3]), leaf([1, 5, 3]), leaf([1, 5, 2])]);
  const bool = kiln.tensor([
    [true, false, true, true],
    [false, true, true, false],
    [true, true, false, true],
  ]);
  gradcheck((q, k, v) => sdpa(q!, k!, v!, bool), [leaf([2, 3, 3]), leaf([2, 4, 3]), leaf([2, 4, 2])]);
  // Additive mask (with -inf entries) that gets a gradient, broadcast over batch and heads.
  const addMask = makeTensor([0.5, -Infinity, 0.1, -0.3, 0, 1.2, -Infinity, 0.4, -1, 0.2, 0.3, 0], [3, 4], 'float64');
  gradcheck((q, k, v) => sdpa(q!, k!, v!, addMask), [leaf([2, 2, 3, 3]), leaf([2, 2, 4, 3]), leaf([2, 2, 4, 2])]);
  gradcheck((q, k, v, m) => sdpa(q!, k!, v!, m!), [leaf([2, 2, 3, 3]), leaf([2, 2, 4, 3]), leaf([2, 2, 4, 2]), leaf([2, 1, 3, 4])]);
  gradcheck((q, k, v, m) => sdpa(q!, k!, v!, m!), [leaf([2, 3, 3]), leaf([2, 4, 3]), leaf([2, 4, 2]), leaf([4], 'strided')]);
});

test('scaledDotProductAttention gradients with grouped-query heads', () => {
  // 4 query heads share 2 key/value heads (query heads 0,1 -> kv head 0; 2,3 -> kv head 1).
  gradcheck((q, k, v) => sdpa(q!, k!, v!, null, 0, false, null, true), [leaf([1, 4, 2, 3]), leaf([1, 2, 3, 3]), leaf([1, 2, 3, 2])]);
  gradcheck((q, k, v) => sdpa(q!, k!, v!, null, 0, true, null, true), [leaf([2, 4, 3, 3]), leaf([2, 1, 3, 3], 'strided'), leaf([2, 2, 3, 2])]);
  // Grouped heads agree with explicitly repeated key/value heads.
  const q = leaf([1, 4, 2, 3]);
  const kv = constant([1, 2, 3, 3]);
  const k = kv.clone().requiresGrad_();
  backwardOnes(sdpa(q, k, k, null, 0, false, null, true));
  const kr = makeTensor(
    (kv.toArray() as number[][][][])[0]!.flatMap((h) => [h, h]).flat(2),
    [1, 4, 3, 3],
    'float64',
  ).requiresGrad_();
  const q2 = makeTensor(q.toFlatArray(), [1, 4, 2, 3], 'float64').requiresGrad_();
  backwardOnes(sdpa(q2, kr, kr));
  assertClose(q.grad!, q2.grad!.toFlatArray(), [1, 4, 2, 3], { atol: 1e-12, rtol: 1e-12 });
  const g = kr.grad!.toArray() as number[][][][];
  const summed = [0, 1].flatMap((h) => g[0]![2 * h]!.flat().map((v, i) => v + g[0]![2 * h + 1]!.flat()[i]!));
  assertClose(k.grad!, summed, [1, 2, 3, 3], { atol: 1e-12, rtol: 1e-12 });
});

test('scaledDotProductAttention with dropout fails clearly at backward', () => {
  const q = leaf([2, 3, 4]);
  const y = sdpa(q, q, q, null, 0.5, false, null, false, new Generator(1));
  assert.throws(() => backwardOnes(y), /scaledDotProductAttention backward: dropoutP > 0 .*not implemented/);
});

// ---------------------------------------------------------------------------------------------
// dropout

test('dropout gradient is mask * scale, recovered from the output', () => {
  // A fixed generator per call gives the same mask every time, so gradcheck applies.
  gradcheck((x) => kiln.dropout(x!, 0.4, true, new Generator(9)), [leaf([3, 4, 5])]);
  gradcheck((x) => kiln.dropout(x!, 0.5, true, new Generator(3)), [leaf([4, 5], 'transposed')]);
  const x = leaf([200], 'contiguous', 0.5, 2);
  const y = kiln.dropout(x, 0.25, true, new Generator(4));
  backwardOnes(y);
  const yv = y.toFlatArray();
  const gv = x.grad!.toFlatArray();
  const scale = Math.fround(1 / 0.75);
  assert.deepEqual(gv, yv.map((v) => (v !== 0 ? scale : 0)));
  const kept = yv.filter((v) => v !== 0).length;
  assert.ok(kept > 120 && kept < 180, `kept ${kept} of 200`);
});

test('dropout gradient: input zeros get the expected mask value 1; eval, p = 0 and p = 1', () => {
  const vals = [0, 1.5, 0, -2, 0, 3, -0.5, 0];
  const x = makeTensor(vals, [8], 'float64').requiresGrad_();
  const y = kiln.dropout(x, 0.5, true, new Generator(11));
  backwardOnes(y);
  const yv = y.toFlatArray();
  assert.deepEqual(
    x.grad!.toFlatArray(),
    vals.map((v, i) => (v === 0 ? 1 : yv[i] !== 0 ? 2 : 0)),
  );
  for (const [p, training] of [
    [0.5, false],
    [0, true],
  ] as const) {
    const x2 = leaf([5]);
    x2.grad = null;
    kiln.dropout(x2, p, training).backward(makeTensor([1, 2, 3, 4, 5], [5], 'float64'));
    assert.deepEqual(x2.grad!.toFlatArray(), [1, 2, 3, 4, 5]);
  }
  const x3 = leaf([5]);
  backwardOnes(kiln.dropout(x3, 1, true));
  assert.deepEqual(x3.grad!.toFlatArray(), [0, 0, 0, 0, 0]);
  // The mask is kept from the forward: the input and the output may be modified in place afterwards.
  const x5 = leaf([50], 'contiguous', 0.5, 2);
  const h = kiln.clone(x5);
  const y5 = kiln.dropout(h, 0.5, true, new Generator(6));
  const keptMask = y5.toFlatArray().map((v) => (v !== 0 ? 2 : 0));
  kiln.add_(y5, 1);
  kiln.copy_(h, kiln.zerosLike(h));
  backwardOnes(y5);
  assert.deepEqual(x5.grad!.toFlatArray(), keptMask);
  // inf inputs: a dropped inf gives NaN (inf * 0), a kept one inf.
  const x4 = makeTensor([Infinity, -Infinity, Infinity, -Infinity, Infinity, 1], [6], 'float64').requiresGrad_();
  const y4 = kiln.dropout(x4, 0.5, true, new Generator(5));
  backwardOnes(y4);
  assert.deepEqual(
    x4.grad!.toFlatArray(),
    y4.toFlatArray().map((v) => (Number.isNaN(v) || v === 0 ? 0 : 2)),
  );
});

test('float32 and float16 inputs get gradients of their own dtype, close to the float64 ones', () => {
  const xv = randomValues(2 * 4 * 5 * 5, 71);
  const wv = randomValues(4 * 2 * 3 * 3, 72);
  const grads = (['float64', 'float32'] as const).map((dtype) => {
    const x = makeTensor(xv, [2, 4, 5, 5], dtype, 'channelsLast').requiresGrad_();
    const w = makeTensor(wv, [4, 2, 3, 3], dtype).requiresGrad_();
    backwardOnes(kiln.conv2d(x, w, null, 2, 1, 1, 2));
    assert.equal(x.grad!.dtype, dtype);
    assert.equal(w.grad!.dtype, dtype);
    return [x.grad!, w.grad!] as const;
  });
  assertClose(grads[1][0], grads[0][0].toFlatArray(), [2, 4, 5, 5], { atol: 1e-5, rtol: 1e-5 });
  assertClose(grads[1][1], grads[0][1].toFlatArray(), [4, 2, 3, 3], { atol: 1e-4, rtol: 1e-5 });
  const q = makeTensor(randomValues(2 * 3 * 4, 73), [2, 3, 4], 'float16').requiresGrad_();
  backwardOnes(sdpa(q, q, q, null, 0, true));
  assert.equal(q.grad!.dtype, 'float16');
  assert.ok(q.grad!.toFlatArray().every((v) => Number.isFinite(v)));
  const p = makeTensor(randomValues(2 * 2 * 4 * 4, 74), [2, 2, 4, 4], 'float32').requiresGrad_();
  backwardOnes(kiln.avgPool2d(p, 2));
  backwardOnes(kiln.maxPool2d(p, 2));
  assert.equal(p.grad!.dtype, 'float32');
});
