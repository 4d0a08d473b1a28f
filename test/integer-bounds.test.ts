/**
 * Exact integer semantics at the JS boundary (issue #18 item 2). The rules mirror PyTorch:
 *   - A value an integer dtype cannot hold is an error, "value cannot be converted to type int32
 *     without overflow" (c10's checked conversion, used by torch.tensor, torch.full and fill_).
 *     The range is compared before truncation, as c10::overflows compares the double itself.
 *   - NaN and ±Infinity into an integer dtype are errors (an integer has neither).
 *   - An in-range fraction truncates toward zero: torch.tensor([2.7, -2.7], dtype=torch.int32)
 *     is [2, -2].
 *   - bool takes any number as nonzero-ness: torch.tensor([2.5, 0, -1], dtype=torch.bool) is
 *     [True, False, True]. (torch also makes NaN True; kiln's bool encoder makes it False, a
 *     known difference left for a separate change because it touches every cast.)
 *   - An unsigned dtype takes negative integers down to -max and wraps them, as c10::overflows
 *     lets a signed integer source wrap into an unsigned type: torch 2.11's
 *     masked_fill(uint8, mask, -1) writes 255 (fuzz fixture cases 158, 320, 1081). A negative
 *     fraction (a Python float in torch) gets the plain range check and is an error.
 *   - int64 from a JS number is limited to the safe-integer range (a number beyond it is already
 *     rounded); a bigint reaches the full int64 range.
 * Allocating creation functions reject sizes the device cannot hold before allocating.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

const OVERFLOW = 'without overflow';

// Written out independently of the implementation's table.
// `low`: the lowest integer accepted, below min for uint8 (negative integers to -255 wrap, below).
const RANGES = [
  { dtype: 'uint8', min: 0, max: 255, low: -255 },
  { dtype: 'int32', min: -2147483648, max: 2147483647, low: -2147483648 },
  { dtype: 'int64', min: -9007199254740991, max: 9007199254740991, low: -9007199254740991 },
] as const;

test('kiln.tensor: each integer dtype takes its min and max and rejects the lowest accepted - 1 and max+1', () => {
  for (const { dtype, min, max, low } of RANGES) {
    assert.deepEqual(kiln.tensor([min, max], { dtype }).toArray(), [min, max], dtype);
    for (const bad of [low - 1, max + 1]) {
      assertThrowsWith(() => kiln.tensor([bad], { dtype }), 'tensor', `value ${bad}`, `type ${dtype}`, OVERFLOW);
    }
  }
  // The two examples from the issue.
  assertThrowsWith(() => kiln.tensor([2 ** 31], { dtype: 'int32' }), 'tensor', 'value 2147483648', 'int32', OVERFLOW);
  assertThrowsWith(() => kiln.tensor([NaN], { dtype: 'int64' }), 'tensor', 'NaN', 'int64');
});

test('NaN and Infinity into integer dtypes are errors (tensor, full, fill_, maskedFill)', () => {
  for (const { dtype } of RANGES) {
    for (const v of [NaN, Infinity, -Infinity]) {
      assertThrowsWith(() => kiln.zeros([2], { dtype }).maskedFill(kiln.tensor([true, false]), v), 'maskedFill', String(v), dtype);
      assertThrowsWith(() => kiln.tensor([1, v], { dtype }), 'tensor', String(v), dtype);
      assertThrowsWith(() => kiln.full([2], v, { dtype }), 'full', String(v), dtype);
      assertThrowsWith(() => kiln.zeros([2], { dtype }).fill_(v), 'fill_', String(v), dtype);
    }
  }
});

test('full, fullLike and fill_ range-check their value against the dtype', () => {
  assertThrowsWith(() => kiln.full([2], 256, { dtype: 'uint8' }), 'full', 'value 256', 'uint8', OVERFLOW);
  assertThrowsWith(() => kiln.full([2], -256, { dtype: 'uint8' }), 'full', 'value -256', 'uint8', OVERFLOW);
  assertThrowsWith(() => kiln.full([2], 2 ** 31, { dtype: 'int32' }), 'full', 'value 2147483648', 'int32');
  assertThrowsWith(() => kiln.fullLike(kiln.zeros([2], { dtype: 'int32' }), 2 ** 31), 'fullLike', 'int32', OVERFLOW);
  const t = kiln.zeros([2], { dtype: 'int32' });
  assertThrowsWith(() => t.fill_(-(2 ** 31) - 1), 'fill_', 'value -2147483649', 'int32', OVERFLOW);
  assert.deepEqual(t.toArray(), [0, 0], 'a rejected fill_ writes nothing');
  assert.deepEqual(kiln.full([2], 255, { dtype: 'uint8' }).toArray(), [255, 255]);
  assert.deepEqual(t.fill_(-(2 ** 31)).toArray(), [-2147483648, -2147483648]);
  // Float dtypes take any number: overflow to Infinity is IEEE rounding, not an integer conversion.
  assert.deepEqual(kiln.full([1], 1e300, { dtype: 'float32' }).toArray(), [Infinity]);
});

test('in-range fractions truncate toward zero (torch.tensor([2.7, -2.7], dtype=torch.int32) is [2, -2])', () => {
  assert.deepEqual(kiln.tensor([2.7, -2.7, 0.5], { dtype: 'int32' }).toArray(), [2, -2, 0]);
  assert.deepEqual(kiln.tensor([2.7, 254.9], { dtype: 'uint8' }).toArray(), [2, 254]);
  assert.deepEqual(kiln.tensor([-2.7], { dtype: 'int64' }).toArray(), [-2]);
  assert.deepEqual(kiln.full([1], -3.9, { dtype: 'int32' }).toArray(), [-3]);
  // Checked before truncation, like c10::overflows on the double: 255.5 > 255 does not fit uint8.
  assertThrowsWith(() => kiln.tensor([255.5], { dtype: 'uint8' }), 'tensor', 'value 255.5', 'uint8', OVERFLOW);
});

test('uint8 takes negative integers down to -255 wrapped, as torch (fuzz fixture cases 158, 320, 1081)', () => {
  // torch 2.11: torch.tensor([6, 7, 8], dtype=torch.uint8).masked_fill(mask, -1) -> 255 where masked
  // (fixture case 320: every element 255; case 158: the masked pairs 255, the rest unchanged).
  const x = kiln.tensor([6, 7, 8], { dtype: 'uint8' });
  assert.deepEqual(x.maskedFill(kiln.tensor([true, false, true]), -1).toArray(), [255, 7, 255]);
  assert.deepEqual(x.maskedFill(kiln.tensor(true), -1).toArray(), [255, 255, 255]);
  // The same c10 conversion serves fill_, torch.full and torch.tensor: -1 -> 255, -255 -> 1.
  assert.deepEqual(kiln.full([2], -1, { dtype: 'uint8' }).toArray(), [255, 255]);
  assert.deepEqual(kiln.zeros([2], { dtype: 'uint8' }).fill_(-255).toArray(), [1, 1]);
  assert.deepEqual(kiln.tensor([-1, -128], { dtype: 'uint8' }).toArray(), [255, 128]);
  assert.deepEqual(kiln.tensor([-1n], { dtype: 'uint8' }).toArray(), [255]);
  // Beyond -max, or a negative fraction, still overflows (c10 checks a double against [0, 255]).
  assertThrowsWith(() => x.maskedFill(kiln.tensor(true), -256), 'maskedFill', 'value -256', 'uint8', OVERFLOW);
  assertThrowsWith(() => kiln.tensor([-0.5], { dtype: 'uint8' }), 'tensor', 'value -0.5', 'uint8', OVERFLOW);
  assertThrowsWith(() => kiln.tensor([-256n], { dtype: 'uint8' }), 'tensor', 'value -256', 'uint8', OVERFLOW);
});

test('bool takes any number as nonzero-ness, as torch converts', () => {
  assert.deepEqual(kiln.tensor([2.5, 0, -1, 1e300], { dtype: 'bool' }).toArray(), [true, false, true, true]);
});

test('int64 from bigint covers the full int64 range; beyond it is an error', () => {
  const t = kiln.tensor([-(2n ** 63n), 2n ** 63n - 1n], { dtype: 'int64' });
  assert.equal(t.dtype, 'int64');
  assertThrowsWith(() => kiln.tensor([2n ** 63n], { dtype: 'int64' }), 'tensor', 'value 9223372036854775808', 'int64', OVERFLOW);
  assertThrowsWith(() => kiln.tensor([-(2n ** 63n) - 1n], { dtype: 'int64' }), 'tensor', 'int64', OVERFLOW);
  assertThrowsWith(() => kiln.tensor([2 ** 53], { dtype: 'int64' }), 'tensor', 'value 9007199254740992', 'bigint');
});

test('huge sizes are rejected before allocating, naming function, element count, dtype bytes and limit', () => {
  // 2^40 int64 elements: 8 bytes each, far beyond a cpu tensor's typed-array limit.
  assertThrowsWith(() => kiln.arange(2 ** 40), 'arange', '1099511627776 elements', 'int64', '8 bytes each', 'limit');
  assertThrowsWith(() => kiln.zeros([2 ** 20, 2 ** 20]), 'zeros', '1099511627776 elements', 'float32', '4 bytes each', 'limit');
  assertThrowsWith(() => kiln.ones([2 ** 21, 2 ** 21], { dtype: 'uint8' }), 'ones', '1 bytes each');
  assertThrowsWith(() => kiln.empty([2 ** 40]), 'empty', 'limit');
  assertThrowsWith(() => kiln.full([2 ** 40], 1), 'full', 'limit');
  assertThrowsWith(() => kiln.randn([2 ** 40]), 'randn', 'limit');
  assertThrowsWith(() => kiln.linspace(0, 1, 2 ** 40), 'linspace', 'limit');
  // Ordinary sizes are unaffected.
  assert.deepEqual(kiln.arange(3).toArray(), [0, 1, 2]);
});
