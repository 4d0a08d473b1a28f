import { makeExpanded, makeTensor, rand, randomInts } from '../helpers/make.js';
import type { OpSample } from './types.js';

const unaryOps = [
  'neg', 'abs', 'sign', 'exp', 'expm1', 'log', 'log2', 'log10', 'log1p', 'sqrt', 'rsqrt', 'reciprocal', 'square',
  'sin', 'cos', 'tan', 'tanh', 'sigmoid', 'erf', 'relu', 'silu', 'floor', 'ceil', 'round', 'trunc',
  'isnan', 'isinf', 'isfinite', 'logicalNot',
];
const floatMath = new Set(['exp', 'expm1', 'log', 'log2', 'log10', 'log1p', 'sqrt', 'rsqrt', 'reciprocal', 'sin', 'cos', 'tan', 'tanh', 'sigmoid', 'erf', 'silu']);

const ints = (shape: number[], seed: number, dtype: 'int32' | 'int64' | 'uint8' = 'int32', layout: 'contiguous' | 'transposed' = 'contiguous') =>
  makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed, dtype === 'uint8' ? 0 : -5, 6), shape, dtype, layout);
const bools = (shape: number[], seed: number) => makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed, 0, 2), shape, 'bool');

const unarySamples: OpSample[] = unaryOps.flatMap((op): OpSample[] => [
  { op, label: 'contiguous', args: () => [rand([3, 4], 1)] },
  { op, label: 'transposed', args: () => [rand([3, 4], 2, 'transposed')] },
  { op, label: 'strided float16', args: () => [rand([2, 3], 3, 'strided', 'float16')] },
  { op, label: 'channels_last', args: () => [rand([2, 3, 4, 5], 4, 'channelsLast')] },
  { op, label: 'broadcast (expanded) input', args: () => [makeExpanded([1, 2, 3], [3], [2, 3])] },
  { op, label: 'zero-dim', args: () => [rand([], 5)] },
  { op, label: 'empty', args: () => [rand([0, 3], 6)] },
  ...(floatMath.has(op) || op === 'isnan' || op === 'square' ? [{ op, label: 'int32 input', args: () => [ints([2, 3], 7)] }] : []),
]);

const inplaceUnary = ['relu_', 'neg_', 'exp_', 'sigmoid_', 'tanh_'];
const inplaceUnarySamples: OpSample[] = inplaceUnary.flatMap((op): OpSample[] => [
  { op, label: 'contiguous', args: () => [rand([3, 4], 1)] },
  { op, label: 'transposed bfloat16', args: () => [rand([3, 4], 2, 'transposed', 'bfloat16')] },
  { op, label: 'channels_last', args: () => [rand([2, 3, 4, 5], 3, 'channelsLast')] },
]);

const binaryScalarOps = ['sub', 'mul', 'div', 'remainder', 'pow', 'eq', 'ne', 'lt', 'le', 'gt', 'ge'];
const extra = (op: string): unknown[] => (op === 'sub' ? [1] : op === 'div' ? [null] : []);
const binaryScalarSamples: OpSample[] = binaryScalarOps.flatMap((op): OpSample[] => [
  { op, label: 'contiguous', args: () => [rand([3, 4], 1, 'contiguous', 'float32', 0.5, 2), rand([3, 4], 2, 'contiguous', 'float32', 0.5, 2), ...extra(op)] },
  { op, label: 'transposed with broadcast row', args: () => [rand([3, 4], 3, 'transposed', 'float32', 0.5, 2), makeExpanded([1, 2, 3, 4], [4], [3, 4]), ...extra(op)] },
  { op, label: 'channels_last with scalar', args: () => [rand([2, 3, 4, 5], 4, 'channelsLast', 'float32', 0.5, 2), 1.5, ...extra(op)] },
  { op, label: 'strided + column broadcast to larger rank', args: () => [rand([3, 1], 5, 'strided', 'float32', 0.5, 2), rand([2, 3, 4], 6, 'contiguous', 'float32', 0.5, 2), ...extra(op)] },
  { op, label: 'int32 tensor with int scalar', args: () => [ints([2, 3], 7, 'int32', 'transposed'), 2, ...extra(op)] },
  { op, label: 'uint8 with int32', args: () => [ints([2, 3], 8, 'uint8'), makeTensor([1, 2, 3], [3], 'int32'), ...extra(op)] },
  { op, label: 'float16 with zero-dim float32', args: () => [rand([2, 3], 9, 'contiguous', 'float16', 0.5, 2), rand([], 10, 'contiguous', 'float32', 0.5, 2), ...extra(op)] },
]);

const tensorBinaryOps = ['maximum', 'minimum', 'atan2', 'logaddexp', 'hypot', 'logicalAnd', 'logicalOr', 'logicalXor'];
const tensorBinarySamples: OpSample[] = tensorBinaryOps.flatMap((op): OpSample[] => [
  { op, label: 'contiguous', args: () => [rand([3, 4], 1), rand([3, 4], 2)] },
  { op, label: 'transposed with broadcast row', args: () => [rand([3, 4], 3, 'transposed'), makeExpanded([1, 2, 3, 4], [4], [3, 4])] },
  { op, label: 'broadcast first, channels_last second', args: () => [rand([4, 5], 4), rand([2, 3, 4, 5], 5, 'channelsLast')] },
  { op, label: 'int32 with bool', args: () => [ints([2, 3], 6), bools([2, 3], 7)] },
]);

