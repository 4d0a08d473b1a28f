/**
 * Tensor: data only (storage, dtype, shape, strides, offset, device) plus host read-back. The
 * user-facing op methods (`x.add(y)`, `x.matmul(w)`) are attached by src/api from the op registry,
 * so nothing in this layer imports the dispatcher.
 */
import type { Device } from '../runtime/device.js';
import type { DType } from './dtype.js';
import { itemSize } from './dtype.js';
import {
  contiguousStrides,
  fmtShape,
  isChannelsLastStrides,
  isContiguousStrides,
  type MemoryFormat,
  normalizeDim,
  numel,
} from './layout.js';
import { Storage } from './storage.js';
import { decoder, storageArray } from './typed.js';
import { acceleratorFor } from '../runtime/registry.js';
import { formatTensor } from './print.js';
import { trackTensor } from './scope.js';
import { rewatch, unwatch, watch } from './collect.js';

/** The metadata every tensor-like carries; meta functions see only this. */
export interface TensorMeta {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly device: Device;
}

/** Slot filled by the autograd layer. */
export interface GradNode {
  readonly name: string;
}

export type NestedArray<T> = T | NestedArray<T>[];

let nextId = 1;

/** The id the next tensor will get: tensors with a smaller id existed before this call. */
export function nextTensorId(): number {
  return nextId;
}

export class Tensor implements TensorMeta {
  readonly id = nextId++;
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Element offset into storage. */
  readonly offset: number;
  requiresGrad = false;
  grad: Tensor | null = null;
  gradFn: GradNode | null = null;
  private disposed = false;
  /** @internal Whether the finalizer registry tracks this tensor yet (collect.ts). */
  finalizerRegistered = false;

  constructor(storage: Storage, dtype: DType, shape: readonly number[], strides?: readonly number[], offset = 0) {
    storage.retain();
    this.storage = storage;
    this.dtype = dtype;
    // Frozen arrays (another tensor's, handed on by a meta function) are immutable: shared, not copied.
    this.shape = Object.isFrozen(shape) ? shape : Object.freeze([...shape]);
    this.strides = strides && Object.isFrozen(strides) ? strides : Object.freeze(strides ? [...strides] : contiguousStrides(shape));
    this.offset = offset;
    watch(this);
    trackTensor(this);
  }

  /** A fresh, uninitialised tensor (zeroed if `zero`). */
  static empty(shape: readonly number[], dtype: DType, device: Device, strides?: readonly number[], zero = false): Tensor {
    const st = strides ?? contiguousStrides(shape);
    const span = storageSpan(shape, st);
    const storage = Storage.allocate(device, span * itemSize(dtype), zero);
    return new Tensor(storage, dtype, shape, st, 0);
  }

  get device(): Device {
    return this.storage.device;
  }

  get ndim(): number {
    return this.shape.length;
  }

  dim(): number {
    return this.shape.length;
  }

  numel(): number {
    return numel(this.shape);
  }

  size(): readonly number[];
  size(dim: number): number;
  size(dim?: number): readonly number[] | number {
    if (dim === undefined) return this.shape;
    return this.shape[normalizeDim('size', dim, this.ndim)]!;
  }

  stride(): readonly number[];
  stride(dim: number): number;
  stride(dim?: number): readonly number[] | number {
    if (dim === undefined) return this.strides;
    return this.strides[normalizeDim('stride', dim, this.ndim)]!;
  }

  elementSize(): number {
    return itemSize(this.dtype);
  }

