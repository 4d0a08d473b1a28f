/**
 * C source of the native matrix-vector product for a linear with few rows (decode: one token per
 * sequence), built by so-cache.ts with the host's flags like the GEMM:
 *
 *   y[i, j] = sum_k x[i, k] * W[j, k] (+ bias[j]),   i < m <= GEMV_MAX_ROWS, W row-major [n, k]
 *
 * Why not the GEMM (gemm-c.ts) at m = 1: it packs B (the whole weight, per call for an LM head
 * too large to keep packed: 151936 x 1024 floats written and read again every token) and runs a
 * 6 x 16 micro-kernel of which one row is used. A decode step is bound by reading the weights
 * once, so this kernel streams W exactly once, in place: four weight rows at a time against x (in
 * L1), 16-float vector accumulators, float32 FMA. Items are blocks of output rows (about 64 KiB
 * of weights each) claimed from the shared work-sharing pool (pool-c.ts), so threads split the
 * stream. With m > 1 each 4-row block is re-read from L1 for the next x row: DRAM still sees W
 * once.
 *
 * bfloat16 weights (`wbf16`) are widened to float32 in registers (exact: a shift or a mask per
 * pair of weights, no shuffle, against a copy of x split into even and odd columns), never
 * materialised, so the stream is half the bytes; x, bias and y are float32 (the caller decodes a
 * bfloat16 x and rounds y, as every bfloat16 cpu kernel does).
 */
import { POOL_C_SOURCE } from './pool-c.js';

/** The most rows of x the GEMV takes; above it the GEMM's reuse of each weight tile wins. */
export const GEMV_MAX_ROWS = 4;

export const GEMV_C_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
${POOL_C_SOURCE}

typedef float gv_f16 __attribute__((vector_size(64)));
typedef uint16_t gv_h16 __attribute__((vector_size(32)));
typedef uint32_t gv_u16 __attribute__((vector_size(64)));

/* 16 weights of row r from column c: float32, or bfloat16 widened (bits << 16). */
static inline gv_f16 gv_load_w(const void *w, int32_t bf16, int64_t idx) {
  gv_f16 v;
  if (bf16) {
    gv_h16 h;
    memcpy(&h, (const uint16_t *)w + idx, sizeof h);
    gv_u16 u = __builtin_convertvector(h, gv_u16) << 16;
    memcpy(&v, &u, sizeof v);
  } else {
    memcpy(&v, (const float *)w + idx, sizeof v);
  }
  return v;
}

static inline float gv_w1(const void *w, int32_t bf16, int64_t idx) {
  if (!bf16) return ((const float *)w)[idx];
  uint32_t u = (uint32_t)((const uint16_t *)w)[idx] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float gv_hsum(gv_f16 v) {
  float s = 0;
  for (int q = 0; q < 16; q++) s += v[q];
  return s;
}

typedef struct {
  int64_t m, n, k;
  const float *x; int64_t ldx;
  const void *w; int64_t ldw; int32_t bf16;
  const float *bias; int64_t bs;
  float *y; int64_t ldy;
  int64_t rows_per_item;
  const float *xs; /* bfloat16: x split per 32 columns into even / odd halves (gv_rows4_bf16) */
} gv_ctx;

/* Rows [j0, j0 + 4) of float32 W against x row i: four independent vector accumulators. */
static void gv_rows4_f32(const gv_ctx *c, int64_t i, int64_t j0) {
  const float *x = c->x + i * c->ldx;
  const float *w = (const float *)c->w + j0 * c->ldw;
  const int64_t k = c->k, kv = k & ~(int64_t)15, ld = c->ldw;
  gv_f16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  for (int64_t p = 0; p < kv; p += 16) {
    gv_f16 xv, w0, w1, w2, w3;
    memcpy(&xv, x + p, sizeof xv);
    memcpy(&w0, w + p, sizeof w0);
    memcpy(&w1, w + ld + p, sizeof w1);
    memcpy(&w2, w + 2 * ld + p, sizeof w2);
    memcpy(&w3, w + 3 * ld + p, sizeof w3);
    a0 += xv * w0; a1 += xv * w1; a2 += xv * w2; a3 += xv * w3;
  }
  float s[4] = {gv_hsum(a0), gv_hsum(a1), gv_hsum(a2), gv_hsum(a3)};
  for (int64_t p = kv; p < k; p++)
    for (int r = 0; r < 4; r++) s[r] += x[p] * w[r * ld + p];
  for (int r = 0; r < 4; r++) c->y[i * c->ldy + j0 + r] = s[r] + (c->bias ? c->bias[(j0 + r) * c->bs] : 0.0f);
}

/* The same for bfloat16 W without any shuffle: 32 weights load as 16 32-bit words whose low
   halves (even k) widen by << 16 and whose high halves (odd k) by masking. x comes split the same
   way (c->xs: per 32 columns, 16 even then 16 odd values), so each product pairs the right x. */
static void gv_rows4_bf16(const gv_ctx *c, int64_t i, int64_t j0) {
  const float *x = c->x + i * c->ldx, *xs = c->xs + i * c->k;
  const uint16_t *w = (const uint16_t *)c->w + j0 * c->ldw;
  const int64_t k = c->k, kv = k & ~(int64_t)31, ld = c->ldw;
  const gv_u16 hi = {0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u,
                     0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u};
  gv_f16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  for (int64_t p = 0; p < kv; p += 32) {
    gv_f16 xe, xo;
    memcpy(&xe, xs + p, sizeof xe);
    memcpy(&xo, xs + p + 16, sizeof xo);
#define GV_BF16_ROW(acc, r) { \
      gv_u16 u, lo_, hi_; gv_f16 we, wo; \
      memcpy(&u, w + (r) * ld + p, sizeof u); \
      lo_ = u << 16; hi_ = u & hi; \
      memcpy(&we, &lo_, sizeof we); memcpy(&wo, &hi_, sizeof wo); \
      acc += xe * we; acc += xo * wo; }
    /* The next 4-row block's lines at this column: a bfloat16 row is half a float32 one, and on
       the 2-vCPU VM the hardware prefetcher alone streamed it at ~6 GB/s vs ~8 with this (lm_head
       151936 x 1024, one thread, load ~12; float32 rows showed no gain). */
    for (int r = 4; r < 8; r++) __builtin_prefetch(w + r * ld + p);
    GV_BF16_ROW(a0, 0) GV_BF16_ROW(a1, 1) GV_BF16_ROW(a2, 2) GV_BF16_ROW(a3, 3)
#undef GV_BF16_ROW
  }
  float s[4] = {gv_hsum(a0), gv_hsum(a1), gv_hsum(a2), gv_hsum(a3)};
  for (int64_t p = kv; p < k; p++)
    for (int r = 0; r < 4; r++) s[r] += x[p] * gv_w1(c->w, 1, (j0 + r) * ld + p);
  for (int r = 0; r < 4; r++) c->y[i * c->ldy + j0 + r] = s[r] + (c->bias ? c->bias[(j0 + r) * c->bs] : 0.0f);
}

