/**
 * C source of the native float32 GEMM (BLIS-style), built by so-cache.ts with the host's flags:
 *
 *   C[m, n] = epi(act(alpha * A[m, k] . B[k, n] + beta * C + bias[n]), e0..e3)
 *
 * - Operands are addressed through (offset, rowStride, colStride), so transposed and strided
 *   inputs are packed, never copied first; C is row-major with leading dimension ldc. B may come
 *   prepacked (`kiln_sgemm_packb`: a weight packed once and reused by every call, as the compiled
 *   programs and the eager weight cache do).
 * - A is either a matrix or, for `kiln_sconv2d` (conv-c.ts) on an input whose channels are
 *   strided (NCHW), an implicit im2col of an image batch: the
 *   A packer gathers patches straight from the input (K ordered (kh, kw, c), so a channels_last
 *   input gives contiguous channel runs), so convolution runs on the same micro-kernel without
 *   materialising the patch matrix; C is then the [pixels, out channels] channels_last output.
 * - Loops (Goto/BLIS): NC-wide column panels (the panel's B is packed for all of K, slab by slab,
 *   into NR-wide slivers, k-major, zero padded) > MC-tall row blocks > KC-deep slabs (A packed into
 *   MR-tall slivers) > NR slivers > MR x NR micro-tile.
 * - Micro-kernel 6 x 16: twelve 8-float vector accumulators + two B vectors + one broadcast A =
 *   15 of the 16 AVX2 registers (GCC vector extensions: AVX2/FMA with -march=native, SSE pairs
 *   elsewhere, NEON on arm64). Each k step is 12 FMAs on 2 B loads and 6 broadcasts; the k loop
 *   is unrolled by 4, and a full tile is written straight to C (no staging tile).
 * - Blocking (Zen 3: 32 KiB L1d, 512 KiB L2 per core): a KC x NR B sliver (512 x 16 x 4 B = 32 KiB)
 *   streams through L1 against an MR x KC A sliver; the MC x KC A block (192 x 512 x 4 B = 384 KiB)
 *   stays in L2. Row blocks are evened out over the threads (at MR granularity). NC = 4096 caps the
 *   packed panel at 16 K floats per unit of K (a 151936-wide LM head is not packed whole).
 * - Threads (pool-c.ts, a work-sharing pool instead of OpenMP: the caller never waits for a
 *   worker that has not started): first the packing items (B slivers unless prepacked, and a
 *   shared A when there are fewer row blocks than 2 x threads and A must be packed), then the
 *   compute items (row block x column range), claimed from an atomic counter. A row-major A with
 *   few row blocks (a 64-row activation) is read in place, not packed. Small products run on the
 *   calling thread alone.
 * - Accumulation is float32 with FMA (as PyTorch's CPU float32 GEMM). Epilogue (after the last
 *   K slab, over each row of an item's block while it is in L1/L2): + bias[j] (any stride), then
 *   none / relu / gelu(erf) / gelu(tanh) (the vectorisable math of c-math.ts), then the optional
 *   generated epilogue `kiln_epi` (the compiler folds a consumer pointwise kernel into it; `gemmCSource`)
 *   over up to 4 extra inputs, each addressed as e + row * ld + col (ld = 0: a row vector).
 */
import { C_HELPERS, C_MATH } from './c-math.js';
import { CONV_C_SOURCE } from './conv-c.js';
import { POOL_C_SOURCE } from './pool-c.js';

/** Extra epilogue inputs a generated epilogue may read. */
export const GEMM_EPI_MAX = 4;

/**
 * The GEMM translation unit. `epilogue`, when given, is C code defining
 * `static inline void kiln_epi(int64_t w, float *restrict c, const float *restrict e0, ... e3)`
 * that rewrites one tile row c[0..w) in place (e_k point at the same row's column 0).
 */
export function gemmCSource(epilogue: string | null = null): string {
  return `${PRELUDE}${POOL_C_SOURCE}${C_MATH}${C_HELPERS}${epilogue ? `#define KILN_EPI 1\n${epilogue}\n` : ''}${CORE}${CONV_C_SOURCE}`;
}

