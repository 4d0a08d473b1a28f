/**
 * The first cuda llm.pagedAttention decode kernel (sessions 9-13), the default
 * (KILN_CUDA_PAGED_ATTN=v1) until the H200 A/B of the one-launch kernel (paged-attention.ts, v2),
 * and the baseline bench/cuda-paged-attention.ts times v2 against. In the shape of vLLM's
 * paged_attention_v2:
 *
 * One thread block per (kv head, sequence, split); its warps stride over the split's tokens U at
 * a time (pagedUnrollV1); a lane holds headDim / 32 features of the query, key and value; each of
 * the G query heads that share the kv head keeps its own online softmax state, so K and V are read
 * once for the whole group (GQA). The warps' states are merged through shared memory. A
 * sequence's split size is chosen on the device from its own length (ceil(len / splits), a
 * multiple of the warp stride); with one split the block writes the output, otherwise
 * unnormalised partials (acc, max, sum) that a second kernel (generatePagedReduceV1) merges.
 *
 * Table entries: only those of tokens below the length are read (t < end <= len), so entries past
 * ceil(len / blockSize) are never read, checked or used.
 *
 * Why v2 was written (H200 profile of Qwen3-0.6B decode at batch 1, 129 tokens: 13.7 us per
 * layer): the chain length before, inside and after the token loop, not bandwidth: the length,
 * then the table, then K/V were loaded one after another; each token's score waited on a
 * 5-step shuffle and two exps per query head; 8 warps merged through shared memory even when a
 * block had a few tokens; and the split partials went through a second kernel launch.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { REPORT_INDEX_C } from '../../../runtime/cuda/device-errors.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './ctypes.js';
import type { GeneratedKernel } from './pointwise.js';

/** Bytes of shared memory the warp merge may use (48 KiB, the static limit). */
const SHARED_BYTES = 49152;

type Geometry = Pick<PagedAttentionSpecV1, 'headDim' | 'group' | 'dtype'>;

/** Bytes of one accumulator element (double for float64, else float). */
function accBytes(dtype: DType): number {
  return dtype === 'float64' ? 8 : 4;
}

/**
 * Tokens a warp has in flight per iteration: 4, fewer when the per-lane state (query, accumulator
 * and the in-flight K/V rows: 2 x group x headDim / 32 + 2 x U x headDim / 32 values) would spill.
 */
export function pagedUnrollV1(s: Geometry): number {
  const perLane = (s.group * Math.ceil(s.headDim / 32) * 32) / 32;
  return Math.max(1, Math.min(4, Math.floor(64 / perLane)));
}

export interface PagedAttentionSpecV1 {
  readonly dtype: DType;
  readonly tableDtype: 'int32' | 'int64';
  readonly lenDtype: 'int32' | 'int64';
  readonly headDim: number;
  /** Query heads per kv head. */
  readonly group: number;
  /**
   * Whether a lane reads its headDim / 32 features of a K or V row with one 4-, 8- or 16-byte load
   * (pagedVectorBytes) instead of one load per element: only when the caches are aligned to it
   * (the launcher checks) and headDim is a multiple of 32.
   */
  readonly vec?: boolean;
}

/** Bytes of one lane's share of a K/V row when that is one aligned vector load (4, 8 or 16), else 0. */
export function pagedVectorBytesV1(dtype: DType, headDim: number): number {
  if (headDim % 32 !== 0) return 0;
  const size = dtype === 'float64' ? 8 : dtype === 'float32' ? 4 : 2;
  const bytes = (headDim / 32) * size;
  return bytes === 4 || bytes === 8 || bytes === 16 ? bytes : 0;
}

/** Warps per block: 8 unless the merge's shared memory (warps x group x headDim) needs fewer. */
export function pagedWarpsV1(s: Geometry): number {
  let w = 8;
  while (w > 1 && w * s.group * (s.headDim + 2) * accBytes(s.dtype) > SHARED_BYTES) w /= 2;
  return w;
}

/** Head dims up to 512 (16 per lane), groups whose merge fits shared memory. */
export function pagedAttentionSupportedV1(s: Geometry): boolean {
  return s.headDim >= 1 && s.headDim <= 512 && s.group >= 1 && s.group <= 16 && s.group * (s.headDim + 2) * accBytes(s.dtype) <= SHARED_BYTES;
}

export const PAGED_ATTENTION_PARAMS_V1: ParamType[] = [
  'ptr', 'ptr', 'i64', 'i64', // error claim, report, codes: block id, length
  'ptr', 'i64', 'i64', // query, row stride, head stride
  'ptr', 'ptr', // key cache, value cache
  'ptr', 'i64', // block tables, row stride
  'ptr', // context lengths
  'ptr', 'ptr', 'ptr', // out, partial accumulators, partial (max, sum)
  'i32', 'i32', 'i32', 'i32', 'f32', 'i32', // numBlocks, blockSize, maxBlocks, kvHeads, scale, splits
];

