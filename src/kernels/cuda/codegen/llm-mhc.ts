/**
 * CUDA C for the mHC library ops (math: src/ops/defs/llm-mhc.ts; CPU: src/kernels/cpu/llm-mhc.ts).
 *
 * - `finish` (mhcPre and mhcHeadCollapse after their projection GEMM): one block per token. The
 *   block reduces sum(v^2) over the token's flat streams (v = vec(x), n*H values), scales the
 *   projected logits m = (phi v) / rms(v), and then
 *     pre mode:      pre = sigmoid(alpha0 m[0:n] + b) + preEps, post = postMult sigmoid(alpha1 m[n:2n] + b),
 *                    comb = Sinkhorn-Knopp(alpha2 m[2n:] + b) (warp 0, one lane per row / column,
 *                    exactly the CPU's normalisation order), layerInput = sum_i pre[i] x[i, :];
 *     collapse mode: w = sigmoid(alpha0 m + b) + eps, out = sum_i w[i] x[i, :].
 * - `post` (mhcPost): one thread per (token, h): out[k, h] = post[k] f[h] + sum_j comb[j, k] x[j, h],
 *   j in order, with the N = n stream values held in registers (N is compiled in).
 * Compute runs in float (double for float64 streams).
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './ctypes.js';

export interface MhcKernel {
  name: string;
  source: string;
  params: ParamType[];
}

/** Most streams the kernels take: Sinkhorn runs one lane per row of the n x n matrix. */
export const MHC_MAX_N = 32;
export const FINISH_THREADS = 256;

// (x, mm, alpha, bias, out, post, comb, T, n, H, rmsEps, preEps, postMult, iters, sinkEps)
const FINISH_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i32', 'i64', 'f64', 'f64', 'f64', 'i32', 'f64'];

