/**
 * Common-subexpression elimination: a node with the same op and the same arguments (after
 * earlier merges) as an earlier node reuses that node's outputs. Random ops (each call draws new
 * numbers) and mutating ops are never merged, and any mutation clears the table: a value computed
 * before a write must not stand in for the same expression computed after it.
 */
import type { Graph } from '../ir.js';
import { GraphBuilder, argKey, isImpure, isMutating } from './util.js';

export function commonSubexpressionElimination(g: Graph): Graph {
  const b = new GraphBuilder(g);
  let seen = new Map<string, readonly number[]>();
  for (const node of g.nodes) {
    if (isMutating(node)) seen = new Map();
    if (isImpure(node)) {
      b.keep(node);
      continue;
    }
    const key = `${node.op}(${node.args.map((a) => argKey(b.mapArg(a))).join(';')})`;
    const prev = seen.get(key);
    if (prev && prev.length === node.outputs.length) {
      node.outputs.forEach((o, k) => b.replace(o, prev[k]!));
      continue;
    }
    b.keep(node);
    seen.set(key, node.outputs);
  }
  return b.finish();
}
