/**
 * How each Kiln dtype looks in generated CUDA C: its storage type, the type arithmetic runs in
 * (float for the 16-bit floats: fp32 accumulation), and the load/store conversions. The prelude
 * defines the 16-bit conversions with inline PTX, so generated kernels need no CUDA headers (NVRTC
 * and a local `nvcc -cubin` compile them the same way).
 */
import type { DType } from '../../../tensor/dtype.js';

export type CType = 'float' | 'double' | 'int' | 'long long';

export function storageType(d: DType): string {
  switch (d) {
    case 'float32':
      return 'float';
    case 'float64':
      return 'double';
    case 'float16':
    case 'bfloat16':
      return 'unsigned short';
    case 'int32':
      return 'int';
    case 'int64':
      return 'long long';
    case 'uint8':
    case 'bool':
      return 'unsigned char';
    default:
      return d satisfies never;
  }
}

/** The type arithmetic on `d` runs in. */
export function computeType(d: DType): CType {
  switch (d) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
      return 'float';
    case 'float64':
      return 'double';
    case 'int64':
      return 'long long';
    case 'int32':
    case 'uint8':
    case 'bool':
      return 'int';
    default:
      return d satisfies never;
  }
}

/** A storage value of dtype `d` as compute type `ct`. */
export function loadAs(d: DType, expr: string, ct: CType): string {
  if (d === 'float16') return ct === 'float' ? `kiln_h2f(${expr})` : `(${ct})kiln_h2f(${expr})`;
  if (d === 'bfloat16') return ct === 'float' ? `kiln_bf2f(${expr})` : `(${ct})kiln_bf2f(${expr})`;
  return `(${ct})(${expr})`;
}

/** A compute value `expr` (of type `ct`) stored as dtype `d`. */
export function storeAs(d: DType, expr: string, ct: CType): string {
  const isFloat = ct === 'float' || ct === 'double';
  switch (d) {
    case 'float16':
      return `kiln_f2h((float)(${expr}))`;
    case 'bfloat16':
      return `kiln_f2bf((float)(${expr}))`;
    case 'bool':
      return isFloat ? `kiln_tobool((double)(${expr}))` : `(unsigned char)((${expr}) != 0)`;
    case 'uint8':
      // Through int first: a float outside 0..255 wraps modulo 256 (as the CPU kernels' Uint8Array does).
      return isFloat ? `(unsigned char)(int)(${expr})` : `(unsigned char)(${expr})`;
    default:
      return `(${storageType(d)})(${expr})`;
  }
}

/**
 * A C literal of value `x` in type `t`. Floats print with 9 significant digits (enough to round-trip
 * float32), doubles with 17; non-finite values go through bit-pattern intrinsics so no header
 * (math_constants.h) is needed under NVRTC.
 */
export function cLit(x: number, t: CType): string {
  if (t === 'int' || t === 'long long') {
    if (!Number.isFinite(x)) return '0';
    const v = Math.trunc(x);
    if (t === 'int') return v === -2147483648 ? '(-2147483647 - 1)' : v < 0 ? `(${v})` : String(v);
    return v < 0 ? `(${v}LL)` : `${v}LL`;
  }
  if (t === 'float') {
    if (Number.isNaN(x)) return '__int_as_float(0x7fc00000)';
    if (x === Infinity) return '__int_as_float(0x7f800000)';
    if (x === -Infinity) return '__int_as_float(0xff800000)';
    if (Object.is(x, -0)) return '(-0.0f)';
    const s = Number.isInteger(x) && Math.abs(x) < 1e15 ? `${x}.0f` : `${x.toPrecision(9)}f`;
    return x < 0 ? `(${s})` : s;
  }
  if (Number.isNaN(x)) return '__longlong_as_double(0x7ff8000000000000LL)';
  if (x === Infinity) return '__longlong_as_double(0x7ff0000000000000LL)';
  if (x === -Infinity) return '__longlong_as_double((long long)0xfff0000000000000ULL)';
  if (Object.is(x, -0)) return '(-0.0)';
  const s = Number.isInteger(x) && Math.abs(x) < 1e15 ? `${x}.0` : x.toPrecision(17);
  return x < 0 ? `(${s})` : s;
}

/** Name of a libm function in the precision of `t` (expf for float, exp for double). */
export function mathFn(name: string, t: CType): string {
  return t === 'float' ? `${name}f` : name;
}

/** Helpers every generated kernel may use. */
export const PRELUDE = `
#define KILN_INF __int_as_float(0x7f800000)
#define KILN_NAN __int_as_float(0x7fffffff)
__device__ __forceinline__ float kiln_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float kiln_bf2f(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) { unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned char kiln_tobool(double v) { return (v != 0.0 && v == v) ? 1 : 0; }
template <typename T> __device__ __forceinline__ T kiln_max(T a, T b) { return (a != a) ? a : (b != b) ? b : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T kiln_min(T a, T b) { return (a != a) ? a : (b != b) ? b : (a < b ? a : b); }
template <typename T> __device__ __forceinline__ T kiln_sign(T a) { return (T)((a > (T)0) - (a < (T)0)); }
template <typename T> __device__ __forceinline__ T kiln_irem(T a, T b) { T m = a % b; if (m != 0 && ((b < 0) != (m < 0))) m += b; return m; }
template <typename T> __device__ __forceinline__ T kiln_idivfloor(T a, T b) { T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; return q; }
__device__ __forceinline__ float kiln_frem(float a, float b) { float m = fmodf(a, b); if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) m += b; return m; }
__device__ __forceinline__ double kiln_frem(double a, double b) { double m = fmod(a, b); if (m != 0.0 && ((b < 0.0) != (m < 0.0))) m += b; return m; }
__device__ __forceinline__ float kiln_fdivfloor(float a, float b) {
  if (b == 0.0f) return a / b;
  float mod = fmodf(a, b); float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
  if (div == 0.0f) return copysignf(0.0f, a / b);
  float fl = floorf(div); if (div - fl > 0.5f) fl += 1.0f; return fl;
}
__device__ __forceinline__ double kiln_fdivfloor(double a, double b) {
  if (b == 0.0) return a / b;
  double mod = fmod(a, b); double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0.0) != (mod < 0.0))) div -= 1.0;
  if (div == 0.0) return copysign(0.0, a / b);
  double fl = floor(div); if (div - fl > 0.5) fl += 1.0; return fl;
}
template <typename T> __device__ __forceinline__ T kiln_ipow(T a, T b) {
  if (b < 0) { if (a == 1) return 1; if (a == -1) return (b % 2 != 0) ? -1 : 1; return 0; }
  T r = 1; while (b > 0) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
}
__device__ __forceinline__ float kiln_exp(float x) { return expf(x); }
__device__ __forceinline__ double kiln_exp(double x) { return exp(x); }
__device__ __forceinline__ float kiln_log(float x) { return logf(x); }
__device__ __forceinline__ double kiln_log(double x) { return log(x); }
__device__ __forceinline__ float kiln_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double kiln_sqrt(double x) { return sqrt(x); }
template <typename T, int N> struct __align__(sizeof(T) * N) kiln_vec { T v[N]; };
`;
