/**
 * Runs a graph eagerly, op by op through the dispatcher: the reference semantics every lowered
 * program must match, and the fallback for graphs the code generators do not handle.
 */
import { dispatch } from '../ops/dispatch.js';
import { getOp } from '../ops/registry.js';
import type { Tensor } from '../tensor/tensor.js';
import { evalSym, type Graph, type IRArg, type OutputTree, type ValueId } from './ir.js';

export function resolveArg(arg: IRArg, env: ReadonlyMap<ValueId, Tensor>): unknown {
  switch (arg.kind) {
    case 'value': {
      const t = env.get(arg.id);
      if (!t) throw new Error(`compile: value %${arg.id} used before it was computed`);
      return t;
    }
    case 'list':
      return arg.items.map((a) => resolveArg(a, env));
    case 'const':
      return arg.value;
    case 'sym':
      return evalSym(arg.expr, (id) => (resolveArg({ kind: 'value', id }, env) as Tensor).shape);
    default:
      return arg satisfies never;
  }
}

export function buildOutput(tree: OutputTree, env: ReadonlyMap<ValueId, Tensor>): unknown {
  switch (tree.kind) {
    case 'tensor':
      return env.get(tree.id);
    case 'list':
      return tree.items.map((t) => buildOutput(t, env));
    case 'object':
      return Object.fromEntries(tree.entries.map(([k, t]) => [k, buildOutput(t, env)]));
    case 'const':
      return tree.value;
    default:
      return tree satisfies never;
  }
}

/** Executes the graph on real inputs (aligned with graph.inputs) and returns the output structure. */
export function interpret(graph: Graph, inputs: readonly Tensor[]): unknown {
  const env = new Map<ValueId, Tensor>();
  graph.inputs.forEach((inp, i) => env.set(inp.id, inputs[i]!));
  for (const node of graph.nodes) {
    const op = getOp(node.op);
    const out = dispatch(op, ...(node.args.map((a) => resolveArg(a, env)) as never[])) as Tensor | Tensor[];
    const outs = Array.isArray(out) ? out : [out];
    node.outputs.forEach((id, k) => env.set(id, outs[k]!));
  }
  return buildOutput(graph.output, env);
}
