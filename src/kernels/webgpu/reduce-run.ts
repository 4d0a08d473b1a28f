/**
 * Runs a one-node reduce program of the fused-group renderer (fused/render.ts) on eager tensors:
 * the webgpu reductions, softmax and the norms describe their row kernel as fused nodes over value
 * ids (the input is value 0, further inputs 1, 2, ..., outputs 100, 101, ...) and this turns the
 * tensors into operands, strides over the input's shape and a launch. Eager and compiled
 * reductions are thereby the same WGSL.
 */
import { broadcastStrides, rowStrides } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { type FusedGroup, type FusedNode, type FusedValue, groupKey } from './fused/group.js';
import { fusedLayout } from './fused/layout.js';
import { launchFused, prepareFused } from './fused/run.js';

export interface GroupRun {
  readonly label: string;
  readonly x: Tensor;
  readonly dims: readonly number[];
  /** Outputs: the tensor and whether it is per row. */
  readonly outs: readonly { readonly t: Tensor; readonly row: boolean }[];
  readonly nodes: readonly FusedNode[];
  readonly values: ReadonlyMap<number, FusedValue>;
  readonly keepRowOrder?: boolean;
  /** Further inputs (values 1, 2, ...), broadcast to x's shape. */
  readonly extra?: readonly Tensor[];
}

/** Value ids of a one-node program: the input is 0, the outputs 100, 101, ... in their order. */
export const X = 0;
export const OUT = 100;

/** Runs a reduce group whose first input (value 0) is `x`. */
export function runGroup(r: GroupRun): void {
  const S = r.x.shape;
  const extra = r.extra ?? [];
  const g: FusedGroup = {
    kind: 'reduce',
    nodes: r.nodes,
    rowScalars: new Set(r.nodes.filter((n) => n.kind === 'reduction').flatMap((n) => n.outputs).concat(rowPointwise(r))),
    inputs: [X, ...extra.map((_, k) => X + 1 + k)],
    outputs: r.outs.map((_, k) => OUT + k),
    value: (id) => r.values.get(id)!,
  };
  const strides = [...r.outs.map((o) => (o.row ? rowStrides(o.t.shape, o.t.strides, S, r.dims) : broadcastStrides(o.t.shape, o.t.strides, S))), [...r.x.strides], ...extra.map((t) => broadcastStrides(t.shape, t.strides, S))];
  const offsets = [...r.outs.map((o) => o.t.offset), r.x.offset, ...extra.map((t) => t.offset)];
  const L = fusedLayout({ kind: 'reduce', shape: S, dims: r.dims, strides, offsets, rowRef: r.outs.length, keepRowOrder: r.keepRowOrder });
  const operands = [...r.outs.map((o) => o.t), r.x, ...extra].map((t) => ({ buffer: t.storage.buffer, dtype: t.dtype }));
  const launch = prepareFused(g, operands, L, groupKey(g), `kiln.${r.label}`);
  if (typeof launch === 'string') throw new Error(`${r.label}: cannot run on webgpu: ${launch}`);
  launchFused(launch, L);
}

/** Pointwise values computed per row (on reductions only): logSoftmax's log of the sum. */
function rowPointwise(r: GroupRun): number[] {
  const row = new Set(r.nodes.filter((n) => n.kind === 'reduction').flatMap((n) => n.outputs));
  const out: number[] = [];
  for (const n of r.nodes) {
    if (n.kind !== 'pointwise') continue;
    const ins = n.args.flatMap((a) => (a.kind === 'value' ? [a.id] : []));
    if (ins.length > 0 && ins.every((id) => row.has(id))) {
      row.add(n.outputs[0]!);
      out.push(n.outputs[0]!);
    }
  }
  return out;
}

/** Node-building shorthands: a value argument and a constant argument. */
export const V = (id: number) => ({ kind: 'value' as const, id });
export const C = (value: unknown) => ({ kind: 'const' as const, value });
