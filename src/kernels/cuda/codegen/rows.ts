/**
 * Row kernels: reductions, softmax and normalisations over the last axis of a contiguous
 * [rows, R] problem (the runner permutes and copies other layouts into that form). A group of TPR
 * threads (a warp up to a whole block) owns a row: each thread strides over the row (coalesced
 * across the group), then the group combines through warp shuffles and, beyond one warp, shared
 * memory. Accumulation is float for fp32/fp16/bf16, double for float64, long long for integers.
 *
 * Composable reductions (sum, prod, max, min, any, all) can also split a long row into `cpr` chunks
 * per row, each writing one partial; a second launch reduces the partials. This keeps every SM busy
 * when there are few long rows (a full reduction is one row).
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs, type CType } from './ctypes.js';
import type { GeneratedKernel } from './pointwise.js';

export type RowKind =
  | 'sum'
  | 'prod'
  | 'max'
  | 'min'
  | 'any'
  | 'all'
  | 'var'
  | 'logsumexp'
  | 'argmax'
  | 'argmin'
  | 'softmax'
  | 'logSoftmax'
  | 'layerNorm'
  | 'rmsNorm'
  | 'cumsum'
  | 'cumprod';

export const COMPOSABLE: ReadonlySet<RowKind> = new Set(['sum', 'prod', 'max', 'min', 'any', 'all']);

export interface RowSpec {
  kind: RowKind;
  inDtype: DType;
  outDtype: DType;
  /** Threads per row: 32, 64, 128 or 256. */
  tpr: number;
  /** layerNorm/rmsNorm: whether weight / bias pointers are used, and their dtype. */
  hasWeight?: boolean;
  hasBias?: boolean;
  paramDtype?: DType;
}

// Every row kernel runs 256-thread blocks (8 warps); rows per block = 256 / TPR.
export const ROW_BLOCK = 256;

/** Accumulator type: float64/int64 sums in 64 bits, integers and bool in long long, others in float. */
export function accType(kind: RowKind, d: DType): CType {
  if (kind === 'any' || kind === 'all') return 'int';
  const ct = computeType(d);
  if (ct === 'int' && (kind === 'sum' || kind === 'prod' || kind === 'cumsum' || kind === 'cumprod')) return 'long long';
  return ct;
}

const isFloatCt = (ct: CType): boolean => ct === 'float' || ct === 'double';

function init(kind: RowKind, ct: CType): string {
  switch (kind) {
    case 'sum':
    case 'any':
      return '0';
    case 'prod':
    case 'all':
      return '1';
    case 'max':
    case 'argmax':
      return isFloatCt(ct) ? `-(${ct})KILN_INF` : ct === 'int' ? '(-2147483647 - 1)' : '(-9223372036854775807LL - 1)';
    case 'min':
    case 'argmin':
      return isFloatCt(ct) ? `(${ct})KILN_INF` : ct === 'int' ? '2147483647' : '9223372036854775807LL';
    default:
      return '0';
  }
}

function combine(kind: RowKind): string {
  switch (kind) {
    case 'sum':
      return 'a + b';
    case 'prod':
      return 'a * b';
    case 'max':
      return 'kiln_max(a, b)';
    case 'min':
      return 'kiln_min(a, b)';
    case 'any':
      return '(a || b) ? 1 : 0';
    case 'all':
      return '(a && b) ? 1 : 0';
    default:
      return 'a + b';
  }
}

function groupReduce(tpr: number): string {
  return `
template <typename T, typename F> __device__ __forceinline__ T group_reduce(T v, F f, T* smem) {
#pragma unroll
  for (int o = ${Math.min(16, tpr / 2)}; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (${tpr} <= 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wpg = ${Math.max(1, tpr / 32)};
  const int g0 = (warp / wpg) * wpg;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T r = smem[g0];
  for (int w = 1; w < wpg; w++) r = f(r, smem[g0 + w]);
  return r;
}
struct KAdd { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct KMax { template <typename T> __device__ T operator()(T a, T b) const { return kiln_max(a, b); } };
`;
}

