/**
 * LLM library op: rotary embedding from explicit cos/sin tensors (the form Hugging Face models
 * apply, and what the rotate-half rewrite in src/llm/rewrites.ts maps onto):
 *
 *   llm.applyRotaryEmb(x, cos, sin, isNeox) = x * cos + rot(x) * sin
 *     rot (neox, rotate-half):  rot(x)[..., i] = -x[..., i + D/2] (i < D/2),  x[..., i - D/2] (i >= D/2)
 *     rot (gpt-j, interleaved): rot(x)[..., 2j] = -x[..., 2j + 1],            rot(x)[..., 2j + 1] = x[..., 2j]
 *
 * cos and sin broadcast to x's shape (typically [T, D] or [B, 1, T, D] against x [B, H, T, D]);
 * nothing is assumed about their values, so the op is exactly the composition it replaces. Unlike
 * llm.rotaryEmbedding (vLLM's in-place kernel over a positions + cos/sin cache) it is out of place,
 * its output keeps the input's layout (as a pointwise op's), and it is differentiable in x, cos, sin.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { broadcastShapes, fmtShape, preservedStrides } from '../../tensor/layout.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { floatTensor, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.applyRotaryEmb';

/** Checks the arguments; returns the rotated dim's size D. */
export function applyRotaryArgs(x: TensorMeta, cos: TensorMeta, sin: TensorMeta, isNeox: unknown): number {
  floatTensor(OP, 'input', x);
  floatTensor(OP, 'cos', cos);
  floatTensor(OP, 'sin', sin);
  sameDtype(OP, ['input', x], ['cos', cos]);
  sameDtype(OP, ['input', x], ['sin', sin]);
  sameDevice(OP, ['input', x], ['cos', cos]);
  sameDevice(OP, ['input', x], ['sin', sin]);
  if (typeof isNeox !== 'boolean') throw new TypeError(`${OP}: argument 'isNeox' must be a boolean, got ${String(isNeox)}`);
  const d = x.shape[x.shape.length - 1]!;
  if (d % 2 !== 0) throw new Error(`${OP}: the last dim of 'input' (${describe(x)}) must be even`);
  for (const [name, t] of [['cos', cos], ['sin', sin]] as const) {
    if (t.shape.length > x.shape.length || t.shape[t.shape.length - 1] !== d) {
      throw new Error(`${OP}: argument '${name}' (${describe(t)}) must broadcast to 'input' ${fmtShape(x.shape)} with the same last dim ${d}`);
    }
    let b: number[];
    try {
      b = broadcastShapes(OP, x.shape, t.shape);
    } catch {
      b = [];
    }
    if (b.length !== x.shape.length || b.some((s, i) => s !== x.shape[i])) {
      throw new Error(`${OP}: argument '${name}' (${describe(t)}) must broadcast to 'input' ${fmtShape(x.shape)} without growing it`);
    }
  }
  return d;
}

export const applyRotaryEmb = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'cos', type: 'Tensor' },
    { name: 'sin', type: 'Tensor' },
    { name: 'isNeox', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, cos: TensorMeta, sin: TensorMeta, isNeox: boolean): OutMeta {
    applyRotaryArgs(input, cos, sin, isNeox);
    // The layout of `input` is kept (a transposed [B, H, T, D] view stays transposed), as the
    // pointwise composition it replaces would give it.
    return { shape: [...input.shape], strides: preservedStrides(input.shape, input.shape, input.strides), dtype: input.dtype, device: input.device };
  },
});
