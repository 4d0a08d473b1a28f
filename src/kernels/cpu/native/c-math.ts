/**
 * Vectorisable float32 exp / tanh / sigmoid / erf / GELU in C for generated native kernels: the
 * same algorithms and coefficients as kernels/cpu/wasm-math.ts (Cephes expf and tanhf, fitted erf
 * and erfc), written branch-free (selects, integer bit casts through memcpy) so GCC and Clang
 * vectorise loops that call them; libm's expf/tanhf/erff would keep the loop scalar unless
 * -ffast-math, which we do not use (it breaks NaN/inf semantics). log uses libm's logf.
 * NaN propagates through every function (the clamps are comparisons that are false for NaN).
 * Shared by the eager native kernels (gemm-c.ts, ops-c.ts) and the compiler's generated C
 * (compile/codegen/c), so an op computes the same float32 values eager and compiled. Guarded
 * (KILN_C_MATH): a source composed of several that include it defines it once.
 */
const f = (v: number): string => `${Math.fround(v).toPrecision(9)}f`;
const horner = (x: string, c: readonly number[]): string => c.slice(1).reduce((acc, k) => `(${acc} * ${x} + ${f(k)})`, f(c[0]!));

// Coefficients shared with wasm-math.ts (highest power first).
const EXP_POLY = [1.987569150e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
const TANH_POLY = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1];
const ERF_P = [7.847259257687256e-5, -8.008189033716917e-4, 5.188099108636379e-3, -2.6853691786527634e-2, 1.128358244895935e-1, -3.761262595653534e-1, 1.1283791065216064];
const ERFC_H = [
  0.1135115996003151, -0.619635283946991, 1.4461660385131836, -1.8275877237319946, 1.2091847658157349, -0.11036787182092667, -0.4878135919570923,
  -7.153732585720718e-4, -0.5723479390144348,
];

