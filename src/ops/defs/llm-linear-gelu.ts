/**
 * LLM library op: a GELU MLP's first projection and its activation in one call:
 *
 *   llm.linearGelu(input, weight, bias, approximate) = gelu(linear(input, weight, bias), approximate)
 *     weight [N, K], bias [N] or null, approximate 'none' (the erf form) or 'tanh' (torch's).
 *
 * Why an op: on webgpu each dispatch of a small product costs microseconds of fixed time (its
 * barrier and launch), so the GELU's own pass over the output is a large share of a small MLP
 * (mlp-64x512's float16 profile on an H100: 9.3 of 42 us). The webgpu kernel applies the GELU in
 * the GEMM's epilogue (or its split-K combine's) before the one rounding store
 * (kernels/webgpu/llm-linear-gelu.ts); other devices run the two ops. kiln.compile maps
 * linear -> gelu onto it in inference programs where a device has that kernel
 * (src/llm/linear-gelu-pass.ts, KILN_LINEAR_GELU).
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, oneOf, sameDevice, sameDtype } from './llm-common.js';

const OP = 'llm.linearGelu';

export const linearGelu = defineOp({
  name: OP,
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'approximate', type: 'str' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, weight: TensorMeta, bias: TensorMeta | null, approximate: string): OutMeta {
    floatTensor(OP, 'input', input);
    floatTensor(OP, 'weight', weight);
    oneOf(OP, 'approximate', approximate, ['none', 'tanh'] as const);
    const k = input.shape[input.shape.length - 1]!;
    if (weight.shape.length !== 2 || weight.shape[1] !== k) throw new Error(`${OP}: argument 'weight' must be [N, ${k}] (K = the last dim of 'input'), got ${describe(weight)}`);
    sameDtype(OP, ['input', input], ['weight', weight]);
    sameDevice(OP, ['input', input], ['weight', weight]);
    if (bias !== null && bias !== undefined) {
      floatTensor(OP, 'bias', bias);
      if (bias.shape.length !== 1 || bias.shape[0] !== weight.shape[0]) throw new Error(`${OP}: argument 'bias' must be [${weight.shape[0]}], got ${describe(bias)}`);
      sameDtype(OP, ['input', input], ['bias', bias]);
      sameDevice(OP, ['input', input], ['bias', bias]);
    }
    return dense([...input.shape.slice(0, -1), weight.shape[0]!], input.dtype, input.device);
  },
});
