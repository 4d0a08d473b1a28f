/**
 * CUDA C of fusedMoe's decode form: few (token, slot) pairs, no host read, so a decode step with
 * a Qwen3-MoE block is one CUDA graph. The grouped form (llm-moe.ts) counts the pairs per expert
 * and reads the counts back to size one GEMM per expert; that read is a host synchronisation no
 * graph can hold, and at a decode step's handful of pairs the GEMMs are matrix-vector products
 * anyway. Two weight-streaming kernels instead (one warp per output row, 16-byte weight loads
 * where the rows allow, float32 accumulation, warp-shuffle sums):
 *
 * - `up`: block (row tile, pair p): the pair's token row is staged in shared memory in the
 *   compute type; warp j computes gate = x . w13[e, j] and up = x . w13[e, I + j] and writes
 *   a[p, j] = act(gate) * up rounded to x's dtype (the grouped form rounds the same operand).
 * - `down`: block (row tile, token t): the token's topk rows of `a` in shared memory; warp r sums
 *   w[t, s] * (a[t, s] . w2[e_s, r]) over the slots in slot order (the grouped form's order), in
 *   float32, and writes out[t, r].
 *
 * An expert id out of range is recorded in the device error word (runtime/cuda/device-errors.ts;
 * raised at the next synchronisation) and its pair contributes zeros.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { REPORT_INDEX_C } from '../../../runtime/cuda/device-errors.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';
import { actExpr, type MoeKernel } from './llm-moe.js';

/** Warps (output rows) per block of both kernels. */
export const MOE_GEMV_WARPS = 8;

/** Weight elements one lane loads at a time: 16 bytes where the dtype packs (16-bit: 8, float32: 4), else 1. */
export function moeGemvVec(d: DType): number {
  return d === 'float16' || d === 'bfloat16' ? 8 : d === 'float32' ? 4 : 1;
}

const WARP_SUM = (ct: CType): string => `
__device__ __forceinline__ ${ct} kiln_moe_warp_sum(${ct} v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}`;

/**
 * `acc += sum_k xs[h + k] * w[h + k]` over the lane's part of a row `w` of length `len` (a
 * multiple of v when v > 1, 16-byte aligned rows), with `xs` the staged operand in shared memory.
 */
function rowDot(d: DType, v: number, acc: string, w: string, xs: string, len: string): string {
  const t = storageType(d);
  const ct = computeType(d);
  if (v === 1) return `for (long long h = lane; h < ${len}; h += 32) ${acc} += ${xs}[h] * ${loadAs(d, `${w}[h]`, ct)};`;
  if (d === 'float32') {
    return `for (long long h = (long long)lane * 4; h < ${len}; h += 128) {
      const float4 q = *reinterpret_cast<const float4*>(${w} + h);
      ${acc} += ${xs}[h] * q.x + ${xs}[h + 1] * q.y + ${xs}[h + 2] * q.z + ${xs}[h + 3] * q.w;
    }`;
  }
  // 16-bit: a uint4 is 8 values, two per 32-bit word, the lower address in the low half.
  const lo = d === 'bfloat16' ? (u: string): string => `__uint_as_float(${u} << 16)` : (u: string): string => `kiln_h2f((unsigned short)(${u} & 0xffffu))`;
  const hi = d === 'bfloat16' ? (u: string): string => `__uint_as_float(${u} & 0xffff0000u)` : (u: string): string => `kiln_h2f((unsigned short)(${u} >> 16))`;
  const words = ['x', 'y', 'z', 'w'].map((c, k) => `${acc} += ${xs}[h + ${2 * k}] * ${lo(`q.${c}`)} + ${xs}[h + ${2 * k + 1}] * ${hi(`q.${c}`)};`).join('\n      ');
  return `for (long long h = (long long)lane * 8; h < ${len}; h += 256) {
      const uint4 q = *reinterpret_cast<const uint4*>(reinterpret_cast<const ${t}*>(${w}) + h);
      ${words}
    }`;
}

// (claim, report, code, x, xs0, xs1, w13, ids, is0, is1, a, topk, E, I, H)
const UP_PARAMS: ParamType[] = ['ptr', 'ptr', 'i64', 'ptr', 'i64', 'i64', 'ptr', 'ptr', 'i64', 'i64', 'ptr', 'i32', 'i32', 'i64', 'i64'];

