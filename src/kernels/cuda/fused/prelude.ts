/**
 * The device-side prelude every generated source starts with: half/bfloat16 conversions, the
 * scalar helpers the templates call (PyTorch semantics: NaN-propagating max/min, C pow, Python
 * floor division and remainder, lerp), a 16-byte-aligned vector type for vectorised loads/stores,
 * and warp/block reductions. It is wrapped in an include guard so many kernels' sources can be
 * concatenated into one translation unit (the test suite compiles all of them with one nvcc run).
 *
 * Half conversions come in two flavours (`HalfMode`):
 * - 'ptx' (default): inline PTX `cvt` instructions; the source includes no header at all, so NVRTC
 *   needs no include path (its built-in headers cover everything used).
 * - 'headers': cuda_fp16.h / cuda_bf16.h intrinsics. NVRTC then needs the toolkit's include
 *   directory (`--include-path=<cuda>/include`); `nvrtcOptions()` returns what to pass.
 * Both compile to the same cvt.rn instructions on sm_80+.
 */

export type HalfMode = 'ptx' | 'headers';

const HALF_PTX = `
__device__ __forceinline__ float kiln_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float kiln_bf2f(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) { unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }`;

const HALF_HEADERS = `
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float kiln_h2f(unsigned short h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ unsigned short kiln_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float kiln_bf2f(unsigned short h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }`;

/** The vector type of the renderer's 16/8/4-byte accesses (body.ts); eager one-node programs add it to their own prelude. */
export const KVEC = 'template <int N, typename T> struct alignas(sizeof(T) * N) KVec { T v[N]; };';

