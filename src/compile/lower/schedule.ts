/**
 * Scheduling and fusion. Nodes are visited in program order and greedily grouped:
 * - pointwise nodes join an open group that produced one of their inputs when the iteration
 *   spaces agree (same output shape);
 * - a reduction joins the open pointwise group that produced its input (prologue fusion: sum(x*x)
 *   reads x once), or an open reduction group over the same input shape and dims (a second phase);
 * - pointwise nodes after a reduction join its group as per-row scalars (rsqrt(var + eps)) or as
 *   full-size epilogues (exp(x - max), x * rstd): a "row kernel" (softmax, layerNorm in one kernel).
 * A group closes (is emitted as a kernel step) when a node outside it reads one of its values, before
 * any op that mutates memory (nothing is fused across a mutation), or at 64 nodes. Group values used
 * outside the group or returned become the kernel's outputs (several per kernel when needed).
 */
import { shapeEquals } from '../../tensor/layout.js';
import type { ValueId } from '../ir.js';
import { outputValues } from '../ir.js';
import { type LNode, type Lowered, nodeInputs } from './lower.js';

export const MAX_KERNEL_OPS = 64;

export interface KernelGroup {
  readonly id: number;
  kind: 'pointwise' | 'reduce';
  readonly nodes: LNode[];
  /** Iteration space: the full-size shape (a reduce group: its reductions' input shape). */
  readonly shape: readonly number[];
  /** Reduce groups: reduced dims (sorted) of every reduction in the group. */
  dims: readonly number[];
  /** Values the group computes. */
  readonly produced: Set<ValueId>;
  /** Values computed once per row (reductions and pointwise ops on them). */
  readonly rowScalars: Set<ValueId>;
  /** External tensor inputs, in first-use order (filled by finalize). */
  inputs: ValueId[];
  /** Materialised values (filled by finalize). */
  outputs: ValueId[];
  closed: boolean;
}

export type Step =
  | { readonly kind: 'kernel'; readonly group: KernelGroup }
  | { readonly kind: 'extern'; readonly node: LNode }
  | { readonly kind: 'view'; readonly node: LNode };

export interface Schedule {
  readonly steps: Step[];
  readonly kernels: KernelGroup[];
}

/** `shape` as seen broadcast against `full` equals `full` with 1s exactly at `dims` (a per-row scalar). */
function isRowShape(shape: readonly number[], full: readonly number[], dims: readonly number[]): boolean {
  if (shape.length > full.length) return false;
  const pad = full.length - shape.length;
  for (let i = 0; i < full.length; i++) {
    const s = i < pad ? 1 : shape[i - pad]!;
    if (s !== (dims.includes(i) ? 1 : full[i]!)) return false;
  }
  return true;
}

