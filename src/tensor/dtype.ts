/**
 * Data types and PyTorch's type-promotion rules.
 *
 * float64 exists mainly for references and gradcheck (finite differences need it).
 * Storage is dtype-faithful (float16/bfloat16 as 16-bit words, int64 as 64-bit words) so that the
 * bytes move unchanged between accelerators. CPU kernels compute half types in float32 and int64
 * in float64 (exact for |x| <= 2^53); see kernels/cpu/numeric.ts.
 */

export type DType = 'float32' | 'float64' | 'float16' | 'bfloat16' | 'int32' | 'int64' | 'uint8' | 'bool';

export const DTYPES: readonly DType[] = ['float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'];

export type DTypeCategory = 'bool' | 'integer' | 'floating';

export function isDType(x: unknown): x is DType {
  return typeof x === 'string' && (DTYPES as readonly string[]).includes(x);
}

export function itemSize(dtype: DType): number {
  switch (dtype) {
    case 'float32':
    case 'int32':
      return 4;
    case 'float16':
    case 'bfloat16':
      return 2;
    case 'int64':
    case 'float64':
      return 8;
    case 'uint8':
    case 'bool':
      return 1;
    default:
      return dtype satisfies never;
  }
}

export function category(dtype: DType): DTypeCategory {
  switch (dtype) {
    case 'bool':
      return 'bool';
    case 'uint8':
    case 'int32':
    case 'int64':
      return 'integer';
    case 'float32':
    case 'float64':
    case 'float16':
    case 'bfloat16':
      return 'floating';
    default:
      return dtype satisfies never;
  }
}

export const isFloating = (d: DType): boolean => category(d) === 'floating';
export const isIntegral = (d: DType, includeBool = false): boolean =>
  category(d) === 'integer' || (includeBool && d === 'bool');

const CATEGORY_RANK: Record<DTypeCategory, number> = { bool: 0, integer: 1, floating: 2 };

/** Promotes two dtypes like torch.promote_types. */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  const ca = category(a);
  const cb = category(b);
  if (ca !== cb) return CATEGORY_RANK[ca] > CATEGORY_RANK[cb] ? a : b;
  if (ca === 'floating') {
    // The wider wins; float16 with bfloat16 meets in float32, as in PyTorch.
    if (a === 'float64' || b === 'float64') return 'float64';
    return 'float32';
  }
  // Integers: the wider wins; uint8 with a signed type goes to the signed type.
  const order: DType[] = ['uint8', 'int32', 'int64'];
  return order.indexOf(a) > order.indexOf(b) ? a : b;
}

/** The default dtype for floating results (torch.get_default_dtype()). */
export const DEFAULT_FLOAT: DType = 'float32';

/** One operand of type promotion: a tensor (with rank) or a JS scalar. */
export type PromotionOperand = { dtype: DType; shape: readonly number[] } | number | boolean;

function scalarCategory(x: number | boolean): DTypeCategory {
  if (typeof x === 'boolean') return 'bool';
  return Number.isInteger(x) ? 'integer' : 'floating';
}

/**
 * torch.result_type over tensors and scalars: dimensioned tensors outrank zero-dim tensors, which
 * outrank scalars, but only within the highest category present (so int tensor + 2.5 -> float32,
 * float16 tensor + float32 zero-dim tensor -> float16).
 */
export function resultType(operands: readonly PromotionOperand[]): DType {
  let dimT: DType | undefined;
  let zeroT: DType | undefined;
  let scalarCat: DTypeCategory | undefined;
  for (const op of operands) {
    if (typeof op === 'number' || typeof op === 'boolean') {
      const c = scalarCategory(op);
      if (scalarCat === undefined || CATEGORY_RANK[c] > CATEGORY_RANK[scalarCat]) scalarCat = c;
    } else if (op.shape.length > 0) {
      dimT = dimT === undefined ? op.dtype : promoteTypes(dimT, op.dtype);
    } else {
      zeroT = zeroT === undefined ? op.dtype : promoteTypes(zeroT, op.dtype);
    }
  }
  let result = dimT;
  // A zero-dim tensor of a higher category lifts the result to its own dtype (torch semantics).
  if (zeroT !== undefined && (result === undefined || CATEGORY_RANK[category(zeroT)] > CATEGORY_RANK[category(result)])) {
    result = zeroT;
  }
  if (scalarCat !== undefined) {
    const scalarDefault: DType = scalarCat === 'floating' ? DEFAULT_FLOAT : scalarCat === 'integer' ? 'int64' : 'bool';
    if (result === undefined) result = scalarDefault;
    else if (CATEGORY_RANK[scalarCat] > CATEGORY_RANK[category(result)]) result = scalarDefault;
  }
  return result ?? DEFAULT_FLOAT;
}

/** Result dtype of ops that always produce floats (e.g. true division, sqrt of ints). */
export function toFloating(d: DType): DType {
  return isFloating(d) ? d : DEFAULT_FLOAT;
}

/** Whether a value of dtype `from` may be stored into `to` without a silent category downcast. */
export function canCast(from: DType, to: DType): boolean {
  return CATEGORY_RANK[category(from)] <= CATEGORY_RANK[category(to)];
}
