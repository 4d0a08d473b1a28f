/** What cuda kernels share: the loaded accelerator, device pointers of tensors, launch sizing. */
import { getAccelerator } from '../../runtime/registry.js';
import type { CudaAccelerator } from '../../runtime/cuda/cuda-accelerator.js';
import { devPtr } from '../../runtime/cuda/cuda-accelerator.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import type { OutMeta } from '../../ops/schema.js';
import { itemSize } from '../../tensor/dtype.js';
import { Tensor } from '../../tensor/tensor.js';
import { fmtShape } from '../../tensor/layout.js';

export function cuda(): CudaAccelerator {
  return getAccelerator('cuda') as CudaAccelerator;
}

/** Device address of a tensor's first element. */
export function ptrOf(t: Tensor): number {
  return devPtr(t.storage.buffer, t.offset * itemSize(t.dtype));
}

export function streamOf(t: Tensor): CudaStream {
  return cuda().defaultStream(t.device.index);
}

export function allocOut(meta: OutMeta, zero = false): Tensor {
  return Tensor.empty(meta.shape, meta.dtype, meta.device, meta.strides, zero);
}

const gridCaps = new Map<number, number>();

/**
 * Blocks for `work` items at `block` threads each, capped at two waves of full occupancy (more
 * blocks than that only add scheduling; the kernels loop grid-stride over the rest).
 */
export function gridFor(deviceIndex: number, work: number, block: number): number {
  let cap = gridCaps.get(deviceIndex);
  if (cap === undefined) {
    const info = deviceInfo(deviceIndex);
    cap = info.smCount * Math.max(1, Math.floor(info.maxThreadsPerSM / block)) * 2;
    gridCaps.set(deviceIndex, cap);
  }
  return Math.max(1, Math.min(cap, Math.ceil(work / block)));
}

/** The error for a dtype a cuda kernel does not implement. */
export function unsupportedDtype(op: string, t: { dtype: string; shape: readonly number[] }, supported: string): Error {
  return new TypeError(`${op}: the cuda kernel does not support dtype ${t.dtype} (input ${fmtShape(t.shape)}); supported: ${supported}`);
}
