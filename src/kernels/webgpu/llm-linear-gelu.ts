/**
 * webgpu kernel of llm.linearGelu: the product on the webgpu GEMM (linalg.ts runGemm) with the GELU
 * in its epilogue (GemmSpec.gelu: the tiled and subgroup-matrix kernels' stores, or the split-K
 * combine's), so the [.., N] result is written once, rounded once, and a small MLP loses a dispatch.
 * A product of a few rows keeps the skinny GEMV (it streams the weight faster than the tiled
 * kernels at that size) and applies the GELU in a pass after it.
 * With a kernel chosen here, kiln.compile's linear + gelu pass (src/llm/linear-gelu-pass.ts,
 * KILN_LINEAR_GELU) fires on webgpu.
 */
import { linearGelu } from '../../ops/defs/llm-linear-gelu.js';
import { registerLlmImpl } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './device.js';
import { into, linearInto } from './linalg.js';

registerLlmImpl(linearGelu.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, xIn, wIn, bIn, approximate) =>
    into(allocOut(ctx.out as OutMeta), (out) => {
      if (out.numel() > 0) linearInto(out, xIn as Tensor, wIn as Tensor, (bIn ?? null) as Tensor | null, approximate === 'tanh' ? 'tanh' : 'none');
    }),
});
