/**
 * cuda kernels for groupNorm and dropout.
 * - groupNorm: one block per (sample, group) over a dense NCHW copy; two passes over the group in
 *   fp32 (fp64 for float64) through a block reduction (mean, then the mean squared deviation, as
 *   the CPU kernel computes), then each element normalised with its channel's weight and bias.
 * - dropout: the keep mask is drawn on the host from the same generator stream, in the same
 *   logical order, as the CPU kernel (so one seed gives one mask on both devices), uploaded as a
 *   multiplier tensor (scale or 0) and applied by the cuda pointwise multiply.
 */
import { dispatch } from '../../ops/dispatch.js';
import { mul } from '../../ops/defs/pointwise.js';
import { dropout } from '../../ops/defs/nn.js';
import { groupNorm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import { CPU } from '../../runtime/device.js';
import { defaultGenerator, type Generator } from '../../tensor/random.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { dropoutScale } from '../cpu/nn.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './codegen/ctypes.js';
import { contiguousAs, copyTensor } from './core.js';
import { allocOut, ptrOf, streamOf, unsupportedDtype } from './device.js';

const GN_BLOCK = 256;
// out, x, weight, bias, groups, channels per group, spatial, eps.
const GN_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i64', 'f64'];

export function groupNormSource(dtype: DType, hasWeight: boolean, hasBias: boolean): { name: string; source: string } {
  const t = storageType(dtype);
  const ct = computeType(dtype);
  const acc = ct === 'double' ? 'double' : 'float';
  const name = `kiln_group_norm_${dtype}_${hasWeight ? 'w' : ''}${hasBias ? 'b' : ''}`;
  const source = `${PRELUDE}
__device__ __forceinline__ ${acc} kiln_gn_block_sum(${acc} v, ${acc}* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : (${acc})0;
  if (warp == 0) for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  const ${acc} r = sh[0];
  __syncthreads();
  return r;
}
extern "C" __global__ void __launch_bounds__(${GN_BLOCK}) ${name}(${t}* __restrict__ out, const ${t}* __restrict__ x, const ${t}* __restrict__ w, const ${t}* __restrict__ b,
    long long groups, long long cpg, long long spatial, double eps) {
  __shared__ ${acc} sh[32];
  const long long ng = blockIdx.x;
  const long long g = ng % groups;
  const long long size = cpg * spatial;
  const long long base = ng * size;
  ${acc} s = 0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) s += ${loadAs(dtype, 'x[base + i]', acc)};
  const ${acc} mean = kiln_gn_block_sum(s, sh) / (${acc})size;
  ${acc} q = 0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) { const ${acc} d = ${loadAs(dtype, 'x[base + i]', acc)} - mean; q += d * d; }
  const ${acc} rstd = (${acc})1 / sqrt(kiln_gn_block_sum(q, sh) / (${acc})size + (${acc})eps);
  for (long long i = threadIdx.x; i < size; i += blockDim.x) {
    const long long c = g * cpg + i / spatial;
    const ${acc} scale = ${hasWeight ? loadAs(dtype, 'w[c]', acc) : '(' + acc + ')1'} * rstd;
    const ${acc} shift = ${hasBias ? loadAs(dtype, 'b[c]', acc) : '(' + acc + ')0'};
    out[base + i] = ${storeAs(dtype, `(${loadAs(dtype, 'x[base + i]', acc)} - mean) * scale + shift`, ct)};
  }
}
`;
  return { name, source };
}

const kernels = new Map<string, CudaKernel>();
const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];

registerKernel(groupNorm, 'cuda', (ctx, input, groupsArg, weight, bias, epsArg) => {
  if (!FLOATS.includes(input.dtype)) throw unsupportedDtype('groupNorm', input, FLOATS.join(', '));
  const groups = Number(groupsArg);
  const [n, c] = input.shape as [number, number];
  const spatial = numel(input.shape.slice(2));
  const out = allocOut(ctx.out);
  if (n * c * spatial === 0) return out;
  const x = contiguousAs(input);
  const w = weight ? contiguousAs(weight) : null;
  const b = bias ? contiguousAs(bias) : null;
  // The kernel writes row-major; an output in another layout (channels_last) takes a copy.
  const target = out.isContiguous() ? out : allocOut({ shape: out.shape, strides: contiguousStrides(out.shape), dtype: out.dtype, device: out.device });
  try {
    const index = input.device.index;
    const src = groupNormSource(input.dtype, w !== null, b !== null);
    const key = `${index}#${src.name}`;
    let k = kernels.get(key);
    if (!k) {
      k = kernelFromSource(index, src.source, src.name, GN_PARAMS);
      kernels.set(key, k);
    }
    launch(k, [ptrOf(target), ptrOf(x), w ? ptrOf(w) : 0, b ? ptrOf(b) : 0, groups, c / groups, spatial, Number(epsArg)], { grid: n * groups, block: GN_BLOCK }, streamOf(out));
    if (target !== out) copyTensor(out, target);
  } finally {
    if (x !== input) x.dispose();
    if (w && w !== weight) w.dispose();
    if (b && b !== bias) b.dispose();
    if (target !== out) target.dispose();
  }
  return out;
});

registerKernel(dropout, 'cuda', (ctx, input, pArg, training, genArg) => {
  const p = pArg as number;
  const out = allocOut(ctx.out);
  if (!training || p === 0) return copyTensor(out, input);
  if (input.dtype === 'bool') return copyTensor(out, 0);
  if (p === 1) return copyTensor(out, dispatch(mul, input, 0));
  // The CPU kernel's draws, in logical (row-major) order: gen.nextUint32() / 2^32 < 1 - p keeps.
  const gen = (genArg as Generator | null) ?? defaultGenerator;
  const scale = dropoutScale(input.dtype, p);
  const keep = 1 - p;
  const count = numel(input.shape);
  const host = Tensor.empty(input.shape, input.dtype === 'float64' ? 'float64' : 'float32', CPU);
  const view = input.dtype === 'float64' ? new Float64Array(host.storage.cpuArrayBuffer(), 0, count) : new Float32Array(host.storage.cpuArrayBuffer(), 0, count);
  for (let i = 0; i < count; i++) view[i] = gen.nextUint32() / 4294967296 < keep ? scale : 0;
  const mask = host.to(input.device).to(input.dtype);
  host.dispose();
  try {
    return copyTensor(out, dispatch(mul, input, mask));
  } finally {
    mask.dispose();
  }
});