export function pagedAttentionNameV1(s: PagedAttentionSpecV1): string {
  return `kiln_paged_attn_v1_${s.dtype}_${s.tableDtype}_${s.lenDtype}_d${s.headDim}_g${s.group}_u${pagedUnrollV1(s)}_w${pagedWarpsV1(s)}${s.vec ? '_v' : ''}`;
}

export function generatePagedAttentionV1(s: PagedAttentionSpecV1): GeneratedKernel {
  const name = pagedAttentionNameV1(s);
  const st = storageType(s.dtype);
  const ct = computeType(s.dtype);
  const D = s.headDim;
  const G = s.group;
  // A lane's share of the head dim; with headDim not a multiple of 32 the last lanes hold padding.
  const E = Math.ceil(D / 32);
  const NW = pagedWarpsV1(s);
  const U = pagedUnrollV1(s);
  const exp = ct === 'double' ? 'exp' : '__expf';
  const vecBytes = s.vec ? pagedVectorBytesV1(s.dtype, D) : 0;
  if (s.vec && vecBytes === 0) throw new Error(`paged attention: no vector load for ${s.dtype} headDim ${D}`);
  const rawType = vecBytes === 16 ? 'uint4' : vecBytes === 8 ? 'uint2' : 'unsigned int';
  const ninf = ct === 'double' ? '__longlong_as_double((long long)0xfff0000000000000ULL)' : '__int_as_float(0xff800000)';
  const source = `${PRELUDE}${REPORT_INDEX_C}
#define D ${D}
#define G ${G}
#define E ${E}
#define NW ${NW}
#define U ${U}
__device__ __forceinline__ ${ct} warp_sum(${ct} v) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
extern "C" __global__ void __launch_bounds__(NW * 32) ${name}(
    unsigned long long* claim, long long* report, long long codeBlock, long long codeLen,
    const ${st}* __restrict__ q, long long qsb, long long qsh,
    const ${st}* __restrict__ kc, const ${st}* __restrict__ vc,
    const ${storageType(s.tableDtype)}* __restrict__ tables, long long tsb,
    const ${storageType(s.lenDtype)}* __restrict__ lens,
    ${st}* __restrict__ out, ${ct}* __restrict__ pacc, ${ct}* __restrict__ pml,
    int numBlocks, int BS, int M, int Hkv, float scale, int splits) {
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int H = Hkv * G;
  long long L = (long long)lens[b];
  const long long cap = (long long)M * BS;
  if (L < 0 || L > cap) {
    if (threadIdx.x == 0 && kvh == 0 && sp == 0) kiln_report_index(claim, report, codeLen, L, cap + 1);
    L = 0;
  }
  // This sequence's split size: its own length over the splits, a multiple of the warp stride.
  const long long stride = (long long)NW * U;
  long long part = (L + splits - 1) / splits;
  part = ((part + stride - 1) / stride) * stride;
  const long long start = (long long)sp * part;
  const long long end = L < start + part ? L : start + part;
  ${ct} qv[G][E], acc[G][E], m[G], l[G];
  #pragma unroll
  for (int g = 0; g < G; g++) {
    m[g] = ${ninf}; l[g] = 0;
    #pragma unroll
    for (int e = 0; e < E; e++) {
      qv[g][e] = lane * E + e < D ? ${loadAs(s.dtype, `q[b * qsb + (long long)(kvh * G + g) * qsh + lane * E + e]`, ct)} : (${ct})0;
      acc[g][e] = 0;
    }
  }
  for (long long t0 = start + (long long)warp * U; t0 < end; t0 += stride) {
    ${ct} kr[U][E], vr[U][E];
    bool ok[U];
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const long long t = t0 + u;
      ok[u] = t < end;
      long long blk = 0;
      // 32-bit division: t < M * BS, which the launcher keeps below 2^31 (a 64-bit divide is a
      // long instruction sequence, paid per token).
      const int ti = (int)t;
      if (ok[u]) {
        blk = (long long)tables[b * tsb + ti / BS];
        if (blk < 0 || blk >= numBlocks) {
          if (lane == 0) kiln_report_index(claim, report, codeBlock, blk, numBlocks);
          ok[u] = false;
        }
      }
      const long long base = ok[u] ? (((blk * BS + ti % BS) * Hkv + kvh) * D + lane * E) : 0;
${vecBytes > 0 ? `      if (ok[u]) {
        union { ${rawType} raw; ${st} e[E]; } uk, uv;
        uk.raw = __ldg(reinterpret_cast<const ${rawType}*>(kc + base));
        uv.raw = __ldg(reinterpret_cast<const ${rawType}*>(vc + base));
        #pragma unroll
        for (int e = 0; e < E; e++) { kr[u][e] = ${loadAs(s.dtype, 'uk.e[e]', ct)}; vr[u][e] = ${loadAs(s.dtype, 'uv.e[e]', ct)}; }
      } else {
        #pragma unroll
        for (int e = 0; e < E; e++) { kr[u][e] = (${ct})0; vr[u][e] = (${ct})0; }
      }` : `      #pragma unroll
      for (int e = 0; e < E; e++) {
        const bool in = ok[u] && lane * E + e < D;
        kr[u][e] = in ? ${loadAs(s.dtype, 'kc[base + e]', ct)} : (${ct})0;
        vr[u][e] = in ? ${loadAs(s.dtype, 'vc[base + e]', ct)} : (${ct})0;
      }`}
    }
    #pragma unroll
    for (int u = 0; u < U; u++) {
      if (!ok[u]) continue;
      #pragma unroll
      for (int g = 0; g < G; g++) {
        ${ct} dot = 0;
        #pragma unroll
        for (int e = 0; e < E; e++) dot += qv[g][e] * kr[u][e];
        const ${ct} sc = warp_sum(dot) * (${ct})scale;
        const ${ct} mn = sc > m[g] ? sc : m[g];
        const ${ct} corr = ${exp}(m[g] - mn);
        const ${ct} p = ${exp}(sc - mn);
        l[g] = l[g] * corr + p;
        #pragma unroll
        for (int e = 0; e < E; e++) acc[g][e] = acc[g][e] * corr + p * vr[u][e];
        m[g] = mn;
      }
    }
  }
  __shared__ ${ct} smM[NW][G], smL[NW][G];
  __shared__ ${ct} smA[NW][G][D];
  #pragma unroll
  for (int g = 0; g < G; g++) {
    if (lane == 0) { smM[warp][g] = m[g]; smL[warp][g] = l[g]; }
    #pragma unroll
    for (int e = 0; e < E; e++) if (lane * E + e < D) smA[warp][g][lane * E + e] = acc[g][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += NW * 32) {
    const int g = i / D, d = i % D;
    ${ct} mx = ${ninf};
    for (int w = 0; w < NW; w++) if (smL[w][g] > 0 && smM[w][g] > mx) mx = smM[w][g];
    ${ct} ls = 0, a = 0;
    for (int w = 0; w < NW; w++) {
      if (smL[w][g] > 0) {
        const ${ct} f = ${exp}(smM[w][g] - mx);
        ls += smL[w][g] * f;
        a += smA[w][g][d] * f;
      }
    }
    const long long row = (long long)b * H + kvh * G + g;
    if (splits == 1) {
      out[row * D + d] = ${storeAs(s.dtype, `(ls > 0 ? a / ls : (${ct})0)`, ct)};
    } else {
      pacc[(row * splits + sp) * D + d] = a;
      if (d == 0) { pml[(row * splits + sp) * 2] = mx; pml[(row * splits + sp) * 2 + 1] = ls; }
    }
  }
}
`;
  return { name, source, params: PAGED_ATTENTION_PARAMS_V1 };
}

