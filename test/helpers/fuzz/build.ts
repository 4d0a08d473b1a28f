/**
 * Rebuilds a fixture input in Kiln with torch's exact layout: the same strides, storage offset and
 * storage size, junk in the elements no view reaches (so a kernel that ignores strides reads junk
 * and fails), and the logical values written at their positions (an expanded input writes one
 * storage element several times, always with the same value). On cuda the host storage is copied
 * whole, so the device tensor has the same layout too.
 */
import { Device } from '../../../src/runtime/device.js';
import { getAccelerator } from '../../../src/runtime/registry.js';
import type { DType } from '../../../src/tensor/dtype.js';
import { itemSize } from '../../../src/tensor/dtype.js';
import { Storage } from '../../../src/tensor/storage.js';
import { Tensor } from '../../../src/tensor/tensor.js';
import { encoder, storageArray } from '../../../src/tensor/typed.js';
import { decodeValue, type EncInput } from './fixture.js';

const DTYPES = new Set(['float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64', 'bool', 'uint8']);

export function asDType(name: string): DType {
  if (!DTYPES.has(name)) throw new Error(`fuzz fixture: unknown dtype ${name}`);
  return name as DType;
}

export function buildInput(e: EncInput, device: 'cpu' | 'cuda' = 'cpu'): Tensor {
  const dtype = asDType(e.dtype);
  let reach = e.offset + 1;
  for (let d = 0; d < e.shape.length; d++) reach += (Math.max(e.shape[d]!, 1) - 1) * e.strides[d]!;
  const total = Math.max(e.size, reach, 1);
  const host = Storage.allocate(new Device('cpu'), total * itemSize(dtype), true);
  const words = storageArray(dtype, host.cpuArrayBuffer(), 0, total) as unknown as (number | bigint)[];
  const enc = encoder(dtype);
  const int64 = dtype === 'int64';
  for (let i = 0; i < total; i++) words[i] = enc(dtype === 'bool' ? 1 : 77);
  const idx = new Array<number>(e.shape.length).fill(0);
  for (let i = 0; i < e.values.length; i++) {
    let off = e.offset;
    for (let d = 0; d < e.shape.length; d++) off += idx[d]! * e.strides[d]!;
    const v = e.values[i]!;
    // int64 strings beyond 2^53 go through BigInt so no digit is lost.
    words[off] = int64 && typeof v === 'string' && /^-?\d+$/.test(v) ? BigInt(v) : enc(decodeValue(v));
    for (let d = e.shape.length - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < e.shape[d]!) break;
      idx[d] = 0;
    }
  }
  let storage = host;
  if (device === 'cuda') {
    const dev = new Device('cuda');
    storage = Storage.allocate(dev, total * itemSize(dtype));
    getAccelerator('cuda').copyHostToDevice(storage.buffer, 0, new Uint8Array(host.cpuArrayBuffer(), 0, total * itemSize(dtype)));
    host.release();
  }
  return new Tensor(storage, dtype, e.shape, e.strides, e.offset);
}