const PRELUDE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
`;

const CORE = String.raw`
#define MR 6
#define NR 16
/* KC 512 / MC 192 (measured on Zen 3, 1024^3 single thread, against 256 / 144 as BLIS's Haswell
   and Zen configs use): a 512-deep slab halves the read-modify-write passes over C and the MC x KC
   A block (384 KiB) still fits the 512 KiB L2; ~10% more GFLOP/s per core. */
#define KC 512
#define MC 192
#define NC 4096
#ifndef KILN_DIRECT_A
#define KILN_DIRECT_A 1
#endif
#define PACK_MAX ((int64_t)1 << 24)
#define EPI_MAX 4

typedef float v8 __attribute__((vector_size(32)));
/* Unaligned loads of packed B: a prepacked weight lives in a JavaScript Float32Array (16-byte
   aligned at best); vmovups on aligned data costs the same as vmovaps. */
typedef float v8u __attribute__((vector_size(32), aligned(4)));

/* Where A comes from: a strided matrix, or (conv != 0) the implicit im2col of an image batch
   x[n, h, w, c] (any strides) for a KH x KW convolution; rows are output pixels (n, oh, ow),
   columns (kh, kw, c). */
typedef struct {
  const float *a; int64_t ars, acs;
  int conv;
  int64_t H, W, C, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, xsn, xsh, xsw, xsc;
} a_src;

typedef struct { const float *p[EPI_MAX]; int64_t ld[EPI_MAX]; } epi_src;

static _Thread_local float *tls_a = 0;
static _Thread_local int64_t tls_a_len = 0;
static _Thread_local float *tls_b = 0;
static _Thread_local int64_t tls_b_len = 0;
static _Thread_local float *tls_as = 0;
static _Thread_local int64_t tls_as_len = 0;

static float *grow(float **buf, int64_t *len, int64_t need) {
  if (*len < need) {
    free(*buf);
    *buf = (float *)aligned_alloc(64, (size_t)((need * 4 + 63) / 64 * 64));
    *len = *buf ? need : 0;
  }
  return *buf;
}

/* One NR-wide sliver of B (kc x w, zero padded to NR), k-major. */
static void pack_b(const float *B, int64_t brs, int64_t bcs, int64_t kc, int64_t j0, int64_t w, float *restrict out) {
  const float *base = B + j0 * bcs;
  if (w == NR && bcs == 1) {
    for (int64_t p = 0; p < kc; p++) memcpy(out + p * NR, base + p * brs, NR * sizeof(float));
    return;
  }
  if (w == NR && brs == 1) {
    /* A transposed weight (W[n, k] read as B[k, n]): 8 x 16 blocks, reading 16 runs of 8. */
    int64_t p0 = 0;
    for (; p0 + 8 <= kc; p0 += 8)
      for (int64_t j = 0; j < NR; j++) {
        const float *s = base + j * bcs + p0;
        float *o = out + p0 * NR + j;
        o[0] = s[0]; o[NR] = s[1]; o[2 * NR] = s[2]; o[3 * NR] = s[3];
        o[4 * NR] = s[4]; o[5 * NR] = s[5]; o[6 * NR] = s[6]; o[7 * NR] = s[7];
      }
    for (int64_t j = 0; j < NR; j++)
      for (int64_t p = p0; p < kc; p++) out[p * NR + j] = base[j * bcs + p];
    return;
  }
  for (int64_t p = 0; p < kc; p++) {
    for (int64_t j = 0; j < w; j++) out[p * NR + j] = base[p * brs + j * bcs];
    for (int64_t j = w; j < NR; j++) out[p * NR + j] = 0.0f;
  }
}

