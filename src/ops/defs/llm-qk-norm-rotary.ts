/**
 * LLM library op: per-head RMSNorm of q and k followed by the rotary embedding, both tensors in
 * one call (Qwen3's attention: q_norm/k_norm over head_dim before RoPE):
 *
 *   llm.qkNormRotary(q, k, qWeight, kWeight, eps, cos, sin, isNeox) = [q', k']
 *     n  = round(x * rsqrt(mean(x^2, -1) + eps) * weight)      (round: to x's dtype)
 *     x' = n * cos + rot(n) * sin                             (as llm.applyRotaryEmb)
 *
 * The norm's result is rounded to the input dtype before the rotation, as the two ops it replaces
 * (a norm, then llm.applyRotaryEmb) round between them, so the fused kernel equals the unfused
 * path to float32-accumulation rounding. One launch covers both tensors (for a 28-layer model: 28
 * launches instead of 112). cos and sin broadcast to each of q and k (same last dim D); q and k
 * may have different shapes (grouped-query attention: fewer k heads). Outputs keep each input's
 * layout (a transposed [B, H, T, D] view stays transposed), as applyRotaryEmb's output does.
 * kiln.compile maps rmsNorm -> (transpose) -> applyRotaryEmb chains of q and k onto it in
 * inference programs (src/llm/qk-norm-rotary-pass.ts).
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { fmtShape, preservedStrides } from '../../tensor/layout.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { floatTensor, positiveFloat, sameDevice, sameDtype } from './llm-common.js';
import { applyRotaryArgs } from './llm-rotary.js';

const OP = 'llm.qkNormRotary';

function checkArgs(q: TensorMeta, k: TensorMeta, qw: TensorMeta, kw: TensorMeta, eps: unknown, cos: TensorMeta, sin: TensorMeta, isNeox: unknown): void {
  floatTensor(OP, 'q', q);
  floatTensor(OP, 'k', k);
  floatTensor(OP, 'qWeight', qw);
  floatTensor(OP, 'kWeight', kw);
  sameDtype(OP, ['q', q], ['k', k]);
  sameDtype(OP, ['q', q], ['qWeight', qw]);
  sameDtype(OP, ['q', q], ['kWeight', kw]);
  sameDevice(OP, ['q', q], ['k', k]);
  sameDevice(OP, ['q', q], ['qWeight', qw]);
  sameDevice(OP, ['q', q], ['kWeight', kw]);
  positiveFloat(OP, 'eps', eps);
  const d = q.shape[q.shape.length - 1]!;
  if (k.shape[k.shape.length - 1] !== d) throw new Error(`${OP}: 'q' ${fmtShape(q.shape)} and 'k' ${fmtShape(k.shape)} must have the same last dim (head size)`);
  for (const [name, w] of [['qWeight', qw], ['kWeight', kw]] as const) {
    if (w.shape.length !== 1 || w.shape[0] !== d) throw new Error(`${OP}: argument '${name}' (${describe(w)}) must be 1-d of the head size ${d}`);
  }
  // The rotary part's checks (even D, cos/sin dtype, device and broadcast), for each tensor; the
  // messages name llm.applyRotaryEmb's 'input', so errors are re-labelled with this op and tensor.
  for (const [name, x] of [['q', q], ['k', k]] as const) {
    try {
      applyRotaryArgs(x, cos, sin, isNeox);
    } catch (e) {
      const err = e as Error;
      const msg = err.message.replace('llm.applyRotaryEmb', OP).replace(/'input'/g, `'${name}'`);
      throw err instanceof TypeError ? new TypeError(msg) : new Error(msg);
    }
  }
}

const keepLayout = (x: TensorMeta): OutMeta => ({ shape: [...x.shape], strides: preservedStrides(x.shape, x.shape, x.strides), dtype: x.dtype, device: x.device });

export const qkNormRotary = defineOp({
  name: OP,
  args: [
    { name: 'q', type: 'Tensor' },
    { name: 'k', type: 'Tensor' },
    { name: 'qWeight', type: 'Tensor' },
    { name: 'kWeight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
    { name: 'cos', type: 'Tensor' },
    { name: 'sin', type: 'Tensor' },
    { name: 'isNeox', type: 'bool' },
  ],
  outputs: [
    { name: 'qOut', type: 'Tensor' },
    { name: 'kOut', type: 'Tensor' },
  ],
  meta(q: TensorMeta, k: TensorMeta, qw: TensorMeta, kw: TensorMeta, eps: number, cos: TensorMeta, sin: TensorMeta, isNeox: boolean): OutMeta[] {
    checkArgs(q, k, qw, kw, eps, cos, sin, isNeox);
    return [keepLayout(q), keepLayout(k)];
  },
});
