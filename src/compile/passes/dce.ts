/**
 * Dead-code elimination: drops nodes none of whose outputs is used (by a later node or the
 * function's result). Never drops a node that mutates a tensor (in-place ops, `mutated`
 * arguments: their effect is visible through the input or lifted tensor they write) or a random
 * op (it advances the generator, so dropping it would change later random numbers). Lifted
 * inputs nobody reads any more (after folding) are removed as well; argument inputs stay, since
 * they are the program's calling convention.
 */
import type { Graph, ValueId } from '../ir.js';
import { argValues, outputValues } from '../ir.js';
import { isImpure } from './util.js';

export function deadCodeElimination(g: Graph): Graph {
  const live = new Set<ValueId>(outputValues(g.output));
  const keep: boolean[] = new Array<boolean>(g.nodes.length).fill(false);
  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const n = g.nodes[i]!;
    if (isImpure(n) || n.outputs.some((o) => live.has(o))) {
      keep[i] = true;
      for (const a of n.args) for (const v of argValues(a)) live.add(v);
    }
  }
  const nodes = g.nodes.filter((_, i) => keep[i]);
  const inputs = g.inputs.filter((inp) => inp.source.kind === 'arg' || live.has(inp.id));
  const present = new Set<ValueId>([...inputs.map((i) => i.id), ...nodes.flatMap((n) => n.outputs)]);
  const values = new Map([...g.values].filter(([id]) => present.has(id)));
  return { inputs, nodes, values, output: g.output };
}
