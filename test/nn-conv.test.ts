import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { channelsLastStrides, contiguousStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeTensor, rand, randomValues } from './helpers/make.js';
import { refConv2d } from './helpers/nn-ref.js';

interface Case {
  x: number[];
  w: number[];
  bias?: boolean;
  stride?: [number, number];
  pad?: [number, number];
  dil?: [number, number];
  groups?: number;
}

function check(c: Case, layout: Layout = 'contiguous', dtype: DType = 'float32', wLayout: Layout = 'contiguous'): kiln.Tensor {
  const x = rand(c.x, 11, layout, dtype);
  const w = rand(c.w, 12, wLayout, dtype, -1, 1);
  const b = c.bias ? rand([c.w[0]!], 13, 'contiguous', dtype) : null;
  const stride = c.stride ?? [1, 1];
  const pad = c.pad ?? [0, 0];
  const dil = c.dil ?? [1, 1];
  const groups = c.groups ?? 1;
  const y = kiln.conv2d(x, w, b, stride, pad, dil, groups);
  const ref = refConv2d(x.toFlatArray(), c.x, w.toFlatArray(), c.w, b ? b.toFlatArray() : null, stride, [pad[0], pad[0], pad[1], pad[1]], dil, groups);
  const k = c.x[1]! / groups * c.w[2]! * c.w[3]!;
  const tol = tolFor(dtype);
  // Output rounding plus accumulation error grows with the reduction length.
  assertClose(y, ref.values, ref.shape, { atol: tol.atol * Math.max(4, k), rtol: tol.rtol * 4 });
  return y;
}

const cases: Case[] = [
  { x: [2, 3, 7, 6], w: [4, 3, 3, 3], bias: true },
  { x: [2, 3, 7, 6], w: [4, 3, 3, 3], bias: false, pad: [1, 1] },
  { x: [1, 2, 9, 8], w: [3, 2, 3, 2], stride: [2, 3], pad: [1, 0] },
  { x: [1, 2, 9, 9], w: [3, 2, 3, 3], dil: [2, 3], pad: [2, 1], bias: true },
  { x: [2, 4, 6, 6], w: [6, 2, 3, 3], groups: 2, pad: [1, 1], bias: true },
  { x: [2, 4, 6, 5], w: [8, 1, 3, 3], groups: 4, pad: [1, 1], stride: [2, 1] }, // depthwise, multiplier 2
  { x: [1, 5, 4, 4], w: [3, 5, 1, 1] }, // 1x1
  { x: [1, 1, 5, 5], w: [1, 1, 5, 5], pad: [2, 2] }, // kernel as large as the input
];

test('conv2d matches a direct 7-loop float64 convolution (stride, padding, dilation, groups, bias)', () => {
  for (const c of cases) {
    const y = check(c);
    assert.deepEqual([...y.strides], contiguousStrides(y.shape), 'contiguous in, contiguous out');
  }
});

test('conv2d with channels_last input gives channels_last output with the same values', () => {
  for (const c of cases) {
    const y = check(c, 'channelsLast');
    assert.deepEqual([...y.strides], channelsLastStrides(y.shape), `strides for ${JSON.stringify(c)}`);
    assert.ok(y.isContiguous('channelsLast'));
  }
  // channels_last weight with a contiguous input also gives channels_last (PyTorch's rule).
  const y = check({ x: [2, 3, 6, 6], w: [5, 3, 3, 3], bias: true, pad: [1, 1] }, 'contiguous', 'float32', 'channelsLast');
  assert.deepEqual([...y.strides], channelsLastStrides(y.shape));
});

test('conv2d reads transposed and strided inputs and weights through their strides', () => {
  for (const c of cases.slice(0, 6)) {
    const t = check(c, 'transposed');
    assert.deepEqual([...t.strides], contiguousStrides(t.shape));
    check(c, 'strided', 'float32', 'strided');
    check(c, 'contiguous', 'float32', 'transposed');
  }
});

