/** Host typed arrays per dtype and element encode/decode between JS numbers and storage words. */
import type { DType } from './dtype.js';
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from './half.js';

export type StorageArray = Float32Array | Float64Array | Uint16Array | Int32Array | BigInt64Array | Uint8Array;

export function storageArray(dtype: DType, buffer: ArrayBuffer, byteOffset = 0, length?: number): StorageArray {
  switch (dtype) {
    case 'float32':
      return new Float32Array(buffer, byteOffset, length);
    case 'float64':
      return new Float64Array(buffer, byteOffset, length);
    case 'float16':
    case 'bfloat16':
      return new Uint16Array(buffer, byteOffset, length);
    case 'int32':
      return new Int32Array(buffer, byteOffset, length);
    case 'int64':
      return new BigInt64Array(buffer, byteOffset, length);
    case 'uint8':
    case 'bool':
      return new Uint8Array(buffer, byteOffset, length);
    default:
      return dtype satisfies never;
  }
}

/** Converts a JS number to what a storage word of `dtype` holds (bits for halves, bigint for int64). */
export function encoder(dtype: DType): (x: number) => number | bigint {
  switch (dtype) {
    case 'float32':
    case 'float64':
      return (x) => x;
    case 'float16':
      return float32ToFloat16Bits;
    case 'bfloat16':
      return float32ToBfloat16Bits;
    case 'int32':
      return (x) => x; // Int32Array wraps modulo 2^32 on store, as PyTorch's int32 does
    case 'int64':
      return (x) => (Number.isFinite(x) ? BigInt(Math.trunc(x)) : 0n);
    case 'uint8':
      return (x) => x; // Uint8Array wraps modulo 256
    case 'bool':
      return (x) => (x !== 0 && !Number.isNaN(x) ? 1 : 0);
    default:
      return dtype satisfies never;
  }
}

export function decoder(dtype: DType): (w: number | bigint) => number {
  switch (dtype) {
    case 'float16':
      return (w) => float16BitsToFloat32(w as number);
    case 'bfloat16':
      return (w) => bfloat16BitsToFloat32(w as number);
    case 'int64':
      return (w) => Number(w);
    case 'float32':
    case 'float64':
    case 'int32':
    case 'uint8':
    case 'bool':
      return (w) => w as number;
    default:
      return dtype satisfies never;
  }
}

/** Rounds a JS number to the value a dtype would store (for references and scalars). */
export function castValue(x: number, dtype: DType): number {
  switch (dtype) {
    case 'int32':
      return Number.isFinite(x) ? Math.trunc(x) | 0 : 0;
    case 'uint8':
      return Number.isFinite(x) ? Math.trunc(x) & 0xff : 0;
    case 'float32':
      return Math.fround(x);
    default:
      return decoder(dtype)(encoder(dtype)(x));
  }
}

/** The integer range each integer dtype holds from a JS number; int64 stops at the safe-integer
 * range because a number beyond it is already rounded (pass a bigint for exact int64 values). */
const INT_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  uint8: [0, 255],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/**
 * Rejects a value an integer dtype cannot hold, as PyTorch's checked conversion does
 * (c10::overflows: "value cannot be converted to type int32 without overflow"): NaN and ±Infinity
 * are errors, and so is a number outside the dtype's range, compared before truncation (so 255.5
 * does not fit uint8). In-range fractions are truncated toward zero by the caller's encoder, as
 * torch.tensor([2.7], dtype=torch.int32) gives 2. Floating and bool dtypes take any number (bool
 * is nonzero-ness, as torch converts). bigint input to int64 is checked against the full int64
 * range.
 *
 * An unsigned target takes a negative *integer* down to -max and wraps it (two's complement), as
 * c10::overflows does for a signed integral source ("this allows for `a - b` to be treated as
 * `a + 255 * b`"): masked_fill(uint8, mask, -1) writes 255 in torch 2.11 (fuzz fixture cases 158,
 * 320, 1081), and torch.full / fill_ / torch.tensor go through the same conversion. A negative
 * fraction is a Python float there, whose check is the plain range, so -0.5 into uint8 is an error.
 */
export function checkIntegerValue(fn: string, value: number | bigint | boolean, dtype: DType): void {
  const range = INT_RANGE[dtype];
  if (!range || typeof value === 'boolean') return;
  // An unsigned dtype also takes negative integers down to -max, wrapped; the message says so.
  const unsigned = range[0] === 0;
  const wrapLo = unsigned ? -range[1] : range[0];
  const wraps = unsigned ? `, negative integers to -${range[1]} wrap` : '';
  if (typeof value === 'bigint') {
    const [lo, hi] = dtype === 'int64' ? [-(2n ** 63n), 2n ** 63n - 1n] : [BigInt(wrapLo), BigInt(range[1])];
    if (value >= lo && value <= hi) return;
    const held = dtype === 'int64' ? `[${lo}, ${hi}]` : `[${range[0]}, ${range[1]}]${wraps}`;
    throw new RangeError(`${fn}: value ${value} cannot be converted to type ${dtype} without overflow (${dtype} holds ${held})`);
  }
  if (value >= range[0] && value <= range[1]) return;
  if (Number.isInteger(value) && value >= wrapLo && value < 0) return;
  if (Number.isNaN(value)) throw new RangeError(`${fn}: value NaN cannot be converted to type ${dtype} (an integer dtype has no NaN)`);
  const held =
    dtype === 'int64'
      ? `[${range[0]}, ${range[1]}], the safe-integer range of a JS number; pass a bigint for larger int64 values`
      : `[${range[0]}, ${range[1]}]${wraps}`;
  throw new RangeError(`${fn}: value ${value} cannot be converted to type ${dtype} without overflow (${dtype} holds ${held})`);
}
