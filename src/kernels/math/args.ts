/**
 * How a pointwise math template sees a node's positional arguments, for every language table: a
 * value (a text expression of the value's dtype: an identifier or a literal, so a template may
 * repeat it) or a constant (a scalar, a mode string, null for an absent optional). Plus the helpers
 * every text table shares: PyTorch's promoted dtype of the operands, a constant as a number, and
 * whether an optional argument is absent.
 */
import type { DType } from '../../tensor/dtype.js';
import { resultType, type PromotionOperand } from '../../tensor/dtype.js';

export type MathArg =
  | { readonly kind: 'value'; readonly expr: string; readonly dtype: DType; readonly shape: readonly number[] }
  | { readonly kind: 'const'; readonly value: unknown };

function promotionOperand(a: MathArg): PromotionOperand | undefined {
  if (a.kind === 'value') return { dtype: a.dtype, shape: a.shape };
  if (typeof a.value === 'number' || typeof a.value === 'boolean') return a.value;
  return undefined;
}

/** The promoted dtype of the operands (as TensorIterator's common dtype). */
export function promoted(args: readonly MathArg[]): DType {
  return resultType(args.map(promotionOperand).filter((x): x is PromotionOperand => x !== undefined));
}

/** A numeric (or boolean) constant argument as a number, else null. */
export function num(a: MathArg | undefined): number | null {
  if (!a || a.kind !== 'const') return null;
  if (typeof a.value === 'number') return a.value;
  if (typeof a.value === 'boolean') return a.value ? 1 : 0;
  return null;
}

/** An optional argument left out (absent, null or undefined). */
export const isNone = (a: MathArg | undefined): boolean => !a || (a.kind === 'const' && (a.value === null || a.value === undefined));