const HELPERS = `
${KVEC}
__device__ __forceinline__ long long kiln_f2ll(double x) { return (x == x && x < 9.3e18 && x > -9.3e18) ? (long long)trunc(x) : 0LL; }
template <typename T> __device__ __forceinline__ T kiln_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T kiln_min(T a, T b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ float kiln_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double kiln_abs(double x) { return fabs(x); }
__device__ __forceinline__ int kiln_abs(int x) { return x < 0 ? -x : x; }
__device__ __forceinline__ long long kiln_abs(long long x) { return x < 0 ? -x : x; }
__device__ __forceinline__ bool kiln_isinf(float x) { return fabsf(x) == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool kiln_isinf(double x) { return fabs(x) == __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ bool kiln_isfinite(float x) { return x == x && !kiln_isinf(x); }
__device__ __forceinline__ bool kiln_isfinite(double x) { return x == x && !kiln_isinf(x); }
__device__ __forceinline__ float kiln_cpow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double kiln_cpow(double x, double y) { return pow(x, y); }
template <typename T> __device__ __forceinline__ T kiln_remainder(T a, T b) { T m = fmod(a, b); if (m != 0 && ((b < 0) != (m < 0))) m += b; return m; }
template <typename T> __device__ __forceinline__ T kiln_divfloor(T a, T b) {
  if (b == 0) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign((T)0, a / b);
  T fl = floor(div);
  if (div - fl > (T)0.5) fl += 1;
  return fl;
}
// Fast float exp/tanh (templates.ts, ctx.fast): exp(x) = 2^(x log2 e) through ex2.approx, as
// Triton's tl.exp (torch.compile's kernels) does; relative error about 2^-22 plus the rounding of
// x log2 e (|x| 2^-24 relative: 5e-6 at |x| = 80). tanh from one such exp: 1 - 2/(e^2|x| + 1) loses
// relative precision near 0, so |x| < 0.03 uses its odd Taylor polynomial (error below 1e-10).
__device__ __forceinline__ float kiln_fexp(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f)); return y; }
// Both tanh paths are computed and one selected: with a branch, a warp whose 32 inputs straddle
// |x| = 0.03 (most warps of normal data, 1 - 0.95^32) ran both anyway, plus the branch.
__device__ __forceinline__ float kiln_ftanh(float x) {
  const float a = fabsf(x);
  const float x2 = x * x;
  const float p = x * (1.0f - x2 * (0.333333343f - x2 * 0.13333334f));
  const float e = kiln_fexp(-2.0f * a);
  const float t = copysignf(__fdividef(1.0f - e, 1.0f + e), x);
  return a < 0.03f ? p : t;
}
// tanh in one MUFU.TANH (tanh.approx.f32, sm_75+), for kernels whose every stored result is
// bfloat16 (templates.ts, ctx.bf16Results): its relative error, about 2^-11 by the PTX ISA, is
// under a quarter of a bfloat16 ulp (2^-8 to 2^-7 relative), so the rounded result stays within
// one ulp of tanh's (test/cuda-fast-math.test.ts checks every bfloat16 input). kiln_ftanh spends
// two MUFU ops (ex2 and rcp); in elementwise-4096 the MUFU pipe is the bfloat16 kernel's limit.
__device__ __forceinline__ float kiln_tanh_approx(float x) { float y; asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
// 1/d through rcp.approx (about 1 ulp) for sigmoid and silu under fast math, where d = 1 + e^-x >= 1
// (d = inf gives 0, as 1/inf). The IEEE 1.0f / d (rcp.rn) is a dozen instructions with a slow
// path; it made elementwise-4096's bfloat16 kernel instruction-bound (about 60% of copy bandwidth).
// Not .ftz: for d above 2^126 the reciprocal is subnormal, and silu(-88) = -88 / d is a normal float.
__device__ __forceinline__ float kiln_frcp(float d) { float y; asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(d)); return y; }
template <typename T> __device__ __forceinline__ T kiln_lerp(T s, T e, T w) { T d = e - s; return (w < (T)0.5 && w > (T)-0.5) ? s + w * d : e - d * ((T)1 - w); }
// Reduction combiners; kiln_cmax / kiln_cmin propagate NaN like the JS kernels' accumulators.
struct KSum { template <typename T> static __device__ __forceinline__ T f(T a, T b) { return a + b; } };
struct KProd { template <typename T> static __device__ __forceinline__ T f(T a, T b) { return a * b; } };
struct KMax { template <typename T> static __device__ __forceinline__ T f(T a, T b) { return (b > a || b != b) ? b : a; } };
struct KMin { template <typename T> static __device__ __forceinline__ T f(T a, T b) { return (b < a || b != b) ? b : a; } };
template <typename Op, typename T> __device__ __forceinline__ T kiln_warp_reduce(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = Op::f(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide all-reduce through dynamic shared memory (one slot per warp, 8 bytes each); every
// thread gets the result. The trailing barrier lets the next reduction reuse the slots.
template <typename Op, typename T> __device__ __forceinline__ T kiln_block_reduce(T v, T identity, unsigned char* smem) {
  T* sh = reinterpret_cast<T*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = kiln_warp_reduce<Op>(v);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < nw ? sh[lane] : identity;
    w = kiln_warp_reduce<Op>(w);
    if (lane == 0) sh[0] = w;
  }
  __syncthreads();
  const T r = sh[0];
  __syncthreads();
  return r;
}`;

/** The prelude for a half mode (guarded: safe to repeat in one translation unit). */
export function prelude(mode: HalfMode = 'ptx'): string {
  return [`#ifndef KILN_PRELUDE_${mode.toUpperCase()}`, `#define KILN_PRELUDE_${mode.toUpperCase()}`, mode === 'ptx' ? HALF_PTX : HALF_HEADERS, HELPERS, '#endif', ''].join('\n');
}

/**
 * NVRTC options a generated source needs: the exact architecture and, in 'headers' mode, the
 * toolkit include directory. (NVRTC 13 rejects -O3; optimisation is on by default.)
 */
export function nvrtcOptions(arch: string, mode: HalfMode, cudaInclude = '/usr/local/cuda/include'): string[] {
  const opts = [`--gpu-architecture=${arch}`, '--std=c++17'];
  if (mode === 'headers') opts.push(`--include-path=${cudaInclude}`);
  return opts;
}
