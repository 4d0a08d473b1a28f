/**
 * Triangular bool masks on a device, built on the host once per (device, shape, diagonal) and kept
 * for the process: the causal mask of attention and tril/triu. Decode loops and training reuse a
 * handful of shapes, so the cache stays small.
 */
import { CPU, type Device } from '../../runtime/device.js';
import { keep } from '../../tensor/scope.js';
import { Tensor } from '../../tensor/tensor.js';
import { toDeviceKernel } from '../cpu/core.js';

const masks = new Map<string, Tensor>();

/** bool [rows, cols]: true where j - i <= diagonal (lower) or j - i >= diagonal (upper). */
export function triMask(rows: number, cols: number, diagonal: number, lower: boolean, device: Device): Tensor {
  const key = `${device.toString()}:${rows}x${cols}:${diagonal}:${lower ? 'l' : 'u'}`;
  let m = masks.get(key);
  if (!m || m.isDisposed) {
    const host = Tensor.empty([rows, cols], 'bool', CPU, undefined, true);
    const bytes = new Uint8Array(host.storage.cpuArrayBuffer(), 0, rows * cols);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) bytes[i * cols + j] = (lower ? j - i <= diagonal : j - i >= diagonal) ? 1 : 0;
    }
    m = toDeviceKernel({ op: 'triMask', out: { shape: [rows, cols], strides: [cols, 1], dtype: 'bool', device } }, host);
    host.dispose();
    // A cache outlives any kiln.scope it is first built in.
    keep(m);
    masks.set(key, m);
  }
  return m;
}
