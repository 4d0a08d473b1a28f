/**
 * LLM library op: the residual add and RMSNorm before a linear, and the linear, in one call:
 *
 *   llm.addRmsNormLinear(input, residual, normWeight, eps, weight, bias, gated) -> [out, residualOut]
 *     s = input + residual (residual null: s = input), computed in float32 (float64 stays float64)
 *     residualOut = s rounded to the dtype (the new residual stream)
 *     y = (s * rsqrt(mean(s^2, -1) + eps)) * normWeight, rounded to the dtype (from the unrounded s)
 *     out = linear(y, weight, bias)                        gated false: weight [N, K], bias [N]
 *     out = silu(g) * u of linear(y, weight, bias)'s halves gated true: weight [2I, K] (gate rows,
 *           then up rows), bias [2I]; g and u rounded to the dtype, as llm.linearSiluAndMul
 *
 * This is what a compiled program computes for add -> rmsNorm -> linear (the generated reduce
 * kernel normalises the float32 sum and rounds only its two stores). A decode step at batch 1 has
 * two of these per layer; on cuda the bfloat16 GEMV computes the norm in its prologue (each block
 * from x and the residual, K elements from L2), so the norm's launch, tail and the [M, K]
 * round trip go (issue #17); on webgpu the skinny GEMV does the same for float32 / float16 /
 * bfloat16 (issue #20, kernels/webgpu/gemv-norm.ts). kiln.compile maps rmsNorm (of an add) -> linear / llm.linearSiluAndMul
 * onto it in inference programs behind KILN_ADD_RMSNORM_LINEAR (src/llm/add-rms-norm-linear-pass.ts).
 */
import type { Tensor, TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, positiveFloat, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.addRmsNormLinear';

export const addRmsNormLinear = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'residual', type: 'Tensor?' },
    { name: 'normWeight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'gated', type: 'bool' },
  ],
  outputs: [
    { name: 'out', type: 'Tensor' },
    { name: 'residualOut', type: 'Tensor' },
  ],
  meta(input: TensorMeta, residual: TensorMeta | null, normWeight: TensorMeta, eps: number, weight: TensorMeta, bias: TensorMeta | null, gated: boolean): OutMeta[] {
    floatTensor(OP, 'input', input);
    const k = input.shape[input.shape.length - 1]!;
    if (residual !== null && residual !== undefined) {
      floatTensor(OP, 'residual', residual);
      if (residual.shape.length !== input.shape.length || residual.shape.some((s, i) => s !== input.shape[i])) {
        throw new Error(`${OP}: argument 'residual' (${describe(residual)}) must have the shape of 'input' (${describe(input)})`);
      }
      sameDtype(OP, ['input', input], ['residual', residual]);
      sameDevice(OP, ['input', input], ['residual', residual]);
    }
    floatTensor(OP, 'normWeight', normWeight);
    if (normWeight.shape.length !== 1 || normWeight.shape[0] !== k) throw new Error(`${OP}: argument 'normWeight' must be [${k}] (the last dim of 'input'), got ${describe(normWeight)}`);
    sameDtype(OP, ['input', input], ['normWeight', normWeight]);
    sameDevice(OP, ['input', input], ['normWeight', normWeight]);
    positiveFloat(OP, 'eps', eps);
    if (typeof gated !== 'boolean') throw new TypeError(`${OP}: argument 'gated' must be a boolean, got ${String(gated)}`);
    floatTensor(OP, 'weight', weight);
    if (weight.shape.length !== 2 || weight.shape[1] !== k || (gated && weight.shape[0]! % 2 !== 0)) {
      throw new Error(`${OP}: argument 'weight' must be [${gated ? '2I' : 'N'}, ${k}]${gated ? ' (gate rows then up rows)' : ''} with K = the last dim of 'input', got ${describe(weight)}`);
    }
    sameDtype(OP, ['input', input], ['weight', weight]);
    sameDevice(OP, ['input', input], ['weight', weight]);
    if (bias !== null && bias !== undefined) {
      floatTensor(OP, 'bias', bias);
      if (bias.shape.length !== 1 || bias.shape[0] !== weight.shape[0]) throw new Error(`${OP}: argument 'bias' must be [${weight.shape[0]}], got ${describe(bias)}`);
      sameDtype(OP, ['input', input], ['bias', bias]);
      sameDevice(OP, ['input', input], ['bias', bias]);
    }
    const n = gated ? weight.shape[0]! / 2 : weight.shape[0]!;
    return [dense([...input.shape.slice(0, -1), n], input.dtype, input.device), dense(input.shape, input.dtype, input.device)];
  },
});

/** The op's arguments as a kernel receives them (x, r or null, gamma, eps, W, bias or null, gated), typed. */
export interface AddRmsNormLinearArgs {
  readonly x: Tensor;
  readonly r: Tensor | null;
  readonly g: Tensor;
  readonly eps: number;
  readonly w: Tensor;
  readonly b: Tensor | null;
  readonly gated: boolean;
}

/** Types a kernel's raw arguments (shared by every device's kernel; the op's meta function checked them). */
export function addRmsNormLinearArgs(args: readonly unknown[]): AddRmsNormLinearArgs {
  const [x, r, g, eps, w, b, gated] = args;
  return { x: x as Tensor, r: (r ?? null) as Tensor | null, g: g as Tensor, eps: eps as number, w: w as Tensor, b: (b ?? null) as Tensor | null, gated: gated as boolean };
}
