/**
 * Skinny bfloat16 GEMMs (M <= 8 rows times a [N, K] weight), the decode step's shape, on Kiln's own
 * weight-streaming kernel instead of cuBLASLt. A decode step at batch 1..8 is a pass over the
 * weights: each output column n needs row n of W once, whatever M is. Profiled on the H200
 * (bench/cuda-profile.ts qwen3-0.6b-decode-b1, device time per kernel): cuBLASLt's picks took
 * 10 us per Qwen3-0.6B linear at M = 1, 1.14 ms of the 1.55 ms step for 1.19 GB of weights, about a
 * quarter of the memory bandwidth.
 *
 * Kernel: 256 threads; each row of W (one output column) belongs to `KW` warps that split K
 * between them (KW = 1 for wide layers; 2, 4 or 8 when N is small, so that enough blocks stream
 * at once), each lane reading 16 bytes (8 bf16) per step and keeping all M partial sums in
 * registers: W is read exactly once, x (M x K, a few KiB) comes from L1. Warp shuffles, then
 * shared memory across the KW warps, reduce the sums; accumulation is float32 (as cuBLASLt's
 * bf16 GEMM), rounded once to bfloat16 (round to nearest even) at the store.
 *
 * Preconditions (else the caller runs cuBLASLt): bfloat16 in and out, no batch, alpha 1, beta 0,
 * x rows and W rows contiguous along K with 16-byte aligned starts and strides, K % 8 == 0.
 * KILN_GEMV_MAX_ROWS (default 1) is how many rows it takes: an H200 A/B of the decode benchmark
 * (bench/results/h200-s10-gemv-ab-2026-12-02.json, alternating runs) had batch 1 at 572-677 tok/s
 * with it against 457-493 without, but batch 8 at 3513-4015 against 4069-4224: with 8 rows the
 * fp32 FMAs on CUDA cores, not the weight stream, bound this kernel. 2 and 4 rows are not measured.
 */
import { getOption, setOption } from '../../runtime/config.js';
import type { DevPtr } from '../../runtime/cuda/ffi.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import { PREFETCH_BEGIN, PREFETCH_END, pdlEnabled } from '../../runtime/cuda/pdl.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';

/** The most rows of x one launch takes (all kept in registers per lane). */
export const GEMV_MAX_M = 8;
const THREADS = 256;
const WARPS = THREADS / 32;

const PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i64', 'i64', 'i64'];

/** Calls that ran here (tests and the A/B benchmark read it). */
export const gemvStats = { runs: 0 };

function name(m: number, kw: number): string {
  return `kiln_gemv_bf16_m${m}_kw${kw}`;
}

/**
 * bfloat16 load (`<prefix>_bf`) and round-to-nearest-even store (`<prefix>_tobf`) under a kernel
 * family's symbol prefix: `kiln_gv` for the GEMVs here, `kiln_mg` for mma-gemv.ts.
 */
export function bf16Helpers(prefix: string): string {
  return `static __device__ __forceinline__ float ${prefix}_bf(unsigned int h) { return __uint_as_float(h << 16); }
static __device__ __forceinline__ unsigned short ${prefix}_tobf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
`;
}
const BF16_HELPERS = bf16Helpers('kiln_gv');

/**
 * The dot products of one warp slot over its share of K, shared by the plain, gated and
 * norm-prologue kernels: `xLoad` is the expression that reads 8 bfloat16 of row r of x at k (from
 * global memory through the read-only cache, or from the normalised rows in shared memory).
 * Plain: one accumulator per row over W row n; gated: two, over the gate row n and the up row N + n.
 */
