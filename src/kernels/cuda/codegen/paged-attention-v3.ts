/**
 * cuda llm.pagedAttention decode kernel v3 (KILN_CUDA_PAGED_ATTN=v3; issue #17, batch 64 first).
 * v2's block layout (paged-attention.ts: chunks of SPAN tokens, R lanes per K/V row with 16-byte
 * loads, GQA heads sharing each load, the last-arriving split folding the others in the same
 * launch) with what keeps HBM busy at large batches:
 *
 * - Loads in flight across the whole loop (register double buffer): a warp issues the next
 *   chunk's K/V loads before it computes the current chunk, and the block ids two chunks ahead, so
 *   the load of chunk k + 1 overlaps the math of chunk k. v1 and v2 issued a chunk's loads, then
 *   waited for them, then computed: the loads of a warp were idle for the whole compute (and in v1
 *   for the table read before each load), so at batch 64 (one wave of blocks, ~16 warps per SM)
 *   the SMs had too few bytes in flight for the H200's ~3.5 TB/s (Little's law: ~27 KB per SM at
 *   ~1 us of loaded latency).
 * - Residency: __launch_bounds__(128, 4) where the estimated registers allow it (<= 128 per
 *   thread), and a split count that never asks for more blocks than fit at once: floor(4 x SMs /
 *   pairs) splits (v2: ceil(4 x SMs / pairs), so batch 64's 512 (sequence, kv head) pairs ran 2
 *   splits = 1024 blocks, ~1.55 waves at v2's 94 registers, 5 blocks per SM, plus a fold per pair).
 *   Batch 64 on 132 SMs: 1 split, 512 blocks, one wave, no partials and no fold. Batch 1 keeps
 *   v2's many splits (up to 64), each sequence using min(splits, chunks) of them.
 * - The softmax in base 2: the query is multiplied once by scale x log2(e), so a score is
 *   log2-scaled and p = exp2(s - m) is one ex2 (no multiply per token); the partials' maxima are
 *   in log2 units too (only v3's own fold reads them).
 * Arithmetic stays in float (double for float64): the fp32 dot products, sums and accumulators of
 * v1/v2, results within the same tolerances.
 *
 * Graph capture: the split count depends on the batch size, the kv heads, the table width and the
 * SM count only (KILN_CUDA_PAGED_SPLITS can pin it, for benchmarks); lengths are device values.
 * The fold protocol (tickets, no waits, counters back to zero) is v2's, see paged-attention.ts.
 */
import { computeType } from './ctypes.js';
import {
  PAGED_COUNTERS,
  PAGED_MAX_SPLITS,
  pagedAttentionParams,
  pagedChunkMath,
  pagedFirstIds,
  pagedFoldSplits,
  pagedFoldTicket,
  pagedKernelHead,
  pagedKvBase,
  pagedKvLoad,
  pagedLayout,
  pagedLengthAndState,
  pagedMergeWarps,
  pagedQuery,
  pagedText,
  pagedWarps,
  type PagedAttentionSpec,
  type PagedLayout,
} from './paged-attention.js';
import type { GeneratedKernel } from './pointwise.js';

/** Blocks per SM the split rule fills (and the launch bounds ask for when the registers allow). */
const BLOCKS_PER_SM = 4;
/** Registers per thread at BLOCKS_PER_SM blocks of 128 threads (65536 / 512). */
const REG_CAP = 128;
/**
 * Registers outside the query, accumulators and K/V buffers (indices, ids, softmax state,
 * addresses, converted values). Calibrated with ptxas (sm_90, nvcc 13.0) over the test's shapes:
 * 28 left bfloat16 G2 D128 at u4 / 128 registers without spills but float16 and int64-table
 * variants spilling 16-108 bytes; 40 gives u3 and 120-126 registers, no spills, for G <= 4.
 */
