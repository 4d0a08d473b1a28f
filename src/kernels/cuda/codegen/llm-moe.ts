/**
 * CUDA C for the MoE library ops (vLLM semantics; the math is in src/ops/defs/llm-moe.ts and the
 * CPU kernels in src/kernels/cpu/llm-moe.ts, which these follow step by step).
 *
 * - `route` (topkSoftmax and groupedTopk): one warp per token. The warp stages the token's scores
 *   in its slice of shared memory, then selects by rounds of warp-wide argmax (ties: lower index,
 *   as the CPU's stable top-k), marking each winner taken. groupedTopk first scores the groups
 *   (max, or the sum of the two best biased scores with a correction bias, DeepSeek-V3), keeps the
 *   topkGroup best groups the same way and masks the other experts to -inf.
 * - `moeSum`: out[t, h] = sum_j x[t, j, h], j in order, one thread per (t, h) group of VEC
 *   elements (16-byte loads when x is contiguous and aligned).
 * - fusedMoe pieces: `count` (tokens per expert, shared-memory histogram, and a flag for ids out of
 *   range), `scatter` (one block per expert: the stable position of each (token, slot) pair in
 *   expert order, through warp ballots, so the permutation never depends on atomics' timing),
 *   `gather` (the permuted input rows), `actMul` (act(gate) * up over all permuted rows) and
 *   `unpermute` (the routing-weighted sum of each token's slots, in slot order).
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';

export interface MoeKernel {
  name: string;
  source: string;
  params: ParamType[];
}

/** Tokens (warps) per block of the routing kernel. */
export const ROUTE_WARPS = 4;

const WARP_HELPERS = `
template <typename T> __device__ __forceinline__ T kiln_warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T> __device__ __forceinline__ T kiln_warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = w > v ? w : v; }
  return v;
}
// Warp argmax over (value, index): larger value first, equal values by lower index; every lane
// ends with the same winner.
template <typename T> __device__ __forceinline__ void kiln_warp_argmax(T& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor_sync(0xffffffffu, v, o);
    int j = __shfl_xor_sync(0xffffffffu, i, o);
    if (w > v || (w == v && j < i)) { v = w; i = j; }
  }
}
// Lane-strided argmax of a[0..n) (ties: lower index), then across the warp.
template <typename T> __device__ __forceinline__ void kiln_argmax(const T* a, int n, int lane, T& bv, int& bi) {
  bv = -(T)KILN_INF; bi = 0x7fffffff;
  for (int e = lane; e < n; e += 32) { T v = a[e]; if (v > bv || (v == bv && e < bi)) { bv = v; bi = e; } }
  kiln_warp_argmax<T>(bv, bi);
}
`;

export interface RouteSpec {
  grouped: boolean;
  inDtype: DType;
  /** Correction bias dtype (grouped only; null: none). */
  biasDtype: DType | null;
}

export function routeCompute(d: DType): CType {
  return d === 'float64' ? 'double' : 'float';
}

// (x, bias, weights, ids, T, E, sx0, sx1, k, renorm, groups, topkGroup, sigmoid, scale)
const ROUTE_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i32', 'i32', 'i32', 'i32', 'i32', 'f64'];

/** Shared bytes per warp: selection values [E], (grouped: scores [E], group scores [G]), winners [k] + ints [k + G]. */
export function routeSharedPerWarp(spec: RouteSpec, E: number, k: number, groups: number): number {
  const cb = routeCompute(spec.inDtype) === 'double' ? 8 : 4;
  const reals = E + (spec.grouped ? E + groups : 0) + k;
  const ints = k + (spec.grouped ? groups : 0);
  return Math.ceil((reals * cb + ints * 4) / 16) * 16;
}

