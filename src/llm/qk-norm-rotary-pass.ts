/**
 * Compile pass (inference programs): per-head q/k RMSNorm followed by RoPE onto llm.qkNormRotary.
 *
 *   qn = rmsNorm(q, [D], wq, eps); qr = llm.applyRotaryEmb(transpose(qn, 1, 2), cos, sin)
 *   kn = rmsNorm(k, [D], wk, eps); kr = llm.applyRotaryEmb(transpose(kn, 1, 2), cos, sin)
 * becomes
 *   [qr, kr] = llm.qkNormRotary(transpose(q, 1, 2), transpose(k, 1, 2), wq, wk, eps, cos, sin)
 *
 * (the rotary node comes from the rotate-half rewrite, src/llm/rewrites.ts, which runs first). The
 * transposes between norm and rotation (any number, none touching the last dim) commute with a
 * norm over the last dim, so they move onto the norm's input; every rewritten chain is checked to
 * give the fused op's output the layout the rotary output had, or left alone. Two chains pair when
 * they share cos, sin, style, eps, dtype, head size and device, and are consecutive candidates in
 * graph order; the fused node takes the later rotary's place, so the earlier rotary's result must
 * have no reader before it. Norm and transpose results must have no other reader (else the norm
 * would run anyway). Only where the op's dispatch choice on the device is a library kernel (cuda):
 * on the cpu its reference composition is what the unfused graph already computes.
 *
 * Qwen3-0.6B per forward: 56 norm kernels and 56 rotary kernels become 28 launches.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { GraphBuilder, nodeIndex, Val } from '../compile/passes/util.js';
import { finfoEps } from '../ops/defs/linalg.js';
import { getOp } from '../ops/registry.js';
import type { OutMeta } from '../ops/schema.js';
import type { DeviceType } from '../runtime/device.js';
import { preservedStrides } from '../tensor/layout.js';
import { llmChoice } from '../ops/library/policy.js';

const OP = 'llm.qkNormRotary';

interface Chain {
  /** The rotary node and its index in the graph. */
  readonly rotary: IRNode;
  readonly at: number;
  /** Nodes removed with it: the norm and the transposes between. */
  readonly inner: readonly IRNode[];
  readonly input: ValueId;
  readonly weight: ValueId;
  /** Transposes (dim pairs) applied to the norm's output, in order. */
  readonly transposes: readonly (readonly [number, number])[];
  readonly eps: number;
  readonly cos: ValueId;
  readonly sin: ValueId;
  readonly isNeox: boolean;
  /** What must be equal for two chains to share a launch. */
  readonly key: string;
}

function constOf(a: IRArg | undefined): unknown {
  if (!a) return undefined;
  if (a.kind === 'const') return a.value;
  if (a.kind === 'list') return a.items.map(constOf);
  return undefined;
}

export interface QkNormRotaryResult {
  graph: Graph;
  /** Pairs fused (each one llm.qkNormRotary node). */
  fused: number;
}

/** Whether the pass fires on a device type: where the op's dispatch choice is a library kernel. */
const kernelChosen = (device: DeviceType): boolean => llmChoice(OP, device).kind === 'kernel';

/**
 * Rewrites paired q/k norm + rotary chains onto llm.qkNormRotary (see the header). `fires`: on
 * which device types (tests pass one that accepts the cpu, to check the rewrite there).
 */
