/** Public functions and Tensor methods for the core ops. */
import { Device, type DeviceLike } from '../runtime/device.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import type { DType } from '../tensor/dtype.js';
import { isDType } from '../tensor/dtype.js';
import type { MemoryFormat } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as core from '../ops/defs/core.js';
import type { ScalarValue } from '../ops/schema.js';
import { installMethods } from './install.js';

export function add(self: Tensor, other: Tensor | ScalarValue, alpha: ScalarValue = 1): Tensor {
  return dispatch(core.add, self, other, alpha);
}
export function add_(self: Tensor, other: Tensor | ScalarValue, alpha: ScalarValue = 1): Tensor {
  return dispatch(core.add_, self, other, alpha);
}
export function copy_(self: Tensor, src: Tensor | ScalarValue): Tensor {
  if (typeof src === 'object' && !src.device.equals(self.device)) {
    const moved = dispatch(core.toDevice, src, self.device);
    dispatch(core.copy_, self, moved);
    moved.dispose();
    return self;
  }
  return dispatch(core.copy_, self, src);
}
export function clone(self: Tensor, memoryFormat: MemoryFormat = 'preserve'): Tensor {
  return dispatch(core.clone, self, memoryFormat);
}
export function contiguous(self: Tensor, memoryFormat: Exclude<MemoryFormat, 'preserve'> = 'contiguous'): Tensor {
  return dispatch(core.contiguous, self, memoryFormat);
}

export interface ToOptions {
  dtype?: DType;
  device?: DeviceLike;
  /** Return a new tensor even when nothing changes. */
  copy?: boolean;
}

/** `x.to('cuda')`, `x.to('float16')`, `x.to({ device, dtype })`; returns `x` when nothing changes. */
const TO_KEYS = keysOf<ToOptions>({ dtype: true, device: true, copy: true });

export function to(self: Tensor, target: DType | DeviceLike | ToOptions): Tensor {
  if (typeof target === 'object' && !(target instanceof Device)) checkOptionKeys('to', target, TO_KEYS);
  const opts: ToOptions = typeof target === 'string' ? (isDType(target) ? { dtype: target } : { device: target }) : target instanceof Device ? { device: target } : target;
  let out = self;
  if (opts.dtype !== undefined && opts.dtype !== self.dtype) {
    if (!isDType(opts.dtype)) throw new TypeError(`to: unknown dtype '${String(opts.dtype)}'`);
    out = dispatch(core.toDtype, out, opts.dtype);
  }
  if (opts.device !== undefined) {
    const d = Device.from(opts.device);
    if (!d.equals(out.device)) {
      const moved = dispatch(core.toDevice, out, d);
      if (out !== self) out.dispose();
      out = moved;
    }
  }
  if (out === self && opts.copy) out = clone(self);
  return out;
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    add(other: Tensor | ScalarValue, alpha?: ScalarValue): Tensor;
    add_(other: Tensor | ScalarValue, alpha?: ScalarValue): Tensor;
    copy_(src: Tensor | ScalarValue): Tensor;
    clone(memoryFormat?: MemoryFormat): Tensor;
    contiguous(memoryFormat?: Exclude<MemoryFormat, 'preserve'>): Tensor;
    to(target: DType | DeviceLike | ToOptions): Tensor;
    cpu(): Tensor;
  }
}

installMethods({ add, add_, copy_, clone, contiguous, to, cpu: (self: Tensor) => to(self, 'cpu') });
