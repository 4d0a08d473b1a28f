import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../src/tensor/half.js';
import { channelsLastStrides } from '../src/tensor/layout.js';
import { Generator, manualSeed } from '../src/tensor/random.js';
import { assertThrowsWith } from './helpers/assert.js';
import { makeTensor, rand, randomValues } from './helpers/make.js';

const N = 100_000;

test('dropout p = 0.3 over 100k elements: fraction zeroed, kept values scaled exactly by 1/(1-p)', () => {
  const xv = randomValues(N, 1, 1, 2);
  const x = makeTensor(xv, [N]);
  const y = kiln.dropout(x, 0.3, true, new Generator(42));
  const got = y.toFlatArray();
  const inputs = x.toFlatArray();
  const scale = Math.fround(1 / 0.7);
  let zeros = 0;
  for (let i = 0; i < N; i++) {
    if (got[i] === 0) zeros++;
    else assert.equal(got[i], Math.fround(inputs[i]! * scale), `element ${i}`);
  }
  // Standard error of the fraction is sqrt(0.21 / 1e5) ~ 0.0015.
  assert.ok(Math.abs(zeros / N - 0.3) < 0.008, `zeroed fraction ${zeros / N}`);
});

test('dropout: same seed same mask, other seed other mask; the default generator follows manualSeed', () => {
  const x = rand([300, 100], 2, 'contiguous', 'float32', 1, 2);
  const a = kiln.dropout(x, 0.5, true, new Generator(7)).toFlatArray();
  const b = kiln.dropout(x, 0.5, true, new Generator(7)).toFlatArray();
  const c = kiln.dropout(x, 0.5, true, new Generator(8)).toFlatArray();
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  manualSeed(123);
  const d = kiln.dropout(x, 0.5).toFlatArray();
  const e = kiln.dropout(x, 0.5).toFlatArray();
  manualSeed(123);
  assert.deepEqual(kiln.dropout(x, 0.5).toFlatArray(), d);
  assert.notDeepEqual(d, e, 'the default generator advances');
});

test('dropout keeps channels_last and strided layouts; the mask follows logical order', () => {
  const vals = randomValues(2 * 3 * 4 * 5, 3, 1, 2);
  const xc = makeTensor(vals, [2, 3, 4, 5]);
  const xl = makeTensor(vals, [2, 3, 4, 5], 'float32', 'channelsLast');
  const xs = makeTensor(vals, [2, 3, 4, 5], 'float32', 'strided');
  const yc = kiln.dropout(xc, 0.4, true, new Generator(9));
  const yl = kiln.dropout(xl, 0.4, true, new Generator(9));
  const ys = kiln.dropout(xs, 0.4, true, new Generator(9));
  assert.deepEqual([...yl.strides], channelsLastStrides([2, 3, 4, 5]));
  assert.deepEqual([...ys.strides], [60, 20, 5, 1]);
  assert.deepEqual(yl.toFlatArray(), yc.toFlatArray());
  assert.deepEqual(ys.toFlatArray(), yc.toFlatArray());
  const t = rand([5, 7], 4, 'transposed');
  const yt = kiln.dropout(t, 0.5);
  assert.deepEqual([...yt.strides], [1, 5]);
});

test('dropout: p = 0 and eval mode copy the input, p = 1 gives zeros', () => {
  const x = rand([4, 6], 5, 'strided');
  for (const y of [kiln.dropout(x, 0), kiln.dropout(x, 0.7, false)]) {
    assert.notEqual(y, x);
    assert.deepEqual(y.toFlatArray(), x.toFlatArray());
  }
  const z = kiln.dropout(x, 1);
  assert.ok(z.toFlatArray().every((v) => v === 0));
  // Eval mode works for any dtype.
  const i = makeTensor([1, 2, 3], [3], 'int64');
  assert.deepEqual(kiln.dropout(i, 0.5, false).toFlatArray(), [1, 2, 3]);
  assert.equal(kiln.dropout(makeTensor([], [0]), 0.5).numel(), 0);
});

test('dropout in float16/bfloat16 scales by 1/(1-p) rounded to the dtype', () => {
  const cases = [
    ['float16', (x: number) => float16BitsToFloat32(float32ToFloat16Bits(x))],
    ['bfloat16', (x: number) => bfloat16BitsToFloat32(float32ToBfloat16Bits(x))],
  ] as const;
  for (const [dtype, round] of cases) {
    const x = rand([2000], 6, 'contiguous', dtype, 1, 2);
    const y = kiln.dropout(x, 0.3, true, new Generator(1));
    assert.equal(y.dtype, dtype);
    const xv = x.toFlatArray();
    const scale = round(1 / 0.7);
    let zeros = 0;
    y.toFlatArray().forEach((v, i) => {
      if (v === 0) zeros++;
      else assert.equal(v, round(xv[i]! * scale));
    });
    assert.ok(Math.abs(zeros / 2000 - 0.3) < 0.05);
  }
});

test('dropout errors: p outside [0, 1], integer input while training', () => {
  const x = rand([3], 1);
  assertThrowsWith(() => kiln.dropout(x, -0.1), 'dropout', 'between 0 and 1', '-0.1');
  assertThrowsWith(() => kiln.dropout(x, 1.5), 'dropout', 'between 0 and 1', '1.5');
  assertThrowsWith(() => kiln.dropout(x, NaN), 'dropout', 'NaN');
  assertThrowsWith(() => kiln.dropout(makeTensor([1, 2], [2], 'int32'), 0.5), 'dropout', 'int32', 'floating');
});
