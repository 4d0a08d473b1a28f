/**
 * Public view functions and Tensor methods. Every result shares storage with its input (writes
 * through a view change the base), except `reshape`/`flatten`, which copy when the input's strides
 * make a view impossible (e.g. reshaping a transposed matrix to 1-d). Shapes may be given as one
 * array or variadically: `x.view(2, -1)` and `x.view([2, -1])`.
 */
import { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as v from '../ops/defs/views.js';
import { installMethods } from './install.js';

/** A shape or dim list as one array or variadic numbers. */
export type ShapeArgs = [shape: readonly number[]] | number[];

function shapeOf(op: string, args: readonly unknown[]): number[] {
  if (args.length === 1 && Array.isArray(args[0])) return [...(args[0] as number[])];
  for (const a of args) {
    if (typeof a !== 'number') throw new TypeError(`${op}: expected a shape as one array or as integers, got ${Array.isArray(a) ? 'an array among several arguments' : typeof a}`);
  }
  return [...(args as number[])];
}

function dimList(d: number | readonly number[]): number[] {
  return typeof d === 'number' ? [d] : [...d];
}

/** A view with the given shape (one dim may be -1); throws when the strides don't allow it. */
export function view(self: Tensor, ...shape: ShapeArgs): Tensor {
  return dispatch(v.view, self, shapeOf('view', shape));
}

/** A view when possible, else a contiguous copy with the new shape. */
export function reshape(self: Tensor, ...shape: ShapeArgs): Tensor {
  return dispatch(v.reshape, self, shapeOf('reshape', shape));
}

/** Merges dims startDim..endDim (a view when possible, like reshape). */
export function flatten(self: Tensor, startDim = 0, endDim = -1): Tensor {
  return dispatch(v.flatten, self, startDim, endDim);
}

/** Splits dim into `sizes` (one may be -1). */
export function unflatten(self: Tensor, dim: number, sizes: readonly number[]): Tensor {
  return dispatch(v.unflatten, self, dim, [...sizes]);
}

export function permute(self: Tensor, ...dims: ShapeArgs): Tensor {
  return dispatch(v.permute, self, shapeOf('permute', dims));
}

export function transpose(self: Tensor, dim0: number, dim1: number): Tensor {
  return dispatch(v.transpose, self, dim0, dim1);
}

/** Transpose of a tensor with at most 2 dims (0-d and 1-d come back as views of themselves). */
export function t(self: Tensor): Tensor {
  return dispatch(v.t, self);
}

/** Moves dims `source` to positions `destination`; the others keep their order. */
export function movedim(self: Tensor, source: number | readonly number[], destination: number | readonly number[]): Tensor {
  return dispatch(v.movedim, self, dimList(source), dimList(destination));
}

/** Broadcast view: -1 keeps a dim, size-1 dims grow with stride 0, new dims may lead. */
export function expand(self: Tensor, ...sizes: ShapeArgs): Tensor {
  return dispatch(v.expand, self, shapeOf('expand', sizes));
}

export function expandAs(self: Tensor, other: Tensor): Tensor {
  return dispatch(v.expand, self, [...other.shape]);
}

/** Python-style slice `x[start:end:step]` along dim: negative indices count from the end, bounds clamp, step > 0. */
export function slice(self: Tensor, dim: number, start: number | null = null, end: number | null = null, step = 1): Tensor {
  return dispatch(v.slice, self, dim, start ?? null, end ?? null, step);
}

/** `length` elements from `start` along dim (strict bounds; negative start counts from the end). */
export function narrow(self: Tensor, dim: number, start: number, length: number): Tensor {
  return dispatch(v.narrow, self, dim, start, length);
}

/** Index `index` along dim, removing that dim. */
export function select(self: Tensor, dim: number, index: number): Tensor {
  return dispatch(v.select, self, dim, index);
}

/** Removes size-1 dims: all of them, or those listed (listed dims of other sizes are kept). */
export function squeeze(self: Tensor, dim?: number | readonly number[] | null): Tensor {
  return dispatch(v.squeeze, self, dim === undefined || dim === null ? null : dimList(dim));
}

export function unsqueeze(self: Tensor, dim: number): Tensor {
  return dispatch(v.unsqueeze, self, dim);
}

/** The diagonal of dims (dim1, dim2) as the last dim; offset > 0 is above the main diagonal. */
export function diagonal(self: Tensor, offset = 0, dim1 = 0, dim2 = 1): Tensor {
  return dispatch(v.diagonal, self, offset, dim1, dim2);
}

/** A view with explicit size, strides and storage offset (default: the input's offset). */
export function asStrided(self: Tensor, size: readonly number[], stride: readonly number[], storageOffset: number | null = null): Tensor {
  return dispatch(v.asStrided, self, [...size], [...stride], storageOffset ?? null);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    view(...shape: ShapeArgs): Tensor;
    reshape(...shape: ShapeArgs): Tensor;
    flatten(startDim?: number, endDim?: number): Tensor;
    unflatten(dim: number, sizes: readonly number[]): Tensor;
    permute(...dims: ShapeArgs): Tensor;
    transpose(dim0: number, dim1: number): Tensor;
    t(): Tensor;
    movedim(source: number | readonly number[], destination: number | readonly number[]): Tensor;
    expand(...sizes: ShapeArgs): Tensor;
    expandAs(other: Tensor): Tensor;
    slice(dim: number, start?: number | null, end?: number | null, step?: number): Tensor;
    narrow(dim: number, start: number, length: number): Tensor;
    select(dim: number, index: number): Tensor;
    squeeze(dim?: number | readonly number[] | null): Tensor;
    unsqueeze(dim: number): Tensor;
    diagonal(offset?: number, dim1?: number, dim2?: number): Tensor;
    asStrided(size: readonly number[], stride: readonly number[], storageOffset?: number | null): Tensor;
    /** All dims reversed (the transpose for 2-d). */
    readonly T: Tensor;
    /** The last two dims swapped (batched matrix transpose); needs rank >= 2. */
    readonly mT: Tensor;
  }
}

installMethods({
  view,
  reshape,
  flatten,
  unflatten,
  permute,
  transpose,
  t,
  movedim,
  expand,
  expandAs,
  slice,
  narrow,
  select,
  squeeze,
  unsqueeze,
  diagonal,
  asStrided,
});

function defineGetter(name: string, get: (self: Tensor) => Tensor): void {
  const proto = Tensor.prototype as unknown as Record<string, unknown>;
  if (Object.prototype.hasOwnProperty.call(proto, name)) throw new Error(`views: Tensor.${name} is already defined`);
  Object.defineProperty(proto, name, {
    configurable: true,
    get(this: Tensor) {
      return get(this);
    },
  });
}

defineGetter('T', (self) => dispatch(v.permute, self, Array.from({ length: self.ndim }, (_, i) => self.ndim - 1 - i)));
defineGetter('mT', (self) => {
  if (self.ndim < 2) throw new Error(`mT: tensor must have at least 2 dimensions, got shape [${self.shape.join(', ')}]`);
  return dispatch(v.transpose, self, -2, -1);
});