/* pack_b for B given as bfloat16 bits, widened exactly (bits << 16) while packing: a bfloat16
   linear's weight is read in place, never copied to float32 whole (issue #17: a bfloat16 prefill
   on the cpu decoded every weight in JavaScript first, 15x slower than float32). */
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void pack_b_bf16(const uint16_t *B, int64_t brs, int64_t bcs, int64_t kc, int64_t j0, int64_t w, float *restrict out) {
  const uint16_t *base = B + j0 * bcs;
  if (w == NR && brs == 1) {
    int64_t p0 = 0;
    for (; p0 + 8 <= kc; p0 += 8)
      for (int64_t j = 0; j < NR; j++) {
        const uint16_t *s = base + j * bcs + p0;
        float *o = out + p0 * NR + j;
        for (int q = 0; q < 8; q++) o[q * NR] = bf16_to_f32(s[q]);
      }
    for (int64_t j = 0; j < NR; j++)
      for (int64_t p = p0; p < kc; p++) out[p * NR + j] = bf16_to_f32(base[j * bcs + p]);
    return;
  }
  for (int64_t p = 0; p < kc; p++) {
    for (int64_t j = 0; j < w; j++) out[p * NR + j] = bf16_to_f32(base[p * brs + j * bcs]);
    for (int64_t j = w; j < NR; j++) out[p * NR + j] = 0.0f;
  }
}

static void pack_a_mat(const float *A, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float *restrict out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    int64_t h = mc - i0 < MR ? mc - i0 : MR;
    float *o = out + i0 * kc;
    const float *base = A + i0 * ars;
    if (h == MR && acs == 1) {
      const float *r0 = base, *r1 = base + ars, *r2 = base + 2 * ars, *r3 = base + 3 * ars, *r4 = base + 4 * ars, *r5 = base + 5 * ars;
      for (int64_t p = 0; p < kc; p++) {
        float *q = o + p * MR;
        q[0] = r0[p]; q[1] = r1[p]; q[2] = r2[p]; q[3] = r3[p]; q[4] = r4[p]; q[5] = r5[p];
      }
    } else {
      for (int64_t p = 0; p < kc; p++)
        for (int64_t r = 0; r < MR; r++) o[p * MR + r] = r < h ? base[r * ars + p * acs] : 0.0f;
    }
  }
}

/* Rows [i, i + mc) x columns [pc, pc + kc) of the implicit im2col matrix, packed as pack_a_mat. */
static void pack_a_conv(const a_src *s, int64_t i, int64_t pc, int64_t mc, int64_t kc, float *restrict out) {
  const int64_t C = s->C, KW = s->KW;
  for (int64_t r = 0; r < ((mc + MR - 1) / MR) * MR; r++) {
    float *o = out + (r / MR) * MR * kc + (r % MR);
    if (r >= mc) { for (int64_t p = 0; p < kc; p++) o[p * MR] = 0.0f; continue; }
    int64_t pix = i + r, ow = pix % s->OW, t = pix / s->OW, oh = t % s->OH, n = t / s->OH;
    int64_t ih0 = oh * s->sh - s->ph, iw0 = ow * s->sw - s->pw;
    const float *xn = s->a + n * s->xsn;
    int64_t q = pc / C, c = pc % C, kh = q / KW, kw = q % KW;
    int64_t p = 0;
    while (p < kc) {
      int64_t run = C - c < kc - p ? C - c : kc - p;
      int64_t ih = ih0 + kh * s->dh, iw = iw0 + kw * s->dw;
      if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) {
        for (int64_t u = 0; u < run; u++) o[(p + u) * MR] = 0.0f;
      } else {
        const float *src = xn + ih * s->xsh + iw * s->xsw + c * s->xsc;
        if (s->xsc == 1) for (int64_t u = 0; u < run; u++) o[(p + u) * MR] = src[u];
        else for (int64_t u = 0; u < run; u++) o[(p + u) * MR] = src[u * s->xsc];
      }
      p += run;
      c = 0;
      if (++kw == KW) { kw = 0; kh++; }
    }
  }
}

static void pack_a(const a_src *s, int64_t i, int64_t pc, int64_t mc, int64_t kc, float *out) {
  if (s->conv) pack_a_conv(s, i, pc, mc, kc, out);
  else pack_a_mat(s->a + i * s->ars + pc * s->acs, s->ars, s->acs, mc, kc, out);
}

