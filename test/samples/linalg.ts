import { makeExpanded, rand } from '../helpers/make.js';
import type { OpSample } from './types.js';

export const samples: OpSample[] = [
  { op: 'matmul', label: '2-d x 2-d', args: () => [rand([3, 4], 1), rand([4, 5], 2)] },
  { op: 'matmul', label: '1-d x 1-d', args: () => [rand([4], 1), rand([4], 2, 'strided')] },
  { op: 'matmul', label: '1-d x 3-d', args: () => [rand([4], 1), rand([2, 4, 5], 2)] },
  { op: 'matmul', label: '3-d x 1-d', args: () => [rand([2, 3, 4], 1, 'transposed'), rand([4], 2)] },
  { op: 'matmul', label: 'broadcast batch, transposed', args: () => [rand([2, 1, 3, 4], 1, 'transposed'), rand([5, 4, 6], 2, 'strided')] },
  { op: 'matmul', label: 'expanded batch', args: () => [makeExpanded([1, 2, 3, 4, 5, 6], [2, 3], [4, 2, 3]), rand([3, 2], 2)] },
  { op: 'matmul', label: 'int64', args: () => [rand([3, 4], 1, 'contiguous', 'int64', -5, 5), rand([4, 2], 2, 'contiguous', 'int64', -5, 5)] },
  { op: 'mm', label: 'transposed x strided', args: () => [rand([3, 4], 1, 'transposed'), rand([4, 5], 2, 'strided')] },
  { op: 'mm', label: 'float16', args: () => [rand([3, 4], 1, 'contiguous', 'float16'), rand([4, 5], 2, 'contiguous', 'float16')] },
  { op: 'bmm', label: 'contiguous', args: () => [rand([2, 3, 4], 1), rand([2, 4, 5], 2, 'transposed')] },
  { op: 'dot', label: 'strided', args: () => [rand([5], 1, 'strided'), rand([5], 2)] },
  { op: 'linear', label: 'transposed weight + bias', args: () => [rand([2, 3, 4], 1), rand([5, 4], 2, 'transposed'), rand([5], 3)] },
  { op: 'linear', label: 'no bias, 1-d input', args: () => [rand([4], 1), rand([5, 4], 2), null] },
  { op: 'addmm', label: 'broadcast row, alpha/beta', args: () => [makeExpanded([1, 2, 3, 4, 5], [5], [3, 5]), rand([3, 4], 1), rand([4, 5], 2, 'transposed'), 0.5, 2] },
  { op: 'layerNorm', label: 'last dim, affine', args: () => [rand([2, 3, 4], 1, 'transposed'), [4], rand([4], 2), rand([4], 3), 1e-5] },
  { op: 'layerNorm', label: 'channels_last input, last 2 dims', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), [4, 5], null, null, 1e-5] },
  { op: 'rmsNorm', label: 'transposed input keeps layout', args: () => [rand([3, 4], 1, 'transposed'), [4], rand([4], 2), null] },
  { op: 'rmsNorm', label: 'bfloat16', args: () => [rand([2, 4], 1, 'contiguous', 'bfloat16'), [4], null, 1e-6] },
  { op: 'groupNorm', label: 'channels_last', args: () => [rand([2, 4, 3, 3], 1, 'channelsLast'), 2, rand([4], 2), rand([4], 3), 1e-5] },
  { op: 'groupNorm', label: '3-d strided', args: () => [rand([2, 6, 5], 1, 'strided'), 3, null, null, 1e-5] },
  { op: 'batchNorm', label: 'inference, channels_last', args: () => [rand([2, 3, 4, 4], 1, 'channelsLast'), rand([3], 2), rand([3], 3, 'contiguous', 'float32', 0.5, 2), rand([3], 4), rand([3], 5), false, 0.1, 1e-5] },
  { op: 'batchNorm', label: 'training, transposed 2-d', args: () => [rand([4, 3], 1, 'transposed'), rand([3], 2), rand([3], 3, 'contiguous', 'float32', 0.5, 2), null, null, true, 0.1, 1e-5] },
];