function plainDotLoop(m: number, kw: number, xLoad: string): string {
  return `const unsigned short* wr = w + (long long)n * ldw;
#pragma unroll 4
    for (int k = (sub * 32 + lane) * 8; k < K; k += ${kw * 32 * 8}) {
      const uint4 wv = __ldg(reinterpret_cast<const uint4*>(wr + k));
      const unsigned int wp[4] = {wv.x, wv.y, wv.z, wv.w};
      float wf[8];
#pragma unroll
      for (int j = 0; j < 4; j++) { wf[2 * j] = kiln_gv_bf(wp[j] & 0xffffu); wf[2 * j + 1] = kiln_gv_bf(wp[j] >> 16); }
#pragma unroll
      for (int r = 0; r < ${m}; r++) {
        const uint4 xv = ${xLoad};
        const unsigned int xp[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          acc[r] = fmaf(wf[2 * j], kiln_gv_bf(xp[j] & 0xffffu), acc[r]);
          acc[r] = fmaf(wf[2 * j + 1], kiln_gv_bf(xp[j] >> 16), acc[r]);
        }
      }
    }`;
}
function gatedDotLoop(m: number, kw: number, xLoad: string): string {
  return `const unsigned short* wg = w + (long long)n * ldw;
    const unsigned short* wu = w + (long long)(N + n) * ldw;
#pragma unroll 2
    for (int k = (sub * 32 + lane) * 8; k < K; k += ${kw * 32 * 8}) {
      const uint4 gv = __ldg(reinterpret_cast<const uint4*>(wg + k));
      const uint4 uv = __ldg(reinterpret_cast<const uint4*>(wu + k));
      const unsigned int gp[4] = {gv.x, gv.y, gv.z, gv.w};
      const unsigned int up[4] = {uv.x, uv.y, uv.z, uv.w};
#pragma unroll
      for (int r = 0; r < ${m}; r++) {
        const uint4 xv = ${xLoad};
        const unsigned int xp[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float x0 = kiln_gv_bf(xp[j] & 0xffffu), x1 = kiln_gv_bf(xp[j] >> 16);
          ag[r] = fmaf(kiln_gv_bf(gp[j] & 0xffffu), x0, ag[r]);
          ag[r] = fmaf(kiln_gv_bf(gp[j] >> 16), x1, ag[r]);
          au[r] = fmaf(kiln_gv_bf(up[j] & 0xffffu), x0, au[r]);
          au[r] = fmaf(kiln_gv_bf(up[j] >> 16), x1, au[r]);
        }
      }
    }`;
}
/**
 * silu(g) * u of the gated kernels' epilogue, each product rounded to bfloat16 first (as the linear
 * stores them), with the kernel family's symbol prefix (`kiln_gv` here, `kiln_mg` for
 * mma-gemv.ts): the family's `_bf`, `_tobf` (and under fast, `_rcp`, `_exp`) helpers come first.
 */
export function gateEpilogueHelper(prefix: string, fast: boolean): string {
  const silu = fast ? `g * ${prefix}_rcp(1.0f + ${prefix}_exp(-g))` : 'g / (1.0f + expf(-g))';
  return `static __device__ __forceinline__ unsigned short ${prefix}_gate(float g, float u, const unsigned short* __restrict__ bias, int n, int N) {
  if (bias) { g += ${prefix}_bf(bias[n]); u += ${prefix}_bf(bias[N + n]); }
  g = ${prefix}_bf(${prefix}_tobf(g));
  u = ${prefix}_bf(${prefix}_tobf(u));
  return ${prefix}_tobf((${silu}) * u);
}
`;
}
const gateHelper = (fast: boolean): string => gateEpilogueHelper('kiln_gv', fast);
/**
 * KILN_GEMV_PREFETCH (issue #17): under programmatic dependent launch a GEMV's blocks may start
 * while the previous kernel still runs, waiting in the PDL prologue (runtime/cuda/pdl.ts). With
 * this, each kernel body starts with a pre-wait section in which the first blocks prefetch the
 * weight's first bytes into L2 (cp.async.bulk.prefetch.L2, 8 lanes of 16 KiB per block, block b
 * the b-th 128 KiB slice, up to
 * GEMV_PREFETCH_MAX_BYTES; the gated kernels split it between the gate and the up rows): the
 * weight then streams from HBM while the predecessor (an RMSNorm, attention, another GEMV) runs,
 * and the dot-product loop reads L2. The prefetch is spread over the first blocks rather than each
 * block taking its own rows because only the blocks that fit beside the predecessor's start early,
 * and the block scheduler starts them in index order; the prefix is what the grid reads first
 * (blocks in order, the norm kernel's grid-stride loop in order). A weight over the bound (an LM
 * head's 311 MB against the 50 MB L2) gets only its prefix. Rows not contiguous (ldw != K): none.
 * After its own wait, a grid of at most one wave (`earlyBlocks`) triggers its dependents, so the
 * next GEMV's prefetch overlaps this one's stream (pdl.ts's own early trigger stops at the SM
 * count, and the decode GEMVs have 512-768 blocks). Results are bit-identical: nothing is loaded
 * into registers before the wait, and L2 is the point of coherence. Undefined: sources exactly as
 * without it.
 */
