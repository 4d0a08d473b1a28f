/**
 * LLM library op: a SwiGLU MLP's gate/up projection and its activation in one call:
 *
 *   llm.linearSiluAndMul(input, weight, bias) = llm.siluAndMul(linear(input, weight, bias))
 *     weight [2I, K]: the gate's I rows, then the up projection's I rows (Qwen3's gate_proj and
 *     up_proj concatenated, as kiln.compile's horizontal fusion makes them); bias [2I] or null.
 *     out[..., i] = silu(g_i) * u_i with g = (input @ weight[:I]^T + bias[:I]) and u likewise, each
 *     rounded to the dtype (as the linear stores them), the product rounded once (as siluAndMul).
 *
 * A decode step at small batch reads the weights once either way; fusing the activation into the
 * projection's epilogue removes a launch per layer and the [.., 2I] intermediate (issue #17). The
 * cuda kernel is the bfloat16 GEMV's gated variant (kernels/cuda/gemv.ts) where the GEMV applies,
 * else the two ops. kiln.compile maps linear -> slice/slice -> silu * mul onto it in inference
 * programs behind KILN_LINEAR_SILU_MUL (src/llm/linear-silu-mul-pass.ts).
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.linearSiluAndMul';

export const linearSiluAndMul = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | null): OutMeta {
    floatTensor(OP, 'input', input);
    floatTensor(OP, 'weight', weight);
    const k = input.shape[input.shape.length - 1]!;
    if (weight.shape.length !== 2 || weight.shape[1] !== k || weight.shape[0]! % 2 !== 0) {
      throw new Error(`${OP}: argument 'weight' must be [2I, ${k}] (gate rows then up rows, K = the last dim of 'input'), got ${describe(weight)}`);
    }
    sameDtype(OP, ['input', input], ['weight', weight]);
    sameDevice(OP, ['input', input], ['weight', weight]);
    if (bias !== null && bias !== undefined) {
      floatTensor(OP, 'bias', bias);
      if (bias.shape.length !== 1 || bias.shape[0] !== weight.shape[0]) throw new Error(`${OP}: argument 'bias' must be [${weight.shape[0]}], got ${describe(bias)}`);
      sameDtype(OP, ['input', input], ['bias', bias]);
      sameDevice(OP, ['input', input], ['bias', bias]);
    }
    return dense([...input.shape.slice(0, -1), weight.shape[0]! / 2], input.dtype, input.device);
  },
});
