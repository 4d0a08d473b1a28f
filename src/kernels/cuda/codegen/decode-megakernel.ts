/**
 * CUDA C of the whole-step decode kernel (issue #17, batch-1 decode): one persistent launch runs a
 * dense Qwen3-style decoder step for one sequence, every layer and the LM head, over Kiln's paged
 * cache, where the compiled step runs ~200 kernels (113 GEMVs at 4-5 us each, latency-bound: each
 * is one round trip of its weight plus launch, wait and tail).
 *
 * Files: decode-megakernel-plan.ts (sizes, variants, splits, refusals: what the host needs without
 * the source), decode-megakernel-device.ts (bfloat16, loads, copies, struct Shared),
 * decode-megakernel-barrier.ts (the grid barrier's forms), decode-megakernel-gemv.ts (rows, norms
 * and the GEMV unit macros); this file renders the prelude's macros and the kernel body and joins them.
 *
 * Design:
 * - Grid = one block per SM (512 threads, 16 warps), all resident (nothing else runs in Kiln's
 *   ordered stream while it does), synchronised by a grid barrier between phases: per layer
 *   (1) RMSNorm + q/k/v GEMV, (2) q/k norm + rotary + cache write + split attention, (3) o GEMV +
 *   residual, (4) RMSNorm + gate/up GEMV + silu * mul, (5) down GEMV + residual; then the final
 *   norm and the LM head. The norms are computed redundantly by every block (a 1024-element row):
 *   cheaper than a barrier.
 * - The point of one launch: weights do not depend on activations, so every warp issues the
 *   16-byte loads of its share of a phase's weights before the barrier that precedes the phase
 *   (variant.stream 'next': into registers, between the barrier's arrival and its wait; 'ahead':
 *   two phases earlier, q/k/v and gate/up through cp.async into shared memory), and the attention
 *   warps their keys and values (their cache slots are fixed for the launch). The barrier's
 *   latency and the weight's round trip then overlap, which separate kernels cannot do beyond
 *   PDL's one wave. Work units are rows, or rows split along K over 2 or 4 warps of one block
 *   where rows are fewer than warps (megakernelPlan), round-robin over the grid's warps.
 *   variant.pace (default 6) loads only a GEMV's first words a lane there and the rest that many
 *   ahead of their use: past ~30 KiB in flight per SM the loads only queue, and the barrier's
 *   release waits behind them (bench/cuda-sync-under-load.ts).
 * - Session 37's forms (the runtime's default since session 38, with joinLoads 'joint' and
 *   earlyAt 'norm'; DEFAULT_VARIANT here is the plain form): variant.kvLoad 'early' copies
 *   attention's prefetched keys and values into shared memory early in the layer (cp.async)
 *   instead of into registers at the barrier before attention; variant.constLoad 'early' copies
 *   the norm weights and the step's rotary rows a phase ahead, so a phase's first round trip reads
 *   only L2; variant.residLoad 'early' reads the o and down projections' residuals at the phase's
 *   start; variant.joinLoads 'joint' issues a thread's fold loads together (one L2 round trip).
 * - variant.sync 'flow' (opt-in) has three grid barriers a layer instead of five: attention waits
 *   on a counter per kv head, and the MLP runs in groups of blocks with the down projection split
 *   along K over the groups (partials added in group order by the next layer).
 * - The grid barrier has two halves: arrival (__syncthreads, then one thread's fence and atomic
 *   add) and wait (an acquire load polled). The loads are issued between them, because a fence
 *   also waits for its thread's loads in flight (measured on the H200: a barrier after the o
 *   projection took 2.7 us with the gate/up prefetch issued before its fence, 0.8 us elsewhere).
 * - Attention: work item (kv head, split) per block; a split is a contiguous run of at least
 *   NW x UKV tokens, whose keys and values each warp loads before the barrier (their cache slots
 *   are fixed for the launch); each warp keeps an online softmax for the kv head's query heads
 *   (the scores of its prefetched tokens reduced together), the warps merge in shared memory and
 *   the block writes its split's unnormalised partials. Every block folds all splits, in split
 *   order (deterministic), into its shared row at the start of the o projection: no ticket, no
 *   separate fold, no block waiting for another.
 * - Roundings are those of the compiled step's ops: every GEMV output, norm output, rotated head,
 *   residual sum, gate and up product and attention output is rounded to bfloat16 once; sums in
 *   float32.
 * - Data written in the launch by other blocks is read with ld.global.cg (L2; an SM's L1 is not
 *   coherent); weights and cache rows of earlier steps through the read-only path.
 * - The barrier counter is zero at every launch: the last block to leave resets it. A barrier
 *   that does not complete within ~2^24 polls (a block not resident) reports through the
 *   device-side error word and stops waiting, so a launch never hangs.
 * - variant.host renders the same kernel as host C++ for scripts/cuda-emu/grid-emu.h (no PTX),
 *   which test/cuda-megakernel-emu.test.ts runs against the cpu decode step without a GPU.
 */

import { megakernelBarrierSource } from './decode-megakernel-barrier.js';
import { megakernelDeviceSource } from './decode-megakernel-device.js';
import { megakernelGemvSource } from './decode-megakernel-gemv.js';
import {
  attentionPartFloats, DEFAULT_VARIANT, KV_PREFETCH, megakernelBarriers, megakernelHeadFeeds, megakernelName, megakernelPlan, megakernelSharedBytes,
  megakernelSplits, megakernelStampNames, megakernelSyncWords, megakernelUnsupported, megakernelVariantProblem, MK_THREADS, MK_WARPS,
  type DecodeMegakernelDims, type DecodeMegakernelVariant,
} from './decode-megakernel-plan.js';

// The plan is this module's public face too (sizes, variants, refusals).
export * from './decode-megakernel-plan.js';