export function routeSource(spec: RouteSpec): MoeKernel {
  const ct = routeCompute(spec.inDtype);
  const it = storageType(spec.inDtype);
  const bt = spec.biasDtype ? storageType(spec.biasDtype) : 'float';
  const name = `kiln_moe_route_${spec.grouped ? 'grouped' : 'softmax'}_${spec.inDtype}${spec.biasDtype ? `_b${spec.biasDtype}` : ''}`;
  const load = (e: string): string => loadAs(spec.inDtype, `xr[(long long)(${e}) * sx1]`, ct);
  const grouped = spec.grouped
    ? `
  // Group scores: the best biased score, or with a bias the sum of the two best (DeepSeek-V3).
  const int per = E / groups;
  for (int g = lane; g < groups; g += 32) {
    ${ct} a = -(${ct})KILN_INF, b = -(${ct})KILN_INF;
    for (int e = g * per; e < (g + 1) * per; e++) { ${ct} v = sel[e]; if (v > a) { b = a; a = v; } else if (v > b) b = v; }
    gsc[g] = ${spec.biasDtype ? 'a + b' : 'a'};
  }
  __syncwarp();
  for (int r = 0; r < topkGroup; r++) {
    ${ct} bv; int bi;
    kiln_argmax<${ct}>(gsc, groups, lane, bv, bi);
    if (lane == 0) { keep[r] = bi; gsc[bi] = -(${ct})KILN_INF; }
    __syncwarp();
  }
  for (int g = lane; g < groups; g += 32) gsc[g] = (${ct})0;
  __syncwarp();
  for (int r = lane; r < topkGroup; r += 32) gsc[keep[r]] = (${ct})1;
  __syncwarp();
  for (int e = lane; e < E; e += 32) if (gsc[e / per] == (${ct})0) sel[e] = -(${ct})KILN_INF;
  __syncwarp();`
    : '';
  const source = `${PRELUDE}${WARP_HELPERS}
extern "C" __global__ void __launch_bounds__(${ROUTE_WARPS * 32}) ${name}(const ${it}* __restrict__ x, const ${bt}* __restrict__ bias,
    ${ct}* __restrict__ weights, int* __restrict__ ids, long long T, int E, long long sx0, long long sx1,
    int k, int renorm, int groups, int topkGroup, int useSigmoid, double scale) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int perWarp = ${spec.grouped ? '2 * E + groups + k' : 'E + k'};
  ${ct}* sel = (${ct}*)kiln_smem + (long long)warp * perWarp;
  ${ct}* win = sel + ${spec.grouped ? '2 * E + groups' : 'E'};
  ${spec.grouped ? `${ct}* sc = sel + E;\n  ${ct}* gsc = sc + E;` : ''}
  int* ints = (int*)((${ct}*)kiln_smem + (long long)${ROUTE_WARPS} * perWarp) + (long long)warp * (k${spec.grouped ? ' + groups' : ''});
  int* wid = ints;
  ${spec.grouped ? 'int* keep = ints + k;' : ''}
  for (long long t = (long long)blockIdx.x * ${ROUTE_WARPS} + warp; t < T; t += (long long)gridDim.x * ${ROUTE_WARPS}) {
    const ${it}* xr = x + t * sx0;
    ${spec.grouped ? `if (useSigmoid) {
      for (int e = lane; e < E; e += 32) { ${ct} v = ${load('e')}; sc[e] = (${ct})1 / ((${ct})1 + kiln_exp(-v)); }
    } else` : ''} {
      ${ct} m = -(${ct})KILN_INF;
      for (int e = lane; e < E; e += 32) { ${ct} v = ${load('e')}; ${spec.grouped ? 'sc' : 'sel'}[e] = v; m = v > m ? v : m; }
      m = kiln_warp_max<${ct}>(m);
      ${ct} s = 0;
      for (int e = lane; e < E; e += 32) { ${ct} v = kiln_exp(${spec.grouped ? 'sc' : 'sel'}[e] - m); ${spec.grouped ? 'sc' : 'sel'}[e] = v; s += v; }
      s = kiln_warp_sum<${ct}>(s);
      for (int e = lane; e < E; e += 32) ${spec.grouped ? 'sc' : 'sel'}[e] = ${spec.grouped ? 'sc' : 'sel'}[e] / s;
    }
    ${spec.grouped ? `for (int e = lane; e < E; e += 32) sel[e] = sc[e]${spec.biasDtype ? ` + ${loadAs(spec.biasDtype, 'bias[e]', ct)}` : ''};` : ''}
    __syncwarp();${grouped}
    for (int r = 0; r < k; r++) {
      ${ct} bv; int bi;
      kiln_argmax<${ct}>(sel, E, lane, bv, bi);
      if (lane == 0) { wid[r] = bi; win[r] = ${spec.grouped ? 'sc[bi]' : 'bv'}; sel[bi] = -(${ct})KILN_INF; }
      __syncwarp();
    }
    ${ct} s = 0;
    for (int r = lane; r < k; r += 32) s += win[r];
    s = kiln_warp_sum<${ct}>(s);
    for (int r = lane; r < k; r += 32) {
      const ${ct} w = renorm ? win[r] / s : win[r];
      weights[t * k + r] = ${spec.grouped ? `w * (${ct})scale` : 'w'};
      ids[t * k + r] = wid[r];
    }
    __syncwarp();
  }
}
`;
  return { name, source, params: ROUTE_PARAMS };
}

// (x, out, T, K, H, sx0, sx1, sx2)
const SUM_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64', 'i64'];