/* One k step of the 6x16 micro-kernel: A rows a0..a5 at index q times the packed B row at b (then
   b advances a row). Shared with the direct convolution (conv-c.ts), which walks A differently. */
#define KILN_MK_STEP(q) do { \
    const v8 kb0_ = *(const v8u *)b, kb1_ = *(const v8u *)(b + 8); \
    c00 += a0[q] * kb0_; c01 += a0[q] * kb1_; \
    c10 += a1[q] * kb0_; c11 += a1[q] * kb1_; \
    c20 += a2[q] * kb0_; c21 += a2[q] * kb1_; \
    c30 += a3[q] * kb0_; c31 += a3[q] * kb1_; \
    c40 += a4[q] * kb0_; c41 += a4[q] * kb1_; \
    c50 += a5[q] * kb0_; c51 += a5[q] * kb1_; \
    b += NR; \
  } while (0)
/* The MR x NR micro-kernel: acc = A rows . B sliver over kc, then
   mode 0: C = acc; mode 1: C += acc (straight to C: a full tile with alpha 1);
   mode 2: t = acc (the caller scales / merges a partial or alpha != 1 tile).
   A element (r, p) is at a + r * ars + p * aks: a packed sliver (ars 1, aks MR) or the rows of a
   row-major A read in place (ars = its row stride, aks 1; rows past h repeat row h - 1, whose
   results the caller drops).
   Unrolled by 4: the rolled loop spends a third of its issue slots on loop control and
   address updates and runs at ~70 GFLOP/s per Zen 3 core on L1-resident data, unrolled ~82. */
static inline __attribute__((always_inline)) void micro(int64_t kc, const float *restrict a, int64_t ars, int64_t aks, int64_t h,
                                                        const float *restrict b, float *restrict c, int64_t ldc, int mode, float *restrict t) {
  v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
  v8 c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
  const float *a0 = a, *a1 = a + (h > 1) * ars, *a2 = a + (h > 2 ? 2 : h - 1) * ars;
  const float *a3 = a + (h > 3 ? 3 : h - 1) * ars, *a4 = a + (h > 4 ? 4 : h - 1) * ars, *a5 = a + (h > 5 ? 5 : h - 1) * ars;
  if (mode != 2) for (int r = 0; r < MR; r++) { __builtin_prefetch(c + r * ldc, 1); __builtin_prefetch(c + r * ldc + NR - 1, 1); }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; p++) KILN_MK_STEP(p * aks);
  if (mode == 2) {
    v8 *o = (v8 *)t;
    o[0] = c00; o[1] = c01; o[2] = c10; o[3] = c11; o[4] = c20; o[5] = c21;
    o[6] = c30; o[7] = c31; o[8] = c40; o[9] = c41; o[10] = c50; o[11] = c51;
    return;
  }
#define KILN_ROW(r, x0, x1) { v8u *q = (v8u *)(c + (r) * ldc); if (mode == 1) { q[0] += x0; q[1] += x1; } else { q[0] = x0; q[1] = x1; } }
  KILN_ROW(0, c00, c01) KILN_ROW(1, c10, c11) KILN_ROW(2, c20, c21)
  KILN_ROW(3, c30, c31) KILN_ROW(4, c40, c41) KILN_ROW(5, c50, c51)
#undef KILN_ROW
}

static void act_row(float *restrict c, int64_t w, int32_t act) {
  switch (act) {
    case 1:
      for (int64_t j = 0; j < w; j++) c[j] = k_relu(c[j]);
      break;
    case 2:
      k_gelu_row(c, c, w);
      break;
    case 3:
      for (int64_t j = 0; j < w; j++) c[j] = k_gelu_tanh(c[j]);
      break;
    default:
      break;
  }
}

