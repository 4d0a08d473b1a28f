/**
 * Creation (factory) ops: tensors made from a size (empty, zeros, ones, full, rand, randn, randint),
 * from a range (arange, linspace), the identity (eye), and the `*Like` family that copies another
 * tensor's shape and layout (PyTorch's preserve_format). Factory outputs are contiguous; `*Like`
 * outputs keep the input's dimension order (transposed stays transposed, channels_last stays
 * channels_last; gappy or broadcast inputs give dense outputs).
 *
 * The meta functions accept `null` for dtype/device and resolve the same defaults the public API
 * does (float32, or int64 for integral arange/randint; the current device), so they are
 * self-sufficient for the compiler.
 */
import { Device } from '../../runtime/device.js';
import { currentDevice } from '../../runtime/guard.js';
import type { DType } from '../../tensor/dtype.js';
import { isDType, isFloating } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, preservedStrides } from '../../tensor/layout.js';
import type { Generator } from '../../tensor/random.js';
import { checkAllocation, type TensorMeta } from '../../tensor/tensor.js';
import { checkIntegerValue } from '../../tensor/typed.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta, ScalarValue } from '../schema.js';

type DeviceArg = Device | string | null | undefined;
type DTypeArg = DType | null | undefined;

/** Validates a factory size: an array of non-negative integers. */
export function checkSize(op: string, size: unknown, argName = 'size'): number[] {
  if (!Array.isArray(size)) throw new TypeError(`${op}: argument '${argName}' must be an array of integers, got ${String(size)}`);
  for (const s of size as unknown[]) {
    if (typeof s !== 'number' || !Number.isInteger(s)) {
      throw new TypeError(`${op}: argument '${argName}' ${fmtShape(size as number[])} has a non-integer dimension ${String(s)}`);
    }
    if (s < 0) throw new RangeError(`${op}: argument '${argName}' ${fmtShape(size as number[])} has a negative dimension ${s}`);
  }
  return [...(size as number[])];
}

export function resolveDtype(op: string, dtype: DTypeArg, fallback: DType): DType {
  if (dtype === null || dtype === undefined) return fallback;
  if (!isDType(dtype)) throw new TypeError(`${op}: unknown dtype '${String(dtype)}'`);
  return dtype;
}

export function resolveDevice(device: DeviceArg, fallback?: Device): Device {
  if (device === null || device === undefined) return fallback ?? currentDevice();
  return Device.from(device);
}

function checkFloating(op: string, dtype: DType): void {
  if (!isFloating(dtype)) {
    throw new TypeError(`${op}: dtype ${dtype} is not supported; ${op} needs a floating dtype (float32, float16, bfloat16)`);
  }
}

function checkFinite(op: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`${op}: argument '${name}' must be a finite number, got ${String(v)}`);
  return v;
}

function factoryMeta(op: string, size: readonly number[], dtype: DTypeArg, device: DeviceArg, fallback: DType = 'float32'): OutMeta {
  const shape = checkSize(op, size);
  const m = { shape, strides: contiguousStrides(shape), dtype: resolveDtype(op, dtype, fallback), device: resolveDevice(device) };
  checkAllocation(op, shape.reduce((a, b) => a * b, 1), m.dtype, m.device);
  return m;
}

/** Layout of a `*Like` output: the input's dimension order, dense (preserve_format). */
function likeMeta(op: string, self: TensorMeta, dtype: DTypeArg, device: DeviceArg): OutMeta {
  return {
    shape: [...self.shape],
    strides: preservedStrides(self.shape, self.shape, self.strides),
    dtype: resolveDtype(op, dtype, self.dtype),
    device: resolveDevice(device, self.device),
  };
}

/** The dtype `full` infers from its fill value: bool -> bool, any number -> float32. */
export function fullDtype(fillValue: ScalarValue): DType {
  return typeof fillValue === 'boolean' ? 'bool' : 'float32';
}

function checkFill(op: string, fillValue: unknown): ScalarValue {
  if (typeof fillValue !== 'number' && typeof fillValue !== 'boolean') {
    throw new TypeError(`${op}: argument 'fillValue' must be a number or boolean, got ${typeof fillValue}`);
  }
  return fillValue;
}

const sizeArgs = [
  { name: 'size', type: 'int[]' },
  { name: 'dtype', type: 'dtype?' },
  { name: 'device', type: 'device?' },
] as const;

const likeArgs = [
  { name: 'self', type: 'Tensor' },
  { name: 'dtype', type: 'dtype?' },
  { name: 'device', type: 'device?' },
] as const;

const out = [{ name: 'out', type: 'Tensor' }] as const;

