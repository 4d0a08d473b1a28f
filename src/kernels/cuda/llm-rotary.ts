/**
 * cuda kernel of llm.applyRotaryEmb: out = x cos + rot(x) sin, one thread per rotated pair
 * (i1, i2) = (j, j + D/2) for neox or (2j, 2j + 1) for gpt-j, so each thread reads x[i1], x[i2]
 * once: out[i1] = x1 cos1 - x2 sin1, out[i2] = x2 cos2 + x1 sin2. Any strides for every operand
 * (cos/sin through broadcast strides, the output in the input's layout), rank up to 6, 64-bit
 * index math; float32 compute for halves (float64 stays float64).
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
// out, x, cos, sin, pairs, half, then RANK sizes and RANK strides for each of out, x, cos, sin.
const PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', ...(Array.from({ length: RANK * 5 }, () => 'i64') as ParamType[])];

/** The kernel's name, also its key in the kernel cache. */
const applyRotaryName = (dtype: DType, isNeox: boolean): string => `kiln_apply_rotary_${isNeox ? 'neox' : 'gptj'}_${dtype}`;

export function applyRotarySource(dtype: DType, isNeox: boolean): GeneratedKernel {
  const t = storageType(dtype);
  const ct = computeType(dtype);
  const name = applyRotaryName(dtype, isNeox);
  const dims = Array.from({ length: RANK }, (_, k) => k);
  const sig = (p: string): string => dims.map((k) => `long long ${p}${k}`).join(', ');
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${t}* __restrict__ out, const ${t}* __restrict__ x, const ${t}* __restrict__ cs, const ${t}* __restrict__ sn,
    long long pairs, long long half, ${sig('n')}, ${sig('so')}, ${sig('sx')}, ${sig('sc')}, ${sig('ss')}) {
  for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += (long long)gridDim.x * blockDim.x) {
    long long row = p / half; const long long j = p - row * half;
    long long oo = 0, ox = 0, oc = 0, os = 0;
${dims
  .slice(0, RANK - 1)
  .reverse()
  .map((k) => `    { const long long i = row % n${k}; row /= n${k}; oo += i * so${k}; ox += i * sx${k}; oc += i * sc${k}; os += i * ss${k}; }`)
  .join('\n')}
    const long long i1 = ${isNeox ? 'j' : '2 * j'}, i2 = ${isNeox ? 'j + half' : '2 * j + 1'};
    const ${ct} x1 = ${loadAs(dtype, `x[ox + i1 * sx${RANK - 1}]`, ct)}, x2 = ${loadAs(dtype, `x[ox + i2 * sx${RANK - 1}]`, ct)};
    const ${ct} c1 = ${loadAs(dtype, `cs[oc + i1 * sc${RANK - 1}]`, ct)}, c2 = ${loadAs(dtype, `cs[oc + i2 * sc${RANK - 1}]`, ct)};
    const ${ct} s1 = ${loadAs(dtype, `sn[os + i1 * ss${RANK - 1}]`, ct)}, s2 = ${loadAs(dtype, `sn[os + i2 * ss${RANK - 1}]`, ct)};
    out[oo + i1 * so${RANK - 1}] = ${storeAs(dtype, 'x1 * c1 - x2 * s1', ct)};
    out[oo + i2 * so${RANK - 1}] = ${storeAs(dtype, 'x2 * c2 + x1 * s2', ct)};
  }
}
`;
  return { name, source, params: PARAMS };
}

const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];

/** Left-pads a shape/strides pair to RANK dims (size 1, stride 0). */
const pad = (xs: readonly number[], fill: number): number[] => [...Array.from({ length: RANK - xs.length }, () => fill), ...xs];

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
  const k = cachedKernel(index, applyRotaryName(x.dtype, isNeox as boolean), () => applyRotarySource(x.dtype, isNeox as boolean));
  const args = [
    ptrOf(out), ptrOf(x), ptrOf(cos), ptrOf(sin), pairs, half,
    ...pad(x.shape, 1),
    ...pad(out.strides, 0),
    ...pad(x.strides, 0),
    ...pad(broadcastStrides(cos.shape, cos.strides, x.shape), 0),
    ...pad(broadcastStrides(sin.shape, sin.strides, x.shape), 0),
  ];
  launch(k, args, { grid: gridFor(index, pairs, BLOCK), block: BLOCK }, streamOf(out));
  return out;
});
