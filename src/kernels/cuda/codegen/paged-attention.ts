/**
 * CUDA C for the paged-cache ops (ops/defs/llm-paged.ts): reshape_and_cache and the split-K
 * decode attention, for Kiln's cache layout ([numBlocks, blockSize, kvHeads, headDim]) and its
 * device-side error word. (The first decode kernel, and its separate reduce kernel, are in
 * paged-attention-v1.ts: still the default; KILN_CUDA_PAGED_ATTN=v2 selects this one.)
 *
 * Decode attention is latency-bound at small batches: at batch 1 a Qwen3-0.6B layer reads about
 * 1 MB of K/V (< 1 us at the H200's bandwidth), so what counts is how many dependent steps a
 * block takes and how many blocks share the work. The design:
 *
 * - Grid (kv head, sequence, split); 4 warps per block. A sequence's tokens are cut into chunks
 *   of SPAN tokens (what the block loads in one round: NW warps x TPW rows x U batches) and split
 *   s takes chunks s, s + splits, ... The split count depends on the batch size, the kv heads and
 *   the table's width only (CUDA graphs replay any length); a sequence uses min(splits,
 *   ceil(len / SPAN)) of them, the others return at once. So a 129-token context at batch 1 runs
 *   on 5 blocks per kv head, each with one round of loads, and 8192 tokens on 64.
 * - Chunk s's block ids are read before the length arrives (the table row has maxBlocks entries
 *   whatever the length), and the next chunk's while this one computes: the first K/V load waits
 *   for one round trip (max of length, table, query), not for length then table. Entries of blocks
 *   at or past ceil(len / blockSize) are unused by contract (garbage, -1, ids past the cache): a
 *   prefetched entry is only a candidate; it is checked against the cache and used to address it
 *   only for a token below the length (the `ok` test), so a garbage entry is never reported and
 *   never indexes the cache. (An H200 run reported `index 209 ... of size 162` from the CUDA-graph
 *   test: that test replayed length 2049 over a row whose table covered 40 tokens, so the entry
 *   was inside the length and the report was right; the test now builds tables for every length
 *   it replays.)
 * - A K or V row is read by R lanes with one 16-byte load each where the layout allows (bf16
 *   head dim 128: 16 lanes, so a warp reads TPW = 2 rows per load; smaller vectors when the cache
 *   address or head dim does not allow it, or when the query heads of a group would need too many
 *   registers). A lane keeps its features of the G query heads that share the kv head (GQA: K
 *   and V are read once per group) and an online softmax state per head, updated once per batch
 *   of U tokens (one rescale for U tokens instead of one per token). The R-lane dot products are
 *   log2(R) shuffles, independent across tokens and heads.
 * - The warps' states merge through shared memory; a sequence with one active split writes the
 *   output there. Otherwise each split writes unnormalised partials (accumulators, max, sum) and
 *   the last block to finish (an atomic ticket per (sequence, kv head)) folds them in split
 *   order (deterministic) in the same launch: no second kernel. No block ever waits for another
 *   (no spin on a flag or counter), so a launch cannot hang whatever the lengths, the split count
 *   against the chunk count, or the order and residency of its blocks: splits past a sequence's
 *   chunks return before taking a ticket, and the ticket count a pair waits for (nActive) is
 *   computed identically by all its blocks from the same length.
 *
 * The counters are a `__device__` array of the module (zero when the module loads); the folding
 * block puts its counter back to 0, so every launch finds them zero. That holds because Kiln runs a
 * device's kernels in one ordered stream (the default stream; graph capture and replay switch it
 * with event waits on both sides, runtime/cuda/graph.ts): two launches of one module never overlap.
 * A ticket past the last (only possible if two launches overlapped) is reported through the
 * device-side error word rather than leaving stale output unnoticed.
 * Batches with more (sequence, kv head) pairs than counters run unsplit (they fill the GPU anyway).
 * Arithmetic in float (double for float64), exp via __expf.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { REPORT_INDEX_C } from '../../../runtime/cuda/device-errors.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';
import type { GeneratedKernel } from './pointwise.js';

/** Static shared memory limit (48 KiB). */
const SHARED_BYTES = 49152;
/** Most splits of one sequence (the fold reads this many partials per (row, feature) at most). */
export const PAGED_MAX_SPLITS = 64;
/** Split counters per module: (sequence, kv head) pairs a split launch may have. */
export const PAGED_COUNTERS = 4096;
/** Blocks per SM the split count aims for (4 warps each). */
const BLOCKS_PER_SM = 4;

