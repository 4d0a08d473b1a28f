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
import { REPORT_INDEX_C } from '../../../runtime/cuda/device-errors.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './ctypes.js';
import { PAGED_COUNTERS, PAGED_MAX_SPLITS, pagedAttentionParams, pagedLayout, pagedWarps, type PagedAttentionSpec, type PagedLayout } from './paged-attention.js';
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
}

export function pagedPlanV3(s: Pick<PagedAttentionSpecV3, 'dtype' | 'headDim' | 'group' | 'align' | 'unroll'>): PagedPlanV3 {
  const layout = pagedLayout(s.dtype, s.headDim, s.group, s.align);
  const e = layout.nv * layout.ve;
  const words = s.dtype === 'float64' ? 2 : 1;
  // The query and accumulators stay (2 G E values); each token batch holds a K and a V vector per
  // NV (VB / 4 registers each), twice (the chunk computed and the chunk in flight).
  const state = 2 * s.group * e * words;
  const perBatch = 2 * 2 * layout.nv * Math.max(1, layout.vb / 4);
  const u = s.unroll ? s.unroll : Math.max(1, Math.min(4, Math.floor((REG_CAP - REG_OVERHEAD - state) / perBatch)));
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
  return `kiln_paged_attn_v3_${s.dtype}_${s.tableDtype}_${s.lenDtype}_d${s.headDim}_g${s.group}_b${l.vb}r${l.r}n${l.nv}_u${p.u}_w${p.nw}_m${p.minBlocks}`;
}

