/**
 * Compile pass (inference programs, after the q/k-norm + rotary pass): a decode layer's
 * llm.qkNormRotary whose rotated k goes only into llm.reshapeAndCache becomes one
 * llm.qkNormRotaryCache, which writes the rotated keys (and the values) straight into the cache:
 *
 *   [qr, kr] = llm.qkNormRotary(q, k, wq, wk, eps, cos, sin, isNeox)
 *   [kc', vc'] = llm.reshapeAndCache(kr, v, kc, vc, slots)
 * becomes
 *   [qr, kc', vc'] = llm.qkNormRotaryCache(q, k, v, wq, wk, eps, cos, sin, isNeox, kc, vc, slots)
 *
 * The fused node takes the cache write's place (so the write stays where it was relative to every
 * other reader or writer of the caches), which moves qr later: every reader of qr must come after
 * the write (in Qwen3's decode step qr's one reader is pagedAttention, which reads the written
 * caches). kr must have no other reader and not be returned. Only where the fused op's dispatch
 * choice on the device is a library kernel (cuda; not the cpu, see kernelChosen). Qwen3-0.6B decode step: 28 launches fewer.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { GraphBuilder, nodeIndex, Val } from '../compile/passes/util.js';
import { llmChoice } from '../ops/library/policy.js';
import type { DeviceType } from '../runtime/device.js';

const OP = 'llm.qkNormRotaryCache';

export interface QkNormRotaryCacheResult {
  graph: Graph;
  /** Pairs fused (each one llm.qkNormRotaryCache node). */
  fused: number;
}

/* Not on the cpu: its kernel (native row code) serves eager decode steps (Qwen3's eager cpu decode
   calls the op itself); compiled cpu programs keep the primitives, as before that kernel existed
   (not measured there). */
const kernelChosen = (device: DeviceType): boolean => device !== 'cpu' && llmChoice(OP, device).kind === 'kernel';

function constOf(a: IRArg | undefined): unknown {
  return a?.kind === 'const' ? a.value : undefined;
}

/** Rewrites qkNormRotary + reshapeAndCache pairs (see the header); `fires` as in fuseQkNormRotary. */
export function fuseQkNormRotaryCache(graph: Graph, fires: (device: DeviceType) => boolean = kernelChosen): QkNormRotaryCacheResult {
  // Nodes earlier rewrites replaced stay in place until the final DCE and may still read values.
  const g = deadCodeElimination(graph);
  const { producer, readers } = nodeIndex(g);
  const returned = new Set(outputValues(g.output));

  /** reshapeAndCache node id -> the qkNormRotary node it absorbs. */
  const fuseAt = new Map<number, IRNode>();
  const removed = new Set<number>();
  g.nodes.forEach((write, at) => {
    if (write.op !== 'llm.reshapeAndCache' || write.outputs.length !== 2) return;
    const key = write.args[0];
    if (key?.kind !== 'value' || returned.has(key.id)) return;
    const pi = producer.get(key.id);
    const rot = pi === undefined ? undefined : g.nodes[pi];
    if (!rot || rot.op !== 'llm.qkNormRotary' || rot.outputs.length !== 2 || rot.outputs[1] !== key.id || removed.has(rot.id)) return;
    // kr is read by this write alone (once); qr by nothing up to the write.
    if ((readers.get(key.id) ?? []).length !== 1) return;
    if ((readers.get(rot.outputs[0]!) ?? []).some((r) => r <= at)) return;
    if (rot.args.slice(0, 4).concat(rot.args.slice(5, 7)).some((a) => a.kind !== 'value')) return;
    if (typeof constOf(rot.args[4]) !== 'number' || typeof constOf(rot.args[7]) !== 'boolean') return;
    if (write.args.slice(1, 5).some((a) => a.kind !== 'value')) return;
    const q = rot.args[0] as { kind: 'value'; id: ValueId };
    if (!fires(g.values.get(q.id)!.device.type)) return;
    fuseAt.set(write.id, rot);
    removed.add(rot.id);
  });
  if (fuseAt.size === 0) return { graph, fused: 0 };

  const fresh = new GraphBuilder(g);
  const val = (a: IRArg | undefined): Val => new Val((a as { kind: 'value'; id: ValueId }).id);
  for (const n of g.nodes) {
    if (removed.has(n.id)) continue;
    const rot = fuseAt.get(n.id);
    if (!rot) {
      fresh.keep(n);
      continue;
    }
    const r = rot.args;
    const w = n.args;
    const [qo, kc, vc] = fresh.call(OP, [val(r[0]), val(r[1]), val(w[1]), val(r[2]), val(r[3]), constOf(r[4]) as number, val(r[5]), val(r[6]), constOf(r[7]) as boolean, val(w[2]), val(w[3]), val(w[4])]);
    fresh.replace(rot.outputs[0]!, qo!);
    fresh.replace(n.outputs[0]!, kc!);
    fresh.replace(n.outputs[1]!, vc!);
  }
  return { graph: fresh.finish(), fused: fuseAt.size };
}