export function rowKernelName(s: RowSpec): string {
  return `kiln_row_${s.kind}_${s.inDtype}_${s.outDtype}_${s.tpr}${s.hasWeight ? '_w' : ''}${s.hasBias ? '_b' : ''}${s.paramDtype ? `_${s.paramDtype}` : ''}`;
}

/**
 * Parameters of every row kernel: in, out, aux (indices for arg*, weight for norms), aux2 (bias),
 * rows, R, chunk, cpr, p0 (scale / correction / eps), p1.
 */
export const ROW_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'f64', 'f64'];

export function generateRow(s: RowSpec): GeneratedKernel {
  if (![32, 64, 128, 256].includes(s.tpr)) throw new Error(`row codegen: threads per row must be 32, 64, 128 or 256, got ${s.tpr}`);
  const ti = storageType(s.inDtype);
  const to = storageType(s.outDtype);
  const at = accType(s.kind, s.inDtype);
  const ld = (e: string): string => loadAs(s.inDtype, e, at);
  const st = (e: string): string => storeAs(s.outDtype, e, at);
  const name = rowKernelName(s);
  const gpb = ROW_BLOCK / s.tpr;
  const body: string[] = [];
  const pt = s.paramDtype ? storageType(s.paramDtype) : 'float';
  const ldp = (e: string): string => (s.paramDtype ? loadAs(s.paramDtype, e, at) : e);
  switch (s.kind) {
    case 'sum':
    case 'prod':
    case 'max':
    case 'min':
    case 'any':
    case 'all': {
      const isBoolIn = s.kind === 'any' || s.kind === 'all';
      const v = isBoolIn ? `(${ld('x[j]')} != 0 ? 1 : 0)` : ld('x[j]');
      body.push(`    ${at} acc = ${init(s.kind, at)};`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) { const ${at} a = acc, b = ${v}; acc = ${combine(s.kind)}; }`);
      body.push(`    struct F { __device__ ${at} operator()(${at} a, ${at} b) const { return ${combine(s.kind)}; } };`);
      body.push(`    acc = group_reduce(acc, F(), smem);`);
      // p0 scales the result (mean = sum * 1/R); only applied when the caller asks (p1 != 0).
      body.push(`    if (active && t == 0) out[rr] = ${st(`(p1 != 0.0 ? (${at})((double)acc * p0) : acc)`)};`);
      break;
    }
    case 'var': {
      body.push(`    ${at} sum = 0;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) sum += ${ld('x[j]')};`);
      body.push('    sum = group_reduce(sum, KAdd(), smem);');
      body.push(`    const ${at} mean = sum / (${at})len;`);
      body.push(`    ${at} m2 = 0;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) { const ${at} d = ${ld('x[j]')} - mean; m2 += d * d; }`);
      body.push('    m2 = group_reduce(m2, KAdd(), smem);');
      // p0 = correction (Bessel: 1); p1 != 0 asks for the standard deviation.
      body.push(`    const ${at} var_ = m2 / (${at})((double)len - p0 > 0.0 ? (double)len - p0 : 0.0);`);
      body.push(`    if (active && t == 0) out[rr] = ${st(`(p1 != 0.0 ? (${at})kiln_sqrt((double)var_) : var_)`)};`);
      break;
    }
    case 'logsumexp': {
      body.push(`    ${at} mx = -(${at})KILN_INF;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) mx = kiln_max(mx, ${ld('x[j]')});`);
      body.push('    mx = group_reduce(mx, KMax(), smem);');
      body.push(`    const ${at} shift = (mx == -(${at})KILN_INF || mx == (${at})KILN_INF) ? (${at})0 : mx;`);
      body.push(`    ${at} se = 0;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) se += kiln_exp(${ld('x[j]')} - shift);`);
      body.push('    se = group_reduce(se, KAdd(), smem);');
      body.push(`    if (active && t == 0) out[rr] = ${st('shift + kiln_log(se)')};`);
      break;
    }
    case 'argmax':
    case 'argmin': {
      const better = s.kind === 'argmax' ? '>' : '<';
      // NaN wins (as in PyTorch), then the better value, then the lower index.
      body.push(`    ${at} bv = ${init(s.kind, at)}; long long bi = -1;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) { const ${at} v = ${ld('x[j]')};`);
      body.push(`      if (bi < 0 || (v != v && bv == bv) || (bv == bv && v ${better} bv)) { bv = v; bi = j; } }`);
      body.push(`#pragma unroll`);
      body.push(`    for (int o = ${Math.min(16, s.tpr / 2)}; o > 0; o >>= 1) {`);
      body.push(`      const ${at} ov = __shfl_xor_sync(0xffffffffu, bv, o); const long long oi = __shfl_xor_sync(0xffffffffu, bi, o);`);
      body.push(`      if (oi >= 0 && (bi < 0 || (ov != ov && bv == bv) || (((ov != ov) == (bv != bv)) && (ov ${better} bv || (!(bv ${better} ov) && oi < bi))))) { bv = ov; bi = oi; } }`);
      if (s.tpr > 32) {
        body.push('    __syncthreads();');
        body.push('    if ((threadIdx.x & 31) == 0) { smem[threadIdx.x >> 5] = bv; ismem[threadIdx.x >> 5] = bi; }');
        body.push('    __syncthreads();');
        body.push(`    { const int wpg = ${s.tpr / 32}; const int g0 = ((threadIdx.x >> 5) / wpg) * wpg; bv = smem[g0]; bi = ismem[g0];`);
        body.push(`      for (int w = 1; w < wpg; w++) { const ${at} ov = smem[g0 + w]; const long long oi = ismem[g0 + w];`);
        body.push(`        if (oi >= 0 && (bi < 0 || (ov != ov && bv == bv) || (((ov != ov) == (bv != bv)) && (ov ${better} bv || (!(bv ${better} ov) && oi < bi))))) { bv = ov; bi = oi; } } }`);
      }
      body.push(`    if (active && t == 0) { if (out != 0) out[rr] = ${st('bv')}; if (aux != 0) ((long long*)aux)[rr] = bi; }`);
      break;
    }
    case 'softmax':
    case 'logSoftmax': {
      body.push(`    ${at} mx = -(${at})KILN_INF;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) mx = kiln_max(mx, ${ld('x[j]')});`);
      body.push('    mx = group_reduce(mx, KMax(), smem);');
      body.push(`    const ${at} shift = (mx == -(${at})KILN_INF) ? (${at})0 : mx;`);
      body.push(`    ${at} se = 0;`);
      body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) se += kiln_exp(${ld('x[j]')} - shift);`);
      body.push('    se = group_reduce(se, KAdd(), smem);');
      if (s.kind === 'softmax') {
        body.push(`    const ${at} inv = (${at})1 / se;`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) y[j] = ${st(`kiln_exp(${ld('x[j]')} - shift) * inv`)};`);
      } else {
        body.push(`    const ${at} lse = shift + kiln_log(se);`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) y[j] = ${st(`${ld('x[j]')} - lse`)};`);
      }
      break;
    }
    case 'layerNorm':
    case 'rmsNorm': {
      const w = s.hasWeight ? ` * ${ldp('w[j]')}` : '';
      const b = s.hasBias ? ` + ${ldp('bias[j]')}` : '';
      if (s.kind === 'layerNorm') {
        body.push(`    ${at} sum = 0;`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) sum += ${ld('x[j]')};`);
        body.push('    sum = group_reduce(sum, KAdd(), smem);');
        body.push(`    const ${at} mean = sum / (${at})len;`);
        body.push(`    ${at} m2 = 0;`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) { const ${at} d = ${ld('x[j]')} - mean; m2 += d * d; }`);
        body.push('    m2 = group_reduce(m2, KAdd(), smem);');
        body.push(`    const ${at} rstd = (${at})1 / kiln_sqrt(m2 / (${at})len + (${at})p0);`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) y[j] = ${st(`(${ld('x[j]')} - mean) * rstd${w}${b}`)};`);
      } else {
        body.push(`    ${at} sq = 0;`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) { const ${at} v = ${ld('x[j]')}; sq += v * v; }`);
        body.push('    sq = group_reduce(sq, KAdd(), smem);');
        body.push(`    const ${at} r = (${at})1 / kiln_sqrt(sq / (${at})len + (${at})p0);`);
        body.push(`    if (active) for (long long j = t; j < len; j += ${s.tpr}) y[j] = ${st(`${ld('x[j]')} * r${w}`)};`);
      }
      break;
    }
    case 'cumsum':
    case 'cumprod': {
      // Tiles of TPR elements: an inclusive scan across the group (warp shuffles, then the warp
      // totals through shared memory), plus the carry of the previous tiles. The tile loop runs to R
      // (the same for every row) so every thread reaches each __syncthreads.
      const id = s.kind === 'cumsum' ? '0' : '1';
      const op = s.kind === 'cumsum' ? '+' : '*';
      body.push(`    ${at} carry = ${id};`);
      body.push(`    for (long long b0 = 0; b0 < R; b0 += ${s.tpr}) {`);
      body.push(`      const long long j = b0 + t;`);
      body.push(`      ${at} v = (active && j < len) ? ${ld('x[j]')} : (${at})${id};`);
      body.push('#pragma unroll');
      body.push(`      for (int o = 1; o < ${Math.min(32, s.tpr)}; o <<= 1) { const ${at} u = __shfl_up_sync(0xffffffffu, v, o); if ((t & 31) >= o) v = v ${op} u; }`);
      if (s.tpr > 32) {
        body.push('      __syncthreads();');
        body.push('      if ((threadIdx.x & 31) == 31) smem[threadIdx.x >> 5] = v;');
        body.push('      __syncthreads();');
        body.push(`      { const int wig = t >> 5; const int g0 = (threadIdx.x >> 5) - wig; ${at} pre = ${id}; for (int w = 0; w < wig; w++) pre = pre ${op} smem[g0 + w]; v = v ${op} pre; }`);
      }
      body.push(`      v = v ${op} carry;`);
      body.push(`      if (active && j < len) y[j] = ${st('v')};`);
      body.push('      __syncthreads();');
      body.push(`      if (t == ${s.tpr - 1}) tile[g] = v;`);
      body.push('      __syncthreads();');
      body.push('      carry = tile[g];');
      body.push('    }');
      break;
    }
    default:
      throw new Error(`row codegen: unknown kind ${String(s.kind)}`);
  }
  const scan = s.kind === 'cumsum' || s.kind === 'cumprod';
  const rowWise = scan || s.kind === 'softmax' || s.kind === 'logSoftmax' || s.kind === 'layerNorm' || s.kind === 'rmsNorm';
  const source = `${PRELUDE}
${groupReduce(s.tpr)}
extern "C" __global__ void __launch_bounds__(${ROW_BLOCK}) ${name}(const ${ti}* __restrict__ in, ${to}* __restrict__ out, void* aux, void* aux2,
    long long rows, long long R, long long chunk, long long cpr, double p0, double p1) {
  __shared__ ${at} smem[${ROW_BLOCK / 32}];
  ${s.kind === 'argmax' || s.kind === 'argmin' ? `__shared__ long long ismem[${ROW_BLOCK / 32}];` : ''}
  ${scan ? `__shared__ ${at} tile[${gpb}];` : ''}
  ${s.hasWeight ? `const ${pt}* __restrict__ w = (const ${pt}*)aux;` : ''}
  ${s.hasBias ? `const ${pt}* __restrict__ bias = (const ${pt}*)aux2;` : ''}
  const int g = threadIdx.x / ${s.tpr};
  const int t = threadIdx.x % ${s.tpr};
  const long long groups = rows * cpr;
  for (long long base = (long long)blockIdx.x * ${gpb}; base < groups; base += (long long)gridDim.x * ${gpb}) {
    const long long rr = base + g;
    const bool active = rr < groups;
    const long long row = active ? rr / cpr : 0;
    const long long c = active ? rr - row * cpr : 0;
    const long long start = c * chunk;
    const long long len = active ? (R - start < chunk ? R - start : chunk) : 0;
    const ${ti}* __restrict__ x = in + row * R + start;
    ${rowWise ? `${to}* __restrict__ y = out + row * R;` : ''}
${body.join('\n')}
  }
}
`;
  return { name, source, params: ROW_PARAMS };
}