/** moeSum with VEC elements per thread (VEC > 1: x contiguous, 16-byte aligned rows). */
export function moeSumSource(d: DType, vec: number): MoeKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const name = `kiln_moe_sum_${d}_v${vec}`;
  const body =
    vec === 1
      ? `
    const long long h = i % H, tok = i / H;
    ${ct} acc = 0;
#pragma unroll 8
    for (int j = 0; j < K; j++) acc += ${loadAs(d, 'x[tok * sx0 + j * sx1 + h * sx2]', ct)};
    out[i] = ${storeAs(d, 'acc', ct)};`
      : `
    const long long hv = i % (H / ${vec}), tok = i / (H / ${vec});
    static_assert(sizeof(kiln_vec<${t}, ${vec}>) == 16, "moeSum: one 16-byte load per row");
    ${ct} acc[${vec}];
#pragma unroll
    for (int v = 0; v < ${vec}; v++) acc[v] = 0;
    const ${t}* xb = x + tok * sx0 + hv * ${vec};
    // Unrolled so the K loads (top-k is usually 2-8) are all in flight before the first add: a
    // rolled loop waited out one load's latency per expert (fp32 [1024, 8, 4096] at 2.9 TB/s).
    // Streaming loads (ld.global.cs, evict-first): x is read exactly once, so its lines should not
    // push other data out of L2; fp32 [1024, 8, 4096] measured 0.0378 -> 0.0365 ms device time (s6).
#pragma unroll 8
    for (int j = 0; j < K; j++) {
      const int4 raw = __ldcs(reinterpret_cast<const int4*>(xb + j * sx1));
      const kiln_vec<${t}, ${vec}> a = *reinterpret_cast<const kiln_vec<${t}, ${vec}>*>(&raw);
#pragma unroll
      for (int v = 0; v < ${vec}; v++) acc[v] += ${loadAs(d, 'a.v[v]', ct)};
    }
    kiln_vec<${t}, ${vec}> o;
#pragma unroll
    for (int v = 0; v < ${vec}; v++) o.v[v] = ${storeAs(d, 'acc[v]', ct)};
    *(kiln_vec<${t}, ${vec}>*)(out + tok * H + hv * ${vec}) = o;`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ out,
    long long T, int K, long long H, long long sx0, long long sx1, long long sx2) {
  const long long n = T * H / ${vec};
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {${body}
  }
}
`;
  return { name, source, params: SUM_PARAMS };
}

// (ids, n, topk, s0, s1, E, counts) ; counts has E + 1 ints, the last a flag for ids out of range
const COUNT_PARAMS: ParamType[] = ['ptr', 'i64', 'i32', 'i64', 'i64', 'i32', 'ptr'];

export function moeCountSource(idDtype: DType): MoeKernel {
  const t = storageType(idDtype);
  const name = `kiln_moe_count_${idDtype}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${t}* __restrict__ ids, long long n, int topk, long long s0, long long s1, int E, int* __restrict__ counts) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  int bad = 0;
  for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x) {
    const long long e = (long long)ids[(p / topk) * s0 + (p % topk) * s1];
    if (e < 0 || e >= E) bad = 1; else atomicAdd(&hist[e], 1);
  }
  if (bad) atomicOr(&counts[E], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) if (hist[e]) atomicAdd(&counts[e], hist[e]);
}
`;
  return { name, source, params: COUNT_PARAMS };
}

/** Threads of the scatter kernel (one block per expert). */
export const SCATTER_THREADS = 1024;

// (ids, n, topk, s0, s1, E, counts, perm, inv)
const SCATTER_PARAMS: ParamType[] = ['ptr', 'i64', 'i32', 'i64', 'i64', 'i32', 'ptr', 'ptr', 'ptr'];

export function moeScatterSource(idDtype: DType): MoeKernel {
  const t = storageType(idDtype);
  const name = `kiln_moe_scatter_${idDtype}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${SCATTER_THREADS}) ${name}(const ${t}* __restrict__ ids, long long n, int topk, long long s0, long long s1, int E,
    const int* __restrict__ counts, int* __restrict__ perm, int* __restrict__ inv) {
  __shared__ int warpCount[32];
  __shared__ int base;
  const int e = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (threadIdx.x == 0) { int o = 0; for (int j = 0; j < e; j++) o += counts[j]; base = o; }
  __syncthreads();
  // Chunks of blockDim pairs in (token, slot) order: a pair's position is the expert's offset, the
  // matches of earlier chunks and warps, and the matching lanes below it in its own warp.
  for (long long c = 0; c < n; c += blockDim.x) {
    const long long p = c + threadIdx.x;
    const bool hit = p < n && (long long)ids[(p / topk) * s0 + (p % topk) * s1] == e;
    const unsigned int ball = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warpCount[warp] = __popc(ball);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < warps; w++) { int cw = warpCount[w]; before += w < warp ? cw : 0; total += cw; }
    if (hit) {
      const int pos = base + before + __popc(ball & ((1u << lane) - 1u));
      perm[pos] = (int)p;
      inv[p] = pos;
    }
    __syncthreads();
    if (threadIdx.x == 0) base += total;
    __syncthreads();
  }
}
`;
  return { name, source, params: SCATTER_PARAMS };
}

// (x, xp, perm, n, topk, H, sx0, sx1)
const GATHER_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64'];

/** xp[q, :] = x[perm[q] / topk, :] (xp contiguous [n, H]). */
export function moeGatherSource(d: DType): MoeKernel {
  const t = storageType(d);
  const name = `kiln_moe_gather_${d}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ xp, const int* __restrict__ perm,
    long long n, int topk, long long H, long long sx0, long long sx1) {
  const long long total = n * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long q = i / H, h = i % H;
    xp[i] = x[(long long)(perm[q] / topk) * sx0 + h * sx1];
  }
}
`;
  return { name, source, params: GATHER_PARAMS };
}

// (gu, a, n, I)
const ACT_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64', 'i64'];

/**
 * a[q, i] = act(gu[q, i]) * gu[q, I + i] over contiguous [n, 2I] -> [n, I]. gu is in the compute
 * type (the gate/up GEMM writes float32 for half inputs); a is stored in the input dtype, the
 * down GEMM's operand.
 */
/** The activation of a gate value `g` in compute type `ct` (shared with llm-moe-gemv.ts). */
export function actExpr(act: 'silu' | 'gelu', ct: CType): string {
  return act === 'silu' ? `g / ((${ct})1 + kiln_exp(-g))` : `g * (${ct})0.5 * ((${ct})1 + erf(g * (${ct})0.70710678118654752440))`;
}

export function moeActSource(d: DType, act: 'silu' | 'gelu'): MoeKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const name = `kiln_moe_act_${act}_${d}`;
  const f = actExpr(act, ct);
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${ct}* __restrict__ gu, ${t}* __restrict__ a, long long n, long long I) {
  const long long total = n * I;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long q = i / I, j = i % I;
    const ${ct} g = gu[q * 2 * I + j];
    const ${ct} u = gu[q * 2 * I + I + j];
    a[i] = ${storeAs(d, `(${f}) * u`, ct)};
  }
}
`;
  return { name, source, params: ACT_PARAMS };
}