export function fuseQkNormRotary(graph: Graph, fires: (device: DeviceType) => boolean = kernelChosen): QkNormRotaryResult {
  // The rewrites before this pass leave the nodes they replaced in place (dead until the final
  // DCE), and those still read the norm and transpose results: drop them first.
  const g = deadCodeElimination(graph);
  const { producer, readers } = nodeIndex(g);
  const returned = new Set(outputValues(g.output));
  const only = (id: ValueId, reader: number): boolean => !returned.has(id) && (readers.get(id) ?? []).every((r) => r === reader) && (readers.get(id)?.length ?? 0) === 1;

  const chains: Chain[] = [];
  g.nodes.forEach((rot, at) => {
    if (rot.op !== 'llm.applyRotaryEmb' || rot.outputs.length !== 1) return;
    const [xa, ca, sa] = rot.args;
    const isNeox = constOf(rot.args[3]);
    if (xa?.kind !== 'value' || ca?.kind !== 'value' || sa?.kind !== 'value' || typeof isNeox !== 'boolean') return;
    const inner: IRNode[] = [];
    const transposes: [number, number][] = [];
    let cur = xa.id;
    let reader = at;
    for (;;) {
      const pi = producer.get(cur);
      const p = pi === undefined ? undefined : g.nodes[pi];
      if (!p || pi === undefined || !only(cur, reader)) return;
      if (p.op === 'transpose') {
        const src = p.args[0];
        const rank = src?.kind === 'value' ? g.values.get(src.id)!.shape.length : 0;
        const dims = [constOf(p.args[1]), constOf(p.args[2])].map((d) => (typeof d === 'number' ? (d < 0 ? d + rank : d) : -1));
        if (src?.kind !== 'value' || dims.some((d) => d < 0 || d >= rank - 1)) return;
        transposes.unshift([dims[0]!, dims[1]!]);
        inner.push(p);
        cur = src.id;
        reader = pi;
        continue;
      }
      if (p.op !== 'rmsNorm') return;
      const [ya, shapeA, wa, epsA] = p.args;
      if (ya?.kind !== 'value' || wa?.kind !== 'value') return;
      const y = g.values.get(ya.id)!;
      const d = y.shape[y.shape.length - 1];
      const ns = constOf(shapeA);
      if (!Array.isArray(ns) || ns.length !== 1 || ns[0] !== d) return;
      const epsV = constOf(epsA);
      const eps = typeof epsV === 'number' ? epsV : epsV === null || epsV === undefined ? finfoEps(y.dtype) : NaN;
      if (!(eps > 0)) return;
      const w = g.values.get(wa.id)!;
      if (w.dtype !== y.dtype || w.shape.length !== 1) return;
      if (!fires(y.device.type)) return;
      inner.push(p);
      const key = `${ca.id}|${sa.id}|${isNeox}|${eps}|${y.dtype}|${d}|${y.device.toString()}`;
      chains.push({ rotary: rot, at, inner, input: ya.id, weight: wa.id, transposes, eps, cos: ca.id, sin: sa.id, isNeox, key });
      return;
    }
  });

  // The fused op's output layout for a chain (the transposed input's, kept) must be the rotary's.
  const layoutKept = (c: Chain): boolean => {
    let info: OutMeta = g.values.get(c.input)!;
    for (const [d0, d1] of c.transposes) info = getOp('transpose').meta(info, d0, d1) as OutMeta;
    const want = g.values.get(c.rotary.outputs[0]!)!;
    const strides = preservedStrides(info.shape, info.shape, info.strides);
    return strides.every((s, i) => s === want.strides[i]) && info.shape.every((s, i) => s === want.shape[i]);
  };
  const pairs: [Chain, Chain][] = [];
  for (let i = 0; i + 1 < chains.length; i++) {
    const a = chains[i]!;
    const b = chains[i + 1]!;
    if (a.key !== b.key || !layoutKept(a) || !layoutKept(b)) continue;
    // a's result moves to b's position: nothing before b may read it.
    if ((readers.get(a.rotary.outputs[0]!) ?? []).some((r) => r <= b.at)) continue;
    pairs.push([a, b]);
    i++;
  }
  if (pairs.length === 0) return { graph, fused: 0 };

  const removed = new Set<number>();
  const fuseAt = new Map<number, [Chain, Chain]>();
  for (const [a, b] of pairs) {
    for (const n of [...a.inner, ...b.inner, a.rotary]) removed.add(n.id);
    fuseAt.set(b.rotary.id, [a, b]);
  }
  const fresh = new GraphBuilder(g);
  for (const n of g.nodes) {
    const pair = fuseAt.get(n.id);
    if (pair) {
      const [a, b] = pair;
      const moved = (c: Chain): Val => c.transposes.reduce((v, [d0, d1]) => fresh.op('transpose', v, d0, d1), new Val(c.input));
      const [qo, ko] = fresh.call(OP, [moved(a), moved(b), new Val(a.weight), new Val(b.weight), a.eps, new Val(a.cos), new Val(a.sin), a.isNeox]);
      fresh.replace(a.rotary.outputs[0]!, qo!);
      fresh.replace(b.rotary.outputs[0]!, ko!);
      continue;
    }
    if (!removed.has(n.id)) fresh.keep(n);
  }
  return { graph: fresh.finish(), fused: pairs.length };
}
