/**
 * Public functions and Tensor methods for flip, roll, repeat and nonzero (torch.flip, torch.roll,
 * Tensor.repeat, torch.nonzero). Dims and repeats may be one array or variadic numbers, as in torch:
 * `x.repeat(2, 3)`, `x.flip(0, 1)`, `kiln.flip(x, [0])`.
 */
import { dispatch } from '../ops/dispatch.js';
import * as S from '../ops/defs/shape-extra.js';
import { nonzero as nonzeroOp } from '../ops/defs/nonzero.js';
import type { Tensor } from '../tensor/tensor.js';
import { installMethods } from './install.js';
import type { ShapeArgs } from './views.js';

function ints(op: string, name: string, args: readonly unknown[]): number[] {
  if (args.length === 1 && Array.isArray(args[0])) return [...(args[0] as number[])];
  for (const a of args) {
    if (typeof a !== 'number') throw new TypeError(`${op}: expected '${name}' as one array or as integers, got ${Array.isArray(a) ? 'an array among several arguments' : typeof a}`);
  }
  return [...(args as number[])];
}

/** torch.flip: reverses the order of elements along `dims` (a copy, as torch). */
export function flip(self: Tensor, ...dims: ShapeArgs): Tensor {
  return dispatch(S.flip, self, ints('flip', 'dims', dims));
}

/**
 * torch.roll: shifts elements along `dims` cyclically (element i goes to i + shift). Without
 * `dims` the tensor is rolled as if flattened, then restored to its shape.
 */
export function roll(self: Tensor, shifts: number | readonly number[], dims: number | readonly number[] | null = null): Tensor {
  const s = typeof shifts === 'number' ? [shifts] : [...shifts];
  const d = dims === null || dims === undefined ? null : typeof dims === 'number' ? [dims] : [...dims];
  return dispatch(S.roll, self, s, d);
}

/** Tensor.repeat: tiles the tensor `repeats[i]` times along each dim (leading new dims allowed). */
export function repeat(self: Tensor, ...repeats: ShapeArgs): Tensor {
  return dispatch(S.repeat, self, ints('repeat', 'repeats', repeats));
}

/**
 * torch.nonzero: int64 [n, ndim] indices of the nonzero elements, row-major. The shape depends on
 * the values: eager only (kiln.compile breaks the graph here).
 */
export function nonzero(self: Tensor): Tensor {
  return dispatch(nonzeroOp, self);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    flip(...dims: ShapeArgs): Tensor;
    roll(shifts: number | readonly number[], dims?: number | readonly number[] | null): Tensor;
    repeat(...repeats: ShapeArgs): Tensor;
    nonzero(): Tensor;
  }
}

installMethods({ flip, roll, repeat, nonzero });
