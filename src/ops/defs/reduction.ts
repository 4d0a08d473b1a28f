/**
 * Reductions (sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std, logsumexp, any/all),
 * softmax/logSoftmax, scans (cumsum/cumprod) and sorting (sort, argsort, topk).
 *
 * Layouts follow PyTorch: reductions and topk give contiguous outputs (keepdim keeps the reduced
 * dims as size 1); softmax is contiguous like PyTorch's; scans and sort preserve the input's dimension order.
 */
import type { DType } from '../../tensor/dtype.js';
import { isDType, isFloating, isIntegral } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, normalizeDim, preservedStrides } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkInt, checkTensor, describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';

/** A dim argument as users pass it: one dim, a list, or null/undefined for all dims. */
export type DimList = number | readonly number[] | null | undefined;

/**
 * Normalises a reduction's dim argument into sorted, unique, non-negative dims. null, undefined
 * and [] mean every dim (as torch.sum(x, dim=[]) does).
 */
export function reductionDims(op: string, x: TensorMeta, dim: DimList): number[] {
  const rank = x.shape.length;
  if (dim === null || dim === undefined) return Array.from({ length: rank }, (_, i) => i);
  const list = typeof dim === 'number' ? [dim] : dim;
  if (!Array.isArray(list)) throw new TypeError(`${op}: dim must be an integer or a list of integers, got ${String(dim)}`);
  if (list.length === 0) return Array.from({ length: rank }, (_, i) => i);
  const seen = new Set<number>();
  for (const d of list) {
    const n = normalizeDim(op, d, rank);
    if (seen.has(n)) {
      throw new Error(`${op}: dim ${n} appears multiple times in the list of dims ${fmtShape(list)} (input ${describe(x)})`);
    }
    seen.add(n);
  }
  // A 0-d tensor reduces over "dim 0" to a 0-d result: no real dims.
  if (rank === 0) return [];
  return [...seen].sort((a, b) => a - b);
}

/** Output shape of a reduction over `dims` (sorted). */
export function reducedShape(shape: readonly number[], dims: readonly number[], keepdim: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < shape.length; i++) {
    if (dims.includes(i)) {
      if (keepdim) out.push(1);
    } else out.push(shape[i]!);
  }
  return out;
}

function checkBool(op: string, name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new TypeError(`${op}: argument '${name}' must be a boolean, got ${String(v)}`);
  return v;
}

function checkDtypeArg(op: string, dtype: unknown): DType | null {
  if (dtype === null || dtype === undefined) return null;
  if (!isDType(dtype)) throw new TypeError(`${op}: unknown dtype '${String(dtype)}'`);
  return dtype;
}

function contiguousOut(x: TensorMeta, shape: number[], dtype: DType): OutMeta {
  return { shape, strides: contiguousStrides(shape), dtype, device: x.device };
}

/** Meta of a reduction, with its normalised dims; `needsNonEmpty` for ops without an identity. */
function reduceMeta(op: string, x: TensorMeta, dim: DimList, keepdim: boolean, dtype: DType, needsNonEmpty: boolean): OutMeta {
  checkTensor(op, 'self', x);
  checkBool(op, 'keepdim', keepdim);
  const dims = reductionDims(op, x, dim);
  if (needsNonEmpty) checkNonEmpty(op, x, dims);
  return contiguousOut(x, reducedShape(x.shape, dims, keepdim), dtype);
}

function checkNonEmpty(op: string, x: TensorMeta, dims: readonly number[]): void {
  for (const d of dims) {
    if (x.shape[d] === 0) {
      throw new Error(`${op}: cannot reduce over dimension ${d} of size 0 (input ${describe(x)}): the operation has no identity`);
    }
  }
}

/** sum/prod/cumsum/cumprod result dtype: integers and bool accumulate to int64, as in PyTorch. */
function accumulateDtype(op: string, x: TensorMeta, dtype: unknown): DType {
  const d = checkDtypeArg(op, dtype);
  if (d !== null) return d;
  return isIntegral(x.dtype, true) ? 'int64' : x.dtype;
}

function floatingDtype(op: string, x: TensorMeta, dtype: unknown): DType {
  const d = checkDtypeArg(op, dtype);
  if (d !== null) {
    if (!isFloating(d)) {
      throw new TypeError(`${op}: could not infer output dtype: the dtype argument must be a floating point dtype, got ${d} (input ${describe(x)})`);
    }
    return d;
  }
  if (!isFloating(x.dtype)) {
    throw new TypeError(
      `${op}: could not infer output dtype: input ${describe(x)} has dtype ${x.dtype}, but the op needs a floating point input; pass a floating dtype`,
    );
  }
  return x.dtype;
}

function rejectBool(op: string, x: TensorMeta): void {
  if (x.dtype === 'bool') throw new TypeError(`${op}: not implemented for input dtype bool (input ${describe(x)})`);
}