const REG_OVERHEAD = 40;
/**
 * Most token batches the rule gives a warp per chunk. H200, Qwen3-0.6B heads (bfloat16, D128, G2),
 * with the shift/32-bit addressing of session 18 (bench/results/h200-s18-final*-2026-12-03.json):
 * 2 batches beat the 3 that the register budget allows at batch 64 (28.9 against 29.6 us, context
 * 256; 38.0 against 38.2 over 128..384) and at batch 1 (8.5 against 9.2 us), and 4 was slower
 * than 3 (30.7 against 30.2). The cap applies to every shape; KILN_CUDA_PAGED_UNROLL pins others.
 */
const MAX_RULE_UNROLL = 2;
/** Query + accumulator registers past which the (128, 4) bound spills (G 8 at D128: 64): no bound then. */
const MAX_BOUNDED_STATE = 48;

export interface PagedPlanV3 {
  readonly layout: PagedLayout;
  /** Elements a lane holds per row (NV x VE). */
  readonly e: number;
  /** Token batches a warp loads per chunk (each double-buffered). */
  readonly u: number;
  /** Warps per block. */
  readonly nw: number;
  /** Tokens per chunk: NW x TPW x U. */
  readonly span: number;
  /** The launch bounds' minimum blocks per SM: BLOCKS_PER_SM when the registers fit, else 1. */
  readonly minBlocks: number;
}

/** v3's spec: v2's, plus an optional token-batch count (KILN_CUDA_PAGED_UNROLL; 0 or absent: the rule). */
export interface PagedAttentionSpecV3 extends PagedAttentionSpec {
  readonly unroll?: number;
  /**
   * The chunk loop unrolled by two over two named K/V buffers (no copy of the next chunk into the
   * current one at the end of an iteration), and 16-byte K/V loads as predicated PTX loads into
   * zeroed registers (KILN_CUDA_PAGED_PIPE=pingpong). Why: ncu's SASS of the copy form (session
   * 18) has the compiler load into temporaries and move them into the buffer right after the load
   * (12% of the warp stall samples on one such move), and the rotation at the loop's end waits for
   * the next chunk before the chunk after it is issued, so at most one chunk is in flight. H200,
   * Qwen3-0.6B heads: batch 64 28.9 -> 25.4 us (context 256), 37.9 -> 32.4 (128..384); batch 1
   * 8.6 -> 8.4 us; the launcher's default (KILN_CUDA_PAGED_PIPE).
   */
  readonly pingpong?: boolean;
}

export function pagedPlanV3(s: Pick<PagedAttentionSpecV3, 'dtype' | 'headDim' | 'group' | 'align' | 'unroll'>): PagedPlanV3 {
  const layout = pagedLayout(s.dtype, s.headDim, s.group, s.align);
  const e = layout.nv * layout.ve;
  const words = s.dtype === 'float64' ? 2 : 1;
  // The query and accumulators stay (2 G E values); each token batch holds a K and a V vector per
  // NV (VB / 4 registers each), twice (the chunk computed and the chunk in flight).
  const state = 2 * s.group * e * words;
  const perBatch = 2 * 2 * layout.nv * Math.max(1, layout.vb / 4);
  const u = s.unroll ? s.unroll : Math.max(1, Math.min(MAX_RULE_UNROLL, Math.floor((REG_CAP - REG_OVERHEAD - state) / perBatch)));
  const nw = pagedWarps(s.dtype, s.headDim, s.group);
  // A pinned unroll keeps the bound when the rule's would have applied (its spills are the point
  // of a benchmark that pins it).
  const fits = nw === 4 && state <= MAX_BOUNDED_STATE && REG_OVERHEAD + state + (s.unroll ? 1 : u) * perBatch <= REG_CAP;
  return { layout, e, u, nw, span: nw * layout.tpw * u, minBlocks: fits ? BLOCKS_PER_SM : 1 };
}

/**
 * Splits per (sequence, kv head) pair: as many as keep all blocks resident at once
 * (floor(BLOCKS_PER_SM x SMs / pairs), at least 1), at most PAGED_MAX_SPLITS and one per chunk of
 * the table's capacity; 1 when there are more pairs than split counters. `pinned` > 0 (the
 * KILN_CUDA_PAGED_SPLITS option) replaces the rule, within the same bounds. Depends on no length.
 */
