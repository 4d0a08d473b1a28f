/**
 * cuda kernel of llm.qkNormRotary: per-head RMSNorm + rotary embedding of q and k in one launch.
 * One warp per head row (q rows first, then k rows): each lane holds its rotated pairs (i1, i2) =
 * (j, j + D/2) (neox) or (2j, 2j + 1) (gpt-j) for j = lane, lane + 32, ... in registers, the sum of
 * squares is a warp shuffle reduction, and each pair is normalised, rounded to the dtype (as the
 * unfused norm's output is), rotated and stored; x is read once and nothing is staged in shared
 * memory. The head size is a compile-time constant (pairs per lane), leading dims (up to 3, e.g.
 * [B, H, T] of a transposed q) and every operand's strides are arguments, so q/k as column slices
 * of a fused qkv GEMM output, transposed, are read in place. Float32 compute for halves (float64
 * stays float64).
 */
import { qkNormRotary } from '../../ops/defs/llm-qk-norm-rotary.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { broadcastStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import type { GeneratedKernel } from './codegen/pointwise.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './codegen/ctypes.js';
import { allocOut, ptrOf, streamOf, unsupportedDtype } from './device.js';
import { deviceCheckCode, deviceErrorArgs, REPORT_INDEX_C } from '../../runtime/cuda/device-errors.js';
import { cacheGeometry } from '../../ops/defs/llm-paged.js';
import { qkNormRotaryCache } from '../../ops/defs/llm-qk-norm-rotary-cache.js';
import { cachedKernel, registerCuda, Temps } from './llm-util.js';

/**
 * 4 warps (rows) per block: a Qwen3-0.6B prompt of 128 tokens has 3072 q+k head rows, 768 blocks
 * over 132 SMs; larger blocks would leave the last wave's SMs idler for no gain (no shared memory).
 */
const BLOCK = 128;
const ROWS_PER_BLOCK = BLOCK / 32;
/** Leading dims each operand is addressed with (after dropping size-1 dims); more are merged or rejected. */
const LEAD = 3;
/** Per tensor: 2 sizes (dims 1, 2; dim 0 follows from the row count), LEAD + 1 strides for x, out, cos, sin, the weight's stride. */
const PER_TENSOR = 2 + 4 * (LEAD + 1) + 1;

const kernelName = (dtype: DType, d: number, isNeox: boolean, cache?: SlotDtype): string =>
  `kiln_qk_norm_rotary_${cache ? `cache_${cache}_` : ''}${isNeox ? 'neox' : 'gptj'}_${dtype}_d${d}`;

/** Slot dtype of the cache-writing variant (llm.qkNormRotaryCache). */
export type SlotDtype = 'int32' | 'int64';

/**
 * Parameters the cache-writing variant appends: the caches, v, the slots, the device error word,
 * then rowsV, kvHeads, the cache's capacity in slots and v's strides (token, head, element).
 */
const CACHE_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64', 'i64'];

/** Parameter names of one tensor's metadata (prefix 'q' or 'k'), in argument order. */
function tensorParams(p: string): string[] {
  const names = [`${p}n1`, `${p}n2`];
  for (const op of ['x', 'o', 'c', 's']) for (let i = 0; i <= LEAD; i++) names.push(`${p}${op}${i}`);
  names.push(`${p}w`);
  return names;
}

/**
 * The kernel for head size `d`. Parameters: qOut, q, qWeight, kOut, k, kWeight, cos, sin, eps,
 * rowsQ, rowsK, then PER_TENSOR i64 of q's metadata and PER_TENSOR of k's (tensorParams order).
 * With `cache` (llm.qkNormRotaryCache), CACHE_PARAMS follow: k rows (k is [N, kvHeads, D], row
 * n * kvHeads + h) store into the key cache at their token's slot instead of kOut (unused), and
 * rowsV more warps copy v's rows into the value cache; a slot < 0 skips its token, a slot past the
 * capacity is reported on the error word (once per token, by its head-0 k row) and skipped.
 */
