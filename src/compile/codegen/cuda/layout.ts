/**
 * The iteration layout of one kernel launch, computed from value metadata (shapes, strides,
 * offsets): the same computation the JS program does at run time (operand strides over the
 * kernel's iteration space, outer/row split for reductions, coalescing of dims that are contiguous
 * for every operand), kept here as a pure function so the generator (from traced metadata, in
 * tests and at compile time) and the CUDA program (from real tensors, per call) agree exactly.
 *
 * The layout and spec types, and `kernelSpec` (what of a layout is baked into generated source),
 * live with the renderer in kernels/cuda/fused/spec.ts; they are re-exported here. The ordering and
 * coalescing of dims is kernels/cuda/fused/layout.ts's, which the eager cuda reductions use too.
 */
import type { DType } from '../../../tensor/dtype.js';
import { broadcastStrides, rowStrides } from '../../../tensor/layout.js';
import type { ValueId } from '../../ir.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { fusedLayout, spanOf } from '../../../kernels/cuda/fused/layout.js';
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

/** The full-size iteration shape of a group under the given metadata. */
export function groupShape(g: KernelGroup, metaOf: (id: ValueId) => ValueLayout): readonly number[] {
  if (g.kind === 'pointwise') return metaOf(g.nodes[0]!.outputs[0]!).shape;
  return metaOf(g.nodes.find((n) => n.kind === 'reduction')!.reduce!.input).shape;
}

/** The layout of group `g` when its values have the metadata `metaOf` gives. */
export function kernelLayout(g: KernelGroup, metaOf: (id: ValueId) => ValueLayout): KernelLayout {
  const S = groupShape(g, metaOf);
  const strides: number[][] = [];
  const operands: OperandLayout[] = [];
  for (const o of g.outputs) {
    const m = metaOf(o);
    const rowScalar = g.rowScalars.has(o);
    strides.push(rowScalar ? rowStrides(m.shape, m.strides, S, g.dims) : [...m.strides]);
    operands.push({ value: o, dtype: m.dtype, out: true, rowScalar, offset: m.offset, span: spanOf(m.shape, m.strides) });
  }
  for (const id of g.inputs) {
    const m = metaOf(id);
    strides.push(broadcastStrides(m.shape, m.strides, S));
    operands.push({ value: id, dtype: m.dtype, out: false, rowScalar: false, offset: m.offset, span: spanOf(m.shape, m.strides) });
  }
  return fusedLayout({ kind: g.kind, shape: S, dims: g.dims, strides, operands, rowRef: g.outputs.length });
}