export const empty = defineOp({
  name: 'empty',
  args: sizeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (size: readonly number[], dtype: DTypeArg, device: DeviceArg): OutMeta => factoryMeta('empty', size, dtype, device),
});

export const zeros = defineOp({
  name: 'zeros',
  args: sizeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (size: readonly number[], dtype: DTypeArg, device: DeviceArg): OutMeta => factoryMeta('zeros', size, dtype, device),
});

export const ones = defineOp({
  name: 'ones',
  args: sizeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (size: readonly number[], dtype: DTypeArg, device: DeviceArg): OutMeta => factoryMeta('ones', size, dtype, device),
});

export const full = defineOp({
  name: 'full',
  args: [{ name: 'size', type: 'int[]' }, { name: 'fillValue', type: 'Scalar' }, sizeArgs[1], sizeArgs[2]],
  outputs: out,
  tags: ['factory'],
  meta(size: readonly number[], fillValue: ScalarValue, dtype: DTypeArg, device: DeviceArg): OutMeta {
    const m = factoryMeta('full', size, dtype, device, fullDtype(checkFill('full', fillValue)));
    checkIntegerValue('full', fillValue as number | bigint | boolean, m.dtype);
    return m;
  },
});

export const rand = defineOp({
  name: 'rand',
  args: [...sizeArgs, { name: 'generator', type: 'Generator?' }],
  outputs: out,
  tags: ['factory', 'random'],
  meta(size: readonly number[], dtype: DTypeArg, device: DeviceArg, _generator: Generator | null): OutMeta {
    const m = factoryMeta('rand', size, dtype, device);
    checkFloating('rand', m.dtype);
    return m;
  },
});

export const randn = defineOp({
  name: 'randn',
  args: [...sizeArgs, { name: 'generator', type: 'Generator?' }],
  outputs: out,
  tags: ['factory', 'random'],
  meta(size: readonly number[], dtype: DTypeArg, device: DeviceArg, _generator: Generator | null): OutMeta {
    const m = factoryMeta('randn', size, dtype, device);
    checkFloating('randn', m.dtype);
    return m;
  },
});

/** Largest exclusive upper bound each dtype can hold for randint (values must be representable). */
function checkRandintRange(dtype: DType, low: number, high: number): void {
  const lim: Partial<Record<DType, [number, number]>> = {
    bool: [0, 2],
    uint8: [0, 256],
    int32: [-(2 ** 31), 2 ** 31],
    int64: [-(2 ** 53), 2 ** 53],
    float16: [-2048, 2049],
    bfloat16: [-256, 257],
    float32: [-(2 ** 24), 2 ** 24 + 1],
  };
  const [lo, hi] = lim[dtype]!;
  if (low < lo || high > hi) {
    throw new RangeError(`randint: range [${low}, ${high}) is out of bounds for dtype ${dtype} (expected within [${lo}, ${hi}))`);
  }
}

export const randint = defineOp({
  name: 'randint',
  args: [
    { name: 'low', type: 'int' },
    { name: 'high', type: 'int' },
    ...sizeArgs,
    { name: 'generator', type: 'Generator?' },
  ],
  outputs: out,
  tags: ['factory', 'random'],
  meta(low: number, high: number, size: readonly number[], dtype: DTypeArg, device: DeviceArg, _generator: Generator | null): OutMeta {
    if (!Number.isInteger(low) || !Number.isInteger(high)) {
      throw new TypeError(`randint: 'low' and 'high' must be integers, got low=${low}, high=${high}`);
    }
    if (low >= high) throw new RangeError(`randint: expected low < high, got low=${low}, high=${high}`);
    const m = factoryMeta('randint', size, dtype, device, 'int64');
    checkRandintRange(m.dtype, low, high);
    return m;
  },
});

/** Number of elements of arange(start, end, step), validating the step's sign. */
export function arangeLength(start: number, end: number, step: number): number {
  checkFinite('arange', 'start', start);
  checkFinite('arange', 'end', end);
  checkFinite('arange', 'step', step);
  if (step === 0) throw new RangeError(`arange: step must be nonzero, got step=0 (start=${start}, end=${end})`);
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    throw new RangeError(`arange: upper bound and larger bound inconsistent with step sign: start=${start}, end=${end}, step=${step}`);
  }
  return Math.ceil((end - start) / step);
}

