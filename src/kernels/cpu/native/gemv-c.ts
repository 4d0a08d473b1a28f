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
 * bfloat16 weights (`wbf16`) are never materialised as float32, so the stream is half the bytes.
 * With AVX512-BF16 (and a bfloat16 x, which a bfloat16 linear has) vdpbf16ps multiplies 32 weight
 * and x pairs per instruction, 8 rows per pass (products exact in float32, float32 sums; the
 * instruction treats subnormal inputs as zero). Without it, weights widen in registers (exact: a
 * shift or a mask per pair, no shuffle, against a copy of x split into even and odd columns).
 * x and y may be bfloat16 bits (`xbf16`, `ybf16`): decoded and rounded (nearest even) here, so
 * the caller makes no JS pass over them; bias is float32.
 *
 * kiln_gemv_multi runs three weights against one x in one pool job (llm.qkvLinear: an attention
 * layer's q, k and v projections), each weight's rows exactly as kiln_gemv computes them.
 *
 * kiln_gemv_gated runs a SwiGLU MLP's gate and up projections (two weights, one x) as one pool job
 * with silu(g) * u in the epilogue (llm.gateUpSiluAndMul): per item the same output rows of both
 * weights, so the two streams share the threads and the activation needs no extra pass or op.
 *
 * Weight order (issue #17). Default (GV_STREAM, KILN_CPU_GEMV_STREAM): each thread reads its rows
 * one at a time front to back, four accumulators per row and a software prefetch 1 KiB ahead, so an
 * item (adjacent rows) is one sequential run. The passes of 4 (float32) or 8 (AVX512-BF16) rows
 * interleave that many runs; they stay behind flags 0. Helper cpudec (2026-12-03) tried a row at a
 * time without the prefetch and saw no gain in decode steps; helper cpubf16 (2026-12-03, this
 * order) measured Qwen3-0.6B decode on the 2-core VM with the option alternated in one process
 * (bench/cpu-decode-bound.ts --ab, machine loaded by other jobs): 1 thread bfloat16 88.4 -> 76.7
 * ms/step, float32 181.6 -> 154.2; 2 threads 184.0 -> 175.4 and 363.9 -> 340.6; and in a C loop
 * over the 197 bfloat16 weights (1.19 GB, one thread) best step 43.6 -> 38.1 ms.
 */
import { C_MATH } from './c-math.js';
import { POOL_C_SOURCE } from './pool-c.js';

/** The most rows of x the GEMV takes; above it the GEMM's reuse of each weight tile wins. */
export const GEMV_MAX_ROWS = 4;

export const GEMV_C_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
${POOL_C_SOURCE}
${C_MATH}

typedef float gv_f16 __attribute__((vector_size(64)));
typedef uint16_t gv_h16 __attribute__((vector_size(32)));
typedef uint32_t gv_u16 __attribute__((vector_size(64)));

/* GV_PORTABLE (tests) builds the widening path on a CPU that has the dot-product instructions. */
#if defined(__AVX512BF16__) && defined(__AVX512F__) && !defined(GV_PORTABLE)
#include <immintrin.h>
#define GV_DPBF16 1
#else
#define GV_DPBF16 0
#endif

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

/* float32 -> bfloat16 bits, round to nearest even, NaN kept quiet (as half.ts's float32ToBfloat16Bits). */
static inline uint16_t gv_to_bf16(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct {
  int64_t m, n, k;
  const float *x;    /* m x k float32, contiguous (a copy when x came strided or as bfloat16) */
  const void *w; int64_t ldw; int32_t bf16;
  const float *bias; int64_t bs;
  void *y; int64_t ldy; int32_t ybf16;
  int64_t rows_per_item;
  const float *xs;   /* bfloat16 W without dot-product instructions: x split per 32 columns into even / odd halves (gv_rows4_bf16) */
  const uint16_t *xb; /* bfloat16 W with AVX512-BF16: x as bfloat16 bits, m x k contiguous (exact: x was bfloat16) */
  int32_t stream;     /* GV_STREAM: one weight row at a time, front to back (gv_row_stream_*) */
} gv_ctx;

/* kiln_gemv flags. */
#define GV_STREAM 1
#define GV_SPLIT 2
/* Stream order's software prefetch distance in bytes: a few hundred ns of one thread's stream
   ahead of the loads, across row ends (rows of an item are adjacent when ldw == k). */
#define GV_PF_BYTES 1024

static inline void gv_store(const gv_ctx *c, int64_t i, int64_t j, float v) {
  if (c->bias) v += c->bias[j * c->bs];
  if (c->ybf16) ((uint16_t *)c->y)[i * c->ldy + j] = gv_to_bf16(v);
  else ((float *)c->y)[i * c->ldy + j] = v;
}

/* Rows [j0, j0 + 4) of float32 W against x row i: four independent vector accumulators. */
static void gv_rows4_f32(const gv_ctx *c, int64_t i, int64_t j0) {
  const float *x = c->x + i * c->k;
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
  for (int r = 0; r < 4; r++) gv_store(c, i, j0 + r, s[r]);
}

#if GV_DPBF16
/* bfloat16 W and x with AVX512-BF16: vdpbf16ps multiplies 32 bfloat16 pairs (products exact in
   float32) into 16 float32 accumulators, one instruction per 64 bytes of weights, no widening.
   Eight rows per pass: more independent streams in flight per thread. */
#define GV_DP_ROWS 8
static void gv_rows_dpbf16(const gv_ctx *c, int64_t i, int64_t j0) {
  const uint16_t *xb = c->xb + i * c->k;
  const uint16_t *w = (const uint16_t *)c->w + j0 * c->ldw;
  const int64_t k = c->k, kv = k & ~(int64_t)31, ld = c->ldw;
  __m512 a[GV_DP_ROWS];
  for (int r = 0; r < GV_DP_ROWS; r++) a[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kv; p += 32) {
    __m512i xv = _mm512_loadu_si512((const void *)(xb + p));
    for (int r = 0; r < GV_DP_ROWS; r++) {
      __builtin_prefetch(w + (r + GV_DP_ROWS) * ld + p);
      __m512i wv = _mm512_loadu_si512((const void *)(w + r * ld + p));
      a[r] = _mm512_dpbf16_ps(a[r], (__m512bh)wv, (__m512bh)xv);
    }
  }
  for (int r = 0; r < GV_DP_ROWS; r++) {
    float s = _mm512_reduce_add_ps(a[r]);
    for (int64_t p = kv; p < k; p++) s += c->x[i * k + p] * gv_w1(c->w, 1, (j0 + r) * ld + p);
    gv_store(c, i, j0 + r, s);
  }
}
#endif

/* The same for bfloat16 W without any shuffle: 32 weights load as 16 32-bit words whose low
   halves (even k) widen by << 16 and whose high halves (odd k) by masking. x comes split the same
   way (c->xs: per 32 columns, 16 even then 16 odd values), so each product pairs the right x. */
static void gv_rows4_bf16(const gv_ctx *c, int64_t i, int64_t j0) {
  const float *x = c->x + i * c->k, *xs = c->xs + i * c->k;
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
  for (int r = 0; r < 4; r++) gv_store(c, i, j0 + r, s[r]);
}

/* Stream order (GV_STREAM): row j alone, front to back, for each x row; the row is re-read from
   L1 for x rows after the first. Each thread then reads one sequential run per item (its rows are
   adjacent), the pattern the hardware prefetchers and the bandwidth probe's read kernel use,
   instead of 4 or 8 interleaved runs. Four accumulators keep the FMA chains independent. */
static void gv_row_stream_f32(const gv_ctx *c, int64_t j) {
  const float *w = (const float *)c->w + j * c->ldw;
  const int64_t k = c->k, k64 = k & ~(int64_t)63, k16 = k & ~(int64_t)15;
  for (int64_t i = 0; i < c->m; i++) {
    const float *x = c->x + i * k;
    gv_f16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int64_t p = 0;
    for (; p < k64; p += 64) {
      if (i == 0) for (int q = 0; q < 64; q += 16) __builtin_prefetch(w + p + q + GV_PF_BYTES / 4);
      gv_f16 x0, x1, x2, x3, w0, w1, w2, w3;
      memcpy(&x0, x + p, sizeof x0); memcpy(&x1, x + p + 16, sizeof x1);
      memcpy(&x2, x + p + 32, sizeof x2); memcpy(&x3, x + p + 48, sizeof x3);
      memcpy(&w0, w + p, sizeof w0); memcpy(&w1, w + p + 16, sizeof w1);
      memcpy(&w2, w + p + 32, sizeof w2); memcpy(&w3, w + p + 48, sizeof w3);
      a0 += x0 * w0; a1 += x1 * w1; a2 += x2 * w2; a3 += x3 * w3;
    }
    for (; p < k16; p += 16) {
      gv_f16 xv, wv;
      memcpy(&xv, x + p, sizeof xv);
      memcpy(&wv, w + p, sizeof wv);
      a0 += xv * wv;
    }
    float s = gv_hsum((a0 + a1) + (a2 + a3));
    for (; p < k; p++) s += x[p] * w[p];
    gv_store(c, i, j, s);
  }
}

#if GV_DPBF16
static void gv_row_stream_dpbf16(const gv_ctx *c, int64_t j) {
  const uint16_t *w = (const uint16_t *)c->w + j * c->ldw;
  const int64_t k = c->k, k128 = k & ~(int64_t)127, k32 = k & ~(int64_t)31;
  for (int64_t i = 0; i < c->m; i++) {
    const uint16_t *xb = c->xb + i * k;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p < k128; p += 128) {
      if (i == 0) for (int q = 0; q < 128; q += 32) __builtin_prefetch(w + p + q + GV_PF_BYTES / 2);
      a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512((const void *)(w + p)), (__m512bh)_mm512_loadu_si512((const void *)(xb + p)));
      a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512((const void *)(w + p + 32)), (__m512bh)_mm512_loadu_si512((const void *)(xb + p + 32)));
      a2 = _mm512_dpbf16_ps(a2, (__m512bh)_mm512_loadu_si512((const void *)(w + p + 64)), (__m512bh)_mm512_loadu_si512((const void *)(xb + p + 64)));
      a3 = _mm512_dpbf16_ps(a3, (__m512bh)_mm512_loadu_si512((const void *)(w + p + 96)), (__m512bh)_mm512_loadu_si512((const void *)(xb + p + 96)));
    }
    for (; p < k32; p += 32)
      a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512((const void *)(w + p)), (__m512bh)_mm512_loadu_si512((const void *)(xb + p)));
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; p < k; p++) s += c->x[i * k + p] * gv_w1(c->w, 1, j * c->ldw + p);
    gv_store(c, i, j, s);
  }
}
#endif

