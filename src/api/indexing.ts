/** Public functions and Tensor methods for the indexing group. */
import { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as ix from '../ops/defs/indexing.js';
import type { ScatterReduce } from '../ops/defs/indexing.js';
import type { ScalarValue } from '../ops/schema.js';
import { installMethods } from './install.js';

export type { ScatterReduce };

/** F.embedding: rows of `weight` [num, dim] picked by integer `input` (any shape) -> [...input.shape, dim]. */
export function embedding(input: Tensor, weight: Tensor, paddingIdx: number | null = null): Tensor {
  return dispatch(ix.embedding, input, weight, paddingIdx);
}

/** torch.index_select: entries of `self` along `dim` at the positions in a 1-d integer `index`. */
export function indexSelect(self: Tensor, dim: number, index: Tensor): Tensor {
  return dispatch(ix.indexSelect, self, dim, index);
}

/** torch.gather: out[i][j][k] = self[index[i][j][k]][j][k] for dim 0 (and so on). */
export function gather(self: Tensor, dim: number, index: Tensor): Tensor {
  return dispatch(ix.gather, self, dim, index);
}

/**
 * torch.scatter: a copy of `self` with `src` (a tensor or a scalar) written at `index` along `dim`.
 * `reduce` combines with the existing value: 'sum'/'add', 'prod'/'multiply', 'mean', 'amax', 'amin'
 * (scatter_reduce semantics with include_self=True).
 */
export function scatter(self: Tensor, dim: number, index: Tensor, src: Tensor | ScalarValue, reduce: ScatterReduce | null = null): Tensor {
  return dispatch(ix.scatter, self, dim, index, src, reduce);
}
export function scatter_(self: Tensor, dim: number, index: Tensor, src: Tensor | ScalarValue, reduce: ScatterReduce | null = null): Tensor {
  return dispatch(ix.scatter_, self, dim, index, src, reduce);
}

/** torch.scatter_add: a copy of `self` with `src` summed in at `index` along `dim` (duplicates add up). */
export function scatterAdd(self: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  return dispatch(ix.scatterAdd, self, dim, index, src);
}
export function scatterAdd_(self: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  return dispatch(ix.scatterAdd_, self, dim, index, src);
}

/**
 * torch.index_put: a copy of `self` with `values` written at the advanced index `indices` (integer
 * tensors broadcast together, `null` for a full slice, bool masks); `accumulate` adds instead.
 * Negative indices count from the end.
 */
export function indexPut(self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate = false): Tensor {
  return dispatch(ix.indexPut, self, indices, values, accumulate);
}
export function indexPut_(self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate = false): Tensor {
  return dispatch(ix.indexPut_, self, indices, values, accumulate);
}

/** torch.masked_fill: `value` where the bool `mask` (broadcast) is true, `self` elsewhere. */
export function maskedFill(self: Tensor, mask: Tensor, value: Tensor | ScalarValue): Tensor {
  return dispatch(ix.maskedFill, self, mask, value);
}
export function maskedFill_(self: Tensor, mask: Tensor, value: Tensor | ScalarValue): Tensor {
  return dispatch(ix.maskedFill_, self, mask, value);
}

/** torch.cat: joins tensors along an existing dim, promoting dtypes; 1-d empty tensors are skipped. */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  return dispatch(ix.cat, tensors as Tensor[], dim);
}

/** torch.stack: joins equal-shaped tensors along a new dim. */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  return dispatch(ix.stack, tensors as Tensor[], dim);
}

/**
 * torch.split: views of `self` along `dim`, each of `splitSizeOrSections` elements (the last may be
 * smaller), or of the listed sizes, which must sum to the dim's size.
 */
export function split(self: Tensor, splitSizeOrSections: number | readonly number[], dim = 0): Tensor[] {
  if (Array.isArray(splitSizeOrSections)) return dispatch(ix.splitWithSizes, self, splitSizeOrSections as readonly number[], dim);
  return dispatch(ix.split, self, splitSizeOrSections as number, dim);
}

/** torch.chunk: `chunks` views of `self` along `dim` (fewer when the size doesn't allow that many). */
export function chunk(self: Tensor, chunks: number, dim = 0): Tensor[] {
  return dispatch(ix.chunk, self, chunks, dim);
}

/** torch.tril: keeps elements on and below the `diagonal`-th diagonal of the last two dims. */
export function tril(self: Tensor, diagonal = 0): Tensor {
  return dispatch(ix.tril, self, diagonal);
}

/** torch.triu: keeps elements on and above the `diagonal`-th diagonal of the last two dims. */
export function triu(self: Tensor, diagonal = 0): Tensor {
  return dispatch(ix.triu, self, diagonal);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    indexSelect(dim: number, index: Tensor): Tensor;
    gather(dim: number, index: Tensor): Tensor;
    scatter(dim: number, index: Tensor, src: Tensor | ScalarValue, reduce?: ScatterReduce | null): Tensor;
    scatter_(dim: number, index: Tensor, src: Tensor | ScalarValue, reduce?: ScatterReduce | null): Tensor;
    scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor;
    scatterAdd_(dim: number, index: Tensor, src: Tensor): Tensor;
    indexPut(indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate?: boolean): Tensor;
    indexPut_(indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate?: boolean): Tensor;
    maskedFill(mask: Tensor, value: Tensor | ScalarValue): Tensor;
    maskedFill_(mask: Tensor, value: Tensor | ScalarValue): Tensor;
    split(splitSizeOrSections: number | readonly number[], dim?: number): Tensor[];
    chunk(chunks: number, dim?: number): Tensor[];
    tril(diagonal?: number): Tensor;
    triu(diagonal?: number): Tensor;
  }
}

installMethods({
  indexSelect,
  gather,
  scatter,
  scatter_,
  scatterAdd,
  scatterAdd_,
  indexPut,
  indexPut_,
  maskedFill,
  maskedFill_,
  split,
  chunk,
  tril,
  triu,
});