/* The last-slab epilogue of one C row segment: bias, activation, generated epilogue. */
static void finish_row(float *restrict c, int64_t w, const float *bias, int64_t bs, int32_t act, const epi_src *ep, int64_t gi, int64_t gj) {
  if (bias) {
    if (bs == 1) for (int64_t j = 0; j < w; j++) c[j] += bias[j];
    else for (int64_t j = 0; j < w; j++) c[j] += bias[j * bs];
  }
  if (act) act_row(c, w, act);
#ifdef KILN_EPI
  const float *e[EPI_MAX];
  for (int q = 0; q < EPI_MAX; q++) e[q] = ep->p[q] ? ep->p[q] + gi * ep->ld[q] + gj : 0;
  kiln_epi(w, c, e[0], e[1], e[2], e[3]);
#else
  (void)ep; (void)gi; (void)gj;
#endif
}

/* Writes one tile: first slab applies beta (beta == 0 overwrites), later slabs accumulate. */
static void store_tile(const float *restrict t, int64_t h, int64_t w, float *restrict c, int64_t ldc, float alpha, float beta, int first) {
  for (int64_t r = 0; r < h; r++) {
    float *restrict cr = c + r * ldc;
    const float *restrict tr = t + r * NR;
    if (first && beta == 0.0f) {
      if (alpha == 1.0f) for (int64_t j = 0; j < w; j++) cr[j] = tr[j];
      else for (int64_t j = 0; j < w; j++) cr[j] = alpha * tr[j];
    } else if (first) for (int64_t j = 0; j < w; j++) cr[j] = alpha * tr[j] + beta * cr[j];
    else for (int64_t j = 0; j < w; j++) cr[j] += alpha * tr[j];
  }
}

static void epilogue_only(int64_t m, int64_t n, float beta, float *C, int64_t ldc, const float *bias, int64_t bs, int32_t act, const epi_src *ep) {
  for (int64_t i = 0; i < m; i++) {
    float *c = C + i * ldc;
    for (int64_t j = 0; j < n; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    finish_row(c, n, bias, bs, act, ep, i, 0);
  }
}

int32_t kiln_native_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* Columns per packed panel for depth k (the K x panel block is capped at PACK_MAX floats, so a
   deep K narrows the panel instead of packing gigabytes). */
static int64_t panel_cols(int64_t k) {
  int64_t ncb = (PACK_MAX / (k > 0 ? k : 1)) / NR * NR;
  if (ncb < NR) ncb = NR;
  if (ncb > NC) ncb = NC;
  return ncb;
}

/* Floats from p to the next 64-byte boundary: a JavaScript Float32Array is only 16-byte aligned,
   and a packed B read through 32-byte loads that straddle cache lines runs ~30% slower. */
int64_t kiln_align_floats(const float *p) {
  return (int64_t)(((64 - ((uintptr_t)p & 63)) & 63) / 4);
}

/* Floats of a prepacked B (every panel, every K slab, slivers zero padded to NR). */
int64_t kiln_sgemm_packed_size(int64_t k, int64_t n) {
  return k * ((n + NR - 1) / NR) * NR;
}

/* Packs B[k, n] whole into out (kiln_sgemm_packed_size floats): panel jc starts at out + jc * k,
   in the layout kiln_sgemm's own packing uses. */
void kiln_sgemm_packb(int64_t k, int64_t n, const float *B, int64_t bo, int64_t brs, int64_t bcs, float *out, int64_t outo, int32_t nthreads) {
  B += bo;
  out += outo;
  int64_t ncb = panel_cols(k);
  if ((double)k * (double)n < 1e5 || nthreads < 1) nthreads = 1;
  for (int64_t jc = 0; jc < n; jc += ncb) {
    int64_t nc = n - jc < ncb ? n - jc : ncb, nsl = (nc + NR - 1) / NR, nkc = (k + KC - 1) / KC;
    float *pb = out + jc * k;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t t = 0; t < nkc * nsl; t++) {
      int64_t pc = (t / nsl) * KC, s = t % nsl;
      int64_t kc = k - pc < KC ? k - pc : KC;
      int64_t w = nc - s * NR < NR ? nc - s * NR : NR;
      pack_b(B + pc * brs, brs, bcs, kc, jc + s * NR, w, pb + pc * nsl * NR + s * kc * NR);
    }
  }
}

