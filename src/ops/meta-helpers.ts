/** Shared building blocks for meta functions: pointwise layouts and argument checks. */
import type { DType, PromotionOperand } from '../tensor/dtype.js';
import { resultType } from '../tensor/dtype.js';
import { broadcastShapes, contiguousStrides, fmtShape, preservedStrides, shapeEquals } from '../tensor/layout.js';
import type { TensorMeta } from '../tensor/tensor.js';
import type { OutMeta, ScalarValue } from './schema.js';

export function isTensorMeta(x: unknown): x is TensorMeta {
  return typeof x === 'object' && x !== null && 'shape' in x && 'strides' in x && 'dtype' in x && 'device' in x;
}

export function describe(t: TensorMeta): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

/**
 * Output layout for a pointwise op over broadcast operands, following PyTorch's TensorIterator:
 * the output takes the dimension order of the first tensor operand that has the full output shape
 * and no broadcast dims (so channels_last and transposed inputs give outputs of the same layout);
 * with no such operand it is contiguous.
 */
export function pointwiseStrides(shape: readonly number[], operands: readonly (TensorMeta | ScalarValue)[]): number[] {
  for (const o of operands) {
    if (!isTensorMeta(o) || !shapeEquals(o.shape, shape)) continue;
    if (o.strides.some((s, i) => s === 0 && o.shape[i]! > 1)) continue;
    return preservedStrides(shape, o.shape, o.strides);
  }
  return contiguousStrides(shape);
}

/**
 * The first tensor operand when every tensor operand has its shape and exactly row-major strides
 * (scalars aside): the common eager call. The general path below gives that very shape and those
 * strides for it (preservedStrides of a row-major reference is row-major), so they are returned as
 * they are, without broadcasting or layout work (about 1.4 us of a 10 us cuda eager op). Only
 * frozen arrays (a Tensor's) are shared with the output.
 */
function sameRowMajorOperands(operands: readonly (TensorMeta | ScalarValue)[]): TensorMeta | undefined {
  let first: TensorMeta | undefined;
  for (const o of operands) {
    if (!isTensorMeta(o)) continue;
    if (!first) {
      first = o;
      const { shape, strides } = o;
      if (!Object.isFrozen(shape) || !Object.isFrozen(strides) || strides.length !== shape.length) return undefined;
      let acc = 1;
      for (let i = shape.length - 1; i >= 0; i--) {
        if (strides[i] !== acc) return undefined;
        acc *= Math.max(shape[i]!, 1);
      }
      continue;
    }
    if (o.shape !== first.shape && !shapeEquals(o.shape, first.shape)) return undefined;
    if (o.strides !== first.strides && !shapeEquals(o.strides, first.strides)) return undefined;
  }
  return first;
}

/** Meta for an n-ary pointwise op: broadcast shape, preserved layout, given or promoted dtype. */
export function pointwiseMeta(op: string, operands: readonly (TensorMeta | ScalarValue)[], dtype?: DType): OutMeta {
  const same = sameRowMajorOperands(operands);
  if (same) return { shape: same.shape, strides: same.strides, dtype: dtype ?? promotedDtype(operands), device: same.device };
  const tensors = operands.filter(isTensorMeta);
  if (tensors.length === 0) throw new Error(`${op}: expected at least one tensor operand`);
  const shape = broadcastShapes(op, ...tensors.map((t) => t.shape));
  const outDtype = dtype ?? promotedDtype(operands);
  return { shape, strides: pointwiseStrides(shape, operands), dtype: outDtype, device: tensors[0]!.device };
}

export function promotedDtype(operands: readonly (TensorMeta | ScalarValue)[]): DType {
  // Tensor metas and host scalars are already promotion operands (no copy: this runs on every op).
  return resultType(operands as readonly PromotionOperand[]);
}

export function checkTensor(op: string, name: string, x: unknown): asserts x is TensorMeta {
  if (!isTensorMeta(x)) throw new TypeError(`${op}: argument '${name}' must be a Tensor, got ${typeof x}`);
}

export function checkInt(op: string, name: string, v: unknown, min = -Infinity): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new TypeError(`${op}: argument '${name}' must be an integer${min > -Infinity ? ` >= ${min}` : ''}, got ${String(v)}`);
  }
  return v;
}

