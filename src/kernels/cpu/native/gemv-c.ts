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
 * bfloat16 weights (`wbf16`) are widened to float32 in registers (a 16-bit shift: exact), never
 * materialised, so the stream is half the bytes; x, bias and y are float32 (the caller decodes a
 * bfloat16 x and rounds y, as every bfloat16 cpu kernel does).
 */
import { POOL_C_SOURCE } from './pool-c.js';

/** The most rows of x the GEMV takes; above it the GEMM's reuse of each weight tile wins. */
export const GEMV_MAX_ROWS = 4;

export const GEMV_C_SOURCE = String.raw`
#include <stdint.h>
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
} gv_ctx;

/* Rows [j0, j0 + 4) of W against x row i: four independent vector accumulators. Inlined with a
   constant bf16 at each call site, so the weight format is not tested in the loop. */
static inline __attribute__((always_inline)) void gv_rows4(const gv_ctx *c, int64_t i, int64_t j0, const int32_t bf16) {
  const float *x = c->x + i * c->ldx;
  const int64_t k = c->k, kv = k & ~(int64_t)15, ld = c->ldw;
  gv_f16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  for (int64_t p = 0; p < kv; p += 16) {
    gv_f16 xv;
    memcpy(&xv, x + p, sizeof xv);
    a0 += xv * gv_load_w(c->w, bf16, (j0 + 0) * ld + p);
    a1 += xv * gv_load_w(c->w, bf16, (j0 + 1) * ld + p);
    a2 += xv * gv_load_w(c->w, bf16, (j0 + 2) * ld + p);
    a3 += xv * gv_load_w(c->w, bf16, (j0 + 3) * ld + p);
  }
  float s[4] = {gv_hsum(a0), gv_hsum(a1), gv_hsum(a2), gv_hsum(a3)};
  for (int64_t p = kv; p < k; p++)
    for (int r = 0; r < 4; r++) s[r] += x[p] * gv_w1(c->w, bf16, (j0 + r) * ld + p);
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
      if (c->bf16) gv_rows4(c, i, j, 1);
      else gv_rows4(c, i, j, 0);
    }
  for (; j < j1; j++)
    for (int64_t i = 0; i < c->m; i++) gv_row1(c, i, j);
}

/* y[i * ldy + j] = x[i, :] . W[j, :] (+ bias[j * bs]); W is float32 or (wbf16) bfloat16 bits. */
void kiln_gemv(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, void *w, int64_t wo, int64_t ldw, int32_t wbf16,
               void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t nthreads) {
  if (m <= 0 || n <= 0) return;
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
  pool_run(gv_item, &c, items, nthreads);
}
`;
