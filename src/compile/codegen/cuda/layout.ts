/**
 * The iteration layout of one kernel launch, computed from value metadata (shapes, strides,
 * offsets): the same computation the JS program does at run time (operand strides over the
 * kernel's iteration space, outer/row split for reductions, coalescing of dims that are contiguous
 * for every operand), kept here as a pure function so the generator (from traced metadata, in
 * tests and at compile time) and the CUDA program (from real tensors, per call) agree exactly.
 *
 * The layout and spec types, and `kernelSpec` (what of a layout is baked into generated source),
 * live with the renderer in kernels/cuda/fused/spec.ts; they are re-exported here.
 */
import type { DType } from '../../../tensor/dtype.js';
import { broadcastStrides } from '../../../tensor/layout.js';
import type { ValueId } from '../../ir.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { coalesce } from '../layout-plan.js';
import type { KernelLayout, OperandLayout } from '../../../kernels/cuda/fused/spec.js';

export { IDX32_LIMIT, type KernelLayout, type KernelSpec, kernelSpec, type OperandLayout, type OperandSpec, prod, specKey } from '../../../kernels/cuda/fused/spec.js';

/** What a kernel needs to know about a value. */
export interface ValueLayout {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Element offset into the storage the pointer refers to. */
  readonly offset: number;
  readonly dtype: DType;
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