test('conv2d in float16 and bfloat16', () => {
  for (const dtype of ['float16', 'bfloat16'] as const) {
    for (const c of [cases[0]!, cases[4]!, cases[5]!]) {
      const y = check(c, 'contiguous', dtype);
      assert.equal(y.dtype, dtype);
      const z = check(c, 'channelsLast', dtype);
      assert.deepEqual([...z.strides], channelsLastStrides(z.shape));
    }
  }
});

test("conv2d padding 'same' (odd and even kernels, dilation) and 'valid'", () => {
  for (const [wShape, dil] of [
    [[3, 2, 3, 3], [1, 1]],
    [[3, 2, 4, 2], [1, 1]], // even kernel: total padding 3 and 1, extra at the bottom / right
    [[3, 2, 2, 3], [3, 2]],
  ] as [number[], [number, number]][]) {
    const x = rand([2, 2, 6, 7], 5);
    const w = rand(wShape, 6);
    const y = kiln.conv2d(x, w, null, 1, 'same', dil);
    const pads: number[] = [];
    for (let i = 0; i < 2; i++) {
      const total = dil[i]! * (wShape[2 + i]! - 1);
      pads.push(Math.floor(total / 2), total - Math.floor(total / 2));
    }
    const ref = refConv2d(x.toFlatArray(), [2, 2, 6, 7], w.toFlatArray(), wShape, null, [1, 1], pads as [number, number, number, number], dil, 1);
    assert.deepEqual(ref.shape, [2, 3, 6, 7]);
    assertClose(y, ref.values, ref.shape, { atol: 1e-4 });
  }
  const x = rand([1, 2, 5, 5], 7);
  const w = rand([2, 2, 3, 3], 8);
  const ref = refConv2d(x.toFlatArray(), [1, 2, 5, 5], w.toFlatArray(), [2, 2, 3, 3], null, [1, 1], [0, 0, 0, 0], [1, 1], 1);
  assertClose(kiln.conv2d(x, w, null, 1, 'valid'), ref.values, ref.shape, { atol: 1e-4 });
});

test('conv2d on an unbatched 3-d input and on an empty batch', () => {
  const x = rand([3, 6, 5], 1);
  const w = rand([4, 3, 3, 3], 2);
  const b = rand([4], 3);
  const y = kiln.conv2d(x, w, b, 1, 1);
  const ref = refConv2d(x.toFlatArray(), [1, 3, 6, 5], w.toFlatArray(), [4, 3, 3, 3], b.toFlatArray(), [1, 1], [1, 1, 1, 1], [1, 1], 1);
  assertClose(y, ref.values, [4, 6, 5], { atol: 1e-4 });
  const e = kiln.conv2d(makeTensor([], [0, 3, 6, 5]), w, b, 1, 1);
  assert.deepEqual([...e.shape], [0, 4, 6, 5]);
});

test('conv2d propagates NaN and inf only into the windows that read them', () => {
  const vals = randomValues(2 * 6 * 6, 3);
  vals[0] = NaN; // channel 0, (0, 0)
  vals[36 + 5 * 6 + 5] = Infinity; // channel 1, (5, 5)
  const x = makeTensor(vals, [1, 2, 6, 6]);
  const w = makeTensor(randomValues(2 * 2 * 3 * 3, 4, 0.5, 1), [2, 2, 3, 3]);
  const ref = refConv2d(vals, [1, 2, 6, 6], w.toFlatArray(), [2, 2, 3, 3], null, [1, 1], [1, 1, 1, 1], [1, 1], 1);
  const y = kiln.conv2d(x, w, null, 1, 1);
  assert.ok(ref.values.some(Number.isNaN) && ref.values.some((v) => v === Infinity));
  assertClose(y, ref.values, ref.shape, { atol: 1e-4 });
});