/**
 * The kernel source. Parameters (in order): layers (LayerPtrs [L]), embed, finalNorm, lmHead,
 * cos, sin ([maxPositions, D]), ids, positions, slots (int64 [1]), table (int32 [maxBlocks]),
 * lens (int32 [1]), h, qkv, act (bfloat16 scratch), part (float scratch: the attention splits'
 * partials), sync (uint32: barrier, exit count), logits, claim, report, codes (int64 [3]: token id, block id,
 * barrier), trace (uint32 [barriers + 2][grid][2], the low 32 bits of %globaltimer in ns, under variant.trace: row 0 the start, row k
 * barrier k's arrival and release, the last row the end; else unused).
 */
export function decodeMegakernelSource(d: DecodeMegakernelDims, variant: DecodeMegakernelVariant = DEFAULT_VARIANT): { name: string; source: string; dynamicShared: number } {
  const why = megakernelUnsupported(d) ?? megakernelVariantProblem(d, variant);
  if (why !== null) throw new Error(`decode megakernel: unsupported model: ${why}`);
  const name = megakernelName(d, variant);
  const qrows = d.heads * d.headDim;
  const { ks, words, smemWords, splitRounds, groups } = megakernelPlan(d, variant);
  const ahead = variant.stream === 'ahead';
  const host = variant.host === true;
  const flow = variant.sync === 'flow';
  const pace = variant.pace ?? 0;
  const feeds = flow ? megakernelHeadFeeds(d, ks.qkv) : null;
  const maxK = Math.max(d.hidden, qrows, d.intermediate);
  // The early copies of the layer (variant.constLoad / kvLoad 'early'): issued at the layer's start,
  // or after its input norm's round trip (variant.earlyAt 'norm') so that round trip does not queue
  // behind them.
  const afterNorm = variant.earlyAt === 'norm';
  const earlyCopies = `#if MK_CONST_EARLY
    // This layer's rows: the post-attention norm's weights, the q/k norms', the rotary rows.
    cp_rows(cw + H, L.post_norm, H);
    cp_rows(cw + 2 * H, L.q_norm, D);
    cp_rows(cw + 2 * H + D, L.k_norm, D);
    cp_rows(cw + 2 * H + 2 * D, cos_t + (long long)pos * D, D);
    cp_rows(cw + 2 * H + 3 * D, sin_t + (long long)pos * D, D);
    cp_async_commit();
#endif
#if MK_KV_EARLY
    // Attention's prefetched keys and values (variant.kvLoad 'early'): they land while the q/k/v
    // GEMV runs; attention waits for them after its q/k preparation.
    {
      uint2* skv = reinterpret_cast<uint2*>(smw);
#pragma unroll
      for (int u = 0; u < UKV; u++) {
        if (kslot[u] >= 0) {
          const long long e = ((long long)kslot[u] * NKV + g) * D + lane * DPL;
          cp_async_kv(&skv[((warp * UKV + u) * 2) * 32 + lane], L.kc + e);
          cp_async_kv(&skv[((warp * UKV + u) * 2 + 1) * 32 + lane], L.vc + e);
        }
      }
      cp_async_commit();
    }
#endif
`;
  const source = `
#define H ${d.hidden}
#define NH ${d.heads}
#define NKV ${d.kvHeads}
#define D ${d.headDim}
#define GQ (NH / NKV)
#define INTER ${d.intermediate}
#define NL ${d.layers}
#define VOCAB ${d.vocab}
#define BS ${d.blockSize}
#define NCB ${d.numBlocks}
#define MAXB ${d.maxBlocks}
#define G ${d.grid}
#define NT ${MK_THREADS}
#define NW ${MK_WARPS}
#define TW (G * NW)
#define QROWS (NH * D)
#define KVROWS (NKV * D)
#define RQKV (QROWS + 2 * KVROWS)
#define S ${megakernelSplits(d)}
#define DPL (D / 32)
#define MAXK ${maxK}
#define WORDS ${words}
#define WS ${Math.max(1, smemWords)}
#define GU_HALF ${flow ? '(ROUNDSG(IS, KS_GU) * KW(H, KS_GU))' : '(ROUNDS(INTER, KS_GU) * KW(H, KS_GU))'}
#define UKV ${KV_PREFETCH}
#define EPS ${d.eps.toExponential(9)}f
#define SCALE ${(1 / Math.sqrt(d.headDim)).toExponential(9)}f
#define MK_TRACE ${variant.trace ? 1 : 0}
#define KS_QKV ${ks.qkv}
#define KS_O ${ks.o}
#define KS_GU ${ks.gu}
#define KS_DOWN ${ks.down}
#define GPR ${splitRounds}
#define MK_STAMPS ${megakernelStampNames(variant).length}
#define MK_KSLOT_SHARED ${variant.kvSlots === 'shared' ? 1 : 0}
// variant.kvLoad 'early': attention's prefetched keys and values through cp.async into shared
// memory at the start of each layer (dynamic shared memory: [warp][token][key, value][lane]).
#define MK_KV_EARLY ${variant.kvLoad === 'early' ? 1 : 0}
// variant.constLoad 'early': bfloat16 rows in dynamic shared memory after the keys and values (cw):
// [0, H) the input norm's weights, [H, 2H) the post-attention norm's, then the q norm's, the k
// norm's, the step's cos and sin rows (D each).
#define MK_CONST_EARLY ${variant.constLoad === 'early' ? 1 : 0}
// variant.residLoad 'early': the residual rows of this warp's o and down units, loaded at the phase's start.
#define MK_RESID_EARLY ${variant.residLoad === 'early' ? 1 : 0}
// variant.joinLoads 'joint': a thread's fold outputs (FOLD_N of them) load their partials together,
// FOLD_U splits at a time; the value row's elements are all loaded before any is stored.
#define MK_JOIN_LOADS ${variant.joinLoads === 'joint' || variant.joinLoads === 'hoist' ? 1 : 0}
#define MK_FOLD_HOIST ${variant.joinLoads === 'hoist' ? 1 : 0}
// variant.arrive 'release' / variant.poll 'relaxed': the grid barrier's arrival and polls (grid_arrive, poll_until).
#define MK_ARRIVE ${variant.arrive === 'flag' ? 2 : variant.arrive === 'release' ? 1 : 0}
#define MK_POLL_RELAXED ${variant.poll === 'relaxed' ? 1 : 0}
#define FOLD_N ((QROWS + NT - 1) / NT)
#define FOLD_U 4
#define MK_CW_OFF ${variant.kvLoad === 'early' ? MK_WARPS * KV_PREFETCH * 2 * 32 * 8 : 0}
// sync 'flow': MLP groups NG (group g = blocks [g * G / NG, (g + 1) * G / NG)), each over a slice
// of IS intermediate rows; KS_GU and KS_DOWN are then its GEMVs' splits, whose rounds are bounded
// by the smallest group's warps (TWG). sync words: [0] grid barrier, [1] exit count,
// [SYNC_HEAD + SLINE * g] kv head g's q/k/v writers, [SYNC_GROUP + SLINE * grp] the group's gate/up
// writers: a 128-byte line per counter, so the atomics on one do not queue behind the others'.
#define MK_FLOW ${flow ? 1 : 0}
// variant.pace: words of a GEMV loaded before the barrier that precedes it (the rest while it runs).
#define PACE ${pace}
#define PREF_LIMIT ${pace > 0 ? 'PACE' : '(1 << 30)'}
#define NG ${groups}
#define IS (INTER / NG)
#define TWG ((G / NG) * NW)
#define SLINE 32
#define SYNC_HEAD SLINE
#define SYNC_GROUP (SLINE * (1 + NKV))
#define NSYNC ${megakernelSyncWords(d, variant)}
#define DPART ${attentionPartFloats(d)}
#if MK_TRACE
// Attention detail: stamp j of this block in this layer, after the barrier rows.
#define MK_STAMP(j) if (threadIdx.x == 0) trace[(long long)(NBAR + 2) * G * 2 + ((long long)layer * G + blockIdx.x) * MK_STAMPS + (j)] = mk_now()
#else
#define MK_STAMP(j)
#endif
#define NBAR ${megakernelBarriers(d, variant)}

${megakernelDeviceSource(d, variant, feeds)}${megakernelBarrierSource(host)}${megakernelGemvSource(pace, flow)}

extern "C" __global__ void __launch_bounds__(NT, 1) ${name}(
    const LayerPtrs* __restrict__ layers, const bf_t* __restrict__ embed, const bf_t* __restrict__ final_norm,
    const bf_t* __restrict__ lm_head, const bf_t* __restrict__ cos_t, const bf_t* __restrict__ sin_t,
    const long long* __restrict__ ids, const long long* __restrict__ positions, const long long* __restrict__ slots,
    const int* __restrict__ table, const int* __restrict__ lens,
    bf_t* h, bf_t* qkv, bf_t* act, float* part, unsigned int* sync, bf_t* logits,
    unsigned long long* claim, long long* report, const long long* __restrict__ codes, unsigned int* trace) {
${
    host
      ? `  Shared& sh = *reinterpret_cast<Shared*>(emu_block_shared());
  uint4* smw = reinterpret_cast<uint4*>(emu_block_shared() + ((sizeof(Shared) + 15) / 16) * 16);`
      : `  __shared__ Shared sh;
  extern __shared__ uint4 smw[];`
  }
#if MK_TRACE
  if (threadIdx.x == 0) { const unsigned int t = mk_now(); trace[blockIdx.x * 2] = t; trace[blockIdx.x * 2 + 1] = t; }
#endif
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gw = blockIdx.x * NW + warp;
  unsigned int* bar = sync;
  if (threadIdx.x == 0) sh.dead = 0;${
    flow
      ? `
  // sync 'flow': this block's MLP group grp (blocks [gstart, gstart + gsize)), its warp lgw of twg
  // there, and the groups' down partial sums (read by the next layer and the final norm). Macros of
  // blockIdx and constants, so the compiler recomputes them where needed instead of keeping them
  // live through the launch (the kernel is at its register cap).
#define grp ((((int)blockIdx.x + 1) * NG - 1) / G)
#define gstart (grp * G / NG)
#define gsize ((unsigned int)((grp + 1) * G / NG - gstart))
#define lgw (((int)blockIdx.x - gstart) * NW + warp)
#define twg ((int)gsize * NW)
#define dpart (part + DPART)`
      : ''
  }

  // Step inputs (uploaded before the launch).
  long long id = ids[0];
  if (id < 0 || id >= VOCAB) {
    if (blockIdx.x == 0 && threadIdx.x == 0) kiln_report(claim, report, codes[0], id, VOCAB);
    id = 0;
  }
  const int pos = (int)positions[0];
  const long long slot_new = slots[0];
  const int len = lens[0];
  const bf_t* emb_row = embed + id * H;

  // This block's attention work: kv head g, split s over [t0, t1); a split holds at least NW tokens.
  const int item = blockIdx.x;
  const int g = item / S, s = item % S;
  int span = (len + S - 1) / S;
  if (span < NW * UKV) span = NW * UKV;
  const int n_active = len > 0 ? (len + span - 1) / span : 0;
  const bool attends = item < NKV * S && s < n_active;
  const int t0 = s * span;
  const int t1 = min(len, t0 + span);
  // Cache slots of this warp's first UKV tokens (-1: none, or the new token, which comes from registers).
  // Int32 (megakernelUnsupported bounds the cache's slots); variant.kvSlots 'shared' keeps them in
  // shared memory, read back each layer: 4 registers fewer live through the whole launch, where the
  // attention phase's prefetched rows press on the register cap.