export interface GemvPrefetch {
  /** Grids of at most this many blocks trigger their dependents right after their own wait (0: never). */
  readonly earlyBlocks: number;
  /** false: no L2 prefetch section, only the trigger (option 'cuda.gemv.prefetchParts' = 'trigger'). */
  readonly prefetch?: boolean;
}
/** The most weight bytes one launch prefetches (about half the H200's 50 MB L2). */
export const GEMV_PREFETCH_MAX_BYTES = 24 * 2 ** 20;
const PREFETCH_LANES = 8;
const PREFETCH_LANE_BYTES = 16384;

/** KILN_GEMV_PREFETCH's setting for launches on device `index` (undefined: off). */
export function gemvPrefetchFor(index: number): GemvPrefetch | undefined {
  const o = getOption('KILN_GEMV_PREFETCH');
  if (o === '0') return undefined; // the common case: no device query, no PDL lookup
  const d = deviceInfo(index);
  return gemvPrefetchSetting(o, pdlEnabled(index), getOption('KILN_PDL') === 'wait', d.smCount, d.maxThreadsPerSM, getOption('cuda.gemv.prefetchParts') ?? 'both');
}

/** Overrides which parts of KILN_GEMV_PREFETCH apply (undefined: both); option 'cuda.gemv.prefetchParts', for benchmarks. */
export function setGemvPrefetchParts(parts: 'both' | 'prefetch' | 'trigger' | undefined): void {
  setOption('cuda.gemv.prefetchParts', parts);
}

/**
 * The decision of gemvPrefetchFor from its inputs (pure, for tests): off unless the option is
 * 'always' or it is '1' (or 'trigger': '1' with the trigger part only) with PDL on; the early
 * trigger up to one full wave of 256-thread blocks (the threads an SM holds, whatever the registers
 * allow: a larger grid cannot be resident at once), none under KILN_PDL=wait.
 */
export function gemvPrefetchSetting(option: string, pdlOn: boolean, pdlWaitOnly: boolean, smCount: number, maxThreadsPerSM: number, parts: 'both' | 'prefetch' | 'trigger' = 'both'): GemvPrefetch | undefined {
  if (option === 'trigger') return gemvPrefetchSetting('1', pdlOn, pdlWaitOnly, smCount, maxThreadsPerSM, 'trigger');
  if (option === '0' || (option === '1' && !pdlOn)) return undefined;
  const early = pdlWaitOnly || parts === 'prefetch' ? 0 : smCount * Math.floor(maxThreadsPerSM / THREADS);
  return parts === 'trigger' ? { earlyBlocks: early, prefetch: false } : { earlyBlocks: early };
}

/**
 * The pre-wait section and the early trigger that start a kernel body under KILN_GEMV_PREFETCH
 * ('' without it). `ranges`: 1 (W's rows [0, N)) or 2 (the gated kernels: gate rows [0, N) and up
 * rows [N, 2N)), each range's prefix bounded by GEMV_PREFETCH_MAX_BYTES / ranges. Uses w, N, K, ldw.
 */
function prefetchPreamble(pf: GemvPrefetch | undefined, ranges: 1 | 2): string {
  if (!pf) return '';
  const cap = Math.floor(GEMV_PREFETCH_MAX_BYTES / ranges / 16) * 16;
  const trigger = pf.earlyBlocks > 0
    ? `#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // After the wait: a grid of one wave lets the next kernel launch now (its prefetch overlaps this stream).
  if (gridDim.x <= ${Math.floor(pf.earlyBlocks)}u) asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
`
    : '';
  if (pf.prefetch === false) return trigger;
  return `  ${PREFETCH_BEGIN} the first blocks prefetch the weight's first bytes into L2 before the PDL wait (L2 prefetches only)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (blockIdx.x < ${Math.ceil(cap / (PREFETCH_LANES * PREFETCH_LANE_BYTES))}u && threadIdx.x < ${PREFETCH_LANES * ranges} && ldw == (long long)K) {
    const long long span = (long long)N * K * 2; // bytes of one range
    const unsigned int len = span < ${cap}ll ? (unsigned int)span : ${cap}u;
    const unsigned int off = (blockIdx.x * ${PREFETCH_LANES} + threadIdx.x % ${PREFETCH_LANES}) * ${PREFETCH_LANE_BYTES}u;
    if (off < len) {
      const unsigned int bytes = len - off < ${PREFETCH_LANE_BYTES}u ? len - off : ${PREFETCH_LANE_BYTES}u;
      const long long at = (threadIdx.x < ${PREFETCH_LANES} ? 0ll : span / 2) + off / 2; // elements: range start + offset
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(w + at), "r"(bytes) : "memory");
    }
  }
#endif
  ${PREFETCH_END}
${trigger}`;
}