export const arange = defineOp({
  name: 'arange',
  args: [{ name: 'start', type: 'Scalar' }, { name: 'end', type: 'Scalar' }, { name: 'step', type: 'Scalar' }, sizeArgs[1], sizeArgs[2]],
  outputs: out,
  tags: ['factory'],
  meta(start: number, end: number, step: number, dtype: DTypeArg, device: DeviceArg): OutMeta {
    const n = arangeLength(start, end, step);
    const integral = Number.isInteger(start) && Number.isInteger(end) && Number.isInteger(step);
    const d = resolveDtype('arange', dtype, integral ? 'int64' : 'float32');
    if (d === 'bool') throw new TypeError(`arange: dtype bool is not supported (start=${start}, end=${end}, step=${step})`);
    const dev = resolveDevice(device);
    checkAllocation('arange', n, d, dev);
    return { shape: [n], strides: [1], dtype: d, device: dev };
  },
});

export const linspace = defineOp({
  name: 'linspace',
  args: [{ name: 'start', type: 'Scalar' }, { name: 'end', type: 'Scalar' }, { name: 'steps', type: 'int' }, sizeArgs[1], sizeArgs[2]],
  outputs: out,
  tags: ['factory'],
  meta(start: number, end: number, steps: number, dtype: DTypeArg, device: DeviceArg): OutMeta {
    checkFinite('linspace', 'start', start);
    checkFinite('linspace', 'end', end);
    if (typeof steps !== 'number' || !Number.isInteger(steps) || steps < 0) {
      throw new RangeError(`linspace: number of steps must be a non-negative integer, got steps=${String(steps)}`);
    }
    const m = { shape: [steps], strides: [1], dtype: resolveDtype('linspace', dtype, 'float32'), device: resolveDevice(device) };
    checkAllocation('linspace', steps, m.dtype, m.device);
    return m;
  },
});

export const eye = defineOp({
  name: 'eye',
  args: [{ name: 'n', type: 'int' }, { name: 'm', type: 'int?' }, sizeArgs[1], sizeArgs[2]],
  outputs: out,
  tags: ['factory'],
  meta(n: number, m: number | null, dtype: DTypeArg, device: DeviceArg): OutMeta {
    const cols = m ?? n;
    for (const [name, v] of [['n', n], ['m', cols]] as const) {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new RangeError(`eye: argument '${name}' must be a non-negative integer, got ${String(v)}`);
    }
    return factoryMeta('eye', [n, cols], dtype, device);
  },
});

export const emptyLike = defineOp({
  name: 'emptyLike',
  args: likeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (self: TensorMeta, dtype: DTypeArg, device: DeviceArg): OutMeta => likeMeta('emptyLike', self, dtype, device),
});

export const zerosLike = defineOp({
  name: 'zerosLike',
  args: likeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (self: TensorMeta, dtype: DTypeArg, device: DeviceArg): OutMeta => likeMeta('zerosLike', self, dtype, device),
});

export const onesLike = defineOp({
  name: 'onesLike',
  args: likeArgs,
  outputs: out,
  tags: ['factory'],
  meta: (self: TensorMeta, dtype: DTypeArg, device: DeviceArg): OutMeta => likeMeta('onesLike', self, dtype, device),
});

export const fullLike = defineOp({
  name: 'fullLike',
  args: [likeArgs[0], { name: 'fillValue', type: 'Scalar' }, likeArgs[1], likeArgs[2]],
  outputs: out,
  tags: ['factory'],
  meta(self: TensorMeta, fillValue: ScalarValue, dtype: DTypeArg, device: DeviceArg): OutMeta {
    checkFill('fullLike', fillValue);
    const m = likeMeta('fullLike', self, dtype, device);
    checkIntegerValue('fullLike', fillValue, m.dtype);
    return m;
  },
});

export const randLike = defineOp({
  name: 'randLike',
  args: [...likeArgs, { name: 'generator', type: 'Generator?' }],
  outputs: out,
  tags: ['factory', 'random'],
  meta(self: TensorMeta, dtype: DTypeArg, device: DeviceArg, _generator: Generator | null): OutMeta {
    const m = likeMeta('randLike', self, dtype, device);
    if (!isFloating(m.dtype)) throw new TypeError(`randLike: input ${describe(self)} gives dtype ${m.dtype}; randLike needs a floating dtype`);
    return m;
  },
});

export const randnLike = defineOp({
  name: 'randnLike',
  args: [...likeArgs, { name: 'generator', type: 'Generator?' }],
  outputs: out,
  tags: ['factory', 'random'],
  meta(self: TensorMeta, dtype: DTypeArg, device: DeviceArg, _generator: Generator | null): OutMeta {
    const m = likeMeta('randnLike', self, dtype, device);
    if (!isFloating(m.dtype)) throw new TypeError(`randnLike: input ${describe(self)} gives dtype ${m.dtype}; randnLike needs a floating dtype`);
    return m;
  },
});
