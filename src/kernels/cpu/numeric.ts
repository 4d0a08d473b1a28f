/**
 * How CPU kernels see tensor data. Kernels compute on "number arrays": float32/int32/uint8/bool
 * storage is used in place; float16/bfloat16 are decoded to float32 and int64 to float64 (exact to
 * 2^53) over the span the view reaches. Outputs of those dtypes are computed into a scratch array
 * and encoded into storage by commit().
 */
import type { DType } from '../../tensor/dtype.js';
import { itemSize } from '../../tensor/dtype.js';
import { float16BitsToFloat32, float32ArrayToBfloat16Bits, float32ArrayToFloat16Bits, float32ToBfloat16Bits, float32ToFloat16Bits } from '../../tensor/half.js';
import { isContiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor, storageSpan } from '../../tensor/tensor.js';
import { storageArray } from '../../tensor/typed.js';
import type { OutMeta } from '../../ops/schema.js';

export type NumArray = Float32Array | Float64Array | Int32Array | Uint8Array;

/** Element data of a tensor: element (i0..in) lives at data[offset + sum(ik * strides[k])]. */
export interface Readable {
  readonly data: NumArray;
  readonly offset: number;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
}

export interface Writable extends Readable {
  /** Encodes scratch data into storage (no-op for dtypes written in place). */
  commit(): void;
}

function directView(t: Tensor): NumArray | undefined {
  const buf = t.storage.cpuArrayBuffer();
  switch (t.dtype) {
    case 'float32':
      return new Float32Array(buf, 0, t.storage.nbytes / 4);
    case 'float64':
      return new Float64Array(buf, 0, t.storage.nbytes / 8);
    case 'int32':
      return new Int32Array(buf, 0, t.storage.nbytes / 4);
    case 'uint8':
    case 'bool':
      return new Uint8Array(buf, 0, t.storage.nbytes);
    default:
      return undefined;
  }
}

/** The array type kernels compute in for a dtype. */
export function computeArrayFor(dtype: DType, length: number): NumArray {
  switch (dtype) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
      return new Float32Array(length);
    case 'int64':
    case 'float64':
      return new Float64Array(length);
    case 'int32':
      return new Int32Array(length);
    case 'uint8':
    case 'bool':
      return new Uint8Array(length);
    default:
      return dtype satisfies never;
  }
}

function decodeSpan(t: Tensor, span: number): NumArray {
  const words = storageArray(t.dtype, t.storage.cpuArrayBuffer(), t.offset * itemSize(t.dtype), span);
  switch (t.dtype) {
    case 'float16': {
      const out = new Float32Array(span);
      const w = words as Uint16Array;
      for (let i = 0; i < span; i++) out[i] = float16BitsToFloat32(w[i]!);
      return out;
    }
    case 'bfloat16': {
      const out = new Float32Array(span);
      const w = words as Uint16Array;
      const u = new Uint32Array(out.buffer);
      for (let i = 0; i < span; i++) u[i] = w[i]! << 16;
      return out;
    }
    case 'int64': {
      // Two 32-bit halves per word: several times faster than going through BigInt.
      const out = new Float64Array(span);
      const w = new Int32Array(t.storage.cpuArrayBuffer(), t.offset * 8, span * 2);
      for (let i = 0; i < span; i++) out[i] = w[2 * i + 1]! * 4294967296 + (w[2 * i]! >>> 0);
      return out;
    }
    default:
      throw new Error(`decodeSpan: ${t.dtype} needs no decoding`);
  }
}

export function readable(t: Tensor): Readable {
  if (t.device.type !== 'cpu') throw new Error(`cpu kernel: tensor is on ${t.device.toString()}`);
  t.assertAlive('cpu kernel');
  const direct = directView(t);
  if (direct) return { data: direct, offset: t.offset, shape: t.shape, strides: t.strides };
  return { data: decodeSpan(t, storageSpan(t.shape, t.strides)), offset: 0, shape: t.shape, strides: t.strides };
}

export function writable(t: Tensor): Writable {
  const direct = directView(t);
  if (direct) return { data: direct, offset: t.offset, shape: t.shape, strides: t.strides, commit: () => {} };
  const span = storageSpan(t.shape, t.strides);
  // Start from the current contents so that partial writes (scatter, in-place) keep the rest.
  const scratch = decodeSpan(t, span);
  const commit = (): void => encodeSpan(t, scratch, span);
  return { data: scratch, offset: 0, shape: t.shape, strides: t.strides, commit };
}

