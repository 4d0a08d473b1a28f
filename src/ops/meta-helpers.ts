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

/** Meta for an n-ary pointwise op: broadcast shape, preserved layout, given or promoted dtype. */
export function pointwiseMeta(op: string, operands: readonly (TensorMeta | ScalarValue)[], dtype?: DType): OutMeta {
  const tensors = operands.filter(isTensorMeta);
  if (tensors.length === 0) throw new Error(`${op}: expected at least one tensor operand`);
  const shape = broadcastShapes(op, ...tensors.map((t) => t.shape));
  const outDtype = dtype ?? promotedDtype(operands);
  return { shape, strides: pointwiseStrides(shape, operands), dtype: outDtype, device: tensors[0]!.device };
}

export function promotedDtype(operands: readonly (TensorMeta | ScalarValue)[]): DType {
  return resultType(operands.map((o) => (isTensorMeta(o) ? o : (o as number | boolean))) as PromotionOperand[]);
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