/** x read from global memory (the plain and gated kernels). */
const X_GLOBAL = '__ldg(reinterpret_cast<const uint4*>(x + r * ldx + k))';
/** x read from the normalised rows in shared memory (the norm-prologue kernel). */
const X_SHARED = '*reinterpret_cast<const uint4*>(xs + r * K + k)';

/** CUDA C for M rows of x and KW warps per output column; `prefetch`: KILN_GEMV_PREFETCH's preamble. */
export function gemvSource(m: number, kw: number, prefetch?: GemvPrefetch): string {
  const rows = WARPS / kw;
  return `
${BF16_HELPERS}extern "C" __global__ void __launch_bounds__(${THREADS}) ${name(m, kw)}(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ w, unsigned short* __restrict__ out,
    const unsigned short* __restrict__ bias, int N, int K, long long ldx, long long ldw, long long ldo) {
${prefetchPreamble(prefetch, 1)}  __shared__ float part[${WARPS}][${m}];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slot = warp / ${kw}, sub = warp % ${kw};
  const int n = blockIdx.x * ${rows} + slot;
  float acc[${m}];
#pragma unroll
  for (int r = 0; r < ${m}; r++) acc[r] = 0.0f;
  if (n < N) {
    ${plainDotLoop(m, kw, X_GLOBAL)}
  }
#pragma unroll
  for (int r = 0; r < ${m}; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if (${kw} == 1) {
    if (n < N && lane < ${m}) {
      float v = 0.0f;
#pragma unroll
      for (int r = 0; r < ${m}; r++) if (r == lane) v = acc[r];
      if (bias) v += kiln_gv_bf(bias[n]);
      out[lane * ldo + n] = kiln_gv_tobf(v);
    }
    return;
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ${m}; r++) part[warp][r] = acc[r];
  }
  __syncthreads();
  if (sub == 0 && n < N && lane < ${m}) {
    float v = 0.0f;
#pragma unroll
    for (int s = 0; s < ${kw}; s++) v += part[warp + s][lane];
    if (bias) v += kiln_gv_bf(bias[n]);
    out[lane * ldo + n] = kiln_gv_tobf(v);
  }
}
`;
}

/** The fast-math exp (ex2.approx) and reciprocal (rcp.approx) of the gated epilogue, under a kernel family's prefix. */
export function fastMathHelpers(prefix: string): string {
  return `static __device__ __forceinline__ float ${prefix}_exp(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f)); return y; }
static __device__ __forceinline__ float ${prefix}_rcp(float d) { float y; asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(d)); return y; }
`;
}
const FAST_HELPERS = fastMathHelpers('kiln_gv');

/** Kernel name of the gated variant (llm.linearSiluAndMul). */
function gatedName(m: number, kw: number, fast: boolean): string {
  return `kiln_gemv_silu_mul_bf16_m${m}_kw${kw}${fast ? '_fast' : ''}`;
}

/**
 * The gated variant: W is [2N, K] (gate rows, then up rows), and output column n is
 * silu(g) * u of the products with rows n and N + n, each rounded to bfloat16 first (as the linear
 * stores them) and the result rounded once (as the fused silu * mul kernel stores it). Each warp
 * slot streams both rows, so W is still read once and the [M, 2N] intermediate never exists.
 * `fast`: silu through ex2.approx / rcp.approx, as generated kernels compute it under
 * KILN_CUDA_FAST_MATH (so the result equals the unfused kernels'); else expf and a division.
 */
