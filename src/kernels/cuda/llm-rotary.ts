/**
 * cuda kernel of llm.applyRotaryEmb: out = x cos + rot(x) sin, one thread per rotated pair
 * (i1, i2) = (j, j + D/2) for neox or (2j, 2j + 1) for gpt-j, so each thread reads x[i1], x[i2]
 * once: out[i1] = x1 cos1 - x2 sin1, out[i2] = x2 cos2 + x1 sin2. Any strides for every operand
 * (cos/sin through broadcast strides, the output in the input's layout), rank up to 6; leading
 * dims are collapsed where every operand allows it and the kernel is specialised per rank, with
 * 32-bit index math when every offset fits (64-bit integer division was most of its time on a
 * [1, 16, 128, 128] q); float32 compute for halves (float64 stays float64).
 */
import { applyRotaryEmb } from '../../ops/defs/llm-rotary.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { broadcastStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import type { GeneratedKernel } from './codegen/pointwise.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './codegen/ctypes.js';
import { allocOut, gridFor, ptrOf, streamOf, unsupportedDtype } from './device.js';
import { cachedKernel, registerCuda } from './llm-util.js';

const BLOCK = 256;
const RANK = 6;

/** Index width of a kernel: 32-bit math when every offset fits (integer division is the kernel's main cost at small D). */
type IndexWidth = 'i32' | 'i64';

/** The kernel's name, also its key in the kernel cache: one per dtype, style, rank and index width. */
const applyRotaryName = (dtype: DType, isNeox: boolean, rank: number, width: IndexWidth): string =>
  `kiln_apply_rotary_${isNeox ? 'neox' : 'gptj'}_${dtype}_r${rank}_${width}`;

/**
 * The kernel for inputs of `rank` dims after collapsing (the last is the rotated one). Parameters:
 * out, x, cos, sin, pairs, half, then `rank` sizes and `rank` strides for each of out, x, cos, sin.
 */
