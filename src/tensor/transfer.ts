/**
 * Host <-> device transfers that need not wait for the device, for loops that keep the device busy
 * while the host works (the serve engine's async steps, serve/engine.ts):
 *
 * - uploadFromHost(dst, src): a cpu tensor's bytes into a device tensor of the same dtype and
 *   size; the copy runs in stream order after the work already queued, and the host returns at
 *   once where the accelerator has copyHostToDeviceAsync (cuda), else it is a plain copy.
 * - toDeviceNonBlocking(src, device): a new tensor on `device` holding a cpu tensor's values,
 *   uploaded as uploadFromHost does (small per-step tables: a plain `tensor(data, { device })`
 *   upload waits for everything queued, e.g. a decode step launched just before).
 * - readLater(t): starts the read of a tensor's values; wait() returns them. On cuda the copy is
 *   queued now and wait() waits only for it, not for work queued after readLater (a next step);
 *   on the cpu the values are read at once (the work that made them has already run); elsewhere
 *   the read happens at wait() (correct, without the overlap), so `t` must stay alive until then.
 *
 * Both take contiguous tensors (callers make them so): the bytes move as one span.
 */
import type { Device } from '../runtime/device.js';
import { itemSize } from './dtype.js';
import { acceleratorFor } from '../runtime/registry.js';
import { Tensor } from './tensor.js';
import { decoder, storageArray } from './typed.js';

/** A read in flight (readLater). */
export interface PendingRead {
  /** The tensor's values in row-major order (the same array on every call). */
  wait(): number[];
  /** Gives the read up without waiting (its host memory may be reused). */
  dispose(): void;
}

function checkContiguous(fn: string, what: string, t: Tensor): void {
  if (!t.isContiguous()) throw new Error(`${fn}: ${what} must be contiguous, got shape [${t.shape.join(', ')}] strides [${t.strides.join(', ')}]`);
}

/** Copies cpu tensor `src` into device tensor `dst` (same dtype and element count), not waiting for the device where it can. */
export function uploadFromHost(dst: Tensor, src: Tensor): void {
  const fn = 'uploadFromHost';
  if (src.device.type !== 'cpu') throw new Error(`${fn}: src must be a cpu tensor, got ${src.device.toString()}`);
  if (dst.dtype !== src.dtype || dst.numel() !== src.numel()) {
    throw new Error(`${fn}: dst ${dst.dtype} [${dst.shape.join(', ')}] and src ${src.dtype} [${src.shape.join(', ')}] must have the same dtype and element count`);
  }
  checkContiguous(fn, 'dst', dst);
  checkContiguous(fn, 'src', src);
  const size = itemSize(src.dtype);
  const bytes = new Uint8Array(src.storage.cpuArrayBuffer(), src.offset * size, src.numel() * size);
  if (dst.device.type === 'cpu') {
    new Uint8Array(dst.storage.cpuArrayBuffer(), dst.offset * size, bytes.byteLength).set(bytes);
    return;
  }
  const { accelerator } = acceleratorFor(dst.device);
  if (accelerator.copyHostToDeviceAsync) accelerator.copyHostToDeviceAsync(dst.storage.buffer, dst.offset * size, bytes);
  else accelerator.copyHostToDevice(dst.storage.buffer, dst.offset * size, bytes);
}

/** A copy of contiguous cpu tensor `src` on `device`, uploaded without waiting for the device where it can. */
export function toDeviceNonBlocking(src: Tensor, device: Device): Tensor {
  if (device.type === 'cpu') return src;
  const out = Tensor.empty(src.shape, src.dtype, device);
  uploadFromHost(out, src);
  return out;
}

/** Starts reading `t`'s values (see the header for when the device is waited for). */
export function readLater(t: Tensor): PendingRead {
  checkContiguous('readLater', 't', t);
  if (t.device.type === 'cpu') {
    const values = t.toFlatArray();
    return { wait: () => values, dispose: () => undefined };
  }
  const { accelerator } = acceleratorFor(t.device);
  if (!accelerator.readDeviceToHostAsync) {
    let values: number[] | null = null;
    return { wait: () => (values ??= t.toFlatArray()), dispose: () => undefined };
  }
  const size = itemSize(t.dtype);
  const n = t.numel();
  const pending = accelerator.readDeviceToHostAsync(t.storage.buffer, t.offset * size, n * size);
  let values: number[] | null = null;
  return {
    wait: () => {
      if (values) return values;
      const bytes = pending.wait();
      const words = storageArray(t.dtype, bytes.buffer as ArrayBuffer, bytes.byteOffset, n);
      const dec = decoder(t.dtype);
      values = Array.from({ length: n }, (_, i) => dec(words[i]!));
      return values;
    },
    dispose: () => pending.dispose(),
  };
}