/* bfloat16 W without the dot-product instructions, widened as gv_rows4_bf16 does (x split). */
static void gv_row_stream_bf16(const gv_ctx *c, int64_t j) {
  const uint16_t *w = (const uint16_t *)c->w + j * c->ldw;
  const int64_t k = c->k, k64 = k & ~(int64_t)63, k32 = k & ~(int64_t)31;
  const gv_u16 hi = {0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u,
                     0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u};
  for (int64_t i = 0; i < c->m; i++) {
    const float *x = c->x + i * k, *xs = c->xs + i * k;
    gv_f16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int64_t p = 0;
#define GV_BF16_BLOCK(ae, ao, q) { \
      gv_f16 xe, xo, we, wo; gv_u16 u, lo_, hi_; \
      memcpy(&xe, xs + (q), sizeof xe); memcpy(&xo, xs + (q) + 16, sizeof xo); \
      memcpy(&u, w + (q), sizeof u); lo_ = u << 16; hi_ = u & hi; \
      memcpy(&we, &lo_, sizeof we); memcpy(&wo, &hi_, sizeof wo); \
      ae += xe * we; ao += xo * wo; }
    for (; p < k64; p += 64) {
      if (i == 0) { __builtin_prefetch(w + p + GV_PF_BYTES / 2); __builtin_prefetch(w + p + 32 + GV_PF_BYTES / 2); }
      GV_BF16_BLOCK(a0, a1, p) GV_BF16_BLOCK(a2, a3, p + 32)
    }
    for (; p < k32; p += 32) GV_BF16_BLOCK(a0, a1, p)
#undef GV_BF16_BLOCK
    float s = gv_hsum((a0 + a1) + (a2 + a3));
    for (; p < k; p++) s += x[p] * gv_w1(c->w, 1, j * c->ldw + p);
    gv_store(c, i, j, s);
  }
}

