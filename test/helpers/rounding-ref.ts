/**
 * Rounding and comparison helpers for tests of kernels that store bfloat16 / float16: the value a
 * float64 reference takes after the kernel's store (round to nearest even for bfloat16, as the
 * kernels round; nearest for float16, ties away from zero, rare in these tests), the tensor's
 * values as float64 on the host, and the worst error of a result relative to `rel * (1 + |want|)`
 * (<= 1 passes), so a test states its bound as one relative step of the output dtype.
 */
import assert from 'node:assert/strict';
import type { Tensor } from '../../src/tensor/tensor.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** v rounded to bfloat16 (round to nearest even on the float32 bits; NaN stays NaN). */
export function toBf16(v: number): number {
  if (Number.isNaN(v)) return v;
  f32[0] = v;
  const u = u32[0]!;
  u32[0] = ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16;
  return f32[0];
}

/** v rounded to float16 (11-bit significand, subnormals below 2^-14; ties away from zero). */
export function toF16(v: number): number {
  if (v === 0 || !Number.isFinite(v)) return v;
  const ulp = 2 ** (Math.max(Math.floor(Math.log2(Math.abs(v))), -14) - 10);
  return Math.round(v / ulp) * ulp;
}

/** A tensor's values on the host as float64, in logical order. */
export const hostF64 = (t: Tensor): number[] => t.to('cpu').to('float64').contiguous().toFlatArray() as number[];

/** max |got - want| / (rel (1 + |want|)) over the elements: <= 1 is within the bound. */
export function worstRel(got: readonly number[], want: readonly number[], rel: number): number {
  assert.equal(got.length, want.length);
  let m = 0;
  for (let i = 0; i < got.length; i++) m = Math.max(m, Math.abs(got[i]! - want[i]!) / (rel * (1 + Math.abs(want[i]!))));
  return m;
}
