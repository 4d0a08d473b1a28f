/**
 * Compile pass (inference programs, after the qkNormRotaryCache pass, in its slot): on webgpu, a
 * decode layer's llm.qkNormRotaryCache whose rotated q goes only into an llm.pagedAttention of the
 * caches it returned becomes one llm.qkNormRotaryPagedAttention, whose kernel is the fused
 * paged-attention workgroup with the norm, rotary and cache write as its prologue (issue #20:
 * one dispatch a layer fewer, 28 in Qwen3-0.6B's decode step):
 *
 *   [qr, kc', vc'] = llm.qkNormRotaryCache(q, k, v, wq, wk, eps, cos, sin, isNeox, kc, vc, slots)
 *   o = llm.pagedAttention(qr, kc', vc', tables, lens, scale)
 * becomes
 *   [o, kc', vc'] = llm.qkNormRotaryPagedAttention(q, k, v, wq, wk, eps, cos, sin, isNeox, kc, vc, slots, tables, lens, scale)
 *
 * The fused node takes the attention's place, which moves the cache write later: no node between
 * the two may read the caches (any value aliasing them) or qr, and qr has no other reader and is
 * not returned. Only on webgpu, with KILN_WEBGPU_QK_ATTN, and where the op's dispatch choice there
 * is the library kernel.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../compile/ir.js';
import { outputValues } from '../compile/ir.js';
import { deadCodeElimination } from '../compile/passes/dce.js';
import { aliasRoot, GraphBuilder, nodeIndex, Val } from '../compile/passes/util.js';
import { llmChoice } from '../ops/library/policy.js';
import { getOption } from '../runtime/config.js';
import type { DeviceType } from '../runtime/device.js';

const OP = 'llm.qkNormRotaryPagedAttention';

export interface QkNormRotaryAttentionResult {
  graph: Graph;
  /** Pairs fused (each one llm.qkNormRotaryPagedAttention node). */
  fused: number;
}

const kernelChosen = (device: DeviceType): boolean => device === 'webgpu' && getOption('KILN_WEBGPU_QK_ATTN') && llmChoice(OP, device).kind === 'kernel';

const valueId = (a: IRArg | undefined): ValueId | undefined => (a?.kind === 'value' ? a.id : undefined);

/** Rewrites qkNormRotaryCache + pagedAttention pairs (see the header); `fires` decides per device (tests pass their own). */
export function fuseQkNormRotaryAttention(graph: Graph, fires: (device: DeviceType) => boolean = kernelChosen): QkNormRotaryAttentionResult {
  const g = deadCodeElimination(graph);
  const { producer, readers } = nodeIndex(g);
  const returned = new Set(outputValues(g.output));

  /** pagedAttention node id -> the qkNormRotaryCache node it absorbs. */
  const fuseAt = new Map<number, IRNode>();
  const removed = new Set<number>();
  g.nodes.forEach((attn, at) => {
    if (attn.op !== 'llm.pagedAttention' || attn.outputs.length !== 1) return;
    const qr = valueId(attn.args[0]);
    if (qr === undefined || returned.has(qr)) return;
    const pi = producer.get(qr);
    const rot = pi === undefined ? undefined : g.nodes[pi];
    if (!rot || pi === undefined || rot.op !== 'llm.qkNormRotaryCache' || rot.outputs.length !== 3 || rot.outputs[0] !== qr || removed.has(rot.id)) return;
    // Attention reads qr once, and the caches the write returned.
    if ((readers.get(qr) ?? []).length !== 1) return;
    if (valueId(attn.args[1]) !== rot.outputs[1] || valueId(attn.args[2]) !== rot.outputs[2]) return;
    if (valueId(attn.args[3]) === undefined || valueId(attn.args[4]) === undefined || attn.args[5]?.kind !== 'const' || typeof attn.args[5].value !== 'number') return;
    if (rot.args.some((a, i) => (i === 5 || i === 8 ? a.kind !== 'const' : a.kind !== 'value'))) return;
    // Nothing between them touches the caches (the write moves to the attention's place).
    const roots = new Set([rot.outputs[1]!, rot.outputs[2]!, valueId(rot.args[9])!, valueId(rot.args[10])!].map((v) => aliasRoot(g, v)));
    for (const id of g.values.keys()) {
      if (roots.has(aliasRoot(g, id)) && (readers.get(id) ?? []).some((i) => i > pi && i < at)) return;
    }
    if (!fires(g.values.get(qr)!.device.type)) return;
    fuseAt.set(attn.id, rot);
    removed.add(rot.id);
  });
  if (fuseAt.size === 0) return { graph, fused: 0 };

  const fresh = new GraphBuilder(g);
  const val = (a: IRArg | undefined): Val => new Val((a as { kind: 'value'; id: ValueId }).id);
  const constOf = (a: IRArg | undefined): unknown => (a?.kind === 'const' ? a.value : undefined);
  for (const n of g.nodes) {
    if (removed.has(n.id)) continue;
    const rot = fuseAt.get(n.id);
    if (!rot) {
      fresh.keep(n);
      continue;
    }
    const r = rot.args;
    const a = n.args;
    const [o, kc, vc] = fresh.call(OP, [val(r[0]), val(r[1]), val(r[2]), val(r[3]), val(r[4]), constOf(r[5]) as number, val(r[6]), val(r[7]), constOf(r[8]) as boolean, val(r[9]), val(r[10]), val(r[11]), val(a[3]), val(a[4]), constOf(a[5]) as number]);
    fresh.replace(n.outputs[0]!, o!);
    fresh.replace(rot.outputs[1]!, kc!);
    fresh.replace(rot.outputs[2]!, vc!);
  }
  return { graph: fresh.finish(), fused: fuseAt.size };
}
