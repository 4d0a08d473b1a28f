/**
 * Horizontal fusion of linears that share an input (inference graphs only).
 *
 *   q = linear(x, Wq); k = linear(x, Wk); v = linear(x, Wv)
 * becomes
 *   qkv = linear(x, Wqkv); q = slice(qkv, -1, 0, nq); k = slice(qkv, -1, nq, nq + nk); ...
 *
 * so attention's q/k/v projections and an MLP's gate/up run as one GEMM: at few rows (a decode
 * step, a short prompt) each small GEMM fills only a few of the GPU's SMs and pays its own launch,
 * and one GEMM over the summed width fills more and pays once. The outputs become column slices
 * (views) of the fused result: same values, strided layout; consumers (views, fused pointwise and
 * reduction kernels, attention) read strided inputs.
 *
 * Wqkv is a derived constant: the lifted weights concatenated along dim 0 at compile time, held
 * as a new lifted input whose `derived.refresh()` (called when the program's inputs are gathered,
 * joint-program.ts `inputTensor`) compares each source's storage version with the one copied and
 * re-copies the stale slices in place. So an in-place write to a parameter (`w.copy_(...)`,
 * an optimizer step) is seen by the next call without a recompile, and the fused weight keeps its
 * address (CUDA graphs that captured it stay valid). Replacing a parameter object is caught by the
 * existing lifted/root-module guards (the traced graph still lists the original weights).
 *
 * Only for programs that run without grad: gradients would have to flow back through the
 * concatenation to the separate parameters, and the joint (training) path does not run this pass.
 *
 * A linear joins a group when: its weight (and bias, if any) is a lifted 2-d tensor the graph never
 * writes, all members have the same input value, weight dtype/device and in-features, all or none
 * have a bias, and its output is neither returned (the caller would see a strided result where
 * eager gives a dense one) nor written in place (through any alias).
 * The cost: the fused weights are a second copy of the grouped parameters (memory).
 */
import { noGrad } from '../../autograd/grad-mode.js';
import { dispatch } from '../../ops/dispatch.js';
import { copy_ } from '../../ops/defs/core.js';
import { cat } from '../../ops/defs/indexing.js';
import { narrow } from '../../ops/defs/views.js';
import type { Tensor } from '../../tensor/tensor.js';
import { keep } from '../../tensor/scope.js';
import type { DerivedTensor, Graph, GraphInput, IRNode, ValueId } from '../ir.js';
import { outputValues } from '../ir.js';
import { aliasRoot, GraphBuilder, mutatedValues, objectId, Val } from './util.js';

interface Member {
  readonly node: IRNode;
  readonly weight: Tensor;
  readonly bias: Tensor | null;
}

/** A slice of the fused tensor mirroring one source, with the source version last copied. */
interface Part {
  readonly source: Tensor;
  readonly view: Tensor;
  version: number;
}

/** A concatenation of lifted tensors along dim 0, kept equal to its sources (see the header). */
export class ConcatConstant implements DerivedTensor {
  readonly tensor: Tensor;
  private readonly parts: Part[];

  constructor(sources: readonly Tensor[]) {
    const built = noGrad(() => {
      const t = dispatch(cat, [...sources], 0);
      let off = 0;
      const parts = sources.map((source) => {
        const n = source.shape[0]!;
        const view = keep(dispatch(narrow, t, 0, off, n));
        off += n;
        return { source, view, version: source.storage.version };
      });
      return { t: keep(t), parts };
    });
    this.tensor = built.t;
    this.parts = built.parts;
  }

  /** Re-copies every source written in place since it was last copied (O(sources) when none was). */
  refresh(): void {
    for (const p of this.parts) {
      const v = p.source.storage.version;
      if (v === p.version) continue;
      noGrad(() => dispatch(copy_, p.view, p.source));
      p.version = p.source.storage.version;
    }
  }
}

/**
 * Fused weights shared by every graph that concatenates the same tensors in the same order: each
 * traced shape of a function (a decode loop's growing T) is its own variant and runs this pass,
 * and one copy of the weights per variant would multiply the memory. Weak references: a fused
 * weight lives as long as a compiled graph holds it.
 */
const shared = new WeakMap<Tensor, Map<string, WeakRef<ConcatConstant>>>();

export function concatOf(sources: readonly Tensor[]): ConcatConstant {
  const key = sources.map((t) => objectId(t)).join(',');
  let byKey = shared.get(sources[0]!);
  if (!byKey) shared.set(sources[0]!, (byKey = new Map()));
  const hit = byKey.get(key)?.deref();
  if (hit && !hit.tensor.isDisposed) return hit;
  const made = new ConcatConstant(sources);
  byKey.set(key, new WeakRef(made));
  return made;
}