#if MK_KSLOT_SHARED
  int* kslot = sh.kslot[warp];
#else
  int kslot[UKV];
#endif
#pragma unroll
  for (int u = 0; u < UKV; u++) {
    const int t = t0 + warp + u * NW;
    int slot = -1;
    if (attends && t < t1 && t != len - 1) {
      int b = table[t / BS];
      if (b < 0 || b >= NCB) { kiln_report(claim, report, codes[1], b, NCB); b = 0; }
      slot = b * BS + t % BS;
    }
    // Lane 0 writes the shared form; the block barrier of the first row_to_smem orders its reads.
    if (!MK_KSLOT_SHARED || lane == 0) kslot[u] = slot;
  }
#if MK_KV_EARLY && MK_KSLOT_SHARED
  // The first layer's early loads read the slots before any block barrier: lane 0 wrote them.
  __syncwarp();
#endif

  uint4 w[WORDS];
  unsigned int nbar = 0;
  unsigned int mk_old = 0;  // thread 0: the barrier count before its add (arrive 'flag')
#if MK_CONST_EARLY
  bf_t* cw = reinterpret_cast<bf_t*>(reinterpret_cast<unsigned char*>(smw) + MK_CW_OFF);
#endif
  {
    const LayerPtrs L = layers[0];
#if MK_CONST_EARLY
    cp_rows(cw, L.in_norm, H);
    cp_async_commit();
#endif
    ${ahead ? 'PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_SMEM, qkv_row(L, r));\n    cp_async_commit();' : 'PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_REG, qkv_row(L, r));'}
  }

  for (int layer = 0; layer < NL; layer++) {
    const LayerPtrs L = layers[layer];
    const bf_t* resid = layer == 0 ? emb_row : h;

    // (1) RMSNorm + q/k/v projections.
#if MK_CONST_EARLY
    // The input norm's weights (copied before the last barrier, or at the start for layer 0).
    cp_async_wait_all();
    __syncthreads();
#endif
${afterNorm ? '' : earlyCopies}    ${ahead ? 'cp_async_wait_all();\n    ' : ''}row_to_smem(resid, MK_CONST_EARLY ? IN_NORM_W : L.in_norm, H, sh, ${flow ? 'layer == 0 ? nullptr : dpart' : 'nullptr'}, MK_CONST_EARLY);
${afterNorm ? earlyCopies : ''}    ${ahead ? 'GEMV_UNITS(RQKV, H, KS_QKV, SMEM_W, qkv[r] = tobf(acc));' : 'GEMV_UNITS_P(RQKV, H, KS_QKV, REG_W, qkv[r] = tobf(acc), PACE_QKV);'}
    ${
      flow
        ? `// Attention on a kv head waits only for the blocks that wrote its q/k/v rows.
    flag_arrive(sync + SYNC_HEAD, mk_block_heads[blockIdx.x]);`
        : 'mk_old = grid_arrive(bar, ++nbar, trace);'
    }${ahead ? '\n    PREFETCH_UNITS(H, QROWS, KS_O, 0, TO_REG, L.wo + (long long)r * QROWS);' : ''}
    // Keys and values of this warp's first tokens: they do not depend on this step (under
    // MK_KV_EARLY already on their way into shared memory; read after the q/k preparation).
    uint2 kpre[UKV], vpre[UKV];
#pragma unroll
    for (int u = 0; u < UKV && !MK_KV_EARLY; u++) {
      if (kslot[u] >= 0) {
        const long long e = ((long long)kslot[u] * NKV + g) * D + lane * DPL;
#if ${d.headDim} == 128
        kpre[u] = ldw2(L.kc + e);
        vpre[u] = ldw2(L.vc + e);
#else
        kpre[u] = make_uint2(0u, 0u); vpre[u] = make_uint2(0u, 0u);
        for (int i = 0; i < DPL; i++) {
          reinterpret_cast<bf_t*>(&kpre[u])[i] = L.kc[e + i];
          reinterpret_cast<bf_t*>(&vpre[u])[i] = L.vc[e + i];
        }
#endif
      }
    }
    ${
      flow
        ? `if (attends) {
      poll_until(sync + SYNC_HEAD + SLINE * g, (unsigned int)(layer + 1) * mk_head_expect[g], sh, claim, report, codes[2], nbar + 1);
      __syncthreads();
    }`
        : 'grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);'
    }

    // (2) q/k norm + rotary, the new token's cache rows, split attention.
    if (attends) {
      const bool has_new = len - 1 >= t0 && len - 1 < t1;
#if MK_CONST_EARLY
      // This layer's rows copied at its start (the keys and values, the newest group, may still be on their way).
#if MK_KV_EARLY
      cp_async_wait_1();
#else
      cp_async_wait_all();
#endif
      __syncthreads();
#endif
      // Warps 0..GQ-1: query heads g*GQ+j; warp GQ: the kv head's key; warp GQ+1: its value.
      if (warp < GQ + 1) {
        const bool is_q = warp < GQ;
        const bf_t* x = qkv + (is_q ? (g * GQ + warp) * D : QROWS + g * D);
        const bf_t* nw = is_q ? L.q_norm : L.k_norm;
        // Norm weights and rotary rows are loaded with the head (one round trip for all).
        float a[D / 64], b[D / 64], wa[D / 64], wb[D / 64], ca[D / 64], cb2[D / 64], sa[D / 64], sb[D / 64];
        const long long cb = (long long)pos * D;
        float ss = 0.f;
#pragma unroll
        for (int m = 0; m < D / 64; m++) {
          const int j = lane + 32 * m;
          a[m] = bf(__ldcg(x + j));
          b[m] = bf(__ldcg(x + j + D / 2));
#if MK_CONST_EARLY
          const bf_t* cn = cw + 2 * H + (is_q ? 0 : D);
          wa[m] = bf(cn[j]); wb[m] = bf(cn[j + D / 2]);
          ca[m] = bf(cw[2 * H + 2 * D + j]); cb2[m] = bf(cw[2 * H + 2 * D + j + D / 2]);
          sa[m] = bf(cw[2 * H + 3 * D + j]); sb[m] = bf(cw[2 * H + 3 * D + j + D / 2]);
#else
          wa[m] = bf(__ldg(nw + j)); wb[m] = bf(__ldg(nw + j + D / 2));
          ca[m] = bf(__ldg(cos_t + cb + j)); cb2[m] = bf(__ldg(cos_t + cb + j + D / 2));
          sa[m] = bf(__ldg(sin_t + cb + j)); sb[m] = bf(__ldg(sin_t + cb + j + D / 2));
#endif
          ss = fmaf(a[m], a[m], fmaf(b[m], b[m], ss));
        }
        ss = warp_sum(ss);
        const float rr = rsqrtf(ss / (float)D + EPS);
#pragma unroll
        for (int m = 0; m < D / 64; m++) {
          const int j = lane + 32 * m;
          const float n1 = rbf(a[m] * rr * wa[m]);
          const float n2 = rbf(b[m] * rr * wb[m]);
          const float o1 = rbf(n1 * ca[m] - n2 * sa[m]);
          const float o2 = rbf(n2 * cb2[m] + n1 * sb[m]);
          sh.qk[warp][j] = o1;
          sh.qk[warp][j + D / 2] = o2;
          if (!is_q && has_new && slot_new >= 0) {
            L.kc[(slot_new * NKV + g) * D + j] = tobf(o1);
            L.kc[(slot_new * NKV + g) * D + j + D / 2] = tobf(o2);
          }
        }
      } else if (warp == GQ + 1) {
        const bf_t* x = qkv + QROWS + KVROWS + g * D;
#if MK_JOIN_LOADS
        // All of the lane's elements loaded first: the stores below would otherwise hold each
        // later load behind the round trip of the one before (in-order issue waits on the operand).
        unsigned short vv[D / 32];
#pragma unroll
        for (int m = 0; m < D / 32; m++) vv[m] = __ldcg(x + lane + 32 * m);
#pragma unroll
        for (int m = 0; m < D / 32; m++) {
          const int j = lane + 32 * m;
          sh.qk[GQ + 1][j] = bf(vv[m]);
          if (has_new && slot_new >= 0) L.vc[(slot_new * NKV + g) * D + j] = vv[m];
        }
#else
        for (int j = lane; j < D; j += 32) {
          const unsigned short v = __ldcg(x + j);
          sh.qk[GQ + 1][j] = bf(v);
          if (has_new && slot_new >= 0) L.vc[(slot_new * NKV + g) * D + j] = v;
        }
#endif
      }
      __syncthreads();
      MK_STAMP(0);
#if MK_KV_EARLY
      {
        // This thread's own copies (each lane reads what it copied): no block or warp barrier needed.
        cp_async_wait_all();
        const uint2* skv = reinterpret_cast<const uint2*>(smw);
#pragma unroll
        for (int u = 0; u < UKV; u++) {
          kpre[u] = skv[((warp * UKV + u) * 2) * 32 + lane];
          vpre[u] = skv[((warp * UKV + u) * 2 + 1) * 32 + lane];
        }
      }
#endif
      float q[GQ][DPL];
#pragma unroll
      for (int hh = 0; hh < GQ; hh++)
#pragma unroll
        for (int e = 0; e < DPL; e++) q[hh][e] = sh.qk[hh][lane * DPL + e];
      float m[GQ], l[GQ], acc[GQ][DPL];
#pragma unroll
      for (int hh = 0; hh < GQ; hh++) {
        m[hh] = MK_NEG_INF; l[hh] = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) acc[hh][e] = 0.f;
      }
      // One online-softmax step of a token with its (scaled) scores sc[] and its value row's DPL
      // elements of this lane, packed bfloat16 (unpacked here: fewer live registers).
      auto take = [&](const float (&sc)[GQ], uint2 vw) {
        const bf_t* vb = reinterpret_cast<const bf_t*>(&vw);
        float vf[DPL];
#pragma unroll
        for (int e = 0; e < DPL; e++) vf[e] = bf(vb[e]);
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) {
          const float mn = fmaxf(m[hh], sc[hh]);
          const float alpha = __expf(m[hh] - mn);
          const float p = __expf(sc[hh] - mn);
          l[hh] = l[hh] * alpha + p;
#pragma unroll
          for (int e = 0; e < DPL; e++) acc[hh][e] = fmaf(p, vf[e], acc[hh][e] * alpha);
          m[hh] = mn;
        }
      };
      // The prefetched tokens (a split holds at least UKV per warp): all their scores first, so the
      // UKV x GQ warp sums are independent and overlap, then the softmax steps in token order.
      {
        float sc[UKV][GQ];
#pragma unroll
        for (int u = 0; u < UKV; u++) {
          if (t0 + warp + u * NW == len - 1) {
            // The new token: its rotated key and value from shared memory (bfloat16 values), packed.
            kpre[u] = pack_row(&sh.qk[GQ][lane * DPL]);
            vpre[u] = pack_row(&sh.qk[GQ + 1][lane * DPL]);
          }
          const bf_t* kb = reinterpret_cast<const bf_t*>(&kpre[u]);
#pragma unroll
          for (int hh = 0; hh < GQ; hh++) {
            float d0 = 0.f;
#pragma unroll
            for (int e = 0; e < DPL; e++) d0 = fmaf(q[hh][e], bf(kb[e]), d0);
            sc[u][hh] = d0;
          }
        }
#pragma unroll
        for (int u = 0; u < UKV; u++)
#pragma unroll
          for (int hh = 0; hh < GQ; hh++) sc[u][hh] = warp_sum(sc[u][hh]) * SCALE;
#pragma unroll
        for (int u = 0; u < UKV; u++)
          if (t0 + warp + u * NW < t1) take(sc[u], vpre[u]);
      }
      // Tokens past the prefetched ones (contexts longer than S x NW x UKV), loaded here.
      for (int t = t0 + warp + UKV * NW; t < t1; t += NW) {
        float sc[GQ];
        uint2 kw, vw;
        if (t == len - 1) {
          kw = pack_row(&sh.qk[GQ][lane * DPL]);
          vw = pack_row(&sh.qk[GQ + 1][lane * DPL]);
        } else {
          int bk = table[t / BS];
          if (bk < 0 || bk >= NCB) { kiln_report(claim, report, codes[1], bk, NCB); bk = 0; }
          const long long e0 = (((long long)bk * BS + t % BS) * NKV + g) * D + lane * DPL;
          kw = make_uint2(0u, 0u); vw = make_uint2(0u, 0u);
#if ${d.headDim} == 128
          kw = __ldg(reinterpret_cast<const uint2*>(L.kc + e0));
          vw = __ldg(reinterpret_cast<const uint2*>(L.vc + e0));
#else
          for (int i = 0; i < DPL; i++) {
            reinterpret_cast<bf_t*>(&kw)[i] = L.kc[e0 + i];
            reinterpret_cast<bf_t*>(&vw)[i] = L.vc[e0 + i];
          }
#endif
        }
        const bf_t* kb = reinterpret_cast<const bf_t*>(&kw);
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) {
          float d0 = 0.f;
#pragma unroll
          for (int e = 0; e < DPL; e++) d0 = fmaf(q[hh][e], bf(kb[e]), d0);
          sc[hh] = warp_sum(d0) * SCALE;
        }
        take(sc, vw);
      }
      if (lane == 0) {
#pragma unroll
        for (int hh = 0; hh < GQ; hh++) { sh.wm[warp][hh] = m[hh]; sh.wl[warp][hh] = l[hh]; }
      }