static void gv_row1(const gv_ctx *c, int64_t i, int64_t j) {
  const float *x = c->x + i * c->k;
  const int64_t k = c->k, kv = k & ~(int64_t)15;
  gv_f16 a = {0};
  for (int64_t p = 0; p < kv; p += 16) {
    gv_f16 xv;
    memcpy(&xv, x + p, sizeof xv);
    a += xv * gv_load_w(c->w, c->bf16, j * c->ldw + p);
  }
  float s = gv_hsum(a);
  for (int64_t p = kv; p < k; p++) s += x[p] * gv_w1(c->w, c->bf16, j * c->ldw + p);
  gv_store(c, i, j, s);
}

static void gv_item(void *vctx, int64_t item) {
  const gv_ctx *c = (const gv_ctx *)vctx;
  int64_t j0 = item * c->rows_per_item, j1 = j0 + c->rows_per_item;
  if (j1 > c->n) j1 = c->n;
  int64_t j = j0;
  if (c->stream) {
    for (; j < j1; j++) {
#if GV_DPBF16
      if (c->xb) { gv_row_stream_dpbf16(c, j); continue; }
#endif
      if (c->bf16) gv_row_stream_bf16(c, j);
      else gv_row_stream_f32(c, j);
    }
    return;
  }
#if GV_DPBF16
  if (c->xb) {
    for (; j + GV_DP_ROWS <= j1; j += GV_DP_ROWS)
      for (int64_t i = 0; i < c->m; i++) gv_rows_dpbf16(c, i, j);
  }
#endif
  /* Leftover rows of the dot-product path go one at a time (gv_row1): there is no split x. */
  if (!c->xb)
    for (; j + 4 <= j1; j += 4)
      for (int64_t i = 0; i < c->m; i++) {
        if (c->bf16) gv_rows4_bf16(c, i, j);
        else gv_rows4_f32(c, i, j);
      }
  for (; j < j1; j++)
    for (int64_t i = 0; i < c->m; i++) gv_row1(c, i, j);
}

