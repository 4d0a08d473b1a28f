/**
 * Indexing, joining and splitting ops: embedding, indexSelect, gather, scatter (+ reduce),
 * scatterAdd, indexPut, maskedFill, cat, stack, split / splitWithSizes / chunk (views), tril, triu.
 *
 * The meta functions validate everything metadata can show (ranks, shapes, dtypes, dims). Index
 * values are data, so their range is checked by the kernels, which throw before writing anything.
 */
import type { DType } from '../../tensor/dtype.js';
import { promoteTypes } from '../../tensor/dtype.js';
import { checkIntegerValue } from '../../tensor/typed.js';
import {
  broadcastShapes,
  channelsLastStrides,
  contiguousStrides,
  fmtShape,
  normalizeDim,
  preservedStrides,
  shapeEquals,
} from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkInt, checkTensor, describe, isTensorMeta, pointwiseStrides } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta, ScalarValue } from '../schema.js';

type MaybeOffset = TensorMeta & { readonly offset?: number };

const INDEX_DTYPES: readonly DType[] = ['int32', 'int64'];

/** Index tensors must hold int32 or int64 values; the error names the op, argument and dtype. */
export function checkIndexDtype(op: string, name: string, index: TensorMeta): void {
  if (!INDEX_DTYPES.includes(index.dtype)) {
    throw new TypeError(`${op}: argument '${name}' must be an int32 or int64 tensor, got dtype ${index.dtype} (${fmtShape(index.shape)})`);
  }
}

/** Layout of an out-of-place copy of `self` (clone with preserve_format). */
function cloneMeta(self: TensorMeta): OutMeta {
  return { shape: [...self.shape], strides: preservedStrides(self.shape, self.shape, self.strides), dtype: self.dtype, device: self.device };
}

// ---------------------------------------------------------------------------------------------
// embedding, indexSelect, gather

export const embedding = defineOp({
  name: 'embedding',
  args: [
    { name: 'input', type: 'Tensor' },
    { name: 'weight', type: 'Tensor' },
    { name: 'paddingIdx', type: 'int?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta, weight: TensorMeta, paddingIdx: number | null = null): OutMeta {
    checkTensor('embedding', 'input', input);
    checkTensor('embedding', 'weight', weight);
    checkIndexDtype('embedding', 'input', input);
    if (weight.shape.length !== 2) throw new Error(`embedding: 'weight' must be 2-d [num_embeddings, embedding_dim], got ${describe(weight)}`);
    const num = weight.shape[0]!;
    if (paddingIdx !== null && paddingIdx !== undefined) {
      checkInt('embedding', 'paddingIdx', paddingIdx);
      if (paddingIdx >= num || paddingIdx < -num) {
        throw new RangeError(`embedding: paddingIdx ${paddingIdx} must be within num_embeddings ${num} (weight ${fmtShape(weight.shape)})`);
      }
    }
    const shape = [...input.shape, weight.shape[1]!];
    return { shape, strides: contiguousStrides(shape), dtype: weight.dtype, device: weight.device };
  },
});

export const indexSelect = defineOp({
  name: 'indexSelect',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta): OutMeta {
    checkTensor('indexSelect', 'self', self);
    checkTensor('indexSelect', 'index', index);
    checkIndexDtype('indexSelect', 'index', index);
    const d = normalizeDim('indexSelect', dim, self.shape.length);
    if (index.shape.length > 1) throw new Error(`indexSelect: 'index' must be 0-d or 1-d, got shape ${fmtShape(index.shape)}`);
    const n = index.shape.length === 0 ? 1 : index.shape[0]!;
    let shape: number[];
    if (self.shape.length === 0) {
      if (n !== 1) throw new Error(`indexSelect: index into a 0-d tensor can have only 1 value, got ${n} (index ${fmtShape(index.shape)})`);
      shape = [];
    } else {
      shape = [...self.shape];
      shape[d] = n;
    }
    return { shape, strides: contiguousStrides(shape), dtype: self.dtype, device: self.device };
  },
});

/** Checks index.size(k) <= other.size(k) for every k (except `skip`), naming both shapes. */
function checkIndexFits(op: string, index: TensorMeta, other: TensorMeta, otherName: string, skip: number): void {
  for (let k = 0; k < index.shape.length; k++) {
    if (k === skip) continue;
    if (index.shape[k]! > other.shape[k]!) {
      throw new Error(
        `${op}: size does not match at dim ${k}: expected 'index' ${fmtShape(index.shape)} to be no larger than '${otherName}' ${fmtShape(other.shape)}` +
          (skip >= 0 ? ` apart from dim ${skip}` : ''),
      );
    }
  }
}

