/**
 * cuda kernels for conv2d (implicit GEMM, or im2col + cuBLASLt GEMM) and batchNorm.
 *
 * conv2d: float32/float16/bfloat16 with groups=1 run the implicit-GEMM kernel (conv-igemm.ts:
 * tensor cores, no patch matrix). The rest (float64, groups > 1, sizes past 32-bit GEMM indices)
 * take the older path: per group, a generated im2col kernel writes the patch matrix [N*OH*OW, Cg*KH*KW] (any
 * input strides, zero padding, dilation), cuBLASLt multiplies it by the weight read transposed
 * (bias fused), giving output rows in (n, oh, ow) order, which are copied into the output's layout
 * (channels_last outputs take the copy as a plain strided write). The patch matrix costs
 * N*OH*OW*Cg*KH*KW elements of memory.
 *
 * batchNorm: per-channel scale and shift (from the running statistics, or from batch statistics
 * computed by the row kernels in training mode, which also updates the running statistics), then
 * one pointwise pass y = x * scale[c] + shift[c].
 */
import { batchNorm } from '../../ops/defs/linalg.js';
import { conv2d, convPadding } from '../../ops/defs/nn.js';
import { registerKernel } from '../../ops/registry.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel, type ParamType } from '../../runtime/cuda/launch.js';
import { storageType } from './codegen/ctypes.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { bnUnsupported, igemmUnsupported, runIgemm } from './conv-igemm.js';
import { conv2dBatchNorm, conv2dBatchNormComposite } from '../../ops/defs/conv-fused.js';
import { runGemm } from './linalg.js';
import { runPointwise } from './pointwise-run.js';
import { batchStatsProgram } from './reduce-programs.js';
import { runReduce } from './reduce-run.js';

const BLOCK = 256;
const IM2COL_PARAMS: ParamType[] = ['ptr', 'ptr', ...(Array.from({ length: 20 }, () => 'i64') as ParamType[])];

export function im2colSource(dtype: DType): { name: string; source: string } {
  const t = storageType(dtype);
  const name = `kiln_im2col_${dtype}`;
  const source = `
extern "C" __global__ void __launch_bounds__(${BLOCK}) ${name}(${t}* __restrict__ out, const ${t}* __restrict__ x,
    long long total, long long C, long long H, long long W, long long OH, long long OW, long long KH, long long KW,
    long long sh, long long sw, long long pt, long long pl, long long dh, long long dw,
    long long xs0, long long xs1, long long xs2, long long xs3, long long c0, long long unused) {
  const long long K = C * KH * KW;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long k = e % K;
    const long long row = e / K;
    const long long j = k % KW;
    const long long i = (k / KW) % KH;
    const long long c = k / (KW * KH);
    const long long ow = row % OW;
    const long long oh = (row / OW) % OH;
    const long long n = row / (OW * OH);
    const long long ih = oh * sh - pt + i * dh;
    const long long iw = ow * sw - pl + j * dw;
    ${t} v = (${t})0;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[n * xs0 + (c0 + c) * xs1 + ih * xs2 + iw * xs3];
    out[e] = v;
  }
}
`;
  return { name, source };
}

const kernels = new Map<string, CudaKernel>();

function im2col(index: number, dtype: DType): CudaKernel {
  const key = `${index}#${dtype}`;
  let k = kernels.get(key);
  if (!k) {
    const g = im2colSource(dtype);
    k = kernelFromSource(index, g.source, g.name, IM2COL_PARAMS);
    kernels.set(key, k);
  }
  return k;
}