export function qkNormRotarySource(dtype: DType, d: number, isNeox: boolean, cache?: SlotDtype): GeneratedKernel {
  const t = storageType(dtype);
  const ct = computeType(dtype);
  const half = d / 2;
  const perLane = Math.ceil(half / 32);
  const name = kernelName(dtype, d, isNeox, cache);
  const q = tensorParams('q');
  const k = tensorParams('k');
  const pick = (suffix: string): string => `const long long ${suffix} = isQ ? q${suffix} : k${suffix};`;
  const suffixes = q.map((n) => n.slice(1));
  const ld = (ptr: string, idx: string): string => loadAs(dtype, `${ptr}[${idx}]`, ct);
  // Round to the dtype and back: the unfused norm stores its output in the dtype.
  const round = (e: string): string => (dtype === 'float32' || dtype === 'float64' ? `(${e})` : loadAs(dtype, storeAs(dtype, e, ct), ct));
  const rsqrt = ct === 'double' ? 'rsqrt' : 'rsqrtf';
  const cacheParams = cache
    ? `,
    ${t}* __restrict__ kc, ${t}* __restrict__ vc, const ${t}* __restrict__ vx, const ${storageType(cache)}* __restrict__ slots,
    unsigned long long* claim, long long* report, long long code, long long rowsV, long long Hkv, long long capacity,
    long long vsn, long long vsh, long long vsd`
    : '';
  // v rows: a plain copy of each token's head row to its slot (no norm, no rotation).
  const vRows = cache
    ? `
  if (warp >= rowsQ + rowsK) {
    const long long vr = warp - rowsQ - rowsK;
    const long long vn = vr / Hkv, vh = vr % Hkv;
    const long long vs = (long long)slots[vn];
    if (vs < 0 || vs >= capacity) return;
    for (int j = lane; j < ${d}; j += 32) vc[(vs * Hkv + vh) * ${d} + j] = vx[vn * vsn + vh * vsh + j * vsd];
    return;
  }`
    : '';
  // k rows: the output is the token's cache slot, dense over the head.
  const kSlot = cache
    ? `
  long long os = o3;
  if (!isQ) {
    const long long kn = row / Hkv, kh = row % Hkv;
    const long long ks = (long long)slots[kn];
    if (ks < 0) return;
    if (ks >= capacity) { if (lane == 0 && kh == 0) kiln_report_index(claim, report, code, ks, capacity); return; }
    out = kc;
    bo = (ks * Hkv + kh) * ${d};
    os = 1;
  }`
    : '';
  const ost = cache ? 'os' : 'o3';
  const source = `${PRELUDE}${cache ? REPORT_INDEX_C : ''}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(
    ${t}* __restrict__ qo, const ${t}* __restrict__ qx, const ${t}* __restrict__ qwt,
    ${t}* __restrict__ ko, const ${t}* __restrict__ kx, const ${t}* __restrict__ kwt,
    const ${t}* __restrict__ cs, const ${t}* __restrict__ sn, ${ct} eps, long long rowsQ, long long rowsK,
    ${q.map((n) => `long long ${n}`).join(', ')},
    ${k.map((n) => `long long ${n}`).join(', ')}${cacheParams}) {
  const long long warp = (long long)blockIdx.x * ${ROWS_PER_BLOCK} + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (warp >= rowsQ + rowsK${cache ? ' + rowsV' : ''}) return;${vRows}
  const bool isQ = warp < rowsQ;
  long long row = isQ ? warp : warp - rowsQ;${cache ? '\n  const long long krow = row;' : ''}
  ${suffixes.map(pick).join('\n  ')}
  ${t}* __restrict__ out = isQ ? qo : ko;
  const ${t}* __restrict__ x = isQ ? qx : kx;
  const ${t}* __restrict__ wt = isQ ? qwt : kwt;
  const long long i2 = row % n2; row /= n2;
  const long long i1 = row % n1; const long long i0 = row / n1;
  ${cache ? 'const long long bx = i0 * x0 + i1 * x1 + i2 * x2;\n  long long bo = i0 * o0 + i1 * o1 + i2 * o2;' : 'const long long bx = i0 * x0 + i1 * x1 + i2 * x2, bo = i0 * o0 + i1 * o1 + i2 * o2;'}
  const long long bc = i0 * c0 + i1 * c1 + i2 * c2, bs = i0 * s0 + i1 * s1 + i2 * s2;${kSlot.replace('row / Hkv', 'krow / Hkv').replace('row % Hkv', 'krow % Hkv')}
  // Weights and tables are loaded with x, before the reduction: they do not depend on it, so the
  // two rounds of global-load latency overlap (the kernel is one wave, latency-bound).
  ${ct} a[${perLane}], b[${perLane}], wa[${perLane}], wb[${perLane}], ca[${perLane}], cb[${perLane}], sa[${perLane}], sb[${perLane}];
  ${ct} ss = 0;
  #pragma unroll
  for (int m = 0; m < ${perLane}; m++) {
    const int j = lane + 32 * m;
    a[m] = 0; b[m] = 0; wa[m] = 0; wb[m] = 0; ca[m] = 0; cb[m] = 0; sa[m] = 0; sb[m] = 0;
    if (j < ${half}) {
      const int e1 = ${isNeox ? 'j' : '2 * j'}, e2 = ${isNeox ? `j + ${half}` : '2 * j + 1'};
      a[m] = ${ld('x', 'bx + e1 * x3')};
      b[m] = ${ld('x', 'bx + e2 * x3')};
      wa[m] = ${ld('wt', 'e1 * w')}; wb[m] = ${ld('wt', 'e2 * w')};
      ca[m] = ${ld('cs', 'bc + e1 * c3')}; cb[m] = ${ld('cs', 'bc + e2 * c3')};
      sa[m] = ${ld('sn', 'bs + e1 * s3')}; sb[m] = ${ld('sn', 'bs + e2 * s3')};
      ss += a[m] * a[m] + b[m] * b[m];
    }
  }
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const ${ct} r = ${rsqrt}(ss / (${ct})${d} + eps);
  #pragma unroll
  for (int m = 0; m < ${perLane}; m++) {
    const int j = lane + 32 * m;
    if (j < ${half}) {
      const int e1 = ${isNeox ? 'j' : '2 * j'}, e2 = ${isNeox ? `j + ${half}` : '2 * j + 1'};
      const ${ct} n1v = ${round('a[m] * r * wa[m]')};
      const ${ct} n2v = ${round('b[m] * r * wb[m]')};
      out[bo + e1 * ${ost}] = ${storeAs(dtype, 'n1v * ca[m] - n2v * sa[m]', ct)};
      out[bo + e2 * ${ost}] = ${storeAs(dtype, 'n2v * cb[m] + n1v * sb[m]', ct)};
    }
  }
}
`;
  const params: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', ct === 'double' ? 'f64' : 'f32', 'i64', 'i64'];
  for (let i = 0; i < 2 * PER_TENSOR; i++) params.push('i64');
  if (cache) params.push(...CACHE_PARAMS);
  return { name, source, params };
}

