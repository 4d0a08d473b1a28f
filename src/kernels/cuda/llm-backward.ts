/**
 * cuda kernels for the backward of llm.rmsNorm and the act-and-mul ops, registered as device
 * backward kernels (src/ops/library/backward-kernels.ts) that the ops' backward formulas call on cuda
 * instead of their compositions of core ops.
 *
 * rmsNorm: a row kernel writes dx and each row's r = rsqrt(mean(x^2) + eps); dw = sum over rows
 * of g x r comes from a column kernel writing per-chunk partials (threads over columns, coalesced;
 * chunks over rows for parallelism), summed by Kiln's cuda sum and cast to the weight's dtype.
 * act-and-mul: one pointwise kernel writes both halves of dx (llm-act.ts runGatedBackward).
 */
import { dispatch } from '../../ops/dispatch.js';
import { sum } from '../../ops/defs/reduction.js';
import { registerBackwardKernel } from '../../ops/library/backward-kernels.js';
import { launch } from '../../runtime/cuda/launch.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { generateNormBackward, generateNormDw, NORM_BWD_BLOCK, normBackwardName, normDwName } from './codegen/llm.js';
import { allocOut, ptrOf, streamOf } from './device.js';
import { gatedActOf, runGatedBackward } from './llm-act.js';
import { cachedKernel, rowStride, Temps } from './llm-util.js';

/** Row chunks of the dw kernel at most: 128 partial rows keep the final sum small and every SM busy. */
const DW_CHUNKS = 128;

function rmsNormBackward(grad: Tensor, input: Tensor, weight: Tensor, eps: number, needX: boolean, needW: boolean): [Tensor | null, Tensor | null] {
  const h = input.shape[input.ndim - 1]!;
  const rows = h === 0 ? 0 : numel(input.shape) / h;
  const dense = (shape: readonly number[], dtype: DType, zero = false): Tensor => allocOut({ shape, strides: contiguousStrides(shape), dtype, device: input.device }, zero);
  const acc: DType = input.dtype === 'float64' ? 'float64' : 'float32';
  const dx = dense(input.shape, input.dtype);
  if (rows === 0) return [needX ? dx : null, needW ? dense([h], weight.dtype, true) : null];
  const t = new Temps();
  const rstd = dense([rows], acc);
  try {
    const x = t.rows(input);
    const g = t.rows(grad.dtype === input.dtype ? grad : t.keep(grad.to(input.dtype)));
    const w = weight.isContiguous() ? weight : t.dense(weight);
    const xs = rowStride(x)!;
    const gs = rowStride(g)!;
    const index = input.device.index;
    const kb = cachedKernel(index, normBackwardName(input.dtype), () => generateNormBackward(input.dtype));
    launch(kb, [ptrOf(dx), ptrOf(rstd), ptrOf(g), ptrOf(x), ptrOf(w), rows, h, gs, xs, h, eps], { grid: Math.min(rows, 2 ** 31 - 1), block: NORM_BWD_BLOCK }, streamOf(x));
    let dw: Tensor | null = null;
    if (needW) {
      const chunks = Math.min(rows, DW_CHUNKS);
      const partial = dense([chunks, h], acc);
      const kw = cachedKernel(index, normDwName(input.dtype), () => generateNormDw(input.dtype));
      launch(kw, [ptrOf(partial), ptrOf(g), ptrOf(x), ptrOf(rstd), rows, h, gs, xs], { grid: Math.ceil(h / NORM_BWD_BLOCK), gridY: chunks, block: NORM_BWD_BLOCK }, streamOf(x));
      const s = dispatch(sum, partial, [0], false, null);
      dw = s.dtype === weight.dtype ? s : s.to(weight.dtype);
      if (dw !== s) s.dispose();
      partial.dispose();
    }
    if (!needX) dx.dispose();
    return [needX ? dx : null, dw];
  } finally {
    rstd.dispose();
    t.dispose();
  }
}

registerBackwardKernel('llm.rmsNorm', 'cuda', (grads, args, needs) => {
  const [input, weight, eps] = args as [Tensor, Tensor, number];
  const [dx, dw] = rmsNormBackward(grads[0]!, input, weight, eps, needs[0]!, needs[1]!);
  return [dx, dw, null];
});

registerBackwardKernel('llm.siluAndMul', 'cuda', (grads, args) => [runGatedBackward(grads[0]!, args[0] as Tensor, 'silu')]);
registerBackwardKernel('llm.geluAndMul', 'cuda', (grads, args) => [runGatedBackward(grads[0]!, args[0] as Tensor, gatedActOf(args[1] as 'none' | 'tanh')), null]);