registerKernel(conv2d, 'cuda', (ctx, input, weight, bias, stride, padding, dilation, groupsArg) => {
  const groups = groupsArg as number;
  const out = allocOut(ctx.out);
  const batched = input.ndim === 4;
  const [n, , h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const xs = (batched ? input.strides : [0, ...input.strides]) as number[];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const oh = out.shape[batched ? 2 : 1]!;
  const ow = out.shape[batched ? 3 : 2]!;
  if (n * o * oh * ow === 0) return out;
  const pads = convPadding('conv2d', padding);
  if (igemmUnsupported({ input, weight, out, groups }) === null) {
    return runIgemm({ input, weight, bias, out, stride, padding: pads, dilation, groups });
  }
  const [pt, , pl] = pads;
  const sh = stride[0]!;
  const sw = stride[stride.length - 1]!;
  const dh = dilation[0]!;
  const dw = dilation[dilation.length - 1]!;
  const og = o / groups;
  const K = cg * kh * kw;
  const rows = n * oh * ow;
  const index = out.device.index;
  // Output rows (n, oh, ow) x channels; written into the output layout at the end.
  const res = allocOut({ shape: [n, oh, ow, o], strides: contiguousStrides([n, oh, ow, o]), dtype: out.dtype, device: out.device });
  const wd = weight.isContiguous() ? weight : copyTensor(allocOut({ shape: weight.shape, strides: contiguousStrides(weight.shape), dtype: weight.dtype, device: weight.device }), weight);
  const patches = allocOut({ shape: [rows, K], strides: [K, 1], dtype: input.dtype, device: input.device });
  const temps: Tensor[] = [res, patches];
  if (wd !== weight) temps.push(wd);
  try {
    for (let g = 0; g < groups; g++) {
      const total = rows * K;
      launch(
        im2col(index, input.dtype),
        [ptrOf(patches), ptrOf(input), total, cg, h, w, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, xs[0]!, xs[1]!, xs[2]!, xs[3]!, g * cg, 0],
        { grid: gridFor(index, total, BLOCK), block: BLOCK },
        streamOf(out),
      );
      // W_g^T: weight rows g*og.. as a [K, og] operand with strides (1, K).
      const wt = new Tensor(wd.storage, wd.dtype, [K, og], [1, K], wd.offset + g * og * K);
      const dst = groups === 1 ? res : allocOut({ shape: [rows, og], strides: [og, 1], dtype: out.dtype, device: out.device });
      const flat = groups === 1 ? new Tensor(res.storage, res.dtype, [rows, o], [o, 1], res.offset) : dst;
      const b = bias ? new Tensor(bias.storage, bias.dtype, [og], [bias.strides[0]!], bias.offset + g * og * bias.strides[0]!) : null;
      temps.push(wt, flat);
      if (b) temps.push(b);
      if (groups > 1) temps.push(dst);
      runGemm({ op: 'conv2d', out: flat, a: patches, b: wt, batch: [], M: rows, N: og, K, bias: b });
      if (groups > 1) copyTensor(new Tensor(res.storage, res.dtype, [rows, og], [o, 1], res.offset + g * og), dst);
    }
    // res [n, oh, ow, o] -> out [n, o, oh, ow] in whatever strides the meta chose.
    const os = (batched ? out.strides : [0, ...out.strides]) as number[];
    const view = new Tensor(out.storage, out.dtype, [n, oh, ow, o], [os[0]!, os[2]!, os[3]!, os[1]!], out.offset);
    temps.push(view);
    copyTensor(view, res);
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
});

// conv2dBatchNorm (the compiler's conv -> eval BatchNorm [-> ReLU] fold): the implicit-GEMM kernel
// with the BatchNorm scale/shift (derived by its weight prep kernel) and the ReLU in its epilogue;
// the unfused reference ops where that kernel does not apply.
registerKernel(conv2dBatchNorm, 'cuda', (ctx, input, weight, bias, stride, padding, dilation, groupsArg, runningMean, runningVar, bnWeight, bnBias, epsArg, reluArg) => {
  const groups = groupsArg as number;
  const eps = Number(epsArg);
  const relu = reluArg === true;
  const bn = { runningMean, runningVar, weight: bnWeight, bias: bnBias, eps };
  const out = allocOut(ctx.out);
  if (igemmUnsupported({ input, weight, out, groups }) === null && bnUnsupported(bn) === null) {
    return runIgemm({ input, weight, bias, out, stride, padding: convPadding('conv2d', padding), dilation, groups, bn, relu });
  }
  out.dispose();
  return conv2dBatchNormComposite(input, weight, bias, stride, padding, dilation, groups, runningMean, runningVar, bnWeight, bnBias, eps, relu);
});

// ------------------------------------------------------------------------------------------------
// batchNorm
// ------------------------------------------------------------------------------------------------

/** A [C] tensor read as x's shape with stride 1 on dim 1 (the channel) and 0 elsewhere. */
function perChannel(t: Tensor, like: Tensor): Tensor {
  return new Tensor(t.storage, t.dtype, like.shape, like.shape.map((_, d) => (d === 1 ? t.strides[0]! : 0)), t.offset);
}

/**
 * The batch mean and biased variance per channel in one reduce group (reduce-run.ts): the mean,
 * then the mean of squared deviations, in the stats' dtype; the input is read in place, whatever
 * its layout (NCHW or channels-last).
 */
function batchStats(input: Tensor, dims: readonly number[], mean: Tensor, varr: Tensor): void {
  const key = `batchStats|${input.dtype}|${mean.dtype}`;
  runReduce({ label: 'batchNorm', key, program: () => batchStatsProgram(input, dims, mean.dtype), x: input, dims, outs: [mean, varr].map((t) => ({ t, row: true })) });
}

registerKernel(batchNorm, 'cuda', (ctx, input, runningMean, runningVar, weight, bias, training, momentumArg, epsArg) => {
  const momentum = Number(momentumArg);
  const eps = Number(epsArg);
  const c = input.shape[1]!;
  const statDtype: DType = input.dtype === 'float64' ? 'float64' : 'float32';
  const temps: Tensor[] = [];
  const vec = (): Tensor => {
    const t = allocOut({ shape: [c], strides: [1], dtype: statDtype, device: input.device });
    temps.push(t);
    return t;
  };
  try {
    let mean: Tensor;
    let varr: Tensor;
    if (training === true) {
      const dims = input.shape.map((_, d) => d).filter((d) => d !== 1);
      const count = numel(dims.map((d) => input.shape[d]!));
      mean = vec();
      varr = vec();
      batchStats(input, dims, mean, varr);
      if (runningMean && runningVar && count > 0) {
        runPointwise('bnRunning', 'a * s0 + b * s1', runningMean, [runningMean, mean], [1 - momentum, momentum], statDtype);
        runPointwise('bnRunning', 'a * s0 + b * s1', runningVar, [runningVar, varr], [1 - momentum, (momentum * count) / (count - 1)], statDtype);
      }
    } else {
      mean = runningMean!;
      varr = runningVar!;
    }
    const scale = vec();
    const shift = vec();
    const rs = 'kiln_sqrt(a + s0)';
    if (weight) runPointwise('bnScale', `b / ${rs}`, scale, [varr, weight], [eps], statDtype);
    else runPointwise('bnScale', `1 / ${rs}`, scale, [varr], [eps], statDtype);
    if (bias) runPointwise('bnShift', 'c - a * b', shift, [mean, scale, bias], [], statDtype);
    else runPointwise('bnShift', '-(a * b)', shift, [mean, scale], [], statDtype);
    const out = allocOut(ctx.out);
    const sv = perChannel(scale, input);
    const hv = perChannel(shift, input);
    temps.push(sv, hv);
    return runPointwise('batchNorm', 'a * b + c', out, [input, sv, hv], [], statDtype);
  } finally {
    for (const t of temps) t.dispose();
  }
});
