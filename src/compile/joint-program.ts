/**
 * Running a compiled joint forward+backward (joint.ts): the forward program runs with grad mode
 * off, and its differentiable outputs are connected to eager autograd through ONE function node
 * (autograd's attachFunctionNode) that holds the saved tensors and whose backward runs the
 * backward program. So `loss = compiled(x); loss.backward()` accumulates into the leaves' .grad as
 * eager does, retainGraph keeps the saved tensors for another backward, and without it the node
 * drops them after the first.
 */
import { attachFunctionNode } from '../autograd/graph.js';
import { noGrad } from '../autograd/grad-mode.js';
import { zeros } from '../api/creation.js';
import { Tensor } from '../tensor/tensor.js';
import { isContiguousStrides } from '../tensor/layout.js';
import type { CompiledProgram } from './backend.js';
import type { LiftedGuards } from './guards.js';
import type { GraphInput, ValueId } from './ir.js';
import type { JointGraphs } from './joint.js';

/** A compiled graph and how to run it (graph-aware programs get the graph too). */
export interface Runner {
  readonly program: CompiledProgram;
  run(inputs: readonly Tensor[]): unknown;
}

export interface JointProgram {
  /** The joint as traced, with forward and backward after the pass pipeline. */
  readonly graphs: JointGraphs;
  readonly forward: Runner;
  readonly backward: Runner;
  /** Lifted tensors of the joint trace and constants folded into either program. */
  readonly guards: LiftedGuards;
}

/** The tensor a graph input stands for in a call with `args`. */
export function inputTensor(inp: GraphInput, args: readonly unknown[]): Tensor {
  if (inp.source.kind === 'lifted') {
    inp.source.derived?.refresh();
    return inp.source.tensor;
  }
  let x: unknown = args;
  for (const k of inp.source.path) x = (x as Record<string | number, unknown>)[k];
  if (!(x instanceof Tensor)) throw new Error(`kiln.compile: input at ${JSON.stringify(inp.source.path)} is not a tensor`);
  return x;
}

/** A gradient in the layout the backward program was traced with (contiguous, the output's dtype). */
function normalizeGrad(g: Tensor | null, meta: JointGraphs['outputMetas'][number]): Tensor {
  if (g === null) return zeros([...meta.shape], { dtype: meta.dtype, device: meta.device });
  const d = g.dtype === meta.dtype ? g : g.to(meta.dtype);
  return isContiguousStrides(d.shape, d.strides) && d.offset === 0 ? d : d.contiguous();
}

/**
 * Runs the forward and links its outputs to autograd. `onBackward` is called each time the
 * compiled backward runs (counters).
 */
export function runJoint(jp: JointProgram, args: readonly unknown[], name: string, onBackward: () => void): unknown {
  const { forward: fg, backward: bg } = jp.graphs;
  const byId = new Map<ValueId, Tensor>();
  for (const inp of jp.graphs.inputs) byId.set(inp.id, inputTensor(inp, args));
  const fwdInputs = fg.inputs.map((inp) => byId.get(inp.id) ?? inputTensor(inp, args));
  const [userOut, savedOut, diffOut] = noGrad(() => jp.forward.run(fwdInputs)) as [unknown, Tensor[], Tensor[]];
  const saved = jp.graphs.saved.map((r) => (r.kind === 'output' ? savedOut[r.index]! : byId.get(r.id)!));
  const gradInputs = jp.graphs.gradInputs.map((id) => byId.get(id)!);
  const metas = jp.graphs.outputMetas;
  attachFunctionNode(`CompiledFunctionBackward(${name})`, gradInputs, diffOut, saved, (s, grads) => {
    onBackward();
    const gs = grads.map((g, j) => normalizeGrad(g, metas[j]!));
    const inputs = bg.inputs.map((inp) => {
      if (inp.source.kind === 'lifted') return inp.source.tensor;
      const [role, k] = inp.source.path as [string, number];
      return role === 'saved' ? s[k]! : gs[k]!;
    });
    return jp.backward.run(inputs) as (Tensor | null)[];
  });
  return userOut;
}