test('conv2d on the benchmark workload: channels_last 64x64 stem, then a 3x3 conv', () => {
  const x = rand([2, 3, 64, 64], 21, 'channelsLast');
  const w1 = rand([64, 3, 7, 7], 22, 'contiguous', 'float32', -0.2, 0.2);
  const b1 = rand([64], 23);
  const w2 = rand([64, 64, 3, 3], 24, 'contiguous', 'float32', -0.1, 0.1);
  const t0 = performance.now();
  const y = kiln.conv2d(x, w1, b1, 2, 3);
  const z = kiln.conv2d(y, w2, null, 1, 1);
  const ms = performance.now() - t0;
  assert.deepEqual([...y.shape], [2, 64, 32, 32]);
  assert.deepEqual([...z.strides], channelsLastStrides([2, 64, 32, 32]));
  const ref1 = refConv2d(x.toFlatArray(), [2, 3, 64, 64], w1.toFlatArray(), [64, 3, 7, 7], b1.toFlatArray(), [2, 2], [3, 3, 3, 3], [1, 1], 1);
  assertClose(y, ref1.values, ref1.shape, { atol: 1e-3, rtol: 1e-4 });
  // Second conv: spot-check output positions (corners, edges, interior) against the direct sum.
  const yv = y.toFlatArray();
  const zv = z.toFlatArray();
  const wv = w2.toFlatArray();
  for (const [b, o, r, c] of [[0, 0, 0, 0], [1, 63, 31, 31], [0, 17, 0, 31], [1, 5, 16, 9], [0, 40, 31, 0]] as const) {
    let acc = 0;
    for (let ci = 0; ci < 64; ci++) {
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < 3; j++) {
          const ih = r - 1 + i;
          const iw = c - 1 + j;
          if (ih < 0 || ih >= 32 || iw < 0 || iw >= 32) continue;
          acc += yv[((b * 64 + ci) * 32 + ih) * 32 + iw]! * wv[((o * 64 + ci) * 3 + i) * 3 + j]!;
        }
      }
    }
    const got = zv[((b * 64 + o) * 32 + r) * 32 + c]!;
    assert.ok(Math.abs(got - acc) <= 1e-3 + 1e-4 * Math.abs(acc), `z[${b}, ${o}, ${r}, ${c}] = ${got}, expected ${acc}`);
  }
  console.log(`# benchmark workload (two convs): ${ms.toFixed(0)} ms`);
});

test('conv2d errors name the op, the shapes and the offending values', () => {
  const x = rand([2, 4, 8, 8], 1);
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 3, 3, 3], 2)), 'conv2d', 'groups=1', '[6, 3, 3, 3]', '[2, 4, 8, 8]', '3 channels', 'got 4');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 1, 3, 3], 2), null, 1, 0, 1, 2), 'conv2d', 'groups=2', '[6, 1, 3, 3]', '[2, 4, 8, 8]');
  assertThrowsWith(() => kiln.conv2d(x, rand([5, 2, 3, 3], 2), null, 1, 0, 1, 2), 'conv2d', 'groups=2', 'divisible', '[5, 2, 3, 3]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3], 2)), 'conv2d', '4-d weight', '[6, 4, 3]');
  assertThrowsWith(() => kiln.conv2d(rand([4, 8], 1), rand([6, 4, 3, 3], 2)), 'conv2d', 'input', '[4, 8]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2, 'contiguous', 'float16')), 'conv2d', 'float32', 'float16');
  assertThrowsWith(() => kiln.conv2d(rand([1, 4, 8, 8], 1, 'contiguous', 'int32'), rand([6, 4, 3, 3], 2, 'contiguous', 'int32')), 'conv2d', 'int32', 'floating');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2), rand([5], 3)), 'conv2d', 'bias', '[5]', '6 elements');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 9, 3], 2)), 'conv2d', 'kernel size', '[2, 4, 8, 8]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2), null, 2, 'same'), 'conv2d', "padding='same'", 'strided', '[2, 2]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2), null, 0), 'conv2d', 'stride', '[0, 0]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2), null, 1, -1), 'conv2d', 'negative padding', '[-1, -1]');
  assertThrowsWith(() => kiln.conv2d(x, rand([6, 4, 3, 3], 2), null, 1, 0, 0), 'conv2d', 'dilation', '[0, 0]');
});
