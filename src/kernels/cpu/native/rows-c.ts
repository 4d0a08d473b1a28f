/**
 * C source of the native row kernels of a cpu decode step (issue #17) for float32 or bfloat16
 * tensors (bits, decoded and rounded to nearest even here), all contiguous:
 *
 *   kiln_add_rms   out = rmsNorm(x (+ r)) * w per row of n; with r, sum = x + r rounded to the
 *                  dtype is written too and normalised (llm.addRmsNorm); without, plain rmsNorm.
 *                  Sums of squares and the scaling in double, as the JS kernels.
 *   kiln_rope      neox rotary: out = x cos + rotate_half(x) sin, x [rows, heads, d], cos / sin
 *                  [rows, d] (one row per token, shared by its heads), in double.
 *   kiln_silu      out = x * sigmoid(x) elementwise (the float32 k_sigmoid of c-math.ts, as the
 *                  native float32 silu), rounded once to the dtype.
 *   kiln_mul       out = a * b elementwise, same shapes (a float32 product of two bfloat16 values
 *                  is exact, so one rounding: the JS kernel's value).
 *   kiln_silu_mul  llm.siluAndMul: out[r, i] = silu(x[r, i]) * x[r, d + i] over rows of 2d, in
 *                  float32, rounded once.
 *   kiln_cache_rows  llm.reshapeAndCache's copies: row n of key / value (rowBytes each) to slot
 *                  slots[n] of the caches (same dtype: the bits are copied); slots < 0 skip; the
 *                  first slot >= capacity stops the copy and its index is returned (-1: all done).
 *   kiln_argmax    per row of n: index of the first maximum, or of the first NaN (int64 out).
 *   kiln_qk_norm_rope_cache  llm.qkNormRotaryCache (neox): per token, each q head and each k head
 *                  RMS-normalised (as kiln_add_rms, rounded to the dtype) then rotated (as
 *                  kiln_rope, rounded once); q heads to qout, k heads straight into their cache
 *                  slot, v rows copied there (bits); slots < 0 skip the cache write; the first
 *                  slot >= capacity stops and its index is returned (-1: all done). The same
 *                  arithmetic as rmsNorm -> applyRotaryEmb -> reshapeAndCache through the kernels
 *                  above, in one call per layer instead of five ops (issue #17).
 */
import { C_MATH } from './c-math.js';

