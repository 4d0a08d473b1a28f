import { makeExpanded, makeTensor, rand } from '../helpers/make.js';
import type { OpSample } from './types.js';

export const samples: OpSample[] = [
  { op: 'flip', label: 'two dims, strided', args: () => [rand([3, 4, 5], 1, 'strided'), [0, -1]] },
  { op: 'flip', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), [1]] },
  { op: 'flip', label: 'no dims, broadcast', args: () => [makeExpanded([1, 2, 3], [3], [4, 3]), []] },
  { op: 'roll', label: 'flattened, transposed', args: () => [rand([3, 4], 1, 'transposed'), [5], null] },
  { op: 'roll', label: 'two dims, negative shift', args: () => [rand([3, 4, 2], 1, 'strided'), [-1, 7], [0, 1]] },
  { op: 'repeat', label: 'leading new dims', args: () => [rand([2, 3], 1, 'transposed'), [2, 1, 3]] },
  { op: 'repeat', label: 'zero repeat', args: () => [rand([2, 3], 1), [0, 2]] },
  { op: 'nonzero', label: 'mixed zeros, strided', args: () => [makeTensor([0, 1, 0, 2, 3, 0], [2, 3], 'float32', 'strided')] },
  { op: 'nonzero', label: 'bool, 0-d', args: () => [makeTensor([1], [], 'bool')] },
];