export interface PagedAttentionSpec {
  readonly dtype: DType;
  readonly tableDtype: 'int32' | 'int64';
  readonly lenDtype: 'int32' | 'int64';
  readonly headDim: number;
  /** Query heads per kv head. */
  readonly group: number;
  /** Largest power of two, at most 16, dividing both cache addresses: the widest K/V load allowed. */
  readonly align: number;
  /**
   * log2 of the cache's block size when it is a power of two (v3; issue #17): a token's block and
   * offset become a shift and a mask instead of two integer divisions by the run-time BS (about 20
   * instructions each, three per token and lane, which left v3 issue-bound at batch 64: ncu, H200,
   * 0.55 warps issued per scheduler cycle at 31% of DRAM bandwidth). The launcher passes BS = 2^shift.
   */
  readonly blockShift?: number;
  /**
   * Every K/V element index of the cache is below 2^31 (numBlocks x BS x kvHeads x headDim): the
   * row address is formed in 32-bit integers instead of 64-bit products (v3).
   */
  readonly index32?: boolean;
}

/** How a warp reads K/V rows: R lanes per row, each NV vectors of VE elements (VB bytes). */
export interface PagedLayout {
  /** Bytes of one vector load (the element size for scalar loads). */
  readonly vb: number;
  /** Elements per vector. */
  readonly ve: number;
  /** Lanes per row: a power of two up to 32. */
  readonly r: number;
  /** Vectors per lane per row; vector j of lane l is the row's vector j * R + l. */
  readonly nv: number;
  /** R x NV exceeds the row's vectors: the lanes past the row's end hold zeros. */
  readonly padded: boolean;
  /** Rows a warp reads per load: 32 / R. */
  readonly tpw: number;
}

export interface PagedPlan {
  readonly layout: PagedLayout;
  /** Elements a lane holds per row (NV x VE). */
  readonly e: number;
  /** Token batches a warp has in flight per round. */
  readonly u: number;
  /** Warps per block. */
  readonly nw: number;
  /** Tokens a block loads per round (one chunk): NW x TPW x U. */
  readonly span: number;
}

function elemBytes(dtype: DType): number {
  return dtype === 'float64' ? 8 : dtype === 'float32' ? 4 : 2;
}

/** Bytes of one accumulator element (double for float64, else float). */
function accBytes(dtype: DType): number {
  return dtype === 'float64' ? 8 : 4;
}

function pow2Divisor(n: number): number {
  let p = 1;
  while (n % (p * 2) === 0) p *= 2;
  return p;
}

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * The row layout: among vector widths 16/8/4 bytes (those the head dim and `align` allow) and
 * scalar loads, each with R the largest power of two dividing the row's vectors or the next power
 * of two above their count (padded), keep those whose per-lane state (G x E values for the query
 * and as many for the accumulator) stays within 32 values per array, else those with the fewest;
 * then the fewest lane-loads per row (R x NV), then the widest vector.
 */
export function pagedLayout(dtype: DType, headDim: number, group: number, align: number): PagedLayout {
  const size = elemBytes(dtype);
  const rowBytes = headDim * size;
  const cands: PagedLayout[] = [];
  for (const vb of [...new Set([16, 8, 4, size])]) {
    if (vb < size || vb % size !== 0 || rowBytes % vb !== 0) continue;
    if (vb !== size && align % vb !== 0) continue;
    const nVec = rowBytes / vb;
    for (const r of new Set([Math.min(32, pow2Divisor(nVec)), Math.min(32, nextPow2(nVec))])) {
      const nv = Math.ceil(nVec / r);
      cands.push({ vb, ve: vb / size, r, nv, padded: r * nv !== nVec, tpw: 32 / r });
    }
  }
  const per = (c: PagedLayout): number => group * c.nv * c.ve;
  const fit = cands.filter((c) => per(c) <= 32);
  const least = Math.min(...cands.map(per));
  const pool = fit.length > 0 ? fit : cands.filter((c) => per(c) === least);
  pool.sort((a, b) => a.r * a.nv - b.r * b.nv || b.vb - a.vb || a.r - b.r);
  return pool[0]!;
}

