/**
 * What the CUDA C renderer of fused groups (body.ts, emit-pointwise.ts, emit-reduce.ts) takes: a
 * group of pointwise nodes and reductions over one iteration space, described without the
 * compiler's types, so that the compiler's cuda target (a scheduled kernel group, mapped one to one
 * by compile/codegen/cuda/group.ts), the eager cuda pointwise kernels (one-node programs,
 * kernels/cuda/codegen/pointwise.ts) and the eager cuda reductions (kernels/cuda/reduce-run.ts)
 * hand the same renderer the same kind of object.
 *
 * Operands are the group's outputs, then its inputs (the compiler's order). A reduce group
 * iterates rows (the outer dims) and, within a row, the reduced dims; values computed once per row
 * (reductions and pointwise ops on them) are its row scalars, as in the compiler's scheduler.
 */
import type { DType } from '../../../tensor/dtype.js';

/**
 * argmax / argmin (eager max/min with a dim and argmax/argmin only; the compiler schedules none):
 * a node with two outputs, the extreme value and its int64 index within the row (the row's linear
 * index in logical order of the reduced dims; NaN counts as the extreme; the first among equals).
 */
export type FusedReduceKind = 'sum' | 'mean' | 'prod' | 'amax' | 'amin' | 'argmax' | 'argmin';

/** A positional argument of a pointwise node: a value of the group, or a constant (null: none). */
export type FusedArg = { readonly kind: 'value'; readonly id: number } | { readonly kind: 'const'; readonly value: unknown };

/**
 * A node whose element expression is written by the caller (an eager kernel's op), over operands
 * named a, b, c and parameters s0, s1, ... of one compute type, instead of rendered from the math
 * table: the renderer binds the names in a scope of their own and stores the result as `store`
 * gives it, so the eager kernels keep their exact text and conversions.
 */
export interface FusedExprNode {
  /** C expression over a, b, c (the node's value args, in order) and s0.. (the group's params). */
  readonly expr: string;
  /** The C type a, b, c and s0.. are bound in. */
  readonly ct: 'float' | 'double' | 'int' | 'long long';
  /** Per value arg: a dtype to round it through after conversion (a 0-d operand of another dtype). */
  readonly roundThrough?: readonly (DType | undefined)[];
  /** The expression as stored: `expr` converted to the output's storage type. */
  readonly store: (expr: string) => string;
}

export interface FusedNode {
  readonly kind: 'pointwise' | 'reduction';
  /** Pointwise: the CUDA math table's entry (kernels/math/cuda.ts); reduction: its kind. */
  readonly op: string;
  /** Pointwise: the entry's positional arguments. */
  readonly args: readonly FusedArg[];
  /** Every value the node reads (its value args, list members included), in order. */
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  /** Reductions: what is reduced, over the group's reduced dims. */
  readonly reduce?: { readonly kind: FusedReduceKind; readonly input: number };
  /** Pointwise: a conversion (toDtype, clone), which rounds to its dtype like a store. */
  readonly cast?: boolean;
  /** Pointwise: the caller's own expression (its value is then held in the output's storage form). */
  readonly expr?: FusedExprNode;
}

export interface FusedValue {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /**
   * An input passed by value, not by pointer: a `double` kernel parameter converted once to the
   * compute type of `dtype` (an eager op's host scalar).
   */
  readonly byValue?: boolean;
}

export interface FusedGroup {
  readonly kind: 'pointwise' | 'reduce';
  /** In program order. */
  readonly nodes: readonly FusedNode[];
  readonly rowScalars: ReadonlySet<number>;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly value: (id: number) => FusedValue;
  /**
   * Scalar parameters s0.. (`double` kernel parameters after the operands, converted once to
   * `ct`) that FusedExprNode expressions read.
   */
  readonly params?: { readonly count: number; readonly ct: 'float' | 'double' | 'int' | 'long long' };
  /**
   * Math-table nodes render without the compiler's fast float math (libdevice expf/tanhf instead of
   * ex2.approx): the eager kernels' contract (kernels/math/cuda.ts CTemplateCtx.fast).
   */
  readonly exactMath?: boolean;
}
