import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { channelsLastStrides, contiguousStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeTensor, rand, randomInts, randomValues } from './helpers/make.js';
import { type PoolParams, refAvgPool2d, refMaxPool2d } from './helpers/nn-ref.js';

const maxCases: (PoolParams & { x: number[] })[] = [
  { x: [2, 3, 6, 6], kernel: [2, 2], stride: [2, 2], padding: [0, 0] },
  { x: [2, 2, 7, 7], kernel: [3, 3], stride: [2, 2], padding: [1, 1] },
  { x: [1, 2, 7, 8], kernel: [3, 2], stride: [2, 3], padding: [1, 1], ceilMode: true },
  { x: [1, 2, 8, 8], kernel: [3, 3], stride: [1, 2], padding: [1, 0], dilation: [2, 2] },
  { x: [2, 1, 5, 5], kernel: [2, 2], stride: [2, 2], padding: [1, 1], ceilMode: true },
  { x: [1, 3, 5, 6], kernel: [4, 4], stride: [3, 3], padding: [2, 2], ceilMode: true },
];

function runMax(c: PoolParams & { x: number[] }, layout: Layout, dtype: DType = 'float32', vals?: number[]): void {
  const n = c.x.reduce((a, b) => a * b, 1);
  const x = makeTensor(vals ?? randomValues(n, 3), c.x, dtype, layout);
  const xv = x.toFlatArray();
  const ref = refMaxPool2d(xv, c.x, c);
  const y = kiln.maxPool2d(x, c.kernel, c.stride, c.padding, c.dilation ?? 1, c.ceilMode ?? false);
  assertClose(y, ref.values, ref.shape, { atol: 0, rtol: 0 });
  const { values, indices } = kiln.maxPool2dWithIndices(x, c.kernel, c.stride, c.padding, c.dilation ?? 1, c.ceilMode ?? false);
  assertClose(values, ref.values, ref.shape, { atol: 0, rtol: 0 });
  assert.equal(indices.dtype, 'int64');
  assert.deepEqual(indices.toFlatArray(), ref.indices);
  const want = layout === 'channelsLast' ? channelsLastStrides(ref.shape) : contiguousStrides(ref.shape);
  assert.deepEqual([...y.strides], want);
  assert.deepEqual([...indices.strides], want);
}

test('maxPool2d matches naive window maxima (padding, stride, dilation, ceilMode) with indices', () => {
  for (const c of maxCases) {
    runMax(c, 'contiguous');
    runMax(c, 'transposed');
    runMax(c, 'strided');
  }
});

test('maxPool2d keeps channels_last', () => {
  for (const c of maxCases) runMax(c, 'channelsLast');
  for (const c of maxCases.slice(0, 3)) runMax(c, 'channelsLast', 'bfloat16');
});

test('maxPool2d: NaN wins its window, -inf and inf are ordinary values; integer dtypes', () => {
  const c = maxCases[1]!;
  const vals = randomValues(2 * 2 * 7 * 7, 9);
  vals[3] = NaN;
  vals[10] = Infinity;
  vals[60] = -Infinity;
  vals[61] = -Infinity;
  runMax(c, 'contiguous', 'float32', vals);
  runMax(c, 'channelsLast', 'float16', vals);
  for (const dtype of ['int32', 'int64', 'uint8'] as const) {
    const lo = dtype === 'uint8' ? 0 : -50;
    runMax(maxCases[2]!, 'contiguous', dtype, randomInts(2 * 7 * 8, 4, lo, 50));
  }
  // A window of all -inf keeps -inf.
  const y = kiln.maxPool2d(makeTensor([-Infinity, -Infinity, -Infinity, -Infinity], [1, 1, 2, 2]), 2);
  assert.deepEqual(y.toFlatArray(), [-Infinity]);
});

test('maxPool2d on an unbatched 3-d input and stride defaulting to the kernel', () => {
  const x = rand([3, 6, 6], 4);
  const ref = refMaxPool2d(x.toFlatArray(), [1, 3, 6, 6], { kernel: [3, 3], stride: [3, 3], padding: [0, 0] });
  assertClose(kiln.maxPool2d(x, 3), ref.values, [3, 2, 2], { atol: 0 });
});

