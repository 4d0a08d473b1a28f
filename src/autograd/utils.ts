/** Helpers for backward formulas. */
import { sum } from '../api/reduction.js';
import { reshape } from '../api/views.js';
import { shapeEquals } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';

/** Sums a broadcast gradient back to `shape` (the inverse of broadcasting). */
export function sumToShape(g: Tensor, shape: readonly number[]): Tensor {
  if (shapeEquals(g.shape, shape)) return g;
  const lead = g.ndim - shape.length;
  const dims: number[] = [];
  for (let d = 0; d < g.ndim; d++) {
    if (d < lead || (shape[d - lead] === 1 && g.shape[d] !== 1)) dims.push(d);
  }
  const s = dims.length > 0 ? sum(g, dims, true) : g;
  return reshape(s, [...shape]);
}
