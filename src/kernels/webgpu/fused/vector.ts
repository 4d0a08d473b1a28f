/**
 * Whether a pointwise launch runs vectorised, and how (issue #20: one element per invocation left
 * the H200's pointwise kernels at about half of copy bandwidth, float16 and bfloat16 stores worse,
 * through atomics on shared words). A vectorised kernel (render.ts) has each invocation step handle
 * V = 4 (else 2) consecutive elements of the iteration space: operands contiguous along the
 * innermost dim are read and written as one vector (vec4<f32>, vec4<f16>, 16- and 8-bit elements
 * as whole u32 words: storage.ts's vector forms), operands broadcast along it (stride 0) as one
 * element per vector; every lane runs the scalar kernel's element code, so values are bit-identical.
 * Elements past the last whole vector (only possible when the coalesced space is one dim) are a
 * scalar tail run by invocation 0.
 *
 * The plan is decided per launch from the layout (sizes, strides, offsets are metadata words, so
 * a pipeline is memoised by its plan as well): every operand's innermost coalesced stride is 1 or
 * 0, the outputs' 1; a stride-1 operand's offset and outer strides are multiples of V (its vectors
 * start on vector boundaries); with more than one coalesced dim the innermost size is a multiple of
 * V (no vector crosses a row); no int64 binding; every vector-accessed buffer's size is a multiple
 * of the vector's bytes (a runtime-sized array of vectors does not reach a partial last vector;
 * the caching allocator's sizes are multiples of 512). KILN_WEBGPU_VEC_POINTWISE=0 turns it off
 * (read at every launch, for an A/B in one process). KILN_WEBGPU_VEC_STEPS sets how many vectors an
 * invocation loads before computing (render.ts): one vector of 8 or 16 bytes per invocation leaves
 * too few bytes in flight where the math holds many registers.
 */
import { getOption } from '../../../runtime/config.js';
import { hasVectorForm, kindBytes, type VecWidth } from '../storage.js';
import type { FusedLayout } from './layout.js';
import type { FusedBinding } from './render.js';

export interface VectorPlan {
  readonly vec: VecWidth;
  /** Per operand (outputs first): accessed a vector at a time (innermost stride 1) or one element per vector (stride 0). */
  readonly operandVector: readonly boolean[];
  /** Vectors an invocation loads (all before computing any) per loop step: KILN_WEBGPU_VEC_STEPS. */
  readonly steps: number;
}

/** Whether binding b is accessed as vectors under `plan` (some operand on it is). */
export function vectorBinding(plan: VectorPlan, operandBinding: readonly number[], b: number): boolean {
  return operandBinding.some((x, k) => x === b && plan.operandVector[k] === true);
}

/** A stable text of a plan (part of a pipeline's memo key). */
export const planKey = (plan: VectorPlan | null): string => (plan === null ? '' : `|v${plan.vec}${plan.operandVector.map((v) => (v ? 'v' : 's')).join('')}${plan.steps > 1 ? `x${plan.steps}` : ''}`);

/** Vectors per invocation step (KILN_WEBGPU_VEC_STEPS, at most 8: more only adds registers). */
export const vectorSteps = (): number => Math.min(8, Math.max(1, getOption('KILN_WEBGPU_VEC_STEPS')));

/**
 * The vector plan of a pointwise launch, or null for the scalar kernel. `capacities` are the
 * bindings' buffer sizes in bytes (null: not known, as for describe()'s traced layout).
 */
export function vectorPlan(L: FusedLayout, nOut: number, bindings: readonly FusedBinding[], operandBinding: readonly number[], capacities: readonly number[] | null): VectorPlan | null {
  if (L.kind !== 'pointwise' || !getOption('KILN_WEBGPU_VEC_POINTWISE')) return null;
  if (bindings.some((b) => b.kind === 'i64')) return null;
  const R = L.oshape.length;
  const inner = L.oshape[R - 1]!;
  if (inner === 0) return null;
  const innerStride = L.ost.map((st) => st[R - 1]!);
  if (innerStride.some((s) => s !== 0 && s !== 1)) return null;
  if (innerStride.slice(0, nOut).some((s) => s !== 1)) return null;
  const operandVector = innerStride.map((s) => s === 1);
  for (const V of [4, 2] as const) {
    if (R > 1 && inner % V !== 0) continue;
    const ok = operandVector.every((vec, k) => {
      if (!vec) return true;
      const kind = bindings[operandBinding[k]!]!.kind;
      if (kind === 'i64' || !hasVectorForm(kind, V)) return false;
      return L.offsets[k]! % V === 0 && L.ost[k]!.every((s, d) => d === R - 1 || s % V === 0);
    });
    if (!ok) continue;
    const plan: VectorPlan = { vec: V, operandVector, steps: vectorSteps() };
    const sized = bindings.every((b, i) => {
      if (!vectorBinding(plan, operandBinding, i) || capacities === null) return true;
      return b.kind !== 'i64' && capacities[i]! % (V * kindBytes(b.kind)) === 0;
    });
    if (sized) return plan;
  }
  return null;
}
