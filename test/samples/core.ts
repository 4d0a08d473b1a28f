import { Device } from '../../src/runtime/device.js';
import { makeExpanded, rand } from '../helpers/make.js';
import type { OpSample } from './types.js';

export const samples: OpSample[] = [
  { op: 'add', label: 'contiguous', args: () => [rand([3, 4], 1), rand([3, 4], 2), 1] },
  { op: 'add', label: 'broadcast + alpha', args: () => [rand([3, 4], 1, 'transposed'), makeExpanded([1, 2, 3, 4], [4], [3, 4]), 2] },
  { op: 'add', label: 'channels_last + scalar', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 1.5, 1] },
  { op: 'add', label: 'int + float promotes', args: () => [rand([4], 1, 'contiguous', 'int32', -5, 5), rand([4], 2, 'strided'), 1] },
  { op: 'add_', label: 'in place, broadcast other', args: () => [rand([3, 4], 1), rand([4], 2), 1] },
  { op: 'copy_', label: 'strided from contiguous', args: () => [rand([3, 4], 1, 'strided'), rand([3, 4], 2)] },
  { op: 'copy_', label: 'scalar fill', args: () => [rand([3, 4], 1), 2] },
  { op: 'clone', label: 'transposed preserve', args: () => [rand([3, 4], 1, 'transposed'), 'preserve'] },
  { op: 'clone', label: 'channels_last preserve', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 'preserve'] },
  { op: 'contiguous', label: 'from transposed', args: () => [rand([3, 4], 1, 'transposed'), 'contiguous'] },
  { op: 'contiguous', label: 'to channels_last', args: () => [rand([2, 3, 4, 5], 1), 'channelsLast'] },
  { op: 'toDtype', label: 'float32 -> float16, strided', args: () => [rand([3, 4], 1, 'strided'), 'float16'] },
  { op: 'toDtype', label: 'float32 -> int64', args: () => [rand([5], 1), 'int64'] },
  { op: 'toDevice', label: 'cpu -> cpu', args: () => [rand([3, 4], 1, 'transposed'), new Device('cpu')] },
];
