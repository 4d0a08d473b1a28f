/**
 * C source of the native paged-attention decode kernel (llm.pagedAttention on cpu, issue #17):
 *
 *   out[b, h, :] = softmax_t(q[b, h, :] . K_t * scale) . V_t,   t < contextLens[b]
 *
 * where row t of sequence b lives in block blockTables[b, t / blockSize] at offset t % blockSize
 * of the [numBlocks, blockSize, kvHeads, headDim] caches. Caches (and q, out) are float32 or
 * bfloat16 bits, read in place a row at a time. One item per sequence and run of kv heads (all
 * of them on one thread; split so each thread gets an item), walked token-major: the item's heads
 * of one slot are adjacent in the cache, so each block is read front to back, where one item per
 * kv head read headDim-element runs kvHeads * headDim apart (issue #17: 10-30% less time per call
 * at contexts of 40-290 on the 2-vCPU VM, the same float operations in the same order, so the
 * same bits). The group's query rows (grouped-query heads) share each key and value row read. Two passes over the keys:
 * scores (float32 dot products, 16-lane vectors), a softmax per query row (max subtracted, expf),
 * then the weighted value sum; float32 throughout, the output rounded once (nearest even) for
 * bfloat16. Items run on the shared work-sharing pool (pool-c.ts) when the context is long.
 * With fewer (sequence, kv head) items than two per thread (a batch-1 decode step: 8 kv heads on 16
 * threads), each kv head's keys are split into ranges of at least 128 keys (KILN_CPU_PAGED_SPLIT,
 * flash-decoding): each range keeps its own max, sum and unnormalised values, and a merge rescales
 * them to the row's max and divides once (pa_split_item, pa_merge). Where the head dim is a multiple
 * of 16 (KILN_CPU_PAGED_VEC), bfloat16 key and value rows are widened in registers as they are
 * used (pa_dot_at, pa_axpy_at) instead of copied to float32 first, and each score's lanes are
 * summed as a tree. Session 19 on the H200 host: docs/cpu.md.
 * The caller validates lengths and block ids (the JS kernel's RangeErrors); a context length of
 * 0 gives zeros, as the JS kernel. Returns the key ranges per item (1: unsplit), or -1 when the scratch
 * cannot be allocated.
 */
import { POOL_C_SOURCE } from './pool-c.js';

export const PAGED_C_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
${POOL_C_SOURCE}

typedef float pa_v16 __attribute__((vector_size(64)));
typedef uint16_t pa_h16 __attribute__((vector_size(32)));
typedef uint32_t pa_u16 __attribute__((vector_size(64)));

/* Row of n elements (float32 or bfloat16 bits) at element index at, as float32. */
static inline void pa_row(const void *src, int32_t bf16, int64_t at, int64_t n, float *out) {
  if (!bf16) { memcpy(out, (const float *)src + at, (size_t)n * sizeof(float)); return; }
  const uint16_t *h = (const uint16_t *)src + at;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    pa_h16 hv;
    memcpy(&hv, h + i, sizeof hv);
    pa_u16 u = __builtin_convertvector(hv, pa_u16) << 16;
    memcpy(out + i, &u, sizeof u);
  }
  for (; i < n; i++) { uint32_t u = (uint32_t)h[i] << 16; memcpy(out + i, &u, 4); }
}

static inline float pa_dot(const float *a, const float *b, int64_t n) {
  pa_v16 acc = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    pa_v16 x, y;
    memcpy(&x, a + i, sizeof x);
    memcpy(&y, b + i, sizeof y);
    acc += x * y;
  }
  float s = 0;
  for (int q = 0; q < 16; q++) s += acc[q];
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* Sum of a vector's 16 lanes: a log-tree with AVX-512 (4 dependent adds where a lane-by-lane sum
   had 16), else lane by lane. */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline float pa_hsum(pa_v16 v) { return _mm512_reduce_add_ps((__m512)v); }
#else
static inline float pa_hsum(pa_v16 v) { float s = 0; for (int q = 0; q < 16; q++) s += v[q]; return s; }
#endif

