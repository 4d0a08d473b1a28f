/**
 * C source of the native eager float32 kernels other than GEMM (built once per toolchain by
 * so-cache.ts, like the GEMM): pointwise unary ops over dense data, a strided broadcasting
 * ternary-capable elementwise kernel (add / sub / mul / div / max / min and x * s + t, the affine
 * map batch norm becomes), row softmax / log-softmax, layer norm, RMS norm, and causal or full
 * scaled-dot-product attention.
 *
 * - The transcendental functions are the vectorisable ones of c-math.ts (the same float32 values
 *   as the compiled native kernels); + - * / in float32 are correctly rounded, as the JS kernels'
 *   float64-then-round results are (double rounding is exact for these at 53 >= 2 x 24 + 2 bits).
 * - Reductions (softmax, norms) accumulate in float64 per row, as the JS kernels do, so results
 *   agree with them to float32 rounding; attention accumulates in float32 with an online softmax.
 * - Work is shared over OpenMP threads by rows / chunks once a call is large enough to pay for a
 *   parallel region (PAR_MIN elements: a region costs a few microseconds, ~10 K elements of work).
 */
import { C_HELPERS, C_MATH } from './c-math.js';

/** Unary op codes of `kiln_unary` (the JS side maps op names to them). */
export const UNARY_CODES = { relu: 0, gelu: 1, geluTanh: 2, sigmoid: 3, tanh: 4, exp: 5, silu: 6, neg: 7, abs: 8, sqrt: 9, square: 10 } as const;
export type NativeUnary = keyof typeof UNARY_CODES;

/** Elementwise op codes of `kiln_elementwise` (y = a op b; fma: y = a * b + c). */
export const ELEMENTWISE_CODES = { add: 0, sub: 1, mul: 2, div: 3, maximum: 4, minimum: 5, fma: 6 } as const;
export type NativeElementwise = keyof typeof ELEMENTWISE_CODES;

/** Highest rank `kiln_elementwise` takes (after coalescing). */
export const ELEMENTWISE_MAX_RANK = 8;

export const OPS_C_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
${C_MATH}${C_HELPERS}
#define PAR_MIN 32768
#define CHUNK 4096
#define MAXR ${ELEMENTWISE_MAX_RANK}

static inline int nt(double work, int nthreads) { return work < PAR_MIN || nthreads < 1 ? 1 : nthreads; }

#define UNARY_LOOP(EXPR) for (int64_t i = 0; i < len; i++) { const float v = x[i]; y[i] = (EXPR); } break;

static void unary_chunk(int32_t op, int64_t len, const float *restrict x, float *restrict y) {
  switch (op) {
    case 0: UNARY_LOOP(k_relu(v))
    case 1: UNARY_LOOP(k_gelu(v))
    case 2: UNARY_LOOP(k_gelu_tanh(v))
    case 3: UNARY_LOOP(k_sigmoid(v))
    case 4: UNARY_LOOP(k_tanh(v))
    case 5: UNARY_LOOP(k_exp(v))
    case 6: UNARY_LOOP(v * k_sigmoid(v))
    case 7: UNARY_LOOP(-v)
    case 8: UNARY_LOOP(fabsf(v))
    case 9: UNARY_LOOP(sqrtf(v))
    case 10: UNARY_LOOP(v * v)
    default: break;
  }
}

/* y[0..n) = op(x[0..n)), both dense (y may equal x). */
void kiln_unary(int32_t op, int64_t n, const float *x, int64_t xo, float *y, int64_t yo, int32_t nthreads) {
  x += xo; y += yo;
  int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nt((double)n, nthreads)) schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    int64_t s = c * CHUNK, len = n - s < CHUNK ? n - s : CHUNK;
    unary_chunk(op, len, x + s, y + s);
  }
}

static void binary_run(int32_t op, int64_t len, float *restrict y, const float *restrict a, const float *restrict b, const float *restrict c) {
  switch (op) {
    case 0: for (int64_t i = 0; i < len; i++) y[i] = a[i] + b[i]; break;
    case 1: for (int64_t i = 0; i < len; i++) y[i] = a[i] - b[i]; break;
    case 2: for (int64_t i = 0; i < len; i++) y[i] = a[i] * b[i]; break;
    case 3: for (int64_t i = 0; i < len; i++) y[i] = a[i] / b[i]; break;
    case 4: for (int64_t i = 0; i < len; i++) y[i] = k_max(a[i], b[i]); break;
    case 5: for (int64_t i = 0; i < len; i++) y[i] = k_min(a[i], b[i]); break;
    case 6: for (int64_t i = 0; i < len; i++) y[i] = a[i] * b[i] + c[i]; break;
    default: break;
  }
}

