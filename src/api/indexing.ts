/** Public functions and Tensor methods for the indexing group. */
import { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as ix from '../ops/defs/indexing.js';
import { tensor } from './data.js';
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
  return dispatch(ix.indexPut, self, dispatchableIndices('indexPut', self, indices), values, accumulate);
}
export function indexPut_(self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate = false): Tensor {
  return dispatch(ix.indexPut_, self, dispatchableIndices('indexPut_', self, indices), values, accumulate);
}

/** A view of `t` with `extra` trailing size-1 dims (device independent, no op needed). */
function withTrailingOnes(t: Tensor, extra: number): Tensor {
  if (extra === 0) return t;
  return new Tensor(t.storage, t.dtype, [...t.shape, ...new Array<number>(extra).fill(1)], [...t.strides, ...new Array<number>(extra).fill(1)], t.offset);
}

/**
 * WORKAROUND: the dispatcher's device check walks a Tensor list whose first entry is a Tensor and
 * fails on null entries. Such lists are rewritten into an equivalent null-free form: trailing nulls
 * are dropped, and a null left between index tensors means the advanced dims are not adjacent (the
 * broadcast index dims come first, then the sliced dims in order), which is exactly what index
 * tensors broadcast as [...B, S1, ..., Sq] with an arange per sliced dim give. Bool masks are turned
 * into their nonzero coordinates first. Errors are raised against the original list.
 */
function dispatchableIndices(op: string, self: Tensor, indices: readonly (Tensor | null)[]): readonly (Tensor | null)[] {
  if (!Array.isArray(indices) || !(indices[0] instanceof Tensor) || indices.every((e) => e instanceof Tensor)) return indices;
  ix.checkIndexList(op, self, indices);
  const list = [...indices];
  while (list.length > 0 && (list[list.length - 1] === null || list[list.length - 1] === undefined)) list.pop();
  if (list.every((e) => e instanceof Tensor)) return list;
  const flat: (Tensor | { dim: number })[] = [];
  let d = 0;
  for (const e of list) {
    if (e === null || e === undefined) flat.push({ dim: d++ });
    else if (e.dtype === 'bool' || e.dtype === 'uint8') {
      const m: number[] = e.toFlatArray();
      const k = e.ndim;
      const coords: number[][] = Array.from({ length: k }, () => []);
      m.forEach((v, i) => {
        if (v === 0) return;
        let rem = i;
        for (let j = k - 1; j >= 0; j--) {
          coords[j]!.push(rem % e.shape[j]!);
          rem = Math.floor(rem / e.shape[j]!);
        }
      });
      for (const c of coords) flat.push(tensor(c, { dtype: 'int64', device: e.device }));
      d += k;
    } else {
      flat.push(e);
      d++;
    }
  }
  const q = flat.filter((e) => !(e instanceof Tensor)).length;
  let j = 0;
  return flat.map((e) => {
    if (e instanceof Tensor) return withTrailingOnes(e, q);
    const size = self.shape[e.dim]!;
    const range = tensor(Array.from({ length: size }, (_, i) => i), { dtype: 'int64', device: self.device });
    return withTrailingOnes(range, q - ++j);
  });
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