/* 16 elements of a row (float32 or bfloat16 bits) at element index at, widened in registers. */
static inline pa_v16 pa_ld16(const void *src, int32_t bf16, int64_t at) {
  pa_v16 v;
  if (!bf16) { memcpy(&v, (const float *)src + at, sizeof v); return v; }
  pa_h16 hv;
  memcpy(&hv, (const uint16_t *)src + at, sizeof hv);
  pa_u16 u = __builtin_convertvector(hv, pa_u16) << 16;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* q . row for a cache row at element index at, D % 16 == 0: the row is widened in registers (no
   float copy of it), two accumulators, one tree sum. */
static inline float pa_dot_at(const float *q, const void *src, int32_t bf16, int64_t at, int64_t D) {
  pa_v16 a0 = {0}, a1 = {0};
  int64_t i = 0;
  for (; i + 32 <= D; i += 32) {
    pa_v16 x0, x1;
    memcpy(&x0, q + i, sizeof x0);
    memcpy(&x1, q + i + 16, sizeof x1);
    a0 += x0 * pa_ld16(src, bf16, at + i);
    a1 += x1 * pa_ld16(src, bf16, at + i + 16);
  }
  if (i < D) {
    pa_v16 x0;
    memcpy(&x0, q + i, sizeof x0);
    a0 += x0 * pa_ld16(src, bf16, at + i);
  }
  return pa_hsum(a0 + a1);
}

/* acc[g][:] += p[g] * row for G query rows sharing a cache row at element index at, D % 16 == 0:
   the row is widened in registers once per 16 elements and used by every row of the group. */
static inline void pa_axpy_at(float *acc, int64_t acc_stride, const float *p, int64_t p_stride, int64_t G, const void *src, int32_t bf16, int64_t at, int64_t D) {
  for (int64_t i = 0; i < D; i += 16) {
    const pa_v16 v = pa_ld16(src, bf16, at + i);
    for (int64_t j = 0; j < G; j++) {
      pa_v16 a;
      memcpy(&a, acc + j * acc_stride + i, sizeof a);
      a += p[j * p_stride] * v;
      memcpy(acc + j * acc_stride + i, &a, sizeof a);
    }
  }
}

static inline uint16_t pa_to_bf16(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct {
  int64_t H, D, kvh, group, block_size, max_blocks;
  const void *q; int32_t qbf16;
  const void *kc; const void *vc; int32_t cbf16;
  const int32_t *tables; const int32_t *lens;
  void *out; int32_t obf16;
  float scale;
  float *scratch; int64_t per_item, max_len;
  int64_t hpi; /* kv heads per item: all of them on one thread, else split so every thread gets items */
  int64_t nsplit; /* key ranges per (sequence, kv heads): > 1 runs pa_split_item, merged by pa_merge */
  int64_t span;   /* nsplit > 1: the most keys a range takes (whole blocks) */
  int32_t vec;    /* D % 16 == 0 and vec_rows: cache rows widened in registers (pa_dot_at, pa_axpy_at) */
  float *part;    /* nsplit > 1: per item and query row, (max, sum, acc[D]) of its key range */
} pa_ctx;

/* One cache row's scores for the G query rows of its group: s[j * s_stride] = q_j . row * scale,
   the row widened in registers (c->vec) or copied to float32 first (row: D floats of scratch). */
static inline void pa_score_row(const pa_ctx *c, const float *q, int64_t at, float *s, int64_t s_stride, float *row) {
  const int64_t D = c->D, G = c->group;
  if (c->vec) {
    for (int64_t j = 0; j < G; j++) s[j * s_stride] = pa_dot_at(q + j * D, c->kc, c->cbf16, at, D) * c->scale;
    return;
  }
  pa_row(c->kc, c->cbf16, at, D, row);
  for (int64_t j = 0; j < G; j++) s[j * s_stride] = pa_dot(q + j * D, row, D) * c->scale;
}

/* One cache row's values into the G accumulators of its group: acc_j += p[j * p_stride] * row,
   widened in registers (c->vec) or through the float32 copy. */
static inline void pa_value_row(const pa_ctx *c, float *acc, int64_t acc_stride, const float *p, int64_t p_stride, int64_t at, float *row) {
  const int64_t D = c->D, G = c->group;
  if (c->vec) {
    pa_axpy_at(acc, acc_stride, p, p_stride, G, c->vc, c->cbf16, at, D);
    return;
  }
  pa_row(c->vc, c->cbf16, at, D, row);
  for (int64_t j = 0; j < G; j++) {
    const float pj = p[j * p_stride];
    float *a = acc + j * acc_stride;
    for (int64_t d = 0; d < D; d++) a[d] += pj * row[d];
  }
}

static void pa_item(void *vctx, int64_t item) {
  const pa_ctx *c = (const pa_ctx *)vctx;
  const int64_t ipb = c->kvh / c->hpi, b = item / ipb, kh0 = (item % ipb) * c->hpi, nh = c->hpi;
  const int64_t D = c->D, G = c->group, len = c->lens[b], bs = c->block_size;
  /* Per kv head of the item: q rows of its group, scores per row, accumulators; one row buffer. */
  float *q = c->scratch + item * c->per_item, *s = q + nh * G * D, *acc = s + nh * G * c->max_len, *row = acc + nh * G * D;
  for (int64_t h = 0; h < nh; h++)
    for (int64_t j = 0; j < G; j++) pa_row(c->q, c->qbf16, (b * c->H + (kh0 + h) * G + j) * D, D, q + (h * G + j) * D);
  memset(acc, 0, sizeof(float) * (size_t)(nh * G * D));
  const int32_t *tab = c->tables + b * c->max_blocks;
  /* Token-major: the item's heads of one cache slot are adjacent (nh * D elements), so the walk
     reads each block's rows front to back instead of D-element runs kvh * D apart per head. */
  for (int64_t t0 = 0; t0 < len; t0 += bs) {
    const int64_t n = len - t0 < bs ? len - t0 : bs, base = ((int64_t)tab[t0 / bs] * bs * c->kvh + kh0) * D;
    for (int64_t sl = 0; sl < n; sl++)
      for (int64_t h = 0; h < nh; h++) {
        pa_score_row(c, q + h * G * D, base + (sl * c->kvh + h) * D, s + h * G * len + t0 + sl, len, row);
      }
  }
  for (int64_t j = 0; j < nh * G && len > 0; j++) {
    float *sj = s + j * len, m = -INFINITY, l = 0;
    for (int64_t t = 0; t < len; t++) m = sj[t] > m ? sj[t] : m;
    for (int64_t t = 0; t < len; t++) { sj[t] = expf(sj[t] - m); l += sj[t]; }
    const float inv = 1.0f / l;
    for (int64_t t = 0; t < len; t++) sj[t] *= inv;
  }
  for (int64_t t0 = 0; t0 < len; t0 += bs) {
    const int64_t n = len - t0 < bs ? len - t0 : bs, base = ((int64_t)tab[t0 / bs] * bs * c->kvh + kh0) * D;
    for (int64_t sl = 0; sl < n; sl++)
      for (int64_t h = 0; h < nh; h++) {
        pa_value_row(c, acc + h * G * D, D, s + h * G * len + t0 + sl, len, base + (sl * c->kvh + h) * D, row);
      }
  }
  for (int64_t h = 0; h < nh; h++)
    for (int64_t j = 0; j < G; j++) {
      const int64_t oa = (b * c->H + (kh0 + h) * G + j) * D;
      const float *a = acc + (h * G + j) * D;
      for (int64_t d = 0; d < D; d++) {
        if (c->obf16) ((uint16_t *)c->out)[oa + d] = pa_to_bf16(a[d]);
        else ((float *)c->out)[oa + d] = a[d];
      }
    }
}

/* Split form (nsplit > 1, flash-decoding on the cpu): item = (sequence, kv head run, key range);
   the range is ceil(len / nsplit) keys rounded up to whole cache blocks. The scores and the value
   pass are pa_item's, over the range only, with exp(s - m) of the range's own max m and the values
   summed unnormalised; pa_merge rescales the ranges to the row's max and divides once. */
static void pa_split_item(void *vctx, int64_t item) {
  const pa_ctx *c = (const pa_ctx *)vctx;
  const int64_t ipb = c->kvh / c->hpi, base_item = item / c->nsplit, sp = item % c->nsplit;
  const int64_t b = base_item / ipb, kh0 = (base_item % ipb) * c->hpi, nh = c->hpi;
  const int64_t D = c->D, G = c->group, len = c->lens[b], bs = c->block_size;
  const int64_t span = ((len + c->nsplit - 1) / c->nsplit + bs - 1) / bs * bs;
  const int64_t ta = sp * span < len ? sp * span : len, tb = ta + span < len ? ta + span : len, n_t = tb - ta;
  float *q = c->scratch + item * c->per_item, *s = q + nh * G * D, *row = s + nh * G * c->span;
  float *part = c->part + item * nh * G * (D + 2);
  for (int64_t h = 0; h < nh; h++)
    for (int64_t j = 0; j < G; j++) pa_row(c->q, c->qbf16, (b * c->H + (kh0 + h) * G + j) * D, D, q + (h * G + j) * D);
  for (int64_t r = 0; r < nh * G; r++) {
    float *pr = part + r * (D + 2);
    pr[0] = -INFINITY; pr[1] = 0;
    memset(pr + 2, 0, sizeof(float) * (size_t)D);
  }
  if (n_t <= 0) return;
  const int32_t *tab = c->tables + b * c->max_blocks;
  for (int64_t t0 = ta; t0 < tb; t0 += bs) {
    const int64_t n = tb - t0 < bs ? tb - t0 : bs, base = ((int64_t)tab[t0 / bs] * bs * c->kvh + kh0) * D;
    for (int64_t sl = 0; sl < n; sl++)
      for (int64_t h = 0; h < nh; h++) {
        pa_score_row(c, q + h * G * D, base + (sl * c->kvh + h) * D, s + h * G * n_t + t0 - ta + sl, n_t, row);
      }
  }
  for (int64_t r = 0; r < nh * G; r++) {
    float *sr = s + r * n_t, m = -INFINITY, l = 0;
    for (int64_t t = 0; t < n_t; t++) m = sr[t] > m ? sr[t] : m;
    for (int64_t t = 0; t < n_t; t++) { sr[t] = expf(sr[t] - m); l += sr[t]; }
    part[r * (D + 2)] = m; part[r * (D + 2) + 1] = l;
  }
  for (int64_t t0 = ta; t0 < tb; t0 += bs) {
    const int64_t n = tb - t0 < bs ? tb - t0 : bs, base = ((int64_t)tab[t0 / bs] * bs * c->kvh + kh0) * D;
    for (int64_t sl = 0; sl < n; sl++)
      for (int64_t h = 0; h < nh; h++) {
        pa_value_row(c, part + h * G * (D + 2) + 2, D + 2, s + h * G * n_t + t0 - ta + sl, n_t, base + (sl * c->kvh + h) * D, row);
      }
  }
}

/* Merge of the split form, one item per (sequence, query head): the ranges' sums and values
   rescaled by exp(m_s - M) to the row's max M, out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M)
   (a row with no keys: zeros, as pa_item). */
static void pa_merge(void *vctx, int64_t item) {
  const pa_ctx *c = (const pa_ctx *)vctx;
  const int64_t D = c->D, G = c->group, b = item / c->H, hq = item % c->H, kh = hq / G, j = hq % G;
  const int64_t ipb = c->kvh / c->hpi, base_item = b * ipb + kh / c->hpi, r = (kh % c->hpi) * G + j;
  const int64_t stride = c->hpi * G * (D + 2);
  const float *p0 = c->part + base_item * c->nsplit * stride + r * (D + 2);
  float M = -INFINITY, L = 0;
  for (int64_t sp = 0; sp < c->nsplit; sp++) { const float m = p0[sp * stride]; M = m > M ? m : M; }
  float w[64];
  for (int64_t sp = 0; sp < c->nsplit; sp++) {
    const float *p = p0 + sp * stride;
    w[sp] = p[1] != 0 ? expf(p[0] - M) : 0.0f; /* an empty range adds nothing; a NaN sum stays NaN */
    L += p[1] * w[sp];
  }
  const float inv = L > 0 ? 1.0f / L : 0.0f;
  const int64_t oa = (b * c->H + hq) * D;
  for (int64_t d = 0; d < D; d++) {
    float v = 0;
    for (int64_t sp = 0; sp < c->nsplit; sp++) v += p0[sp * stride + 2 + d] * w[sp];
    v *= inv;
    if (c->obf16) ((uint16_t *)c->out)[oa + d] = pa_to_bf16(v);
    else ((float *)c->out)[oa + d] = v;
  }
}

/* c's sizes and work split for B sequences of lens (everything but the pointers and the scratch):
   kv heads per item, key ranges, each item's scratch. Returns the floats of scratch a run needs
   (items' scratch, then the split form's partials at c->part's offset *part_at) and the item count
   of the first pass in *items (pa_split_item or pa_item; the split form's merge has B * H). */
static int64_t pa_plan(pa_ctx *c, int64_t B, int64_t H, int64_t D, int64_t kvh, int64_t block_size, int64_t max_blocks, const int32_t *lens,
                       float scale, int32_t nthreads, int32_t max_split, int32_t vec_rows, int64_t *items, int64_t *part_at) {
  c->H = H; c->D = D; c->kvh = kvh; c->group = H / kvh; c->block_size = block_size; c->max_blocks = max_blocks;
  c->scale = scale;
  c->vec = vec_rows && D % 16 == 0;
  int64_t max_len = 1;
  for (int64_t b = 0; b < B; b++) if (lens[b] > max_len) max_len = lens[b];
  c->max_len = max_len;
  /* kv heads per item: one item per sequence on one thread; with more threads, the largest
     divisor of kvh that still gives each thread an item. */
  int64_t hpi = c->kvh;
  if (nthreads > 1)
    while (hpi > 1 && B * (c->kvh / hpi) < nthreads) {
      int64_t d = hpi - 1;
      while (d > 1 && hpi % d) d--;
      hpi = d;
    }
  c->hpi = hpi;
  /* Key ranges: with fewer (sequence, kv head) items than two per thread and long enough
     contexts (at least 128 keys a range), each kv head's keys are split into ranges (at most 64;
     max_split caps it, 1: never) so every thread streams a part of the cache. */
  int64_t nsplit = 1;
  if (nthreads > 1 && max_split > 1 && B * kvh < 2 * (int64_t)nthreads) {
    nsplit = (2 * (int64_t)nthreads + B * kvh - 1) / (B * kvh);
    if (nsplit > max_len / 128) nsplit = max_len / 128;
    if (nsplit > max_split) nsplit = max_split;
    if (nsplit > 64) nsplit = 64;
    if (nsplit < 1) nsplit = 1;
    if (nsplit > 1) c->hpi = hpi = 1;
  }
  c->nsplit = nsplit;
  if (nsplit > 1) {
    const int64_t span = ((max_len + nsplit - 1) / nsplit + block_size - 1) / block_size * block_size;
    *items = B * (kvh / hpi) * nsplit;
    c->span = span;
    c->per_item = hpi * c->group * (D + span) + D;
    *part_at = *items * c->per_item;
    return *part_at + *items * hpi * c->group * (D + 2);
  }
  *items = B * (kvh / hpi);
  c->per_item = hpi * c->group * (2 * D + max_len) + D;
  *part_at = *items * c->per_item;
  return *part_at;
}

/* q [B, H, D] dense at element offset qo; caches at offsets kco / vco; tables [B, maxBlocks] and
   lens [B] int32; out [B, H, D] dense at offset oo. */
int32_t kiln_paged_attention(int64_t B, int64_t H, int64_t D, int64_t kvh, int64_t block_size, int64_t max_blocks,
                          void *q, int64_t qo, int32_t qbf16, void *kc, int64_t kco, void *vc, int64_t vco, int32_t cbf16,
                          int32_t *tables, int32_t *lens, void *out, int64_t oo, int32_t obf16, float scale, int32_t nthreads, int32_t max_split, int32_t vec_rows) {
  pa_ctx c;
  c.q = qbf16 ? (const void *)((const uint16_t *)q + qo) : (const void *)((const float *)q + qo); c.qbf16 = qbf16;
  c.kc = cbf16 ? (const void *)((const uint16_t *)kc + kco) : (const void *)((const float *)kc + kco);
  c.vc = cbf16 ? (const void *)((const uint16_t *)vc + vco) : (const void *)((const float *)vc + vco);
  c.cbf16 = cbf16;
  c.tables = tables; c.lens = lens;
  c.out = obf16 ? (void *)((uint16_t *)out + oo) : (void *)((float *)out + oo); c.obf16 = obf16;
  int64_t items, part_at;
  const int64_t floats = pa_plan(&c, B, H, D, kvh, block_size, max_blocks, lens, scale, nthreads, max_split, vec_rows, &items, &part_at);
  c.scratch = (float *)malloc(sizeof(float) * (size_t)floats);
  if (!c.scratch) return -1;
  c.part = c.nsplit > 1 ? c.scratch + part_at : 0;
  if (c.nsplit > 1) {
    pool_run(pa_split_item, &c, items, nthreads);
    pool_run(pa_merge, &c, B * H, B * H * D >= 4096 ? nthreads : 1);
  } else {
    pool_run(pa_item, &c, items, nthreads);
  }
  free(c.scratch);
  return (int32_t)c.nsplit;
}
`;