export function gemvGatedSource(m: number, kw: number, fast: boolean, prefetch?: GemvPrefetch): string {
  const rows = WARPS / kw;
  return `
${BF16_HELPERS}${fast ? FAST_HELPERS : ''}${gateHelper(fast)}extern "C" __global__ void __launch_bounds__(${THREADS}) ${gatedName(m, kw, fast)}(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ w, unsigned short* __restrict__ out,
    const unsigned short* __restrict__ bias, int N, int K, long long ldx, long long ldw, long long ldo) {
${prefetchPreamble(prefetch, 2)}  __shared__ float part[${WARPS}][${2 * m}];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slot = warp / ${kw}, sub = warp % ${kw};
  const int n = blockIdx.x * ${rows} + slot;
  float ag[${m}], au[${m}];
#pragma unroll
  for (int r = 0; r < ${m}; r++) { ag[r] = 0.0f; au[r] = 0.0f; }
  if (n < N) {
    ${gatedDotLoop(m, kw, X_GLOBAL)}
  }
#pragma unroll
  for (int r = 0; r < ${m}; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ag[r] += __shfl_xor_sync(0xffffffffu, ag[r], o);
      au[r] += __shfl_xor_sync(0xffffffffu, au[r], o);
    }
  }
  if (${kw} == 1) {
    if (n < N && lane < ${m}) {
      float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int r = 0; r < ${m}; r++) if (r == lane) { g = ag[r]; u = au[r]; }
      out[lane * ldo + n] = kiln_gv_gate(g, u, bias, n, N);
    }
    return;
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ${m}; r++) { part[warp][r] = ag[r]; part[warp][${m} + r] = au[r]; }
  }
  __syncthreads();
  if (sub == 0 && n < N && lane < ${m}) {
    float g = 0.0f, u = 0.0f;
#pragma unroll
    for (int s = 0; s < ${kw}; s++) { g += part[warp + s][lane]; u += part[warp + s][${m} + lane]; }
    out[lane * ldo + n] = kiln_gv_gate(g, u, bias, n, N);
  }
}
`;
}

/** Runs the gated variant: `p.n` is the output width (half of W's rows), W [2n, k]. */
export function runGemvGated(index: number, stream: CudaStream, p: GemvProblem, fast: boolean): void {
  // Each slot streams two rows: pick the split as for 2n rows.
  const kw = gemvWarpsPerRow(2 * p.n, deviceInfo(index).smCount);
  const kern = kernelFromSource(index, gemvGatedSource(p.m, kw, fast, gemvPrefetchFor(index)), gatedName(p.m, kw, fast), PARAMS);
  gemvStats.runs++;
  launch(kern, [p.x, p.w, p.out, p.bias ?? 0, p.n, p.k, p.ldx, p.ldw, p.ldo], { grid: Math.ceil(p.n / (WARPS / kw)), block: THREADS }, stream);
}

/**
 * Warps per output column: the fewest that still give every SM a few blocks (a small N, such as
 * Qwen3's o/down projections with N = 1024, would otherwise stream from too few warps).
 */
export function gemvWarpsPerRow(n: number, sms: number): number {
  for (const kw of [1, 2, 4]) if (Math.ceil(n / (WARPS / kw)) >= 2 * sms) return kw;
  return 8;
}

export interface GemvProblem {
  m: number;
  n: number;
  k: number;
  /** x [M, K] (row stride ldx), W [N, K] (row stride ldw), out [M, N] (row stride ldo): element strides. */
  x: DevPtr;
  ldx: number;
  w: DevPtr;
  ldw: number;
  out: DevPtr;
  ldo: number;
  bias?: DevPtr;
}

/** Whether the kernel takes the problem (see the header's preconditions). */
export function gemvApplies(p: GemvProblem): boolean {
  const rows = Math.min(GEMV_MAX_M, Number(getOption('KILN_GEMV_MAX_ROWS')));
  if (p.m < 1 || p.m > rows || p.n < 1 || p.k < 8 || p.k % 8 !== 0) return false;
  if (p.x % 16 !== 0 || p.w % 16 !== 0 || p.ldx % 8 !== 0 || p.ldw % 8 !== 0) return false;
  if (p.out % 2 !== 0 || (p.bias !== undefined && p.bias % 2 !== 0)) return false;
  // 32-bit row indexing of out and of n: far beyond any weight that fits a GPU.
  return p.n < 2 ** 31 && p.k < 2 ** 31;
}

export function runGemv(index: number, stream: CudaStream, p: GemvProblem): void {
  const kw = gemvWarpsPerRow(p.n, deviceInfo(index).smCount);
  const kern = kernelFromSource(index, gemvSource(p.m, kw, gemvPrefetchFor(index)), name(p.m, kw), PARAMS);
  const rows = WARPS / kw;
  gemvStats.runs++;
  launch(kern, [p.x, p.w, p.out, p.bias ?? 0, p.n, p.k, p.ldx, p.ldw, p.ldo], { grid: Math.ceil(p.n / rows), block: THREADS }, stream);
}

