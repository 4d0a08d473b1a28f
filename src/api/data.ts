/** `kiln.tensor(data)`: tensors from nested JS arrays, typed arrays and scalars. */
import { Device, type DeviceLike } from '../runtime/device.js';
import { currentDevice } from '../runtime/guard.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import type { DType } from '../tensor/dtype.js';
import { isDType } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { checkIntegerValue, encoder, storageArray } from '../tensor/typed.js';
import { dispatch } from '../ops/dispatch.js';
import { toDevice } from '../ops/defs/core.js';

export interface CreationOptions {
  dtype?: DType;
  device?: DeviceLike;
  requiresGrad?: boolean;
}

export type TensorData = number | boolean | bigint | ArrayLike<number> | readonly TensorData[];

function inferShape(data: TensorData, shape: number[] = []): number[] {
  if (typeof data === 'number' || typeof data === 'boolean' || typeof data === 'bigint') return shape;
  const arr = data as ArrayLike<TensorData>;
  shape.push(arr.length);
  if (arr.length > 0) inferShape(arr[0]!, shape);
  return shape;
}

function flatten(data: TensorData, shape: readonly number[], depth: number, out: (number | boolean | bigint)[]): void {
  if (depth === shape.length) {
    if (typeof data !== 'number' && typeof data !== 'boolean' && typeof data !== 'bigint') {
      throw new Error(`tensor: ragged nested array: expected a scalar at depth ${depth} of shape ${fmtShape(shape)}`);
    }
    out.push(data);
    return;
  }
  const arr = data as ArrayLike<TensorData>;
  if (typeof data !== 'object' || arr.length !== shape[depth]) {
    throw new Error(`tensor: ragged nested array: expected length ${shape[depth]} at depth ${depth} of shape ${fmtShape(shape)}`);
  }
  for (let i = 0; i < arr.length; i++) flatten(arr[i]!, shape, depth + 1, out);
}

function inferDtype(data: TensorData): DType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Uint8Array) return 'uint8';
  if (data instanceof BigInt64Array) return 'int64';
  let first: unknown = data;
  while (typeof first === 'object' && first !== null && (first as ArrayLike<unknown>).length > 0) first = (first as ArrayLike<unknown>)[0];
  if (typeof first === 'boolean') return 'bool';
  if (typeof first === 'bigint') return 'int64';
  // JS has one number type, so numbers default to float32 (like TensorFlow.js and jax-js); pass
  // { dtype: 'int64' } for integer tensors. Integer *scalars* in ops still promote like PyTorch's.
  return 'float32';
}

/**
 * Creates a tensor from data, copying it. Numbers default to float32, booleans to bool, bigints to
 * int64; typed arrays keep their element type.
 */
const CREATION_KEYS = keysOf<CreationOptions>({ dtype: true, device: true, requiresGrad: true });

export function tensor(data: TensorData, options: CreationOptions = {}): Tensor {
  checkOptionKeys('tensor', options, CREATION_KEYS);
  const dtype = options.dtype ?? inferDtype(data);
  if (!isDType(dtype)) throw new TypeError(`tensor: unknown dtype '${String(dtype)}'`);
  const direct = fromTypedArray(data, dtype);
  if (direct) return place(direct, options);
  const shape = inferShape(data);
  const flat: (number | boolean | bigint)[] = [];
  flatten(data, shape, 0, flat);
  const t = Tensor.empty(shape, dtype, new Device('cpu'));
  const words = storageArray(dtype, t.storage.cpuArrayBuffer(), 0, flat.length);
  const enc = encoder(dtype);
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i]!;
    // Out-of-range and NaN/Infinity values are errors for integer dtypes (torch's checked
    // conversion); in-range fractions truncate toward zero in the encoder, as torch.tensor does.
    if (typeof v === 'number' || typeof v === 'bigint') checkIntegerValue('tensor', v, dtype);
    if (typeof v === 'bigint' && dtype === 'int64') (words as BigInt64Array)[i] = v;
    else if (typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint') throw new TypeError(`tensor: element ${i} is ${typeof v}, not a number`);
    else (words as unknown as (number | bigint)[])[i] = enc(Number(v)) as never;
  }
  return place(t, options);
}

/**
 * A 1-d typed array whose elements need no check for `dtype`: copied with one set() instead of
 * the element-by-element path (a 5M-element rotary table took ~3 s through it). Int32Array into
 * int64 writes both 32-bit halves (every int32 fits).
 */
function fromTypedArray(data: TensorData, dtype: DType): Tensor | null {
  const n = (data as ArrayLike<number>).length;
  const same =
    (data instanceof Float32Array && dtype === 'float32') ||
    (data instanceof Float64Array && dtype === 'float64') ||
    (data instanceof Int32Array && dtype === 'int32') ||
    (data instanceof Uint8Array && dtype === 'uint8');
  if (same) {
    const t = Tensor.empty([n], dtype, new Device('cpu'));
    (storageArray(dtype, t.storage.cpuArrayBuffer(), 0, n) as Float32Array).set(data as Float32Array);
    return t;
  }
  if (data instanceof Int32Array && dtype === 'int64') {
    const t = Tensor.empty([n], dtype, new Device('cpu'));
    const halves = new Int32Array(t.storage.cpuArrayBuffer(), 0, 2 * n);
    for (let i = 0; i < n; i++) {
      halves[2 * i] = data[i]!;
      halves[2 * i + 1] = data[i]! < 0 ? -1 : 0;
    }
    return t;
  }
  return null;
}

/** The cpu tensor `t` on the options' device, with requiresGrad as asked. */
function place(t: Tensor, options: CreationOptions): Tensor {
  const device = options.device === undefined ? currentDevice() : Device.from(options.device);
  let result = t;
  if (device.type !== 'cpu') {
    result = dispatch(toDevice, t, device);
    t.dispose();
  }
  if (options.requiresGrad) result.requiresGrad = true;
  return result;
}
