/**
 * Public creation functions: `zeros([2, 3])` or `zeros(2, 3)`, `full([2], 7)`, `arange(5)`,
 * `arange(0, 1, 0.1)`, `linspace(0, 1, 5)`, `eye(3)`, seeded `rand`/`randn`/`randint`, and the
 * `*Like` family. Options: `{ dtype, device, requiresGrad, generator }`; the device defaults to
 * `currentDevice()` (see `withDevice`), the dtype to float32.
 *
 * JS has no integer literal, so `full([2], 3)` is float32 like `full([2], 3.5)`; pass
 * `{ dtype: 'int64' }` for an integer tensor (a boolean fill value gives bool). `arange` follows
 * PyTorch: all-integer start/end/step give int64.
 */
import { Device, type DeviceLike } from '../runtime/device.js';
import { currentDevice } from '../runtime/guard.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import type { DType } from '../tensor/dtype.js';
import { isFloating } from '../tensor/dtype.js';
import { Generator, manualSeed } from '../tensor/random.js';
import type { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as c from '../ops/defs/creation.js';
import { toDevice } from '../ops/defs/core.js';
import type { ScalarValue } from '../ops/schema.js';

export { Generator, manualSeed };

export interface FactoryOptions {
  dtype?: DType;
  device?: DeviceLike;
  requiresGrad?: boolean;
  /** For random ops: the generator to draw from (default: the global one `manualSeed` seeds). */
  generator?: Generator;
}

const FACTORY_KEYS = keysOf<FactoryOptions>({ dtype: true, device: true, requiresGrad: true, generator: true });

/** A size as one array plus options, or as variadic numbers (`zeros(2, 3)`). */
export type SizeArgs = [size: readonly number[], options?: FactoryOptions] | number[] | [...size: number[], options: FactoryOptions];

function parseSize(op: string, args: readonly unknown[]): { size: number[]; options: FactoryOptions } {
  if (args.length > 0 && Array.isArray(args[0])) {
    if (args.length > 2) throw new TypeError(`${op}: expected (size, options?), got ${args.length} arguments`);
    return { size: [...(args[0] as number[])], options: (args[1] as FactoryOptions | undefined) ?? {} };
  }
  const last = args[args.length - 1];
  if (typeof last === 'object' && last !== null) {
    return { size: args.slice(0, -1) as number[], options: last as FactoryOptions };
  }
  return { size: [...args] as number[], options: {} };
}

// Every creation function reads its device here before allocating, so the keys are checked here too.
function device(op: string, options: FactoryOptions): Device {
  checkOptionKeys(op, options, FACTORY_KEYS);
  return options.device === undefined ? currentDevice() : Device.from(options.device);
}

function finish(op: string, t: Tensor, options: FactoryOptions): Tensor {
  if (options.requiresGrad) {
    if (!isFloating(t.dtype)) throw new TypeError(`${op}: only tensors of floating dtype can require gradients, got dtype ${t.dtype}`);
    t.requiresGrad = true;
  }
  return t;
}

export function empty(...args: SizeArgs): Tensor {
  const { size, options } = parseSize('empty', args);
  return finish('empty', dispatch(c.empty, size, options.dtype ?? 'float32', device('empty', options)), options);
}

export function zeros(...args: SizeArgs): Tensor {
  const { size, options } = parseSize('zeros', args);
  return finish('zeros', dispatch(c.zeros, size, options.dtype ?? 'float32', device('zeros', options)), options);
}

export function ones(...args: SizeArgs): Tensor {
  const { size, options } = parseSize('ones', args);
  return finish('ones', dispatch(c.ones, size, options.dtype ?? 'float32', device('ones', options)), options);
}

/** `full(size, fillValue)`: dtype bool for a boolean fill, float32 for any number, unless given. */
export function full(size: readonly number[], fillValue: ScalarValue, options: FactoryOptions = {}): Tensor {
  return finish('full', dispatch(c.full, [...size], fillValue, options.dtype ?? c.fullDtype(fillValue), device('full', options)), options);
}

export function rand(...args: SizeArgs): Tensor {
  const { size, options } = parseSize('rand', args);
  return finish('rand', dispatch(c.rand, size, options.dtype ?? 'float32', device('rand', options), options.generator ?? null), options);
}

export function randn(...args: SizeArgs): Tensor {
  const { size, options } = parseSize('randn', args);
  return finish('randn', dispatch(c.randn, size, options.dtype ?? 'float32', device('randn', options), options.generator ?? null), options);
}

/** Uniform integers in [low, high): `randint(low, high, size)` or `randint(high, size)`; int64 by default. */
export function randint(low: number, high: number, size: readonly number[], options?: FactoryOptions): Tensor;
export function randint(high: number, size: readonly number[], options?: FactoryOptions): Tensor;
export function randint(a: number, b: number | readonly number[], c2?: readonly number[] | FactoryOptions, d?: FactoryOptions): Tensor {
  let low = 0;
  let high: number;
  let size: readonly number[];
  let options: FactoryOptions;
  if (Array.isArray(b)) {
    high = a;
    size = b;
    options = (c2 as FactoryOptions | undefined) ?? {};
  } else {
    low = a;
    high = b as number;
    if (!Array.isArray(c2)) throw new TypeError(`randint: argument 'size' must be an array of integers, got ${String(c2)}`);
    size = c2 as readonly number[];
    options = d ?? {};
  }
  return finish('randint', dispatch(c.randint, low, high, [...size], options.dtype ?? 'int64', device('randint', options), options.generator ?? null), options);
}

/**
 * `arange(end)`, `arange(start, end)`, `arange(start, end, step)`, each optionally followed by
 * options. Length ceil((end - start) / step); int64 when start, end and step are all integers.
 */
export function arange(end: number, options?: FactoryOptions): Tensor;
export function arange(start: number, end: number, options?: FactoryOptions): Tensor;
export function arange(start: number, end: number, step: number, options?: FactoryOptions): Tensor;
export function arange(...args: (number | FactoryOptions | undefined)[]): Tensor {
  const nums: number[] = [];
  let options: FactoryOptions = {};
  for (const a of args) {
    if (typeof a === 'number') nums.push(a);
    else if (typeof a === 'object' && a !== null) options = a;
  }
  if (nums.length < 1 || nums.length > 3) throw new TypeError(`arange: expected 1 to 3 numbers (end | start, end[, step]), got ${nums.length}`);
  const [start, end, step] = nums.length === 1 ? [0, nums[0]!, 1] : [nums[0]!, nums[1]!, nums[2] ?? 1];
  const integral = Number.isInteger(start) && Number.isInteger(end) && Number.isInteger(step);
  const dtype = options.dtype ?? (integral ? 'int64' : 'float32');
  return finish('arange', dispatch(c.arange, start, end, step, dtype, device('arange', options)), options);
}

/** `steps` evenly spaced values from start to end inclusive. */
export function linspace(start: number, end: number, steps: number, options: FactoryOptions = {}): Tensor {
  return finish('linspace', dispatch(c.linspace, start, end, steps, options.dtype ?? 'float32', device('linspace', options)), options);
}

/** The n x m identity (m defaults to n). */
export function eye(n: number, m?: number | FactoryOptions, options: FactoryOptions = {}): Tensor {
  let cols: number | null = null;
  if (typeof m === 'number') cols = m;
  else if (typeof m === 'object' && m !== null) options = m;
  return finish('eye', dispatch(c.eye, n, cols, options.dtype ?? 'float32', device('eye', options)), options);
}

/**
 * Runs a `*Like` op on the input's device and moves the result when another device is asked for:
 * the dispatcher picks kernels by the first tensor argument's device.
 */
function like(op: string, self: Tensor, options: FactoryOptions, run: (dtype: DType) => Tensor): Tensor {
  checkOptionKeys(op, options, FACTORY_KEYS);
  const dtype = options.dtype ?? self.dtype;
  let out = run(dtype);
  if (options.device !== undefined) {
    const d = Device.from(options.device);
    if (!d.equals(out.device)) {
      const moved = dispatch(toDevice, out, d);
      out.dispose();
      out = moved;
    }
  }
  return finish(op, out, options);
}

export function emptyLike(self: Tensor, options: FactoryOptions = {}): Tensor {
  return like('emptyLike', self, options, (dt) => dispatch(c.emptyLike, self, dt, self.device));
}
export function zerosLike(self: Tensor, options: FactoryOptions = {}): Tensor {
  return like('zerosLike', self, options, (dt) => dispatch(c.zerosLike, self, dt, self.device));
}
export function onesLike(self: Tensor, options: FactoryOptions = {}): Tensor {
  return like('onesLike', self, options, (dt) => dispatch(c.onesLike, self, dt, self.device));
}
export function fullLike(self: Tensor, fillValue: ScalarValue, options: FactoryOptions = {}): Tensor {
  return like('fullLike', self, options, (dt) => dispatch(c.fullLike, self, fillValue, dt, self.device));
}
export function randLike(self: Tensor, options: FactoryOptions = {}): Tensor {
  return like('randLike', self, options, (dt) => dispatch(c.randLike, self, dt, self.device, options.generator ?? null));
}
export function randnLike(self: Tensor, options: FactoryOptions = {}): Tensor {
  return like('randnLike', self, options, (dt) => dispatch(c.randnLike, self, dt, self.device, options.generator ?? null));
}