/* Output rows per work item, a multiple of 8. GV_SPLIT (KILN_CPU_GEMV_SPLIT): the n rows split
   evenly over the threads, one contiguous run of the weight per thread. Measured on the 2-vCPU VM
   (2026-12-04, the 197 bfloat16 weights of a Qwen3-0.6B step called in a loop, 2 threads, read
   probe ~28 GB/s): 64 KiB items 62.8 ms a step (19.0 GB/s) against 50.5 ms (23.6 GB/s) split;
   41.6 ms (28.7 GB/s) split with the weights in huge pages. Items claimed from a shared counter
   interleave the threads' runs every item, and each run restarts the hardware prefetchers' ramp.
   Otherwise: weight bytes per item flags >> 8 KiB (KILN_CPU_GEMV_ITEM_KIB), else 64 KiB. With many
   threads a call ends when its last item does, so the item size is also the call's tail; a worker
   that never joins leaves its item to the caller (pool-c.ts), as with small items. */
static int64_t gv_rows_per_item(int64_t n, int64_t row_bytes, int32_t flags, int32_t nthreads) {
  int64_t rows;
  if (flags & GV_SPLIT) {
    const int64_t t = nthreads > 0 ? nthreads : 1;
    rows = ((n + t - 1) / t + 7) & ~(int64_t)7;
  } else {
    int64_t item_bytes = (int64_t)((uint32_t)flags >> 8) << 10;
    if (item_bytes <= 0) item_bytes = 65536;
    rows = (item_bytes / (row_bytes > 0 ? row_bytes : 1)) & ~(int64_t)7;
  }
  return rows < 8 ? 8 : rows;
}

/* Threads of a call that streams wbytes of weights: under ~256 KiB a second thread's wake-up costs
   more than it saves. */
