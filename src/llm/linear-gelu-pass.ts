/**
 * Compile pass (inference programs): a linear whose only reader is a GELU becomes one
 * llm.linearGelu (src/ops/defs/llm-linear-gelu.ts):
 *
 *   y = linear(x, W, b)            W [N, K], b [N] or none
 *   h = gelu(y, approximate)
 * becomes
 *   h = llm.linearGelu(x, W, b, approximate)
 *
 * y must have no other reader and not be returned (else it is computed anyway). The fused node
 * takes the gelu's place; its inputs are the linear's, defined earlier, and no node that writes a
 * tensor or draws random numbers may sit between the two (it could change them). Only where the op's
 * dispatch choice on the device is a library kernel (webgpu: the GELU in the GEMM's epilogue);
 * elsewhere the op would run its two parts anyway and the pass leaves the graph alone.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { isImpure, Val } from '../compile/passes/util.js';
import { rebuildFused, valueUses } from './pass-rebuild.js';
import { llmChoice } from '../ops/library/policy.js';
import type { DeviceType } from '../runtime/device.js';

const OP = 'llm.linearGelu';

export interface LinearGeluResult {
  graph: Graph;
  /** linear + gelu pairs fused (each one llm.linearGelu node). */
  fused: number;
}

const kernelChosen = (device: DeviceType): boolean => llmChoice(OP, device).kind === 'kernel';

/** Rewrites linear -> gelu (see the header); `fires` decides per device (tests force it). */
export function fuseLinearGelu(graph: Graph, fires: (device: DeviceType) => boolean = kernelChosen): LinearGeluResult {
  const g = deadCodeElimination(graph);
  const { producer, readers } = valueUses(g);
  const returned = new Set(outputValues(g.output));
  const value = (a: IRArg | undefined): ValueId | undefined => (a?.kind === 'value' ? a.id : undefined);
  const absent = (a: IRArg | undefined): boolean => a === undefined || (a.kind === 'const' && (a.value === null || a.value === undefined));

  const fuseAt = new Map<number, IRNode>();
  const removed = new Set<number>();
  for (const geluNode of g.nodes) {
    if (geluNode.op !== 'gelu') continue;
    const y = value(geluNode.args[0]);
    const approx = geluNode.args[1]?.kind === 'const' ? geluNode.args[1].value : 'none';
    if (y === undefined || (approx !== 'none' && approx !== 'tanh') || returned.has(y) || readers.get(y) !== 1) continue;
    const lin = producer.get(y);
    if (lin?.op !== 'linear' || value(lin.args[0]) === undefined || value(lin.args[1]) === undefined) continue;
    // The op's shapes: a 2-d weight, a [N] bias or none.
    const w = g.values.get(value(lin.args[1])!)!;
    const b = value(lin.args[2]);
    if (w.shape.length !== 2 || (b === undefined && !absent(lin.args[2]))) continue;
    if (b !== undefined && (g.values.get(b)!.shape.length !== 1 || g.values.get(b)!.shape[0] !== w.shape[0])) continue;
    if (!fires(g.values.get(y)!.device.type)) continue;
    const [from, to] = [g.nodes.indexOf(lin), g.nodes.indexOf(geluNode)];
    if (g.nodes.slice(from + 1, to).some(isImpure)) continue;
    fuseAt.set(geluNode.id, lin);
    removed.add(lin.id);
  }
  if (fuseAt.size === 0) return { graph, fused: 0 };

  const fused = rebuildFused(g, removed, fuseAt, (b, geluNode, lin) => {
    const bias = value(lin.args[2]);
    const approx = geluNode.args[1]?.kind === 'const' ? (geluNode.args[1].value as string) : 'none';
    return b.call(OP, [new Val(value(lin.args[0])!), new Val(value(lin.args[1])!), bias === undefined ? null : new Val(bias), approx]);
  });
  return { graph: fused, fused: fuseAt.size };
}