function encodeSpan(t: Tensor, scratch: NumArray, span: number): void {
  const words = storageArray(t.dtype, t.storage.cpuArrayBuffer(), t.offset * itemSize(t.dtype), span);
  switch (t.dtype) {
    case 'float16': {
      const w = words as Uint16Array;
      // The scratch of a half tensor is float32 (computeArrayFor): rounded in bulk from its bits.
      if (scratch instanceof Float32Array) float32ArrayToFloat16Bits(scratch.length === span ? scratch : scratch.subarray(0, span), w);
      else for (let i = 0; i < span; i++) w[i] = float32ToFloat16Bits(scratch[i]!);
      return;
    }
    case 'bfloat16': {
      const w = words as Uint16Array;
      if (scratch instanceof Float32Array) float32ArrayToBfloat16Bits(scratch.length === span ? scratch : scratch.subarray(0, span), w);
      else for (let i = 0; i < span; i++) w[i] = float32ToBfloat16Bits(scratch[i]!);
      return;
    }
    case 'int64': {
      const w = new Int32Array(t.storage.cpuArrayBuffer(), t.offset * 8, span * 2);
      for (let i = 0; i < span; i++) {
        const v = scratch[i]!;
        const x = Number.isFinite(v) ? Math.trunc(v) : 0;
        const hi = Math.floor(x / 4294967296);
        w[2 * i] = x - hi * 4294967296; // low word, stored modulo 2^32
        w[2 * i + 1] = hi;
      }
      return;
    }
    default:
      return;
  }
}

/** Allocates an output tensor exactly as the meta function described it. */
export function allocOut(meta: OutMeta, zero = false): Tensor {
  return Tensor.empty(meta.shape, meta.dtype, meta.device, meta.strides, zero);
}

/**
 * A dense row-major copy of a tensor's values in its compute array type. Returns the storage view
 * itself (no copy) when the tensor is contiguous at offset 0 and needs no decoding.
 */
export function denseValues(t: Tensor): NumArray {
  const r = readable(t);
  const n = numel(t.shape);
  if (isContiguousStrides(t.shape, t.strides)) {
    return r.data.subarray(r.offset, r.offset + n);
  }
  const out = computeArrayFor(t.dtype, n);
  gatherStrided(r, out);
  return out;
}

/** Copies a strided view into a dense row-major array. */
export function gatherStrided(src: Readable, dst: NumArray): void {
  const shape = src.shape;
  const rank = shape.length;
  const n = numel(shape);
  if (n === 0) return;
  if (rank === 0) {
    dst[0] = src.data[src.offset]!;
    return;
  }
  const inner = shape[rank - 1]!;
  const innerStride = src.strides[rank - 1]!;
  const idx = new Array<number>(rank).fill(0);
  let off = src.offset;
  const d = src.data;
  for (let o = 0; o < n; o += inner) {
    for (let i = 0, p = off; i < inner; i++, p += innerStride) dst[o + i] = d[p]!;
    for (let k = rank - 2; k >= 0; k--) {
      idx[k]!++;
      off += src.strides[k]!;
      if (idx[k]! < shape[k]!) break;
      off -= src.strides[k]! * shape[k]!;
      idx[k] = 0;
    }
  }
}

/** Writes dense row-major values into an output tensor allocated from meta (any strides). */
export function fromDense(meta: OutMeta, values: ArrayLike<number>): Tensor {
  const out = allocOut(meta);
  const w = writable(out);
  scatterStrided(values, w);
  w.commit();
  return out;
}

/** Copies dense row-major values into a strided destination. */
export function scatterStrided(values: ArrayLike<number>, dst: Readable): void {
  const shape = dst.shape;
  const rank = shape.length;
  const n = numel(shape);
  if (n === 0) return;
  if (rank === 0) {
    dst.data[dst.offset] = values[0]!;
    return;
  }
  const inner = shape[rank - 1]!;
  const innerStride = dst.strides[rank - 1]!;
  const idx = new Array<number>(rank).fill(0);
  let off = dst.offset;
  const d = dst.data;
  for (let o = 0; o < n; o += inner) {
    for (let i = 0, p = off; i < inner; i++, p += innerStride) d[p] = values[o + i]!;
    for (let k = rank - 2; k >= 0; k--) {
      idx[k]!++;
      off += dst.strides[k]!;
      if (idx[k]! < shape[k]!) break;
      off -= dst.strides[k]! * shape[k]!;
      idx[k] = 0;
    }
  }
}