/* Strided, broadcasting y = a op b (op 6: a * b + c). meta: shape[rank], then per operand
   (y, a, b, c) its element strides[rank], then the four offsets. Rows (all dims but the last) x
   CHUNK-wide column blocks are the work items; operands with a non-unit inner stride (broadcast,
   transposed) are gathered into stack buffers so the arithmetic is always a dense loop. */
void kiln_elementwise(int32_t op, int32_t rank, const double *meta, float *y, const float *a, const float *b, const float *c, int32_t nthreads) {
  enum { CH = 1024 };
  int64_t shape[MAXR], st[4][MAXR], off[4];
  if (rank < 1 || rank > MAXR) return;
  for (int r = 0; r < rank; r++) shape[r] = (int64_t)meta[r];
  for (int k = 0; k < 4; k++) {
    for (int r = 0; r < rank; r++) st[k][r] = (int64_t)meta[rank + k * rank + r];
    off[k] = (int64_t)meta[rank + 4 * rank + k];
  }
  int64_t n = shape[rank - 1], rows = 1;
  for (int r = 0; r < rank - 1; r++) rows *= shape[r];
  if (n <= 0 || rows <= 0) return;
  int nops = op == 6 ? 4 : 3;
  const float *src[4] = { y, a, b, c };
  int64_t nch = (n + CH - 1) / CH, items = rows * nch;
#pragma omp parallel for num_threads(nt((double)rows * (double)n, nthreads)) schedule(static)
  for (int64_t it = 0; it < items; it++) {
    float buf[4][CH] __attribute__((aligned(64)));
    const float *p[4];
    int64_t base[4];
    int64_t row = it / nch, c0 = (it % nch) * CH, len = n - c0 < CH ? n - c0 : CH;
    for (int k = 0; k < 4; k++) base[k] = off[k];
    for (int r = rank - 2; r >= 0; r--) {
      int64_t i = row % shape[r];
      row /= shape[r];
      for (int k = 0; k < 4; k++) base[k] += i * st[k][r];
    }
    for (int k = 1; k < nops; k++) {
      int64_t s = st[k][rank - 1];
      const float *q = src[k] + base[k] + c0 * s;
      if (s == 1) { p[k] = q; continue; }
      if (s == 0) for (int64_t j = 0; j < len; j++) buf[k][j] = q[0];
      else for (int64_t j = 0; j < len; j++) buf[k][j] = q[j * s];
      p[k] = buf[k];
    }
    if (nops == 3) p[3] = p[1];
    int64_t sy = st[0][rank - 1];
    float *yd = y + base[0] + c0 * sy;
    if (sy == 1) binary_run(op, len, yd, p[1], p[2], p[3]);
    else {
      binary_run(op, len, buf[0], p[1], p[2], p[3]);
      for (int64_t j = 0; j < len; j++) yd[j * sy] = buf[0][j];
    }
  }
}

/* Row softmax (logsm: log-softmax) over rows of n dense floats. The max ignores NaN, which then
   reaches the sum through exp and poisons the row, as the JS kernel does. */
void kiln_softmax(int64_t rows, int64_t n, const float *x, int64_t xo, float *y, int64_t yo, int32_t logsm, int32_t nthreads) {
  x += xo; y += yo;
#pragma omp parallel for num_threads(nt((double)rows * (double)n, nthreads)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = xr[i] > m ? xr[i] : m;
    double s = 0.0;
    if (logsm) {
      for (int64_t i = 0; i < n; i++) s += (double)k_exp(xr[i] - m);
      float c = m + (float)log(s);
      for (int64_t i = 0; i < n; i++) yr[i] = xr[i] - c;
    } else {
      for (int64_t i = 0; i < n; i++) { float e = k_exp(xr[i] - m); yr[i] = e; s += (double)e; }
      float inv = (float)(1.0 / s);
      for (int64_t i = 0; i < n; i++) yr[i] *= inv;
    }
  }
}

/* Layer norm (rms != 0: RMS norm, no mean, no bias) over rows of n dense floats; w, b nullable
   with unit stride. Statistics in float64. */
void kiln_norm(int32_t rms, int64_t rows, int64_t n, const float *x, int64_t xo, const float *w, int64_t wo, const float *b, int64_t bo,
               double eps, float *y, int64_t yo, int32_t nthreads) {
  x += xo; y += yo;
  if (w) w += wo;
  if (b) b += bo;
#pragma omp parallel for num_threads(nt((double)rows * (double)n, nthreads)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    double mean = 0.0, sq = 0.0;
    if (!rms) {
      double s = 0.0;
      for (int64_t i = 0; i < n; i++) s += xr[i];
      mean = s / (double)n;
      for (int64_t i = 0; i < n; i++) { double d = xr[i] - mean; sq += d * d; }
    } else {
      for (int64_t i = 0; i < n; i++) sq += (double)xr[i] * (double)xr[i];
    }
    float rstd = (float)(1.0 / sqrt(sq / (double)n + eps));
    float mu = (float)mean;
    if (w && b) for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * rstd * w[i] + b[i];
    else if (w) for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * rstd * w[i];
    else if (b) for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * rstd + b[i];
    else for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * rstd;
  }
}

