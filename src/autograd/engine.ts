/**
 * Reverse-mode execution: from the roots, nodes run in dependency order (a node runs once every
 * node that feeds it a gradient has run), gradients for the same tensor are summed, and leaves
 * accumulate into `.grad`. Without retainGraph the nodes release what they saved as they run.
 */
import { add, add_, clone } from '../api/core.js';
import { onesLike, zerosLike } from '../api/creation.js';
import { setAutocastDtype } from '../api/autocast.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape, shapeEquals } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { keep } from '../tensor/scope.js';
import { noGrad } from './grad-mode.js';
import { type Edge, type GradResult, Node } from './graph.js';

export interface BackwardRunOptions {
  retainGraph?: boolean;
}

function checkGradShape(where: string, g: Tensor, shape: readonly number[]): void {
  if (!shapeEquals(g.shape, shape)) {
    throw new Error(`${where}: gradient has shape ${fmtShape(g.shape)} but the tensor has shape ${fmtShape(shape)}`);
  }
}

function accumulateLeaf(t: Tensor, g: Tensor): void {
  const grad = g.dtype === t.dtype ? g : g.to(t.dtype);
  // A gradient tensor can be shared by several leaves (add's formula passes it through), so the
  // first one stored is a private copy; later ones are summed out of place.
  // Accumulates in place, as PyTorch does, so references to .grad see the sum.
  if (t.grad === null) t.grad = keep(clone(grad, 'contiguous'));
  else add_(t.grad, grad);
}

/** Runs backward from `roots`, seeding each with its gradient (ones for scalars). */
export function runBackward(roots: readonly Tensor[], seeds: readonly (Tensor | null | undefined)[], options: BackwardRunOptions = {}): void {
  // Formulas run with autocast off: gradients keep the dtypes the forward produced (torch's advice
  // is to call backward outside autocast; here it does not matter where it is called).
  const restoreAutocast = setAutocastDtype(null);
  try {
    runBackwardInner(roots, seeds, options);
  } finally {
    restoreAutocast();
  }
}

function runBackwardInner(roots: readonly Tensor[], seeds: readonly (Tensor | null | undefined)[], options: BackwardRunOptions): void {
  noGrad(() => {
    const buffers = new Map<Node, (Tensor | null)[]>();
    const deliver = (edge: Edge, g: Tensor): void => {
      if (edge.kind === 'leaf') {
        checkGradShape('backward', g, edge.tensor.shape);
        accumulateLeaf(edge.tensor, g);
        return;
      }
      let buf = buffers.get(edge.node);
      if (!buf) buffers.set(edge.node, (buf = []));
      const prev = buf[edge.output];
      buf[edge.output] = prev ? add(prev, g) : g;
    };

    const rootEdges: Edge[] = [];
    roots.forEach((r, i) => {
      if (!r.requiresGrad) throw new Error(`backward: tensor ${i} (${fmtShape(r.shape)}) does not require grad and has no gradFn`);
      let seed = seeds[i] ?? null;
      if (seed === null) {
        if (r.numel() !== 1) throw new Error(`backward: grad can be implicitly created only for scalar outputs, got shape ${fmtShape(r.shape)}`);
        seed = onesLike(r);
      }
      checkGradShape('backward', seed, r.shape);
      const edge: Edge = r.gradFn instanceof Node ? { kind: 'node', node: r.gradFn, output: Math.max(0, r.gradFn.outputs.indexOf(r)) } : { kind: 'leaf', tensor: r };
      rootEdges.push(edge);
      deliver(edge, seed);
    });

    // Count, for every reachable node, how many edges from reachable nodes point at it.
    const deps = new Map<Node, number>();
    const stack: Node[] = rootEdges.flatMap((e) => (e.kind === 'node' ? [e.node] : []));
    const seen = new Set<Node>(stack);
    while (stack.length > 0) {
      const n = stack.pop()!;
      for (const s of n.inputs) {
        if (s.edge?.kind !== 'node') continue;
        const m = s.edge.node;
        deps.set(m, (deps.get(m) ?? 0) + 1);
        if (!seen.has(m)) {
          seen.add(m);
          stack.push(m);
        }
      }
    }
    const ready = [...seen].filter((n) => !deps.get(n));
    while (ready.length > 0) {
      // Later-created nodes first keeps memory low in long chains (the order is still topological).
      ready.sort((a, b) => a.seq - b.seq);
      const node = ready.pop()!;
      const buf = buffers.get(node) ?? [];
      buffers.delete(node);
      const grads = node.outputs.map((o, k) => buf[k] ?? (isFloating(o.dtype) ? zerosLike(o) : null));
      for (const [k, t] of node.retained) if (grads[k]) t.grad = keep(clone(grads[k]!, 'contiguous'));
      const results = node.apply(grads);
      node.inputs.forEach((slot) => {
        if (!slot.edge) return;
        const r: GradResult = results[slot.arg];
        const g = slot.item === undefined ? (r as Tensor | null | undefined) : (r as readonly (Tensor | null | undefined)[] | null | undefined)?.[slot.item];
        if (g instanceof Tensor) {
          checkGradShape(`${node.name} backward (argument ${slot.arg}${slot.item === undefined ? '' : `[${slot.item}]`})`, g, slot.shape);
          deliver(slot.edge, g.dtype === slot.dtype || !isFloating(slot.dtype) ? g : g.to(slot.dtype));
        }
        if (slot.edge.kind === 'node') {
          const m = slot.edge.node;
          const left = (deps.get(m) ?? 1) - 1;
          deps.set(m, left);
          if (left === 0) ready.push(m);
        }
      });
      if (!options.retainGraph) node.release();
    }
  });
}
