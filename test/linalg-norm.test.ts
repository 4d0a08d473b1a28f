/** Normalisation ops (layerNorm, rmsNorm, groupNorm, batchNorm) against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { channelsLastStrides, contiguousStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeTensor, rand, randomValues } from './helpers/make.js';
import { channelValues, meanVar, refBatchNormApply, refGroupNorm, refLayerNorm, refRmsNorm } from './helpers/linalg-ref.js';

const TOL32 = { atol: 2e-5, rtol: 2e-5 };

test('layerNorm over the last dim and the last 2 dims, with and without affine, any input layout', () => {
  const layouts: Layout[] = ['contiguous', 'transposed', 'strided'];
  let seed = 1;
  for (const layout of layouts) {
    const x = rand([3, 4, 5], seed++, layout, 'float32', -3, 3);
    const xv = x.toFlatArray();
    const w = rand([5], seed++);
    const b = rand([5], seed++, 'strided');
    const out = kiln.layerNorm(x, [5], w, b);
    assertClose(out, refLayerNorm(xv, 5, w.toFlatArray(), b.toFlatArray(), 1e-5), [3, 4, 5], TOL32);
    assert.deepEqual([...out.strides], contiguousStrides([3, 4, 5]), 'layerNorm output is contiguous (as torch)');
    assertClose(kiln.layerNorm(x, 5), refLayerNorm(xv, 5, null, null, 1e-5), [3, 4, 5], TOL32);
    const w2 = rand([4, 5], seed++, 'transposed');
    const b2 = rand([4, 5], seed++);
    assertClose(kiln.layerNorm(x, [4, 5], w2, b2, 1e-3), refLayerNorm(xv, 20, w2.toFlatArray(), b2.toFlatArray(), 1e-3), [3, 4, 5], TOL32);
    assertClose(kiln.layerNorm(x, [4, 5], w2), refLayerNorm(xv, 20, w2.toFlatArray(), null, 1e-5), [3, 4, 5], TOL32);
  }
  // channels_last 4-d input, normalized over (H, W)
  const x4 = rand([2, 3, 4, 2], 40, 'channelsLast');
  assertClose(kiln.layerNorm(x4, [4, 2]), refLayerNorm(x4.toFlatArray(), 8, null, null, 1e-5), [2, 3, 4, 2], TOL32);
});

test('layerNorm edge values: constant rows, NaN rows, size-1 rows, empty input, eps effect', () => {
  const x = makeTensor([2, 2, 2, 1, NaN, 3, 7, -1, 0.5], [3, 3]);
  assertClose(kiln.layerNorm(x, [3]), [0, 0, 0, NaN, NaN, NaN, ...refLayerNorm([7, -1, 0.5], 3, null, null, 1e-5)], [3, 3], TOL32);
  assertClose(kiln.layerNorm(rand([4, 1], 1), [1]), [0, 0, 0, 0], [4, 1]);
  assertClose(kiln.layerNorm(rand([0, 4], 1), [4]), [], [0, 4]);
  const big = makeTensor([0, 1e-3], [1, 2]);
  assertClose(kiln.layerNorm(big, [2], null, null, 1e-5), refLayerNorm([0, 1e-3], 2, null, null, 1e-5), [1, 2], TOL32);
});

test('layerNorm and rmsNorm in float16/bfloat16 compute in float32 and keep the dtype', () => {
  for (const dtype of ['float16', 'bfloat16'] as DType[]) {
    const x = rand([4, 6], 1, 'transposed', dtype);
    const w = rand([6], 2, 'contiguous', dtype);
    const b = rand([6], 3, 'contiguous', dtype);
    const out = kiln.layerNorm(x, [6], w, b);
    assert.equal(out.dtype, dtype);
    assertClose(out, refLayerNorm(x.toFlatArray(), 6, w.toFlatArray(), b.toFlatArray(), 1e-5), [4, 6], { atol: tolFor(dtype).atol * 8, rtol: tolFor(dtype).rtol });
    const r = kiln.rmsNorm(x, [6], w);
    assert.equal(r.dtype, dtype);
    const eps = dtype === 'float16' ? 0.0009765625 : 0.0078125;
    assertClose(r, refRmsNorm(x.toFlatArray(), 6, w.toFlatArray(), eps), [4, 6], { atol: tolFor(dtype).atol * 8, rtol: tolFor(dtype).rtol });
  }
});

test('rmsNorm: x / sqrt(mean(x^2) + eps) * weight, default eps = finfo(dtype).eps, layout preserved', () => {
  const x = rand([3, 4, 5], 1, 'transposed');
  const xv = x.toFlatArray();
  const w = rand([5], 2);
  const out = kiln.rmsNorm(x, [5], w, 1e-6);
  assertClose(out, refRmsNorm(xv, 5, w.toFlatArray(), 1e-6), [3, 4, 5], TOL32);
  assert.deepEqual([...out.strides], [...x.strides], 'rmsNorm keeps the transposed layout');
  assertClose(kiln.rmsNorm(x, [4, 5]), refRmsNorm(xv, 20, null, 1.1920928955078125e-7), [3, 4, 5], TOL32);
  // small inputs: the default eps (float32 epsilon) visibly matters
  const tiny = makeTensor([1e-4, -2e-4, 3e-4, 0], [1, 4]);
  const expected = refRmsNorm(tiny.toFlatArray(), 4, null, 1.1920928955078125e-7);
  assertClose(kiln.rmsNorm(tiny, 4), expected, [1, 4], TOL32);
  assert.ok(Math.abs(expected[0]! - refRmsNorm(tiny.toFlatArray(), 4, null, 1e-5)[0]!) > 1e-2, 'the test distinguishes eps values');
  const f16 = makeTensor([0.01, 0.02, -0.03, 0.04], [4], 'float16');
  assertClose(kiln.rmsNorm(f16, [4]), refRmsNorm(f16.toFlatArray(), 4, null, 0.0009765625), [4]);
  assertClose(kiln.rmsNorm(rand([2, 3], 3, 'strided'), [3], null, 0.5), refRmsNorm(rand([2, 3], 3).toFlatArray(), 3, null, 0.5), [2, 3], TOL32);
});

test('groupNorm over (N, C, *) with channels_last input gives channels_last output', () => {
  const x = rand([2, 6, 3, 4], 1, 'channelsLast', 'float32', -3, 3);
  const w = rand([6], 2);
  const b = rand([6], 3, 'strided');
  const out = kiln.groupNorm(x, 3, w, b);
  assertClose(out, refGroupNorm(x.toFlatArray(), [2, 6, 3, 4], 3, w.toFlatArray(), b.toFlatArray(), 1e-5), [2, 6, 3, 4], TOL32);
  assert.deepEqual([...out.strides], channelsLastStrides([2, 6, 3, 4]));
  const contig = kiln.groupNorm(rand([2, 6, 3, 4], 1), 2);
  assert.deepEqual([...contig.strides], contiguousStrides([2, 6, 3, 4]));
  for (const [shape, groups, layout] of [[[3, 4, 5], 2, 'strided'], [[2, 4], 4, 'transposed'], [[2, 6, 2, 2, 2], 6, 'contiguous'], [[1, 4, 7], 1, 'transposed']] as [number[], number, Layout][]) {
    const xi = rand(shape, groups, layout);
    const o = kiln.groupNorm(xi, groups, null, null, 1e-3);
    assertClose(o, refGroupNorm(xi.toFlatArray(), shape, groups, null, null, 1e-3), shape, TOL32);
    assert.deepEqual([...o.strides], contiguousStrides(shape));
  }
  const h = rand([2, 4, 3], 9, 'contiguous', 'bfloat16');
  const oh = kiln.groupNorm(h, 2);
  assert.equal(oh.dtype, 'bfloat16');
  assertClose(oh, refGroupNorm(h.toFlatArray(), [2, 4, 3], 2, null, null, 1e-5), [2, 4, 3], { atol: 0.05, rtol: 0.02 });
  assertClose(kiln.groupNorm(rand([0, 4, 3], 1), 2), [], [0, 4, 3]);
});

test('batchNorm inference uses running stats and keeps channels_last', () => {
  const x = rand([2, 3, 4, 5], 1, 'channelsLast', 'float32', -3, 3);
  const rm = rand([3], 2);
  const rv = rand([3], 3, 'strided', 'float32', 0.5, 2);
  const w = rand([3], 4);
  const b = rand([3], 5);
  const rmBefore = rm.toFlatArray();
  const out = kiln.batchNorm(x, rm, rv, w, b, false);
  assertClose(out, refBatchNormApply(x.toFlatArray(), [2, 3, 4, 5], rmBefore, rv.toFlatArray(), w.toFlatArray(), b.toFlatArray(), 1e-5), [2, 3, 4, 5], TOL32);
  assert.deepEqual([...out.strides], channelsLastStrides([2, 3, 4, 5]));
  assert.deepEqual(rm.toFlatArray(), rmBefore, 'inference leaves running stats alone');
  const x2 = rand([5, 3], 6, 'transposed');
  const o2 = kiln.batchNorm(x2, rm, rv, null, null, false, 0.1, 1e-3);
  assertClose(o2, refBatchNormApply(x2.toFlatArray(), [5, 3], rmBefore, rv.toFlatArray(), null, null, 1e-3), [5, 3], TOL32);
  assert.deepEqual([...o2.strides], [3, 1]);
});

test('batchNorm training normalizes with batch stats and updates running stats in place (unbiased var)', () => {
  const shape = [4, 3, 2, 3];
  const x = rand(shape, 1, 'strided', 'float32', -3, 3);
  const xv = x.toFlatArray();
  const rmInit = randomValues(3, 2);
  const rvInit = randomValues(3, 3, 0.5, 2);
  const rm = makeTensor(rmInit, [3], 'float32', 'strided');
  const rv = makeTensor(rvInit, [3]);
  const w = rand([3], 4);
  const b = rand([3], 5);
  const out = kiln.batchNorm(x, rm, rv, w, b, true, 0.2, 1e-5);
  const stats = [0, 1, 2].map((c) => meanVar(channelValues(xv, shape, c)));
  const mean = stats.map((s) => s.mean);
  const variance = stats.map((s) => s.variance);
  assertClose(out, refBatchNormApply(xv, shape, mean, variance, w.toFlatArray(), b.toFlatArray(), 1e-5), shape, TOL32);
  const count = 4 * 2 * 3;
  assertClose(rm, rmInit.map((r, c) => 0.8 * Math.fround(r) + 0.2 * mean[c]!), [3], TOL32);
  assertClose(rv, rvInit.map((r, c) => 0.8 * Math.fround(r) + 0.2 * variance[c]! * (count / (count - 1))), [3], TOL32);
  // without running stats, and with float16 input + float32 running stats (mixed types allowed)
  assertClose(kiln.batchNorm(x, null, null, null, null, true), refBatchNormApply(xv, shape, mean, variance, null, null, 1e-5), shape, TOL32);
  const xh = rand([6, 2], 7, 'contiguous', 'float16');
  const rm2 = kiln.tensor([0, 0]);
  const rv2 = kiln.tensor([1, 1]);
  const oh = kiln.batchNorm(xh, rm2, rv2, null, null, true);
  assert.equal(oh.dtype, 'float16');
  const sh = [0, 1].map((c) => meanVar(channelValues(xh.toFlatArray(), [6, 2], c)));
  assertClose(oh, refBatchNormApply(xh.toFlatArray(), [6, 2], sh.map((s) => s.mean), sh.map((s) => s.variance), null, null, 1e-5), [6, 2], { atol: 1e-2, rtol: 4e-3 });
  assertClose(rm2, sh.map((s) => 0.1 * s.mean), [2], TOL32);
  assertClose(rv2, sh.map((s) => 0.9 + 0.1 * s.variance * (6 / 5)), [2], TOL32);
});

test('norm errors name the op, the argument and the offending shapes', () => {
  const x = rand([2, 3, 4], 1);
  assertThrowsWith(() => kiln.layerNorm(x, [5]), 'layerNorm', '[5]', '[2, 3, 4]');
  assertThrowsWith(() => kiln.layerNorm(x, [3]), 'layerNorm', '[3]', '[2, 3, 4]');
  assertThrowsWith(() => kiln.layerNorm(x, [4], rand([3], 2)), 'layerNorm', "'weight' [3]", '[4]');
  assertThrowsWith(() => kiln.layerNorm(x, [3, 4], null, rand([4], 2)), 'layerNorm', "'bias' [4]", '[3, 4]');
  assertThrowsWith(() => kiln.layerNorm(x, []), 'layerNorm', 'normalizedShape', '[]');
  assertThrowsWith(() => kiln.layerNorm(kiln.tensor([1, 2], { dtype: 'int32' }), [2]), 'layerNorm', 'floating', 'int32');
  assertThrowsWith(() => kiln.rmsNorm(x, [4], rand([4, 1], 2)), 'rmsNorm', "'weight' [4, 1]", '[4]');
  assertThrowsWith(() => kiln.groupNorm(rand([2, 6, 4], 1), 4), 'groupNorm', '6', 'numGroups 4', 'divisible');
  assertThrowsWith(() => kiln.groupNorm(rand([2, 6, 4], 1), 0), 'groupNorm', 'numGroups', '0');
  assertThrowsWith(() => kiln.groupNorm(rand([6], 1), 2), 'groupNorm', '[6]');
  assertThrowsWith(() => kiln.groupNorm(rand([2, 6, 4], 1), 3, rand([3], 2)), 'groupNorm', "'weight' [3]", '[6]');
  assertThrowsWith(() => kiln.batchNorm(x, rand([4], 2), rand([3], 3)), 'batchNorm', "'runningMean' [4]", '[3]', '[2, 3, 4]');
  assertThrowsWith(() => kiln.batchNorm(x, rand([3], 2), rand([2], 3), null, null, true), 'batchNorm', "'runningVar' [2]", '[3]');
  assertThrowsWith(() => kiln.batchNorm(x, rand([3], 2), rand([3], 3), rand([3, 1], 4)), 'batchNorm', "'weight' [3, 1]");
  assertThrowsWith(() => kiln.batchNorm(x, null, null), 'batchNorm', 'runningMean', 'evaluation');
  assertThrowsWith(() => kiln.batchNorm(rand([1, 3], 1), null, null, null, null, true), 'batchNorm', 'more than 1 value per channel', '[1, 3]');
  assertThrowsWith(() => kiln.batchNorm(x, kiln.tensor([0, 0, 0], { dtype: 'int64' }), rand([3], 3)), 'batchNorm', "'runningMean'", 'int64');
});
