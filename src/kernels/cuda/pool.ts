/**
 * cuda kernels for maxPool2d (with and without indices) and avgPool2d: one thread per output
 * element, any input/output strides (contiguous and channels_last alike), PyTorch's window rules
 * (dilation and -inf padding for max with NaN winning; count_include_pad and divisor_override for
 * average), matching the CPU kernels.
 */
import { avgPool2d, avgPoolGeometry, maxPool2d, maxPool2dWithIndices, maxPoolGeometry, type PoolGeometry } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { computeType, loadAs, PRELUDE, storageType, storeAs } from './codegen/ctypes.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';

const BLOCK = 256;
// out, indices, x, then 23 integer geometry values, then the average's divisor override.
const POOL_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', ...(Array.from({ length: 23 }, () => 'i64') as ParamType[]), 'f64'];

export function poolSource(kind: 'max' | 'avg', dtype: DType, withIndices: boolean): { name: string; source: string } {
  const t = storageType(dtype);
  const ct = computeType(dtype);
  const float = ct === 'float' || ct === 'double';
  const name = `kiln_pool_${kind}${withIndices ? '_idx' : ''}_${dtype}`;
  const lowest = float ? `-(${ct})KILN_INF` : dtype === 'uint8' ? '0' : ct === 'int' ? '(-2147483647 - 1)' : '(-9223372036854775807LL - 1)';
  const body =
    kind === 'max'
      ? `
    long long ih0 = oh * sh - ph; const long long ih1 = (ih0 + (KH - 1) * dh + 1 < H) ? ih0 + (KH - 1) * dh + 1 : H;
    while (ih0 < 0) ih0 += dh;
    long long iw0 = ow * sw - pw; const long long iw1 = (iw0 + (KW - 1) * dw + 1 < W) ? iw0 + (KW - 1) * dw + 1 : W;
    while (iw0 < 0) iw0 += dw;
    ${ct} best = ${lowest}; long long bi = ih0 * W + iw0;
    for (long long ih = ih0; ih < ih1; ih += dh)
      for (long long iw = iw0; iw < iw1; iw += dw) {
        const ${ct} v = ${loadAs(dtype, 'xp[ih * xs2 + iw * xs3]', ct)};
        if (v > best || v != v) { best = v; bi = ih * W + iw; }
      }
    out[o] = ${storeAs(dtype, 'best', ct)};
    ${withIndices ? 'idx[o] = bi;' : ''}`
      : `
    long long ih0 = oh * sh - ph; long long ih1 = (ih0 + KH < H + ph) ? ih0 + KH : H + ph;
    const long long poolH = ih1 - ih0;
    ih0 = ih0 > 0 ? ih0 : 0; ih1 = ih1 < H ? ih1 : H;
    long long iw0 = ow * sw - pw; long long iw1 = (iw0 + KW < W + pw) ? iw0 + KW : W + pw;
    const long long poolSize = poolH * (iw1 - iw0);
    iw0 = iw0 > 0 ? iw0 : 0; iw1 = iw1 < W ? iw1 : W;
    if (ih0 >= ih1 || iw0 >= iw1) { out[o] = ${storeAs(dtype, '0', ct)}; continue; }
    const double div = divisor != 0.0 ? divisor : (double)(countIncludePad ? poolSize : (ih1 - ih0) * (iw1 - iw0));
    ${float ? ct : 'double'} sum = 0;
    for (long long ih = ih0; ih < ih1; ih++)
      for (long long iw = iw0; iw < iw1; iw++) sum += ${loadAs(dtype, 'xp[ih * xs2 + iw * xs3]', float ? ct : 'double')};
    ${float ? `out[o] = ${storeAs(dtype, `sum / (${ct})div`, ct)};` : `out[o] = ${storeAs(dtype, `(${ct})trunc(sum / div)`, ct)};`}`;
  const source = `${PRELUDE}
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${t}* __restrict__ out, long long* __restrict__ idx, const ${t}* __restrict__ x,
    long long total, long long C, long long H, long long W, long long OH, long long OW, long long KH, long long KW,
    long long sh, long long sw, long long ph, long long pw, long long dh, long long dw,
    long long xs0, long long xs1, long long xs2, long long xs3, long long os0, long long os1, long long os2, long long os3,
    long long countIncludePad, double divisor) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long ow = e % OW; const long long oh = (e / OW) % OH; const long long c = (e / (OW * OH)) % C; const long long n = e / (OW * OH * C);
    const ${t}* xp = x + n * xs0 + c * xs1;
    const long long o = n * os0 + c * os1 + oh * os2 + ow * os3;
    ${body}
  }
}
`;
  return { name, source };
}

const kernels = new Map<string, CudaKernel>();

function runPool(kind: 'max' | 'avg', input: Tensor, g: PoolGeometry, out: Tensor, indices: Tensor | null, countIncludePad = false, divisor = 0): void {
  const total = g.n * g.c * g.oh * g.ow;
  if (total === 0) return;
  const index = out.device.index;
  const src = poolSource(kind, input.dtype, indices !== null);
  const key = `${index}#${src.name}`;
  let k = kernels.get(key);
  if (!k) {
    k = kernelFromSource(index, src.source, src.name, POOL_PARAMS);
    kernels.set(key, k);
  }
  const xs = g.batched ? input.strides : [0, ...input.strides];
  const os = g.batched ? out.strides : [0, ...out.strides];
  const [kh, kw] = g.kernel as [number, number];
  const [sh, sw] = g.stride as [number, number];
  const [ph, pw] = g.padding as [number, number];
  const [dh, dw] = (g.dilation.length === 2 ? g.dilation : [1, 1]) as [number, number];
  const args = [ptrOf(out), indices ? ptrOf(indices) : 0, ptrOf(input), total, g.c, g.h, g.w, g.oh, g.ow, kh, kw, sh, sw, ph, pw, dh, dw, ...xs, ...os, countIncludePad ? 1 : 0, divisor];
  launch(k, args, { grid: gridFor(index, total, BLOCK), block: BLOCK }, streamOf(out));
}

registerKernel(maxPool2d, 'cuda', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean);
  const out = allocOut(ctx.out);
  runPool('max', input, g, out, null);
  return out;
});

registerKernel(maxPool2dWithIndices, 'cuda', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean, 'maxPool2dWithIndices');
  const [vm, im] = ctx.out as readonly OutMeta[];
  const values = allocOut(vm!);
  const indices = allocOut(im!);
  runPool('max', input, g, values, indices);
  return [values, indices];
});

registerKernel(avgPool2d, 'cuda', (ctx, input, kernelSize, stride, padding, ceilMode, countIncludePad, divisorArg) => {
  const divisorOverride = divisorArg as number | null;
  const g = avgPoolGeometry(input, kernelSize, stride, padding, ceilMode as boolean, divisorOverride);
  const out = allocOut(ctx.out);
  runPool('avg', input, g, out, null, countIncludePad === true, divisorOverride ?? 0);
  return out;
});
