/**
 * C source of the native float32 convolution `kiln_sconv2d`, appended to the GEMM translation unit
 * (gemm-c.ts: it uses that file's MR x NR tile shape, KC slabs of a prepacked B, tile store,
 * epilogue rows and the work-sharing pool).
 *
 * Direct implicit GEMM (channels in unit stride, the channels_last case): rows are output pixels,
 * columns K = (kh, kw, c), as in the GEMM's im2col A, but A is never packed. Each pixel row is a
 * descriptor (base pointer, stride per kh, stride per kw), and the micro-kernel reads its six rows
 * straight from the image, one contiguous run at a time: a run is C channels of one (kh, kw) tap,
 * or, when the image's pixels are dense (pixel stride C) and dilation along W is 1, the KW * C
 * floats of a whole kernel row. A pixel whose window reaches into the padding gets its patch
 * gathered once per item into a zero-filled row of K floats (descriptor strides KW * C and C), so
 * interior and border pixels share one micro-kernel with no bounds checks in it.
 *   Why: the packed path spent 60% of the 7x7 stem (runs of 3 floats, a bounds check and a divide
 *   per tap) and 24% of the 3x3 body in pack_a_conv, per thread, on conv-stack's shapes.
 * Items as the GEMM's: (block of pixel rows, range of NR column slivers), claimed from the pool.
 * Inside an item: MR-pixel tile > sliver > all of K in registers (the packed B's KC slabs walked
 * inside the micro-kernel), so every output tile is stored once and its epilogue runs right
 * after, while in L1. Measured against the GEMM's order (slab > sliver > tile, B sliver in L1,
 * C += per extra slab) on conv-stack's layers: equal on the stem, 2-3% faster on the 3x3 body
 * (K 576: the 64-deep second slab no longer re-reads and re-writes the whole output). When the
 * epilogue is only a unit-stride bias and/or ReLU (conv2dBatchNorm's shift + ReLU), full tiles
 * get it in registers before their one store (the stem ~5% faster than a separate row pass).
 * Input with a strided channel dimension (NCHW) is first copied to dense NHWC (one pass, in
 * parallel rows); an output that is not channels_last (NCHW) gets each finished tile scattered
 * channel by channel. The packed implicit GEMM (gemm_core with an im2col a_src) remains for what
 * the direct path declines (a K so deep that the gathered patches would pass CONV_PATCH_MAX).
 */