export function pagedSplitsV3(batch: number, kvHeads: number, capacityTokens: number, span: number, sms: number, pinned = 0): number {
  const pairs = batch * kvHeads;
  if (pairs > PAGED_COUNTERS) return 1;
  const want = pinned > 0 ? pinned : Math.floor((BLOCKS_PER_SM * sms) / pairs);
  return Math.max(1, Math.min(PAGED_MAX_SPLITS, want, Math.ceil(capacityTokens / span)));
}

export function pagedAttentionNameV3(s: PagedAttentionSpecV3): string {
  const p = pagedPlanV3(s);
  const l = p.layout;
  return `kiln_paged_attn_v3_${s.dtype}_${s.tableDtype}_${s.lenDtype}_d${s.headDim}_g${s.group}_b${l.vb}r${l.r}n${l.nv}_u${p.u}_w${p.nw}_m${p.minBlocks}${s.blockShift !== undefined ? `_bs${s.blockShift}` : ''}${s.index32 ? '_i32' : ''}${s.pingpong ? '_pp' : ''}`;
}

export function generatePagedAttentionV3(s: PagedAttentionSpecV3): GeneratedKernel {
  if (s.unroll !== undefined && !(Number.isInteger(s.unroll) && s.unroll >= 0 && s.unroll <= 8)) throw new Error(`paged attention v3: unroll takes 0..8, got ${s.unroll}`);
  const name = pagedAttentionNameV3(s);
  const plan = pagedPlanV3(s);
  const ct = computeType(s.dtype);
  const p = pagedText(s, name, plan, ct === 'double' ? 'exp2' : 'exp2f');
  const log2e = ct === 'double' ? '1.4426950408889634' : '1.44269504f';
  /**
   * Issue the K/V loads of chunk `c` (an int expression; may be past the last chunk: then every
   * token is masked) into K/V/OK, with the block ids in blkA. A token below the length whose id is
   * not a block id is reported (its table entry read again for the message) and masked. t is only
   * formed for a chunk below nChunks (no int overflow near the table's 2^31-token bound).
   */
  const predLoads = s.pingpong === true && plan.layout.vb === 16 && !plan.layout.padded;
  const issue = (c: string, K: string, V: string, OK: string): string => `
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const bool inC = ${c} < nChunks;
      const int t = inC ? ${c} * SPAN + lt0 + u * TPW : 0;
      const int blk = blkA[u];
      ${OK}[u] = inC && t < len;
${predLoads ? predicatedKvLoad(K, V, OK) : pagedKvLoad(p, K, V, OK)}    }`;
  /** The block ids of chunk `c` into blkA (-1 past the last chunk or the length). */
  const ids = (c: string): string => `
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const bool inC = ${c} < nChunks;
      const int t = inC ? ${c} * SPAN + lt0 + u * TPW : 0;
      blkA[u] = inC && t < len ? block_id(trow[TBLK(t)], numBlocks) : -1;
    }`;
  const head = pagedKernelHead(p, `NW * 32, ${plan.minBlocks}`);
  const source = `${predLoads ? head.replace('extern "C" __global__', `${LD16}extern "C" __global__`) : head}  // Issued together, needing nothing else: the length, this split's first chunk's block ids (any
  // of the row's M entries may be read before the length is known; an id is only used for a token
  // below the length) and the query.
  long long L = (long long)lens[b];
  int blkA[U];
${pagedFirstIds('blkA')}  // The query times scale x log2(e): scores in log2 units, p = exp2(s - m).
  const ${ct} qscale = scale * ${log2e};
${pagedQuery(p, ' * qscale')}${pagedLengthAndState(p)}  // The register double buffer: kr/vr hold chunk c (being computed), kn/vn chunk c + splits (in
  // flight), blkA the ids of the chunk after that.
  kiln_kv kr[U][NV], vr[U][NV];
  bool ok[U];
  ${issue('sp', 'kr', 'vr', 'ok')}
  {
    const int c1 = sp + splits;
    ${ids('c1')}
  }
${s.pingpong ? pingpongLoop(issue, ids, pagedChunkMath(p, '')) : `  for (int c = sp; c < nChunks; c += splits) {
    kiln_kv kn[U][NV], vn[U][NV];
    bool okn[U];
    const int cn = c + splits;
    ${issue('cn', 'kn', 'vn', 'okn')}
    {
      // No int overflow: c < nChunks <= 2^31 - 2^16 (the launcher's table bound), splits <= MAXS.
      const int c2 = cn + splits;
      ${ids('c2')}
    }
${pagedChunkMath(p, '')}    #pragma unroll
    for (int u = 0; u < U; u++) {
      ok[u] = okn[u];
      #pragma unroll
      for (int j = 0; j < NV; j++) { kr[u][j] = kn[u][j]; vr[u][j] = vn[u][j]; }
    }
  }`}
${pagedMergeWarps(p)}  // v2's fold (paged-attention.ts): every thread's partials fenced, a barrier, then one ticket per
  // block; the last of the nActive splits folds them in split order. No block waits for another.
${pagedFoldTicket(p, false)}  // Per query head: the splits' max, then weight_s = exp2(m_s - max) / sum_s' l_s' exp2(m_s' - max).
${pagedFoldSplits(p)}`;
  return { name, source, params: pagedAttentionParams(s.dtype) };
}

