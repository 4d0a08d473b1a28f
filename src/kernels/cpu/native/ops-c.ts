/**
 * C source of the native eager float32 kernels other than GEMM (built once per toolchain by
 * so-cache.ts, like the GEMM): pointwise unary ops over dense data, a strided broadcasting
 * ternary-capable elementwise kernel (add / sub / mul / div / max / min and x * s + t, the affine
 * map batch norm becomes), row softmax / log-softmax, layer norm, RMS norm, and causal or full
 * scaled-dot-product attention.
 *
 * - The transcendental functions are the vectorisable ones of c-math.ts, written as the shared C
 *   math table writes them (the same float32 values as the compiled native kernels); + - * / in float32 are correctly rounded, as the JS kernels'
 *   float64-then-round results are (double rounding is exact for these at 53 >= 2 x 24 + 2 bits).
 * - Reductions (softmax, norms) accumulate in float64 per row, as the JS kernels do, so results
 *   agree with them to float32 rounding; attention accumulates in float32 with an online softmax.
 * - Work is shared over OpenMP threads by rows / chunks once a call is large enough to pay for a
 *   parallel region (PAR_MIN elements: a region's closing barrier waits for every worker to be
 *   scheduled, microseconds when idle but up to milliseconds on a shared machine; 128 K elements
 *   is ~50-100 us of single-thread work). Attention runs on the work-sharing pool (pool-c.ts).
 */
import { cExpr, type CRawArg } from '../../math/c.js';
import { C_HELPERS, C_MATH } from './c-math.js';
import { POOL_C_SOURCE } from './pool-c.js';

const VALUE: CRawArg = { kind: 'value' };

/**
 * Op `op`'s float32 C over operand texts `xs`, from the shared C table (kernels/math/c.ts), as the
 * compiler's native kernels compute it. Used where that text is this file's own; silu, neg, square
 * and the arithmetic keep theirs (the table's adds parentheses: the same values, but a new source
 * and so a rebuild of the library on every machine).
 */
function c(op: string, xs: readonly (string | null)[], raw: readonly CRawArg[] = xs.map(() => VALUE)): string {
  const e = cExpr(op, raw, xs);
  if (e === null) throw new Error(`ops-c: the C math table has no form of ${op}`);
  return e;
}

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
${POOL_C_SOURCE}${C_MATH}${C_HELPERS}
#define PAR_MIN 131072
#define CHUNK 4096
#define MAXR ${ELEMENTWISE_MAX_RANK}

static inline int nt(double work, int nthreads) { return work < PAR_MIN || nthreads < 1 ? 1 : nthreads; }

#define UNARY_LOOP(EXPR) for (int64_t i = 0; i < len; i++) { const float v = x[i]; y[i] = (EXPR); } break;

static void unary_chunk(int32_t op, int64_t len, const float *restrict x, float *restrict y) {
  switch (op) {
    case 0: UNARY_LOOP(${c('relu', ['v'])})
    case 1: k_gelu_row(y, x, len); break;
    case 2: UNARY_LOOP(${c('gelu', ['v', null], [VALUE, { kind: 'const', value: 'tanh' }])})
    case 3: UNARY_LOOP(${c('sigmoid', ['v'])})
    case 4: UNARY_LOOP(${c('tanh', ['v'])})
    case 5: UNARY_LOOP(${c('exp', ['v'])})
    case 6: UNARY_LOOP(v * k_sigmoid(v))
    case 7: UNARY_LOOP(-v)
    case 8: UNARY_LOOP(${c('abs', ['v'])})
    case 9: UNARY_LOOP(${c('sqrt', ['v'])})
    case 10: UNARY_LOOP(v * v)
    default: break;
  }
}

typedef struct { int32_t op; int64_t n; const float *x; float *y; } unary_ctx;

static void unary_item(void *vctx, int64_t c) {
  const unary_ctx *u = (const unary_ctx *)vctx;
  int64_t s = c * CHUNK, len = u->n - s < CHUNK ? u->n - s : CHUNK;
  unary_chunk(u->op, len, u->x + s, u->y + s);
}

/* y[0..n) = op(x[0..n)), both dense (y may equal x). Runs on the work-sharing pool, not an OpenMP
   region: between two GEMMs (linear -> gelu -> linear) the pool's worker is still spinning and
   joins at once, where an OpenMP team thread had to be woken and competed with that spinning
   worker for the second core (eager mlp-2048x4096: a futex wake in 75 of 80 GEMM jobs). The
   transcendental ops (gelu .. silu: 1-3 ns a value) split from 8 K values, 16x below PAR_MIN;
   a caller whose worker sleeps runs every chunk itself, so a small split costs nothing. */
