import { Device } from '../../src/runtime/device.js';
import { Generator } from '../../src/tensor/random.js';
import { makeExpanded, rand } from '../helpers/make.js';
import type { OpSample } from './types.js';

const cpu = new Device('cpu');

export const samples: OpSample[] = [
  { op: 'empty', label: 'float32 [2, 3]', args: () => [[2, 3], 'float32', cpu] },
  { op: 'empty', label: 'int64 empty dim', args: () => [[0, 3], 'int64', cpu] },
  { op: 'zeros', label: 'float16 [2, 3, 4]', args: () => [[2, 3, 4], 'float16', cpu] },
  { op: 'zeros', label: '0-d, device string', args: () => [[], 'int32', 'cpu'] },
  { op: 'ones', label: 'bool [5]', args: () => [[5], 'bool', cpu] },
  { op: 'ones', label: 'bfloat16 [2, 2]', args: () => [[2, 2], 'bfloat16', cpu] },
  { op: 'full', label: 'float32 fill', args: () => [[3, 2], 2.5, 'float32', cpu] },
  { op: 'full', label: 'bool fill, dtype inferred', args: () => [[4], true, null, cpu] },
  { op: 'full', label: 'int64 fill', args: () => [[2, 1, 3], 7, 'int64', cpu] },
  { op: 'rand', label: 'float32', args: () => [[4, 5], 'float32', cpu, new Generator(1)] },
  { op: 'rand', label: 'float16, default generator', args: () => [[7], 'float16', cpu, null] },
  { op: 'randn', label: 'bfloat16', args: () => [[3, 3], 'bfloat16', cpu, new Generator(2)] },
  { op: 'randint', label: 'int64 default', args: () => [0, 10, [2, 5], null, cpu, new Generator(3)] },
  { op: 'randint', label: 'uint8', args: () => [0, 256, [6], 'uint8', cpu, null] },
  { op: 'arange', label: 'int64', args: () => [0, 10, 3, null, cpu] },
  { op: 'arange', label: 'float steps', args: () => [0, 1, 0.1, null, cpu] },
  { op: 'arange', label: 'descending float16', args: () => [5, -5, -1.5, 'float16', cpu] },
  { op: 'linspace', label: 'float32', args: () => [-1, 1, 7, 'float32', cpu] },
  { op: 'linspace', label: 'int32, one step', args: () => [3, 9, 1, 'int32', cpu] },
  { op: 'eye', label: 'square', args: () => [3, null, 'float32', cpu] },
  { op: 'eye', label: 'rectangular bool', args: () => [2, 4, 'bool', cpu] },
  { op: 'emptyLike', label: 'transposed', args: () => [rand([3, 4], 1, 'transposed'), null, null] },
  { op: 'zerosLike', label: 'channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), null, null] },
  { op: 'zerosLike', label: 'strided, int32', args: () => [rand([3, 4], 1, 'strided'), 'int32', cpu] },
  { op: 'onesLike', label: 'broadcast input', args: () => [makeExpanded([1, 2, 3], [3], [4, 3]), null, null] },
  { op: 'onesLike', label: 'transposed float16', args: () => [rand([2, 5], 1, 'transposed', 'float16'), null, null] },
  { op: 'fullLike', label: 'channels_last', args: () => [rand([2, 3, 2, 2], 1, 'channelsLast'), -3.5, null, null] },
  { op: 'fullLike', label: 'bool dtype', args: () => [rand([3], 1), true, 'bool', null] },
  { op: 'randLike', label: 'transposed', args: () => [rand([4, 3], 1, 'transposed'), null, null, new Generator(4)] },
  { op: 'randnLike', label: 'channels_last', args: () => [rand([1, 3, 2, 2], 1, 'channelsLast'), null, null, new Generator(5)] },
];