/** a[p, j] = act(x[tok] . w13[e, j]) * (x[tok] . w13[e, I + j]); shared: H compute-type values. */
export function moeGemvUpSource(d: DType, idDtype: DType, act: 'silu' | 'gelu', v: number): MoeKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const it = storageType(idDtype);
  const name = `kiln_moe_gemv_up_${d}_${idDtype}_${act}_v${v}`;
  const source = `${PRELUDE}${REPORT_INDEX_C}${WARP_SUM(ct)}
extern "C" __global__ void __launch_bounds__(${MOE_GEMV_WARPS * 32}) ${name}(unsigned long long* __restrict__ claim, long long* __restrict__ report, long long code,
    const ${t}* __restrict__ x, long long xs0, long long xs1, const ${t}* __restrict__ w13, const ${it}* __restrict__ ids, long long is0, long long is1,
    ${t}* __restrict__ a, int topk, int E, long long I, long long H) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  ${ct}* xs = reinterpret_cast<${ct}*>(kiln_smem);
  const long long p = blockIdx.y;
  const long long tok = p / topk;
  const long long e = (long long)ids[tok * is0 + (p % topk) * is1];
  for (long long h = threadIdx.x; h < H; h += blockDim.x) xs[h] = ${loadAs(d, 'x[tok * xs0 + h * xs1]', ct)};
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const long long j = (long long)blockIdx.x * ${MOE_GEMV_WARPS} + (threadIdx.x >> 5);
  if (j >= I) return;
  if (e < 0 || e >= E) {
    if (blockIdx.x == 0 && threadIdx.x == 0) kiln_report_index(claim, report, code, e, E);
    if (lane == 0) a[p * I + j] = ${storeAs(d, '0', ct)};
    return;
  }
  const ${t}* wg = w13 + (e * 2 * I + j) * H;
  const ${t}* wu = wg + I * H;
  ${ct} g = 0, u = 0;
  ${rowDot(d, v, 'g', 'wg', 'xs', 'H')}
  ${rowDot(d, v, 'u', 'wu', 'xs', 'H')}
  g = kiln_moe_warp_sum(g);
  u = kiln_moe_warp_sum(u);
  if (lane == 0) a[p * I + j] = ${storeAs(d, `(${actExpr(act, ct)}) * u`, ct)};
}
`;
  return { name, source, params: UP_PARAMS };
}

// (a, w2, ids, is0, is1, tw, ws0, ws1, out, topk, E, H, I)
const DOWN_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'ptr', 'i64', 'i64', 'ptr', 'i32', 'i32', 'i64', 'i64'];

/** out[t, r] = sum_s w[t, s] * (a[t * topk + s] . w2[e_s, r]), s in order; shared: topk * I compute-type values. */
export function moeGemvDownSource(d: DType, idDtype: DType, wDtype: DType, v: number): MoeKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const it = storageType(idDtype);
  const wt = storageType(wDtype);
  const name = `kiln_moe_gemv_down_${d}_${idDtype}_w${wDtype}_v${v}`;
  const source = `${PRELUDE}${WARP_SUM(ct)}
extern "C" __global__ void __launch_bounds__(${MOE_GEMV_WARPS * 32}) ${name}(const ${t}* __restrict__ a, const ${t}* __restrict__ w2, const ${it}* __restrict__ ids,
    long long is0, long long is1, const ${wt}* __restrict__ tw, long long ws0, long long ws1, ${t}* __restrict__ out, int topk, int E, long long H, long long I) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  ${ct}* as = reinterpret_cast<${ct}*>(kiln_smem);
  const long long tok = blockIdx.y;
  for (long long i = threadIdx.x; i < (long long)topk * I; i += blockDim.x) as[i] = ${loadAs(d, 'a[tok * topk * I + i]', ct)};
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * ${MOE_GEMV_WARPS} + (threadIdx.x >> 5);
  if (r >= H) return;
  ${ct} acc = 0;
  for (int s = 0; s < topk; s++) {
    const long long e = (long long)ids[tok * is0 + s * is1];
    ${ct} dot = 0;
    if (e >= 0 && e < E) {
      const ${t}* w = w2 + (e * H + r) * I;
      const ${ct}* xs = as + (long long)s * I;
      ${rowDot(d, v, 'dot', 'w', 'xs', 'I')}
    }
    dot = kiln_moe_warp_sum(dot);
    acc += ${loadAs(wDtype, 'tw[tok * ws0 + s * ws1]', ct)} * dot;
  }
  if (lane == 0) out[tok * H + r] = ${storeAs(d, 'acc', ct)};
}
`;
  return { name, source, params: DOWN_PARAMS };
}