export const samples: OpSample[] = [
  ...unarySamples,
  ...inplaceUnarySamples,
  ...binaryScalarSamples,
  ...tensorBinarySamples,
  { op: 'gelu', label: 'erf, transposed', args: () => [rand([3, 4], 1, 'transposed'), 'none'] },
  { op: 'gelu', label: 'tanh, channels_last float16', args: () => [rand([2, 3, 4, 5], 2, 'channelsLast', 'float16'), 'tanh'] },
  { op: 'softplus', label: 'strided', args: () => [rand([3, 4], 3, 'strided'), 1, 20] },
  { op: 'softplus', label: 'channels_last, beta 2', args: () => [rand([2, 3, 4, 5], 4, 'channelsLast'), 2, 5] },
  { op: 'remainderScalar', label: 'scalar % transposed', args: () => [5.5, rand([3, 4], 1, 'transposed', 'float32', 0.5, 2)] },
  { op: 'remainderScalar', label: 'int scalar % int32', args: () => [7, makeTensor([1, 2, 3, -4], [4], 'int32')] },
  { op: 'powScalar', label: '2 ** channels_last', args: () => [2, rand([2, 3, 4, 5], 2, 'channelsLast')] },
  { op: 'powScalar', label: '2.5 ** int32 gives float32', args: () => [2.5, ints([2, 3], 3)] },
  { op: 'sub_', label: 'broadcast other, alpha 2', args: () => [rand([3, 4], 1), rand([4], 2), 2] },
  { op: 'sub_', label: 'channels_last self', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), 0.5, 1] },
  { op: 'mul_', label: 'transposed self, scalar', args: () => [rand([3, 4], 1, 'transposed'), 3] },
  { op: 'mul_', label: 'int32 self, int scalar', args: () => [ints([3, 4], 2), 3] },
  { op: 'div_', label: 'strided self, broadcast other', args: () => [rand([3, 4], 1, 'strided'), rand([4], 2, 'contiguous', 'float32', 0.5, 2), null] },
  { op: 'div_', label: 'int32 floor', args: () => [ints([3, 4], 2), 2, 'floor'] },
  { op: 'clamp', label: 'min and max, transposed', args: () => [rand([3, 4], 1, 'transposed'), -0.5, 0.5] },
  { op: 'clamp', label: 'max only, int32 -> float32', args: () => [ints([3, 4], 1), null, 1.5] },
  { op: 'clamp', label: 'min only, channels_last', args: () => [rand([2, 3, 4, 5], 2, 'channelsLast'), 0, null] },
  { op: 'clampTensor', label: 'tensor bounds with broadcast', args: () => [rand([3, 4], 1, 'transposed'), makeExpanded([-1, -0.5, 0, 0.5], [4], [3, 4]), rand([3, 1], 2, 'contiguous', 'float32', 1, 2)] },
  { op: 'clampTensor', label: 'max only, channels_last', args: () => [rand([2, 3, 4, 5], 2, 'channelsLast'), null, rand([5], 3)] },
  { op: 'clamp_', label: 'in place, strided', args: () => [rand([3, 4], 1, 'strided'), -0.5, 0.5] },
  { op: 'clampTensor_', label: 'in place, tensor min', args: () => [rand([3, 4], 1, 'transposed'), rand([4], 2), null] },
  { op: 'where', label: 'broadcast condition, transposed input', args: () => [bools([4], 1), rand([3, 4], 2, 'transposed'), rand([3, 4], 3)] },
  { op: 'where', label: 'channels_last input, scalar other', args: () => [bools([2, 3, 4, 5], 1), rand([2, 3, 4, 5], 2, 'channelsLast'), 0] },
  { op: 'where', label: 'two scalars', args: () => [bools([2, 3], 1), 1.5, 0] },
  { op: 'where', label: 'int32 and float scalar', args: () => [bools([2, 3], 1), ints([2, 3], 2), 0.5] },
  { op: 'lerp', label: 'scalar weight, transposed', args: () => [rand([3, 4], 1, 'transposed'), rand([3, 4], 2), 0.3] },
  { op: 'lerp', label: 'tensor weight broadcast, channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), rand([2, 3, 4, 5], 2), rand([5], 3)] },
  { op: 'fill_', label: 'scalar into strided', args: () => [rand([3, 4], 1, 'strided'), 2.5] },
  { op: 'fill_', label: 'zero-dim tensor into channels_last', args: () => [rand([2, 3, 4, 5], 1, 'channelsLast'), rand([], 2)] },
  { op: 'zero_', label: 'transposed float16', args: () => [rand([3, 4], 1, 'transposed', 'float16')] },
];