/** Warps per block: 4, fewer when the merge's shared memory (warps x G x headDim) would not fit. */
export function pagedWarps(dtype: DType, headDim: number, group: number): number {
  let w = 4;
  while (w > 1 && sharedElems(w, headDim, group) * accBytes(dtype) > SHARED_BYTES) w /= 2;
  return w;
}

/** Shared memory elements: the warps' accumulators (reused for the fold's split weights), maxes and sums. */
export function sharedElems(nw: number, headDim: number, group: number): number {
  return Math.max(nw * group * headDim, 2 * PAGED_MAX_SPLITS * group) + 2 * nw * group;
}

export function pagedPlan(s: Pick<PagedAttentionSpec, 'dtype' | 'headDim' | 'group' | 'align'>): PagedPlan {
  const layout = pagedLayout(s.dtype, s.headDim, s.group, s.align);
  const e = layout.nv * layout.ve;
  const words = s.dtype === 'float64' ? 2 : 1;
  // Registers: the query and accumulator (2 G E values) stay; each token batch in flight holds a K
  // and a V vector per NV (VB / 4 registers each). Up to 4 batches within about 112 registers.
  const state = 2 * s.group * e * words;
  const perBatch = 2 * layout.nv * Math.max(1, layout.vb / 4);
  const u = Math.max(1, Math.min(4, Math.floor((112 - state) / perBatch)));
  const nw = pagedWarps(s.dtype, s.headDim, s.group);
  return { layout, e, u, nw, span: nw * layout.tpw * u };
}

/** Head dims up to 512, up to 16 query heads per kv head, the merge within 48 KiB of shared memory. */
export function pagedAttentionSupported(s: { headDim: number; group: number; dtype: DType }): boolean {
  return s.headDim >= 1 && s.headDim <= 512 && s.group >= 1 && s.group <= 16 && sharedElems(1, s.headDim, s.group) * accBytes(s.dtype) <= SHARED_BYTES;
}

/**
 * Splits per (sequence, kv head): enough blocks for BLOCKS_PER_SM per SM, at most
 * PAGED_MAX_SPLITS and at most one per chunk of the table's capacity; 1 when there are more
 * (sequence, kv head) pairs than counters. Depends on no length (a captured graph replays it).
 */
export function pagedSplits(batch: number, kvHeads: number, capacityTokens: number, span: number, sms: number): number {
  const pairs = batch * kvHeads;
  if (pairs > PAGED_COUNTERS) return 1;
  const want = Math.ceil((BLOCKS_PER_SM * sms) / pairs);
  return Math.max(1, Math.min(PAGED_MAX_SPLITS, want, Math.ceil(capacityTokens / span)));
}

export function pagedAttentionParams(dtype: DType): ParamType[] {
  return [
    'ptr', 'ptr', 'i64', 'i64', 'i64', // error claim, report, codes: block id, length, split counter
    'ptr', 'i64', 'i64', // query, row stride, head stride
    'ptr', 'ptr', // key cache, value cache
    'ptr', 'i64', // block tables, row stride
    'ptr', // context lengths
    'ptr', 'ptr', 'ptr', // out, partial accumulators, partial (max, sum)
    'i32', 'i32', 'i32', 'i32', dtype === 'float64' ? 'f64' : 'f32', 'i32', // numBlocks, blockSize, maxBlocks, kvHeads, scale, splits
  ];
}

export function pagedAttentionName(s: PagedAttentionSpec): string {
  const p = pagedPlan(s);
  const l = p.layout;
  return `kiln_paged_attn_${s.dtype}_${s.tableDtype}_${s.lenDtype}_d${s.headDim}_g${s.group}_b${l.vb}r${l.r}n${l.nv}_u${p.u}_w${p.nw}`;
}

/*
 * The CUDA C text v2 and v3 (paged-attention-v3.ts) share, as builders over one PagedText: v3 is
 * v2 with a register double buffer around the token loop, base-2 exponentials (the query
 * prescaled by scale x log2(e)) and its own launch bounds, so the parts that do not depend on
 * those are written once here. Each builder returns whole lines, every one ending in a newline, for
 * a generator to splice between its own lines. Comments inside the CUDA text are part of the
 * source: where v2's and v3's differ they stay in the generators, so both sources are unchanged
 * by the sharing (scripts/paged-attention-sources-hash.mjs checks that).
 */

