/**
 * The rebuild step shared by the library's fusion passes: copy a graph's nodes in order, drop the
 * `removed` ones (the nodes a fusion absorbs), and at each node of `fuseAt` emit the fused node
 * instead (`emit` calls the builder and returns its outputs, which replace the node's outputs in
 * order). The fused node sits where the last absorbed node was, so every input it takes is defined
 * before it.
 */
import type { Graph, IRNode } from '../compile/ir.js';
import { GraphBuilder } from '../compile/passes/util.js';
import type { ValueId } from '../compile/ir.js';

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
