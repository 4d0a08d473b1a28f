/**
 * C source of the native float32 GEMM (BLIS-style), built by so-cache.ts with the host's flags:
 *
 *   C[m, n] = act(alpha * A[m, k] . B[k, n] + beta * C + bias[n])
 *
 * - Operands are addressed through (offset, rowStride, colStride), so transposed and strided
 *   inputs are packed, never copied first; C is row-major with leading dimension ldc.
 * - Loops (Goto/BLIS): NC-wide column panels (the panel's B is packed for all of K, slab by slab,
 *   into NR-wide slivers, k-major, zero padded) > MC-tall row blocks > KC-deep slabs (A packed into
 *   MR-tall slivers) > NR slivers > MR x NR micro-tile.
 * - Micro-kernel 6 x 16: twelve 8-float vector accumulators + two B vectors + one broadcast A =
 *   15 of the 16 AVX2 registers (GCC vector extensions: AVX2/FMA with -march=native, SSE pairs
 *   elsewhere, NEON on arm64). Each k step is 12 FMAs on 2 B loads and 6 broadcasts.
 * - Blocking for a Zen 3 / Skylake class core: a KC x NR B sliver (256 x 16 x 4 B = 16 KiB) stays in
 *   the 32 KiB L1 while the A sliver streams; an MC x KC A block (144 x 256 x 4 B = 144 KiB) stays in
 *   the 512 KiB+ L2; a KC x N slab of B (1 MiB at N = 1024) streams from L2/L3. NC = 4096 caps the
 *   packed panel at 16 K floats per unit of K (a 151936-wide LM head is not packed whole).
 * - Threads (OpenMP): inside one parallel region per panel the threads pack B together (omp for
 *   over slivers, one barrier), then share out (row block x column range) items with dynamic
 *   scheduling and no further barrier; each thread packs its own A blocks into a thread-local
 *   buffer. Small products run on one thread
 *   (a parallel region costs a few microseconds).
 * - Accumulation is float32 with FMA (as PyTorch's CPU float32 GEMM). Epilogue (last K slab
 *   only): + bias[j] (any stride), then none / relu / gelu(erf) / gelu(tanh).
 */