/**
 * sum, prod and mean share one schema (self, dim?, keepdim, dtype?); they differ only in the
 * result dtype: sum and prod accumulate integers in int64, mean needs a floating dtype.
 */
function accumulatingOp(name: 'sum' | 'prod' | 'mean', resultDtype: (op: string, self: TensorMeta, dtype: DType | null) => DType) {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int[]?' },
      { name: 'keepdim', type: 'bool' },
      { name: 'dtype', type: 'dtype?' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta, dim: DimList, keepdim: boolean, dtype: DType | null): OutMeta {
      checkTensor(name, 'self', self);
      return reduceMeta(name, self, dim, keepdim, resultDtype(name, self, dtype), false);
    },
  });
}

export const sum = accumulatingOp('sum', accumulateDtype);
export const prod = accumulatingOp('prod', accumulateDtype);
export const mean = accumulatingOp('mean', floatingDtype);

function extremumOp(name: 'amax' | 'amin') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int[]?' },
      { name: 'keepdim', type: 'bool' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta, dim: DimList, keepdim: boolean): OutMeta {
      checkTensor(name, 'self', self);
      return reduceMeta(name, self, dim, keepdim, self.dtype, true);
    },
  });
}

export const amax = extremumOp('amax');
export const amin = extremumOp('amin');

function fullExtremumOp(name: 'max' | 'min') {
  return defineOp({
    name,
    args: [{ name: 'self', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta): OutMeta {
      checkTensor(name, 'self', self);
      if (self.shape.includes(0)) {
        throw new Error(`${name}: cannot compute the ${name} of an empty tensor (input ${describe(self)}); pass a dim over a non-empty dimension`);
      }
      return contiguousOut(self, [], self.dtype);
    },
  });
}

export const max = fullExtremumOp('max');
export const min = fullExtremumOp('min');

function dimExtremumOp(name: 'maxDim' | 'minDim', publicName: 'max' | 'min') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int' },
      { name: 'keepdim', type: 'bool' },
    ],
    outputs: [
      { name: 'values', type: 'Tensor' },
      { name: 'indices', type: 'Tensor' },
    ],
    tags: ['reduction'],
    method: true,
    publicName,
    meta(self: TensorMeta, dim: number, keepdim: boolean): OutMeta[] {
      checkTensor(publicName, 'self', self);
      checkInt(publicName, 'dim', dim);
      const v = reduceMeta(publicName, self, dim, keepdim, self.dtype, true);
      return [v, { ...v, strides: [...v.strides], dtype: 'int64' }];
    },
  });
}

export const maxDim = dimExtremumOp('maxDim', 'max');
export const minDim = dimExtremumOp('minDim', 'min');

function argExtremumOp(name: 'argmax' | 'argmin') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int?' },
      { name: 'keepdim', type: 'bool' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta, dim: number | null, keepdim: boolean): OutMeta {
      checkTensor(name, 'self', self);
      rejectBool(name, self);
      if (dim !== null && dim !== undefined) {
        checkInt(name, 'dim', dim);
        return reduceMeta(name, self, dim, keepdim, 'int64', true);
      }
      checkBool(name, 'keepdim', keepdim);
      if (self.shape.includes(0)) {
        throw new Error(`${name}: cannot compute the ${name} of an empty tensor (input ${describe(self)}); the operation has no identity`);
      }
      // No dim: the index into the flattened tensor; keepdim keeps every dim as size 1.
      const shape = keepdim ? self.shape.map(() => 1) : [];
      return contiguousOut(self, shape, 'int64');
    },
  });
}

export const argmax = argExtremumOp('argmax');
export const argmin = argExtremumOp('argmin');

function momentOp(name: 'var' | 'std') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int[]?' },
      { name: 'correction', type: 'float' },
      { name: 'keepdim', type: 'bool' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta, dim: DimList, correction: number, keepdim: boolean): OutMeta {
      checkTensor(name, 'self', self);
      if (typeof correction !== 'number' || Number.isNaN(correction)) {
        throw new TypeError(`${name}: argument 'correction' must be a number, got ${String(correction)}`);
      }
      if (!isFloating(self.dtype)) {
        throw new TypeError(`${name}: only supports floating point dtypes, got input ${describe(self)} of dtype ${self.dtype}`);
      }
      return reduceMeta(name, self, dim, keepdim, self.dtype, false);
    },
  });
}

// `var` is a reserved word, so the handle is var_; the op and public names are 'var'.
export const var_ = momentOp('var');
export const std = momentOp('std');