#pragma unroll
      for (int hh = 0; hh < GQ; hh++)
#pragma unroll
        for (int e = 0; e < DPL; e++) sh.wacc[warp][hh][lane * DPL + e] = acc[hh][e];
      __syncthreads();
      MK_STAMP(1);
      // Thread (hh, dd) merges the warps.
      const int hh = threadIdx.x / D, dd = threadIdx.x % D;
      float M = MK_NEG_INF, Lsum = 0.f, A = 0.f;
      if (hh < GQ) {
#pragma unroll
        for (int i = 0; i < NW; i++) M = fmaxf(M, sh.wm[i][hh]);
#pragma unroll
        for (int i = 0; i < NW; i++) {
          const float f = sh.wm[i][hh] == MK_NEG_INF ? 0.f : __expf(sh.wm[i][hh] - M);
          Lsum = fmaf(sh.wl[i][hh], f, Lsum);
          A = fmaf(sh.wacc[i][hh][dd], f, A);
        }
      }
      // The split's unnormalised partials; every block folds them at the start of the o projection.
      if (hh < GQ) {
        float* pp = part + ((long long)(g * S + s) * GQ + hh) * (D + 2);
        pp[dd] = A;
        if (dd == 0) { pp[D] = M; pp[D + 1] = Lsum; }
      }
    }
    mk_old = grid_arrive(bar, ++nbar, trace${flow ? ', attends' : ''});
    ${
      ahead
        ? `PREFETCH_UNITS(INTER, H, KS_GU, 0, TO_SMEM, L.wg + (long long)r * H);
    PREFETCH_UNITS(INTER, H, KS_GU, GU_HALF, TO_SMEM, L.wu + (long long)r * H);
    cp_async_commit();`
        : 'PREFETCH_UNITS(H, QROWS, KS_O, 0, TO_REG, L.wo + (long long)r * QROWS);'
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

    // (3) o projection + residual. Its input, the attention output, is folded from the splits'
    // partials by every block: two L2 round trips (their maxima and sums, then the accumulators)
    // where a separate fold would take a ticket, read, write and be read again.
#if MK_RESID_EARLY
    // The residual of each of this warp's rows, in the fold's first round trip.
    RESID_UNITS(rs_o, KS_O, ${flow ? 'resid_row(resid, layer == 0 ? nullptr : dpart, r)' : 'bf(__ldcg(resid + r))'});
#define MK_RESID_O(r) rs_o[j]
#else
#define MK_RESID_O(r) ${flow ? 'resid_row(resid, layer == 0 ? nullptr : dpart, r)' : 'bf(__ldcg(resid + r))'}
#endif
#if MK_JOIN_LOADS
    // This thread's FOLD_N outputs i = threadIdx.x + k * NT, their splits FOLD_U at a time: each
    // chunk's loads of every output issued before any is used (one round trip a chunk, where the
    // serial form took one per output).
    // Output k's partial of split s2 is at FOLD_AT(k, s2) = fold0 + k's offset + s2 * GQ * (D + 2); NT is a multiple of
    // GQ * D (megakernelUnsupported), so output k's head is k * NT / D past output 0's, its kv
    // group k * NT / (GQ * D) past it: one pointer and constant offsets (the register cap).
    const int hq0 = (int)threadIdx.x / D;
    const float* fold0 = part + ((long long)((hq0 / GQ) * S) * GQ + hq0 % GQ) * (D + 2) + (int)threadIdx.x % D;
#define FOLD_AT(k, s2) (fold0 + (long long)(k) * (NT / (GQ * D)) * S * GQ * (D + 2) + (long long)(s2) * GQ * (D + 2))
#define FOLD_LOAD(pv, s0) \
    _Pragma("unroll") for (int u = 0; u < FOLD_U; u++) \
    _Pragma("unroll") for (int k = 0; k < FOLD_N; k++) pv[u][k] = ((s0) + u < n_active && (int)threadIdx.x + k * NT < QROWS) ? __ldcg(FOLD_AT(k, (s0) + u)) : 0.f;
    float pv[FOLD_U][FOLD_N];
#if MK_FOLD_HOIST
    // joinLoads 'hoist': the first chunk's loads go out before the maxima and sums are read, so
    // both share one round trip (the chunk does not depend on them; only its use does).
    FOLD_LOAD(pv, 0);
#endif
#endif
    for (int i = threadIdx.x; i < NH * n_active; i += NT) {
      const int hq = i / n_active, s2 = i % n_active;
      const float* pp = part + ((long long)((hq / GQ) * S + s2) * GQ + hq % GQ) * (D + 2);
      sh.pm[hq][s2] = __ldcg(pp + D);
      sh.pl[hq][s2] = __ldcg(pp + D + 1);
    }
    __syncthreads();
#if MK_JOIN_LOADS
    // Each head's split weights exp(m_s - M) and their sum, computed once per head (thread hq)
    // into its shared row in place of the maxima and sums: the outputs below then hold only their
    // accumulators (the register cap), and get the serial form's numbers in the same order.
    if ((int)threadIdx.x < NH) {
      const int hq = threadIdx.x;
      float M = MK_NEG_INF;
      for (int s2 = 0; s2 < n_active; s2++) M = fmaxf(M, sh.pm[hq][s2]);
      float Lsum = 0.f;
      for (int s2 = 0; s2 < n_active; s2++) {
        const float f = __expf(sh.pm[hq][s2] - M);
        Lsum = fmaf(sh.pl[hq][s2], f, Lsum);
        sh.pm[hq][s2] = f;
      }
      sh.pl[hq][0] = Lsum;
    }
    __syncthreads();
    {
      float fa[FOLD_N];
#pragma unroll
      for (int k = 0; k < FOLD_N; k++) fa[k] = 0.f;
      for (int s0 = 0; s0 < n_active; s0 += FOLD_U) {
        if (!MK_FOLD_HOIST || s0 > 0) { FOLD_LOAD(pv, s0); }
#pragma unroll
        for (int u = 0; u < FOLD_U; u++) {
          if (s0 + u >= n_active) break;
#pragma unroll
          for (int k = 0; k < FOLD_N; k++) fa[k] = fmaf(pv[u][k], sh.pm[min(hq0 + k * (NT / D), NH - 1)][s0 + u], fa[k]);
        }
      }
#undef FOLD_AT
#undef FOLD_LOAD
#pragma unroll
      for (int k = 0; k < FOLD_N; k++) {
        const int i = threadIdx.x + k * NT;
        if (i < QROWS) sh.xs[i] = rbf(fa[k] / sh.pl[i / D][0]);
      }
    }
#else
    for (int i = threadIdx.x; i < QROWS; i += NT) {
      const int hq = i / D, dd = i % D;
      float M = MK_NEG_INF;
      for (int s2 = 0; s2 < n_active; s2++) M = fmaxf(M, sh.pm[hq][s2]);
      float Lsum = 0.f, A = 0.f;
      const float* pp = part + ((long long)((hq / GQ) * S) * GQ + hq % GQ) * (D + 2) + dd;
#pragma unroll 4
      for (int s2 = 0; s2 < n_active; s2++) {
        const float f = __expf(sh.pm[hq][s2] - M);
        Lsum = fmaf(sh.pl[hq][s2], f, Lsum);
        A = fmaf(__ldcg(pp + (long long)s2 * GQ * (D + 2)), f, A);
      }
      sh.xs[i] = rbf(A / Lsum);
    }
#endif
    __syncthreads();
    GEMV_UNITS_P(H, QROWS, KS_O, REG_W, h[r] = tobf(MK_RESID_O(r) + rbf(acc)), PACE_O);
#undef MK_RESID_O
    mk_old = grid_arrive(bar, ++nbar, trace);
    ${
      ahead
        ? 'PREFETCH_UNITS(H, INTER, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER);'
        : flow
          ? `PREFETCH_UNITS_X(IS, H, KS_GU, 0, TO_REG, L.wg + (long long)(grp * IS + r) * H, lgw, twg, ROUNDSG(IS, KS_GU));
    PREFETCH_UNITS_X(IS, H, KS_GU, GU_HALF, TO_REG, L.wu + (long long)(grp * IS + r) * H, lgw, twg, ROUNDSG(IS, KS_GU));`
          : `PREFETCH_UNITS(INTER, H, KS_GU, 0, TO_REG, L.wg + (long long)r * H);
    PREFETCH_UNITS(INTER, H, KS_GU, GU_HALF, TO_REG, L.wu + (long long)r * H);`
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

${
      flow
        ? `    // (4) RMSNorm + gate/up projections of this group's slice + silu * mul; then, once the group's
    // blocks have all written theirs, the down projection's partial sums over the slice.
    MK_CONST_WAIT();
    row_to_smem(h, MK_CONST_EARLY ? POST_NORM_W : L.post_norm, H, sh, nullptr, MK_CONST_EARLY);
    GATE_UP_UNITS(IS, REG_W, PACE_GU, lgw, twg, ROUNDSG(IS, KS_GU), grp * IS);
    flag_arrive(sync + SYNC_GROUP + SLINE * grp, 1u);
    MK_STAMP(2);
    // The down weights of this block's units are loaded while the group's other blocks finish
    // (measured: loading them into shared memory at the barrier before the MLP instead shortened
    // this wait by ~1 us but lengthened that barrier's release by ~2 us; commit 2a5d935).
    PREFETCH_UNITS_X(H, IS, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER + grp * IS, lgw, twg, ROUNDSG(H, KS_DOWN));
    MK_NEXT_NORM_COPY();
    poll_until(sync + SYNC_GROUP + SLINE * grp, (unsigned int)(layer + 1) * gsize, sh, claim, report, codes[2], nbar + 1);
    __syncthreads();
    MK_STAMP(3);

    // (5) down projection's partial sums over the slice (the next layer adds the groups' and the residual).
    row_to_smem(act + grp * IS, nullptr, IS, sh);
    GEMV_UNITS_XP(H, IS, KS_DOWN, REG_W, dpart[grp * H + r] = acc, lgw, twg, ROUNDSG(H, KS_DOWN), PACE_DOWN);
`
        : `    // (4) RMSNorm + gate/up projections + silu * mul.
    ${ahead ? 'cp_async_wait_all();\n    ' : ''}MK_CONST_WAIT();
    row_to_smem(h, MK_CONST_EARLY ? POST_NORM_W : L.post_norm, H, sh, nullptr, MK_CONST_EARLY);
    GATE_UP_UNITS(INTER, ${ahead ? 'SMEM_W, NO_ISSUE' : 'REG_W, PACE_GU'}, gw, TW, ROUNDS(INTER, KS_GU), 0);
    mk_old = grid_arrive(bar, ++nbar, trace);
    ${
      ahead
        ? `if (layer + 1 < NL) {
      const LayerPtrs L2 = layers[layer + 1];
      PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_SMEM, qkv_row(L2, r));
      cp_async_commit();
    }`
        : 'PREFETCH_UNITS(H, INTER, KS_DOWN, 0, TO_REG, L.wd + (long long)r * INTER);\n    MK_NEXT_NORM_COPY();'
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);

    // (5) down projection + residual.
#if MK_RESID_EARLY
    // The residual of each of this warp's rows, loaded with the activation row (one round trip).
    RESID_UNITS(rs_d, KS_DOWN, bf(__ldcg(h + r)));
#define MK_RESID_D(r) rs_d[j]
#else
#define MK_RESID_D(r) bf(__ldcg(h + r))
#endif
    row_to_smem(act, nullptr, INTER, sh);
    GEMV_UNITS_P(H, INTER, KS_DOWN, REG_W, h[r] = tobf(MK_RESID_D(r) + rbf(acc)), PACE_DOWN);
#undef MK_RESID_D
`
    }
    mk_old = grid_arrive(bar, ++nbar, trace);
    if (${ahead ? 'false' : 'layer + 1 < NL'}) {
      ${ahead ? '' : 'const LayerPtrs L2 = layers[layer + 1];\n      PREFETCH_UNITS(RQKV, H, KS_QKV, 0, TO_REG, qkv_row(L2, r));'}
    } else if (layer + 1 == NL && gw < VOCAB) {
      // The LM head's first row.
#pragma unroll
      for (int c = 0; c < H / 256; c++) w[c] = ldw(lm_head + (long long)gw * H + c * 256 + lane * 8);
    }
    grid_wait(bar, nbar, mk_old, sh, claim, report, codes[2], trace);
  }

  // Final norm + LM head: rows streamed two deep (151936 rows do not fit in registers).
  MK_CONST_WAIT();
  row_to_smem(h, MK_CONST_EARLY ? IN_NORM_W : final_norm, H, sh, ${flow ? 'dpart' : 'nullptr'}, MK_CONST_EARLY);
  {
    uint4 cur[H / 256], nxt[H / 256];
    int r = gw;
#pragma unroll
    for (int c = 0; c < H / 256; c++) cur[c] = w[c];
    for (; r < VOCAB; r += TW) {
      const int rn = r + TW;
      if (rn < VOCAB) {
#pragma unroll
        for (int c = 0; c < H / 256; c++) nxt[c] = ldw(lm_head + (long long)rn * H + c * 256 + lane * 8);
      }
      float acc = 0.f;
#pragma unroll
      for (int c = 0; c < H / 256; c++) acc += dot8(cur[c], sh.xs + c * 256 + lane * 8);
      acc = warp_sum(acc);
      if (lane == 0) logits[r] = tobf(acc);
#pragma unroll
      for (int c = 0; c < H / 256; c++) cur[c] = nxt[c];
    }
  }

  // The last block out resets the barrier for the next launch.
  __syncthreads();