void kiln_unary(int32_t op, int64_t n, const float *x, int64_t xo, float *y, int64_t yo, int32_t nthreads) {
  unary_ctx u = { op, n, x + xo, y + yo };
  int heavy = op >= 1 && op <= 6;
  pool_run(unary_item, &u, (n + CHUNK - 1) / CHUNK, nt(heavy ? 16.0 * (double)n : (double)n, nthreads));
}

static void binary_run(int32_t op, int64_t len, float *restrict y, const float *restrict a, const float *restrict b, const float *restrict c) {
  switch (op) {
    case 0: for (int64_t i = 0; i < len; i++) y[i] = a[i] + b[i]; break;
    case 1: for (int64_t i = 0; i < len; i++) y[i] = a[i] - b[i]; break;
    case 2: for (int64_t i = 0; i < len; i++) y[i] = a[i] * b[i]; break;
    case 3: for (int64_t i = 0; i < len; i++) y[i] = a[i] / b[i]; break;
    case 4: for (int64_t i = 0; i < len; i++) y[i] = ${c('maximum', ['a[i]', 'b[i]'])}; break;
    case 5: for (int64_t i = 0; i < len; i++) y[i] = ${c('minimum', ['a[i]', 'b[i]'])}; break;
    case 6: for (int64_t i = 0; i < len; i++) y[i] = a[i] * b[i] + c[i]; break;
    default: break;
  }
}

/* bfloat16 operands of kiln_elementwise: widened exactly; results rounded once to nearest even
   (NaN kept quiet), as torch rounds a bfloat16 op computed in float32. */
static inline float ew_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t ew_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Strided, broadcasting y = a op b (op 6: a * b + c). meta: shape[rank], then per operand
   (y, a, b, c) its element strides[rank], then the four offsets. Rows (all dims but the last) x
   CHUNK-wide column blocks are the work items; operands with a non-unit inner stride (broadcast,
   transposed) are gathered into stack buffers so the arithmetic is always a dense loop. Bit k of
   bf16 (k = 0 for y, 1..3 for a, b, c) marks an operand stored as bfloat16 (uint16_t): its
   elements are widened into the stack buffer whatever its stride, and a bfloat16 y is computed
   into its buffer and rounded on the way out (the bfloat16 prefill's residual adds and rotary,
   issue #17, ran in JavaScript). */
void kiln_elementwise(int32_t op, int32_t rank, const double *meta, void *y, const void *a, const void *b, const void *c, int32_t bf16, int32_t nthreads) {
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
  const void *src[4] = { y, a, b, c };
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
      if (bf16 >> k & 1) {
        const uint16_t *q = (const uint16_t *)src[k] + base[k] + c0 * s;
        for (int64_t j = 0; j < len; j++) buf[k][j] = ew_bf16(q[j * s]);
        p[k] = buf[k];
        continue;
      }
      const float *q = (const float *)src[k] + base[k] + c0 * s;
      if (s == 1) { p[k] = q; continue; }
      if (s == 0) for (int64_t j = 0; j < len; j++) buf[k][j] = q[0];
      else for (int64_t j = 0; j < len; j++) buf[k][j] = q[j * s];
      p[k] = buf[k];
    }
    if (nops == 3) p[3] = p[1];
    int64_t sy = st[0][rank - 1];
    if (bf16 & 1) {
      uint16_t *yd = (uint16_t *)y + base[0] + c0 * sy;
      binary_run(op, len, buf[0], p[1], p[2], p[3]);
      for (int64_t j = 0; j < len; j++) yd[j * sy] = ew_to_bf16(buf[0][j]);
      continue;
    }
    float *yd = (float *)y + base[0] + c0 * sy;
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
   (grouped-query). A row with no visible key gives NaN, as torch's softmax does.
   Per (b, h), register-blocked over ATT_R = 4 query rows at a time (each score and each output
   element sums its terms in the same order as a plain loop, so blocking does not change results):
   - K is transposed into a thread-local [E, SP] block (SP = S rounded up to 16, zero padded), and
     the 4 rows' scores for 16 keys at a time are 8 vector accumulators over e (2 loads of K, 4
     broadcasts of the pre-scaled q per step: the unblocked loop loaded and stored the score row
     at every FMA and ran at ~7 GFLOP/s).
   - softmax per row over its visible keys; the block's rows are zeroed up to the longest row.
   - P . V for 16 value columns at a time: 8 accumulators over the keys (2 loads of a V row,
     4 broadcasts of P); a value tail narrower than 16 (or a V with non-unit column stride)
     takes the scalar loop. */
#define ATT_R 4
typedef float a8 __attribute__((vector_size(32)));
typedef float a8u __attribute__((vector_size(32), aligned(4)));

typedef int32_t a8i __attribute__((vector_size(32)));

/* s[0..n) = exp(s - max s) in place; returns their sum. Written with 8-lane vectors: without
   -ffast-math GCC keeps a float max / sum reduction (and the exp inside it) scalar. A NaN score is
   skipped by the max (comparisons are false) and then propagates through exp and the sum. */
