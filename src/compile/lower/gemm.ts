/**
 * GEMM steps with fused epilogues. After scheduling, a float32 `linear` extern becomes a 'gemm'
 * step (run by the compiled float32 GEMM with the weight packed once per weight version), and the
 * pointwise kernel that consumes its result (GELU, a residual add...) is folded into it as an
 * epilogue applied to the accumulators before the store, so the linear's output is never written
 * and read back. A kernel is folded only when:
 * - it is a pointwise group over exactly the linear's output shape with one output, and the linear
 *   output is read by nothing else (no other step, not returned);
 * - each of its other inputs has the output's shape ('full') or is one row broadcast over the
 *   rows ('row', like a bias), and is available before the linear runs (the fused step runs at the
 *   linear's position), with no mutation in between;
 * - the code generator accepts the group (`canFuse`: every op has a float32 Wasm form, or C form on
 *   the native path).
 * Which linears qualify (GEMM steps on at all, operands the compiled GEMM takes) is the target's
 * answer (`GemmRules`, fusion-rules.ts).
 */
import { numel, shapeEquals } from '../../tensor/layout.js';
import type { ValueId, ValueInfo } from '../ir.js';
import { outputValues } from '../ir.js';
import { type LNode, type Lowered, nodeInputs } from './lower.js';
import type { KernelGroup, Step } from './schedule.js';
import type { GemmRules } from './fusion-rules.js';

export type EpilogueInput = { readonly id: ValueId; readonly kind: 'full' | 'row' };

export interface GemmStep {
  readonly kind: 'gemm';
  readonly node: LNode;
  /** The folded pointwise kernel (its JS kernel stays compiled: the fallback path runs it). */
  readonly epilogue: KernelGroup | null;
  /** The epilogue's inputs other than the linear's output. */
  readonly epilogueInputs: readonly EpilogueInput[];
}

/** Whether a linear node can run as a compiled GEMM under `rules` (shapes/dtypes at trace time). */
export function gemmEligible(n: LNode, low: Lowered, rules: GemmRules): boolean {
  if (n.op !== 'linear' || n.kind !== 'extern' || n.outputs.length !== 1) return false;
  if (!rules.enabled()) return false;
  const [xa, wa, ba] = n.args;
  if (xa?.kind !== 'value' || wa?.kind !== 'value') return false;
  const info = (id: ValueId): ValueInfo | undefined => low.values.get(id);
  const x = info(xa.id);
  const w = info(wa.id);
  const out = info(n.outputs[0]!);
  if (!x || !w || !out || x.shape.length < 1 || w.shape.length !== 2) return false;
  if (!rules.operand(x) || !rules.operand(w) || !rules.operand(out)) return false;
  if (ba && !(ba.kind === 'const' && (ba.value === null || ba.value === undefined))) {
    if (ba.kind !== 'value') return false;
    const b = info(ba.id);
    if (!b || !rules.operand(b) || b.shape.length !== 1) return false;
  }
  return true;
}

function rowInput(shape: readonly number[], n: number): boolean {
  return shape.length >= 1 && shape[shape.length - 1] === n && numel(shape) === n;
}

/** Rewrites eligible linear externs into gemm steps, folding their consumer kernel where allowed. */
export function fuseGemms(low: Lowered, steps: readonly Step[], rules: GemmRules, canFuse: (g: KernelGroup) => boolean): (Step | GemmStep)[] {
  const out: (Step | GemmStep | null)[] = [...steps];
  const returned = new Set(outputValues(low.graph.output));
  const producedAt = new Map<ValueId, number>();
  steps.forEach((s, i) => {
    for (const o of s.kind === 'kernel' ? s.group.outputs : s.node.outputs) producedAt.set(o, i);
  });
  const readers = (id: ValueId): number[] => {
    const r: number[] = [];
    steps.forEach((s, i) => {
      if ((s.kind === 'kernel' ? s.group.inputs : nodeInputs(s.node)).includes(id)) r.push(i);
    });
    return r;
  };
  steps.forEach((s, i) => {
    if (s.kind !== 'extern' || !gemmEligible(s.node, low, rules)) return;
    const v = s.node.outputs[0]!;
    const vShape = low.values.get(v)!.shape;
    const plain: GemmStep = { kind: 'gemm', node: s.node, epilogue: null, epilogueInputs: [] };
    out[i] = plain;
    const rs = readers(v);
    if (returned.has(v) || rs.length !== 1) return;
    const j = rs[0]!;
    const k = steps[j]!;
    if (k.kind !== 'kernel' || k.group.kind !== 'pointwise' || k.group.outputs.length !== 1 || !shapeEquals(k.group.shape, vShape)) return;
    for (let t = i + 1; t < j; t++) {
      const m = steps[t]!;
      if (m.kind !== 'kernel' && m.node.mutates) return;
    }
    const n = vShape[vShape.length - 1] ?? 1;
    const extra: EpilogueInput[] = [];
    for (const id of k.group.inputs) {
      if (id === v) continue;
      const at = producedAt.get(id);
      if (at !== undefined && at >= i) return;
      const shape = low.values.get(id)!.shape;
      if (shapeEquals(shape, vShape)) extra.push({ id, kind: 'full' });
      else if (rowInput(shape, n)) extra.push({ id, kind: 'row' });
      else return;
    }
    if (!canFuse(k.group)) return;
    out[i] = { kind: 'gemm', node: s.node, epilogue: k.group, epilogueInputs: extra };
    out[j] = null;
  });
  return out.filter((s): s is Step | GemmStep => s !== null);
}