export function generatePagedAttentionV3(s: PagedAttentionSpecV3): GeneratedKernel {
  if (s.unroll !== undefined && !(Number.isInteger(s.unroll) && s.unroll >= 0 && s.unroll <= 8)) throw new Error(`paged attention v3: unroll takes 0..8, got ${s.unroll}`);
  const name = pagedAttentionNameV3(s);
  const { layout: l, e: E, u: U, nw: NW, minBlocks } = pagedPlanV3(s);
  const st = storageType(s.dtype);
  const ct = computeType(s.dtype);
  const D = s.headDim;
  const G = s.group;
  const exp2 = ct === 'double' ? 'exp2' : 'exp2f';
  const log2e = ct === 'double' ? '1.4426950408889634' : '1.44269504f';
  const vt = l.vb === 16 ? 'uint4' : l.vb === 8 ? 'uint2' : l.vb === 4 && l.ve > 1 ? 'unsigned int' : st;
  const ninf = ct === 'double' ? '__longlong_as_double((long long)0xfff0000000000000ULL)' : '__int_as_float(0xff800000)';
  const nVec = D / l.ve;
  const smA = Math.max(NW * G * D, 2 * PAGED_MAX_SPLITS * G);
  const inRow = (j: string): string => (l.padded ? `(${j} * R + r < NVEC)` : 'true');
  /**
   * Issue the K/V loads of chunk `c` (an int expression; may be past the last chunk: then every
   * token is masked) into K/V/OK, with the block ids in blkA. A token below the length whose id is
   * not a block id is reported (its table entry read again for the message) and masked. t is only
   * formed for a chunk below nChunks (no int overflow near the table's 2^31-token bound).
   */
  const issue = (c: string, K: string, V: string, OK: string): string => `
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const bool inC = ${c} < nChunks;
      const int t = inC ? ${c} * SPAN + lt0 + u * TPW : 0;
      const int blk = blkA[u];
      ${OK}[u] = inC && t < len;
      if (${OK}[u] && blk < 0) {
        if (r == 0) kiln_report_index(claim, report, codeBlock, (long long)tables[b * tsb + t / BS], numBlocks);
        ${OK}[u] = false;
      }
      // 32-bit t / BS and t % BS: t < M * BS, which the launcher keeps below 2^31.
      const long long base = ${OK}[u] ? (((long long)blk * BS + t % BS) * Hkv + kvh) * (long long)D : 0;
      #pragma unroll
      for (int j = 0; j < NV; j++) {
        if (${OK}[u] && ${inRow('j')}) {
          ${K}[u][j].raw = __ldg(reinterpret_cast<const kiln_vt*>(kc + base + (j * R + r) * VE));
          ${V}[u][j].raw = __ldg(reinterpret_cast<const kiln_vt*>(vc + base + (j * R + r) * VE));
        } else {
          #pragma unroll
          for (int k = 0; k < VE; k++) { ${K}[u][j].e[k] = 0; ${V}[u][j].e[k] = 0; }
        }
      }
    }`;
  /** The block ids of chunk `c` into blkA (-1 past the last chunk or the length). */
  const ids = (c: string): string => `
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const bool inC = ${c} < nChunks;
      const int t = inC ? ${c} * SPAN + lt0 + u * TPW : 0;
      blkA[u] = inC && t < len ? block_id(tables[b * tsb + t / BS], numBlocks) : -1;
    }`;
  const source = `${PRELUDE}${REPORT_INDEX_C}
#define D ${D}
#define G ${G}
#define R ${l.r}
#define LOG2R ${Math.log2(l.r)}
#define NV ${l.nv}
#define VE ${l.ve}
#define E ${E}
#define NVEC ${nVec}
#define TPW ${l.tpw}
#define U ${U}
#define NW ${NW}
#define SPAN (NW * TPW * U)
#define MAXS ${PAGED_MAX_SPLITS}
#define NINF ${ninf}
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
extern "C" __global__ void __launch_bounds__(NW * 32, ${minBlocks}) ${name}(
    unsigned long long* claim, long long* report, long long codeBlock, long long codeLen, long long codeSplit,
    const ${st}* __restrict__ q, long long qsb, long long qsh,
    const ${st}* __restrict__ kc, const ${st}* __restrict__ vc,
    const ${storageType(s.tableDtype)}* __restrict__ tables, long long tsb,
    const ${storageType(s.lenDtype)}* __restrict__ lens,
    ${st}* __restrict__ out, ${ct}* __restrict__ pacc, ${ct}* __restrict__ pml,
    int numBlocks, int BS, int M, int Hkv, ${ct} scale, int splits) {
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane & (R - 1), rg = lane >> LOG2R;
  const int H = Hkv * G;
  const int cap = M * BS;
  // This lane's token of batch u in chunk c: c * SPAN + lt0 + u * TPW.
  const int lt0 = warp * (U * TPW) + rg;
  // Issued together, needing nothing else: the length, this split's first chunk's block ids (any
  // of the row's M entries may be read before the length is known; an id is only used for a token
  // below the length) and the query.
  long long L = (long long)lens[b];
  int blkA[U];
  #pragma unroll
  for (int u = 0; u < U; u++) {
    const int t = sp * SPAN + lt0 + u * TPW;
    blkA[u] = t < cap ? block_id(tables[b * tsb + t / BS], numBlocks) : -1;
  }
  // The query times scale x log2(e): scores in log2 units, p = exp2(s - m).
  const ${ct} qscale = scale * ${log2e};
  ${ct} qv[G][E];
  #pragma unroll
  for (int g = 0; g < G; g++) {
    #pragma unroll
    for (int j = 0; j < NV; j++) {
      #pragma unroll
      for (int k = 0; k < VE; k++) {
        qv[g][j * VE + k] = ${inRow('j')} ? ${loadAs(s.dtype, 'q[b * qsb + (long long)(kvh * G + g) * qsh + (j * R + r) * VE + k]', ct)} * qscale : (${ct})0;
      }
    }
  }
  if (L < 0 || L > cap) {
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
  // The register double buffer: kr/vr hold chunk c (being computed), kn/vn chunk c + splits (in
  // flight), blkA the ids of the chunk after that.
  kiln_kv kr[U][NV], vr[U][NV];
  bool ok[U];
  ${issue('sp', 'kr', 'vr', 'ok')}
  {
    const int c1 = sp + splits;
    ${ids('c1')}
  }
  for (int c = sp; c < nChunks; c += splits) {
    kiln_kv kn[U][NV], vn[U][NV];
    bool okn[U];
    const int cn = c + splits;
    ${issue('cn', 'kn', 'vn', 'okn')}
    {
      // No int overflow: c < nChunks <= 2^31 - 2^16 (the launcher's table bound), splits <= MAXS.
      const int c2 = cn + splits;
      ${ids('c2')}
    }
    ${ct} sc[U][G];
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
        sc[u][g] = row_sum(dot);
      }
    }
    // One online-softmax update per query head for the U tokens (lanes of a row group agree).
    #pragma unroll
    for (int g = 0; g < G; g++) {
      ${ct} mx = m[g];
      #pragma unroll
      for (int u = 0; u < U; u++) if (ok[u] && sc[u][g] > mx) mx = sc[u][g];
      if (mx == NINF) continue;
      const ${ct} corr = m[g] == NINF ? (${ct})0 : ${exp2}(m[g] - mx);
      ${ct} p[U], ps = 0;
      #pragma unroll
      for (int u = 0; u < U; u++) { p[u] = ok[u] ? ${exp2}(sc[u][g] - mx) : (${ct})0; ps += p[u]; }
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
    #pragma unroll
    for (int u = 0; u < U; u++) {
      ok[u] = okn[u];
      #pragma unroll
      for (int j = 0; j < NV; j++) { kr[u][j] = kn[u][j]; vr[u][j] = vn[u][j]; }
    }
  }
  // Merge the warp's row groups (lanes r, r + R, ... hold the same features of other tokens).
  #pragma unroll
  for (int o = R; o < 32; o <<= 1) {
    #pragma unroll
    for (int g = 0; g < G; g++) {
      const ${ct} mo = __shfl_xor_sync(0xffffffffu, m[g], o);
      const ${ct} lo = __shfl_xor_sync(0xffffffffu, l[g], o);
      const ${ct} mx = mo > m[g] ? mo : m[g];
      const ${ct} f = m[g] == NINF ? (${ct})0 : ${exp2}(m[g] - mx);
      const ${ct} fo = mo == NINF ? (${ct})0 : ${exp2}(mo - mx);
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
        if (${inRow('j')}) {
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
        const ${ct} f = ${exp2}(smM[w][g] - mx);
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
  // v2's fold (paged-attention.ts): every thread's partials fenced, a barrier, then one ticket per
  // block; the last of the nActive splits folds them in split order. No block waits for another.
  __threadfence();
  __syncthreads();
  unsigned int* counter = &${name}_counters[b * Hkv + kvh];
  bool last = false;
  if (threadIdx.x == 0) {
    const unsigned int ticket = atomicAdd(counter, 1u);
    last = ticket == (unsigned int)(nActive - 1);
    if (last) atomicExch(counter, 0u);
    else if (ticket >= (unsigned int)nActive) kiln_report_index(claim, report, codeSplit, (long long)ticket, nActive);
  }
  if (!__syncthreads_or(last)) return;
  __threadfence();
  // Per query head: the splits' max, then weight_s = exp2(m_s - max) / sum_s' l_s' exp2(m_s' - max).
  ${ct}* fm = smA;
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
    for (int s = lane; s < nActive; s += 32) if (fl[s * G + g] > 0) z += fl[s * G + g] * ${exp2}(fm[s * G + g] - mx);
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
    if (lane == 0) { smM[0][g] = mx; smL[0][g] = z; }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nActive * G; i += NW * 32) {
    const int g = i % G;
    const ${ct} z = smL[0][g];
    fm[i] = fl[i] > 0 && z > 0 ? ${exp2}(fm[i] - smM[0][g]) / z : (${ct})0;
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
  return { name, source, params: pagedAttentionParams(s.dtype) };
}