/** Kernel name of the norm-prologue variant (llm.addRmsNormLinear). */
function normName(m: number, kw: number, gated: boolean, fast: boolean): string {
  return `kiln_gemv_rmsnorm${gated ? '_silu_mul' : ''}_bf16_m${m}_kw${kw}${gated && fast ? '_fast' : ''}`;
}

/** Shared memory the norm-prologue variant takes for M rows of K (the normalised rows, bfloat16). */
export function gemvNormSharedBytes(m: number, k: number): number {
  return m * k * 2;
}
/**
 * The grid of the norm-prologue variant over `groups` groups of output columns: one group per
 * block (as the plain GEMV) while that fits about one wave (8 blocks of 256 threads per SM on
 * sm_90), else 4 blocks per SM that are all resident at once (<= 64 registers a thread) and share
 * the groups evenly through the kernel's grid-stride loop, so the prologue runs once per block and
 * no late wave makes a tail. Qwen3-0.6B on 132 SMs: qkv (512 groups) and gate/up (768) one group a
 * block; the LM head (18,992 groups) 528 blocks of 36 groups.
 */
export function gemvNormGrid(groups: number, sms: number): number {
  return groups <= 8 * sms ? groups : 4 * sms;
}
/** Without the opt-in attribute a launch gets 48 KiB of dynamic shared memory. */
const NORM_SHARED_LIMIT = 48 * 1024;

/**
 * The norm-prologue variant (llm.addRmsNormLinear): every block first computes, for each of the M
 * rows, s = x + residual in float32 (residual may be null: s = x), rstd = rsqrtf(sum(s^2) / K +
 * eps), and the normalised row bf16((s * rstd) * gamma) into shared memory; block 0 also stores
 * bf16(s), the new residual stream. This is what the compiled program's generated add + rmsNorm
 * reduce kernel computes (the sum unrounded in the norm, the mean as a float division, rsqrtf, the
 * two products in that order, one rounding at each store); only the order of the float32 sum of
 * squares differs, which can move rstd by an ulp. Then the GEMV (plain or gated, as above) reads x
 * from shared memory. x, residual and gamma are K elements per row from L2: each block re-reading
 * them costs less than the launch and tail of a separate norm kernel at M = 1 (issue #17).
 */