static float att_softmax_row(float *restrict s, int64_t n) {
  int64_t n8 = n / 8 * 8;
  a8 mv = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (int64_t j = 0; j < n8; j += 8) {
    a8 x = *(const a8u *)(s + j);
    a8i gt = x > mv;
    mv = (a8)(((a8i)x & gt) | ((a8i)mv & ~gt));
  }
  float m = -INFINITY;
  for (int q = 0; q < 8; q++) m = mv[q] > m ? mv[q] : m;
  for (int64_t j = n8; j < n; j++) m = s[j] > m ? s[j] : m;
  for (int64_t j = 0; j < n; j++) s[j] = k_exp(s[j] - m);
  a8 sv = {0};
  for (int64_t j = 0; j < n8; j += 8) sv += *(const a8u *)(s + j);
  float sum = 0.0f;
  for (int q = 0; q < 8; q++) sum += sv[q];
  for (int64_t j = n8; j < n; j++) sum += s[j];
  return sum;
}

static void att_block(int64_t nr, const int64_t *len, int64_t lmax, int64_t SP, int64_t E, int64_t EV,
                      const float *restrict qs, const float *restrict kt, float *restrict sc,
                      const float *vb, int64_t vss, int64_t vse, float *ob, int64_t osl, int64_t ose) {
  /* Scores: sc[r * SP + j] = sum_e qs[r * E + e] * kt[e * SP + j], j < lmax rounded up to 16. */
  for (int64_t j = 0; j < lmax; j += 16) {
    a8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
    const float *kr = kt + j;
    for (int64_t e = 0; e < E; e++) {
      a8 k0 = *(const a8u *)(kr + e * SP), k1 = *(const a8u *)(kr + e * SP + 8);
      float q0 = qs[e], q1 = qs[E + e], q2 = qs[2 * E + e], q3 = qs[3 * E + e];
      s00 += q0 * k0; s01 += q0 * k1; s10 += q1 * k0; s11 += q1 * k1;
      s20 += q2 * k0; s21 += q2 * k1; s30 += q3 * k0; s31 += q3 * k1;
    }
    *(a8u *)(sc + j) = s00; *(a8u *)(sc + j + 8) = s01;
    *(a8u *)(sc + SP + j) = s10; *(a8u *)(sc + SP + j + 8) = s11;
    *(a8u *)(sc + 2 * SP + j) = s20; *(a8u *)(sc + 2 * SP + j + 8) = s21;
    *(a8u *)(sc + 3 * SP + j) = s30; *(a8u *)(sc + 3 * SP + j + 8) = s31;
  }
  for (int64_t r = 0; r < ATT_R; r++) {
    float *s = sc + r * SP;
    int64_t n = r < nr ? len[r] : 0;
    float sum = att_softmax_row(s, n);
    float inv = n > 0 ? 1.0f / sum : NAN;
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
    for (int64_t j = n; j < lmax; j++) s[j] = 0.0f;
  }
  /* out[r, e] = sum_j s[r, j] v[j, e] (rows past nr computed on zeros and dropped). */
  int64_t e0 = 0;
  if (vse == 1) {
    for (; e0 + 16 <= EV; e0 += 16) {
      a8 o00 = {0}, o01 = {0}, o10 = {0}, o11 = {0}, o20 = {0}, o21 = {0}, o30 = {0}, o31 = {0};
      for (int64_t j = 0; j < lmax; j++) {
        const float *vr = vb + j * vss + e0;
        a8 v0 = *(const a8u *)vr, v1 = *(const a8u *)(vr + 8);
        float p0 = sc[j], p1 = sc[SP + j], p2 = sc[2 * SP + j], p3 = sc[3 * SP + j];
        o00 += p0 * v0; o01 += p0 * v1; o10 += p1 * v0; o11 += p1 * v1;
        o20 += p2 * v0; o21 += p2 * v1; o30 += p3 * v0; o31 += p3 * v1;
      }
      a8 res[ATT_R][2] = {{o00, o01}, {o10, o11}, {o20, o21}, {o30, o31}};
      for (int64_t r = 0; r < nr; r++)
        for (int64_t e = 0; e < 16; e++) ob[r * osl + (e0 + e) * ose] = len[r] > 0 ? res[r][e >> 3][e & 7] : NAN;
    }
  }
  for (int64_t r = 0; r < nr; r++) {
    const float *s = sc + r * SP;
    for (int64_t e = e0; e < EV; e++) {
      float acc = 0.0f;
      for (int64_t j = 0; j < len[r]; j++) acc += s[j] * vb[j * vss + e * vse];
      ob[r * osl + e * ose] = len[r] > 0 ? acc : NAN;
    }
  }
}