export const GEMM_C_SOURCE = String.raw`
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MR 6
#define NR 16
#define KC 256
#define MC 144
#define NC 4096
#define PACK_MAX ((int64_t)1 << 24)

typedef float v8 __attribute__((vector_size(32)));

static _Thread_local float *tls_a = 0;
static _Thread_local int64_t tls_a_len = 0;
static _Thread_local float *tls_b = 0;
static _Thread_local int64_t tls_b_len = 0;

static float *grow(float **buf, int64_t *len, int64_t need) {
  if (*len < need) {
    free(*buf);
    *buf = (float *)aligned_alloc(64, (size_t)((need * 4 + 63) / 64 * 64));
    *len = *buf ? need : 0;
  }
  return *buf;
}

static void pack_b(const float *B, int64_t brs, int64_t bcs, int64_t kc, int64_t j0, int64_t w, float *out) {
  const float *base = B + j0 * bcs;
  if (w == NR && bcs == 1) {
    for (int64_t p = 0; p < kc; p++) memcpy(out + p * NR, base + p * brs, NR * sizeof(float));
    return;
  }
  for (int64_t p = 0; p < kc; p++)
    for (int64_t j = 0; j < NR; j++) out[p * NR + j] = j < w ? base[p * brs + j * bcs] : 0.0f;
}

static void pack_a(const float *A, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float *out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    int64_t h = mc - i0 < MR ? mc - i0 : MR;
    float *o = out + i0 * kc;
    const float *base = A + i0 * ars;
    if (h == MR && acs == 1) {
      for (int64_t r = 0; r < MR; r++) {
        const float *row = base + r * ars;
        for (int64_t p = 0; p < kc; p++) o[p * MR + r] = row[p];
      }
    } else {
      for (int64_t p = 0; p < kc; p++)
        for (int64_t r = 0; r < MR; r++) o[p * MR + r] = r < h ? base[r * ars + p * acs] : 0.0f;
    }
  }
}

static void micro(int64_t kc, const float *restrict a, const float *restrict b, float *restrict t) {
  v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
  v8 c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
  for (int64_t p = 0; p < kc; p++) {
    v8 b0 = *(const v8 *)b;
    v8 b1 = *(const v8 *)(b + 8);
    c00 += a[0] * b0; c01 += a[0] * b1;
    c10 += a[1] * b0; c11 += a[1] * b1;
    c20 += a[2] * b0; c21 += a[2] * b1;
    c30 += a[3] * b0; c31 += a[3] * b1;
    c40 += a[4] * b0; c41 += a[4] * b1;
    c50 += a[5] * b0; c51 += a[5] * b1;
    a += MR;
    b += NR;
  }
  v8 *o = (v8 *)t;
  o[0] = c00; o[1] = c01; o[2] = c10; o[3] = c11; o[4] = c20; o[5] = c21;
  o[6] = c30; o[7] = c31; o[8] = c40; o[9] = c41; o[10] = c50; o[11] = c51;
}

static inline float act_apply(float v, int32_t act) {
  switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case 3: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    default: return v;
  }
}

/* Writes one tile: first slab applies beta (beta == 0 overwrites), later slabs accumulate; the
   last slab adds the bias and applies the activation. */
static void store_tile(const float *t, int64_t h, int64_t w, float *c, int64_t ldc, float alpha, float beta,
                       int first, int last, const float *bias, int64_t bs, int32_t act) {
  for (int64_t r = 0; r < h; r++) {
    float *cr = c + r * ldc;
    const float *tr = t + r * NR;
    if (first && beta == 0.0f) for (int64_t j = 0; j < w; j++) cr[j] = alpha * tr[j];
    else if (first) for (int64_t j = 0; j < w; j++) cr[j] = alpha * tr[j] + beta * cr[j];
    else for (int64_t j = 0; j < w; j++) cr[j] += alpha * tr[j];
    if (last) {
      if (bias) for (int64_t j = 0; j < w; j++) cr[j] += bias[j * bs];
      if (act) for (int64_t j = 0; j < w; j++) cr[j] = act_apply(cr[j], act);
    }
  }
}

static void epilogue_only(int64_t m, int64_t n, float beta, float *C, int64_t ldc, const float *bias, int64_t bs, int32_t act) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float v = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
      if (bias) v += bias[j * bs];
      C[i * ldc + j] = act_apply(v, act);
    }
}

int32_t kiln_native_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* Returns 0 on success, -1 when a packing buffer cannot be allocated. */
int32_t kiln_sgemm(int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t ao, int64_t ars, int64_t acs,
                   const float *B, int64_t bo, int64_t brs, int64_t bcs,
                   float beta, float *C, int64_t co, int64_t ldc,
                   const float *bias, int64_t biaso, int64_t bs, int32_t act, int32_t nthreads) {
  if (m <= 0 || n <= 0) return 0;
  A += ao; B += bo; C += co;
  if (bias) bias += biaso;
  if (k <= 0 || alpha == 0.0f) { epilogue_only(m, n, beta, C, ldc, bias, bs, act); return 0; }
  /* Below ~2 MFLOP the fork/join of a parallel region costs more than it saves. */
  if ((double)m * (double)n * (double)k < 1e6 || nthreads < 1) nthreads = 1;
  /* The packed K x nc panel is capped at PACK_MAX floats (64 MiB): a deep K (a [1, 150000] row
     times a [150000, 1024] matrix) narrows the panel instead of packing gigabytes. */
  int64_t ncb = (PACK_MAX / k) / NR * NR;
  if (ncb < NR) ncb = NR;
  if (ncb > NC) ncb = NC;
  int64_t ncmax = n < ncb ? n : ncb;
  int64_t kcmax = k < KC ? k : KC;
  int64_t nslmax = (ncmax + NR - 1) / NR;
  /* The whole K x NC panel of B is packed up front (slab by slab), so that after one barrier the
     threads run independent items to the end: no barrier per K slab, which matters when the
     machine is oversubscribed and a descheduled thread would stall the others at every barrier. */
  float *pb = grow(&tls_b, &tls_b_len, k * nslmax * NR);
  if (!pb) return -1;
  int failed = 0;
  int64_t nkc = (k + KC - 1) / KC;
  int64_t nic = (m + MC - 1) / MC;
  for (int64_t jc = 0; jc < n; jc += ncb) {
    int64_t nc = n - jc < ncb ? n - jc : ncb;
    int64_t nsl = (nc + NR - 1) / NR;
    /* Enough items for every thread: split the columns when there are few row blocks. */
    int64_t njc = nic >= 2 * nthreads ? 1 : (2 * nthreads + nic - 1) / nic;
    if (njc > nsl) njc = nsl;
    int64_t per = (nsl + njc - 1) / njc;
    int64_t items = nic * njc;
#pragma omp parallel num_threads(nthreads)
    {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < nkc * nsl; t++) {
        int64_t pc = (t / nsl) * KC, s = t % nsl;
        int64_t kc = k - pc < KC ? k - pc : KC;
        int64_t w = nc - s * NR < NR ? nc - s * NR : NR;
        pack_b(B + pc * brs, brs, bcs, kc, jc + s * NR, w, pb + pc * nsl * NR + s * kc * NR);
      }
      float *pa = grow(&tls_a, &tls_a_len, MC * kcmax);
      float tile[MR * NR] __attribute__((aligned(64)));
      if (!pa) {
#pragma omp atomic write
        failed = 1;
      }
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t it = 0; it < items; it++) {
        if (!pa) continue;
        int64_t ic = (it / njc) * MC;
        int64_t s0 = (it % njc) * per, s1 = s0 + per < nsl ? s0 + per : nsl;
        int64_t mc = m - ic < MC ? m - ic : MC;
        for (int64_t pc = 0; pc < k; pc += KC) {
          int64_t kc = k - pc < KC ? k - pc : KC;
          int first = pc == 0, last = pc + kc >= k;
          const float *slab = pb + pc * nsl * NR;
          pack_a(A + ic * ars + pc * acs, ars, acs, mc, kc, pa);
          for (int64_t s = s0; s < s1; s++) {
            int64_t j0 = s * NR;
            int64_t w = nc - j0 < NR ? nc - j0 : NR;
            for (int64_t i0 = 0; i0 < mc; i0 += MR) {
              int64_t h = mc - i0 < MR ? mc - i0 : MR;
              micro(kc, pa + i0 * kc, slab + s * kc * NR, tile);
              store_tile(tile, h, w, C + (ic + i0) * ldc + jc + j0, ldc, alpha, beta, first, last,
                         bias ? bias + (jc + j0) * bs : 0, bs, act);
            }
          }
        }
      }
    }
    if (failed) return -1;
  }
  return 0;
}
`;
