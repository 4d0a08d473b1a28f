/**
 * The iteration layout of one kernel launch, computed from value metadata (shapes, strides,
 * offsets): the same computation the JS program does at run time (operand strides over the
 * kernel's iteration space, outer/row split for reductions, coalescing of dims that are contiguous
 * for every operand), kept here as a pure function so the generator (from traced metadata, in
 * tests and at compile time) and the CUDA program (from real tensors, per call) agree exactly.
 *
 * `kernelSpec` reduces a layout to what is baked into generated source: ranks, dtypes, which
 * operands are addressed by the linear index, which strides are 0 (broadcast) or 1 (innermost,
 * vectorisable), and the index width. Sizes and the remaining strides are kernel arguments, so one
 * compiled kernel serves every size of a symbolic dim that keeps the spec.
 */
import type { DType } from '../../../tensor/dtype.js';
import { broadcastStrides, contiguousStrides } from '../../../tensor/layout.js';
import type { ValueId } from '../../ir.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { coalesce } from '../layout-plan.js';

/** What a kernel needs to know about a value. */
export interface ValueLayout {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Element offset into the storage the pointer refers to. */
  readonly offset: number;
  readonly dtype: DType;
}

export interface OperandLayout {
  readonly value: ValueId;
  readonly dtype: DType;
  readonly out: boolean;
  /** A per-row value of a reduce group (stride 0 over the row dims). */
  readonly rowScalar: boolean;
  /** Element offset of the operand's first element. */
  readonly offset: number;
  /** Elements from the offset to one past the furthest addressed element (for the index width). */
  readonly span: number;
}

export interface KernelLayout {
  readonly kind: 'pointwise' | 'reduce';
  /** Outputs first, then inputs (the group's order). */
  readonly operands: readonly OperandLayout[];
  /** Pointwise: the iteration space; reduce: the outer (one per row) dims. Never empty. */
  readonly oshape: readonly number[];
  readonly ost: readonly (readonly number[])[];
  /** Reduce: the row dims (empty for pointwise). */
  readonly rshape: readonly number[];
  readonly rst: readonly (readonly number[])[];
}

/** Dims ordered outermost-first by `strides` (descending magnitude), stable. */
function orderBy(dims: readonly number[], strides: readonly number[]): number[] {
  return [...dims].sort((a, b) => Math.abs(strides[b]!) - Math.abs(strides[a]!) || a - b);
}

/** The full-size iteration shape of a group under the given metadata. */
export function groupShape(g: KernelGroup, metaOf: (id: ValueId) => ValueLayout): readonly number[] {
  if (g.kind === 'pointwise') return metaOf(g.nodes[0]!.outputs[0]!).shape;
  return metaOf(g.nodes.find((n) => n.kind === 'reduction')!.reduce!.input).shape;
}

function spanOf(shape: readonly number[], strides: readonly number[]): number {
  if (shape.some((s) => s === 0)) return 0;
  let hi = 0;
  shape.forEach((s, d) => (hi += (s - 1) * Math.abs(strides[d]!)));
  return hi + 1;
}

/** The layout of group `g` when its values have the metadata `metaOf` gives. */
export function kernelLayout(g: KernelGroup, metaOf: (id: ValueId) => ValueLayout): KernelLayout {
  const S = groupShape(g, metaOf);
  const rank = S.length;
  const strides: number[][] = [];
  const operands: OperandLayout[] = [];
  for (const o of g.outputs) {
    const m = metaOf(o);
    const rowScalar = g.rowScalars.has(o);
    if (!rowScalar) strides.push([...m.strides]);
    else if (m.shape.length === rank) strides.push(m.strides.map((st, d) => (g.dims.includes(d) || m.shape[d] === 1 ? 0 : st)));
    else {
      // keepdim=false: the output lacks the reduced dims; they get stride 0.
      const st: number[] = [];
      let k = 0;
      for (let d = 0; d < rank; d++) st.push(g.dims.includes(d) ? 0 : m.strides[k++]!);
      strides.push(st);
    }
    operands.push({ value: o, dtype: m.dtype, out: true, rowScalar, offset: m.offset, span: spanOf(m.shape, m.strides) });
  }
  for (const id of g.inputs) {
    const m = metaOf(id);
    strides.push(broadcastStrides(m.shape, m.strides, S));
    operands.push({ value: id, dtype: m.dtype, out: false, rowScalar: false, offset: m.offset, span: spanOf(m.shape, m.strides) });
  }
  const all = Array.from({ length: rank }, (_, d) => d);
  if (g.kind === 'pointwise') {
    const order = orderBy(all, strides[0]!);
    const c = coalesce(
      order.map((d) => S[d]!),
      strides.map((st) => order.map((d) => st[d]!)),
    );
    const empty = S.some((x) => x === 0);
    return { kind: 'pointwise', operands, oshape: empty ? [0] : c.shape, ost: empty ? strides.map(() => [0]) : c.strides, rshape: [], rst: strides.map(() => []) };
  }
  const outer = all.filter((d) => !g.dims.includes(d));
  const ref = strides[g.outputs.length] ?? strides[0]!;
  const row = orderBy([...g.dims], ref);
  const co = coalesce(
    outer.map((d) => S[d]!),
    strides.map((st) => outer.map((d) => st[d]!)),
  );
  const cr = coalesce(
    row.map((d) => S[d]!),
    strides.map((st) => row.map((d) => st[d]!)),
  );
  const emptyRow = row.some((d) => S[d] === 0);
  return { kind: 'reduce', operands, oshape: co.shape, ost: co.strides, rshape: emptyRow ? [0] : cr.shape, rst: emptyRow ? strides.map(() => [0]) : cr.strides };
}