// (down, w, inv, out, T, topk, H, sw0, sw1)
const UNPERMUTE_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'i64', 'i64'];

/** out[t, h] = sum_j w[t, j] * down[inv[t * topk + j], h], j in order (down in the compute type, out contiguous). */
export function moeUnpermuteSource(d: DType, wDtype: DType): MoeKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const wt = storageType(wDtype);
  const name = `kiln_moe_unpermute_${d}_w${wDtype}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${ct}* __restrict__ down, const ${wt}* __restrict__ w, const int* __restrict__ inv,
    ${t}* __restrict__ out, long long T, int topk, long long H, long long sw0, long long sw1) {
  const long long total = T * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long tok = i / H, h = i % H;
    ${ct} acc = 0;
    for (int j = 0; j < topk; j++) {
      const ${ct} wj = ${loadAs(wDtype, 'w[tok * sw0 + j * sw1]', ct)};
      acc += wj * down[(long long)inv[tok * topk + j] * H + h];
    }
    out[i] = ${storeAs(d, 'acc', ct)};
  }
}
`;
  return { name, source, params: UNPERMUTE_PARAMS };
}

/** Every source variant (for the local nvcc check). */
export function allMoeSources(): MoeKernel[] {
  const out: MoeKernel[] = [];
  for (const d of ['float32', 'float16', 'bfloat16', 'float64'] as DType[]) {
    out.push(routeSource({ grouped: false, inDtype: d, biasDtype: null }));
    out.push(routeSource({ grouped: true, inDtype: d, biasDtype: null }));
    out.push(routeSource({ grouped: true, inDtype: d, biasDtype: d }));
    out.push(moeSumSource(d, 1), moeSumSource(d, d === 'float64' ? 2 : d === 'float32' ? 4 : 8));
    out.push(moeGatherSource(d), moeActSource(d, 'silu'), moeActSource(d, 'gelu'), moeUnpermuteSource(d, 'float32'));
  }
  for (const d of ['int32', 'int64'] as DType[]) out.push(moeCountSource(d), moeScatterSource(d));
  return out;
}
