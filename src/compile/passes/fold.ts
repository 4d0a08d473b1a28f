/**
 * Constant folding: a node whose tensor inputs are all constants (lifted tensors that do not
 * require grad and are never written by the graph, or results of folded nodes), or a factory op
 * with no tensor inputs, is evaluated once at compile time; its result becomes a new lifted
 * constant input. Random ops, mutating ops and results larger than FOLD_LIMIT elements are not
 * folded. Module Parameters requiring grad are never folded (they are trained between calls).
 *
 * Folding reads lifted tensors' current values, so the compiled entry must be invalidated when
 * they are written in place: `foldedSources` lists each tensor read with the storage version
 * seen, and the caller guards on it.
 */
import { noGrad } from '../../autograd/grad-mode.js';
import { dispatch } from '../../ops/dispatch.js';
import { getOp } from '../../ops/registry.js';
import { numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import type { Graph, GraphInput, IRNode, ValueId } from '../ir.js';
import { argValues, outputValues } from '../ir.js';
import { resolveArg } from '../interpret.js';
import { aliasRoot, hasTag, isImpure, mutatedValues } from './util.js';
import { deadCodeElimination } from './dce.js';

export const FOLD_LIMIT = 1_000_000;

export interface FoldResult {
  graph: Graph;
  /** Lifted tensors whose values were read at compile time, and the folded results, with the storage version seen. */
  foldedSources: { tensor: Tensor; version: number }[];
}

/**
 * `keepSized`: view and factory nodes stay in the graph, computed per call (views of constants
 * cost nothing there), though nodes that read them may fold: their size arguments may be
 * symbolic (compile/symbolic.ts), and a folded result would bake those sizes in.
 */
export function constantFolding(g: Graph, options: { keepSized?: boolean } = {}): FoldResult {
  const written = new Set<ValueId>();
  for (const n of g.nodes) for (const v of mutatedValues(n)) written.add(aliasRoot(g, v));
  const env = new Map<ValueId, Tensor>();
  const liftedOf = new Map<ValueId, Tensor>();
  for (const inp of g.inputs) {
    if (inp.source.kind !== 'lifted') continue;
    const t = inp.source.tensor;
    if (t.requiresGrad || written.has(aliasRoot(g, inp.id))) continue;
    env.set(inp.id, t);
    liftedOf.set(inp.id, t);
  }
  // A returned value stays computed per call: a folded one would be the same object every time.
  const returned = new Set<ValueId>(outputValues(g.output));
  const used = new Set<Tensor>();
  /** keepSized: the lifted tensors behind each view left in the graph. */
  const keptViewSources = new Map<ValueId, Tensor[]>();
  const nodes: IRNode[] = [];
  const newInputs: GraphInput[] = [];
  for (const n of g.nodes) {
    const vals = n.args.flatMap(argValues);
    const foldable =
      !isImpure(n) &&
      vals.every((v) => env.has(v)) &&
      (vals.length > 0 || hasTag(n, 'factory')) &&
      n.outputs.every((o) => numel(g.values.get(o)!.shape) <= FOLD_LIMIT) &&
      n.outputs.every((o) => !written.has(aliasRoot(g, o)) && !returned.has(o));
    if (!foldable) {
      nodes.push(n);
      continue;
    }
    if (options.keepSized === true && hasTag(n, 'factory')) {
      nodes.push(n);
      continue;
    }
    const out = noGrad(() => dispatch(getOp(n.op), ...(n.args.map((a) => resolveArg(a, env)) as never[]))) as Tensor | Tensor[];
    const outs = Array.isArray(out) ? out : [out];
    if (options.keepSized === true && hasTag(n, 'view')) {
      // Evaluated for the nodes that read it, but computed per call where the graph reads it; a
      // node folded from it reads its base's values (guarded then, not before).
      n.outputs.forEach((id, k) => {
        env.set(id, outs[k]!);
        keptViewSources.set(id, vals.flatMap((v) => keptViewSources.get(v) ?? (liftedOf.has(v) ? [liftedOf.get(v)!] : [])));
      });
      nodes.push(n);
      continue;
    }
    for (const v of vals) {
      const t = liftedOf.get(v);
      if (t) used.add(t);
      for (const s of keptViewSources.get(v) ?? []) used.add(s);
    }
    n.outputs.forEach((id, k) => {
      env.set(id, outs[k]!);
      newInputs.push({ id, source: { kind: 'lifted', tensor: outs[k]! } });
    });
  }
  if (newInputs.length === 0) return { graph: g, foldedSources: [] };
  // Folded values become inputs; those only used by other folded nodes are dropped by DCE.
  const values = new Map(g.values);
  for (const inp of newInputs) {
    const v = values.get(inp.id)!;
    values.set(inp.id, { ...v, aliasOf: undefined });
  }
  const graph = deadCodeElimination({ inputs: [...g.inputs, ...newInputs], nodes, values, output: g.output });
  // Folded results are guarded too: a view of one could be written through by the caller.
  for (const inp of newInputs) if (inp.source.kind === 'lifted') used.add(inp.source.tensor);
  return { graph, foldedSources: [...used].map((tensor) => ({ tensor, version: tensor.storage.version })) };
}