/** What the shared text builders need of one kernel: its spec, name, plan and C types. */
export interface PagedText {
  readonly s: PagedAttentionSpec;
  readonly name: string;
  readonly plan: Pick<PagedPlan, 'layout' | 'e' | 'u' | 'nw'>;
  /** Storage C type of the dtype. */
  readonly st: string;
  /** Compute C type: double for float64, else float. */
  readonly ct: CType;
  /** The exponential of the softmax, the merges and the fold (v2: e-based; v3: base 2). */
  readonly exp: string;
  /** `inRow(j)`: vector j of this lane lies in the row (always, unless the layout is padded). */
  readonly inRow: (j: string) => string;
}

export function pagedText(s: PagedAttentionSpec, name: string, plan: PagedText['plan'], exp: string): PagedText {
  const padded = plan.layout.padded;
  return { s, name, plan, st: storageType(s.dtype), ct: computeType(s.dtype), exp, inRow: (j) => (padded ? `(${j} * R + r < NVEC)` : 'true') };
}

/**
 * The defines, types and helpers, the kernel's signature (launch bounds `bounds`, e.g. `NW * 32`)
 * and its first lines, up to this lane's first token offset lt0.
 */
export function pagedKernelHead(p: PagedText, bounds: string): string {
  const { s, name, st, ct } = p;
  const { layout: l, e: E, u: U, nw: NW } = p.plan;
  const vt = l.vb === 16 ? 'uint4' : l.vb === 8 ? 'uint2' : l.vb === 4 && l.ve > 1 ? 'unsigned int' : st;
  const ninf = ct === 'double' ? '__longlong_as_double((long long)0xfff0000000000000ULL)' : '__int_as_float(0xff800000)';
  return `${PRELUDE}${REPORT_INDEX_C}
#define D ${s.headDim}
#define G ${s.group}
#define R ${l.r}
#define LOG2R ${Math.log2(l.r)}
#define NV ${l.nv}
#define VE ${l.ve}
#define E ${E}
#define NVEC ${s.headDim / l.ve}
#define TPW ${l.tpw}
#define U ${U}
#define NW ${NW}
#define SPAN (NW * TPW * U)
#define MAXS ${PAGED_MAX_SPLITS}
#define NINF ${ninf}
${s.blockShift !== undefined ? `#define BS_SHIFT ${s.blockShift}
#define TBLK(t) ((t) >> BS_SHIFT)
#define TOFF(t) ((t) & ((1 << BS_SHIFT) - 1))` : `#define TBLK(t) ((t) / BS)
#define TOFF(t) ((t) % BS)`}
${s.index32 ? `// 32-bit element offsets: a pointer plus an unsigned offset is one wide multiply-add.
typedef unsigned kv_idx;
#define KV_BASE(blk, t) ((kv_idx)((((blk) ${s.blockShift !== undefined ? '<< BS_SHIFT' : '* BS'}) + TOFF(t)) * Hkv + kvh) * D)` : `typedef long long kv_idx;
#define KV_BASE(blk, t) ((((long long)(blk) * BS + TOFF(t)) * Hkv + kvh) * (long long)D)`}
typedef ${vt} kiln_vt;
union kiln_kv { kiln_vt raw; ${st} e[VE]; };
__device__ unsigned int ${name}_counters[${PAGED_COUNTERS}];
__device__ __forceinline__ int block_id(long long v, int numBlocks) { return v >= 0 && v < numBlocks ? (int)v : -1; }
/** Sum over the R lanes of a row (aligned groups of R lanes). */
__device__ __forceinline__ ${ct} row_sum(${ct} v) {
  #pragma unroll
  for (int o = R / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
extern "C" __global__ void __launch_bounds__(${bounds}) ${name}(
    unsigned long long* claim, long long* report, long long codeBlock, long long codeLen, long long codeSplit,
    const ${st}* __restrict__ q, long long qsb, long long qsh,
    const ${st}* __restrict__ kc, const ${st}* __restrict__ vc,
    const ${storageType(s.tableDtype)}* __restrict__ tables, long long tsb,
    const ${storageType(s.lenDtype)}* __restrict__ lens,
    ${st}* __restrict__ out, ${ct}* __restrict__ pacc, ${ct}* __restrict__ pml,
    int numBlocks, int BS, int M, int Hkv, ${ct} scale, int splits) {
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  // This row's block table (its address formed once, not per token).
  const ${storageType(s.tableDtype)}* __restrict__ trow = tables + (long long)b * tsb;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane & (R - 1), rg = lane >> LOG2R;
  const int H = Hkv * G;
  const int cap = M * BS;
  // This lane's token of batch u in chunk c: c * SPAN + lt0 + u * TPW.
  const int lt0 = warp * (U * TPW) + rg;
`;
}

/** The block ids of this split's first chunk into the int array `blk` (any of the row's M entries; -1 past the table). */
export function pagedFirstIds(blk: string): string {
  return `  #pragma unroll
  for (int u = 0; u < U; u++) {
    const int t = sp * SPAN + lt0 + u * TPW;
    ${blk}[u] = t < cap ? block_id(trow[TBLK(t)], numBlocks) : -1;
  }
`;
}

/** The query heads of the group into qv, each value times `factor` (a C suffix such as ` * qscale`, or ''). */
export function pagedQuery(p: PagedText, factor: string): string {
  const { s, ct } = p;
  return `  ${ct} qv[G][E];
  #pragma unroll
  for (int g = 0; g < G; g++) {
    #pragma unroll
    for (int j = 0; j < NV; j++) {
      #pragma unroll
      for (int k = 0; k < VE; k++) {
        qv[g][j * VE + k] = ${p.inRow('j')} ? ${loadAs(s.dtype, 'q[b * qsb + (long long)(kvh * G + g) * qsh + (j * R + r) * VE + k]', ct)}${factor} : (${ct})0;
      }
    }
  }
`;
}

/**
 * The length's check (a length past the table is reported and read as 0), the chunk and active
 * split counts (a split past them returns) and the online-softmax state.
 */
export function pagedLengthAndState(p: PagedText): string {
  const { ct } = p;
  return `  if (L < 0 || L > cap) {
    if (threadIdx.x == 0 && kvh == 0 && sp == 0) kiln_report_index(claim, report, codeLen, L, (long long)cap + 1);
    L = 0;
  }
  const int len = (int)L;
  const int nChunks = (len + SPAN - 1) / SPAN;
  const int nActive = len == 0 ? 1 : (nChunks < splits ? nChunks : splits);
  if (sp >= nActive) return;
  ${ct} m[G], l[G], acc[G][E];
  #pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = NINF; l[g] = 0;
    #pragma unroll
    for (int i = 0; i < E; i++) acc[g][i] = 0;
  }
`;
}

/**
 * Token u's table-entry check and row address (the loads' common part: pagedKvLoad, and v3's
 * predicated loads): a token below the length whose entry is not a block id is reported (its
 * entry read again for the message) and masked; `base` is its K/V row's first element (0 when
 * masked).
 */
export function pagedKvBase(OK: string): string {
  return `      if (${OK}[u] && blk < 0) {
        if (r == 0) kiln_report_index(claim, report, codeBlock, (long long)trow[TBLK(t)], numBlocks);
        ${OK}[u] = false;
      }
      // 32-bit TBLK(t) and TOFF(t): t < M * BS, which the launcher keeps below 2^31.
      const kv_idx base = ${OK}[u] ? KV_BASE(blk, t) : 0;
`;
}

/**
 * Inside a loop over the token batches u, after `t`, `blk` and `OK[u]` (token below the length)
 * are set: a block id that is not one is reported and masks the token; the row's K/V vectors go
 * to K[u]/V[u] (zeros where masked or past the row).
 */
export function pagedKvLoad(p: PagedText, K: string, V: string, OK: string): string {
  return `${pagedKvBase(OK)}      #pragma unroll
      for (int j = 0; j < NV; j++) {
        if (${OK}[u] && ${p.inRow('j')}) {
          const kv_idx at = base + (kv_idx)((j * R + r) * VE);
          ${K}[u][j].raw = __ldg(reinterpret_cast<const kiln_vt*>(kc + at));
          ${V}[u][j].raw = __ldg(reinterpret_cast<const kiln_vt*>(vc + at));
        } else {
          #pragma unroll
          for (int k = 0; k < VE; k++) { ${K}[u][j].e[k] = 0; ${V}[u][j].e[k] = 0; }
        }
      }
`;
}

/**
 * One chunk's math from kr/vr/ok: the scores (row sums times `scoreScale`, a C suffix or ''), then
 * one online-softmax update per query head for its U tokens.
 */
export function pagedChunkMath(p: PagedText, scoreScale: string): string {
  const { s, ct, exp } = p;
  return `    ${ct} sc[U][G];
    #pragma unroll
    for (int u = 0; u < U; u++) {
      #pragma unroll
      for (int g = 0; g < G; g++) {
        ${ct} dot = 0;
        #pragma unroll
        for (int j = 0; j < NV; j++) {
          #pragma unroll
          for (int k = 0; k < VE; k++) dot += qv[g][j * VE + k] * ${loadAs(s.dtype, 'kr[u][j].e[k]', ct)};
        }
        sc[u][g] = row_sum(dot)${scoreScale};
      }
    }
    // One online-softmax update per query head for the U tokens (lanes of a row group agree).
    #pragma unroll
    for (int g = 0; g < G; g++) {
      ${ct} mx = m[g];
      #pragma unroll
      for (int u = 0; u < U; u++) if (ok[u] && sc[u][g] > mx) mx = sc[u][g];
      if (mx == NINF) continue;
      const ${ct} corr = m[g] == NINF ? (${ct})0 : ${exp}(m[g] - mx);
      ${ct} p[U], ps = 0;
      #pragma unroll
      for (int u = 0; u < U; u++) { p[u] = ok[u] ? ${exp}(sc[u][g] - mx) : (${ct})0; ps += p[u]; }
      l[g] = l[g] * corr + ps;
      #pragma unroll
      for (int j = 0; j < NV; j++) {
        #pragma unroll
        for (int k = 0; k < VE; k++) {
          ${ct} a = acc[g][j * VE + k] * corr;
          #pragma unroll
          for (int u = 0; u < U; u++) a += p[u] * ${loadAs(s.dtype, 'vr[u][j].e[k]', ct)};
          acc[g][j * VE + k] = a;
        }
      }
      m[g] = mx;
    }
`;
}

/**
 * After the token loop: the warp's row groups merged by shuffles, the warps' states through
 * shared memory; one active split writes the output and returns, several write their partials.
 */
export function pagedMergeWarps(p: PagedText): string {
  const { s, ct, exp } = p;
  const { nw: NW } = p.plan;
  const smA = Math.max(NW * s.group * s.headDim, 2 * PAGED_MAX_SPLITS * s.group);
  return `  // Merge the warp's row groups (lanes r, r + R, ... hold the same features of other tokens).
  #pragma unroll
  for (int o = R; o < 32; o <<= 1) {
    #pragma unroll
    for (int g = 0; g < G; g++) {
      const ${ct} mo = __shfl_xor_sync(0xffffffffu, m[g], o);
      const ${ct} lo = __shfl_xor_sync(0xffffffffu, l[g], o);
      const ${ct} mx = mo > m[g] ? mo : m[g];
      const ${ct} f = m[g] == NINF ? (${ct})0 : ${exp}(m[g] - mx);
      const ${ct} fo = mo == NINF ? (${ct})0 : ${exp}(mo - mx);
      l[g] = l[g] * f + lo * fo;
      #pragma unroll
      for (int i = 0; i < E; i++) acc[g][i] = acc[g][i] * f + __shfl_xor_sync(0xffffffffu, acc[g][i], o) * fo;
      m[g] = mx;
    }
  }
  // smA: the warps' accumulators [NW][G][D]; after the merge, the fold's split maxes and weights.
  __shared__ ${ct} smA[${smA}];
  __shared__ ${ct} smM[NW][G], smL[NW][G];
  if (lane < R) {
    #pragma unroll
    for (int g = 0; g < G; g++) {
      if (lane == 0) { smM[warp][g] = m[g]; smL[warp][g] = l[g]; }
      #pragma unroll
      for (int j = 0; j < NV; j++) {
        if (${p.inRow('j')}) {
          #pragma unroll
          for (int k = 0; k < VE; k++) smA[(warp * G + g) * D + (j * R + r) * VE + k] = acc[g][j * VE + k];
        }
      }
    }
  }
  __syncthreads();
  const bool direct = nActive == 1;
  for (int i = threadIdx.x; i < G * D; i += NW * 32) {
    const int g = i / D, d = i - g * D;
    ${ct} mx = NINF;
    #pragma unroll
    for (int w = 0; w < NW; w++) if (smL[w][g] > 0 && smM[w][g] > mx) mx = smM[w][g];
    ${ct} ls = 0, a = 0;
    #pragma unroll
    for (int w = 0; w < NW; w++) {
      if (smL[w][g] > 0) {
        const ${ct} f = ${exp}(smM[w][g] - mx);
        ls += smL[w][g] * f;
        a += smA[(w * G + g) * D + d] * f;
      }
    }
    const long long row = (long long)b * H + kvh * G + g;
    if (direct) {
      out[row * D + d] = ${storeAs(s.dtype, `(ls > 0 ? a / ls : (${ct})0)`, ct)};
    } else {
      pacc[(row * splits + sp) * D + d] = a;
      if (d == 0) { pml[(row * splits + sp) * 2] = mx; pml[(row * splits + sp) * 2 + 1] = ls; }
    }
  }
  if (direct) return;
`;
}

/**
 * The split protocol (see this file's header): fence and barrier, one ticket per block, the last
 * of the nActive splits goes on to fold (the others return). `notes`: the protocol's comments
 * inline in the CUDA text (v2's source has them; v3's refers to v2's).
 */
export function pagedFoldTicket(p: PagedText, notes: boolean): string {
  const note = (text: string): string => (notes ? text : '');
  return `  __threadfence();
  __syncthreads();
${note(`  // A ticket, never a wait: no block spins on another, so the launch finishes whatever order (or
  // residency) its blocks get. Exactly nActive blocks of this (sequence, kv head) take a ticket
  // (the others returned above, before any barrier), so ticket nActive - 1 is the last arrival.
`)}  unsigned int* counter = &${p.name}_counters[b * Hkv + kvh];
  bool last = false;
  if (threadIdx.x == 0) {
    const unsigned int ticket = atomicAdd(counter, 1u);
    last = ticket == (unsigned int)(nActive - 1);
${note(`    // Every split of this launch has counted: back to 0 for the next launch on the stream.
`)}    if (last) atomicExch(counter, 0u);
${note(`    // A ticket past the last one cannot happen while launches of this module are ordered (one
    // stream); if it ever does, no block of this pair folds: say so instead of leaving stale output.
`)}    else if (ticket >= (unsigned int)nActive) kiln_report_index(claim, report, codeSplit, (long long)ticket, nActive);
  }
  if (!__syncthreads_or(last)) return;
  __threadfence();
`;
}

/** The last split's fold, in split order: per query head the splits' weights, then the output; closes the kernel. */
export function pagedFoldSplits(p: PagedText): string {
  const { s, ct, exp } = p;
  return `  ${ct}* fm = smA;
  ${ct}* fl = smA + MAXS * G;
  for (int i = threadIdx.x; i < nActive * G; i += NW * 32) {
    const int s = i / G, g = i - s * G;
    const long long row = (long long)b * H + kvh * G + g;
    fm[i] = __ldcg(&pml[(row * splits + s) * 2]);
    fl[i] = __ldcg(&pml[(row * splits + s) * 2 + 1]);
  }
  __syncthreads();
  for (int g = warp; g < G; g += NW) {
    ${ct} mx = NINF;
    for (int s = lane; s < nActive; s += 32) if (fl[s * G + g] > 0 && fm[s * G + g] > mx) mx = fm[s * G + g];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) { const ${ct} y = __shfl_xor_sync(0xffffffffu, mx, o); mx = y > mx ? y : mx; }
    ${ct} z = 0;
    for (int s = lane; s < nActive; s += 32) if (fl[s * G + g] > 0) z += fl[s * G + g] * ${exp}(fm[s * G + g] - mx);
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
    if (lane == 0) { smM[0][g] = mx; smL[0][g] = z; }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nActive * G; i += NW * 32) {
    const int g = i % G;
    const ${ct} z = smL[0][g];
    fm[i] = fl[i] > 0 && z > 0 ? ${exp}(fm[i] - smM[0][g]) / z : (${ct})0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += NW * 32) {
    const int g = i / D, d = i - g * D;
    const long long row = (long long)b * H + kvh * G + g;
    const ${ct}* pa = pacc + row * splits * D + d;
    ${ct} a = 0;
    #pragma unroll 4
    for (int s = 0; s < nActive; s++) a += __ldcg(pa + (long long)s * D) * fm[s * G + g];
    out[row * D + d] = ${storeAs(s.dtype, 'a', ct)};
  }
}
`;
}

export function generatePagedAttention(s: PagedAttentionSpec): GeneratedKernel {
  const name = pagedAttentionName(s);
  const p = pagedText(s, name, pagedPlan(s), computeType(s.dtype) === 'double' ? 'exp' : '__expf');
  const source = `${pagedKernelHead(p, 'NW * 32')}  // Loads that need nothing else, issued together: the length, the block ids of this split's
  // first chunk (any of the row's M entries may be read before the length is known) and the query.
  long long L = (long long)lens[b];
  // Block ids as int (a valid one is below numBlocks); -1 for one outside the cache, which the
  // loop reads again to report if its token is inside the length.
  int blkNext[U];
${pagedFirstIds('blkNext')}${pagedQuery(p, '')}${pagedLengthAndState(p)}  for (int c = sp; c < nChunks; c += splits) {
    kiln_kv kr[U][NV], vr[U][NV];
    bool ok[U];
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const int t = c * SPAN + lt0 + u * TPW;
      const int blk = blkNext[u];
      ok[u] = t < len;
${pagedKvLoad(p, 'kr', 'vr', 'ok')}    }
    // The next chunk's block ids, in flight while this chunk computes.
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const int tn = (c + splits) * SPAN + lt0 + u * TPW;
      blkNext[u] = (c + splits < nChunks && tn < len) ? block_id(trow[TBLK(tn)], numBlocks) : -1;
    }