static inline int32_t gv_call_threads(int64_t wbytes, int32_t nthreads) {
  return wbytes < (256 << 10) ? 1 : nthreads;
}

/* Floats gv_fill_x writes for m rows of k: x as float32, and for bfloat16 W as many again. */
static inline int64_t gv_x_floats(int64_t m, int64_t k, int32_t wbf16) {
  return m * k * (wbf16 ? 2 : 1);
}

/* x (m rows of k, float32 or bfloat16 bits from element xo, row stride ldx) into buf as the paths
   read it: contiguous float32 (c->x), then for bfloat16 W either its bits (c->xb, with AVX512-BF16
   and a bfloat16 x) or the float32 copy split per 32 columns into even / odd halves (c->xs). */
static void gv_fill_x(gv_ctx *c, float *buf, int64_t m, int64_t k, const void *x, int64_t xo, int64_t ldx, int32_t xbf16, int32_t wbf16) {
  int use_dp = GV_DPBF16 && wbf16 && xbf16;
  size_t nx = (size_t)(m * k);
  float *xf = buf;
  for (int64_t i = 0; i < m; i++) {
    float *d = xf + i * k;
    if (xbf16) {
      const uint16_t *xr = (const uint16_t *)x + xo + i * ldx;
      for (int64_t p = 0; p < k; p++) { uint32_t u = (uint32_t)xr[p] << 16; memcpy(d + p, &u, 4); }
    } else {
      memcpy(d, (const float *)x + xo + i * ldx, (size_t)k * sizeof(float));
    }
  }
  c->x = xf; c->xs = 0; c->xb = 0;
  if (use_dp) {
    uint16_t *xb = (uint16_t *)(buf + nx);
    for (int64_t i = 0; i < m; i++) memcpy(xb + i * k, (const uint16_t *)x + xo + i * ldx, (size_t)k * sizeof(uint16_t));
    c->xb = xb;
  } else if (wbf16) {
    float *xs = buf + nx;
    for (int64_t i = 0; i < m; i++) {
      const float *xr = xf + i * k;
      float *d = xs + i * k;
      for (int64_t p = 0; p + 32 <= k; p += 32)
        for (int q = 0; q < 16; q++) { d[p + q] = xr[p + 2 * q]; d[p + 16 + q] = xr[p + 2 * q + 1]; }
    }
    c->xs = xs;
  }
}

/* Fills c for y = x W^T (+ bias) and copies x as the paths need it (see kiln_gemv); returns the
   copies' buffer to free after the run (0: out of memory), the item count in *items and the
   thread count, capped for small weights (wbytes: the weight bytes the call streams), in *nthreads. */
static float *gv_prepare(gv_ctx *c, int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *w, int64_t wo, int64_t ldw, int32_t wbf16,
                         void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t flags, int64_t wbytes, int64_t *items, int32_t *nthreads) {
  c->m = m; c->n = n; c->k = k;
  c->w = wbf16 ? (const void *)((const uint16_t *)w + wo) : (const void *)((const float *)w + wo);
  c->ldw = ldw; c->bf16 = wbf16;
  c->bias = bias ? (const float *)bias + biaso : 0; c->bs = bs;
  c->y = ybf16 ? (void *)((uint16_t *)y + yo) : (void *)((float *)y + yo);
  c->ldy = ldy; c->ybf16 = ybf16;
  c->stream = (flags & GV_STREAM) != 0;
  *nthreads = gv_call_threads(wbytes, *nthreads);
  c->rows_per_item = gv_rows_per_item(n, k * (wbf16 ? 2 : 4), flags, *nthreads);
  *items = (n + c->rows_per_item - 1) / c->rows_per_item;
  float *buf = (float *)malloc(gv_x_floats(m, k, wbf16) * sizeof(float) + 64);
  if (!buf) return 0;
  gv_fill_x(c, buf, m, k, x, xo, ldx, xbf16, wbf16);
  return buf;
}

/* Tells the pool's weight prefetch (pool-c.ts, pf_*) that this call streams c's weight now. */
static void gv_note(const gv_ctx *c) {
  const int64_t esz = c->bf16 ? 2 : 4;
  pool_pf_note(c->w, ((c->n - 1) * c->ldw + c->k) * esz);
}