export const logsumexp = defineOp({
  name: 'logsumexp',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int[]' },
    { name: 'keepdim', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['reduction'],
  method: true,
  meta(self: TensorMeta, dim: DimList, keepdim: boolean): OutMeta {
    checkTensor('logsumexp', 'self', self);
    // Integer inputs give the default float dtype, as in PyTorch.
    return reduceMeta('logsumexp', self, dim, keepdim, isFloating(self.dtype) ? self.dtype : 'float32', false);
  },
});

function logicalOp(name: 'any' | 'all') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int[]?' },
      { name: 'keepdim', type: 'bool' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    tags: ['reduction'],
    method: true,
    meta(self: TensorMeta, dim: DimList, keepdim: boolean): OutMeta {
      checkTensor(name, 'self', self);
      return reduceMeta(name, self, dim, keepdim, 'bool', false);
    },
  });
}

export const any = logicalOp('any');
export const all = logicalOp('all');

/** Same shape, the input's dimension order, given dtype. */
function preservedOut(x: TensorMeta, dtype: DType): OutMeta {
  return { shape: [...x.shape], strides: preservedStrides(x.shape, x.shape, x.strides), dtype, device: x.device };
}

function softmaxOp(name: 'softmax' | 'logSoftmax') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int' },
      { name: 'dtype', type: 'dtype?' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    method: true,
    meta(self: TensorMeta, dim: number, dtype: DType | null): OutMeta {
      checkTensor(name, 'self', self);
      checkInt(name, 'dim', dim);
      normalizeDim(name, dim, self.shape.length);
      // PyTorch's softmax allocates a contiguous result whatever the input layout (checked
      // against torch 2.11 in test/golden.test.ts: channels_last in, contiguous out).
      const outDtype = floatingDtype(name, self, dtype);
      return { shape: [...self.shape], strides: contiguousStrides(self.shape), dtype: outDtype, device: self.device };
    },
  });
}

export const softmax = softmaxOp('softmax');
export const logSoftmax = softmaxOp('logSoftmax');

function scanOp(name: 'cumsum' | 'cumprod') {
  return defineOp({
    name,
    args: [
      { name: 'self', type: 'Tensor' },
      { name: 'dim', type: 'int' },
      { name: 'dtype', type: 'dtype?' },
    ],
    outputs: [{ name: 'out', type: 'Tensor' }],
    method: true,
    meta(self: TensorMeta, dim: number, dtype: DType | null): OutMeta {
      checkTensor(name, 'self', self);
      checkInt(name, 'dim', dim);
      normalizeDim(name, dim, self.shape.length);
      return preservedOut(self, accumulateDtype(name, self, dtype));
    },
  });
}

export const cumsum = scanOp('cumsum');
export const cumprod = scanOp('cumprod');

export const sort = defineOp({
  name: 'sort',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'descending', type: 'bool' },
    { name: 'stable', type: 'bool' },
  ],
  outputs: [
    { name: 'values', type: 'Tensor' },
    { name: 'indices', type: 'Tensor' },
  ],
  method: true,
  meta(self: TensorMeta, dim: number, descending: boolean, stable: boolean): OutMeta[] {
    checkTensor('sort', 'self', self);
    checkInt('sort', 'dim', dim);
    normalizeDim('sort', dim, self.shape.length);
    checkBool('sort', 'descending', descending);
    checkBool('sort', 'stable', stable);
    return [preservedOut(self, self.dtype), preservedOut(self, 'int64')];
  },
});

export const argsort = defineOp({
  name: 'argsort',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dim', type: 'int' },
    { name: 'descending', type: 'bool' },
    { name: 'stable', type: 'bool' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dim: number, descending: boolean, stable: boolean): OutMeta {
    checkTensor('argsort', 'self', self);
    checkInt('argsort', 'dim', dim);
    normalizeDim('argsort', dim, self.shape.length);
    checkBool('argsort', 'descending', descending);
    checkBool('argsort', 'stable', stable);
    return preservedOut(self, 'int64');
  },
});

export const topk = defineOp({
  name: 'topk',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'k', type: 'int' },
    { name: 'dim', type: 'int' },
    { name: 'largest', type: 'bool' },
    { name: 'sorted', type: 'bool' },
  ],
  outputs: [
    { name: 'values', type: 'Tensor' },
    { name: 'indices', type: 'Tensor' },
  ],
  method: true,
  meta(self: TensorMeta, k: number, dim: number, largest: boolean, sorted: boolean): OutMeta[] {
    checkTensor('topk', 'self', self);
    rejectBool('topk', self);
    checkInt('topk', 'k', k);
    checkInt('topk', 'dim', dim);
    checkBool('topk', 'largest', largest);
    checkBool('topk', 'sorted', sorted);
    const rank = self.shape.length;
    const d = normalizeDim('topk', dim, rank);
    const size = rank === 0 ? 1 : self.shape[d]!;
    if (k < 0 || k > size) {
      throw new RangeError(`topk: k ${k} is out of range for dimension ${d} of size ${size} (input ${describe(self)}); expected 0 <= k <= ${size}`);
    }
    const shape = [...self.shape];
    if (rank > 0) shape[d] = k;
    const v = contiguousOut(self, shape, self.dtype);
    return [v, { ...v, strides: [...v.strides], dtype: 'int64' }];
  },
});