export const ROWS_C_SOURCE = String.raw`
#include <stdint.h>
#include <string.h>
#include <math.h>
${C_MATH}
static inline float rw_bf(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t rw_tobf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline double rw_get(const void *p, int32_t bf16, int64_t i) {
  if (!bf16) return ((const float *)p)[i];
  uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline void rw_put(void *p, int32_t bf16, int64_t i, double v) {
  float f = (float)v;
  if (!bf16) { ((float *)p)[i] = f; return; }
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t h;
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) h = (uint16_t)((u >> 16) | 0x0040u);
  else h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  ((uint16_t *)p)[i] = h;
}

void kiln_add_rms(int64_t rows, int64_t n, const void *x, const void *r, const void *w, double eps, void *out, void *sum, int32_t bf16) {
  double s[n > 0 ? n : 1];
  for (int64_t row = 0; row < rows; row++) {
    const int64_t base = row * n;
    double ss = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = rw_get(x, bf16, base + i);
      if (r) {
        rw_put(sum, bf16, base + i, v + rw_get(r, bf16, base + i));
        v = rw_get(sum, bf16, base + i);
      }
      s[i] = v;
      ss += v * v;
    }
    const double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) rw_put(out, bf16, base + i, s[i] * inv * rw_get(w, bf16, i));
  }
}

void kiln_rope(int64_t rows, int64_t heads, int64_t d, const void *x, const void *cs, const void *sn, void *out, int32_t bf16) {
  const int64_t h = d / 2;
  for (int64_t row = 0; row < rows; row++)
    for (int64_t hd = 0; hd < heads; hd++) {
      const int64_t base = (row * heads + hd) * d;
      for (int64_t i = 0; i < d; i++) {
        const double rot = i < h ? -rw_get(x, bf16, base + i + h) : rw_get(x, bf16, base + i - h);
        rw_put(out, bf16, base + i, rw_get(x, bf16, base + i) * rw_get(cs, bf16, row * d + i) + rot * rw_get(sn, bf16, row * d + i));
      }
    }
}

void kiln_silu(int64_t n, const void *x, void *out, int32_t bf16) {
  if (bf16) {
    const uint16_t *a = (const uint16_t *)x;
    uint16_t *y = (uint16_t *)out;
    for (int64_t i = 0; i < n; i++) { float v = rw_bf(a[i]); y[i] = rw_tobf(v * k_sigmoid(v)); }
  } else {
    const float *a = (const float *)x;
    float *y = (float *)out;
    for (int64_t i = 0; i < n; i++) { float v = a[i]; y[i] = v * k_sigmoid(v); }
  }
}

void kiln_mul(int64_t n, const void *a, const void *b, void *out, int32_t bf16) {
  if (bf16) {
    const uint16_t *p = (const uint16_t *)a, *q = (const uint16_t *)b;
    uint16_t *y = (uint16_t *)out;
    for (int64_t i = 0; i < n; i++) y[i] = rw_tobf(rw_bf(p[i]) * rw_bf(q[i]));
  } else {
    const float *p = (const float *)a, *q = (const float *)b;
    float *y = (float *)out;
    for (int64_t i = 0; i < n; i++) y[i] = p[i] * q[i];
  }
}

void kiln_silu_mul(int64_t rows, int64_t d, const void *x, void *out, int32_t bf16) {
  for (int64_t r = 0; r < rows; r++) {
    if (bf16) {
      const uint16_t *g = (const uint16_t *)x + r * 2 * d, *u = g + d;
      uint16_t *y = (uint16_t *)out + r * d;
      for (int64_t i = 0; i < d; i++) { float v = rw_bf(g[i]); y[i] = rw_tobf(v * k_sigmoid(v) * rw_bf(u[i])); }
    } else {
      const float *g = (const float *)x + r * 2 * d, *u = g + d;
      float *y = (float *)out + r * d;
      for (int64_t i = 0; i < d; i++) { float v = g[i]; y[i] = v * k_sigmoid(v) * u[i]; }
    }
  }
}

int64_t kiln_cache_rows(int64_t n, int64_t row_bytes, const void *slots, int32_t slots64, int64_t capacity, const void *k, const void *v, void *kc, void *vc) {
  for (int64_t t = 0; t < n; t++) {
    const int64_t s = slots64 ? ((const int64_t *)slots)[t] : (int64_t)((const int32_t *)slots)[t];
    if (s < 0) continue;
    if (s >= capacity) return t;
    memcpy((char *)kc + s * row_bytes, (const char *)k + t * row_bytes, (size_t)row_bytes);
    memcpy((char *)vc + s * row_bytes, (const char *)v + t * row_bytes, (size_t)row_bytes);
  }
  return -1;
}

/* A value as a store into the dtype leaves it (float, then bfloat16 nearest even: as rw_put). */
static inline double rw_round(double v, int32_t bf16) {
  float f = (float)v;
  return bf16 ? (double)rw_bf(rw_tobf(f)) : (double)f;
}

/* One head of d: t = round(rmsNorm(x) * w), then out = t cos + rotate_half(t) sin, rounded. */
static void rw_norm_rope(int64_t d, const void *x, int64_t xo, const void *w, double eps, const void *cs, const void *sn, int64_t co, void *out, int64_t oo, int32_t bf16, double *t) {
  double ss = 0;
  for (int64_t i = 0; i < d; i++) { const double v = rw_get(x, bf16, xo + i); t[i] = v; ss += v * v; }
  const double inv = 1.0 / sqrt(ss / (double)d + eps);
  for (int64_t i = 0; i < d; i++) t[i] = rw_round(t[i] * inv * rw_get(w, bf16, i), bf16);
  const int64_t h = d / 2;
  for (int64_t i = 0; i < d; i++) {
    const double rot = i < h ? -t[i + h] : t[i - h];
    rw_put(out, bf16, oo + i, t[i] * rw_get(cs, bf16, co + i) + rot * rw_get(sn, bf16, co + i));
  }
}

int64_t kiln_qk_norm_rope_cache(int64_t n, int64_t hq, int64_t hk, int64_t d, const void *q, const void *k, const void *v, const void *qw, const void *kw, double eps,
                                const void *cs, const void *sn, void *qout, const void *slots, int32_t slots64, int64_t capacity, void *kc, void *vc, int32_t bf16) {
  double t[d > 0 ? d : 1];
  const int64_t row = hk * d, esz = bf16 ? 2 : 4;
  for (int64_t tok = 0; tok < n; tok++) {
    for (int64_t h = 0; h < hq; h++) rw_norm_rope(d, q, (tok * hq + h) * d, qw, eps, cs, sn, tok * d, qout, (tok * hq + h) * d, bf16, t);
    const int64_t s = slots64 ? ((const int64_t *)slots)[tok] : (int64_t)((const int32_t *)slots)[tok];
    if (s < 0) continue;
    if (s >= capacity) return tok;
    for (int64_t h = 0; h < hk; h++) rw_norm_rope(d, k, (tok * hk + h) * d, kw, eps, cs, sn, tok * d, kc, s * row + h * d, bf16, t);
    memcpy((char *)vc + s * row * esz, (const char *)v + tok * row * esz, (size_t)(row * esz));
  }
  return -1;
}

void kiln_argmax(int64_t rows, int64_t n, const void *x, int64_t *out, int32_t bf16) {
  for (int64_t r = 0; r < rows; r++) {
    int64_t best = 0;
    float bv = bf16 ? rw_bf(((const uint16_t *)x)[r * n]) : ((const float *)x)[r * n];
    if (bv == bv)
      for (int64_t j = 1; j < n; j++) {
        const float v = bf16 ? rw_bf(((const uint16_t *)x)[r * n + j]) : ((const float *)x)[r * n + j];
        if (v > bv) { bv = v; best = j; }
        else if (v != v) { best = j; break; }
      }
    out[r] = best;
  }
}
`;