/* Everything a GEMM item needs (the pool hands items a pointer to it). */
typedef struct {
  int64_t m, n, k, ldc, bs, mcs, nic, njc, per, nsl, nkc, jc, nc;
  float alpha, beta;
  const a_src *as;
  const float *B, *panel, *bias;
  const uint16_t *Bh; /* B as bfloat16 bits (then B is null) */
  int64_t brs, bcs;
  float *pb, *pas, *C;
  int32_t act;
  int shared_a, direct_a, epi;
  const epi_src *ep;
  _Atomic int failed;
} gemm_ctx;

/* Packing item t: a B sliver of one K slab (t < nkc * nsl), else a shared-A (row block, slab). */
static void gemm_pack_item(void *vctx, int64_t t) {
  gemm_ctx *g = (gemm_ctx *)vctx;
  int64_t nb = g->pb ? g->nkc * g->nsl : 0;
  if (t < nb) {
    int64_t pc = (t / g->nsl) * KC, s = t % g->nsl;
    int64_t kc = g->k - pc < KC ? g->k - pc : KC;
    int64_t w = g->nc - s * NR < NR ? g->nc - s * NR : NR;
    if (g->Bh) pack_b_bf16(g->Bh + pc * g->brs, g->brs, g->bcs, kc, g->jc + s * NR, w, g->pb + pc * g->nsl * NR + s * kc * NR);
    else pack_b(g->B + pc * g->brs, g->brs, g->bcs, kc, g->jc + s * NR, w, g->pb + pc * g->nsl * NR + s * kc * NR);
    return;
  }
  /* Shared A: block ic's slab pc at pas + ic * k + pc * mcb (mcb = the block's padded rows). */
  t -= nb;
  int64_t ic = (t / g->nkc) * g->mcs, pc = (t % g->nkc) * KC;
  int64_t mc = g->m - ic < g->mcs ? g->m - ic : g->mcs, kc = g->k - pc < KC ? g->k - pc : KC;
  int64_t mcb = ((mc + MR - 1) / MR) * MR;
  pack_a(g->as, ic, pc, mc, kc, g->pas + ic * g->k + pc * mcb);
}

/* Compute item it: row block it / njc times the column slivers of range it % njc, all K slabs. */
static void gemm_compute_item(void *vctx, int64_t it) {
  gemm_ctx *g = (gemm_ctx *)vctx;
  const a_src *as = g->as;
  const int64_t k = g->k, ldc = g->ldc, jc = g->jc, nc = g->nc, bs = g->bs;
  const float alpha = g->alpha, beta = g->beta;
  float *pa = 0;
  if (!g->shared_a && !g->direct_a) {
    pa = grow(&tls_a, &tls_a_len, g->mcs * (k < KC ? k : KC));
    if (!pa) { atomic_store(&g->failed, 1); return; }
  }
  float tile[MR * NR] __attribute__((aligned(64)));
  int64_t ic = (it / g->njc) * g->mcs;
  int64_t s0 = (it % g->njc) * g->per, s1 = s0 + g->per < g->nsl ? s0 + g->per : g->nsl;
  int64_t mc = g->m - ic < g->mcs ? g->m - ic : g->mcs;
  int64_t mcb = ((mc + MR - 1) / MR) * MR;
  for (int64_t pc = 0; pc < k; pc += KC) {
    int64_t kc = k - pc < KC ? k - pc : KC;
    int first = pc == 0, last = pc + kc >= k;
    const float *slab = g->panel + pc * g->nsl * NR;
    const float *ablk = 0;
    if (g->shared_a) ablk = g->pas + ic * k + pc * mcb;
    else if (!g->direct_a) { pack_a(as, ic, pc, mc, kc, pa); ablk = pa; }
    for (int64_t s = s0; s < s1; s++) {
      int64_t j0 = s * NR;
      int64_t w = nc - j0 < NR ? nc - j0 : NR;
      for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        int64_t h = mc - i0 < MR ? mc - i0 : MR;
        float *ct = g->C + (ic + i0) * ldc + jc + j0;
        const float *bsl = slab + s * kc * NR;
        int full = h == MR && w == NR && alpha == 1.0f && (!first || beta == 0.0f);
        int mode = full ? (first ? 0 : 1) : 2;
        if (g->direct_a) micro(kc, as->a + (ic + i0) * as->ars + pc, as->ars, 1, h, bsl, ct, ldc, mode, tile);
        else micro(kc, ablk + i0 * kc, 1, MR, MR, bsl, ct, ldc, mode, tile);
        if (!full) store_tile(tile, h, w, ct, ldc, alpha, beta, first);
      }
    }
    /* The epilogue runs once the item's block of C is final, row by row over all its columns:
       per 16-wide tile row, GELU's dependent exp / divide / polynomial chain left the core
       waiting (latency-bound, ~130 cycles per 8 floats); a long row keeps it busy. The block
       (at most MC rows x the item's columns) is still in L1/L2. */
    if (last && g->epi) {
      int64_t c0 = s0 * NR, c1 = s1 * NR < nc ? s1 * NR : nc;
      const float *bias = g->bias ? g->bias + (jc + c0) * bs : 0;
      for (int64_t r = 0; r < mc; r++) finish_row(g->C + (ic + r) * ldc + jc + c0, c1 - c0, bias, bs, g->act, g->ep, ic + r, jc + c0);
    }
  }
}

