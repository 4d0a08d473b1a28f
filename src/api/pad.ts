/**
 * torch.nn.functional.pad as a composition of differentiable ops (narrow, flip, expand, cat,
 * full), in the manner of torch's CompositeImplicitAutograd: autograd, kiln.compile and every
 * device get it through the ops it is made of. `pad` lists (left, right) pairs starting from the
 * last dim, as torch: [l_last, r_last, l_prev, r_prev, ...]. Modes: 'constant' (negative
 * amounts crop), 'reflect' (mirror without repeating the edge; each amount < the dim's size),
 * 'replicate' (repeat the edge) and 'circular' (wrap around; each amount <= the dim's size).
 */
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import type { ScalarValue } from '../ops/schema.js';
import { clone } from './core.js';
import { full } from './creation.js';
import { cat } from './indexing.js';
import { flip } from './shape-extra.js';
import { expand, narrow } from './views.js';

export type PadMode = 'constant' | 'reflect' | 'replicate' | 'circular';

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

/** Pads (or, constant mode with negative amounts, crops) one dim. */
function padDim(x: Tensor, d: number, l: number, r: number, mode: PadMode, value: ScalarValue, input: Tensor): Tensor {
  const n = x.shape[d]!;
  if (mode === 'constant') {
    // Negative amounts crop first; torch rejects a result with a negative size.
    const keepL = Math.max(0, -l);
    const keepR = Math.max(0, -r);
    if (n - keepL - keepR + Math.max(0, l) + Math.max(0, r) < 0 || n - keepL - keepR < 0) {
      throw new RangeError(`pad: padding (${l}, ${r}) of dim ${d} gives a negative size for input ${describe(input)}`);
    }
    let y = keepL > 0 || keepR > 0 ? narrow(x, d, keepL, n - keepL - keepR) : x;
    const pieces: Tensor[] = [];
    const block = (k: number): Tensor => {
      const shape = [...y.shape];
      shape[d] = k;
      return full(shape, value, { dtype: x.dtype, device: x.device });
    };
    if (l > 0) pieces.push(block(l));
    pieces.push(y);
    if (r > 0) pieces.push(block(r));
    if (pieces.length > 1) y = cat(pieces, d);
    return y;
  }
  if (l < 0 || r < 0) throw new RangeError(`pad: ${mode} padding must be non-negative, got (${l}, ${r}) for dim ${d} of input ${describe(input)}`);
  if (l === 0 && r === 0) return x;
  const pieces: Tensor[] = [];
  if (mode === 'reflect') {
    if (l >= n || r >= n) {
      throw new RangeError(`pad: padding (${l}, ${r}) should be less than the size ${n} of dim ${d} in reflect mode (input ${describe(input)})`);
    }
    if (l > 0) pieces.push(flip(narrow(x, d, 1, l), [d]));
    pieces.push(x);
    if (r > 0) pieces.push(flip(narrow(x, d, n - 1 - r, r), [d]));
  } else if (mode === 'replicate') {
    if (n === 0) throw new RangeError(`pad: replicate mode needs a non-empty dim ${d} (input ${describe(input)})`);
    const edge = (start: number, k: number): Tensor => {
      const shape = [...x.shape];
      shape[d] = k;
      return expand(narrow(x, d, start, 1), shape);
    };
    if (l > 0) pieces.push(edge(0, l));
    pieces.push(x);
    if (r > 0) pieces.push(edge(n - 1, r));
  } else {
    if (l > n || r > n) throw new RangeError(`pad: padding (${l}, ${r}) should be at most the size ${n} of dim ${d} in circular mode (input ${describe(input)})`);
    if (l > 0) pieces.push(narrow(x, d, n - l, l));
    pieces.push(x);
    if (r > 0) pieces.push(narrow(x, d, 0, r));
  }
  return cat(pieces, d);
}

/** torch.nn.functional.pad(input, pad, mode = 'constant', value = 0). */
export function pad(input: Tensor, padding: readonly number[], mode: PadMode = 'constant', value: ScalarValue | null = null): Tensor {
  if (!Array.isArray(padding) || !padding.every((p) => typeof p === 'number' && Number.isInteger(p))) {
    throw new TypeError(`pad: argument 'pad' must be an array of integers, got ${String(padding)}`);
  }
  if (padding.length % 2 !== 0) throw new Error(`pad: padding length must be divisible by 2, got [${padding.join(', ')}]`);
  if (padding.length / 2 > input.ndim) {
    throw new Error(`pad: padding length ${padding.length} ([${padding.join(', ')}]) is too large for input ${describe(input)}: at most 2 per dimension`);
  }
  if (mode !== 'constant' && mode !== 'reflect' && mode !== 'replicate' && mode !== 'circular') {
    throw new Error(`pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '${String(mode)}'`);
  }
  if (mode !== 'constant' && value !== null && value !== 0) throw new Error(`pad: padding mode '${mode}' doesn't take in value argument (got ${value})`);
  let x = input;
  for (let i = 0; i < padding.length / 2; i++) {
    x = padDim(x, input.ndim - 1 - i, padding[2 * i]!, padding[2 * i + 1]!, mode, value ?? 0, input);
  }
  // A result that is the input itself (all-zero padding) is still a new tensor, as torch's.
  return x === input ? clone(input) : x;
}