export function mhcFinishSource(d: DType, mode: 'pre' | 'collapse'): MhcKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const name = `kiln_mhc_finish_${mode}_${d}`;
  const sig = (e: string): string => `((${ct})1 / ((${ct})1 + kiln_exp(-(${e}))))`;
  const pre =
    mode === 'pre'
      ? `
    const int R = n * (n + 2);
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
      w[r] = ${sig(`alpha[0] * mm[t * R + r] * inv + bias[r]`)} + (${ct})preEps;
      post[t * n + r] = (${ct})postMult * ${sig(`alpha[1] * mm[t * R + n + r] * inv + bias[n + r]`)};
    }
    for (int r = threadIdx.x; r < n * n; r += blockDim.x) c[r] = alpha[2] * mm[t * R + 2 * n + r] * inv + bias[2 * n + r];
    __syncthreads();
    if (threadIdx.x < 32) {
      const int l = threadIdx.x;
      const ${ct} eps = (${ct})sinkEps;
      // Row softmax plus eps (the first row normalisation of exp(logits), computed stably).
      if (l < n) {
        ${ct} mx = -(${ct})KILN_INF;
        for (int j = 0; j < n; j++) mx = c[l * n + j] > mx ? c[l * n + j] : mx;
        ${ct} s = 0;
        for (int j = 0; j < n; j++) { ${ct} v = kiln_exp(c[l * n + j] - mx); c[l * n + j] = v; s += v; }
        for (int j = 0; j < n; j++) c[l * n + j] = c[l * n + j] / s + eps;
      }
      __syncwarp();
      for (int it = 0; it < iters; it++) {
        if (it > 0 && l < n) {
          ${ct} s = 0;
          for (int j = 0; j < n; j++) s += c[l * n + j];
          for (int j = 0; j < n; j++) c[l * n + j] /= s + eps;
        }
        __syncwarp();
        if (l < n) {
          ${ct} s = 0;
          for (int i = 0; i < n; i++) s += c[i * n + l];
          for (int i = 0; i < n; i++) c[i * n + l] /= s + eps;
        }
        __syncwarp();
      }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n * n; r += blockDim.x) comb[t * n * n + r] = c[r];`
      : `
    for (int r = threadIdx.x; r < n; r += blockDim.x) w[r] = ${sig(`alpha[0] * mm[t * n + r] * inv + bias[r]`)} + (${ct})preEps;`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${FINISH_THREADS}) ${name}(const ${t}* __restrict__ x, const ${ct}* __restrict__ mm, const ${ct}* __restrict__ alpha,
    const ${ct}* __restrict__ bias, ${t}* __restrict__ out, ${ct}* __restrict__ post, ${ct}* __restrict__ comb, long long T, int n, long long H,
    double rmsEps, double preEps, double postMult, int iters, double sinkEps) {
  __shared__ ${ct} red[32];
  __shared__ ${ct} w[${MHC_MAX_N}];
  __shared__ ${ct} c[${mode === 'pre' ? MHC_MAX_N * MHC_MAX_N : 1}];
  const long long nh = (long long)n * H;
  for (long long t = blockIdx.x; t < T; t += gridDim.x) {
    const ${t}* xr = x + t * nh;
    ${ct} ss = 0;
    for (long long i = threadIdx.x; i < nh; i += blockDim.x) { ${ct} v = ${loadAs(d, 'xr[i]', ct)}; ss += v * v; }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    ${ct} tot = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) tot += red[i];
    const ${ct} inv = (${ct})1 / kiln_sqrt(tot / (${ct})nh + (${ct})rmsEps);
${pre}
    __syncthreads();
    for (long long h = threadIdx.x; h < H; h += blockDim.x) {
      ${ct} acc = 0;
      for (int i = 0; i < n; i++) acc += w[i] * ${loadAs(d, 'xr[i * H + h]', ct)};
      out[t * H + h] = ${storeAs(d, 'acc', ct)};
    }
    __syncthreads();
  }
}
`;
  return { name, source, params: FINISH_PARAMS };
}

/** Most streams of the fused head collapse (N + 1 running sums per thread in registers). */
export const COLLAPSE_FUSED_MAX_N = 8;

// (x, phi, alpha, bias, out, T, H, rmsEps, eps)
const COLLAPSE_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'f64', 'f64'];

/**
 * mhcHeadCollapse in one kernel for N <= COLLAPSE_FUSED_MAX_N streams: one block per token makes
 * one pass over the token's flat streams v accumulating sum(v^2) and the N projections phi_r . v
 * (phi, N x nH, stays in L2 across tokens), reduces the N + 1 sums over the block, and writes
 * out = sum_r (sigmoid(alpha0 (phi_r . v) / rms(v) + b_r) + eps) x_r. For a few streams this reads
 * the streams once instead of a cast copy plus a skinny GEMM.
 */
export function mhcCollapseFusedSource(d: DType, N: number): MhcKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const name = `kiln_mhc_collapse_fused_${d}_n${N}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${FINISH_THREADS}) ${name}(const ${t}* __restrict__ x, const ${ct}* __restrict__ phi, const ${ct}* __restrict__ alpha,
    const ${ct}* __restrict__ bias, ${t}* __restrict__ out, long long T, long long H, double rmsEps, double eps) {
  __shared__ ${ct} red[${FINISH_THREADS / 32}][${N + 1}];
  __shared__ ${ct} tot[${N + 1}];
  __shared__ ${ct} w[${N}];
  const long long nh = ${N}LL * H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long t = blockIdx.x; t < T; t += gridDim.x) {
    const ${t}* xr = x + t * nh;
    ${ct} acc[${N + 1}];
#pragma unroll
    for (int q = 0; q <= ${N}; q++) acc[q] = 0;
    for (long long i = threadIdx.x; i < nh; i += ${FINISH_THREADS}) {
      const ${ct} v = ${loadAs(d, 'xr[i]', ct)};
      acc[${N}] += v * v;
#pragma unroll
      for (int r = 0; r < ${N}; r++) acc[r] += v * phi[r * nh + i];
    }
#pragma unroll
    for (int q = 0; q <= ${N}; q++) {
      ${ct} s = acc[q];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) red[warp][q] = s;
    }
    __syncthreads();
    if (threadIdx.x <= ${N}) {
      ${ct} s = 0;
      for (int k = 0; k < ${FINISH_THREADS / 32}; k++) s += red[k][threadIdx.x];
      tot[threadIdx.x] = s;
    }
    __syncthreads();
    const ${ct} inv = (${ct})1 / kiln_sqrt(tot[${N}] / (${ct})nh + (${ct})rmsEps);
    if (threadIdx.x < ${N}) w[threadIdx.x] = (${ct})1 / ((${ct})1 + kiln_exp(-(alpha[0] * tot[threadIdx.x] * inv + bias[threadIdx.x]))) + (${ct})eps;
    __syncthreads();
    for (long long h = threadIdx.x; h < H; h += ${FINISH_THREADS}) {
      ${ct} o = 0;
#pragma unroll
      for (int r = 0; r < ${N}; r++) o += w[r] * ${loadAs(d, 'xr[r * H + h]', ct)};
      out[t * H + h] = ${storeAs(d, 'o', ct)};
    }
    __syncthreads();
  }
}
`;
  return { name, source, params: COLLAPSE_PARAMS };
}

// (f, x, post, comb, out, T, H)
const POST_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64'];

export function mhcPostSource(d: DType, postDtype: DType, combDtype: DType, n: number): MhcKernel {
  const t = storageType(d);
  const ct = computeType(d);
  const name = `kiln_mhc_post_${d}_p${postDtype}_c${combDtype}_n${n}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(256) ${name}(const ${t}* __restrict__ f, const ${t}* __restrict__ x, const ${storageType(postDtype)}* __restrict__ post,
    const ${storageType(combDtype)}* __restrict__ comb, ${t}* __restrict__ out, long long T, long long H) {
  const long long total = T * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long tok = i / H, h = i % H;
    ${ct} xv[${n}];
#pragma unroll
    for (int j = 0; j < ${n}; j++) xv[j] = ${loadAs(d, `x[(tok * ${n} + j) * H + h]`, ct)};
    const ${ct} fv = ${loadAs(d, 'f[i]', ct)};
#pragma unroll
    for (int k = 0; k < ${n}; k++) {
      ${ct} acc = ${loadAs(postDtype, `post[tok * ${n} + k]`, ct)} * fv;
#pragma unroll
      for (int j = 0; j < ${n}; j++) acc += ${loadAs(combDtype, `comb[(tok * ${n} + j) * ${n} + k]`, ct)} * xv[j];
      out[(tok * ${n} + k) * H + h] = ${storeAs(d, 'acc', ct)};
    }
  }
}
`;
  return { name, source, params: POST_PARAMS };
}

export function allMhcSources(): MhcKernel[] {
  const out: MhcKernel[] = [];
  for (const d of ['float32', 'float16', 'bfloat16', 'float64'] as DType[]) {
    out.push(mhcFinishSource(d, 'pre'), mhcFinishSource(d, 'collapse'), mhcPostSource(d, 'float32', d, 4), mhcCollapseFusedSource(d, 1), mhcCollapseFusedSource(d, 4), mhcCollapseFusedSource(d, 8));
  }
  return out;
}