export const CONV_C_SOURCE = String.raw`
/* Gathered patches are K floats per border pixel, per item: beyond this many floats per thread
   (4 Mi floats = 16 MiB, e.g. K = 21845 at MC rows) the packed path is used instead. */
#define CONV_PATCH_MAX ((int64_t)1 << 22)

typedef struct { const float *p; int64_t skh, skw; } conv_row;

typedef struct {
  const float *x;
  int64_t H, W, C, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, xsn, xsh, xsw;
  int64_t m, k, seglen, nkw;
  int64_t mcs, njc, per, nsl, nc, jc, ldc, bs;
  /* Output element (pixel (n, oh, ow), channel o) at out + n * osn + oh * osh + ow * osw + o * osc;
     uniform: rows of one leading dimension ldc = osw with osc 1 (channels_last), stored in place. */
  int64_t osn, osh, osw, osc;
  int uniform;
  /* Epilogue = unit-stride bias and/or ReLU only (no generated epilogue): fused into the store. */
  int fuse;
  const float *panel, *bias;
  float *out;
  int32_t act;
  int epi;
  const epi_src *ep;
  _Atomic int failed;
} conv_ctx;

static _Thread_local conv_row *tls_rows = 0;
static _Thread_local int64_t tls_rows_len = 0;
static _Thread_local float *tls_patch = 0;
static _Thread_local int64_t tls_patch_len = 0;
static _Atomic int64_t conv_direct_count = 0;

/* Calls that took the direct path (tests check that it ran). */
int64_t kiln_sconv2d_direct_count(void) { return atomic_load(&conv_direct_count); }

typedef int32_t v8i __attribute__((vector_size(32)));

/* max(x, 0) per lane, NaN kept (k_relu's semantics): lanes with x > 0 or x != x pass. */
static inline __attribute__((always_inline)) v8 conv_relu(v8 x) {
  v8 z = {0};
  v8i keep = (x > z) | (x != x);
  return (v8)((v8i)x & keep);
}

/* acc(MR x NR) = rows . B over all K columns (slab by slab of the packed panel: slab pc of sliver s
   at panel + pc * nsl * NR + s * kc * NR), then stored as micro() does (mode 0: C = acc, 2: t = acc).
   Rows past h repeat row h - 1. A run ends at a kernel-row (or tap) end or a slab end. */
static inline __attribute__((always_inline)) void conv_micro(int64_t k, const float *panel, int64_t nsl, int64_t s, int64_t seglen, int64_t nkw,
                                                             const conv_row *rows, int64_t h, float *restrict c, int64_t ldc, int mode, float *restrict t,
                                                             const float *fb, int frelu) {
  v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
  v8 c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
  const conv_row *r0 = rows, *r1 = rows + (h > 1), *r2 = rows + (h > 2 ? 2 : h - 1);
  const conv_row *r3 = rows + (h > 3 ? 3 : h - 1), *r4 = rows + (h > 4 ? 4 : h - 1), *r5 = rows + (h > 5 ? 5 : h - 1);
  if (mode != 2) for (int r = 0; r < MR; r++) { __builtin_prefetch(c + r * ldc, 1); __builtin_prefetch(c + r * ldc + NR - 1, 1); }
  int64_t kh = 0, kw = 0, off = 0;
  for (int64_t pc = 0; pc < k; pc += KC) {
    int64_t kc = k - pc < KC ? k - pc : KC;
    const float *restrict b = panel + pc * nsl * NR + s * kc * NR;
    for (int64_t p = 0; p < kc;) {
      int64_t run = seglen - off < kc - p ? seglen - off : kc - p;
#define KILN_AP(r) (r->p + kh * r->skh + kw * r->skw + off)
      const float *restrict a0 = KILN_AP(r0), *restrict a1 = KILN_AP(r1), *restrict a2 = KILN_AP(r2);
      const float *restrict a3 = KILN_AP(r3), *restrict a4 = KILN_AP(r4), *restrict a5 = KILN_AP(r5);
#undef KILN_AP
#pragma GCC unroll 4
      for (int64_t q = 0; q < run; q++) KILN_MK_STEP(q);
      p += run;
      off += run;
      if (off == seglen) {
        off = 0;
        if (++kw == nkw) { kw = 0; kh++; }
      }
    }
  }
  if (mode == 2) {
    v8 *o = (v8 *)t;
    o[0] = c00; o[1] = c01; o[2] = c10; o[3] = c11; o[4] = c20; o[5] = c21;
    o[6] = c30; o[7] = c31; o[8] = c40; o[9] = c41; o[10] = c50; o[11] = c51;
    return;
  }
  /* The fused epilogue of a full tile (mode 0): + bias[16] (unit stride), then ReLU (NaN kept, as
     k_relu), in registers before the single store. */
  if (fb) {
    v8 b0 = *(const v8u *)fb, b1 = *(const v8u *)(fb + 8);
    c00 += b0; c01 += b1; c10 += b0; c11 += b1; c20 += b0; c21 += b1;
    c30 += b0; c31 += b1; c40 += b0; c41 += b1; c50 += b0; c51 += b1;
  }
  if (frelu) {
    c00 = conv_relu(c00); c01 = conv_relu(c01); c10 = conv_relu(c10); c11 = conv_relu(c11);
    c20 = conv_relu(c20); c21 = conv_relu(c21); c30 = conv_relu(c30); c31 = conv_relu(c31);
    c40 = conv_relu(c40); c41 = conv_relu(c41); c50 = conv_relu(c50); c51 = conv_relu(c51);
  }
#define KILN_ROW(r, x0, x1) { v8u *q = (v8u *)(c + (r) * ldc); q[0] = x0; q[1] = x1; }
  KILN_ROW(0, c00, c01) KILN_ROW(1, c10, c11) KILN_ROW(2, c20, c21)
  KILN_ROW(3, c30, c31) KILN_ROW(4, c40, c41) KILN_ROW(5, c50, c51)
#undef KILN_ROW
}

/* Descriptors of pixel rows [i, i + mc): interior pixels point into the image, border pixels at
   their gathered, zero-padded patch in patch (one K-float row per border pixel, in order). */
static void conv_rows(const conv_ctx *g, int64_t i, int64_t mc, conv_row *rows, float *patch) {
  const int64_t C = g->C, KH = g->KH, KW = g->KW;
  int64_t nb = 0;
  for (int64_t r = 0; r < mc; r++) {
    int64_t pix = i + r, ow = pix % g->OW, t = pix / g->OW, oh = t % g->OH, n = t / g->OH;
    int64_t ih0 = oh * g->sh - g->ph, iw0 = ow * g->sw - g->pw;
    const float *xn = g->x + n * g->xsn;
    if (ih0 >= 0 && ih0 + (KH - 1) * g->dh < g->H && iw0 >= 0 && iw0 + (KW - 1) * g->dw < g->W) {
      rows[r].p = xn + ih0 * g->xsh + iw0 * g->xsw;
      rows[r].skh = g->dh * g->xsh;
      rows[r].skw = g->dw * g->xsw;
      continue;
    }
    float *o = patch + nb++ * g->k;
    /* Taps [kw0, kw1) of a kernel row fall inside the image; inline loops, not a memcpy per tap:
       the stem's taps are 3 floats, and per-tap library calls took 8% of it. */
    int64_t kw0 = iw0 >= 0 ? 0 : (-iw0 + g->dw - 1) / g->dw;
    /* (No division of a negative number: C truncates it towards zero, and a window starting at or
       just past the right edge would get a tap.) */
    int64_t kw1 = iw0 >= g->W ? 0 : iw0 + (KW - 1) * g->dw < g->W ? KW : (g->W - 1 - iw0) / g->dw + 1;
    if (kw1 < kw0) kw1 = kw0;
    for (int64_t kh = 0; kh < KH; kh++, o += KW * C) {
      int64_t ih = ih0 + kh * g->dh;
      if (ih < 0 || ih >= g->H || kw0 >= KW) {
        for (int64_t q = 0; q < KW * C; q++) o[q] = 0.0f;
        continue;
      }
      for (int64_t q = 0; q < kw0 * C; q++) o[q] = 0.0f;
      const float *src = xn + ih * g->xsh + (iw0 + kw0 * g->dw) * g->xsw;
      if (g->dw * g->xsw == C) {
        /* Dense pixels, dilation 1: the valid taps are one contiguous run. */
        for (int64_t q = 0; q < (kw1 - kw0) * C; q++) o[kw0 * C + q] = src[q];
      } else {
        for (int64_t kw = kw0; kw < kw1; kw++, src += g->dw * g->xsw)
          for (int64_t c = 0; c < C; c++) o[kw * C + c] = src[c];
      }
      for (int64_t q = kw1 * C; q < KW * C; q++) o[q] = 0.0f;
    }
    rows[r].p = o - g->k;
    /* The patch row is dense (kh, kw, c): a kernel row is KW * C floats, a tap C. With merged
       runs (nkw == 1) the per-kw stride is never used. */
    rows[r].skh = KW * C;
    rows[r].skw = C;
  }
}

static int64_t conv_border_rows(const conv_ctx *g, int64_t i, int64_t mc) {
  int64_t nb = 0;
  for (int64_t r = 0; r < mc; r++) {
    int64_t pix = i + r, ow = pix % g->OW, oh = (pix / g->OW) % g->OH;
    int64_t ih0 = oh * g->sh - g->ph, iw0 = ow * g->sw - g->pw;
    nb += !(ih0 >= 0 && ih0 + (g->KH - 1) * g->dh < g->H && iw0 >= 0 && iw0 + (g->KW - 1) * g->dw < g->W);
  }
  return nb;
}

/* Item it: pixel block it / njc x the column slivers of range it % njc, all K slabs. */
static void conv_item(void *vctx, int64_t it) {
  conv_ctx *g = (conv_ctx *)vctx;
  const int64_t k = g->k, ldc = g->ldc, nc = g->nc, jc = g->jc;
  int64_t ic = (it / g->njc) * g->mcs;
  int64_t s0 = (it % g->njc) * g->per, s1 = s0 + g->per < g->nsl ? s0 + g->per : g->nsl;
  int64_t mc = g->m - ic < g->mcs ? g->m - ic : g->mcs;
  if (tls_rows_len < mc) {
    free(tls_rows);
    tls_rows = (conv_row *)malloc((size_t)mc * sizeof(conv_row));
    tls_rows_len = tls_rows ? mc : 0;
  }
  int64_t nb = conv_border_rows(g, ic, mc);
  float *patch = nb ? grow(&tls_patch, &tls_patch_len, nb * k) : 0;
  if (!tls_rows || (nb && !patch)) { atomic_store(&g->failed, 1); return; }
  conv_row *rows = tls_rows;
  conv_rows(g, ic, mc, rows, patch);
  float tile[MR * NR] __attribute__((aligned(64)));
  int64_t c0 = s0 * NR, c1 = s1 * NR < nc ? s1 * NR : nc;
  const float *bias = g->bias ? g->bias + (jc + c0) * g->bs : 0;
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    int64_t h = mc - i0 < MR ? mc - i0 : MR;
    if (!g->uniform) {
      /* Strided output (NCHW): each tile is finished on the stack, then scattered channel by
         channel (a channel's pixels of one output row are contiguous in NCHW). */
      int64_t off[MR];
      for (int64_t r = 0; r < h; r++) {
        int64_t pix = ic + i0 + r, ow = pix % g->OW, t = pix / g->OW;
        off[r] = (t / g->OH) * g->osn + (t % g->OH) * g->osh + ow * g->osw;
      }
      for (int64_t s = s0; s < s1; s++) {
        int64_t j0 = s * NR;
        int64_t w = nc - j0 < NR ? nc - j0 : NR;
        conv_micro(k, g->panel, g->nsl, s, g->seglen, g->nkw, rows + i0, h, 0, 0, 2, tile, 0, 0);
        if (g->epi)
          for (int64_t r = 0; r < h; r++) finish_row(tile + r * NR, w, g->bias ? g->bias + (jc + j0) * g->bs : 0, g->bs, g->act, g->ep, ic + i0 + r, jc + j0);
        for (int64_t j = 0; j < w; j++) {
          float *oc = g->out + (jc + j0 + j) * g->osc;
          for (int64_t r = 0; r < h; r++) oc[off[r]] = tile[r * NR + j];
        }
      }
      continue;
    }
    float *crow = g->out + (ic + i0) * ldc + jc;
    if (g->fuse) {
      /* bias / ReLU only: full tiles get them in registers, partial ones right after their store. */
      for (int64_t s = s0; s < s1; s++) {
        int64_t j0 = s * NR;
        int64_t w = nc - j0 < NR ? nc - j0 : NR;
        const float *fb = g->bias ? g->bias + jc + j0 : 0;
        if (h == MR && w == NR) {
          conv_micro(k, g->panel, g->nsl, s, g->seglen, g->nkw, rows + i0, h, crow + j0, ldc, 0, tile, fb, g->act == 1);
          continue;
        }
        conv_micro(k, g->panel, g->nsl, s, g->seglen, g->nkw, rows + i0, h, 0, 0, 2, tile, 0, 0);
        store_tile(tile, h, w, crow + j0, ldc, 1.0f, 0.0f, 1);
        for (int64_t r = 0; r < h; r++) finish_row(crow + r * ldc + j0, w, fb, 1, g->act, g->ep, ic + i0 + r, jc + j0);
      }
      continue;
    }
    for (int64_t s = s0; s < s1; s++) {
      int64_t j0 = s * NR;
      int64_t w = nc - j0 < NR ? nc - j0 : NR;
      int full = h == MR && w == NR;
      conv_micro(k, g->panel, g->nsl, s, g->seglen, g->nkw, rows + i0, h, crow + j0, ldc, full ? 0 : 2, tile, 0, 0);
      if (!full) store_tile(tile, h, w, crow + j0, ldc, 1.0f, 0.0f, 1);
    }
    /* The tile's rows are final: the epilogue runs on them while they are in L1. */
    if (g->epi)
      for (int64_t r = 0; r < h; r++) finish_row(crow + r * ldc + c0, c1 - c0, bias, g->bs, g->act, g->ep, ic + i0 + r, jc + c0);
  }
}

/* Copy of an image batch with strided channels (NCHW) into dense NHWC: item = one (n, h) row. */
typedef struct { const float *x; float *dst; int64_t H, W, C, xsn, xsh, xsw, xsc; } nhwc_ctx;

static void nhwc_item(void *vctx, int64_t it) {
  const nhwc_ctx *q = (const nhwc_ctx *)vctx;
  int64_t n = it / q->H, h = it % q->H;
  const float *src = q->x + n * q->xsn + h * q->xsh;
  float *dst = q->dst + it * q->W * q->C;
  /* Channel-outer: NCHW reads one contiguous image row per channel. */
  for (int64_t c = 0; c < q->C; c++)
    for (int64_t w = 0; w < q->W; w++) dst[w * q->C + c] = src[c * q->xsc + w * q->xsw];
}

/* The direct path over a prepacked weight; returns 1 when it does not apply (the caller packs). */
static int32_t conv_direct(const a_src *as, int64_t m, int64_t O, const float *PB, float *out, const int64_t os[4], int uniform,
                           const float *bias, int64_t bs, int32_t act, const epi_src *ep, int32_t nthreads) {
  const int64_t k = as->KH * as->KW * as->C;
  if (as->xsc != 1 || k <= 0) return 1;
  conv_ctx g;
  memset(&g, 0, sizeof g);
  g.x = as->a; g.H = as->H; g.W = as->W; g.C = as->C; g.OH = as->OH; g.OW = as->OW; g.KH = as->KH; g.KW = as->KW;
  g.sh = as->sh; g.sw = as->sw; g.ph = as->ph; g.pw = as->pw; g.dh = as->dh; g.dw = as->dw;
  g.xsn = as->xsn; g.xsh = as->xsh; g.xsw = as->xsw;
  g.m = m;
  g.k = k;
  /* Merged runs: a whole kernel row of dense pixels is one contiguous run of KW * C floats. */
  int merged = as->xsw == as->C && as->dw == 1;
  g.seglen = merged ? as->KW * as->C : as->C;
  g.nkw = merged ? 1 : as->KW;
  if ((double)g.m * (double)O * (double)k < 1e6 || nthreads < 1) nthreads = 1;
  int64_t nic = (g.m + MC - 1) / MC;
  if (nthreads > 1 && nic >= nthreads) nic = (nic + nthreads - 1) / nthreads * nthreads;
  int64_t mrows = (g.m + MR - 1) / MR;
  g.mcs = (mrows + nic - 1) / nic * MR;
  nic = (g.m + g.mcs - 1) / g.mcs;
  if (g.mcs * k > CONV_PATCH_MAX) return 1;
  g.ldc = os[2]; g.bs = bs; g.bias = bias; g.out = out; g.act = act; g.ep = ep;
  g.osn = os[0]; g.osh = os[1]; g.osw = os[2]; g.osc = os[3]; g.uniform = uniform;
#ifdef KILN_EPI
  g.epi = 1;
#else
  g.epi = bias != 0 || act != 0;
  g.fuse = g.epi && uniform && (bias == 0 || bs == 1) && (act == 0 || act == 1);
#endif
  atomic_init(&g.failed, 0);
  int64_t ncb = panel_cols(k);
  for (int64_t jc = 0; jc < O; jc += ncb) {
    g.jc = jc;
    g.nc = O - jc < ncb ? O - jc : ncb;
    g.nsl = (g.nc + NR - 1) / NR;
    g.panel = PB + jc * k;
    /* Few pixel blocks: the columns are split too, into ~2 items per thread (as gemm_core). */
    g.njc = nic >= 2 * nthreads ? 1 : (2 * nthreads + nic - 1) / nic;
    if (g.njc > g.nsl) g.njc = g.nsl;
    g.per = (g.nsl + g.njc - 1) / g.njc;
    g.njc = (g.nsl + g.per - 1) / g.per;
    pool_run(conv_item, &g, nic * g.njc, nthreads);
    if (atomic_load(&g.failed)) return -1;
  }
  atomic_fetch_add(&conv_direct_count, 1);
  return 0;
}

static _Thread_local float *tls_nhwc = 0;
static _Thread_local int64_t tls_nhwc_len = 0;

/* conv2d of x[N, H, W, C] (element strides xs*, from offset xo) with a prepacked weight PB
   (B[k, o] = weight[o, c, kh, kw] at k = (kh * KW + kw) * C + c, packed by kiln_sgemm_packb) into
   out (from offset oo; pixel (n, oh, ow), channel o at n * osn + oh * osh + ow * osw + o * osc),
   + bias[o], then act and the epilogue (rows = output pixels n, oh, ow; columns = channels).
   Returns 0; -1 when a buffer cannot be allocated; 2 when the output is not channels_last-uniform
   (osc 1, osh = OW * osw, osn = OH * osh) and the direct path does not apply (the caller then
   passes a channels_last scratch). */
int32_t kiln_sconv2d(int64_t N, int64_t H, int64_t W, int64_t C, const float *x, int64_t xo,
                     int64_t xsn, int64_t xsh, int64_t xsw, int64_t xsc,
                     int64_t O, int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                     int64_t OH, int64_t OW, const float *PB, int64_t pbo, float *out, int64_t oo,
                     int64_t osn, int64_t osh, int64_t osw, int64_t osc,
                     const float *bias, int64_t biaso, int64_t bs, int32_t act,
                     const float *e0, int64_t e0o, int64_t e0l, const float *e1, int64_t e1o, int64_t e1l,
                     const float *e2, int64_t e2o, int64_t e2l, const float *e3, int64_t e3o, int64_t e3l,
                     int32_t nthreads) {
  a_src as;
  memset(&as, 0, sizeof as);
  as.a = x + xo;
  as.H = H; as.W = W; as.C = C; as.OH = OH; as.OW = OW; as.KH = KH; as.KW = KW;
  as.sh = sh; as.sw = sw; as.ph = ph; as.pw = pw; as.dh = dh; as.dw = dw;
  as.xsn = xsn; as.xsh = xsh; as.xsw = xsw; as.xsc = xsc;
  epi_src ep;
  epi_init(&ep, e0, e0o, e0l, e1, e1o, e1l, e2, e2o, e2l, e3, e3o, e3l);
  const float *bp = bias ? bias + biaso : 0;
  int64_t m = N * OH * OW;
  if (m <= 0 || O <= 0) return 0;
  const int64_t os[4] = {osn, osh, osw, osc};
  int uniform = osc == 1 && (OH == 1 || osh == OW * osw) && (N == 1 || osn == OH * OW * osw);
  if (xsc != 1 && (double)N * H * W * C <= (double)CONV_PATCH_MAX * 4) {
    /* Channels strided (NCHW): a dense NHWC copy first (one pass over the input, cheap next to
       the convolution's O * KH * KW multiply-adds per input element), then the direct path. The
       copy is kept per calling thread (as the GEMM's packing buffers), so it is capped at 16 Mi
       floats (64 MiB); a larger input takes the packed path, which reads strided channels. */
    float *dst = grow(&tls_nhwc, &tls_nhwc_len, N * H * W * C);
    if (dst) {
      nhwc_ctx q = {as.a, dst, H, W, C, xsn, xsh, xsw, xsc};
      /* Below ~64 K floats the copy takes microseconds: not worth waking a worker. */
      pool_run(nhwc_item, &q, N * H, (double)N * H * W * C < 65536 ? 1 : nthreads);
      as.a = dst; as.xsn = H * W * C; as.xsh = W * C; as.xsw = C; as.xsc = 1;
    }
  }
  int32_t rc = conv_direct(&as, m, O, PB + pbo, out + oo, os, uniform, bp, bs, act, &ep, nthreads);
  if (rc != 1) return rc;
  if (!uniform) return 2;
  as.conv = 1;
  return gemm_core(m, O, KH * KW * C, 1.0f, &as, 0, 0, 0, 0, PB + pbo, 0.0f, out + oo, osw, bp, bs, act, &ep, nthreads);
}
`;
