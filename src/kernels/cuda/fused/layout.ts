/**
 * The iteration layout of one fused-group launch from its operands' strides over the group's full
 * shape: a pointwise launch walks its first operand's memory order; a reduce launch has outer dims
 * (one row each, in logical order) and row dims (ordered by a reference operand's strides, the
 * first input, unless the in-row index is itself a result: arg reductions keep logical order).
 * Dims contiguous for every operand are coalesced. The compiler's cuda target
 * (compile/codegen/cuda/layout.ts, from traced metadata) and the eager cuda reductions (from
 * tensors, reduce-run.ts) both build their layouts here, so a group gets the same layout, spec and
 * source either way.
 */
import { coalesceDims } from '../../../tensor/layout.js';
import type { KernelLayout, OperandLayout } from './spec.js';

/** Dims ordered outermost-first by `strides` (descending magnitude), stable. */
function orderBy(dims: readonly number[], strides: readonly number[]): number[] {
  return [...dims].sort((a, b) => Math.abs(strides[b]!) - Math.abs(strides[a]!) || a - b);
}

/** Elements from an operand's first element to one past the furthest it addresses (0 when empty). */
export function spanOf(shape: readonly number[], strides: readonly number[]): number {
  if (shape.some((s) => s === 0)) return 0;
  let hi = 0;
  shape.forEach((s, d) => (hi += (s - 1) * Math.abs(strides[d]!)));
  return hi + 1;
}

export interface LayoutRequest {
  readonly kind: 'pointwise' | 'reduce';
  /** The full iteration shape (a reduce group: its reductions' input shape). */
  readonly shape: readonly number[];
  /** Reduced dims (reduce only). */
  readonly dims: readonly number[];
  /** Per operand (outputs first), strides over `shape`. */
  readonly strides: readonly (readonly number[])[];
  readonly operands: readonly OperandLayout[];
  /** The operand whose strides order the row dims (the first input; absent: operand 0). */
  readonly rowRef: number;
  /** Keep the row dims in logical order (the in-row index is a result: argmax). */
  readonly keepRowOrder?: boolean;
}

export function fusedLayout(q: LayoutRequest): KernelLayout {
  const S = q.shape;
  const { strides, operands } = q;
  const all = Array.from({ length: S.length }, (_, d) => d);
  if (q.kind === 'pointwise') {
    const order = orderBy(all, strides[0]!);
    const c = coalesceDims(
      order.map((d) => S[d]!),
      strides.map((st) => order.map((d) => st[d]!)),
    );
    const empty = S.some((x) => x === 0);
    return { kind: 'pointwise', operands, oshape: empty ? [0] : c.shape, ost: empty ? strides.map(() => [0]) : c.strides, rshape: [], rst: strides.map(() => []) };
  }
  const outer = all.filter((d) => !q.dims.includes(d));
  const row = q.keepRowOrder ? [...q.dims].sort((a, b) => a - b) : orderBy([...q.dims], strides[q.rowRef] ?? strides[0]!);
  const co = coalesceDims(
    outer.map((d) => S[d]!),
    strides.map((st) => outer.map((d) => st[d]!)),
  );
  const cr = coalesceDims(
    row.map((d) => S[d]!),
    strides.map((st) => row.map((d) => st[d]!)),
  );
  const emptyRow = row.some((d) => S[d] === 0);
  return { kind: 'reduce', operands, oshape: co.shape, ost: co.strides, rshape: emptyRow ? [0] : cr.shape, rst: emptyRow ? strides.map(() => [0]) : cr.strides };
}
