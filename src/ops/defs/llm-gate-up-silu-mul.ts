/**
 * LLM library op: a SwiGLU MLP's gate and up projections and its activation in one call, with the
 * two weights kept apart (as a model's gate_proj and up_proj hold them):
 *
 *   llm.gateUpSiluAndMul(input, gateWeight, upWeight) = silu(g) * u
 *     g = input @ gateWeight^T, u = input @ upWeight^T (each [I, K], no bias), each rounded to the
 *     dtype (as the linears store them), the product silu(g) * u rounded once (as llm.siluAndMul).
 *
 * llm.linearSiluAndMul takes the two as one [2I, K] weight, which an eager model would have to
 * concatenate (a copy of the MLP's largest weights). On the cpu this op is one native call for a
 * decode step's few rows (kernels/cpu/native/gemv-c.ts, kiln_gemv_gated: both weights streamed in
 * one pool job, silu * mul in the epilogue) where it took three ops (two linears, silu, mul: four
 * with the activation's own mul); Qwen3's eager cpu decode step calls it (issue #17,
 * KILN_DECODE_GATE_UP). Elsewhere, and for more rows, the reference composition runs.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.gateUpSiluAndMul';

export const gateUpSiluAndMul = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'gateWeight', type: 'Tensor' },
    { name: 'upWeight', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, gateWeight: TensorMeta, upWeight: TensorMeta): OutMeta {
    floatTensor(OP, 'input', input);
    floatTensor(OP, 'gateWeight', gateWeight);
    floatTensor(OP, 'upWeight', upWeight);
    if (input.shape.length === 0) throw new Error(`${OP}: argument 'input' must have at least 1 dim, got ${describe(input)}`);
    const k = input.shape[input.shape.length - 1]!;
    if (gateWeight.shape.length !== 2 || gateWeight.shape[1] !== k) {
      throw new Error(`${OP}: argument 'gateWeight' must be [I, ${k}] (K = the last dim of 'input'), got ${describe(gateWeight)}`);
    }
    if (upWeight.shape.length !== 2 || upWeight.shape[0] !== gateWeight.shape[0] || upWeight.shape[1] !== k) {
      throw new Error(`${OP}: argument 'upWeight' must be [${gateWeight.shape[0]}, ${k}] (the shape of 'gateWeight'), got ${describe(upWeight)}`);
    }
    sameDtype(OP, ['input', input], ['gateWeight', gateWeight]);
    sameDtype(OP, ['input', input], ['upWeight', upWeight]);
    sameDevice(OP, ['input', input], ['gateWeight', gateWeight]);
    sameDevice(OP, ['input', input], ['upWeight', upWeight]);
    return dense([...input.shape.slice(0, -1), gateWeight.shape[0]!], input.dtype, input.device);
  },
});
