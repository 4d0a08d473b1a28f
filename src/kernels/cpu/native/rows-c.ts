/**
 * C source of the native row kernels of a cpu decode step (issue #17) for float32 or bfloat16
 * tensors (bits, decoded and rounded to nearest even here), all contiguous:
 *
 *   kiln_add_rms   out = rmsNorm(x (+ r)) * w per row of n; with r, sum = x + r rounded to the
 *                  dtype is written too and normalised (llm.addRmsNorm); without, plain rmsNorm.
 *                  Sums of squares and the scaling in double, as the JS kernels.
 *   kiln_rope      neox rotary: out = x cos + rotate_half(x) sin, x [rows, heads, d], cos / sin
 *                  [rows, d] (one row per token, shared by its heads), in double.
 */
export const ROWS_C_SOURCE = String.raw`
#include <stdint.h>
#include <string.h>
#include <math.h>

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
`;
