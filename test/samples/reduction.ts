import { makeExpanded, rand } from '../helpers/make.js';
import type { OpSample } from './types.js';

const cl = (seed = 1) => rand([2, 3, 4, 5], seed, 'channelsLast');
const ints = (shape: number[], seed = 1) => rand(shape, seed, 'contiguous', 'int32', -5, 5);

export const samples: OpSample[] = [];

// Reductions with (self, dim, keepdim, dtype).
for (const op of ['sum', 'prod', 'mean']) {
  samples.push(
    { op, label: 'all dims', args: () => [rand([3, 4], 1), null, false, null] },
    { op, label: 'transposed, dim 1, keepdim', args: () => [rand([3, 4], 1, 'transposed'), [1], true, null] },
    { op, label: 'strided, dims [0, -1]', args: () => [rand([2, 3, 4], 1, 'strided'), [0, -1], false, null] },
    { op, label: 'channels_last, dim 1', args: () => [cl(), [1], false, null] },
    { op, label: 'channels_last, dims [2, 3], keepdim', args: () => [cl(), [2, 3], true, null] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), [0], false, null] },
    { op, label: 'float16 input', args: () => [rand([3, 4], 1, 'contiguous', 'float16'), [1], false, null] },
    { op, label: 'int32 input with dtype float32', args: () => [ints([3, 4]), [0], false, 'float32'] },
  );
}
samples.push(
  { op: 'sum', label: 'int32 -> int64', args: () => [ints([3, 4]), [1], false, null] },
  { op: 'sum', label: 'bool -> int64', args: () => [rand([3, 4], 1, 'transposed', 'bool'), null, false, null] },
  { op: 'prod', label: 'uint8 -> int64', args: () => [rand([3, 4], 1, 'contiguous', 'uint8', 0, 4), [0], true, null] },
);

// Reductions with (self, dim, keepdim).
for (const op of ['amax', 'amin', 'any', 'all', 'logsumexp']) {
  samples.push(
    { op, label: 'all dims', args: () => [rand([3, 4], 1), op === 'logsumexp' ? [0, 1] : null, false] },
    { op, label: 'transposed, dim -1, keepdim', args: () => [rand([3, 4], 1, 'transposed'), [-1], true] },
    { op, label: 'strided, dims [0, 2]', args: () => [rand([2, 3, 4], 1, 'strided'), [0, 2], false] },
    { op, label: 'channels_last, dim 1', args: () => [cl(), [1], true] },
    { op, label: 'channels_last, dims [2, 3]', args: () => [cl(), [2, 3], false] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), [1], false] },
    { op, label: 'int32 input', args: () => [ints([3, 4]), [1], false] },
  );
}

for (const op of ['max', 'min']) {
  samples.push(
    { op, label: 'contiguous', args: () => [rand([3, 4], 1)] },
    { op, label: 'channels_last', args: () => [cl()] },
    { op, label: 'bfloat16 strided', args: () => [rand([3, 4], 1, 'strided', 'bfloat16')] },
  );
}

for (const op of ['maxDim', 'minDim', 'argmax', 'argmin']) {
  samples.push(
    { op, label: 'dim 1', args: () => [rand([3, 4], 1), 1, false] },
    { op, label: 'transposed, dim 0, keepdim', args: () => [rand([3, 4], 1, 'transposed'), 0, true] },
    { op, label: 'channels_last, dim 1', args: () => [cl(), 1, false] },
    { op, label: 'strided, dim -1, keepdim', args: () => [rand([2, 3, 4], 1, 'strided'), -1, true] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), 0, false] },
    { op, label: 'int32 input', args: () => [ints([3, 4]), 1, false] },
  );
}
for (const op of ['argmax', 'argmin']) {
  samples.push(
    { op, label: 'no dim (flattened)', args: () => [rand([3, 4], 1, 'transposed'), null, false] },
    { op, label: 'no dim, keepdim', args: () => [cl(), null, true] },
  );
}

for (const op of ['var', 'std']) {
  samples.push(
    { op, label: 'all dims', args: () => [rand([3, 4], 1), null, 1, false] },
    { op, label: 'transposed, dim 0, correction 0, keepdim', args: () => [rand([3, 4], 1, 'transposed'), [0], 0, true] },
    { op, label: 'channels_last, dim 1', args: () => [cl(), [1], 1, false] },
    { op, label: 'channels_last, dims [2, 3]', args: () => [cl(), [2, 3], 1, true] },
    { op, label: 'strided float16', args: () => [rand([2, 3, 4], 1, 'strided', 'float16'), [-1], 1, false] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), [0], 1, false] },
  );
}

for (const op of ['softmax', 'logSoftmax']) {
  samples.push(
    { op, label: 'dim -1', args: () => [rand([3, 4], 1), -1, null] },
    { op, label: 'transposed stays transposed', args: () => [rand([3, 4], 1, 'transposed'), 0, null] },
    { op, label: 'channels_last stays channels_last', args: () => [cl(), 1, null] },
    { op, label: 'strided bfloat16', args: () => [rand([2, 3, 4], 1, 'strided', 'bfloat16'), 1, null] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), 1, null] },
    { op, label: 'int32 with dtype float32', args: () => [ints([3, 4]), 1, 'float32'] },
  );
}

for (const op of ['cumsum', 'cumprod']) {
  samples.push(
    { op, label: 'dim 1', args: () => [rand([3, 4], 1), 1, null] },
    { op, label: 'transposed stays transposed', args: () => [rand([3, 4], 1, 'transposed'), 0, null] },
    { op, label: 'channels_last stays channels_last', args: () => [cl(), 1, null] },
    { op, label: 'strided float16', args: () => [rand([2, 3, 4], 1, 'strided', 'float16'), -1, null] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), 0, null] },
    { op, label: 'int32 -> int64', args: () => [ints([3, 4]), 1, null] },
  );
}

for (const op of ['sort', 'argsort']) {
  samples.push(
    { op, label: 'dim -1', args: () => [rand([3, 4], 1), -1, false, false] },
    { op, label: 'transposed, descending', args: () => [rand([3, 4], 1, 'transposed'), 0, true, true] },
    { op, label: 'channels_last, dim 1', args: () => [cl(), 1, false, true] },
    { op, label: 'strided int32', args: () => [ints([2, 3, 4]), -1, true, false] },
    { op, label: 'broadcast input', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), 1, false, false] },
  );
}

samples.push(
  { op: 'topk', label: 'k 2, dim -1', args: () => [rand([3, 4], 1), 2, -1, true, true] },
  { op: 'topk', label: 'transposed, smallest, dim 0', args: () => [rand([3, 4], 1, 'transposed'), 2, 0, false, true] },
  { op: 'topk', label: 'channels_last, dim 1', args: () => [cl(), 3, 1, true, true] },
  { op: 'topk', label: 'strided, k 0', args: () => [rand([2, 3, 4], 1, 'strided'), 0, 1, true, false] },
  { op: 'topk', label: 'broadcast input, k = size', args: () => [makeExpanded([1, 2, 3, 4], [4], [3, 4]), 3, 0, true, true] },
);
