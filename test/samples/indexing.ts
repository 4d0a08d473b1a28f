import { makeExpanded, makeTensor, rand, randomInts } from '../helpers/make.js';
import type { OpSample } from './types.js';

const ints = (shape: number[], seed: number, lo: number, hi: number, dtype: 'int32' | 'int64' = 'int64', layout: 'contiguous' | 'transposed' | 'strided' = 'contiguous') =>
  makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed, lo, hi), shape, dtype, layout);
const bools = (shape: number[], seed: number) => makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed, 0, 2), shape, 'bool');

export const samples: OpSample[] = [
  { op: 'embedding', label: 'int64 2-d input', args: () => [ints([2, 3], 1, 0, 5), rand([5, 4], 2), null] },
  { op: 'embedding', label: 'int32 input, transposed weight, padding', args: () => [ints([3], 1, 0, 5, 'int32'), rand([5, 4], 2, 'transposed'), 1] },
  { op: 'indexSelect', label: 'dim 1, transposed', args: () => [rand([3, 4], 1, 'transposed'), 1, ints([5], 2, 0, 4)] },
  { op: 'indexSelect', label: 'channels_last, dim 1, int32', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 1, ints([2], 2, 0, 3, 'int32')] },
  { op: 'gather', label: 'dim 0, strided', args: () => [rand([4, 3], 1, 'strided'), 0, ints([2, 3], 2, 0, 4)] },
  { op: 'gather', label: 'channels_last dim -1', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), -1, ints([2, 3, 4, 2], 2, 0, 5, 'int32')] },
  { op: 'scatter', label: 'tensor src, transposed self', args: () => [rand([3, 4], 1, 'transposed'), 1, ints([3, 2], 2, 0, 4), rand([3, 3], 3), null] },
  { op: 'scatter', label: 'scalar src, channels_last, reduce sum', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 1, ints([2, 3, 4, 5], 2, 0, 3), 2.5, 'sum'] },
  { op: 'scatter_', label: 'in place, strided self', args: () => [rand([3, 4], 1, 'strided'), 0, ints([2, 4], 2, 0, 3), rand([2, 4], 3), 'prod'] },
  { op: 'scatterAdd', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 2, ints([2, 3, 4, 5], 2, 0, 4), rand([2, 3, 4, 5], 3)] },
  { op: 'scatterAdd', label: 'transposed src', args: () => [rand([4, 3], 1), 0, ints([2, 3], 2, 0, 4, 'int32'), rand([3, 3], 3, 'transposed')] },
  { op: 'scatterAdd_', label: 'in place', args: () => [rand([4, 3], 1, 'transposed'), 0, ints([5, 3], 2, 0, 4), rand([5, 3], 3)] },
  { op: 'indexPut', label: 'leading slice + two int indices, channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), [null, ints([3], 2, 0, 3), ints([3], 3, -4, 4)], rand([2, 3, 5], 4), false] },
  { op: 'indexPut', label: 'bool mask, scalar, transposed', args: () => [rand([3, 4], 1, 'transposed'), [bools([3, 4], 2)], 0, false] },
  { op: 'indexPut_', label: 'accumulate, strided', args: () => [rand([4, 3], 1, 'strided'), [ints([6], 2, 0, 4)], rand([3], 3), true] },
  { op: 'maskedFill', label: 'broadcast mask, transposed', args: () => [rand([3, 4], 1, 'transposed'), bools([4], 2), -1] },
  { op: 'maskedFill', label: 'channels_last, expanded mask, 0-d value', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), makeExpanded([1, 0, 1, 0, 1], [5], [2, 3, 4, 5], 'bool'), makeTensor([7], [], 'float32')] },
  { op: 'maskedFill', label: 'self broadcast by mask', args: () => [rand([4], 1), bools([3, 4], 2), 1] },
  { op: 'maskedFill_', label: 'in place', args: () => [rand([3, 4], 1, 'strided'), bools([3, 1], 2), 0] },
  { op: 'cat', label: 'dim 1, mixed layouts and dtypes', args: () => [[rand([3, 2], 1, 'transposed'), rand([3, 4], 2, 'strided', 'float16'), rand([3, 1], 3)], 1] },
  { op: 'cat', label: 'channels_last dim 1', args: () => [[rand([2, 3, 4, 5], 1, 'channelsLast'), rand([2, 2, 4, 5], 2, 'channelsLast')], 1] },
  { op: 'cat', label: 'skips legacy empty', args: () => [[rand([0], 1), rand([2, 3], 2), rand([1, 3], 3, 'transposed')], 0] },
  { op: 'stack', label: 'dim -1', args: () => [[rand([3, 4], 1, 'transposed'), rand([3, 4], 2), rand([3, 4], 3, 'strided')], -1] },
  { op: 'split', label: 'uneven, strided', args: () => [rand([7, 3], 1, 'strided'), 3, 0] },
  { op: 'split', label: 'channels_last dim 1', args: () => [rand([2, 5, 4, 3], 1, 'channelsLast'), 2, 1] },
  { op: 'splitWithSizes', label: 'sizes, transposed', args: () => [rand([3, 6], 1, 'transposed'), [1, 0, 3, 2], 1] },
  { op: 'chunk', label: 'not divisible', args: () => [rand([3, 7], 1, 'strided'), 3, -1] },
  { op: 'chunk', label: 'channels_last', args: () => [rand([4, 3, 2, 2], 1, 'channelsLast'), 2, 0] },
  { op: 'tril', label: 'batched transposed', args: () => [rand([2, 3, 4], 1, 'transposed'), 0] },
  { op: 'tril', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), -1] },
  { op: 'triu', label: 'strided', args: () => [rand([4, 3], 1, 'strided'), 1] },
  { op: 'triu', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 2] },
  { op: 'tril', label: 'bool, transposed', args: () => [bools([3, 4], 1), 1] },
  { op: 'gather', label: 'float16', args: () => [rand([3, 4], 1, 'transposed', 'float16'), 1, ints([3, 2], 2, 0, 4)] },
  { op: 'cat', label: 'bool + int32 promotes', args: () => [[bools([2, 3], 1), ints([1, 3], 2, 0, 9, 'int32')], 0] },
  { op: 'maskedFill', label: 'int64 self, float value', args: () => [ints([3, 4], 1, 0, 9), bools([3, 4], 2), 2.5] },
  { op: 'indexPut_', label: 'bfloat16, bool mask, scalar', args: () => [rand([3, 4], 1, 'transposed', 'bfloat16'), [bools([3], 2)], 1, false] },
  { op: 'scatterAdd', label: 'int32', args: () => [ints([3, 4], 1, 0, 9, 'int32'), 1, ints([3, 6], 2, 0, 4), ints([3, 6], 3, 0, 9, 'int32')] },
];