  isContiguous(memoryFormat: Exclude<MemoryFormat, 'preserve'> = 'contiguous'): boolean {
    return memoryFormat === 'channelsLast'
      ? isChannelsLastStrides(this.shape, this.strides)
      : isContiguousStrides(this.shape, this.strides);
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Releases this tensor's hold on its storage; views keep it alive until they are disposed too. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    unwatch(this);
    this.storage.release();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /**
   * Points this tensor at `src`'s data (torch's `x.data = src`): storage, dtype, shape, strides and
   * offset are replaced while the object, its autograd flags and everyone's references stay. Used by
   * Module.to so that optimizers holding parameters keep working.
   */
  setData_(src: Tensor): this {
    src.assertAlive('setData_');
    this.assertAlive('setData_');
    if (src === this) return this;
    src.storage.retain();
    const old = this.storage;
    const self = this as unknown as { storage: Storage; dtype: DType; shape: readonly number[]; strides: readonly number[]; offset: number };
    self.storage = src.storage;
    self.dtype = src.dtype;
    self.shape = src.shape;
    self.strides = src.strides;
    self.offset = src.offset;
    rewatch(this);
    old.release();
    return this;
  }

  assertAlive(op: string): void {
    if (this.disposed) throw new Error(`${op}: tensor ${fmtShape(this.shape)} ${this.dtype} was disposed`);
  }

  /** Elements in logical (row-major) order as JS numbers; int64 beyond 2^53 loses precision. */
  toFlatArray(): number[] {
    this.assertAlive('toArray');
    const n = this.numel();
    const out = new Array<number>(n);
    if (n === 0) return out;
    const span = storageSpan(this.shape, this.strides);
    const host = readStorageRange(this.storage, this.dtype, this.offset, span);
    const dec = decoder(this.dtype);
    const rank = this.ndim;
    const idx = new Array<number>(rank).fill(0);
    let off = 0;
    for (let i = 0; i < n; i++) {
      out[i] = dec(host[off]!);
      for (let d = rank - 1; d >= 0; d--) {
        idx[d]!++;
        off += this.strides[d]!;
        if (idx[d]! < this.shape[d]!) break;
        off -= this.strides[d]! * this.shape[d]!;
        idx[d] = 0;
      }
    }
    return out;
  }

  /** Nested arrays like torch's tolist(); bool tensors give booleans. */
  toArray(): NestedArray<number | boolean> {
    const flat: (number | boolean)[] = this.dtype === 'bool' ? this.toFlatArray().map((v) => v !== 0) : this.toFlatArray();
    if (this.ndim === 0) return flat[0]!;
    const build = (d: number, start: number): NestedArray<number | boolean> => {
      const n = this.shape[d]!;
      const inner = numel(this.shape.slice(d + 1));
      const out: NestedArray<number | boolean>[] = [];
      for (let i = 0; i < n; i++) out.push(d === this.ndim - 1 ? flat[start + i]! : build(d + 1, start + i * inner));
      return out;
    };
    return build(0, 0);
  }

  /**
   * The value of a one-element tensor: a boolean for bool tensors, else a number. The static type
   * is the union because Tensor does not carry its dtype in its type; itemNumber() and itemBool()
   * are the typed forms (they check the dtype at run time instead).
   */
  item(): number | boolean {
    if (this.numel() !== 1) throw new Error(`item: only one-element tensors can be converted to a scalar, got shape ${fmtShape(this.shape)}`);
    const v = this.toFlatArray()[0]!;
    return this.dtype === 'bool' ? v !== 0 : v;
  }

  /** item() of a numeric tensor, typed as a number (a bool tensor is an error: use itemBool). */
  itemNumber(): number {
    if (this.dtype === 'bool') throw new TypeError(`itemNumber: the tensor ${fmtShape(this.shape)} is bool; use itemBool() (or .to('int64'))`);
    return this.item() as number;
  }

  /** item() of a bool tensor, typed as a boolean (a numeric tensor is an error: compare it first, e.g. x.gt(0)). */
  itemBool(): boolean {
    if (this.dtype !== 'bool') throw new TypeError(`itemBool: the tensor ${fmtShape(this.shape)} is ${this.dtype}, not bool; use itemNumber() or compare first`);
    return this.item() as boolean;
  }

  toString(): string {
    return formatTensor(this);
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString();
  }
}

/** Elements a strided view reaches, from its offset: 1 + sum((size-1)*stride). */
export function storageSpan(shape: readonly number[], strides: readonly number[]): number {
  if (numel(shape) === 0) return 0;
  let span = 1;
  for (let i = 0; i < shape.length; i++) span += (shape[i]! - 1) * Math.abs(strides[i]!);
  return span;
}

/** Copies `count` storage words starting at element `offset` to the host. */
export function readStorageRange(storage: Storage, dtype: DType, offset: number, count: number) {
  const size = itemSize(dtype);
  if (storage.device.type === 'cpu') return storageArray(dtype, storage.cpuArrayBuffer(), offset * size, count);
  const host = new Uint8Array(count * size);
  const { accelerator } = acceleratorFor(storage.device);
  accelerator.copyDeviceToHost(host, storage.buffer, offset * size);
  return storageArray(dtype, host.buffer, 0, count);
}

/**
 * The most elements one cpu tensor can hold: every cpu kernel views storage through a typed array,
 * whose length the JS engine caps (2^32 in Node 20, Buffer's MAX_LENGTH elsewhere in Node).
 */
const CPU_MAX_ELEMENTS: number = (globalThis as { Buffer?: { constants?: { MAX_LENGTH?: number } } }).Buffer?.constants?.MAX_LENGTH ?? 2 ** 32;

/**
 * Rejects an allocation the device cannot hold, before allocating, with an error that names the
 * function, the element count, the dtype's size and the limit (instead of the engine's bare
 * "Invalid typed array length" or a wrapped-around size).
 */
export function checkAllocation(fn: string, elements: number, dtype: DType, device: Device): void {
  const size = itemSize(dtype);
  const bytes = elements * size;
  const cpu = device.type === 'cpu';
  if (cpu ? elements <= CPU_MAX_ELEMENTS : bytes <= Number.MAX_SAFE_INTEGER) return;
  const limit = cpu
    ? `the cpu limit is ${CPU_MAX_ELEMENTS} elements per tensor (the JS engine's typed-array length limit)`
    : `the limit is ${Number.MAX_SAFE_INTEGER} bytes (sizes must be exact JS integers)`;
  throw new RangeError(`${fn}: cannot allocate ${elements} elements of ${dtype} (${size} bytes each, ${bytes} bytes): ${limit}`);
}