const avgCases: (PoolParams & { x: number[]; countIncludePad?: boolean; divisorOverride?: number })[] = [
  { x: [2, 3, 6, 6], kernel: [2, 2], stride: [2, 2], padding: [0, 0] },
  { x: [2, 2, 7, 7], kernel: [3, 3], stride: [2, 2], padding: [1, 1] },
  { x: [2, 2, 7, 7], kernel: [3, 3], stride: [2, 2], padding: [1, 1], countIncludePad: false },
  { x: [1, 2, 7, 8], kernel: [3, 2], stride: [2, 3], padding: [1, 1], ceilMode: true },
  { x: [1, 2, 7, 8], kernel: [3, 2], stride: [2, 3], padding: [1, 1], ceilMode: true, countIncludePad: false },
  { x: [1, 3, 5, 6], kernel: [4, 4], stride: [3, 3], padding: [2, 2], ceilMode: true },
  { x: [1, 2, 6, 6], kernel: [3, 3], stride: [1, 1], padding: [1, 1], divisorOverride: 5 },
];

test('avgPool2d matches naive window means (padding, ceilMode, countIncludePad, divisorOverride)', () => {
  for (const c of avgCases) {
    for (const layout of ['contiguous', 'transposed', 'strided', 'channelsLast'] as const) {
      const x = rand(c.x, 5, layout);
      const ref = refAvgPool2d(x.toFlatArray(), c.x, c);
      const y = kiln.avgPool2d(x, c.kernel, c.stride, c.padding, c.ceilMode ?? false, c.countIncludePad ?? true, c.divisorOverride ?? null);
      assertClose(y, ref.values, ref.shape);
      assert.deepEqual([...y.strides], layout === 'channelsLast' ? channelsLastStrides(ref.shape) : contiguousStrides(ref.shape));
    }
  }
});

test('avgPool2d in float16/bfloat16 and int64 (truncating division), unbatched input', () => {
  for (const dtype of ['float16', 'bfloat16'] as const) {
    const c = avgCases[4]!;
    const x = rand(c.x, 6, 'channelsLast', dtype);
    const ref = refAvgPool2d(x.toFlatArray(), c.x, c);
    assertClose(kiln.avgPool2d(x, c.kernel, c.stride, c.padding, true, false), ref.values, ref.shape);
  }
  const xi = makeTensor(randomInts(2 * 6 * 6, 7, -20, 20), [1, 2, 6, 6], 'int64');
  const ref = refAvgPool2d(xi.toFlatArray(), [1, 2, 6, 6], { kernel: [3, 3], stride: [1, 1], padding: [1, 1] });
  const yi = kiln.avgPool2d(xi, 3, 1, 1);
  assert.equal(yi.dtype, 'int64');
  assert.deepEqual(yi.toFlatArray(), ref.values.map((v) => Math.trunc(v) + 0));
  const x3 = rand([2, 5, 5], 8);
  const r3 = refAvgPool2d(x3.toFlatArray(), [1, 2, 5, 5], { kernel: [2, 2], stride: [2, 2], padding: [1, 1] });
  assertClose(kiln.avgPool2d(x3, 2, null, 1), r3.values, [2, 3, 3]);
});

test('pooling errors name the op and the offending values', () => {
  const x = rand([1, 2, 6, 6], 1);
  assertThrowsWith(() => kiln.maxPool2d(x, 3, 1, 2), 'maxPool2d', 'pad should be smaller than or equal to half of kernel size', '[2, 2]', '[3, 3]');
  assertThrowsWith(() => kiln.avgPool2d(x, [2, 4], 1, [1, 3]), 'avgPool2d', 'half of kernel size', '[1, 3]', '[2, 4]');
  assertThrowsWith(() => kiln.maxPool2d(x, 7), 'maxPool2d', 'output size', '(2x0x0)', 'too small');
  assertThrowsWith(() => kiln.maxPool2d(x, 0), 'maxPool2d', 'kernel size', '[0, 0]');
  assertThrowsWith(() => kiln.maxPool2d(x, 2, 0), 'maxPool2d', 'stride', '[0, 0]');
  assertThrowsWith(() => kiln.maxPool2d(rand([6, 6], 1), 2), 'maxPool2d', '[6, 6]');
  assertThrowsWith(() => kiln.maxPool2d(makeTensor([1, 0, 1, 0], [1, 1, 2, 2], 'bool'), 2), 'maxPool2d', 'bool');
  assertThrowsWith(() => kiln.avgPool2d(rand([1, 1, 2, 2], 1, 'contiguous', 'int32'), 2), 'avgPool2d', 'int32');
  assertThrowsWith(() => kiln.avgPool2d(x, 2, 2, 0, false, true, 0), 'avgPool2d', 'divisorOverride', '0');
});
