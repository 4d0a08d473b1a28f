/**
 * Compile pass (inference programs, after the linearSiluMul pass): the residual add and RMSNorm
 * before a linear become the linear's prologue, one llm.addRmsNormLinear:
 *
 *   s = add(a, r, 1)                          (optional: without it the norm reads x directly)
 *   y = rmsNorm(s, [K], gamma, eps)           over the last dim, with a weight
 *   out = linear(y, W, b)                     or llm.linearSiluAndMul(y, W, b) (gated)
 * becomes
 *   [out, s] = llm.addRmsNormLinear(a, r, gamma, eps, W, b, gated)   (r null without the add)
 *
 * y must have no other reader and not be returned; s may (it is the residual stream the next add
 * reads): the fused node's second output replaces it, and its place is the linear's, so every
 * other reader of s must come after the linear. Fires only where the op's dispatch choice on the
 * device is a library kernel that takes the site itself (LlmImpl.takes: its dtype, rows = the
 * product of the leading dims, and K): cuda's bfloat16 GEMV at most KILN_GEMV_MAX_ROWS rows,
 * webgpu's skinny GEMV at most 8 rows (float32, float16, bfloat16; K whole 16-byte words; its
 * workgroup memory). Elsewhere the op would fall back to its parts, one launch more than the
 * compiled add + norm kernel.
 * Qwen3-0.6B decode step at batch 1: 57 norms (the 56 add + norm kernels and the first layer's
 * plain norm) go into the qkv, gate/up and lm_head GEMVs.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { argValues, outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { GraphBuilder, Val } from '../compile/passes/util.js';
import { llmChoice } from '../ops/library/policy.js';
import type { DeviceType } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';

const OP = 'llm.addRmsNormLinear';

export interface AddRmsNormLinearResult {
  graph: Graph;
  /** Norms fused (each one llm.addRmsNormLinear node). */
  fused: number;
}

/** Where the pass fires by default: where the device's chosen kernel takes the product itself (see the header). */
export function addRmsNormLinearFires(device: DeviceType, dtype: DType, rows: number, k: number): boolean {
  const impl = llmChoice(OP, device);
  return impl.kind === 'kernel' && impl.takes?.(dtype, rows, k) === true;
}

function constOf(a: IRArg | undefined): unknown {
  if (a?.kind === 'const') return a.value;
  if (a?.kind === 'list') return a.items.map(constOf);
  return undefined;
}

interface Match {
  lin: IRNode;
  norm: IRNode;
  add: IRNode | null;
  gated: boolean;
}

/** Rewrites [add ->] rmsNorm -> linear / linearSiluAndMul (see the header); `fires` decides per site. */
export function fuseAddRmsNormLinear(graph: Graph, fires: (device: DeviceType, dtype: DType, rows: number, k: number) => boolean = addRmsNormLinearFires): AddRmsNormLinearResult {
  const g = deadCodeElimination(graph);
  const producer = new Map<ValueId, IRNode>();
  const readers = new Map<ValueId, number[]>();
  g.nodes.forEach((n, i) => {
    for (const o of n.outputs) producer.set(o, n);
    for (const a of n.args) for (const id of argValues(a)) readers.set(id, [...(readers.get(id) ?? []), i]);
  });
  const returned = new Set(outputValues(g.output));
  const value = (a: IRArg | undefined): ValueId | undefined => (a?.kind === 'value' ? a.id : undefined);
  const index = new Map(g.nodes.map((n, i) => [n.id, i]));

  const fuseAt = new Map<number, Match>();
  const removed = new Set<number>();
  for (const lin of g.nodes) {
    const gated = lin.op === 'llm.linearSiluAndMul';
    if (lin.op !== 'linear' && !gated) continue;
    const y = value(lin.args[0]);
    const w = value(lin.args[1]);
    if (y === undefined || w === undefined || lin.args.slice(1).some((a) => argValues(a).includes(y))) continue;
    const norm = producer.get(y);
    if (norm?.op !== 'rmsNorm' || returned.has(y) || readers.get(y)?.length !== 1 || removed.has(norm.id)) continue;
    const x = value(norm.args[0]);
    const gamma = value(norm.args[2]);
    const eps = constOf(norm.args[3]);
    if (x === undefined || gamma === undefined || typeof eps !== 'number' || !(eps > 0)) continue;
    const xi = g.values.get(x)!;
    const k = xi.shape.at(-1);
    const shape = constOf(norm.args[1]);
    if (!Array.isArray(shape) || shape.length !== 1 || shape[0] !== k || xi.shape.length < 1) continue;
    const gi = g.values.get(gamma)!;
    const wi = g.values.get(w)!;
    if (gi.dtype !== xi.dtype || gi.shape.length !== 1 || wi.dtype !== xi.dtype || wi.shape.length !== 2 || wi.shape[1] !== k) continue;
    const rows = xi.shape.slice(0, -1).reduce((p, s) => p * s, 1);
    if (!fires(xi.device.type, xi.dtype, rows, k!)) continue;
    // The add, when x is a same-shape, same-dtype sum (alpha 1) whose other readers all follow the linear.
    let add: IRNode | null = null;
    const p = producer.get(x);
    if (p?.op === 'add' && constOf(p.args[2]) === 1 && !removed.has(p.id)) {
      const [a, r] = [value(p.args[0]), value(p.args[1])];
      const same = (id: ValueId | undefined): boolean => {
        const v = id === undefined ? undefined : g.values.get(id);
        return v !== undefined && v.dtype === xi.dtype && v.shape.length === xi.shape.length && v.shape.every((s, i) => s === xi.shape[i]);
      };
      const later = (readers.get(x) ?? []).every((i) => g.nodes[i] === norm || i > index.get(lin.id)!);
      if (same(a) && same(r) && later) add = p;
    }
    fuseAt.set(lin.id, { lin, norm, add, gated });
    removed.add(norm.id);
    if (add) removed.add(add.id);
  }
  if (fuseAt.size === 0) return { graph, fused: 0 };

  const fresh = new GraphBuilder(g);
  for (const n of g.nodes) {
    if (removed.has(n.id)) continue;
    const m = fuseAt.get(n.id);
    if (!m) {
      fresh.keep(n);
      continue;
    }
    const [a, r] = m.add ? [value(m.add.args[0])!, value(m.add.args[1])!] : [value(m.norm.args[0])!, undefined];
    const bias = value(n.args[2]);
    const [out, h] = fresh.call(OP, [
      new Val(a),
      r === undefined ? null : new Val(r),
      new Val(value(m.norm.args[2])!),
      constOf(m.norm.args[3]) as number,
      new Val(value(n.args[1])!),
      bias === undefined ? null : new Val(bias),
      m.gated,
    ]);
    fresh.replace(n.outputs[0]!, out!);
    if (m.add) fresh.replace(m.add.outputs[0]!, h!);
  }
  return { graph: fresh.finish(), fused: fuseAt.size };
}
