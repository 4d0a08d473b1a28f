/** rot(x) of llm.applyRotaryEmb as core ops (its reference composition and its backward use it). */
import { cat, stack } from './indexing.js';
import { mul } from './pointwise.js';
import { narrow, reshape, slice } from './views.js';
import type { Tensor } from '../tensor/tensor.js';

/** Rotate-half (neox: [-x2, x1]) or interleaved pairs (gpt-j: (-x[2j+1], x[2j])) along the last dim. */
export function rotateLast(x: Tensor, isNeox: boolean): Tensor {
  const d = x.shape[x.ndim - 1]!;
  const h = d / 2;
  if (isNeox) return cat([mul(narrow(x, -1, h, h), -1), narrow(x, -1, 0, h)], -1);
  const even = slice(x, -1, 0, d, 2);
  const odd = slice(x, -1, 1, d, 2);
  return reshape(stack([mul(odd, -1), even], -1), [...x.shape]);
}