function checkSameRank(op: string, self: TensorMeta, index: TensorMeta, otherName = 'self'): void {
  if (index.shape.length !== self.shape.length) {
    throw new Error(
      `${op}: 'index' ${fmtShape(index.shape)} must have the same number of dimensions as '${otherName}' ${fmtShape(self.shape)} (${index.shape.length} vs ${self.shape.length})`,
    );
  }
}

export const gather = defineOp({
  name: 'gather',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta): OutMeta {
    checkTensor('gather', 'self', self);
    checkTensor('gather', 'index', index);
    checkIndexDtype('gather', 'index', index);
    const d = normalizeDim('gather', dim, self.shape.length);
    checkSameRank('gather', self, index);
    checkIndexFits('gather', index, self, 'self', d);
    return { shape: [...index.shape], strides: contiguousStrides(index.shape), dtype: self.dtype, device: self.device };
  },
});

// ---------------------------------------------------------------------------------------------
// scatter, scatterAdd (+ in place)

/** Reductions of scatter's `reduce`: PyTorch's scatter names ('add', 'multiply') and scatter_reduce's. */
export type ScatterReduce = 'sum' | 'prod' | 'mean' | 'amax' | 'amin' | 'add' | 'multiply';
const REDUCES: readonly string[] = ['sum', 'prod', 'mean', 'amax', 'amin', 'add', 'multiply'];

/**
 * How a reducing scatter combines, its names' aliases folded ('add' is 'sum', 'multiply' is
 * 'prod'), and whether it divides by the count afterwards ('mean'): the one decoding the
 * accelerators' scatter kernels share.
 */
export function scatterReduceKind(op: string, reduce: string): { kind: 'add' | 'mul' | 'max' | 'min'; mean: boolean } {
  switch (reduce) {
    case 'sum':
    case 'add':
      return { kind: 'add', mean: false };
    case 'mean':
      return { kind: 'add', mean: true };
    case 'prod':
    case 'multiply':
      return { kind: 'mul', mean: false };
    case 'amax':
      return { kind: 'max', mean: false };
    case 'amin':
      return { kind: 'min', mean: false };
    default:
      throw new Error(`${op}: unknown reduce '${reduce}'`);
  }
}

function scatterCheck(op: string, self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta | ScalarValue, reduce: string | null): void {
  checkTensor(op, 'self', self);
  checkTensor(op, 'index', index);
  checkIndexDtype(op, 'index', index);
  const d = normalizeDim(op, dim, self.shape.length);
  checkSameRank(op, self, index);
  if (isTensorMeta(src)) {
    checkSameRank(op, src, index, 'src');
    if (src.dtype !== self.dtype) {
      throw new TypeError(`${op}: expected 'self' and 'src' to have the same dtype, got ${describe(self)} and ${describe(src)}`);
    }
    checkIndexFits(op, index, src, 'src', -1);
  } else if (typeof src !== 'number' && typeof src !== 'boolean') {
    throw new TypeError(`${op}: 'src' must be a Tensor or a number, got ${typeof src}`);
  }
  checkIndexFits(op, index, self, 'self', d);
  if (reduce !== null && reduce !== undefined && !REDUCES.includes(reduce)) {
    throw new Error(`${op}: reduce must be one of ${REDUCES.map((r) => `'${r}'`).join(', ')}, got '${String(reduce)}'`);
  }
}

export const scatter = defineOp({
  name: 'scatter',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
    { name: 'src', type: 'Tensor|Scalar' },
    { name: 'reduce', type: 'str?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta | ScalarValue, reduce: ScatterReduce | null = null): OutMeta {
    scatterCheck('scatter', self, dim, index, src, reduce);
    return cloneMeta(self);
  },
});

export const scatter_ = defineOp({
  name: 'scatter_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
    { name: 'src', type: 'Tensor|Scalar' },
    { name: 'reduce', type: 'str?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace'],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta | ScalarValue, reduce: ScatterReduce | null = null): OutMeta {
    scatterCheck('scatter_', self, dim, index, src, reduce);
    return self;
  },
});

function scatterAddCheck(op: string, self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta): void {
  checkTensor(op, 'src', src);
  scatterCheck(op, self, dim, index, src, null);
}

