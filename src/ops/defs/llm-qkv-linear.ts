/**
 * LLM library op: an attention layer's q, k and v projections of one input, with the three weights
 * kept apart (as a model's q_proj, k_proj and v_proj hold them):
 *
 *   llm.qkvLinear(input, qWeight, kWeight, vWeight) = [input @ qWeight^T, input @ kWeight^T, input @ vWeight^T]
 *     each weight [N_i, K] (no bias), each output [..., N_i] rounded to the dtype as a linear stores it.
 *
 * kiln.compile's horizontal fusion concatenates the weights (a second copy of them); an eager
 * decode step cannot afford that copy. On the cpu this op is one native call for a decode step's
 * few rows (kernels/cpu/native/gemv-c.ts, kiln_gemv_multi: the three weights streamed in one pool
 * job, so the threads share one call's fixed cost instead of three); Qwen3's eager cpu decode step
 * calls it (issue #17, KILN_DECODE_QKV). Elsewhere, and for more rows, the reference composition
 * (three linears) runs.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.qkvLinear';

export const qkvLinear = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'qWeight', type: 'Tensor' },
    { name: 'kWeight', type: 'Tensor' },
    { name: 'vWeight', type: 'Tensor' },
  ],
  outputs: [
    { name: 'q', type: 'Tensor' },
    { name: 'k', type: 'Tensor' },
    { name: 'v', type: 'Tensor' },
  ],
  meta(input: TensorMeta, qWeight: TensorMeta, kWeight: TensorMeta, vWeight: TensorMeta): OutMeta[] {
    floatTensor(OP, 'input', input);
    if (input.shape.length === 0) throw new Error(`${OP}: argument 'input' must have at least 1 dim, got ${describe(input)}`);
    const k = input.shape[input.shape.length - 1]!;
    const lead = input.shape.slice(0, -1);
    return ([['qWeight', qWeight], ['kWeight', kWeight], ['vWeight', vWeight]] as const).map(([name, w]) => {
      floatTensor(OP, name, w);
      if (w.shape.length !== 2 || w.shape[1] !== k) throw new Error(`${OP}: argument '${name}' must be [N, ${k}] (K = the last dim of 'input'), got ${describe(w)}`);
      sameDtype(OP, ['input', input], [name, w]);
      sameDevice(OP, ['input', input], [name, w]);
      return dense([...lead, w.shape[0]!], input.dtype, input.device);
    });
  },
});
