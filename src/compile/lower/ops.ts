/**
 * The compiler's view of pointwise math: the JavaScript expression table (kernels/math/js.ts, shared
 * with the eager CPU kernels) under the name the lowering and the JS emitter use, which ops are
 * casts, and how a value is rounded to its dtype inside a fused JS kernel.
 */
import type { DType } from '../../tensor/dtype.js';

export { JS_TEMPLATES as TEMPLATES, lit, type TArg, type TemplateCtx } from '../../kernels/math/js.js';

/** Ops whose result is a conversion (a cast rounds to its target dtype like a store would). */
export const CAST_OPS: ReadonlySet<string> = new Set(['toDtype', 'clone']);

/**
 * Ops whose result jumps where their operand crosses a threshold (comparisons, logical ops,
 * rounding, the tests for infinity, sign, remainder, casts; div with a rounding mode, which
 * emit.ts checks for itself). Their float operands computed
 * inside a fused kernel are rounded to their own dtype first: an intermediate kept in a JS double
 * (roundExpr) differs from the value eager mode stored by less than an ulp, harmless for continuous
 * math but enough to flip these. softmax's exp(-383) is 1e-166 as a double and 0 in float32, so a
 * fused logicalNot(softmax(x)) said False where eager and torch say True (fuzz case 1845).
 */
export const ROUNDED_OPERAND_OPS: ReadonlySet<string> = new Set([
  'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logicalAnd', 'logicalOr', 'logicalXor', 'logicalNot',
  'isinf', 'isfinite', 'sign', 'floor', 'ceil', 'round', 'trunc', 'remainder', ...CAST_OPS,
]);

/**
 * Rounds an expression's value the way the node's output dtype holds it inside a fused kernel.
 * Floating intermediates stay in the JS double they were computed in (at least float32's opmath,
 * as Inductor keeps them in registers); only explicit casts round (to float32 or a half) and the
 * store into the output array rounds to its dtype. Rounding every intermediate with Math.fround
 * cost about a third of the elementwise workload's kernel time (103 vs 67 ms per 1M elements) for
 * results that are, if anything, more accurate. Integer results wrap as their stores do.
 * `v` must be an identifier (it may be repeated).
 */
export function roundExpr(v: string, dtype: DType, isCast: boolean): string {
  switch (dtype) {
    case 'float32':
      return isCast ? `Math.fround(${v})` : v;
    case 'float16':
      return isCast ? `H.f16(${v})` : v;
    case 'bfloat16':
      return isCast ? `H.bf16(${v})` : v;
    case 'float64':
      return v;
    case 'int32':
      return `(${v} | 0)`;
    case 'uint8':
      return `(${v} & 255)`;
    case 'int64':
      return isCast ? `(Number.isFinite(${v}) ? Math.trunc(${v}) : 0)` : v;
    case 'bool':
      return isCast ? `(${v} !== 0 && ${v} === ${v} ? 1 : 0)` : v;
    default:
      return dtype satisfies never;
  }
}