export const scatterAdd = defineOp({
  name: 'scatterAdd',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
    { name: 'src', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta): OutMeta {
    scatterAddCheck('scatterAdd', self, dim, index, src);
    return cloneMeta(self);
  },
});

export const scatterAdd_ = defineOp({
  name: 'scatterAdd_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'dim', type: 'int' },
    { name: 'index', type: 'Tensor' },
    { name: 'src', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace'],
  method: true,
  meta(self: TensorMeta, dim: number, index: TensorMeta, src: TensorMeta): OutMeta {
    scatterAddCheck('scatterAdd_', self, dim, index, src);
    return self;
  },
});

// ---------------------------------------------------------------------------------------------
// indexPut (advanced-index assignment)

/**
 * Checks an advanced-index list against `self`: dtypes, the number of indexed dims, mask shapes and
 * that integer index tensors broadcast together. Returns the indexing result shape when it does
 * not depend on data (no masks), else null.
 */
export function checkIndexList(op: string, self: TensorMeta, indices: readonly (TensorMeta | null)[]): number[] | null {
  if (!Array.isArray(indices)) throw new TypeError(`${op}: 'indices' must be an array of Tensors or nulls`);
  let consumed = 0;
  let hasMask = false;
  const intShapes: (readonly number[])[] = [];
  const advanced: number[] = [];
  for (let i = 0; i < indices.length; i++) {
    const t = indices[i];
    if (t === null || t === undefined) {
      consumed++;
      continue;
    }
    checkTensor(op, `indices[${i}]`, t);
    if (t.dtype === 'bool' || t.dtype === 'uint8') {
      hasMask = true;
      const k = t.shape.length;
      if (k === 0) throw new Error(`${op}: 0-d bool masks are not supported (indices[${i}]); use a mask with the shape of the indexed dims`);
      for (let j = 0; j < k; j++) {
        const sd = consumed + j;
        if (sd < self.shape.length && t.shape[j] !== self.shape[sd]) {
          throw new Error(
            `${op}: the shape of the mask ${fmtShape(t.shape)} at indices[${i}] does not match the shape of the indexed tensor ${fmtShape(self.shape)} at dim ${sd}`,
          );
        }
      }
      for (let j = 0; j < k; j++) advanced.push(consumed + j);
      consumed += k;
    } else if (t.dtype === 'int32' || t.dtype === 'int64') {
      intShapes.push(t.shape);
      advanced.push(consumed);
      consumed++;
    } else {
      throw new TypeError(`${op}: tensors used as indices must be int32, int64 or bool, got dtype ${t.dtype} for indices[${i}] (${fmtShape(t.shape)})`);
    }
  }
  if (consumed > self.shape.length) {
    throw new Error(`${op}: too many indices for tensor of dimension ${self.shape.length} (got ${indices.length} index entries indexing ${consumed} dims, self ${fmtShape(self.shape)})`);
  }
  let b: number[];
  try {
    b = broadcastShapes(op, ...intShapes);
  } catch {
    throw new Error(`${op}: shape mismatch: indexing tensors could not be broadcast together with shapes ${intShapes.map(fmtShape).join(', ')}`);
  }
  if (hasMask) return null;
  const advDims = new Set(advanced);
  if (advDims.size === 0) return [...self.shape];
  const sorted = [...advDims].sort((x, y) => x - y);
  const consecutive = sorted[sorted.length - 1]! - sorted[0]! === sorted.length - 1;
  const sliceDims: number[] = [];
  for (let d = 0; d < self.shape.length; d++) if (!advDims.has(d)) sliceDims.push(d);
  if (consecutive) {
    const first = sorted[0]!;
    return [...sliceDims.filter((d) => d < first).map((d) => self.shape[d]!), ...b, ...sliceDims.filter((d) => d > first).map((d) => self.shape[d]!)];
  }
  return [...b, ...sliceDims.map((d) => self.shape[d]!)];
}

function indexPutCheck(op: string, self: TensorMeta, indices: readonly (TensorMeta | null)[], values: TensorMeta | ScalarValue, accumulate: boolean): void {
  checkTensor(op, 'self', self);
  const resultShape = checkIndexList(op, self, indices);
  if (isTensorMeta(values)) {
    if (values.dtype !== self.dtype) {
      throw new TypeError(`${op}: 'values' must have the same dtype as 'self', got ${describe(values)} for values and ${describe(self)} for self`);
    }
    if (resultShape !== null) checkValuesBroadcast(op, values.shape, resultShape);
  } else if (typeof values !== 'number' && typeof values !== 'boolean') {
    throw new TypeError(`${op}: 'values' must be a Tensor or a number, got ${typeof values}`);
  }
  if (typeof accumulate !== 'boolean') throw new TypeError(`${op}: 'accumulate' must be a boolean, got ${String(accumulate)}`);
}

/** Values must broadcast to the indexing result's shape (shared with the kernel's mask path). */
export function checkValuesBroadcast(op: string, valuesShape: readonly number[], resultShape: readonly number[]): void {
  let ok = valuesShape.length <= resultShape.length || valuesShape.slice(0, valuesShape.length - resultShape.length).every((s) => s === 1);
  if (ok) {
    for (let i = 1; i <= Math.min(valuesShape.length, resultShape.length); i++) {
      const v = valuesShape[valuesShape.length - i]!;
      if (v !== 1 && v !== resultShape[resultShape.length - i]) ok = false;
    }
  }
  if (!ok) {
    throw new Error(`${op}: shape mismatch: value tensor of shape ${fmtShape(valuesShape)} cannot be broadcast to indexing result of shape ${fmtShape(resultShape)}`);
  }
}

export const indexPut = defineOp({
  name: 'indexPut',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'indices', type: 'Tensor?[]' },
    { name: 'values', type: 'Tensor|Scalar' },
    { name: 'accumulate', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, indices: readonly (TensorMeta | null)[], values: TensorMeta | ScalarValue, accumulate: boolean): OutMeta {
    indexPutCheck('indexPut', self, indices, values, accumulate);
    return cloneMeta(self);
  },
});

