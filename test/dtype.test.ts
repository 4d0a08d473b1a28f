import assert from 'node:assert/strict';
import { test } from 'node:test';
import { promoteTypes, resultType, type DType } from '../src/tensor/dtype.js';
import { float16BitsToFloat32, float32ToFloat16Bits, float32ToBfloat16Bits, bfloat16BitsToFloat32 } from '../src/tensor/half.js';
import { preservedStrides, broadcastShapes } from '../src/tensor/layout.js';
import { assertThrowsWith } from './helpers/assert.js';

test('promoteTypes matches torch.promote_types', () => {
  // Expected values from PyTorch's promotion table.
  const table: [DType, DType, DType][] = [
    ['bool', 'uint8', 'uint8'],
    ['bool', 'float16', 'float16'],
    ['uint8', 'int32', 'int32'],
    ['int32', 'int64', 'int64'],
    ['int64', 'float16', 'float16'],
    ['int64', 'bfloat16', 'bfloat16'],
    ['float16', 'bfloat16', 'float32'],
    ['bfloat16', 'float32', 'float32'],
    ['uint8', 'float32', 'float32'],
  ];
  for (const [a, b, want] of table) {
    assert.equal(promoteTypes(a, b), want, `${a} + ${b}`);
    assert.equal(promoteTypes(b, a), want, `${b} + ${a}`);
  }
});

test('resultType: dims outrank zero-dim outrank scalars within a category', () => {
  const t = (dtype: DType, rank = 1) => ({ dtype, shape: new Array<number>(rank).fill(2) });
  assert.equal(resultType([t('int32'), 2]), 'int32');
  assert.equal(resultType([t('int32'), 2.5]), 'float32');
  assert.equal(resultType([t('uint8'), 1000]), 'uint8');
  assert.equal(resultType([t('float16'), t('float32', 0)]), 'float16');
  assert.equal(resultType([t('int32'), t('float32', 0)]), 'float32');
  assert.equal(resultType([t('int32'), t('int64', 0)]), 'int32');
  assert.equal(resultType([t('bool'), true]), 'bool');
  assert.equal(resultType([t('bool'), 3]), 'int64');
  assert.equal(resultType([t('bfloat16'), 3.5]), 'bfloat16');
});

// Independent float16 decoder: sign * 2^(e-15) * (1 + m/1024), straight from IEEE 754.
function refHalf(bits: number): number {
  const s = bits >> 15 ? -1 : 1;
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  if (e === 31) return m ? NaN : s * Infinity;
  if (e === 0) return s * Math.pow(2, -14) * (m / 1024);
  return s * Math.pow(2, e - 15) * (1 + m / 1024);
}

test('float16: all 65536 patterns decode exactly and round-trip', () => {
  for (let b = 0; b < 65536; b++) {
    const v = float16BitsToFloat32(b);
    const r = refHalf(b);
    if (Number.isNaN(r)) {
      assert.ok(Number.isNaN(v));
      continue;
    }
    assert.equal(v, r, `bits ${b.toString(16)}`);
    // -0 and +0 both encode back to their own sign.
    assert.equal(float32ToFloat16Bits(v), b, `round trip ${b.toString(16)}`);
  }
});

test('float16 rounding: nearest-even, overflow, subnormals', () => {
  // Halfway between 1 and 1 + 2^-10 rounds to even (1); just above rounds up.
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(1 + 2 ** -11)), 1);
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(1 + 3 * 2 ** -11)), 1 + 2 * 2 ** -10);
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(65519)), 65504);
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(65520)), Infinity);
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(2 ** -24)), 2 ** -24);
  assert.equal(float16BitsToFloat32(float32ToFloat16Bits(2 ** -26)), 0);
  assert.ok(Number.isNaN(float16BitsToFloat32(float32ToFloat16Bits(NaN))));
});

test('bfloat16: truncation to the top 16 bits with nearest-even rounding', () => {
  assert.equal(bfloat16BitsToFloat32(float32ToBfloat16Bits(1)), 1);
  assert.equal(bfloat16BitsToFloat32(float32ToBfloat16Bits(1 + 2 ** -8)), 1, 'tie to even');
  assert.equal(bfloat16BitsToFloat32(float32ToBfloat16Bits(1 + 3 * 2 ** -8)), 1 + 2 ** -6);
  assert.equal(bfloat16BitsToFloat32(float32ToBfloat16Bits(3.4e38)), Infinity);
  assert.ok(Number.isNaN(bfloat16BitsToFloat32(float32ToBfloat16Bits(NaN))));
});

test('layouts: preserve format keeps transposed and channels_last dimension orders', () => {
  assert.deepEqual(preservedStrides([3, 4], [3, 4], [1, 3]), [1, 3]);
  assert.deepEqual(preservedStrides([3, 4], [3, 4], [8, 2]), [4, 1], 'gappy row-major gives dense row-major');
  assert.deepEqual(preservedStrides([2, 3, 4, 5], [2, 3, 4, 5], [60, 1, 15, 3]), [60, 1, 15, 3]);
  assert.deepEqual(preservedStrides([2, 3], [2, 3], [0, 1]), [3, 1], 'broadcast reference gives contiguous');
  assert.deepEqual(broadcastShapes('t', [2, 1, 4], [3, 1]), [2, 3, 4]);
  assertThrowsWith(() => broadcastShapes('myop', [2, 3], [4, 3]), 'myop', '[2, 3] and [4, 3]');
});
