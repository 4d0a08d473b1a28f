/**
 * Public functions and Tensor methods for reductions, softmax, scans and sorting. `dim` is one
 * dim, a list of dims, or omitted/null for every dim; negative dims count from the end.
 */
import type { DType } from '../tensor/dtype.js';
import type { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as red from '../ops/defs/reduction.js';
import { installMethods } from './install.js';

export type Dims = number | readonly number[];

export interface ValuesIndices {
  values: Tensor;
  indices: Tensor;
}

function dimList(dim: Dims | null | undefined): number[] | null {
  if (dim === null || dim === undefined) return null;
  return typeof dim === 'number' ? [dim] : [...dim];
}

function pair(r: Tensor[]): ValuesIndices {
  return { values: r[0]!, indices: r[1]! };
}

/** Sum over `dim` (all dims when omitted); bool and integer inputs sum to int64. */
export function sum(self: Tensor, dim?: Dims | null, keepdim = false, dtype?: DType | null): Tensor {
  return dispatch(red.sum, self, dimList(dim), keepdim, dtype ?? null);
}

/** Product over `dim`; bool and integer inputs multiply to int64. */
export function prod(self: Tensor, dim?: Dims | null, keepdim = false, dtype?: DType | null): Tensor {
  return dispatch(red.prod, self, dimList(dim), keepdim, dtype ?? null);
}

/** Mean over `dim`; needs a floating input or a floating `dtype`. */
export function mean(self: Tensor, dim?: Dims | null, keepdim = false, dtype?: DType | null): Tensor {
  return dispatch(red.mean, self, dimList(dim), keepdim, dtype ?? null);
}

export function amax(self: Tensor, dim?: Dims | null, keepdim = false): Tensor {
  return dispatch(red.amax, self, dimList(dim), keepdim);
}

export function amin(self: Tensor, dim?: Dims | null, keepdim = false): Tensor {
  return dispatch(red.amin, self, dimList(dim), keepdim);
}

/** `max(x)`: the largest element (NaN if any); `max(x, dim, keepdim)`: values and int64 indices. */
export function max(self: Tensor): Tensor;
export function max(self: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function max(self: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  if (dim === undefined) return dispatch(red.max, self);
  return pair(dispatch(red.maxDim, self, dim, keepdim));
}

export function min(self: Tensor): Tensor;
export function min(self: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function min(self: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  if (dim === undefined) return dispatch(red.min, self);
  return pair(dispatch(red.minDim, self, dim, keepdim));
}

/** Index of the first maximum (or first NaN) along `dim`; without dim, into the flattened tensor. */
export function argmax(self: Tensor, dim?: number | null, keepdim = false): Tensor {
  return dispatch(red.argmax, self, dim ?? null, keepdim);
}

export function argmin(self: Tensor, dim?: number | null, keepdim = false): Tensor {
  return dispatch(red.argmin, self, dim ?? null, keepdim);
}

/** Variance with Bessel's `correction` (1 = unbiased, 0 = population). */
function variance(self: Tensor, dim?: Dims | null, correction = 1, keepdim = false): Tensor {
  return dispatch(red.var_, self, dimList(dim), correction, keepdim);
}
export { variance as var };

export function std(self: Tensor, dim?: Dims | null, correction = 1, keepdim = false): Tensor {
  return dispatch(red.std, self, dimList(dim), correction, keepdim);
}

/** log(sum(exp(x))) over `dim`, computed stably (the max is factored out). */
export function logsumexp(self: Tensor, dim: Dims, keepdim = false): Tensor {
  return dispatch(red.logsumexp, self, dimList(dim), keepdim);
}

export function any(self: Tensor, dim?: Dims | null, keepdim = false): Tensor {
  return dispatch(red.any, self, dimList(dim), keepdim);
}

export function all(self: Tensor, dim?: Dims | null, keepdim = false): Tensor {
  return dispatch(red.all, self, dimList(dim), keepdim);
}

export function softmax(self: Tensor, dim: number, dtype?: DType | null): Tensor {
  return dispatch(red.softmax, self, dim, dtype ?? null);
}

export function logSoftmax(self: Tensor, dim: number, dtype?: DType | null): Tensor {
  return dispatch(red.logSoftmax, self, dim, dtype ?? null);
}

/** Running sum along `dim`; bool and integer inputs give int64. */
export function cumsum(self: Tensor, dim: number, dtype?: DType | null): Tensor {
  return dispatch(red.cumsum, self, dim, dtype ?? null);
}

/** Running product along `dim`; bool and integer inputs give int64. */
export function cumprod(self: Tensor, dim: number, dtype?: DType | null): Tensor {
  return dispatch(red.cumprod, self, dim, dtype ?? null);
}

/** Sorted values and their int64 indices along `dim`; NaN sorts above everything. Always stable. */
export function sort(self: Tensor, dim = -1, descending = false, stable = false): ValuesIndices {
  return pair(dispatch(red.sort, self, dim, descending, stable));
}

export function argsort(self: Tensor, dim = -1, descending = false, stable = false): Tensor {
  return dispatch(red.argsort, self, dim, descending, stable);
}

/** The k largest (or smallest) elements along `dim` and their indices, in sorted order. */
export function topk(self: Tensor, k: number, dim = -1, largest = true, sorted = true): ValuesIndices {
  return pair(dispatch(red.topk, self, k, dim, largest, sorted));
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    sum(dim?: Dims | null, keepdim?: boolean, dtype?: DType | null): Tensor;
    prod(dim?: Dims | null, keepdim?: boolean, dtype?: DType | null): Tensor;
    mean(dim?: Dims | null, keepdim?: boolean, dtype?: DType | null): Tensor;
    amax(dim?: Dims | null, keepdim?: boolean): Tensor;
    amin(dim?: Dims | null, keepdim?: boolean): Tensor;
    max(): Tensor;
    max(dim: number, keepdim?: boolean): ValuesIndices;
    min(): Tensor;
    min(dim: number, keepdim?: boolean): ValuesIndices;
    argmax(dim?: number | null, keepdim?: boolean): Tensor;
    argmin(dim?: number | null, keepdim?: boolean): Tensor;
    var(dim?: Dims | null, correction?: number, keepdim?: boolean): Tensor;
    std(dim?: Dims | null, correction?: number, keepdim?: boolean): Tensor;
    logsumexp(dim: Dims, keepdim?: boolean): Tensor;
    any(dim?: Dims | null, keepdim?: boolean): Tensor;
    all(dim?: Dims | null, keepdim?: boolean): Tensor;
    softmax(dim: number, dtype?: DType | null): Tensor;
    logSoftmax(dim: number, dtype?: DType | null): Tensor;
    cumsum(dim: number, dtype?: DType | null): Tensor;
    cumprod(dim: number, dtype?: DType | null): Tensor;
    sort(dim?: number, descending?: boolean, stable?: boolean): ValuesIndices;
    argsort(dim?: number, descending?: boolean, stable?: boolean): Tensor;
    topk(k: number, dim?: number, largest?: boolean, sorted?: boolean): ValuesIndices;
  }
}

installMethods({
  sum,
  prod,
  mean,
  amax,
  amin,
  max: max as (self: Tensor, dim?: number, keepdim?: boolean) => Tensor | ValuesIndices,
  min: min as (self: Tensor, dim?: number, keepdim?: boolean) => Tensor | ValuesIndices,
  argmax,
  argmin,
  var: variance,
  std,
  logsumexp,
  any,
  all,
  softmax,
  logSoftmax,
  cumsum,
  cumprod,
  sort,
  argsort,
  topk,
});
