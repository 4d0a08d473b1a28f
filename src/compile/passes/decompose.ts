/**
 * Decompositions: rewrite composite ops into a smaller core set (pointwise math, sum/mean/amax
 * reductions, mm/linear) for the code generator. The core ops' decompositions are the one table
 * shared with eager fallback (ops/decompose.ts, entries in ops/decompositions.ts), recorded here
 * through the graph builder; registerDecomposition adds graph-only ones (the LLM library's, which
 * depend on its dispatch policy at compile time). Each maps a graph node to new nodes over
 * existing ops and returns the values that replace the node's outputs, or null to keep the node
 * (unsupported dtype or arguments). When the original op gives a contiguous result and the
 * decomposition does not (transposed input), a `contiguous` is appended so strides match too.
 */
import { tableDecomposition, tableDecompositionNames, type DecompositionBuilder, type OpDecomposition } from '../../ops/decompose.js';
import '../../ops/decompositions.js';
import '../../ops/decompositions-shape.js';
import { isContiguousStrides } from '../../tensor/layout.js';
import type { Graph, IRArg, IRNode, ValueId } from '../ir.js';
import { argValues } from '../ir.js';
import { GraphBuilder, Val, mutatedValues, type BuilderArg } from './util.js';

export type Decomposition = (node: IRNode, b: GraphBuilder) => ValueId[] | null;

/** Graph-only decompositions (registerDecomposition); the shared table's come from ops/decompose.ts. */
const registry = new Map<string, Decomposition>();

export function registerDecomposition(op: string, fn: Decomposition): void {
  registry.set(op, fn);
}

/** A node argument as the shared table's entries take it: values as Val, constants as themselves, lists as arrays. */
function tableArg(a: IRArg): unknown {
  if (a.kind === 'value') return new Val(a.id);
  if (a.kind === 'list') return a.items.map(tableArg);
  if (a.kind === 'sym') throw new Error('decompose: a symbolic size in a traced graph');
  return a.value;
}

/** A table decomposition recorded through the graph builder. */
function fromTable(fn: OpDecomposition): Decomposition {
  return (node, b) => {
    const gb: DecompositionBuilder<Val> = {
      op: (name, ...args) => b.op(name, ...(args as BuilderArg[])),
      meta: (v) => b.info(v.id),
      isValue: (x): x is Val => x instanceof Val,
    };
    const outs = fn(gb, node.args.map(tableArg));
    return outs === null ? null : outs.map((v) => v.id);
  };
}

const adapted = new Map<string, Decomposition>();

export function getDecomposition(op: string): Decomposition | undefined {
  const own = registry.get(op);
  if (own) return own;
  let d = adapted.get(op);
  if (d === undefined) {
    const fn = tableDecomposition(op);
    if (fn === undefined) return undefined;
    adapted.set(op, (d = fromTable(fn)));
  }
  return d;
}

export function listDecompositions(): string[] {
  return [...new Set([...tableDecompositionNames(), ...registry.keys()])];
}

export interface DecomposeOptions {
  /** Op names to decompose (default: every registered decomposition). */
  only?: readonly string[];
  /** Op names to leave whole (the compile target renders them natively: target.ts nativeComposites). */
  keep?: ReadonlySet<string>;
}

/** Applies the registered decompositions to every node (once: decompositions emit core ops only). */
export function decompose(g: Graph, options: DecomposeOptions = {}): Graph {
  const b = new GraphBuilder(g);
  const written = new Set<ValueId>(g.nodes.flatMap(mutatedValues));
  const only = options.only ? new Set(options.only) : null;
  for (const node of g.nodes) {
    const fn = (only && !only.has(node.op)) || options.keep?.has(node.op) === true ? undefined : getDecomposition(node.op);
    if (!fn) {
      b.keep(node);
      continue;
    }
    // Empty operands stay with the op's own kernel: a decomposition may reduce over the empty dim
    // (softmax -> amax), which has no identity, where the op itself returns an empty result.
    if (node.args.flatMap(argValues).some((v) => g.values.get(v)!.shape.includes(0))) {
      b.keep(node);
      continue;
    }
    const mapped: IRNode = { ...node, args: node.args.map((a) => b.mapArg(a)) };
    let outs: ValueId[] | null;
    try {
      outs = fn(mapped, b);
    } catch (e) {
      // The user called `node.op`; an error from an op of its decomposition must say so.
      throw new Error(`kiln.compile: ${node.op}: ${(e as Error).message} (while decomposing ${node.op} for the compiler)`, { cause: e });
    }
    if (!outs || outs.length !== node.outputs.length) {
      b.keep(node);
      continue;
    }
    outs = outs.map((id, k) => {
      const orig = g.values.get(node.outputs[k]!)!;
      const inputs = new Set(node.args.flatMap(argValues).map((v) => b.resolve(v)));
      // Identity results (dropout) must not alias an input the graph later writes through.
      if (inputs.has(id) && written.has(node.outputs[k]!)) return b.op('clone', new Val(id), null).id;
      const info = b.info(id);
      if (isContiguousStrides(orig.shape, orig.strides) && !isContiguousStrides(info.shape, info.strides)) {
        return b.op('contiguous', new Val(id), 'contiguous').id;
      }
      return id;
    });
    node.outputs.forEach((o, k) => b.replace(o, outs[k]!));
  }
  return b.finish();
}
