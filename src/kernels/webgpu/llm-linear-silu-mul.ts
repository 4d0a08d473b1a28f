/**
 * webgpu kernel of llm.linearSiluAndMul (issue #20): the skinny GEMV's gated variant
 * (gemv-codegen.ts: each team streams gate row n and up row I + n of the weight and stores
 * silu(g) * u) wherever the plain GEMV would take the product (at most 8 rows, operands exact as
 * 16-byte words along K); otherwise the two ops it fuses (linear, then llm.siluAndMul), so every
 * shape and dtype works. With a kernel chosen here, kiln.compile's linear + silu * mul pass
 * (src/llm/linear-silu-mul-pass.ts, behind KILN_LINEAR_SILU_MUL) fires on webgpu: a Qwen3 decode
 * step loses its 28 silu * mul dispatches and the [B, 2I] intermediate.
 */
import { linear } from '../../ops/defs/linalg.js';
import { siluAndMul } from '../../ops/defs/llm.js';
import { linearSiluAndMul } from '../../ops/defs/llm-linear-silu-mul.js';
import { dispatch } from '../../ops/dispatch.js';
import { registerLlmImpl } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './device.js';
import { runGemvGated } from './linalg.js';

registerLlmImpl(linearSiluAndMul.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, xIn, wIn, bIn) => {
    const x = xIn as Tensor;
    const w = wIn as Tensor;
    const b = (bIn ?? null) as Tensor | null;
    const out = allocOut(ctx.out as OutMeta);
    if (out.numel() === 0) return out;
    if (runGemvGated(x, w, b, out)) return out;
    out.dispose();
    const y = dispatch(linear, x, w, b);
    const h = dispatch(siluAndMul, y);
    y.dispose();
    return h;
  },
});