export interface HorizontalFusionResult {
  graph: Graph;
  /** Number of linear nodes merged away (group members beyond the first). */
  merged: number;
}

function liftedTensors(g: Graph): Map<ValueId, Tensor> {
  const m = new Map<ValueId, Tensor>();
  for (const inp of g.inputs) if (inp.source.kind === 'lifted' && inp.source.derived === undefined) m.set(inp.id, inp.source.tensor);
  return m;
}

/** Linear nodes eligible for grouping, keyed by what must be equal inside a group. */
function collectGroups(g: Graph): Member[][] {
  const lifted = liftedTensors(g);
  const written = new Set<ValueId>();
  for (const n of g.nodes) for (const v of mutatedValues(n)) written.add(aliasRoot(g, v));
  const returned = new Set<ValueId>(outputValues(g.output).map((id) => aliasRoot(g, id)));
  const groups = new Map<string, Member[]>();
  for (const n of g.nodes) {
    if (n.op !== 'linear' || n.outputs.length !== 1) continue;
    const [xa, wa, ba] = n.args;
    if (xa?.kind !== 'value' || wa?.kind !== 'value') continue;
    const weight = lifted.get(wa.id);
    if (!weight || weight.ndim !== 2 || written.has(aliasRoot(g, wa.id))) continue;
    let bias: Tensor | null = null;
    if (ba !== undefined && !(ba.kind === 'const' && (ba.value === null || ba.value === undefined))) {
      if (ba.kind !== 'value') continue;
      const b = lifted.get(ba.id);
      if (!b || b.ndim !== 1 || b.dtype !== weight.dtype || written.has(aliasRoot(g, ba.id))) continue;
      bias = b;
    }
    const out = n.outputs[0]!;
    if (returned.has(out) || written.has(out)) continue;
    const key = `${xa.id}|${weight.dtype}|${weight.device.toString()}|${weight.shape[1]}|${bias ? 'b' : '-'}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push({ node: n, weight, bias });
  }
  return [...groups.values()].filter((m) => m.length >= 2);
}

/** Merges linears sharing an input into one GEMM over concatenated weights (see the header). */
export function horizontalLinearFusion(g: Graph): HorizontalFusionResult {
  const groups = collectGroups(g);
  if (groups.length === 0) return { graph: g, merged: 0 };
  const leaderOf = new Map<number, Member[]>();
  const absorbed = new Set<number>();
  for (const grp of groups) {
    leaderOf.set(grp[0]!.node.id, grp);
    for (const m of grp.slice(1)) absorbed.add(m.node.id);
  }
  // The fused weights become new lifted inputs (ids after the graph's values), then the nodes are rebuilt.
  const values = new Map(g.values);
  const inputs: GraphInput[] = [...g.inputs];
  let nextId = Math.max(-1, ...g.values.keys()) + 1;
  const addDerived = (c: ConcatConstant): ValueId => {
    const id = nextId++;
    const t = c.tensor;
    values.set(id, { id, shape: [...t.shape], strides: [...t.strides], dtype: t.dtype, device: t.device, offset: 0 });
    inputs.push({ id, source: { kind: 'lifted', tensor: t, derived: c } });
    return id;
  };
  const derivedIds = new Map<Member[], { w: ValueId; bias: ValueId | null }>();
  for (const grp of groups) {
    const w = addDerived(concatOf(grp.map((m) => m.weight)));
    const bias = grp[0]!.bias ? addDerived(concatOf(grp.map((m) => m.bias!))) : null;
    derivedIds.set(grp, { w, bias });
  }
  const fresh = new GraphBuilder({ ...g, inputs, values });
  for (const n of g.nodes) {
    if (absorbed.has(n.id)) continue;
    const grp = leaderOf.get(n.id);
    if (!grp) {
      fresh.keep(n);
      continue;
    }
    const ids = derivedIds.get(grp)!;
    const x = n.args[0] as { kind: 'value'; id: ValueId };
    const fused = fresh.call('linear', [new Val(x.id), new Val(ids.w), ids.bias === null ? null : new Val(ids.bias)])[0]!;
    const dim = fresh.info(fused).shape.length - 1;
    let start = 0;
    for (const m of grp) {
      const n0 = m.weight.shape[0]!;
      const [part] = fresh.call('slice', [new Val(fused), dim, start, start + n0, 1]);
      fresh.replace(m.node.outputs[0]!, part!);
      start += n0;
    }
  }
  return { graph: fresh.finish(), merged: groups.reduce((s, grp) => s + grp.length - 1, 0) };
}
