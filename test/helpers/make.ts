/**
 * Test inputs built without going through the ops under test: values are written straight into
 * storage with a chosen layout, so non-contiguous and channels_last inputs don't depend on view ops.
 */
import { Device } from '../../src/runtime/device.js';
import type { DType } from '../../src/tensor/dtype.js';
import { channelsLastStrides, contiguousStrides, numel } from '../../src/tensor/layout.js';
import { Storage } from '../../src/tensor/storage.js';
import { Tensor } from '../../src/tensor/tensor.js';
import { encoder, storageArray } from '../../src/tensor/typed.js';
import { itemSize } from '../../src/tensor/dtype.js';

/**
 * Layouts: `contiguous`; `transposed` (dims stored in reverse order); `strided` (every stride doubled,
 * storage offset 3, so elements are interleaved with junk); `channelsLast` (4-d only).
 */
export type Layout = 'contiguous' | 'transposed' | 'strided' | 'channelsLast';

export function makeTensor(values: ArrayLike<number>, shape: readonly number[], dtype: DType = 'float32', layout: Layout = 'contiguous'): Tensor {
  const n = numel(shape);
  if (values.length !== n) throw new Error(`makeTensor: ${values.length} values for shape [${shape}]`);
  let strides: number[];
  let offset = 0;
  switch (layout) {
    case 'contiguous':
      strides = contiguousStrides(shape);
      break;
    case 'transposed': {
      const rev = [...shape].reverse();
      strides = contiguousStrides(rev).reverse();
      break;
    }
    case 'strided':
      strides = contiguousStrides(shape).map((s) => s * 2);
      offset = 3;
      break;
    case 'channelsLast':
      strides = channelsLastStrides(shape);
      break;
  }
  let span = 1;
  for (let i = 0; i < shape.length; i++) span += (Math.max(shape[i]!, 1) - 1) * strides[i]!;
  const total = offset + span + 4;
  const storage = Storage.allocate(new Device('cpu'), total * itemSize(dtype), true);
  const words = storageArray(dtype, storage.cpuArrayBuffer(), 0, total);
  const enc = encoder(dtype);
  // Junk in the gaps makes a kernel that ignores strides fail loudly.
  for (let i = 0; i < total; i++) (words as unknown as (number | bigint)[])[i] = enc(dtype === 'bool' ? 1 : 777) as never;
  const idx = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let off = offset;
    for (let d = 0; d < shape.length; d++) off += idx[d]! * strides[d]!;
    (words as unknown as (number | bigint)[])[off] = enc(values[i]!) as never;
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < shape[d]!) break;
      idx[d] = 0;
    }
  }
  return new Tensor(storage, dtype, shape, strides, offset);
}

/** A tensor of shape `shape` whose strides broadcast a smaller source (stride 0 on `dims`). */
export function makeExpanded(values: ArrayLike<number>, srcShape: readonly number[], shape: readonly number[], dtype: DType = 'float32'): Tensor {
  const src = makeTensor(values, srcShape, dtype);
  const off = shape.length - srcShape.length;
  const strides = shape.map((s, i) => (i < off || srcShape[i - off] === 1 ? 0 : src.strides[i - off]!));
  return new Tensor(src.storage, dtype, shape, strides, src.offset);
}

/** Deterministic pseudo-random numbers (mulberry32), independent of kiln's generator. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomValues(n: number, seed = 1, lo = -2, hi = 2): number[] {
  const r = rng(seed);
  return Array.from({ length: n }, () => lo + (hi - lo) * r());
}

export function randomInts(n: number, seed: number, lo: number, hi: number): number[] {
  const r = rng(seed);
  return Array.from({ length: n }, () => lo + Math.floor((hi - lo) * r()));
}

/** A random float tensor in the given layout. */
export function rand(shape: readonly number[], seed = 1, layout: Layout = 'contiguous', dtype: DType = 'float32', lo = -2, hi = 2): Tensor {
  return makeTensor(randomValues(numel(shape), seed, lo, hi), shape, dtype, layout);
}
