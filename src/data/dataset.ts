/**
 * Datasets (torch.utils.data.Dataset): anything with a length and an item getter. An item may be a
 * Promise (a file read, a decode) for the DataLoader's async iteration; the sync iterator needs
 * plain values. `getBatch` is the optional batched read (torch's __getitems__): TensorDataset
 * implements it with one indexSelect per tensor instead of one select + stack per item.
 */
import { tensor } from '../api/data.js';
import { indexSelect } from '../api/indexing.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';

/** A map-style dataset: items 0..length-1. */
export interface Dataset<T> {
  readonly length: number;
  get(index: number): T | Promise<T>;
  /** Items at `indices`, already collated into one batch (used instead of get + collate when present and no collateFn is given). */
  getBatch?(indices: readonly number[]): T | Promise<T>;
}

/** Rows of equally long tensors: item i is [t0[i], t1[i], ...] (torch.utils.data.TensorDataset). */
export class TensorDataset implements Dataset<Tensor[]> {
  readonly tensors: readonly Tensor[];

  constructor(...tensors: Tensor[]) {
    if (tensors.length === 0) throw new Error('TensorDataset: needs at least one tensor');
    tensors.forEach((t, i) => {
      if (!(t instanceof Tensor)) throw new TypeError(`TensorDataset: argument ${i} is not a Tensor`);
      if (t.ndim === 0) throw new Error(`TensorDataset: tensor ${i} is 0-dim; every tensor needs a first (sample) dim`);
    });
    const n = tensors[0]!.shape[0]!;
    const bad = tensors.findIndex((t) => t.shape[0] !== n);
    if (bad >= 0) {
      throw new Error(`TensorDataset: size mismatch between tensors: tensor 0 ${fmtShape(tensors[0]!.shape)} ${tensors[0]!.dtype} has ${n} samples, tensor ${bad} ${fmtShape(tensors[bad]!.shape)} ${tensors[bad]!.dtype} has ${tensors[bad]!.shape[0]}`);
    }
    this.tensors = tensors;
  }

  get length(): number {
    return this.tensors[0]!.shape[0]!;
  }

  get(index: number): Tensor[] {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) throw new RangeError(`TensorDataset: index ${index} is out of range for ${this.length} samples`);
    return this.tensors.map((t) => t.select(0, index));
  }

  getBatch(indices: readonly number[]): Tensor[] {
    for (const i of indices) if (!Number.isInteger(i) || i < 0 || i >= this.length) throw new RangeError(`TensorDataset: index ${i} is out of range for ${this.length} samples`);
    return this.tensors.map((t) => {
      const idx = tensor(indices, { dtype: 'int64', device: t.device });
      try {
        return indexSelect(t, 0, idx);
      } finally {
        idx.dispose();
      }
    });
  }
}