/* y[i * ldy + j] = x[i, :] . W[j, :] (+ bias[j * bs]). x is float32 or (xbf16) bfloat16 bits, row
   i at x + xo + i * ldx; W is float32 or (wbf16) bfloat16 bits; bias is float32; y is float32 or
   (ybf16) bfloat16 bits, rounded once to nearest even. flags: GV_STREAM for the stream order,
   GV_SPLIT for one item per thread, bits 8 and up the item size in KiB without it (0: 64).
   Returns 0, or -1 when the copies of x cannot be allocated (nothing written). */
int32_t kiln_gemv(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *w, int64_t wo, int64_t ldw, int32_t wbf16,
               void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t nthreads, int32_t flags) {
  if (m <= 0 || n <= 0) return 0;
  gv_ctx c;
  int64_t items;
  float *buf = gv_prepare(&c, m, n, k, x, xo, ldx, xbf16, w, wo, ldw, wbf16, bias, biaso, bs, y, yo, ldy, ybf16, flags, n * k * (wbf16 ? 2 : 4), &items, &nthreads);
  if (!buf) return -1;
  gv_note(&c);
  pool_run(gv_item, &c, items, nthreads);
  free(buf);
  return 0;
}

/* Three weights against one x (llm.qkvLinear): one pool job whose items are the row blocks of the
   first weight, then the second's, then the third's, each run exactly as kiln_gemv runs it, so the
   outputs are kiln_gemv's bits while the threads share one job's start and tail. */
typedef struct {
  gv_ctx c[3];
  int64_t first[4]; /* item index where weight i's blocks start; first[3]: the total */
} gv_multi_ctx;

static void gv_multi_item(void *vctx, int64_t item) {
  const gv_multi_ctx *c = (const gv_multi_ctx *)vctx;
  int w = item < c->first[1] ? 0 : item < c->first[2] ? 1 : 2;
  gv_item((void *)&c->c[w], item - c->first[w]);
}

/* y_i = x W_i^T for i < 3: W_i row-major [n_i, k] (row stride ldw_i) of one dtype, y_i at element
   offset yo_i with row stride ldy_i, otherwise as kiln_gemv (no bias). Returns 0, or -1 when the
   copies of x cannot be allocated (nothing written). */
int32_t kiln_gemv_multi(int64_t m, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, int32_t wbf16,
                        void *w0, int64_t wo0, int64_t ldw0, int64_t n0, void *y0, int64_t yo0, int64_t ldy0,
                        void *w1, int64_t wo1, int64_t ldw1, int64_t n1, void *y1, int64_t yo1, int64_t ldy1,
                        void *w2, int64_t wo2, int64_t ldw2, int64_t n2, void *y2, int64_t yo2, int64_t ldy2,
                        int32_t ybf16, int32_t nthreads, int32_t flags) {
  if (m <= 0) return 0;
  gv_multi_ctx c;
  int64_t items0;
  const int64_t esz = wbf16 ? 2 : 4;
  float *buf = gv_prepare(&c.c[0], m, n0, k, x, xo, ldx, xbf16, w0, wo0, ldw0, wbf16, 0, 0, 0, y0, yo0, ldy0, ybf16, flags, (n0 + n1 + n2) * k * esz, &items0, &nthreads);
  if (!buf) return -1;
  void *ws[3] = {w0, w1, w2}, *ys[3] = {y0, y1, y2};
  const int64_t wos[3] = {wo0, wo1, wo2}, ldws[3] = {ldw0, ldw1, ldw2}, ns[3] = {n0, n1, n2}, yos[3] = {yo0, yo1, yo2}, ldys[3] = {ldy0, ldy1, ldy2};
  c.first[0] = 0;
  for (int i = 0; i < 3; i++) {
    if (i > 0) {
      c.c[i] = c.c[0];
      c.c[i].n = ns[i];
      c.c[i].w = wbf16 ? (const void *)((const uint16_t *)ws[i] + wos[i]) : (const void *)((const float *)ws[i] + wos[i]);
      c.c[i].ldw = ldws[i];
      c.c[i].y = ybf16 ? (void *)((uint16_t *)ys[i] + yos[i]) : (void *)((float *)ys[i] + yos[i]);
      c.c[i].ldy = ldys[i];
      /* Each weight split on its own (GV_SPLIT): every thread gets a run of each. */
      c.c[i].rows_per_item = gv_rows_per_item(ns[i], k * esz, flags, nthreads);
    }
    c.first[i + 1] = c.first[i] + (ns[i] + c.c[i].rows_per_item - 1) / c.c[i].rows_per_item;
  }
  for (int i = 0; i < 3; i++) gv_note(&c.c[i]);
  pool_run(gv_multi_item, &c, c.first[3], nthreads);
  free(buf);
  return 0;
}