export const C_MATH = `
#ifndef KILN_C_MATH
#define KILN_C_MATH 1
static inline float k_asf(uint32_t i) { float v; memcpy(&v, &i, 4); return v; }
/* exp: clamp to [ln 2^-150, 89], n = rint(x log2 e), r = x - n ln 2 (Cody-Waite), 2^n in two halves
   so that denormal results round once. */
static inline float k_exp(float x) {
  float xc = x < -103.972077f ? -103.972077f : (x > 89.0f ? 89.0f : x);
  float n = __builtin_rintf(xc * 1.44269504f);
  float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
  float p = ${horner('r', EXP_POLY)} * r * r + r + 1.0f;
  int32_t ni = (int32_t)(n == n ? n : 0.0f);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float res = p * k_asf((uint32_t)(n1 + 127) << 23) * k_asf((uint32_t)(n2 + 127) << 23);
  return x < -103.972077f ? 0.0f : res;
}
static inline float k_tanh(float x) {
  float a = fabsf(x), z = x * x;
  float small = ${horner('z', TANH_POLY)} * z * x + x;
  float large = 1.0f - 2.0f / (k_exp(a + a) + 1.0f);
  return copysignf(a < 0.625f ? small : large, x);
}
static inline float k_sigmoid(float x) {
  float e = k_exp(-fabsf(x)), d = 1.0f + e;
  return x < 0.0f ? e / d : 1.0f / d;
}
static inline float k_erf_small(float u) { float s = u * u; return ${horner('s', ERF_P)} * u; }
/* erfc(t) for t >= 1: exp(-t^2 + h(1/t)) / t. */
static inline float k_erfc_large(float a) {
  float t = a < 1.0f ? 1.0f : (a > 10.5f ? 10.5f : a);
  float v = 1.0f / t;
  return k_exp(${horner('v', ERFC_H)} - t * t) * v;
}
/* k_erf for |x| < 1 only (its first branch): no erfc, no exp. */
static inline float k_erf_near(float x) { return copysignf(k_erf_small(x), x); }
static inline int k_erf_is_near(float x) { return fabsf(x) < 1.0f; }
static inline float k_erf(float x) {
  float a = fabsf(x);
  float r = a < 1.0f ? k_erf_small(x) : 1.0f - k_erfc_large(a);
  return copysignf(r, x);
}
/* k_gelu for |x / sqrt 2| < 1 only (its first branch). */
static inline float k_gelu_near(float x) { return (0.5f * x) * (1.0f + k_erf_small(x * 0.707106781f)); }
static inline int k_gelu_is_near(float x) { return fabsf(x * 0.707106781f) < 1.0f; }
static inline float k_gelu(float x) {
  float u = x * 0.707106781f, a = fabsf(u);
  float c = k_erfc_large(a);
  float large = u > 0.0f ? 2.0f - c : c;
  return (0.5f * x) * (a < 1.0f ? 1.0f + k_erf_small(u) : large);
}
/* Whether all 8 of g[0..8) * scale lie in (-1, 1) (NaN does not): the branch k_erf (scale 1) and
   k_gelu (scale 1/sqrt 2, computed as they compute it) take for each. One 8-float vector compare
   (GCC/Clang vector extensions: AVX, or pairs of SSE / NEON vectors). */
typedef float k_v8 __attribute__((vector_size(32)));
typedef int32_t k_v8i __attribute__((vector_size(32)));
static inline int k_all_near(const float *g, float scale) {
  const k_v8 sc = { scale, scale, scale, scale, scale, scale, scale, scale };
  const k_v8 one = { 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f };
  const k_v8i mag = { 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff };
  k_v8 v;
  k_v8i a;
  uint64_t q[4];
  memcpy(&v, g, sizeof v);
  v = v * sc;
  memcpy(&a, &v, sizeof a);
  a &= mag;
  memcpy(&v, &a, sizeof v);
  k_v8i m = v < one;
  memcpy(q, &m, sizeof q);
  return (q[0] & q[1] & q[2] & q[3]) == ~(uint64_t)0;
}
/* Segments of K_SEG values for k_gelu_row and the GEMM epilogues (codegen/c/gemm.ts): a chunk of
   8 lanes that all take erf's first branch needs no erfc / exp, ~90% of the branch-free cost. */
#define K_SEG 64
/* More wide chunks than this in a segment: the whole segment runs the full function (8-lane
   fix-ups are one dependent chain each and run at a third of the throughput of a long loop). */
#define K_SEG_FIXUPS 2
static inline void k_gelu_full(float *y, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; j++) y[j] = k_gelu(x[j]);
}
/* y[0..n) = gelu(x[0..n)) (y may be x), the same float32 values as k_gelu per element. Chunks of
   8 inputs with |x| < sqrt 2 (97% of a layer whose pre-activations have std 0.6) run k_gelu_near.
   Measured per 32 K values on one Zen 3 core: 79 -> 34 us at std 0.58, 78 -> 83 us at std 3
   (nearly every chunk wide), 78 -> 95 us at std 1 (the worst: most segments mixed). */
static inline void k_gelu_row(float *y, const float *x, int64_t n) {
  int64_t j0 = 0;
  for (; j0 + K_SEG <= n; j0 += K_SEG) {
    const float *xs = x + j0;
    int wide[K_SEG / 8], nwide = 0;
    for (int q = 0; q < K_SEG / 8; q++) {
      wide[q] = !k_all_near(xs + 8 * q, 0.707106781f);
      nwide += wide[q];
    }
    if (nwide > K_SEG_FIXUPS) {
      k_gelu_full(y + j0, xs, K_SEG);
      continue;
    }
    float o[K_SEG];
#pragma omp simd
    for (int j = 0; j < K_SEG; j++) o[j] = k_gelu_near(xs[j]);
    for (int q = 0; q < K_SEG / 8; q++)
      if (wide[q]) k_gelu_full(o + 8 * q, xs + 8 * q, 8);
    memcpy(y + j0, o, sizeof o);
  }
  k_gelu_full(y + j0, x + j0, n - j0);
}
/* 0.5 x (1 + tanh(z)) = x sigmoid(2 z): no 1 + tanh cancellation in the negative tail. */
static inline float k_gelu_tanh(float x) {
  float z2 = (x * x * x * 0.044715f + x) * 1.59576912f;
  return x * k_sigmoid(z2);
}
#endif /* KILN_C_MATH */
`;

/** NaN-propagating max/min/clamp and relu, as the eager kernels (torch.maximum semantics). */
export const C_HELPERS = `
static inline float k_max(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
static inline float k_min(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
static inline float k_lo(float x, float lo) { return x < lo ? lo : x; }
static inline float k_hi(float x, float hi) { return x > hi ? hi : x; }
static inline float k_relu(float x) { return x > 0.0f || x != x ? x : 0.0f; }
`;