export function schedule(low: Lowered): Schedule {
  const info = (id: ValueId) => low.values.get(id)!;
  const steps: Step[] = [];
  const kernels: KernelGroup[] = [];
  const producer = new Map<ValueId, KernelGroup>();
  const open = new Set<KernelGroup>();
  let nextGroup = 0;

  const close = (g: KernelGroup): void => {
    if (g.closed) return;
    g.closed = true;
    open.delete(g);
    steps.push({ kind: 'kernel', group: g });
  };
  const openProducer = (id: ValueId): KernelGroup | undefined => {
    const g = producer.get(id);
    return g && !g.closed ? g : undefined;
  };
  const newGroup = (kind: KernelGroup['kind'], shape: readonly number[], dims: readonly number[]): KernelGroup => {
    const g: KernelGroup = {
      id: nextGroup++,
      kind,
      nodes: [],
      shape,
      dims,
      produced: new Set(),
      rowScalars: new Set(),
      inputs: [],
      outputs: [],
      closed: false,
    };
    kernels.push(g);
    open.add(g);
    return g;
  };
  const join = (g: KernelGroup, n: LNode, rowScalar: boolean): void => {
    g.nodes.push(n);
    for (const o of n.outputs) {
      g.produced.add(o);
      producer.set(o, g);
      if (rowScalar) g.rowScalars.add(o);
    }
  };
  /** Moves all of `h` into `g` (both open and independent of each other). */
  const merge = (g: KernelGroup, h: KernelGroup): void => {
    for (const n of h.nodes) join(g, n, false);
    for (const id of h.rowScalars) g.rowScalars.add(id);
    g.nodes.sort((a, b) => a.id - b.id);
    open.delete(h);
    kernels.splice(kernels.indexOf(h), 1);
  };
  /** Closes every open group that produced an input of `n` except `keep`. */
  const closeProducers = (n: LNode, keep?: KernelGroup): void => {
    for (const id of nodeInputs(n)) {
      const g = openProducer(id);
      if (g && g !== keep) close(g);
    }
  };

  /** Can pointwise node `n` join group `g`? Returns 'full', 'row' or undefined. */
  const fits = (g: KernelGroup, n: LNode): 'full' | 'row' | undefined => {
    if (g.nodes.length >= MAX_KERNEL_OPS) return undefined;
    const shape = info(n.outputs[0]!).shape;
    const ins = nodeInputs(n);
    if (g.kind === 'pointwise') return shapeEquals(shape, g.shape) ? 'full' : undefined;
    const fromG = ins.filter((id) => g.produced.has(id));
    if (shapeEquals(shape, g.shape)) {
      // Full-size epilogue: per-row values must broadcast along the reduced dims only.
      const ok = fromG.every((id) => !g.rowScalars.has(id) || isRowShape(info(id).shape, g.shape, g.dims));
      if (ok) return 'full';
    }
    // A per-row scalar op: reads only the group's per-row values (and constants).
    if (ins.every((id) => g.rowScalars.has(id)) && ins.length > 0 && ins.every((id) => shapeEquals(info(id).shape, shape))) return 'row';
    return undefined;
  };

  for (const n of low.nodes) {
    if (n.kind === 'pointwise') {
      let target: KernelGroup | undefined;
      let how: 'full' | 'row' | undefined;
      const ins = nodeInputs(n);
      for (let i = ins.length - 1; i >= 0 && !target; i--) {
        const g = openProducer(ins[i]!);
        if (!g) continue;
        const f = fits(g, n);
        if (f) {
          target = g;
          how = f;
        }
      }
      const shape = info(n.outputs[0]!).shape;
      if (target) {
        // Other open pointwise producers over the same space merge in rather than materialising.
        for (const id of ins) {
          const h = openProducer(id);
          if (h && h !== target && h.kind === 'pointwise' && shapeEquals(h.shape, shape) && h.nodes.length + target.nodes.length < MAX_KERNEL_OPS) merge(target, h);
        }
      } else if (!ins.some((id) => openProducer(id))) {
        // Reads only materialised values: a sibling of an open group over the same space.
        target = [...open].reverse().find((g) => g.kind === 'pointwise' && shapeEquals(g.shape, shape) && g.nodes.length < MAX_KERNEL_OPS);
        how = 'full';
      }
      closeProducers(n, target);
      if (!target) {
        target = newGroup('pointwise', shape, []);
        how = 'full';
      }
      join(target, n, how === 'row');
      continue;
    }
    if (n.kind === 'reduction' && n.reduce) {
      const r = n.reduce;
      const inShape = info(r.input).shape;
      const g = openProducer(r.input);
      let target: KernelGroup | undefined;
      if (g && g.nodes.length < MAX_KERNEL_OPS && shapeEquals(g.shape, inShape) && !g.rowScalars.has(r.input)) {
        if (g.kind === 'pointwise') {
          g.kind = 'reduce';
          g.dims = r.dims;
          target = g;
        } else if (shapeEquals(g.dims, r.dims)) target = g;
      }
      closeProducers(n, target);
      if (!target) target = newGroup('reduce', inShape, r.dims);
      join(target, n, true);
      continue;
    }
    // Externs and views read materialised values; nothing is fused across a mutation.
    if (n.mutates) for (const g of [...open]) close(g);
    else closeProducers(n);
    steps.push({ kind: n.kind === 'view' ? 'view' : 'extern', node: n });
  }
  for (const g of [...open]) close(g);
  finalize(low, kernels);
  return { steps, kernels };
}

/** Fills each group's external inputs and materialised outputs. */
function finalize(low: Lowered, kernels: KernelGroup[]): void {
  const groupOf = new Map<LNode, KernelGroup>();
  for (const g of kernels) for (const n of g.nodes) groupOf.set(n, g);
  const usedOutside = new Set<ValueId>(outputValues(low.graph.output));
  const users = new Map<ValueId, LNode[]>();
  for (const n of low.nodes) for (const id of nodeInputs(n)) users.set(id, [...(users.get(id) ?? []), n]);
  for (const g of kernels) {
    const inputs: ValueId[] = [];
    for (const n of g.nodes) {
      for (const id of nodeInputs(n)) if (!g.produced.has(id) && !inputs.includes(id)) inputs.push(id);
    }
    g.inputs = inputs;
    const outs: ValueId[] = [];
    for (const n of g.nodes) {
      for (const o of n.outputs) {
        if (usedOutside.has(o) || (users.get(o) ?? []).some((u) => groupOf.get(u) !== g)) outs.push(o);
      }
    }
    g.outputs = outs;
  }
}
