/**
 * Flatten and Unflatten (torch.nn.Flatten / Unflatten): shape-only modules over the flatten and
 * unflatten views. Flatten's defaults (startDim 1) keep the batch dim, as PyTorch's do, so that a
 * Sequential can go from conv feature maps to a Linear.
 */
import { flatten, unflatten } from '../../api/views.js';
import { fmtShape } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { Module } from '../module.js';

/** Merges dims startDim..endDim into one (a view when the layout allows, else a copy). */
export class Flatten extends Module {
  constructor(
    readonly startDim = 1,
    readonly endDim = -1,
  ) {
    super();
    if (!Number.isInteger(startDim) || !Number.isInteger(endDim)) throw new Error(`nn.Flatten: startDim and endDim must be integers, got ${startDim} and ${endDim}`);
  }

  forward(x: Tensor): Tensor {
    return flatten(x, this.startDim, this.endDim);
  }
}

/** Splits dim `dim` into `unflattenedSize` (whose product must equal that dim's size; one entry may be -1). */
export class Unflatten extends Module {
  readonly unflattenedSize: readonly number[];

  constructor(
    readonly dim: number,
    unflattenedSize: readonly number[],
  ) {
    super();
    if (!Number.isInteger(dim)) throw new Error(`nn.Unflatten: dim must be an integer, got ${dim}`);
    if (!Array.isArray(unflattenedSize) || unflattenedSize.length === 0 || !unflattenedSize.every((s) => Number.isInteger(s))) {
      throw new Error(`nn.Unflatten: unflattenedSize must be a non-empty list of integers, got ${JSON.stringify(unflattenedSize)}`);
    }
    this.unflattenedSize = [...unflattenedSize];
  }

  forward(x: Tensor): Tensor {
    const d = this.dim < 0 ? this.dim + x.ndim : this.dim;
    if (d < 0 || d >= x.ndim) throw new Error(`nn.Unflatten: dim ${this.dim} is out of range for input ${fmtShape(x.shape)} ${x.dtype}`);
    return unflatten(x, this.dim, this.unflattenedSize);
  }
}