/* Scaled dot-product attention, no mask or dropout: out[b, h, i, :] = softmax(q_i . K^T * scale
   (causal: keys j <= i, top-left aligned as torch)) . V for batch x heads items, parallel over
   (b, h). Strides (elements) per tensor: [batch, head, row, col]; kv head = h / group
   (grouped-query). Per (b, h): K is transposed into a thread-local [E, S] block so a row's scores
   are E dense axpys over the keys (vectorised), then exp and the weighted sum of V rows (dense
   axpys over the value dim). A row with no visible key gives NaN, as torch's softmax does. */
int32_t kiln_attention(int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t EV, int64_t group, int32_t causal, float scale,
                       const float *q, int64_t qo, int64_t qsb, int64_t qsh, int64_t qsl, int64_t qse,
                       const float *k, int64_t ko, int64_t ksb, int64_t ksh, int64_t kss, int64_t kse,
                       const float *v, int64_t vo, int64_t vsb, int64_t vsh, int64_t vss, int64_t vse,
                       float *o, int64_t oo, int64_t osb, int64_t osh, int64_t osl, int64_t ose, int32_t nthreads) {
  q += qo; k += ko; v += vo; o += oo;
  int failed = 0;
  double work = (double)B * H * L * S * (E + EV);
#pragma omp parallel num_threads(nt(work / 8.0, nthreads))
  {
    float *kt = (float *)malloc(sizeof(float) * (size_t)(E * S + 4 * S + EV * 4 + 16));
    if (!kt) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
      if (!kt) continue;
      int64_t b = bh / H, h = bh % H, hk = h / group;
      const float *kb = k + b * ksb + hk * ksh, *vb = v + b * vsb + hk * vsh;
      const float *qb = q + b * qsb + h * qsh;
      float *ob = o + b * osb + h * osh;
      for (int64_t e = 0; e < E; e++)
        for (int64_t j = 0; j < S; j++) kt[e * S + j] = kb[j * kss + e * kse];
      float *sc = kt + E * S;
      float *acc = sc + 4 * S;
      for (int64_t i0 = 0; i0 < L; i0 += 4) {
        int64_t nr = L - i0 < 4 ? L - i0 : 4;
        int64_t len[4];
        for (int64_t r = 0; r < nr; r++) {
          int64_t lim = causal ? i0 + r + 1 : S;
          len[r] = lim < 0 ? 0 : (lim > S ? S : lim);
          float *s = sc + r * S;
          for (int64_t j = 0; j < len[r]; j++) s[j] = 0.0f;
          const float *qr = qb + (i0 + r) * qsl;
          for (int64_t e = 0; e < E; e++) {
            float qe = qr[e * qse] * scale;
            const float *kr = kt + e * S;
            for (int64_t j = 0; j < len[r]; j++) s[j] += qe * kr[j];
          }
          float m = -INFINITY;
          for (int64_t j = 0; j < len[r]; j++) m = s[j] > m ? s[j] : m;
          float sum = 0.0f;
          for (int64_t j = 0; j < len[r]; j++) { float p = k_exp(s[j] - m); s[j] = p; sum += p; }
          float inv = len[r] > 0 ? 1.0f / sum : NAN;
          for (int64_t j = 0; j < len[r]; j++) s[j] *= inv;
        }
        for (int64_t r = 0; r < nr; r++) {
          float *out = ob + (i0 + r) * osl;
          float *a = acc;
          for (int64_t e = 0; e < EV; e++) a[e] = 0.0f;
          const float *s = sc + r * S;
          if (vse == 1) {
            for (int64_t j = 0; j < len[r]; j++) {
              const float *vr = vb + j * vss;
              float p = s[j];
              for (int64_t e = 0; e < EV; e++) a[e] += p * vr[e];
            }
          } else {
            for (int64_t j = 0; j < len[r]; j++)
              for (int64_t e = 0; e < EV; e++) a[e] += s[j] * vb[j * vss + e * vse];
          }
          if (len[r] == 0) for (int64_t e = 0; e < EV; e++) a[e] = NAN;
          for (int64_t e = 0; e < EV; e++) out[e * ose] = a[e];
        }
      }
    }
    free(kt);
  }
  return failed ? -1 : 0;
}
`;