export const PAGED_REDUCE_PARAMS_V1: ParamType[] = ['ptr', 'ptr', 'ptr', 'i32', 'i32'];

/** Merges the splits' partials of each (sequence, head) row: grid = rows, block = headDim threads. */
export function generatePagedReduceV1(dtype: DType): GeneratedKernel {
  const name = `kiln_paged_attn_v1_reduce_${dtype}`;
  const ct = computeType(dtype);
  const exp = ct === 'double' ? 'exp' : '__expf';
  const source = `${PRELUDE}
extern "C" __global__ void ${name}(${storageType(dtype)}* __restrict__ out, const ${ct}* __restrict__ pacc, const ${ct}* __restrict__ pml, int D, int splits) {
  const long long row = blockIdx.x;
  const ${ct}* ml = pml + row * splits * 2;
  ${ct} mx = 0;
  bool any = false;
  for (int s = 0; s < splits; s++) if (ml[2 * s + 1] > 0 && (!any || ml[2 * s] > mx)) { mx = ml[2 * s]; any = true; }
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    ${ct} ls = 0, a = 0;
    for (int s = 0; s < splits; s++) {
      const ${ct} l = ml[2 * s + 1];
      if (l > 0) { const ${ct} f = ${exp}(ml[2 * s] - mx); ls += l * f; a += pacc[(row * splits + s) * D + d] * f; }
    }
    out[row * D + d] = ${storeAs(dtype, `(ls > 0 ? a / ls : (${ct})0)`, ct)};
  }
}
`;
  return { name, source, params: PAGED_REDUCE_PARAMS_V1 };
}

