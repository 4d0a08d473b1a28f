/**
 * Shared by the library's fusion passes: each value's producer and reader count (what a pattern
 * asks before absorbing a node), and the rebuild step: copy a graph's nodes in order, drop the
 * `removed` ones (the nodes a fusion absorbs), and at each node of `fuseAt` emit the fused node
 * instead (`emit` calls the builder and returns its outputs, which replace the node's outputs in
 * order). The fused node sits where the last absorbed node was, so every input it takes is defined
 * before it.
 */
import { argValues, type Graph, type IRNode, type ValueId } from '../compile/ir.js';
import { GraphBuilder } from '../compile/passes/util.js';

/** Each value's producing node and how many argument slots read it. */
export function valueUses(g: Graph): { producer: Map<ValueId, IRNode>; readers: Map<ValueId, number> } {
  const producer = new Map<ValueId, IRNode>();
  const readers = new Map<ValueId, number>();
  for (const n of g.nodes) {
    for (const o of n.outputs) producer.set(o, n);
    for (const a of n.args) for (const id of argValues(a)) readers.set(id, (readers.get(id) ?? 0) + 1);
  }
  return { producer, readers };
}

export function rebuildFused<T>(g: Graph, removed: ReadonlySet<number>, fuseAt: ReadonlyMap<number, T>, emit: (b: GraphBuilder, at: IRNode, match: T) => readonly ValueId[]): Graph {
  const fresh = new GraphBuilder(g);
  for (const n of g.nodes) {
    if (removed.has(n.id)) continue;
    const m = fuseAt.get(n.id);
    if (m === undefined) {
      fresh.keep(n);
      continue;
    }
    emit(fresh, n, m).forEach((out, i) => fresh.replace(n.outputs[i]!, out));
  }
  return fresh.finish();
}
