/**
 * float16 and bfloat16 <-> float32 conversions on raw 16-bit words, round-to-nearest-even, with
 * NaN, infinities and subnormals handled as IEEE 754 specifies.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function float32ToBfloat16Bits(x: number): number {
  f32[0] = x;
  return bfloat16FromFloat32Bits(u32[0]!);
}

/** float32ToBfloat16Bits on a float32's bit pattern (the bulk converters below share it). */
export function bfloat16FromFloat32Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff; // NaN (exponent all ones, mantissa not 0): keep it quiet
  const roundingBias = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + roundingBias) >>> 16) & 0xffff;
}

export function bfloat16BitsToFloat32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

export function float32ToFloat16Bits(x: number): number {
  f32[0] = x;
  return float16FromFloat32Bits(u32[0]!);
}

/** float32ToFloat16Bits on a float32's bit pattern (the bulk converters below share it). */
export function float16FromFloat32Bits(bits: number): number {
  const abs = bits & 0x7fffffff;
  if (abs >= 0x38800000 && abs < 0x47800000) {
    // A normal float16 result (float32 exponent 113..142): rebias the exponent and round the low 13
    // bits to nearest even without a branch (adding 0xfff plus the lowest kept bit carries exactly
    // when the general path below rounds up; a mantissa carry bumps the exponent, and rounding up
    // from the largest exponent gives 0x7c00, infinity, as the general path does).
    return ((bits >>> 16) & 0x8000) | ((abs - 0x38000000 + 0xfff + ((abs >>> 13) & 1)) >>> 13);
  }
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0); // inf / NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow -> signed zero
    // Subnormal: shift the implicit-one mantissa right, rounding to nearest even.
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rem > half || (rem === half && (m & 1) === 1)) m++;
    return sign | m;
  }
  const rem = mant & 0x1fff;
  let m = mant >>> 13;
  if (rem > 0x1000 || (rem === 0x1000 && (m & 1) === 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/**
 * Rounds float32 values to bfloat16 words in bulk: dst[dstStart + i] = float32ToBfloat16Bits(src[i])
 * for i < src.length, reading the bits through a Uint32Array view instead of a scalar round trip
 * through a one-element Float32Array per value.
 */
export function float32ArrayToBfloat16Bits(src: Float32Array, dst: Uint16Array, dstStart = 0): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) dst[dstStart + i] = bfloat16FromFloat32Bits(bits[i]!);
}

/** Widens `count` bfloat16 words from src[start] to float32 values (exact: the bits shifted up). */
export function bfloat16BitsToFloat32Array(src: Uint16Array, start: number, count: number): Float32Array {
  const out = new Float32Array(count);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) bits[i] = src[start + i]! << 16;
  return out;
}

/** float32ArrayToBfloat16Bits for float16 (float32ToFloat16Bits' rounding). */
export function float32ArrayToFloat16Bits(src: Float32Array, dst: Uint16Array, dstStart = 0): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) dst[dstStart + i] = float16FromFloat32Bits(bits[i]!);
}

export function float16BitsToFloat32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Rounds a number through a dtype's precision (identity for float32 rounding via Math.fround). */
export function roundToFloat16(x: number): number {
  return float16BitsToFloat32(float32ToFloat16Bits(x));
}
export function roundToBfloat16(x: number): number {
  return bfloat16BitsToFloat32(float32ToBfloat16Bits(x));
}