export const indexPut_ = defineOp({
  name: 'indexPut_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'indices', type: 'Tensor?[]' },
    { name: 'values', type: 'Tensor|Scalar' },
    { name: 'accumulate', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace'],
  method: true,
  meta(self: TensorMeta, indices: readonly (TensorMeta | null)[], values: TensorMeta | ScalarValue, accumulate: boolean): OutMeta {
    indexPutCheck('indexPut_', self, indices, values, accumulate);
    return self;
  },
});

// ---------------------------------------------------------------------------------------------
// maskedFill

function maskedFillCheck(op: string, self: TensorMeta, mask: TensorMeta, value: TensorMeta | ScalarValue): number[] {
  checkTensor(op, 'self', self);
  checkTensor(op, 'mask', mask);
  if (mask.dtype !== 'bool') throw new TypeError(`${op}: only supports boolean masks, but got 'mask' with dtype ${mask.dtype} (${fmtShape(mask.shape)})`);
  if (isTensorMeta(value)) {
    if (value.shape.length !== 0) {
      throw new Error(`${op}: only supports a 0-dimensional 'value' tensor, but got tensor with ${value.shape.length} dimension(s) ${fmtShape(value.shape)}`);
    }
  } else if (typeof value !== 'number' && typeof value !== 'boolean') {
    throw new TypeError(`${op}: 'value' must be a number, boolean or 0-d Tensor, got ${typeof value}`);
  } else {
    // A JS number written into an integer tensor is range-checked like fill_ (NaN/Infinity and
    // out-of-range values are errors, not a silent 0 or a wrapped value).
    checkIntegerValue(op, value, self.dtype);
  }
  try {
    return broadcastShapes(op, self.shape, mask.shape);
  } catch {
    throw new Error(`${op}: 'mask' ${fmtShape(mask.shape)} is not broadcastable with 'self' ${fmtShape(self.shape)}`);
  }
}

export const maskedFill = defineOp({
  name: 'maskedFill',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'mask', type: 'Tensor' },
    { name: 'value', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, mask: TensorMeta, value: TensorMeta | ScalarValue): OutMeta {
    const shape = maskedFillCheck('maskedFill', self, mask, value);
    return { shape, strides: pointwiseStrides(shape, [self, mask]), dtype: self.dtype, device: self.device };
  },
});

export const maskedFill_ = defineOp({
  name: 'maskedFill_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'mask', type: 'Tensor' },
    { name: 'value', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, mask: TensorMeta, value: TensorMeta | ScalarValue): OutMeta {
    const shape = maskedFillCheck('maskedFill_', self, mask, value);
    if (!shapeEquals(shape, self.shape)) {
      throw new Error(`maskedFill_: 'mask' ${fmtShape(mask.shape)} is not broadcastable to 'self' ${fmtShape(self.shape)} in place (broadcast shape ${fmtShape(shape)})`);
    }
    return self;
  },
});