export function gemvNormSource(m: number, kw: number, gated: boolean, fast: boolean, prefetch?: GemvPrefetch): string {
  const rows = WARPS / kw;
  const pw = gated ? 2 * m : m;
  const gate = gated ? gateHelper(fast) : '';
  // The pre-wait section prefetches the first group's rows (among others): the in-body prefetch goes.
  const preWait = prefetch !== undefined && prefetch.prefetch !== false;
  // The dot products: one accumulator per row (plain) or two (gate row n, up row N + n).
  const accDecl = gated ? `float ag[${m}], au[${m}];\n#pragma unroll\n  for (int r = 0; r < ${m}; r++) { ag[r] = 0.0f; au[r] = 0.0f; }` : `float acc[${m}];\n#pragma unroll\n  for (int r = 0; r < ${m}; r++) acc[r] = 0.0f;`;
  const loop = gated ? gatedDotLoop(m, kw, X_SHARED) : plainDotLoop(m, kw, X_SHARED);
  const shuffle = gated
    ? `ag[r] += __shfl_xor_sync(0xffffffffu, ag[r], o);
      au[r] += __shfl_xor_sync(0xffffffffu, au[r], o);`
    : `acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);`;
  const storeOne = gated
    ? `float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int r = 0; r < ${m}; r++) if (r == lane) { g = ag[r]; u = au[r]; }
      out[lane * ldo + n] = kiln_gv_gate(g, u, bias, n, N);`
    : `float v = 0.0f;
#pragma unroll
      for (int r = 0; r < ${m}; r++) if (r == lane) v = acc[r];
      if (bias) v += kiln_gv_bf(bias[n]);
      out[lane * ldo + n] = kiln_gv_tobf(v);`;
  const toPart = gated ? `part[warp][r] = ag[r]; part[warp][${m} + r] = au[r];` : `part[warp][r] = acc[r];`;
  const storeSplit = gated
    ? `float g = 0.0f, u = 0.0f;
#pragma unroll
    for (int s = 0; s < ${kw}; s++) { g += part[warp + s][lane]; u += part[warp + s][${m} + lane]; }
    out[lane * ldo + n] = kiln_gv_gate(g, u, bias, n, N);`
    : `float v = 0.0f;
#pragma unroll
    for (int s = 0; s < ${kw}; s++) v += part[warp + s][lane];
    if (bias) v += kiln_gv_bf(bias[n]);
    out[lane * ldo + n] = kiln_gv_tobf(v);`;
  return `
${BF16_HELPERS}${gated && fast ? FAST_HELPERS : ''}${gate}${preWait ? '' : 'static __device__ __forceinline__ void kiln_gv_prefetch(const unsigned short* p) { asm volatile("prefetch.global.L2 [%0];" :: "l"(p)); }\n'}// s = x (+ residual) of 8 elements at k, in float32 (the add's unrounded sum, as the norm reads it).
static __device__ __forceinline__ void kiln_gv_sum8(const unsigned short* __restrict__ x, const unsigned short* __restrict__ res, float* s) {
  const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x));
  const unsigned int xp[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
  for (int j = 0; j < 4; j++) { s[2 * j] = kiln_gv_bf(xp[j] & 0xffffu); s[2 * j + 1] = kiln_gv_bf(xp[j] >> 16); }
  if (res) {
    const uint4 rv = __ldg(reinterpret_cast<const uint4*>(res));
    const unsigned int rp[4] = {rv.x, rv.y, rv.z, rv.w};
#pragma unroll
    for (int j = 0; j < 4; j++) { s[2 * j] = s[2 * j] + kiln_gv_bf(rp[j] & 0xffffu); s[2 * j + 1] = s[2 * j + 1] + kiln_gv_bf(rp[j] >> 16); }
  }
}
extern "C" __global__ void __launch_bounds__(${THREADS}) ${normName(m, kw, gated, fast)}(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ res, const unsigned short* __restrict__ gamma,
    const unsigned short* __restrict__ w, unsigned short* __restrict__ out, unsigned short* __restrict__ hout,
    const unsigned short* __restrict__ bias, float eps, int N, int K, long long ldx, long long ldr, long long ldw,
    long long ldo, long long ldh) {
${prefetchPreamble(prefetch, gated ? 2 : 1)}  extern __shared__ __align__(16) unsigned short xs[]; // [${m}][K]: the normalised rows, bfloat16
  __shared__ float part[${WARPS}][${pw}];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
${preWait ? '' : `  // The first group's weight rows start their way from HBM into L2 now, so the stream overlaps the
  // prologue instead of waiting for it (a few 16-byte prefetches a lane; nothing is read yet).
  {
    const int n0 = blockIdx.x * ${rows} + warp / ${kw};
    if (n0 < N) {
      for (int k = ((warp % ${kw}) * 32 + lane) * 8; k < K; k += ${kw * 32 * 8}) {
        kiln_gv_prefetch(w + (long long)n0 * ldw + k);${gated ? '\n        kiln_gv_prefetch(w + (long long)(N + n0) * ldw + k);' : ''}
      }
    }
  }
`}  // Prologue 1: each row's sum of squares of s = x + residual (float32, unrounded).
  float ss[${m}];
#pragma unroll
  for (int r = 0; r < ${m}; r++) ss[r] = 0.0f;
  for (int k = threadIdx.x * 8; k < K; k += ${THREADS * 8}) {
#pragma unroll
    for (int r = 0; r < ${m}; r++) {
      float s[8];
      kiln_gv_sum8(x + r * ldx + k, res ? res + r * ldr + k : nullptr, s);
#pragma unroll
      for (int j = 0; j < 8; j++) ss[r] += s[j] * s[j];
    }
  }
#pragma unroll
  for (int r = 0; r < ${m}; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss[r] += __shfl_xor_sync(0xffffffffu, ss[r], o);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ${m}; r++) part[warp][r] = ss[r];
  }
  __syncthreads();
  float rstd[${m}];
#pragma unroll
  for (int r = 0; r < ${m}; r++) {
    float t = 0.0f;
#pragma unroll
    for (int q = 0; q < ${WARPS}; q++) t += part[q][r];
    rstd[r] = rsqrtf(t / (float)K + eps);
  }
  // Prologue 2: the normalised rows bf16((s * rstd) * gamma) into shared memory; block 0 stores bf16(s).
  const bool writeH = hout != nullptr && blockIdx.x == 0;
  for (int k = threadIdx.x * 8; k < K; k += ${THREADS * 8}) {
    const uint4 gv = __ldg(reinterpret_cast<const uint4*>(gamma + k));
    const unsigned int gp[4] = {gv.x, gv.y, gv.z, gv.w};
    float gf[8];
#pragma unroll
    for (int j = 0; j < 4; j++) { gf[2 * j] = kiln_gv_bf(gp[j] & 0xffffu); gf[2 * j + 1] = kiln_gv_bf(gp[j] >> 16); }
#pragma unroll
    for (int r = 0; r < ${m}; r++) {
      float s[8];
      kiln_gv_sum8(x + r * ldx + k, res ? res + r * ldr + k : nullptr, s);
      unsigned int yp[4], hp[4];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float y0 = (s[2 * j] * rstd[r]) * gf[2 * j];
        const float y1 = (s[2 * j + 1] * rstd[r]) * gf[2 * j + 1];
        yp[j] = (unsigned int)kiln_gv_tobf(y0) | ((unsigned int)kiln_gv_tobf(y1) << 16);
        hp[j] = (unsigned int)kiln_gv_tobf(s[2 * j]) | ((unsigned int)kiln_gv_tobf(s[2 * j + 1]) << 16);
      }
      *reinterpret_cast<uint4*>(xs + r * K + k) = make_uint4(yp[0], yp[1], yp[2], yp[3]);
      if (writeH) *reinterpret_cast<uint4*>(hout + r * ldh + k) = make_uint4(hp[0], hp[1], hp[2], hp[3]);
    }
  }
  __syncthreads(); // xs complete; part free again
  const int slot = warp / ${kw}, sub = warp % ${kw};
  // Grid-stride over the groups of ${rows} output columns: a wide weight (an LM head's vocabulary)
  // gets a grid of a few blocks per SM (runGemvNorm), so the prologue runs once per block, not once per group.
  for (int base = blockIdx.x * ${rows}; base < N; base += gridDim.x * ${rows}) {
  const int n = base + slot;
  ${accDecl}
  if (n < N) {
    ${loop}
  }
#pragma unroll
  for (int r = 0; r < ${m}; r++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ${shuffle}
    }
  }
  if (${kw} == 1) {
    if (n < N && lane < ${m}) {
      ${storeOne}
    }
    continue;
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ${m}; r++) { ${toPart} }
  }
  __syncthreads();
  if (sub == 0 && n < N && lane < ${m}) {
    ${storeSplit}
  }
  __syncthreads(); // part is rewritten by the next group
  }
}
`;
}