${pagedChunkMath(p, ' * scale')}  }
${pagedMergeWarps(p)}  // Publish the partials (every thread's writes fenced, then the barrier, before thread 0 counts
  // this split in: the counter must not run ahead of any thread's partials); the last of the
  // nActive splits folds them.
${pagedFoldTicket(p, true)}  // Per query head: the splits' max, then weight_s = exp(m_s - max) / sum_s' l_s' exp(m_s' - max).
${pagedFoldSplits(p)}`;
  return { name, source, params: pagedAttentionParams(s.dtype) };
}

export const RESHAPE_AND_CACHE_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'];

export function reshapeAndCacheName(dtype: DType, slotDtype: 'int32' | 'int64'): string {
  return `kiln_reshape_and_cache_${dtype}_${slotDtype}`;
}

/**
 * One thread per element of the new rows (grid-stride): element (n, h, d) of key/value (any
 * strides) goes to slot slotMapping[n] of the contiguous caches; slot -1 (padding) is skipped, a
 * slot past the cache is reported once per row (d == 0, h == 0) and skipped.
 */
export function generateReshapeAndCache(dtype: DType, slotDtype: 'int32' | 'int64'): GeneratedKernel {
  const name = reshapeAndCacheName(dtype, slotDtype);
  const st = storageType(dtype);
  const source = `${PRELUDE}${REPORT_INDEX_C}
extern "C" __global__ void ${name}(unsigned long long* claim, long long* report, long long code,
    const ${st}* __restrict__ key, const ${st}* __restrict__ value, ${st}* __restrict__ kc, ${st}* __restrict__ vc,
    const ${storageType(slotDtype)}* __restrict__ slots, long long total, long long Hkv, long long D, long long capacity,
    long long ksn, long long ksh, long long ksd, long long vsn, long long vsh, long long vsd) {
  const long long row = Hkv * D;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long n = e / row, w = e % row, h = w / D, d = w % D;
    const long long s = (long long)slots[n];
    if (s < 0) continue;
    if (s >= capacity) { if (w == 0) kiln_report_index(claim, report, code, s, capacity); continue; }
    kc[s * row + w] = key[n * ksn + h * ksh + d * ksd];
    vc[s * row + w] = value[n * vsn + h * vsh + d * vsd];
  }
}
`;
  return { name, source, params: RESHAPE_AND_CACHE_PARAMS };
}