/**
 * Loads of chunk u's K/V row vectors (16 bytes each) as predicated PTX loads into zeroed registers
 * (kiln_ld16: no select or move after the load, so nothing waits for it before its use); the
 * table-entry check and the address are pagedKvLoad's (pagedKvBase).
 */
function predicatedKvLoad(K: string, V: string, OK: string): string {
  return `${pagedKvBase(OK)}      #pragma unroll
      for (int j = 0; j < NV; j++) {
        const kv_idx at = base + (kv_idx)((j * R + r) * VE);
        ${K}[u][j].raw = kiln_ld16(kc + at, ${OK}[u]);
        ${V}[u][j].raw = kiln_ld16(vc + at, ${OK}[u]);
      }
`;
}

/** The predicated 16-byte load (device: one PTX block; the host emulator: __ldg or zeros). */
const LD16 = `__device__ __forceinline__ uint4 kiln_ld16(const void* p, bool pred) {
#ifdef __CUDA_ARCH__
  uint4 v;
  asm volatile("{\\n\\t.reg .pred q;\\n\\tsetp.ne.b32 q, %5, 0;\\n\\tmov.b32 %0, 0;\\n\\tmov.b32 %1, 0;\\n\\tmov.b32 %2, 0;\\n\\tmov.b32 %3, 0;\\n\\t@q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\\n\\t}"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)pred));
  return v;
#else
  if (pred) return __ldg(reinterpret_cast<const uint4*>(p));
  uint4 z; z.x = 0; z.y = 0; z.z = 0; z.w = 0;
  return z;
#endif
}
`;

/**
 * The chunk loop unrolled by two: chunk c in kr/vr/ok, chunk c + splits in kn/vn/okn. Per trip:
 * issue chunk c + splits into kn, compute kr (chunk c), issue chunk c + 2 splits into kr (just
 * consumed), compute kn. No buffer is copied into the other, so a warp issues the next chunk's
 * loads before it waits for the current one's, and two chunks can be in flight.
 */
function pingpongLoop(issue: (c: string, K: string, V: string, OK: string) => string, ids: (c: string) => string, math: string): string {
  const mathN = math.replace(/\bkr\[/g, 'kn[').replace(/\bvr\[/g, 'vn[').replace(/\bok\[/g, 'okn[');
  return `  kiln_kv kn[U][NV], vn[U][NV];
  bool okn[U];
  // No int overflow: c < nChunks <= 2^31 - 2^16 (the launcher's table bound), splits <= MAXS.
  for (int c = sp; c < nChunks; c += 2 * splits) {
    {
      const int cn = c + splits;
      ${issue('cn', 'kn', 'vn', 'okn')}
      const int c2 = cn + splits;
      ${ids('c2')}
    }
    {
${math}    }
    if (c + splits >= nChunks) break;
    {
      const int cn = c + 2 * splits;
      ${issue('cn', 'kr', 'vr', 'ok')}
      const int c2 = cn + splits;
      ${ids('c2')}
    }
    {
${mathN}    }
  }`;
}