static void gv_row1(const gv_ctx *c, int64_t i, int64_t j) {
  const float *x = c->x + i * c->ldx;
  const int64_t k = c->k, kv = k & ~(int64_t)15;
  gv_f16 a = {0};
  for (int64_t p = 0; p < kv; p += 16) {
    gv_f16 xv;
    memcpy(&xv, x + p, sizeof xv);
    a += xv * gv_load_w(c->w, c->bf16, j * c->ldw + p);
  }
  float s = gv_hsum(a);
  for (int64_t p = kv; p < k; p++) s += x[p] * gv_w1(c->w, c->bf16, j * c->ldw + p);
  c->y[i * c->ldy + j] = s + (c->bias ? c->bias[j * c->bs] : 0.0f);
}

static void gv_item(void *vctx, int64_t item) {
  const gv_ctx *c = (const gv_ctx *)vctx;
  int64_t j0 = item * c->rows_per_item, j1 = j0 + c->rows_per_item;
  if (j1 > c->n) j1 = c->n;
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4)
    for (int64_t i = 0; i < c->m; i++) {
      if (c->bf16) gv_rows4_bf16(c, i, j);
      else gv_rows4_f32(c, i, j);
    }
  for (; j < j1; j++)
    for (int64_t i = 0; i < c->m; i++) gv_row1(c, i, j);
}

/* y[i * ldy + j] = x[i, :] . W[j, :] (+ bias[j * bs]); W is float32 or (wbf16) bfloat16 bits.
   Returns 0, or -1 when the split copy of x cannot be allocated (nothing written). */
int32_t kiln_gemv(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, void *w, int64_t wo, int64_t ldw, int32_t wbf16,
               void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t nthreads) {
  if (m <= 0 || n <= 0) return 0;
  gv_ctx c;
  c.m = m; c.n = n; c.k = k;
  c.x = (const float *)x + xo; c.ldx = ldx;
  c.w = wbf16 ? (const void *)((const uint16_t *)w + wo) : (const void *)((const float *)w + wo);
  c.ldw = ldw; c.bf16 = wbf16;
  c.bias = bias ? (const float *)bias + biaso : 0; c.bs = bs;
  c.y = (float *)y + yo; c.ldy = ldy;
  /* ~64 KiB of weights per item (a multiple of 4 rows): small enough to balance two threads on a
     2048-row projection, large enough that claiming an item costs nothing next to streaming it. */
  int64_t row_bytes = k * (wbf16 ? 2 : 4);
  int64_t rows = (65536 / (row_bytes > 0 ? row_bytes : 1)) & ~(int64_t)3;
  c.rows_per_item = rows < 4 ? 4 : rows;
  int64_t items = (n + c.rows_per_item - 1) / c.rows_per_item;
  /* Under ~256 KiB of weights a second thread's wake-up costs more than it saves. */
  if (n * row_bytes < (256 << 10)) nthreads = 1;
  float *xs = 0;
  if (wbf16) {
    xs = (float *)malloc((size_t)(m * k) * sizeof(float));
    if (!xs) return -1;
    for (int64_t i = 0; i < m; i++) {
      const float *xr = c.x + i * ldx;
      float *d = xs + i * k;
      for (int64_t p = 0; p + 32 <= k; p += 32)
        for (int q = 0; q < 16; q++) { d[p + q] = xr[p + 2 * q]; d[p + 16 + q] = xr[p + 2 * q + 1]; }
    }
  }
  c.xs = xs;
  pool_run(gv_item, &c, items, nthreads);
  free(xs);
  return 0;
}
`;