const NORM_PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'f32', 'i32', 'i32', 'i64', 'i64', 'i64', 'i64', 'i64'];

export interface GemvNormProblem extends GemvProblem {
  /** residual [M, K] (row stride ldr) or absent (s = x). */
  res?: DevPtr;
  ldr: number;
  gamma: DevPtr;
  eps: number;
  /** Where bf16(s) goes ([M, K], row stride ldh), or absent. */
  hout?: DevPtr;
  ldh: number;
}

/** Whether the norm-prologue variant takes the problem: the GEMV's conditions, 16-byte rows of residual / gamma / h, and its shared memory. */
export function gemvNormApplies(p: GemvNormProblem): boolean {
  if (!gemvApplies(p) || gemvNormSharedBytes(p.m, p.k) > NORM_SHARED_LIMIT || p.gamma % 16 !== 0) return false;
  if (p.res !== undefined && (p.res % 16 !== 0 || p.ldr % 8 !== 0)) return false;
  return p.hout === undefined || (p.hout % 16 === 0 && p.ldh % 8 === 0);
}

/** Runs the norm-prologue variant; `gated`: W is [2n, k] and the epilogue is silu(g) * u, as runGemvGated. */
export function runGemvNorm(index: number, stream: CudaStream, p: GemvNormProblem, gated: boolean, fast: boolean): void {
  const kw = gemvWarpsPerRow(gated ? 2 * p.n : p.n, deviceInfo(index).smCount);
  const kern = kernelFromSource(index, gemvNormSource(p.m, kw, gated, fast, gemvPrefetchFor(index)), normName(p.m, kw, gated, fast), NORM_PARAMS);
  gemvStats.runs++;
  launch(
    kern,
    [p.x, p.res ?? 0, p.gamma, p.w, p.out, p.hout ?? 0, p.bias ?? 0, p.eps, p.n, p.k, p.ldx, p.ldr, p.ldw, p.ldo, p.ldh],
    { grid: gemvNormGrid(Math.ceil(p.n / (WARPS / kw)), deviceInfo(index).smCount), block: THREADS, sharedBytes: gemvNormSharedBytes(p.m, p.k) },
    stream,
  );
}