typedef struct {
  int64_t H, L, S, E, EV, group, SP;
  int32_t causal;
  float scale;
  const float *q, *k, *v;
  float *o;
  int64_t qsb, qsh, qsl, qse, ksb, ksh, kss, kse, vsb, vsh, vss, vse, osb, osh, osl, ose;
  _Atomic int failed;
} att_ctx;

static _Thread_local float *att_buf = 0;
static _Thread_local int64_t att_buf_len = 0;

/* One (batch, head) item: K^T into the thread's buffer, then the query rows ATT_R at a time. */
static void att_item(void *vctx, int64_t bh) {
  att_ctx *c = (att_ctx *)vctx;
  const int64_t E = c->E, S = c->S, SP = c->SP, L = c->L;
  int64_t need = E * SP + ATT_R * SP + ATT_R * E + 16;
  if (att_buf_len < need) {
    free(att_buf);
    att_buf = (float *)malloc(sizeof(float) * (size_t)need);
    att_buf_len = att_buf ? need : 0;
  }
  float *kt = att_buf;
  if (!kt) { atomic_store(&c->failed, 1); return; }
  int64_t b = bh / c->H, h = bh % c->H, hk = h / c->group;
  const float *kb = c->k + b * c->ksb + hk * c->ksh, *vb = c->v + b * c->vsb + hk * c->vsh;
  const float *qb = c->q + b * c->qsb + h * c->qsh;
  float *ob = c->o + b * c->osb + h * c->osh;
  /* Key-major reads (a key's E values are contiguous in the usual layouts): the e-outer gather,
     one strided element of every key per e, took a fifth of the kernel's time. */
  for (int64_t j = 0; j < S; j++) {
    const float *kr = kb + j * c->kss;
    if (c->kse == 1) for (int64_t e = 0; e < E; e++) kt[e * SP + j] = kr[e];
    else for (int64_t e = 0; e < E; e++) kt[e * SP + j] = kr[e * c->kse];
  }
  for (int64_t e = 0; e < E; e++)
    for (int64_t j = S; j < SP; j++) kt[e * SP + j] = 0.0f;
  float *sc = kt + E * SP;
  float *qs = sc + ATT_R * SP;
  for (int64_t i0 = 0; i0 < L; i0 += ATT_R) {
    int64_t nr = L - i0 < ATT_R ? L - i0 : ATT_R;
    int64_t len[ATT_R], lmax = 0;
    for (int64_t r = 0; r < ATT_R; r++) {
      int64_t lim = c->causal ? i0 + r + 1 : S;
      len[r] = r >= nr ? 0 : (lim < 0 ? 0 : (lim > S ? S : lim));
      if (len[r] > lmax) lmax = len[r];
      const float *qr = qb + (r < nr ? i0 + r : i0) * c->qsl;
      for (int64_t e = 0; e < E; e++) qs[r * E + e] = qr[e * c->qse] * c->scale;
    }
    att_block(nr, len, lmax, SP, E, c->EV, qs, kt, sc, vb, c->vss, c->vse, ob + i0 * c->osl, c->osl, c->ose);
  }
}

/* Items are (batch, head) pairs, shared by the calling thread and the work-sharing pool (pool-c.ts:
   the caller does not wait for a worker that has not started, as an OpenMP region's barrier does). */
int32_t kiln_attention(int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t EV, int64_t group, int32_t causal, float scale,
                       const float *q, int64_t qo, int64_t qsb, int64_t qsh, int64_t qsl, int64_t qse,
                       const float *k, int64_t ko, int64_t ksb, int64_t ksh, int64_t kss, int64_t kse,
                       const float *v, int64_t vo, int64_t vsb, int64_t vsh, int64_t vss, int64_t vse,
                       float *o, int64_t oo, int64_t osb, int64_t osh, int64_t osl, int64_t ose, int32_t nthreads) {
  att_ctx c;
  memset(&c, 0, sizeof c);
  c.H = H; c.L = L; c.S = S; c.E = E; c.EV = EV; c.group = group; c.SP = (S + 15) / 16 * 16;
  c.causal = causal; c.scale = scale;
  c.q = q + qo; c.k = k + ko; c.v = v + vo; c.o = o + oo;
  c.qsb = qsb; c.qsh = qsh; c.qsl = qsl; c.qse = qse; c.ksb = ksb; c.ksh = ksh; c.kss = kss; c.kse = kse;
  c.vsb = vsb; c.vsh = vsh; c.vss = vss; c.vse = vse; c.osb = osb; c.osh = osh; c.osl = osl; c.ose = ose;
  atomic_init(&c.failed, 0);
  double work = (double)B * H * L * S * (E + EV);
  pool_run(att_item, &c, B * H, nt(work / 8.0, nthreads));
  return atomic_load(&c.failed) ? -1 : 0;
}
`;