// ---------------------------------------------------------------------------------------------
// cat, stack

/** PyTorch's is_channels_last_strides_2d: the stride order is N, H, W, C (ties broken like torch). */
function stridesLikeChannelsLast(t: TensorMeta): boolean {
  if (t.shape.length !== 4) return false;
  if (t.strides[1] === 0) return false;
  let min = 0;
  for (const d of [1, 3, 2, 0]) {
    const size = t.shape[d]!;
    const stride = t.strides[d]!;
    if (size === 0) return false;
    if (stride < min) return false;
    if (d === 0 && min === t.strides[1]) return false;
    min = stride;
    if (size > 1) min *= size;
  }
  return true;
}

/** Legacy empty tensors (1-d of size 0) are skipped by cat, as in PyTorch. */
export function catSkipped(t: TensorMeta): boolean {
  return t.shape.length === 1 && t.shape[0] === 0;
}

export const cat = defineOp({
  name: 'cat',
  args: [
    { name: 'tensors', type: 'Tensor[]' },
    { name: 'dim', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(tensors: readonly TensorMeta[], dim: number): OutMeta {
    if (!Array.isArray(tensors) || tensors.length === 0) throw new Error('cat: expected a non-empty list of Tensors');
    tensors.forEach((t, i) => checkTensor('cat', `tensors[${i}]`, t));
    let dtype = tensors[0]!.dtype;
    for (const t of tensors) dtype = promoteTypes(dtype, t.dtype);
    tensors.forEach((t, i) => {
      if (t.shape.length === 0) throw new Error(`cat: zero-dimensional tensor (at position ${i}) cannot be concatenated`);
    });
    const kept = tensors.map((t, i) => [t, i] as const).filter(([t]) => !catSkipped(t));
    if (kept.length === 0) return { shape: [0], strides: [1], dtype, device: tensors[0]!.device };
    const [ref, refPos] = kept[0]!;
    const rank = ref.shape.length;
    const d = normalizeDim('cat', dim, rank);
    let total = 0;
    for (const [t, i] of kept) {
      if (t.shape.length !== rank) {
        throw new Error(
          `cat: tensors must have the same number of dimensions: got ${rank} for tensors[${refPos}] ${fmtShape(ref.shape)} and ${t.shape.length} for tensors[${i}] ${fmtShape(t.shape)}`,
        );
      }
      for (let k = 0; k < rank; k++) {
        if (k !== d && t.shape[k] !== ref.shape[k]) {
          throw new Error(
            `cat: sizes of tensors must match except in dimension ${d}: tensors[${refPos}] has shape ${fmtShape(ref.shape)} and tensors[${i}] has shape ${fmtShape(t.shape)} (mismatch at dim ${k}: ${ref.shape[k]} vs ${t.shape[k]})`,
          );
        }
      }
      total += t.shape[d]!;
    }
    const shape = [...ref.shape];
    shape[d] = total;
    const channelsLast = kept.every(([t]) => stridesLikeChannelsLast(t));
    const strides = channelsLast ? channelsLastStrides(shape) : contiguousStrides(shape);
    return { shape, strides, dtype, device: ref.device };
  },
});

export const stack = defineOp({
  name: 'stack',
  args: [
    { name: 'tensors', type: 'Tensor[]' },
    { name: 'dim', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(tensors: readonly TensorMeta[], dim: number): OutMeta {
    if (!Array.isArray(tensors) || tensors.length === 0) throw new Error('stack: expected a non-empty list of Tensors');
    tensors.forEach((t, i) => checkTensor('stack', `tensors[${i}]`, t));
    const ref = tensors[0]!;
    let dtype = ref.dtype;
    tensors.forEach((t, i) => {
      if (!shapeEquals(t.shape, ref.shape)) {
        throw new Error(`stack: expects each tensor to be equal size, but got ${fmtShape(ref.shape)} at entry 0 and ${fmtShape(t.shape)} at entry ${i}`);
      }
      dtype = promoteTypes(dtype, t.dtype);
    });
    const d = normalizeDim('stack', dim, ref.shape.length + 1);
    const shape = [...ref.shape];
    shape.splice(d, 0, tensors.length);
    return { shape, strides: contiguousStrides(shape), dtype, device: ref.device };
  },
});

// ---------------------------------------------------------------------------------------------
// split, splitWithSizes, chunk: views sharing self's storage

/** Metadata of the views of `self` cut along `dim` into pieces of the given sizes. */
export function splitViewsMeta(self: MaybeOffset, d: number, sizes: readonly number[]): OutMeta[] {
  const base = self.offset ?? 0;
  const stride = self.strides[d]!;
  let start = 0;
  return sizes.map((n) => {
    const shape = [...self.shape];
    shape[d] = n;
    const m: OutMeta = { shape, strides: [...self.strides], dtype: self.dtype, device: self.device, offset: base + start * stride };
    start += n;
    return m;
  });
}

function splitDim(op: string, self: TensorMeta, dim: number): number {
  checkTensor(op, 'self', self);
  if (self.shape.length === 0) throw new Error(`${op}: expected a tensor with at least 1 dimension, got a 0-d tensor ${describe(self)}`);
  return normalizeDim(op, dim, self.shape.length);
}

/** Piece sizes of split(self, splitSize, dim), as torch.split computes them. */
export function splitSizes(op: string, dimSize: number, splitSize: number, d: number): number[] {
  checkInt(op, 'splitSize', splitSize, 0);
  if (splitSize === 0 && dimSize !== 0) {
    throw new RangeError(`${op}: splitSize can only be 0 if dim ${d} has size 0, but got size ${dimSize}`);
  }
  const count = splitSize === 0 ? 1 : Math.max(Math.ceil(dimSize / splitSize), 1);
  const sizes: number[] = [];
  for (let i = 0; i < count; i++) sizes.push(Math.max(0, Math.min(splitSize, dimSize - i * splitSize)));
  return sizes;
}

export const split = defineOp({
  name: 'split',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'splitSize', type: 'int' },
    { name: 'dim', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor[]', aliasOf: 'self' }],
  tags: ['view'],
  method: true,
  meta(self: MaybeOffset, splitSize: number, dim: number): OutMeta[] {
    const d = splitDim('split', self, dim);
    return splitViewsMeta(self, d, splitSizes('split', self.shape[d]!, splitSize, d));
  },
});

export const splitWithSizes = defineOp({
  name: 'splitWithSizes',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'splitSizes', type: 'int[]' },
    { name: 'dim', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor[]', aliasOf: 'self' }],
  tags: ['view'],
  publicName: 'split',
  method: true,
  meta(self: MaybeOffset, sizes: readonly number[], dim: number): OutMeta[] {
    const d = splitDim('split', self, dim);
    if (!Array.isArray(sizes)) throw new TypeError(`split: 'splitSizes' must be an array of integers, got ${String(sizes)}`);
    sizes.forEach((s) => checkInt('split', 'splitSizes', s, 0));
    const sum = sizes.reduce((a, b) => a + b, 0);
    if (sum !== self.shape[d]) {
      throw new Error(`split: split sizes ${fmtShape(sizes)} sum to ${sum}, but dim ${d} of 'self' ${fmtShape(self.shape)} has size ${self.shape[d]}`);
    }
    return splitViewsMeta(self, d, sizes);
  },
});

/** Piece sizes of chunk(self, chunks, dim), as torch.chunk computes them. */
export function chunkSizes(dimSize: number, chunks: number, d: number): number[] {
  checkInt('chunk', 'chunks', chunks, 1);
  const each = Math.ceil(dimSize / chunks);
  if (each === 0 && dimSize === 0) return new Array<number>(chunks).fill(0);
  return splitSizes('chunk', dimSize, each, d);
}

export const chunk = defineOp({
  name: 'chunk',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'chunks', type: 'int' },
    { name: 'dim', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor[]', aliasOf: 'self' }],
  tags: ['view'],
  method: true,
  meta(self: MaybeOffset, chunks: number, dim: number): OutMeta[] {
    const d = splitDim('chunk', self, dim);
    return splitViewsMeta(self, d, chunkSizes(self.shape[d]!, chunks, d));
  },
});

// ---------------------------------------------------------------------------------------------
// tril, triu

function triMeta(op: string, self: TensorMeta, diagonal: number): OutMeta {
  checkTensor(op, 'self', self);
  checkInt(op, 'diagonal', diagonal);
  if (self.shape.length < 2) throw new Error(`${op}: input tensor must have at least 2 dimensions, got ${describe(self)}`);
  return cloneMeta(self);
}

export const tril = defineOp({
  name: 'tril',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'diagonal', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, diagonal: number): OutMeta {
    return triMeta('tril', self, diagonal);
  },
});

export const triu = defineOp({
  name: 'triu',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'diagonal', type: 'int' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, diagonal: number): OutMeta {
    return triMeta('triu', self, diagonal);
  },
});