export function applyRotarySource(dtype: DType, isNeox: boolean, rank = RANK, width: IndexWidth = 'i64'): GeneratedKernel {
  const t = storageType(dtype);
  const ct = computeType(dtype);
  const ix = width === 'i32' ? 'int' : 'long long';
  const name = applyRotaryName(dtype, isNeox, rank, width);
  const dims = Array.from({ length: rank }, (_, k) => k);
  const sig = (p: string): string => dims.map((k) => `${ix} ${p}${k}`).join(', ');
  const last = rank - 1;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${t}* __restrict__ out, const ${t}* __restrict__ x, const ${t}* __restrict__ cs, const ${t}* __restrict__ sn,
    ${ix} pairs, ${ix} half, ${sig('n')}, ${sig('so')}, ${sig('sx')}, ${sig('sc')}, ${sig('ss')}) {
  for (${ix} p = (${ix})blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += (${ix})gridDim.x * blockDim.x) {
    ${ix} row = p / half; const ${ix} j = p - row * half;
    ${ix} oo = 0, ox = 0, oc = 0, os = 0;
${dims
  .slice(0, last)
  .reverse()
  .map((k) => (k === 0 ? `    { const ${ix} i = row; oo += i * so0; ox += i * sx0; oc += i * sc0; os += i * ss0; }` : `    { const ${ix} i = row % n${k}; row /= n${k}; oo += i * so${k}; ox += i * sx${k}; oc += i * sc${k}; os += i * ss${k}; }`))
  .join('\n')}
    const ${ix} i1 = ${isNeox ? 'j' : '2 * j'}, i2 = ${isNeox ? 'j + half' : '2 * j + 1'};
    const ${ct} x1 = ${loadAs(dtype, `x[ox + i1 * sx${last}]`, ct)}, x2 = ${loadAs(dtype, `x[ox + i2 * sx${last}]`, ct)};
    const ${ct} c1 = ${loadAs(dtype, `cs[oc + i1 * sc${last}]`, ct)}, c2 = ${loadAs(dtype, `cs[oc + i2 * sc${last}]`, ct)};
    const ${ct} s1 = ${loadAs(dtype, `sn[os + i1 * ss${last}]`, ct)}, s2 = ${loadAs(dtype, `sn[os + i2 * ss${last}]`, ct)};
    out[oo + i1 * so${last}] = ${storeAs(dtype, 'x1 * c1 - x2 * s1', ct)};
    out[oo + i2 * so${last}] = ${storeAs(dtype, 'x2 * c2 + x1 * s2', ct)};
  }
}
`;
  return { name, source, params: ['ptr', 'ptr', 'ptr', 'ptr', width, width, ...(Array.from({ length: rank * 5 }, () => width) as ParamType[])] };
}

/**
 * Shape and per-operand strides with size-1 leading dims dropped and adjacent leading dims merged
 * where every operand walks them as one (the rotated last dim stays last and separate): a
 * transposed q [B, H, T, D] is walked with 3 index divisions instead of 5.
 */
export function collapseRotaryDims(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const r = shape.length;
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < r - 1; d++) {
    if (shape[d] === 1) continue;
    const k = outShape.length - 1;
    // Merge into the previous kept dim when stride(prev) == stride(d) * size(d) for every operand.
    if (k >= 0 && strides.every((s, o) => outStrides[o]![k] === s[d]! * shape[d]!)) {
      outShape[k] = outShape[k]! * shape[d]!;
      strides.forEach((s, o) => (outStrides[o]![k] = s[d]!));
      continue;
    }
    outShape.push(shape[d]!);
    strides.forEach((s, o) => outStrides[o]!.push(s[d]!));
  }
  outShape.push(shape[r - 1]!);
  strides.forEach((s, o) => outStrides[o]!.push(s[r - 1]!));
  return { shape: outShape, strides: outStrides };
}

/** Largest element offset an operand reaches (|stride| * (size - 1) summed), for the index width. */
const maxOffset = (shape: readonly number[], strides: readonly number[]): number => shape.reduce((acc, n, d) => acc + Math.abs(strides[d]!) * (n - 1), 0);

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];

registerCuda(applyRotaryEmb.name, (ctx, input, cosIn, sinIn, isNeox) => {
  const x = input as Tensor;
  const cos = cosIn as Tensor;
  const sin = sinIn as Tensor;
  if (!FLOATS.includes(x.dtype)) throw unsupportedDtype(applyRotaryEmb.name, x, FLOATS.join(', '));
  if (x.ndim > RANK) throw new Error(`${applyRotaryEmb.name}: the cuda kernel supports inputs of up to ${RANK} dims, got ${x.ndim} (shape [${x.shape.join(', ')}])`);
  const out = allocOut(ctx.out as OutMeta);
  const d = x.shape[x.ndim - 1]!;
  const half = d / 2;
  const pairs = (numel(x.shape) / d) * half;
  if (pairs === 0) return out;
  const index = x.device.index;
  const c = collapseRotaryDims(x.shape, [out.strides, x.strides, broadcastStrides(cos.shape, cos.strides, x.shape), broadcastStrides(sin.shape, sin.strides, x.shape)]);
  const rank = c.shape.length;
  // Offsets are relative to each operand's pointer (ptrOf includes the storage offset); pairs stays
  // under 2^30 so the grid-stride step cannot overflow an int.
  const fits32 = pairs < 2 ** 30 && c.strides.every((st) => maxOffset(c.shape, st) < 2 ** 31);
  const width: IndexWidth = fits32 ? 'i32' : 'i64';
  const k = cachedKernel(index, applyRotaryName(x.dtype, isNeox as boolean, rank, width), () => applyRotarySource(x.dtype, isNeox as boolean, rank, width));
  const args = [ptrOf(out), ptrOf(x), ptrOf(cos), ptrOf(sin), pairs, half, ...c.shape, ...c.strides.flat()];
  launch(k, args, { grid: gridFor(index, pairs, BLOCK), block: BLOCK }, streamOf(out));
  return out;
});
