/**
 * C source of the cpu whole-step decoder (issue #17): a dense decoder's batch-1 decode step (every
 * layer and the LM head) as one native call, in place of the ~230 native calls an eager step
 * makes from JavaScript. On the H200 machine's 16-core host a bfloat16 Qwen3-0.6B step took about
 * 22 ms against a memory bound of about 12: the host's JavaScript between the calls (~6.4 ms of the
 * main thread) and each call's pool job start and tail (~22 us on 16 threads) were the larger part
 * of the gap (docs/cpu.md, sessions 19-22).
 *
 * Batches of up to four sequences (the GEMV's rows: each weight is read once for all of them) run
 * the same way; the decode runner pads a batch of 3 to its bucket of 4 (padding rows write nothing).
 *
 * The step reuses the eager kernels' C, composed into one object: the GEMV (gemv-c.ts: gv_item,
 * the qkv and gated forms), paged attention (paged-c.ts: pa_plan, pa_item, pa_split_item,
 * pa_merge), the row kernels (rows-c.ts: kiln_add_rms, rw_norm_rope) and float32 rmsNorm (ops-c.ts:
 * kiln_norm). Each output element is
 * computed by the same function, in the same order, with the same work split rules for the same
 * thread count as the eager step, so the logits and the cache rows are the eager step's bits
 * (test/cpu-decode-step.test.ts checks that).
 *
 * Work is a list of phases (embed + first norm; per layer q/k/v, q/k norm + rotary + cache write,
 * attention, its merge when the keys are split, o, gate/up, down; the LM head), each a number of
 * items. One pool job (pool-c.ts) runs a participant on every thread; participants claim a phase's
 * items from its counter, and the thread that finishes a phase's last item runs the phase's serial
 * tail (a residual add + RMSNorm, the next GEMV's copy of x) and then opens the next phase by
 * raising `epoch`. Nothing waits for a particular thread: a worker that never joins leaves its
 * share to the others (the caller alone runs the whole step), which a fixed-team barrier could not
 * survive. Atomics: a finisher's `done` increment is acq_rel, so the last one sees every item's
 * writes; `epoch` is stored with release and read with acquire.
 */
import { GEMV_C_SOURCE, GEMV_MAX_ROWS } from './gemv-c.js';
import { OPS_C_SOURCE } from './ops-c.js';
import { PAGED_C_SOURCE } from './paged-c.js';
import { ROWS_C_SOURCE } from './rows-c.js';

/** Indices of kiln_ds_new's int64 dims. */
export const DS_DIMS = ['hidden', 'heads', 'kvHeads', 'headDim', 'intermediate', 'layers', 'vocab', 'blockSize', 'numBlocks', 'maxBlocks', 'maxPositions', 'bf16'] as const;

/** Pointers per layer in the address table, in this order; then DS_GLOBAL_PTRS. */
export const DS_LAYER_PTRS = ['inputNorm', 'q', 'k', 'v', 'qNorm', 'kNorm', 'o', 'postNorm', 'gate', 'up', 'down', 'keys', 'values'] as const;
export const DS_GLOBAL_PTRS = ['embed', 'finalNorm', 'lmHead', 'cos', 'sin'] as const;

/** The phases' kinds, by their DK_ codes (kiln_ds_step's trace). */
export const DS_PHASE_KINDS = ['embed', 'qkv', 'qkNorm', 'attention', 'merge', 'o', 'gateUp', 'down', 'lmHead'] as const;

/** kiln_ds_step's return codes for bad inputs (the bad row goes to bad[0], a bad table entry's index to bad[1]). */
export const DS_ERRORS = { oom: -1, id: -2, position: -3, slot: -4, length: -5, table: -6, batch: -7 } as const;

/** The most sequences a step takes (DS_MAX_ROWS: the GEMV's rows). */
export const DS_MAX_ROWS = GEMV_MAX_ROWS;