#if MK_TRACE
  if (threadIdx.x == 0) { const unsigned int t = mk_now(); trace[((long long)(NBAR + 1) * G + blockIdx.x) * 2] = t; trace[((long long)(NBAR + 1) * G + blockIdx.x) * 2 + 1] = t; }
#endif
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync + 1, 1u) == G - 1) {
      for (int i = 0; i < NSYNC; i++) sync[i] = 0u;
      __threadfence();
    }
  }
}
`;
  // 'ahead': the q/k/v and gate/up weights; else kvLoad 'early': [warp][token][key, value][lane] uint2, then constLoad 'early': the rows (MK_CONST_EARLY).
  const kvBytes = variant.kvLoad === 'early' ? MK_WARPS * KV_PREFETCH * 2 * 32 * 8 : 0;
  const constBytes = variant.constLoad === 'early' ? (2 * d.hidden + 4 * d.headDim) * 2 : 0;
  const dynamicShared = ahead ? MK_WARPS * smemWords * 32 * 16 : kvBytes + constBytes;
  if (!host) return { name, source, dynamicShared };
  // Host entry: the kernel over the emulated grid, its 21 arguments as raw addresses.
  const args = Array.from({ length: 21 }, (_, i) => `AnyPtr{(void*)a[${i}]}`).join(', ');
  const entry = `
extern "C" void mk_host_launch(const unsigned long long* a) {
  emu_grid_launch(G, NT, ${megakernelSharedBytes(d, variant) + 16 + dynamicShared}, [&]() { ${name}(${args}); });
}
`;
  return { name, source: source + entry, dynamicShared };
}
