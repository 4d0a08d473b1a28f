/**
 * Data-movement ops that are not views: flip, roll and repeat (torch.flip, torch.roll,
 * Tensor.repeat). Each output element is one input element, picked per dim by an index map, so
 * every dtype is supported and the outputs are contiguous (as torch's). The maps are shared with
 * the cpu kernel (kernels/cpu/shape-extra.ts); other devices and the compiler use the
 * decompositions in ops/decompositions-shape.ts.
 */
import { contiguousStrides, fmtShape, normalizeDim } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkTensor, describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';

function intList(op: string, name: string, v: unknown): number[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isInteger(x))) {
    throw new TypeError(`${op}: argument '${name}' must be an array of integers, got ${Array.isArray(v) ? `[${v.join(', ')}]` : String(v)}`);
  }
  return v as number[];
}

/** Normalised dims, rejecting repeats (torch: "dim 0 appears multiple times"). */
export function uniqueDims(op: string, dims: readonly number[], rank: number, argName = 'dims'): number[] {
  const out = dims.map((d) => normalizeDim(op, d, rank, argName));
  const seen = new Set<number>();
  for (const d of out) {
    if (seen.has(d)) throw new Error(`${op}: dim ${d} appears multiple times in '${argName}' [${dims.join(', ')}]`);
    seen.add(d);
  }
  return out;
}

function dense(self: TensorMeta, shape: readonly number[]): OutMeta {
  return { shape: [...shape], strides: contiguousStrides(shape), dtype: self.dtype, device: self.device };
}

export const flip = defineOp({
  name: 'flip',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dims', type: 'int[]' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, dims: readonly number[]): OutMeta {
    checkTensor('flip', 'self', self);
    uniqueDims('flip', intList('flip', 'dims', dims), self.shape.length);
    return dense(self, self.shape);
  },
});

/** roll's (dim, shift) pairs: dims null flattens (one pair over the flat tensor, dim -1). */
export function rollPairs(self: TensorMeta, shifts: readonly number[], dims: readonly number[] | null): [number, number][] {
  intList('roll', 'shifts', shifts);
  if (dims === null) {
    if (shifts.length !== 1) throw new Error(`roll: without 'dims' exactly one shift is allowed, got shifts [${shifts.join(', ')}] for ${describe(self)}`);
    return [[-1, shifts[0]!]];
  }
  intList('roll', 'dims', dims);
  if (shifts.length !== dims.length) {
    throw new Error(`roll: 'shifts' [${shifts.join(', ')}] and 'dims' [${dims.join(', ')}] must have the same length (input ${describe(self)})`);
  }
  return dims.map((d, i) => [normalizeDim('roll', d, self.shape.length), shifts[i]!]);
}

export const roll = defineOp({
  name: 'roll',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'shifts', type: 'int[]' },
    { name: 'dims', type: 'int[]?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, shifts: readonly number[], dims: readonly number[] | null): OutMeta {
    checkTensor('roll', 'self', self);
    rollPairs(self, shifts, dims);
    return dense(self, self.shape);
  },
});

/** repeat's output shape: the input's shape left-padded with 1s to the repeats' length, times them. */
export function repeatShape(self: TensorMeta, repeats: readonly number[]): number[] {
  intList('repeat', 'repeats', repeats);
  if (repeats.length < self.shape.length) {
    throw new Error(`repeat: number of repeat dims (${repeats.length}, [${repeats.join(', ')}]) can not be smaller than the number of dims of the tensor (${self.shape.length}, ${fmtShape(self.shape)})`);
  }
  if (repeats.some((r) => r < 0)) throw new RangeError(`repeat: repeats [${repeats.join(', ')}] must be non-negative (input ${describe(self)})`);
  const lead = repeats.length - self.shape.length;
  return repeats.map((r, i) => r * (i < lead ? 1 : self.shape[i - lead]!));
}

export const repeat = defineOp({
  name: 'repeat',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'repeats', type: 'int[]' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, repeats: readonly number[]): OutMeta {
    checkTensor('repeat', 'self', self);
    return dense(self, repeatShape(self, repeats));
  },
});
