/**
 * The iteration layout of one fused WGSL launch and its metadata words. Callers give every
 * operand's strides over the group's full iteration shape (0 where an operand is broadcast, and
 * along the reduced dims for a row scalar); dims are then ordered and coalesced as the CUDA
 * generator's layout does (compile/codegen/cuda/layout.ts): a pointwise launch walks its first
 * operand's order, a reduce launch has outer dims (one row each) and row dims (ordered by the
 * first input's strides, unless the row index itself is a result: arg reductions).
 *
 * Ranks are baked into the source (the index arithmetic is unrolled); sizes, strides and offsets
 * are metadata words, so one pipeline serves every size of a rank. Strides are i32 bit patterns
 * added in wrapping u32 arithmetic (correct below 2^32 elements).
 *
 * Pointwise words: [n, size[0..R), then per operand: offset, stride[0..R)].
 * Reduce words: [M, N, osize[0..O), rsize[0..Q), then per operand: offset, ostride[0..O), rstride[0..Q)].
 */
import { coalesceDims as coalesceNonEmpty } from '../../../tensor/layout.js';

export interface FusedLayout {
  readonly kind: 'pointwise' | 'reduce';
  /** Pointwise: the iteration space; reduce: the outer dims. Never empty. */
  readonly oshape: readonly number[];
  readonly ost: readonly (readonly number[])[];
  /** Reduce: the row dims (empty for pointwise). Never empty for reduce. */
  readonly rshape: readonly number[];
  readonly rst: readonly (readonly number[])[];
  readonly offsets: readonly number[];
}

const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);

/**
 * tensor/layout.ts's coalesceDims, except that an empty space becomes [0] (stride 0) here, where
 * tensor's keeps the empty dims apart; nothing left gives [1] (stride 0) in both.
 */
export function coalesceDims(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  if (shape.includes(0)) return { shape: [0], strides: strides.map(() => [0]) };
  return coalesceNonEmpty(shape, strides);
}

/** Dims ordered outermost-first by `strides` (descending magnitude), stable. */
function orderBy(dims: readonly number[], strides: readonly number[]): number[] {
  return [...dims].sort((a, b) => Math.abs(strides[b]!) - Math.abs(strides[a]!) || a - b);
}

export interface LayoutRequest {
  readonly kind: 'pointwise' | 'reduce';
  /** The full iteration shape (a reduce group: its reductions' input shape). */
  readonly shape: readonly number[];
  /** Reduced dims (sorted), reduce only. */
  readonly dims: readonly number[];
  /** Per operand (outputs first), strides over `shape`. */
  readonly strides: readonly (readonly number[])[];
  readonly offsets: readonly number[];
  /** The operand whose strides order the row dims (the first input). */
  readonly rowRef: number;
  /** Keep the row dims in their order (the row index is a result: argmax). */
  readonly keepRowOrder?: boolean;
}

export function fusedLayout(q: LayoutRequest): FusedLayout {
  const all = q.shape.map((_, d) => d);
  if (q.kind === 'pointwise') {
    const order = orderBy(all, q.strides[0]!);
    const c = coalesceDims(
      order.map((d) => q.shape[d]!),
      q.strides.map((st) => order.map((d) => st[d]!)),
    );
    return { kind: 'pointwise', oshape: c.shape, ost: c.strides, rshape: [], rst: q.strides.map(() => []), offsets: q.offsets };
  }
  const outer = all.filter((d) => !q.dims.includes(d));
  const row = q.keepRowOrder ? [...q.dims] : orderBy(q.dims, q.strides[q.rowRef] ?? q.strides[0]!);
  const co = coalesceDims(
    outer.map((d) => q.shape[d]!),
    q.strides.map((st) => outer.map((d) => st[d]!)),
  );
  const cr = coalesceDims(
    row.map((d) => q.shape[d]!),
    q.strides.map((st) => row.map((d) => st[d]!)),
  );
  return { kind: 'reduce', oshape: co.shape, ost: co.strides, rshape: cr.shape, rst: cr.strides, offsets: q.offsets };
}

/** Rows (reduce) or elements (pointwise) of a launch. */
export const layoutRows = (L: FusedLayout): number => prod(L.oshape);
/** Elements per row (reduce). */
export const layoutRowLength = (L: FusedLayout): number => prod(L.rshape);

export function metaWords(L: FusedLayout): Uint32Array {
  const O = L.oshape.length;
  const Q = L.kind === 'reduce' ? L.rshape.length : 0;
  const head = L.kind === 'reduce' ? 2 + O + Q : 1 + O;
  const per = 1 + O + Q;
  const w = new Uint32Array(head + L.offsets.length * per);
  let i = 0;
  w[i++] = layoutRows(L);
  if (L.kind === 'reduce') w[i++] = layoutRowLength(L);
  for (const s of L.oshape) w[i++] = s;
  if (L.kind === 'reduce') for (const s of L.rshape) w[i++] = s;
  L.offsets.forEach((off, k) => {
    w[i++] = off;
    for (const s of L.ost[k]!) w[i++] = s | 0;
    if (L.kind === 'reduce') for (const s of L.rst[k]!) w[i++] = s | 0;
  });
  return w;
}
