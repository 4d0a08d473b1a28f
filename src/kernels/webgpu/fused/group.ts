/**
 * What the WGSL renderer (render.ts) takes: a fused group of pointwise nodes and reductions over
 * one iteration space, described without the compiler's types, so that the webgpu eager kernels
 * (one-node programs: a sum, a softmax's row kernel) and the webgpu compile target (a scheduled
 * kernel group, compile/codegen/wgsl/) hand the same renderer the same kind of object. The
 * compiler's KernelGroup maps onto it one to one (compile/codegen/wgsl/group.ts).
 *
 * Operands are the group's outputs, then its inputs (the compiler's order). A reduce group
 * iterates rows (the outer dims) and, within a row, the reduced dims; values computed once per row
 * (reductions and pointwise ops on them) are its row scalars, as in the compiler's scheduler.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { WgslFastMath } from '../../math/wgsl-libm/fast.js';

export type FusedReduceKind = 'sum' | 'mean' | 'prod' | 'amax' | 'amin' | 'argmax' | 'argmin';

export type FusedArg = { readonly kind: 'value'; readonly id: number } | { readonly kind: 'const'; readonly value: unknown };

export interface FusedNode {
  readonly kind: 'pointwise' | 'reduction';
  /** Pointwise: the WGSL math table's entry (kernels/math/wgsl.ts); reduction: its kind. */
  readonly op: string;
  /** Pointwise: the entry's positional arguments. */
  readonly args: readonly FusedArg[];
  /** The value it computes; an arg reduction also its index (outputs[1], int64 or int32). */
  readonly outputs: readonly number[];
  /** Reductions: what is reduced, over the group's reduced dims. */
  readonly reduce?: { readonly kind: FusedReduceKind; readonly input: number };
  /** Pointwise: a conversion (toDtype, clone), which rounds to its dtype like a store. */
  readonly cast?: boolean;
  /**
   * Pointwise: the element's expression, already rendered by the WGSL math table over v<id> of the
   * value args (the eager kernels render their op's entry over their own arguments); else the
   * renderer renders `op`'s entry.
   */
  readonly expr?: string;
}

export interface FusedValue {
  readonly dtype: DType;
  readonly shape: readonly number[];
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
   * Fast float math in this form (wgsl-libm/fast.ts): set by the compile target from
   * KILN_WEBGPU_FAST_MATH, never by the eager kernels, whose groups keep the library's exact forms.
   */
  readonly fastMath?: WgslFastMath;
  /**
   * Pointwise groups: NaN checks may move from the fast functions to the stores (nan-hoist.ts;
   * KILN_WEBGPU_NAN_HOIST, set by the compile target with fastMath).
   */
  readonly nanHoist?: boolean;
}

/** A stable text of a group's structure (with its operand dtypes): half of a pipeline's memo key. */
export function groupKey(g: FusedGroup): string {
  // A 0-d operand promotes differently from a dimensioned one (the tables' promoted()).
  const arg = (a: FusedArg): string => (a.kind === 'value' ? `%${a.id}${g.value(a.id).shape.length === 0 ? 's' : ''}` : (JSON.stringify(a.value) ?? 'u'));
  const nodes = g.nodes.map((n) => `${n.outputs.join('/')}=${n.kind === 'reduction' ? `${n.reduce!.kind}(%${n.reduce!.input})` : `${n.op}${n.cast ? '!' : ''}(${n.args.map(arg).join(',')})${n.expr !== undefined ? `{${n.expr}}` : ''}`}:${g.value(n.outputs[0]!).dtype}`);
  return `${g.kind}|${nodes.join(';')}|r${[...g.rowScalars].join(',')}|i${g.inputs.map((id) => `${id}:${g.value(id).dtype}`).join(',')}|o${g.outputs.join(',')}${g.fastMath ? `|f${g.fastMath}` : ''}${g.nanHoist ? '|nh' : ''}`;
}