/* Gated pair (llm.gateUpSiluAndMul): two weights of one shape against one x; each item runs the
   same output rows of both (gate, then up) into float32 scratch and ends with the epilogue. */
typedef struct {
  gv_ctx g, u;
  void *y; int64_t ldy; int32_t ybf16;
} gv_gated_ctx;

static inline float gv_round(float v, int32_t bf16) {
  if (!bf16) return v;
  uint32_t u = (uint32_t)gv_to_bf16(v) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void gv_gated_item(void *vctx, int64_t item) {
  const gv_gated_ctx *c = (const gv_gated_ctx *)vctx;
  gv_item((void *)&c->g, item);
  gv_item((void *)&c->u, item);
  int64_t j0 = item * c->g.rows_per_item, j1 = j0 + c->g.rows_per_item;
  if (j1 > c->g.n) j1 = c->g.n;
  const float *gs = (const float *)c->g.y, *us = (const float *)c->u.y;
  for (int64_t i = 0; i < c->g.m; i++)
    for (int64_t j = j0; j < j1; j++) {
      /* g and u as the linears would store them (rounded to the dtype), silu(g) * u in float32
         (k_sigmoid: the native silu's), rounded once. */
      const float g = gv_round(gs[i * c->g.n + j], c->ybf16), u = gv_round(us[i * c->g.n + j], c->ybf16);
      const float v = g * k_sigmoid(g) * u;
      if (c->ybf16) ((uint16_t *)c->y)[i * c->ldy + j] = gv_to_bf16(v);
      else ((float *)c->y)[i * c->ldy + j] = v;
    }
}

/* y[i * ldy + j] = silu(x[i, :] . Wg[j, :]) * (x[i, :] . Wu[j, :]) for j < n: Wg and Wu row-major
   [n, k] (row strides ldg / ldu) of one dtype; x and y as in kiln_gemv (no bias). Returns 0, or -1
   when the scratch cannot be allocated (nothing written). */
int32_t kiln_gemv_gated(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *wg, int64_t wgo, int64_t ldg, void *wu, int64_t wuo, int64_t ldu,
                        int32_t wbf16, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t nthreads, int32_t flags) {
  if (m <= 0 || n <= 0) return 0;
  float *scratch = (float *)malloc((size_t)(2 * m * n) * sizeof(float) + 64);
  if (!scratch) return -1;
  gv_gated_ctx c;
  int64_t items;
  float *buf = gv_prepare(&c.g, m, n, k, x, xo, ldx, xbf16, wg, wgo, ldg, wbf16, 0, 0, 0, scratch, 0, n, 0, flags, 2 * n * k * (wbf16 ? 2 : 4), &items, &nthreads);
  if (!buf) { free(scratch); return -1; }
  c.u = c.g;
  c.u.w = wbf16 ? (const void *)((const uint16_t *)wu + wuo) : (const void *)((const float *)wu + wuo);
  c.u.ldw = ldu;
  c.u.y = scratch + m * n;
  c.y = ybf16 ? (void *)((uint16_t *)y + yo) : (void *)((float *)y + yo);
  c.ldy = ldy; c.ybf16 = ybf16;
  gv_note(&c.g);
  gv_note(&c.u);
  pool_run(gv_gated_item, &c, items, nthreads);
  free(buf);
  free(scratch);
  return 0;
}
`;
