/**
 * cuda kernel of llm.linearSiluAndMul: the bfloat16 GEMV's gated variant (gemv.ts: each warp slot
 * streams gate row n and up row I + n and stores silu(g) * u) wherever the plain GEMV would take
 * the product (bfloat16, at most KILN_GEMV_MAX_ROWS rows, rows dense along K and 16-byte aligned),
 * or the tensor-core skinny GEMM's gated variant (mma-gemv.ts) for 2..KILN_MMA_GEMV_MAX_ROWS rows;
 * otherwise the two ops it fuses (linear, then llm.siluAndMul), so every shape and dtype works.
 */
import { linear } from '../../ops/defs/linalg.js';
import { siluAndMul } from '../../ops/defs/llm.js';
import { linearSiluAndMul } from '../../ops/defs/llm-linear-silu-mul.js';
import { dispatch } from '../../ops/dispatch.js';
import type { OutMeta } from '../../ops/schema.js';
import { getOption } from '../../runtime/config.js';
import { numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, ptrOf, streamOf } from './device.js';
import { gemvApplies, runGemvGated } from './gemv.js';
import { mmaGemvApplies, runMmaGemv } from './mma-gemv.js';
import { registerCuda, rowStride } from './llm-util.js';

registerCuda(linearSiluAndMul.name, (ctx, xIn, wIn, bIn) => {
  const x = xIn as Tensor;
  const w = wIn as Tensor;
  const b = (bIn ?? null) as Tensor | null;
  const k = x.shape[x.ndim - 1]!;
  const half = w.shape[0]! / 2;
  const m = numel(x.shape) / Math.max(k, 1);
  if (x.dtype === 'bfloat16' && m > 0 && half > 0) {
    const ldx = m === 1 ? k : rowStride(x);
    const ldw = rowStride(w);
    const biasOk = b === null || b.strides[0] === 1;
    if (ldx !== null && ldw !== null && biasOk) {
      const out = allocOut(ctx.out as OutMeta);
      const p = { m, n: half, k, x: ptrOf(x), ldx, w: ptrOf(w), ldw, out: ptrOf(out), ldo: half, bias: b ? ptrOf(b) : undefined };
      if (gemvApplies(p)) {
        runGemvGated(out.device.index, streamOf(out), p, getOption('KILN_CUDA_FAST_MATH'));
        return out;
      }
      if (mmaGemvApplies(out.device.index, p)) {
        runMmaGemv(out.device.index, streamOf(out), p, true, getOption('KILN_CUDA_FAST_MATH'));
        return out;
      }
      out.dispose();
    }
  }
  const y = dispatch(linear, x, w, b);
  const out = dispatch(siluAndMul, y);
  y.dispose();
  return out;
});