/**
 * One tensor's leading dims (size-1 dims dropped, left-padded to LEAD with size 1) and the strides
 * of x, out, cos and sin over them plus the last dim, or null when more than LEAD dims remain.
 */
export function leadingLayout(x: Tensor, out: Tensor, cos: Tensor, sin: Tensor): { sizes: number[]; strides: number[][] } | null {
  const r = x.ndim;
  const ops = [x.strides, out.strides, broadcastStrides(cos.shape, cos.strides, x.shape), broadcastStrides(sin.shape, sin.strides, x.shape)];
  const sizes: number[] = [];
  const strides: number[][] = ops.map(() => []);
  for (let d = 0; d < r - 1; d++) {
    if (x.shape[d] === 1) continue;
    sizes.push(x.shape[d]!);
    ops.forEach((s, o) => strides[o]!.push(s[d]!));
  }
  if (sizes.length > LEAD) return null;
  while (sizes.length < LEAD) {
    sizes.unshift(1);
    strides.forEach((s) => s.unshift(0));
  }
  ops.forEach((s, o) => strides[o]!.push(s[r - 1]!));
  return { sizes, strides };
}

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];

registerCuda(qkNormRotary.name, (ctx, qIn, kIn, qwIn, kwIn, eps, cosIn, sinIn, isNeox) => {
  const [q, k, qw, kw, cos, sin] = [qIn, kIn, qwIn, kwIn, cosIn, sinIn] as Tensor[];
  if (!FLOATS.includes(q!.dtype)) throw unsupportedDtype(qkNormRotary.name, q!, FLOATS.join(', '));
  const metas = ctx.out as unknown as OutMeta[];
  const qo = allocOut(metas[0]!);
  const ko = allocOut(metas[1]!);
  const d = q!.shape[q!.ndim - 1]!;
  const rowsQ = numel(q!.shape) / d;
  const rowsK = numel(k!.shape) / d;
  if (rowsQ + rowsK === 0) return [qo, ko];
  const meta: number[] = [];
  for (const [x, o, w, name] of [[q!, qo, qw!, 'q'], [k!, ko, kw!, 'k']] as const) {
    const l = leadingLayout(x, o, cos!, sin!);
    if (!l) throw new Error(`${qkNormRotary.name}: the cuda kernel addresses up to ${LEAD} leading dims of size > 1, got '${name}' of shape [${x.shape.join(', ')}]`);
    meta.push(l.sizes[1]!, l.sizes[2]!, ...l.strides.flat(), w.strides[0]!);
  }
  const index = q!.device.index;
  const kern = cachedKernel(index, kernelName(q!.dtype, d, isNeox as boolean), () => qkNormRotarySource(q!.dtype, d, isNeox as boolean));
  const args = [ptrOf(qo), ptrOf(q!), ptrOf(qw!), ptrOf(ko), ptrOf(k!), ptrOf(kw!), ptrOf(cos!), ptrOf(sin!), eps as number, rowsQ, rowsK, ...meta];
  launch(kern, args, { grid: Math.ceil((rowsQ + rowsK) / ROWS_PER_BLOCK), block: BLOCK }, streamOf(qo));
  return [qo, ko];
});

