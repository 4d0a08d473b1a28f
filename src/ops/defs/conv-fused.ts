/**
 * conv2dBatchNorm: conv2d followed by eval-mode BatchNorm (running statistics) and an optional
 * ReLU, as one op. The compiler's conv-bn pass (src/compile/passes/conv-bn.ts) produces it from
 * conv2d -> batchNorm(training=false) [-> relu] in inference graphs, so backends can run the
 * normalisation and activation in the convolution's epilogue instead of as separate passes over
 * the output:
 *
 *   y = relu?((conv2d(x, W) + bias - mean) * weight / sqrt(var + eps) + bnBias)
 *
 * The op takes the BatchNorm tensors themselves (not a precomputed scale/shift), so a kernel
 * derives the per-channel scale and shift from their current values on every call: a model whose
 * statistics change after compiling gets the new result, and no extra step computes them.
 * Backends without a fused kernel run the decomposition (conv2d, batchNorm, relu through the
 * dispatcher), which is also the reference the fused kernels are tested against.
 * Inference only: it has no backward formula (the pass never runs on graphs that need one).
 */
import type { Tensor, TensorMeta } from '../../tensor/tensor.js';
import { dispatch } from '../dispatch.js';
import { checkTensor, describe } from '../meta-helpers.js';
import { defineOp, setDecomposition } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { batchNorm } from './linalg.js';
import { conv2d } from './nn.js';
import { relu as reluOp } from './pointwise.js';

const OP = 'conv2dBatchNorm';

export const conv2dBatchNorm = defineOp({
  name: OP,
  publicName: 'nn.functional.conv2dBatchNorm',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'bias', type: 'Tensor?' },
    { name: 'stride', type: 'int[]' },
    { name: 'padding', type: 'int[]' },
    { name: 'dilation', type: 'int[]' },
    { name: 'groups', type: 'int' },
    { name: 'runningMean', type: 'Tensor' },
    { name: 'runningVar', type: 'Tensor' },
    { name: 'bnWeight', type: 'Tensor?' },
    { name: 'bnBias', type: 'Tensor?' },
    { name: 'eps', type: 'float' },
    { name: 'relu', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['extern'],
  meta(
    input: TensorMeta,
    weight: TensorMeta,
    bias: TensorMeta | null,
    stride: readonly number[],
    padding: readonly number[],
    dilation: readonly number[],
    groups: number,
    runningMean: TensorMeta,
    runningVar: TensorMeta,
    bnWeight: TensorMeta | null,
    bnBias: TensorMeta | null,
    eps: number,
    relu: boolean,
  ): OutMeta {
    const out = conv2d.meta(input, weight, bias, stride, padding, dilation, groups);
    const o = weight.shape[0]!;
    const params: [string, TensorMeta | null][] = [
      ['runningMean', runningMean],
      ['runningVar', runningVar],
      ['bnWeight', bnWeight],
      ['bnBias', bnBias],
    ];
    for (const [name, t] of params) {
      if (t === null || t === undefined) {
        if (name === 'runningMean' || name === 'runningVar') throw new TypeError(`${OP}: '${name}' is required (eval-mode BatchNorm statistics)`);
        continue;
      }
      checkTensor(OP, name, t);
      if (t.dtype !== 'float32' && t.dtype !== 'float16' && t.dtype !== 'bfloat16' && t.dtype !== 'float64') {
        throw new TypeError(`${OP}: expected a floating point '${name}', got ${describe(t)}`);
      }
      if (t.shape.length !== 1 || t.shape[0] !== o) {
        throw new Error(`${OP}: '${name}' ${describe(t)} should have shape [${o}] (the output channels of weight [${weight.shape.join(', ')}])`);
      }
      if (!t.device.equals(input.device)) throw new Error(`${OP}: '${name}' is on ${t.device.toString()}, input on ${input.device.toString()}`);
    }
    if (typeof eps !== 'number' || Number.isNaN(eps)) throw new TypeError(`${OP}: 'eps' must be a number, got ${String(eps)}`);
    if (typeof relu !== 'boolean') throw new TypeError(`${OP}: 'relu' must be a boolean, got ${String(relu)}`);
    return out;
  },
});

/** The unfused reference: conv2d, eval batchNorm, relu (each through the dispatcher). */
export function conv2dBatchNormComposite(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null,
  stride: readonly number[],
  padding: readonly number[],
  dilation: readonly number[],
  groups: number,
  runningMean: Tensor,
  runningVar: Tensor,
  bnWeight: Tensor | null,
  bnBias: Tensor | null,
  eps: number,
  relu: boolean,
): Tensor {
  const y = dispatch(conv2d, input, weight, bias, stride, padding, dilation, groups);
  const z = dispatch(batchNorm, y, runningMean, runningVar, bnWeight, bnBias, false, 0, eps);
  y.dispose();
  if (!relu) return z;
  const r = dispatch(reluOp, z);
  z.dispose();
  return r;
}

setDecomposition(conv2dBatchNorm, (input, weight, bias, stride, padding, dilation, groups, runningMean, runningVar, bnWeight, bnBias, eps, relu) =>
  conv2dBatchNormComposite(input, weight, bias, stride, padding, dilation, Number(groups), runningMean, runningVar, bnWeight, bnBias, Number(eps), relu === true),
);
