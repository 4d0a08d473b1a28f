/**
 * Compile pass (inference programs, after horizontal linear fusion): a SwiGLU MLP's concatenated
 * gate/up projection and its activation become one llm.linearSiluAndMul:
 *
 *   y = linear(x, W, b)                     W [2I, K]: gate rows, then up rows
 *   g = slice(y, -1, 0, I); u = slice(y, -1, I, 2I)     (or the same narrows)
 *   h = mul(silu(g), u)                     (or mul(u, silu(g)))
 * becomes
 *   h = llm.linearSiluAndMul(x, W, b)
 *
 * y, g, u and silu(g) must have no other reader and not be returned (else they are computed
 * anyway). The fused node takes the mul's place; its inputs are the linear's, defined earlier.
 * Only where the op's dispatch choice on the device is a library kernel (cuda). Qwen3-0.6B decode
 * step: the 28 silu * mul kernels go, and the [B, 2I] intermediate with them.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { Val } from '../compile/passes/util.js';
import { rebuildFused, valueUses } from './pass-rebuild.js';
import { llmChoice } from '../ops/library/policy.js';
import type { DeviceType } from '../runtime/device.js';

const OP = 'llm.linearSiluAndMul';

export interface LinearSiluMulResult {
  graph: Graph;
  /** MLPs fused (each one llm.linearSiluAndMul node). */
  fused: number;
}

const kernelChosen = (device: DeviceType): boolean => llmChoice(OP, device).kind === 'kernel';

function constOf(a: IRArg | undefined): unknown {
  return a?.kind === 'const' ? a.value : undefined;
}

/** Rewrites linear -> slices -> silu * mul (see the header); `fires` as in fuseQkNormRotary. */
export function fuseLinearSiluMul(graph: Graph, fires: (device: DeviceType) => boolean = kernelChosen): LinearSiluMulResult {
  const g = deadCodeElimination(graph);
  const { producer, readers } = valueUses(g);
  const returned = new Set(outputValues(g.output));
  const private_ = (id: ValueId, count = 1): boolean => !returned.has(id) && readers.get(id) === count;
  const value = (a: IRArg | undefined): ValueId | undefined => (a?.kind === 'value' ? a.id : undefined);

  /** The slice of the last dim [start, end) of a value: { source, start, end }, or null. */
  const sliceOf = (id: ValueId): { src: ValueId; start: number; end: number } | null => {
    const n = producer.get(id);
    if (!n || (n.op !== 'slice' && n.op !== 'narrow')) return null;
    const src = value(n.args[0]);
    if (src === undefined) return null;
    const rank = g.values.get(src)!.shape.length;
    const dimV = constOf(n.args[1]);
    // slice(x, dim, start, end, step) (horizontal fusion's halves) or narrow(x, dim, start, length).
    const start = constOf(n.args[2]);
    const third = constOf(n.args[3]);
    const end = n.op === 'narrow' && typeof start === 'number' && typeof third === 'number' ? start + third : third;
    const step = n.op === 'slice' ? (constOf(n.args[4]) ?? 1) : 1;
    if (typeof dimV !== 'number' || typeof start !== 'number' || typeof end !== 'number' || step !== 1) return null;
    return (dimV < 0 ? dimV + rank : dimV) === rank - 1 ? { src, start, end } : null;
  };

  const fuseAt = new Map<number, IRNode>();
  const removed = new Set<number>();
  for (const mulNode of g.nodes) {
    if (mulNode.op !== 'mul' || mulNode.args.length !== 2) continue;
    const [a, b] = [value(mulNode.args[0]), value(mulNode.args[1])];
    if (a === undefined || b === undefined) continue;
    const siluFirst = producer.get(a)?.op === 'silu';
    const [act, upId] = siluFirst ? [a, b] : [b, a];
    const siluNode = producer.get(act);
    if (siluNode?.op !== 'silu' || !private_(act) || !private_(upId)) continue;
    const gateId = value(siluNode.args[0]);
    if (gateId === undefined || !private_(gateId)) continue;
    const gs = sliceOf(gateId);
    const us = sliceOf(upId);
    if (!gs || !us || gs.src !== us.src || !private_(gs.src, 2)) continue;
    const lin = producer.get(gs.src);
    if (lin?.op !== 'linear' || value(lin.args[0]) === undefined || value(lin.args[1]) === undefined) continue;
    const w = g.values.get(value(lin.args[1])!)!;
    const half = w.shape.length === 2 ? w.shape[0]! / 2 : -1;
    if (gs.start !== 0 || gs.end !== half || us.start !== half || us.end !== 2 * half) continue;
    const y = g.values.get(gs.src)!;
    if (!fires(y.device.type)) continue;
    fuseAt.set(mulNode.id, lin);
    for (const id of [gateId, upId, act]) removed.add(producer.get(id)!.id);
    removed.add(lin.id);
  }
  if (fuseAt.size === 0) return { graph, fused: 0 };

  const fused = rebuildFused(g, removed, fuseAt, (b, _mul, lin) => {
    const bias = value(lin.args[2]);
    return b.call(OP, [new Val(value(lin.args[0])!), new Val(value(lin.args[1])!), bias === undefined ? null : new Val(bias)]);
  });
  return { graph: fused, fused: fuseAt.size };
}