export const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);

// ---------------------------------------------------------------------------------------------

export interface OperandSpec {
  readonly dtype: DType;
  readonly out: boolean;
  readonly rowScalar: boolean;
  /**
   * Pointwise: the element offset equals the linear index over the iteration space (no stride
   * arguments). Reduce: the row offset equals the linear index within the row.
   */
  readonly linear: boolean;
  /** Outer dims (pointwise: all dims) with stride 0. */
  readonly outerZero: readonly boolean[];
  /** Row dims with stride 0 (reduce only). */
  readonly rowZero: readonly boolean[];
  /** The innermost stride (pointwise: of the iteration space; reduce: of the row) is 1. */
  readonly unitInner: boolean;
}

export interface KernelSpec {
  readonly kind: 'pointwise' | 'reduce';
  readonly orank: number;
  readonly rrank: number;
  readonly ops: readonly OperandSpec[];
  /** 64-bit index math (some tensor or the iteration space is too large for int). */
  readonly idx64: boolean;
}

/**
 * Element counts at or above this switch index math to 64 bits. 2^31 less a margin: grid-stride
 * loops compute `i + step` one step past the end, and the step (grid x block x elements per thread)
 * is capped well below 2^26 by the launch geometry (configs.ts), so the sum never overflows int.
 */
export const IDX32_LIMIT = 2 ** 31 - 2 ** 26;

function equal(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export function kernelSpec(L: KernelLayout): KernelSpec {
  const total = prod(L.oshape) * Math.max(1, prod(L.rshape));
  const idx64 = total >= IDX32_LIMIT || L.operands.some((o) => o.offset + o.span >= IDX32_LIMIT);
  const oc = contiguousStrides(L.oshape);
  const rc = contiguousStrides(L.rshape);
  const ops = L.operands.map((o, k): OperandSpec => {
    const os = L.ost[k]!;
    const rs = L.rst[k]!;
    if (L.kind === 'pointwise') {
      return { dtype: o.dtype, out: o.out, rowScalar: false, linear: equal(os, oc), outerZero: os.map((s) => s === 0), rowZero: [], unitInner: os[os.length - 1] === 1 };
    }
    return {
      dtype: o.dtype,
      out: o.out,
      rowScalar: o.rowScalar,
      linear: rs.length > 0 && equal(rs, rc),
      outerZero: os.map((s) => s === 0),
      rowZero: rs.map((s) => s === 0),
      unitInner: rs[rs.length - 1] === 1,
    };
  });
  return { kind: L.kind, orank: L.oshape.length, rrank: L.rshape.length, ops, idx64 };
}

/** A stable string for a spec (the compiled-kernel cache key within a program). */
export function specKey(s: KernelSpec): string {
  const op = (o: OperandSpec): string =>
    `${o.dtype}${o.out ? 'o' : 'i'}${o.rowScalar ? 'r' : ''}${o.linear ? 'L' : ''}${o.unitInner ? 'U' : ''}:${o.outerZero.map((z) => (z ? 0 : 1)).join('')}/${o.rowZero.map((z) => (z ? 0 : 1)).join('')}`;
  return `${s.kind}|${s.orank}|${s.rrank}|${s.idx64 ? 64 : 32}|${s.ops.map(op).join(',')}`;
}
