/** What webgpu kernels share: the loaded accelerator, output allocation, the unsupported-dtype error. */
import { getAccelerator } from '../../runtime/registry.js';
import type { WebgpuAccelerator } from '../../runtime/webgpu/webgpu-accelerator.js';
import type { OutMeta } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import { fmtShape } from '../../tensor/layout.js';

export function webgpu(): WebgpuAccelerator {
  return getAccelerator('webgpu') as WebgpuAccelerator;
}

export function allocOut(meta: OutMeta, zero = false): Tensor {
  return Tensor.empty(meta.shape, meta.dtype, meta.device, meta.strides, zero);
}

/** The dtypes the webgpu kernels compute (WGSL has no 64-bit types). */
export const WEBGPU_DTYPES = 'float32, float16, bfloat16, int32, uint8, bool';

export function unsupportedDtype(op: string, t: { dtype: string; shape: readonly number[] }): Error {
  return new TypeError(`${op}: the webgpu kernels do not support dtype ${t.dtype} (tensor ${fmtShape(t.shape)}); supported: ${WEBGPU_DTYPES} (WGSL has no 64-bit types)`);
}