registerCuda(qkNormRotaryCache.name, (ctx, qIn, kIn, vIn, qwIn, kwIn, eps, cosIn, sinIn, isNeox, kcIn, vcIn, slotsIn) => {
  const op = qkNormRotaryCache.name;
  const [q, k, v, qw, kw, cos, sin, kc, vc, slotMapping] = [qIn, kIn, vIn, qwIn, kwIn, cosIn, sinIn, kcIn, vcIn, slotsIn] as Tensor[];
  if (!FLOATS.includes(q!.dtype)) throw unsupportedDtype(op, q!, FLOATS.join(', '));
  const metas = ctx.out as unknown as OutMeta[];
  const qo = allocOut(metas[0]!);
  const g = cacheGeometry(op, kc!, vc!);
  const d = q!.shape[q!.ndim - 1]!;
  const rowsQ = numel(q!.shape) / d;
  const rowsK = numel(k!.shape) / d;
  if (rowsQ + rowsK === 0) return [qo, kc!, vc!];
  const meta: number[] = [];
  // k's output strides are unused (its rows go to the cache): k itself stands in for them.
  for (const [x, o, w, name] of [[q!, qo, qw!, 'q'], [k!, k!, kw!, 'k']] as const) {
    const l = leadingLayout(x, o, cos!, sin!);
    if (!l) throw new Error(`${op}: the cuda kernel addresses up to ${LEAD} leading dims of size > 1, got '${name}' of shape [${x.shape.join(', ')}]`);
    meta.push(l.sizes[1]!, l.sizes[2]!, ...l.strides.flat(), w.strides[0]!);
  }
  const t = new Temps();
  try {
    const slots = slotMapping!.strides[0] === 1 ? slotMapping! : t.dense(slotMapping!);
    const sd = slots.dtype === 'int32' ? 'int32' : 'int64';
    const index = q!.device.index;
    const kern = cachedKernel(index, kernelName(q!.dtype, d, isNeox as boolean, sd), () => qkNormRotarySource(q!.dtype, d, isNeox as boolean, sd));
    const { claim, report } = deviceErrorArgs(index);
    const code = deviceCheckCode({ op, what: "the cache's slots" });
    const args = [
      ptrOf(qo), ptrOf(q!), ptrOf(qw!), ptrOf(k!), ptrOf(k!), ptrOf(kw!), ptrOf(cos!), ptrOf(sin!), eps as number, rowsQ, rowsK, ...meta,
      ptrOf(kc!), ptrOf(vc!), ptrOf(v!), ptrOf(slots), claim, report, code, rowsK, g.kvHeads, g.numBlocks * g.blockSize, v!.strides[0]!, v!.strides[1]!, v!.strides[2]!,
    ];
    launch(kern, args, { grid: Math.ceil((rowsQ + 2 * rowsK) / ROWS_PER_BLOCK), block: BLOCK }, streamOf(qo));
  } finally {
    t.dispose();
  }
  return [qo, kc!, vc!];
});