static int32_t gemm_core(int64_t m, int64_t n, int64_t k, float alpha, const a_src *as,
                         const float *B, const uint16_t *Bh, int64_t brs, int64_t bcs, const float *PB,
                         float beta, float *C, int64_t ldc, const float *bias, int64_t bs, int32_t act,
                         const epi_src *ep, int32_t nthreads) {
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0 || alpha == 0.0f) { epilogue_only(m, n, beta, C, ldc, bias, bs, act, ep); return 0; }
  /* Below ~2 MFLOP waking a worker costs more than it saves. */
  if ((double)m * (double)n * (double)k < 1e6 || nthreads < 1) nthreads = 1;
  int64_t ncb = panel_cols(k);
  int64_t ncmax = n < ncb ? n : ncb;
  int64_t nslmax = (ncmax + NR - 1) / NR;
  int64_t nkc = (k + KC - 1) / KC;
  /* Row blocks of at most MC rows, as even as MR allows and a multiple of the thread count when
     there are enough: 1024 rows on 2 threads as 8 x 144 left one thread 576 rows and the other 448. */
  int64_t nic = (m + MC - 1) / MC;
  if (nthreads > 1 && nic >= nthreads) nic = (nic + nthreads - 1) / nthreads * nthreads;
  int64_t mrows = (m + MR - 1) / MR;
  int64_t mcs = (mrows + nic - 1) / nic * MR;
  nic = (m + mcs - 1) / mcs;
  int64_t mpad = ((m + MR - 1) / MR) * MR;
  /* Few row blocks: the column-split items would each repack the same A, so A is packed once. */
  int shared_a = nic < 2 * nthreads && nthreads > 1;
  /* A row-major activation with few row blocks is read in place (no packing): packing it would
     take a separate pass (shared) or a copy per column item, for an A that stays in L1/L2 anyway. */
  int direct_a = !as->conv && as->acs == 1 && (shared_a || nic == 1) && KILN_DIRECT_A;
  if (direct_a) shared_a = 0;
  gemm_ctx g;
  memset(&g, 0, sizeof g);
  g.m = m; g.n = n; g.k = k; g.ldc = ldc; g.bs = bs; g.mcs = mcs; g.nic = nic; g.nkc = nkc;
  g.alpha = alpha; g.beta = beta; g.as = as; g.B = B; g.Bh = Bh; g.brs = brs; g.bcs = bcs; g.bias = bias;
  g.C = C; g.act = act; g.shared_a = shared_a; g.direct_a = direct_a; g.ep = ep;
#ifdef KILN_EPI
  g.epi = 1;
#else
  g.epi = bias != 0 || act != 0;