export const DECODE_STEP_C_SOURCE = String.raw`
${GEMV_C_SOURCE}
${PAGED_C_SOURCE}
${ROWS_C_SOURCE}
${OPS_C_SOURCE}

enum { DS_H, DS_HEADS, DS_KVH, DS_D, DS_I, DS_L, DS_VOCAB, DS_BS, DS_NBLOCKS, DS_MAXB, DS_MAXPOS, DS_BF16, DS_NDIMS };
enum { DP_IN_NORM, DP_Q, DP_K, DP_V, DP_QN, DP_KN, DP_O, DP_POST, DP_GATE, DP_UP, DP_DOWN, DP_KC, DP_VC, DP_PER_LAYER };
enum { DG_EMBED, DG_FINAL, DG_HEAD, DG_COS, DG_SIN };
enum { DK_EMBED, DK_QKV, DK_QKNORM, DK_ATTN, DK_MERGE, DK_O, DK_GATEUP, DK_DOWN, DK_HEAD };
/* The most tokens a step takes: the GEMV's rows (GEMV_MAX_ROWS in gemv-c.ts), so each weight is
   read once for all of them, as by the eager step's calls. */
#define DS_MAX_ROWS ${GEMV_MAX_ROWS}

/* A phase's claim and completion counters, each on its own cache line. */
typedef struct {
  _Alignas(64) _Atomic int64_t next;
  _Alignas(64) _Atomic int64_t done;
} ds_count;

typedef struct {
  int64_t H, heads, kvh, D, I, L, vocab, bs, nblocks, maxb, maxpos;
  int32_t bf16;
  double eps;
  float scale;
  int64_t esz;
  /* The step's inputs and the address table (set per step): B tokens, one per sequence (their
     lengths and block tables live in the attention template, the logits in the LM head's). */
  void *const *p;
  int64_t B;
  const int64_t *ids, *pos, *slots;
  /* Rows of the model's dtype, DS_MAX_ROWS of each. */
  void *h, *normed, *q, *k, *v, *qr, *att, *o, *act, *dn;
  /* The next GEMV's x as gv_fill_x makes it (capacity for the widest input). */
  float *xbuf;
  float *gu;
  float *pa_buf; int64_t pa_cap;
  /* Phases of the step. */
  int32_t nphase, cap_phase;
  int32_t *kind, *layer;
  int64_t *n;
  ds_count *cnt;
  /* Measurement (null: off): per phase kind, layer, the ns it opened and the ns its last item ended. */
  int64_t *trace;
  /* Templates: the GEMVs' contexts without their weight, attention's without its caches. */
  gv_ctx g_qkv[3]; int64_t qkv_first[4];
  gv_ctx g_o, g_down, g_head;
  gv_gated_ctx g_gated;
  pa_ctx pa;
  _Alignas(64) _Atomic int32_t epoch;
  char pad[60];
} ds_ctx;

static inline void *ds_lp(const ds_ctx *c, int64_t l, int w) { return c->p[l * DP_PER_LAYER + w]; }
static inline void *ds_gp(const ds_ctx *c, int w) { return c->p[c->L * DP_PER_LAYER + w]; }

void kiln_ds_free(void *vc) {
  ds_ctx *c = (ds_ctx *)vc;
  if (!c) return;
  free(c->h); free(c->xbuf); free(c->gu); free(c->pa_buf);
  free(c->kind); free(c->layer); free(c->n); free(c->cnt);
  free(c);
}

/* A decoder's scratch for dims (DS_NDIMS int64, see DS_DIMS in decode-step-c.ts); 0 when out of memory. */
void *kiln_ds_new(const int64_t *dims, double eps, float scale) {
  /* 64-byte aligned (calloc's 16 would not do: the counters and epoch are cache-line aligned
     members, and the compiler may copy or clear them with aligned vector stores). */
  const size_t csize = (sizeof(ds_ctx) + 63) & ~(size_t)63;
  ds_ctx *c = (ds_ctx *)aligned_alloc(64, csize);
  if (!c) return 0;
  memset(c, 0, csize);
  c->H = dims[DS_H]; c->heads = dims[DS_HEADS]; c->kvh = dims[DS_KVH]; c->D = dims[DS_D]; c->I = dims[DS_I];
  c->L = dims[DS_L]; c->vocab = dims[DS_VOCAB]; c->bs = dims[DS_BS]; c->nblocks = dims[DS_NBLOCKS];
  c->maxb = dims[DS_MAXB]; c->maxpos = dims[DS_MAXPOS]; c->bf16 = (int32_t)dims[DS_BF16];
  c->eps = eps; c->scale = scale; c->esz = c->bf16 ? 2 : 4;
  const int64_t qd = c->heads * c->D, kd = c->kvh * c->D;
  int64_t widest = c->H > qd ? c->H : qd;
  if (c->I > widest) widest = c->I;
  /* One block of rows: h, normed, q, k, v, qr, att, o, act, dn (64-byte aligned each). */
  const int64_t R = DS_MAX_ROWS, sizes[10] = {R * c->H, R * c->H, R * qd, R * kd, R * kd, R * qd, R * qd, R * c->H, R * c->I, R * c->H};
  int64_t total = 0;
  for (int i = 0; i < 10; i++) total += (sizes[i] * c->esz + 63) & ~(int64_t)63;
  char *rows = (char *)aligned_alloc(64, (size_t)total);
  void **dst[10] = {&c->h, &c->normed, &c->q, &c->k, &c->v, &c->qr, &c->att, &c->o, &c->act, &c->dn};
  if (rows) {
    memset(rows, 0, (size_t)total);
    for (int i = 0; i < 10; i++) { *dst[i] = rows; rows += (sizes[i] * c->esz + 63) & ~(int64_t)63; }
  }
  c->xbuf = (float *)aligned_alloc(64, (size_t)((gv_x_floats(R, widest, 1) * 4 + 64 + 63) & ~(int64_t)63));
  c->gu = (float *)aligned_alloc(64, (size_t)((2 * R * c->I * 4 + 63) & ~(int64_t)63));
  c->cap_phase = (int32_t)(c->L * 7 + 2);
  c->kind = (int32_t *)malloc(sizeof(int32_t) * (size_t)c->cap_phase);
  c->layer = (int32_t *)malloc(sizeof(int32_t) * (size_t)c->cap_phase);
  c->n = (int64_t *)malloc(sizeof(int64_t) * (size_t)c->cap_phase);
  c->cnt = (ds_count *)aligned_alloc(64, sizeof(ds_count) * (size_t)c->cap_phase);
  if (!rows || !c->xbuf || !c->gu || !c->kind || !c->layer || !c->n || !c->cnt) { kiln_ds_free(c); return 0; }
  return c;
}

/* The next GEMV's x from B rows of k of the model's dtype (the copy kiln_gemv makes per call). */
static void ds_prep_x(ds_ctx *c, const void *src, int64_t k) {
  gv_ctx t;
  gv_fill_x(&t, c->xbuf, c->B, k, src, 0, k, c->bf16, c->bf16);
  c->g_qkv[0].x = c->g_qkv[1].x = c->g_qkv[2].x = c->g_o.x = c->g_gated.g.x = c->g_gated.u.x = c->g_down.x = c->g_head.x = t.x;
  c->g_qkv[0].xs = c->g_qkv[1].xs = c->g_qkv[2].xs = c->g_o.xs = c->g_gated.g.xs = c->g_gated.u.xs = c->g_down.xs = c->g_head.xs = t.xs;
  c->g_qkv[0].xb = c->g_qkv[1].xb = c->g_qkv[2].xb = c->g_o.xb = c->g_gated.g.xb = c->g_gated.u.xb = c->g_down.xb = c->g_head.xb = t.xb;
}

/* A GEMV template y = x W^T (W [n, k] dense, set per layer) as kiln_gemv sets one up for a call
   that streams wbytes: the same item size for the same threads, so the same rows per item. */
static int64_t ds_gemv(gv_ctx *g, int64_t m, int64_t n, int64_t k, void *y, int32_t ybf16, int32_t flags, int64_t wbytes, int32_t nthreads, int32_t bf16) {
  memset(g, 0, sizeof *g);
  g->m = m; g->n = n; g->k = k; g->ldw = k; g->bf16 = bf16; g->y = y; g->ldy = n; g->ybf16 = ybf16;
  g->stream = (flags & GV_STREAM) != 0;
  g->rows_per_item = gv_rows_per_item(n, k * (bf16 ? 2 : 4), flags, gv_call_threads(wbytes, nthreads));
  return (n + g->rows_per_item - 1) / g->rows_per_item;
}

static void ds_add_phase(ds_ctx *c, int32_t kind, int32_t layer, int64_t n) {
  const int32_t p = c->nphase++;
  c->kind[p] = kind; c->layer[p] = layer; c->n[p] = n;
  atomic_init(&c->cnt[p].next, 0);
  atomic_init(&c->cnt[p].done, 0);
}

/* Item it of a GEMV template on weight w (the templates are shared; each item runs on a copy). */
static inline void ds_gemv_item(const gv_ctx *tmpl, const void *w, int64_t it) {
  gv_ctx g = *tmpl;
  g.w = w;
  gv_item(&g, it);
}

static void ds_item(ds_ctx *c, int32_t p, int64_t it) {
  const int64_t l = c->layer[p];
  switch (c->kind[p]) {
    case DK_EMBED: {
      const int64_t rb = c->H * c->esz;
      for (int64_t b = 0; b < c->B; b++) memcpy((char *)c->h + b * rb, (const char *)ds_gp(c, DG_EMBED) + c->ids[b] * rb, (size_t)rb);
      /* The eager step's first norm is rmsNorm: float32 through ops-c.ts's kiln_norm (a float32
         scale), bfloat16 through kiln_add_rms. */
      if (c->bf16) kiln_add_rms(c->B, c->H, c->h, 0, ds_lp(c, 0, DP_IN_NORM), c->eps, c->normed, 0, 1);
      else kiln_norm(1, c->B, c->H, (const float *)c->h, 0, (const float *)ds_lp(c, 0, DP_IN_NORM), 0, 0, 0, c->eps, (float *)c->normed, 0, 1);
      ds_prep_x(c, c->normed, c->H);
      break;
    }
    case DK_QKV: {
      const int w = it < c->qkv_first[1] ? 0 : it < c->qkv_first[2] ? 1 : 2;
      ds_gemv_item(&c->g_qkv[w], ds_lp(c, l, DP_Q + w), it - c->qkv_first[w]);
      break;
    }
    case DK_QKNORM: {
      /* kiln_qk_norm_rope_cache, one head of one token per item: the token's q heads, then its k
         heads into the key cache's slot (the first k item also copies the v row into the value
         cache's; a slot < 0, a padding row, writes nothing). */
      const int64_t D = c->D, row = c->kvh * D, per = c->heads + c->kvh, tok = it / per, r = it % per, cs = c->pos[tok] * D;
      double t[D > 0 ? D : 1];
      if (r < c->heads) {
        rw_norm_rope(D, c->q, (tok * c->heads + r) * D, ds_lp(c, l, DP_QN), c->eps, ds_gp(c, DG_COS), ds_gp(c, DG_SIN), cs, c->qr, (tok * c->heads + r) * D, c->bf16, t);
      } else if (c->slots[tok] >= 0) {
        const int64_t h = r - c->heads, slot = c->slots[tok];
        rw_norm_rope(D, c->k, tok * row + h * D, ds_lp(c, l, DP_KN), c->eps, ds_gp(c, DG_COS), ds_gp(c, DG_SIN), cs, ds_lp(c, l, DP_KC), slot * row + h * D, c->bf16, t);
        if (h == 0) memcpy((char *)ds_lp(c, l, DP_VC) + slot * row * c->esz, (const char *)c->v + tok * row * c->esz, (size_t)(row * c->esz));
      }
      break;
    }
    case DK_ATTN: {
      pa_ctx a = c->pa;
      a.kc = ds_lp(c, l, DP_KC);
      a.vc = ds_lp(c, l, DP_VC);
      if (a.nsplit > 1) pa_split_item(&a, it);
      else pa_item(&a, it);
      break;
    }
    case DK_MERGE: pa_merge(&c->pa, it); break;
    case DK_O: ds_gemv_item(&c->g_o, ds_lp(c, l, DP_O), it); break;
    case DK_GATEUP: {
      gv_gated_ctx g = c->g_gated;
      g.g.w = ds_lp(c, l, DP_GATE);
      g.u.w = ds_lp(c, l, DP_UP);
      gv_gated_item(&g, it);
      break;
    }
    case DK_DOWN: ds_gemv_item(&c->g_down, ds_lp(c, l, DP_DOWN), it); break;
    case DK_HEAD: ds_gemv_item(&c->g_head, ds_gp(c, DG_HEAD), it); break;
  }
}

/* What runs once a phase's items are all done, before the next phase opens. */
static void ds_tail(ds_ctx *c, int32_t p) {
  const int64_t l = c->layer[p];
  switch (c->kind[p]) {
    case DK_ATTN:
      if (c->pa.nsplit == 1) ds_prep_x(c, c->att, c->heads * c->D);
      break;
    case DK_MERGE: ds_prep_x(c, c->att, c->heads * c->D); break;
    case DK_O:
      /* llm.addRmsNorm(o, residual): the sum (rounded) replaces the residual in place. */
      kiln_add_rms(c->B, c->H, c->o, c->h, ds_lp(c, l, DP_POST), c->eps, c->normed, c->h, c->bf16);
      ds_prep_x(c, c->normed, c->H);
      break;
    case DK_GATEUP: ds_prep_x(c, c->act, c->I); break;
    case DK_DOWN: {
      const void *w = l + 1 < c->L ? ds_lp(c, l + 1, DP_IN_NORM) : ds_gp(c, DG_FINAL);
      kiln_add_rms(c->B, c->H, c->dn, c->h, w, c->eps, c->normed, c->h, c->bf16);
      ds_prep_x(c, c->normed, c->H);
      break;
    }
    default: break;
  }
}

/* One thread's share of the step: every phase in order, claiming items until none is left. */
static void ds_participant(void *vctx, int64_t unused) {
  (void)unused;
  ds_ctx *c = (ds_ctx *)vctx;
  for (int32_t p = 0; p < c->nphase; p++) {
    int spins = 0;
    while (atomic_load_explicit(&c->epoch, memory_order_acquire) < p) {
      pool_relax();
      if ((++spins & 1023) == 0) sched_yield();
    }
    const int64_t n = c->n[p];
    for (;;) {
      const int64_t it = atomic_fetch_add_explicit(&c->cnt[p].next, 1, memory_order_relaxed);
      if (it >= n) break;
      ds_item(c, p, it);
      if (atomic_fetch_add_explicit(&c->cnt[p].done, 1, memory_order_acq_rel) + 1 == n) {
        if (c->trace) c->trace[1 + 4 * p + 3] = pool_now_ns();
        ds_tail(c, p);
        if (c->trace && p + 1 < c->nphase) c->trace[1 + 4 * (p + 1) + 2] = pool_now_ns();
        atomic_store_explicit(&c->epoch, p + 1, memory_order_release);
      }
    }
  }
}

/* One decode step of B <= DS_MAX_ROWS tokens, one per sequence: token ids[b] at position pos[b]
   (cache slot slots[b], < 0: a padding row that writes nothing; lens[b] keys after the write, 0:
   none; block table row tables + b * maxBlocks) into logits [B, vocab] of the model's dtype.
   p: the address table (DS_LAYER_PTRS per layer, then DS_GLOBAL_PTRS). flags: kiln_gemv's;
   max_split / vec_rows: kiln_paged_attention's. trace (null: off; 1 + 4 x the phases int64): the
   phase count, then per phase its DK_ kind, its layer, the ns it opened and the ns its last item
   ended (CLOCK_MONOTONIC). Returns the key ranges attention split into (1: unsplit), or a
   DS_ERRORS code (nothing computed) with the bad row in bad[0] and a bad table entry's index in
   bad[1]. */
int32_t kiln_ds_step(void *vc, void *const *p, int64_t B, const int64_t *ids, const int64_t *pos, const int64_t *slots, const int32_t *lens, const int32_t *tables,
                     void *logits, int32_t nthreads, int32_t flags, int32_t max_split, int32_t vec_rows, int64_t *bad, int64_t *trace) {
  ds_ctx *c = (ds_ctx *)vc;
  if (B < 1 || B > DS_MAX_ROWS) return -7;
  for (int64_t b = 0; b < B; b++) {
    bad[0] = b;
    if (ids[b] < 0 || ids[b] >= c->vocab) return -2;
    if (pos[b] < 0 || pos[b] >= c->maxpos) return -3;
    if (lens[b] < 0 || lens[b] > c->maxb * c->bs) return -5;
    for (int64_t k = 0; k < (lens[b] + c->bs - 1) / c->bs; k++) {
      const int32_t e = tables[b * c->maxb + k];
      if (e < 0 || e >= c->nblocks) { bad[1] = k; return -6; }
    }
    if (slots[b] >= c->nblocks * c->bs) return -4;
  }
  if (nthreads < 1) nthreads = 1;
  c->p = p; c->B = B; c->ids = ids; c->pos = pos; c->slots = slots;
  const int32_t bf = c->bf16;
  const int64_t esz = c->esz, H = c->H, qd = c->heads * c->D, kd = c->kvh * c->D;
  /* GEMV templates, as the eager step's calls would set them up. */
  const int64_t nq = ds_gemv(&c->g_qkv[0], B, qd, H, c->q, bf, flags, (qd + 2 * kd) * H * esz, nthreads, bf);
  const int64_t nk = ds_gemv(&c->g_qkv[1], B, kd, H, c->k, bf, flags, (qd + 2 * kd) * H * esz, nthreads, bf);
  const int64_t nv = ds_gemv(&c->g_qkv[2], B, kd, H, c->v, bf, flags, (qd + 2 * kd) * H * esz, nthreads, bf);
  c->qkv_first[0] = 0; c->qkv_first[1] = nq; c->qkv_first[2] = nq + nk; c->qkv_first[3] = nq + nk + nv;
  const int64_t no = ds_gemv(&c->g_o, B, H, qd, c->o, bf, flags, H * qd * esz, nthreads, bf);
  const int64_t ng = ds_gemv(&c->g_gated.g, B, c->I, H, c->gu, 0, flags, 2 * c->I * H * esz, nthreads, bf);
  c->g_gated.u = c->g_gated.g;
  c->g_gated.u.y = c->gu + B * c->I;
  c->g_gated.y = c->act; c->g_gated.ldy = c->I; c->g_gated.ybf16 = bf;
  const int64_t nd = ds_gemv(&c->g_down, B, H, c->I, c->dn, bf, flags, H * c->I * esz, nthreads, bf);
  const int64_t nh = ds_gemv(&c->g_head, B, c->vocab, H, logits, bf, flags, c->vocab * H * esz, nthreads, bf);
  /* Attention as the eager call plans it (one thread below 256 KiB of keys and values). */
  pa_ctx *a = &c->pa;
  memset(a, 0, sizeof *a);
  a->q = c->qr; a->qbf16 = bf; a->cbf16 = bf; a->out = c->att; a->obf16 = bf;
  a->tables = tables; a->lens = lens;
  int64_t keys = 0;
  for (int64_t b = 0; b < B; b++) keys += lens[b];
  const int32_t pa_threads = keys * kd * 2 * esz >= (256 << 10) ? nthreads : 1;
  int64_t na, part_at;
  const int64_t floats = pa_plan(a, B, c->heads, c->D, c->kvh, c->bs, c->maxb, lens, c->scale, pa_threads, max_split, vec_rows, &na, &part_at);
  if (floats > c->pa_cap) {
    float *nb = (float *)realloc(c->pa_buf, sizeof(float) * (size_t)floats);
    if (!nb) return -1;
    c->pa_buf = nb; c->pa_cap = floats;
  }
  a->scratch = c->pa_buf;
  a->part = a->nsplit > 1 ? c->pa_buf + part_at : 0;
  /* The phases. */
  c->nphase = 0;
  ds_add_phase(c, DK_EMBED, 0, 1);
  for (int32_t l = 0; l < c->L; l++) {
    ds_add_phase(c, DK_QKV, l, nq + nk + nv);
    ds_add_phase(c, DK_QKNORM, l, B * (c->heads + c->kvh));
    ds_add_phase(c, DK_ATTN, l, na);
    if (a->nsplit > 1) ds_add_phase(c, DK_MERGE, l, B * c->heads);
    ds_add_phase(c, DK_O, l, no);
    ds_add_phase(c, DK_GATEUP, l, ng);
    ds_add_phase(c, DK_DOWN, l, nd);
  }
  ds_add_phase(c, DK_HEAD, 0, nh);
  c->trace = trace;
  if (trace) {
    trace[0] = c->nphase;
    for (int32_t q = 0; q < c->nphase; q++) { trace[1 + 4 * q] = c->kind[q]; trace[2 + 4 * q] = c->layer[q]; }
    trace[3] = pool_now_ns();
  }
  atomic_store(&c->epoch, 0);
  pool_run(ds_participant, c, nthreads, nthreads);
  return (int32_t)a->nsplit;
}

/* An address (koffi passes an ArrayBuffer or typed array as a pointer to its data). */
int64_t kiln_ds_addr(void *p) { return (int64_t)(intptr_t)p; }
`;
