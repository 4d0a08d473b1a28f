/**
 * cuda kernel of llm.addRmsNormLinear: the bfloat16 GEMV's norm-prologue variant (gemv.ts: each
 * block computes s = x + residual, its rstd and the normalised rows into shared memory, block 0
 * stores s; then the plain or gated GEMV) wherever the GEMV would take the product (bfloat16, at
 * most KILN_GEMV_MAX_ROWS rows, rows dense along K and 16-byte aligned, M * K * 2 bytes of shared
 * memory within 48 KiB); otherwise the op's parts (add, rmsNorm, linear / llm.linearSiluAndMul), so
 * every shape and dtype works. `takes` (the compile pass's test): bfloat16, 1 to min(8,
 * KILN_GEMV_MAX_ROWS) rows.
 */
import { add } from '../../ops/defs/core.js';
import { linear, rmsNorm } from '../../ops/defs/linalg.js';
import { linearSiluAndMul } from '../../ops/defs/llm-linear-silu-mul.js';
import { addRmsNormLinear, addRmsNormLinearArgs } from '../../ops/defs/llm-add-rms-norm-linear.js';
import { dispatch } from '../../ops/dispatch.js';
import type { OutMeta } from '../../ops/schema.js';
import { getOption } from '../../runtime/config.js';
import { numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, ptrOf, streamOf } from './device.js';
import { gemvNormApplies, runGemvNorm, type GemvNormProblem } from './gemv.js';
import { registerCuda, rowStride } from './llm-util.js';

/** eps as the compiled norm adds it: a scalar operand of a bfloat16 add is rounded to bfloat16 (round to nearest even). */
function bf16Eps(eps: number): number {
  const f = new Float32Array([eps]);
  const u = new Uint32Array(f.buffer);
  u[0] = ((u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) >>> 16) << 16;
  return f[0]!;
}

registerCuda(addRmsNormLinear.name, (ctx, ...args) => {
  const { x, r, g, eps, w, b, gated } = addRmsNormLinearArgs(args);
  const k = x.shape[x.ndim - 1]!;
  const n = gated ? w.shape[0]! / 2 : w.shape[0]!;
  const m = numel(x.shape) / Math.max(k, 1);
  const metas = ctx.out as OutMeta[];
  if (x.dtype === 'bfloat16' && m > 0 && n > 0) {
    const ldx = m === 1 ? k : rowStride(x);
    const ldr = r === null ? 0 : m === 1 ? k : rowStride(r);
    const ldw = rowStride(w);
    const dense1 = (t: Tensor | null): boolean => t === null || t.strides[0] === 1;
    if (ldx !== null && ldr !== null && ldw !== null && dense1(b) && dense1(g)) {
      const out = allocOut(metas[0]!);
      const h = allocOut(metas[1]!);
      const p: GemvNormProblem = {
        m, n, k,
        x: ptrOf(x), ldx,
        res: r ? ptrOf(r) : undefined, ldr,
        gamma: ptrOf(g), eps: bf16Eps(eps),
        w: ptrOf(w), ldw,
        out: ptrOf(out), ldo: n,
        hout: ptrOf(h), ldh: k,
        bias: b ? ptrOf(b) : undefined,
      };
      if (gemvNormApplies(p)) {
        runGemvNorm(out.device.index, streamOf(out), p, gated, getOption('KILN_CUDA_FAST_MATH'));
        return [out, h];
      }
      out.dispose();
      h.dispose();
    }
  }
  // The parts: the eager add rounds s before the norm (the kernel path normalises the unrounded sum).
  const h = r === null ? dispatch(add, x, 0, 1) : dispatch(add, x, r, 1);
  const y = dispatch(rmsNorm, h, [k], g, eps);
  const out = gated ? dispatch(linearSiluAndMul, y, w, b) : dispatch(linear, y, w, b);
  y.dispose();
  return [out, h];
}, (dtype, rows) => dtype === 'bfloat16' && rows >= 1 && rows <= Math.min(8, Number(getOption('KILN_GEMV_MAX_ROWS'))));