#endif
  atomic_init(&g.failed, 0);
  if (!PB) { g.pb = grow(&tls_b, &tls_b_len, k * nslmax * NR); if (!g.pb) return -1; }
  if (shared_a) { g.pas = grow(&tls_as, &tls_as_len, mpad * k); if (!g.pas) return -1; }
  int a_done = 0;
  for (int64_t jc = 0; jc < n; jc += ncb) {
    g.jc = jc;
    g.nc = n - jc < ncb ? n - jc : ncb;
    g.nsl = (g.nc + NR - 1) / NR;
    g.panel = PB ? PB + jc * k : g.pb;
    /* Items for every thread: with few row blocks the columns are split, into ~2 items per
       thread, so that a worker that starts late (or not at all) leaves a short tail (4 per thread
       measured ~10% slower on 64 x 512 x 512: each item rereads its A rows from L2). */
    g.njc = nic >= 2 * nthreads ? 1 : (2 * nthreads + nic - 1) / nic;
    if (g.njc > g.nsl) g.njc = g.nsl;
    g.per = (g.nsl + g.njc - 1) / g.njc;
    g.njc = (g.nsl + g.per - 1) / g.per;
    /* Packing (B slivers unless prepacked; a shared A once) completes before any compute item. */
    int64_t npack = (PB ? 0 : nkc * g.nsl) + (shared_a && !a_done ? nic * nkc : 0);
    if (npack > 0) pool_run(gemm_pack_item, &g, npack, nthreads);
    pool_run(gemm_compute_item, &g, nic * g.njc, nthreads);
    a_done = 1;
    if (atomic_load(&g.failed)) return -1;
  }
  return 0;
}

static void epi_init(epi_src *ep, const float *e0, int64_t e0o, int64_t e0l, const float *e1, int64_t e1o, int64_t e1l,
                     const float *e2, int64_t e2o, int64_t e2l, const float *e3, int64_t e3o, int64_t e3l) {
  ep->p[0] = e0 ? e0 + e0o : 0; ep->ld[0] = e0l;
  ep->p[1] = e1 ? e1 + e1o : 0; ep->ld[1] = e1l;
  ep->p[2] = e2 ? e2 + e2o : 0; ep->ld[2] = e2l;
  ep->p[3] = e3 ? e3 + e3o : 0; ep->ld[3] = e3l;
}

/* Returns 0 on success, -1 when a packing buffer cannot be allocated. PB (nullable): B prepacked
   by kiln_sgemm_packb, from element pbo (then B is not read). bbf16: B holds bfloat16 bits
   (widened as it is packed; not with PB). */
int32_t kiln_sgemm(int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t ao, int64_t ars, int64_t acs,
                   const void *B, int64_t bo, int64_t brs, int64_t bcs, int32_t bbf16, const float *PB, int64_t pbo,
                   float beta, float *C, int64_t co, int64_t ldc,
                   const float *bias, int64_t biaso, int64_t bs, int32_t act,
                   const float *e0, int64_t e0o, int64_t e0l, const float *e1, int64_t e1o, int64_t e1l,
                   const float *e2, int64_t e2o, int64_t e2l, const float *e3, int64_t e3o, int64_t e3l,
                   int32_t nthreads) {
  a_src as;
  memset(&as, 0, sizeof as);
  as.a = A + ao; as.ars = ars; as.acs = acs;
  epi_src ep;
  epi_init(&ep, e0, e0o, e0l, e1, e1o, e1l, e2, e2o, e2l, e3, e3o, e3l);
  const float *Bf = B && !bbf16 ? (const float *)B + bo : 0;
  const uint16_t *Bh = B && bbf16 && !PB ? (const uint16_t *)B + bo : 0;
  return gemm_core(m, n, k, alpha, &as, Bf, Bh, brs, bcs, PB ? PB + pbo : 0, beta, C + co, ldc, bias ? bias + biaso : 0, bs, act, &ep, nthreads);
}
`;

/** The base GEMM (no generated epilogue): what the eager kernels call. */
export const GEMM_C_SOURCE = gemmCSource();
