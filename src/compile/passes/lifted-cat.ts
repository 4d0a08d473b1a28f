/**
 * Concatenations of lifted tensors become derived constants (inference graphs only).
 *
 *   w13 = cat([experts.0.gate_proj.weight, experts.0.up_proj.weight, ..., experts.127.up_proj.weight], 0)
 *
 * is what the Qwen3-MoE block traces so that llm.fusedMoe can read every expert's weights as one
 * [E, 2I, H] tensor. As a graph node it copies all the expert weights on every call: at the
 * Qwen3-30B-A3B layer shape that is 1.2 GB per layer per decode step, many times the bytes the
 * step's math reads (top-8 of 128 experts). Here such a cat becomes a ConcatConstant
 * (horizontal.ts): copied once when the program is built, kept equal to its sources by
 * `refresh()` before each call (a source written in place since, e.g. by loadStateDict, is
 * re-copied), and shared by every program that concatenates the same tensors in the same order.
 * Peak memory does not grow: the per-call cat held a buffer of the same size.
 *
 * A cat qualifies when it joins along dim 0 two or more lifted (not derived) tensors of one dtype
 * and device that the graph never writes, and its result is neither returned (the caller would
 * hold the program's constant) nor written in place. Only for programs that run without grad, as
 * horizontal fusion (kiln.compile runs both under the same switch).
 */
import type { Tensor } from '../../tensor/tensor.js';
import type { Graph, GraphInput, ValueId } from '../ir.js';
import { outputValues } from '../ir.js';
import { concatOf } from './horizontal.js';
import { aliasRoot, GraphBuilder, mutatedValues } from './util.js';

export interface LiftedCatResult {
  graph: Graph;
  /** Number of cat nodes turned into derived constants. */
  folded: number;
}

export function liftedCatConstants(g: Graph): LiftedCatResult {
  const lifted = new Map<ValueId, Tensor>();
  for (const inp of g.inputs) if (inp.source.kind === 'lifted' && inp.source.derived === undefined) lifted.set(inp.id, inp.source.tensor);
  if (lifted.size === 0) return { graph: g, folded: 0 };
  const written = new Set<ValueId>();
  for (const n of g.nodes) for (const v of mutatedValues(n)) written.add(aliasRoot(g, v));
  const returned = new Set<ValueId>(outputValues(g.output).map((id) => aliasRoot(g, id)));

  // Each qualifying cat node's id and its source tensors, in order.
  const found = new Map<number, Tensor[]>();
  for (const n of g.nodes) {
    if (n.op !== 'cat' || n.outputs.length !== 1) continue;
    const [list, dimArg] = n.args;
    if (list?.kind !== 'list' || list.items.length < 2 || dimArg?.kind !== 'const' || typeof dimArg.value !== 'number') continue;
    const sources: Tensor[] = [];
    for (const item of list.items) {
      const t = item.kind === 'value' && !written.has(aliasRoot(g, item.id)) ? lifted.get(item.id) : undefined;
      if (t === undefined) break;
      sources.push(t);
    }
    if (sources.length !== list.items.length) continue;
    const first = sources[0]!;
    const dim = dimArg.value < 0 ? dimArg.value + first.ndim : dimArg.value;
    if (dim !== 0 || sources.some((t) => t.dtype !== first.dtype || !t.device.equals(first.device) || t.ndim !== first.ndim)) continue;
    const out = n.outputs[0]!;
    if (returned.has(out) || written.has(out)) continue;
    found.set(n.id, sources);
  }
  if (found.size === 0) return { graph: g, folded: 0 };

  const fresh = new GraphBuilder(g);
  const inputs: GraphInput[] = [...g.inputs];
  let nextId = Math.max(-1, ...g.values.keys()) + 1;
  for (const n of g.nodes) {
    const sources = found.get(n.id);
    if (sources === undefined) {
      fresh.keep(n);
      continue;
    }
    const c = concatOf(sources);
    const t = c.tensor;
    const id = nextId++;
    fresh.values.set(id, { id, shape: [...t.shape], strides: [...t.strides], dtype: t.dtype, device: t.device, offset: 0 });
    inputs.push({ id, source: { kind: 'lifted', tensor: t, derived: c } });
    fresh.replace(n.outputs[0]!, id);
  }
  fresh.inputs = inputs;
  return { graph: fresh.finish(), folded: found.size };
}
