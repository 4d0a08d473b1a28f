/**
 * A scheduled kernel group (lower/schedule.ts) as the WGSL renderer's fused group
 * (kernels/webgpu/fused/group.ts), and its launch layout for one call's metadata: every operand's
 * strides over the group's iteration shape (a per-row output has stride 0 along the reduced dims;
 * a keepdim=false one gets them inserted), then ordered and coalesced by fusedLayout. The group
 * carries the compiled kernels' fast math form (KILN_WEBGPU_FAST_MATH), which eager groups never do,
 * and for pointwise groups whether their NaN checks may move to the stores (KILN_WEBGPU_NAN_HOIST).
 */
import type { FusedGroup, FusedNode } from '../../../kernels/webgpu/fused/group.js';
import { type FusedLayout, fusedLayout } from '../../../kernels/webgpu/fused/layout.js';
import { getOption } from '../../../runtime/config.js';
import { rowStrides } from '../../../tensor/layout.js';
import type { DType } from '../../../tensor/dtype.js';
import { broadcastStrides } from '../../../tensor/layout.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import { CAST_OPS } from '../../lower/ops.js';
import type { KernelGroup } from '../../lower/schedule.js';
import { wgslEntry } from './fusion.js';

export function fusedGroup(g: KernelGroup, low: Lowered): FusedGroup {
  const nodes = g.nodes.map((n): FusedNode => {
    if (n.kind === 'reduction') return { kind: 'reduction', op: n.reduce!.kind, args: [], outputs: n.outputs, reduce: { kind: n.reduce!.kind, input: n.reduce!.input } };
    const args = n.args.map((a) => {
      if (a.kind === 'list' || a.kind === 'sym') throw new Error(`kiln wgsl: ${n.op} has a ${a.kind} argument (not fusable)`);
      return a;
    });
    return { kind: 'pointwise', op: wgslEntry(n.op), args, outputs: n.outputs, cast: CAST_OPS.has(n.op) };
  });
  const fast = getOption('KILN_WEBGPU_FAST_MATH');
  const hoist = fast !== 'off' && g.kind === 'pointwise' && getOption('KILN_WEBGPU_NAN_HOIST');
  return { kind: g.kind, nodes, rowScalars: g.rowScalars, inputs: g.inputs, outputs: g.outputs, value: (id) => low.values.get(id)!, ...(fast === 'off' ? {} : { fastMath: fast }), ...(hoist ? { nanHoist: true } : {}) };
}

export interface ValueLayout {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  readonly dtype: DType;
}

/** The launch layout of `g` when its values have the metadata `metaOf` gives. */
export function groupLayout(g: KernelGroup, metaOf: (id: ValueId) => ValueLayout): FusedLayout {
  const S = g.kind === 'pointwise' ? metaOf(g.nodes[0]!.outputs[0]!).shape : metaOf(g.nodes.find((n) => n.kind === 'reduction')!.reduce!.input).shape;
  const strides: number[][] = [];
  const offsets: number[] = [];
  for (const o of g.outputs) {
    const m = metaOf(o);
    strides.push(g.rowScalars.has(o) ? rowStrides(m.shape, m.strides, S, g.dims) : [...m.strides]);
    offsets.push(m.offset);
  }
  for (const id of g.inputs) {
    const m = metaOf(id);
    strides.push(broadcastStrides(m.shape, m.strides, S));
    offsets.push(m.offset);
  }
  return fusedLayout({ kind: g.kind, shape: S, dims: g.dims, strides, offsets, rowRef: g.outputs.length });
}
