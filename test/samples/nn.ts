import { makeExpanded, makeTensor, rand, randomInts } from '../helpers/make.js';
import { Generator } from '../../src/tensor/random.js';
import type { OpSample } from './types.js';

const bool = (shape: number[], seed: number) => {
  const n = shape.reduce((a, b) => a * b, 1);
  const vals = randomInts(n, seed, 0, 2);
  return makeTensor(vals, shape, 'bool');
};

export const samples: OpSample[] = [
  // conv2d(input, weight, bias, stride, padding, dilation, groups)
  { op: 'conv2d', label: 'contiguous + bias', args: () => [rand([2, 3, 7, 6], 1), rand([4, 3, 3, 3], 2), rand([4], 3), [1, 1], [1, 1], [1, 1], 1] },
  { op: 'conv2d', label: 'channels_last input, stride 2', args: () => [rand([2, 3, 8, 8], 1, 'channelsLast'), rand([5, 3, 3, 3], 2), null, [2, 2], [1, 1], [1, 1], 1] },
  { op: 'conv2d', label: 'channels_last weight only', args: () => [rand([1, 4, 5, 5], 1), rand([6, 4, 2, 2], 2, 'channelsLast'), null, [1, 1], [0, 0], [1, 1], 1] },
  { op: 'conv2d', label: 'strided input, dilation 2', args: () => [rand([2, 2, 7, 7], 1, 'strided'), rand([3, 2, 3, 3], 2), rand([3], 3), [1, 2], [2, 1], [2, 2], 1] },
  { op: 'conv2d', label: 'transposed input', args: () => [rand([2, 3, 5, 6], 1, 'transposed'), rand([2, 3, 3, 3], 2), null, [1, 1], [0, 0], [1, 1], 1] },
  { op: 'conv2d', label: 'depthwise groups, channels_last', args: () => [rand([1, 4, 6, 6], 1, 'channelsLast'), rand([4, 1, 3, 3], 2), null, [1, 1], [1, 1], [1, 1], 4] },
  { op: 'conv2d', label: "unbatched, asymmetric 'same' padding", args: () => [rand([3, 5, 5], 1), rand([2, 3, 2, 2], 2), null, [1, 1], [0, 1, 0, 1], [1, 1], 1] },
  { op: 'conv2d', label: 'unbatched, channels_last weight', args: () => [rand([3, 5, 5], 1), rand([4, 3, 2, 2], 2, 'channelsLast'), null, [1, 1], [0, 0], [1, 1], 1] },
  { op: 'conv2d', label: 'float16', args: () => [rand([1, 2, 5, 5], 1, 'contiguous', 'float16'), rand([2, 2, 3, 3], 2, 'contiguous', 'float16'), rand([2], 3, 'contiguous', 'float16'), [1, 1], [1, 1], [1, 1], 1] },
  // conv2dBatchNorm(input, weight, bias, stride, padding, dilation, groups, runningMean, runningVar, bnWeight, bnBias, eps, relu)
  { op: 'conv2dBatchNorm', label: 'channels_last, stride 2, relu', args: () => [rand([2, 3, 8, 8], 1, 'channelsLast'), rand([5, 3, 3, 3], 2), rand([5], 3), [2, 2], [1, 1], [1, 1], 1, rand([5], 4), rand([5], 5, 'contiguous', 'float32', 0.5, 1.5), rand([5], 6), rand([5], 7), 1e-5, true] },
  { op: 'conv2dBatchNorm', label: 'contiguous, no affine, no relu', args: () => [rand([1, 4, 5, 5], 1), rand([6, 4, 2, 2], 2), null, [1, 1], [0, 0], [1, 1], 1, rand([6], 4), rand([6], 5, 'contiguous', 'float32', 0.5, 1.5), null, null, 1e-3, false] },
  // maxPool2d(input, kernelSize, stride, padding, dilation, ceilMode)
  { op: 'maxPool2d', label: 'contiguous', args: () => [rand([2, 3, 6, 6], 1), [2, 2], [2, 2], [0, 0], [1, 1], false] },
  { op: 'maxPool2d', label: 'channels_last, padding, ceil', args: () => [rand([2, 3, 7, 7], 1, 'channelsLast'), [3, 3], [2, 2], [1, 1], [1, 1], true] },
  { op: 'maxPool2d', label: 'unbatched strided, dilation', args: () => [rand([3, 7, 7], 1, 'strided'), [2, 3], [1, 2], [1, 1], [2, 1], false] },
  { op: 'maxPool2d', label: 'int32', args: () => [rand([1, 2, 4, 4], 1, 'contiguous', 'int32', -9, 9), [2, 2], [2, 2], [0, 0], [1, 1], false] },
  { op: 'maxPool2dWithIndices', label: 'channels_last', args: () => [rand([2, 3, 5, 5], 1, 'channelsLast'), [2, 2], [2, 2], [1, 1], [1, 1], false] },
  { op: 'maxPool2dWithIndices', label: 'transposed', args: () => [rand([2, 3, 5, 5], 1, 'transposed'), [3, 3], [1, 1], [0, 0], [1, 1], false] },
  // avgPool2d(input, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride)
  { op: 'avgPool2d', label: 'contiguous', args: () => [rand([2, 3, 6, 6], 1), [2, 2], [2, 2], [0, 0], false, true, null] },
  { op: 'avgPool2d', label: 'channels_last, ceil, exclude pad', args: () => [rand([2, 3, 7, 7], 1, 'channelsLast'), [3, 3], [2, 2], [1, 1], true, false, null] },
  { op: 'avgPool2d', label: 'unbatched bfloat16, divisor', args: () => [rand([3, 5, 5], 1, 'contiguous', 'bfloat16'), [2, 2], [1, 1], [1, 1], false, true, 3] },
  // scaledDotProductAttention(q, k, v, mask, dropoutP, isCausal, scale, enableGqa, generator)
  { op: 'scaledDotProductAttention', label: '4-d causal', args: () => [rand([2, 2, 5, 4], 1), rand([2, 2, 5, 4], 2), rand([2, 2, 5, 3], 3), null, 0, true, null, false, null] },
  {
    op: 'scaledDotProductAttention',
    label: 'GQA, transposed query, broadcast bool mask',
    args: () => [rand([1, 4, 3, 4], 1, 'transposed'), rand([1, 2, 6, 4], 2), rand([1, 2, 6, 5], 3), bool([3, 6], 4), 0, false, 0.5, true, null],
  },
  {
    op: 'scaledDotProductAttention',
    label: '3-d, expanded additive mask, dropout',
    args: () => [rand([2, 3, 4], 1), rand([2, 5, 4], 2, 'strided'), rand([2, 5, 4], 3), makeExpanded([0, -1, 0, -2, 0], [5], [2, 3, 5]), 0.3, false, null, false, new Generator(1)],
  },
  // dropout(input, p, training, generator)
  { op: 'dropout', label: 'contiguous', args: () => [rand([4, 5], 1), 0.5, true, new Generator(3)] },
  { op: 'dropout', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 0.2, true, null] },
  { op: 'dropout', label: 'transposed, eval', args: () => [rand([3, 4], 1, 'transposed'), 0.5, false, null] },
  { op: 'dropout', label: 'strided, p = 1', args: () => [rand([3, 4], 1, 'strided'), 1, true, null] },
];
