/**
 * Which weights a compiled cuda program prefetches into L2, and before which step
 * (KILN_CUDA_L2_PREFETCH; the kernel is kernels/cuda/l2-prefetch.ts). A decode step at small
 * batches alternates weight-streaming steps (linears as GEMVs: DRAM-bound) with latency-bound steps
 * that read little (paged attention). Before each latency-bound step the program asks for the
 * weights of the streaming steps that follow it, in the order they run, up to the next
 * latency-bound step and within a byte budget (L2 holds 50 MB on an H200; what is fetched early
 * must still be there when its GEMV runs). The plan is made once per program from the scheduled
 * steps, on the final graph: the weights are the buffers the steps really read (a horizontal
 * fusion's concatenated weight, not the model's separate parameters).
 *
 * Only graph inputs lifted from the function's closure (parameters and compile-time constants)
 * are prefetched: their address is the same on every call, and nothing in the step writes them.
 */
import { getOp } from '../../../ops/registry.js';
import { itemSize } from '../../../tensor/dtype.js';
import type { IRArg, ValueId, ValueInfo } from '../../ir.js';

/** Steps during which the memory system is idle enough to stream the next weights. */
export const LATENCY_BOUND_OPS: ReadonlySet<string> = new Set(['llm.pagedAttention', 'llm.qkNormRotaryPagedAttention']);

/** Ops that stream whole weights, by the names of the arguments that hold them. */
export const STREAMED_WEIGHT_ARGS: Readonly<Record<string, readonly string[]>> = {
  linear: ['weight'],
  'llm.linearSiluAndMul': ['weight'],
  'llm.addRmsNormLinear': ['weight'],
  'llm.qkvLinear': ['qWeight', 'kWeight', 'vWeight'],
  'llm.gateUpSiluAndMul': ['gateWeight', 'upWeight'],
};

/** A scheduled step as the plan sees it: extern steps carry their node. */
export interface PlanStep {
  readonly kind: string;
  readonly node?: { readonly op: string; readonly args: readonly IRArg[] };
}

export interface L2PrefetchBudget {
  /** Bytes one prefetch may ask for in all. */
  readonly maxBytes: number;
  /** Weights one prefetch may name (the kernel's range count). */
  readonly maxRanges: number;
}

/**
 * Per step index (a latency-bound extern step), the weights to prefetch before it, in use order.
 * The walk stops at the next latency-bound step and at the first weight that does not fit the
 * budget, so a prefetch always covers the next weights to be read and never skips one.
 */
export function planL2Prefetch(steps: readonly PlanStep[], lifted: ReadonlySet<ValueId>, values: ReadonlyMap<ValueId, ValueInfo>, budget: L2PrefetchBudget): Map<number, ValueId[]> {
  const plan = new Map<number, ValueId[]>();
  const bytesOf = (id: ValueId): number => {
    const v = values.get(id)!;
    return v.shape.reduce((a, b) => a * b, 1) * itemSize(v.dtype);
  };
  steps.forEach((s, i) => {
    if (s.kind !== 'extern' || !s.node || !LATENCY_BOUND_OPS.has(s.node.op)) return;
    const ids: ValueId[] = [];
    let bytes = 0;
    walk: for (let j = i + 1; j < steps.length; j++) {
      const node = steps[j]!.kind === 'extern' ? steps[j]!.node : undefined;
      if (!node) continue;
      if (LATENCY_BOUND_OPS.has(node.op)) break;
      const names = STREAMED_WEIGHT_ARGS[node.op];
      if (!names) continue;
      const spec = getOp(node.op).args;
      for (const name of names) {
        const a = node.args[spec.findIndex((x) => x.name === name)];
        if (a?.kind !== 'value' || !lifted.has(a.id) || ids.includes(a.id)) continue;
        const b = bytesOf(a.id);
        if (ids.length === budget.maxRanges || bytes + b > budget.maxBytes) break walk;
        ids.push(a.id);
        bytes += b;
      }
    }
    if (ids.length > 0) plan.set(i, ids);
  });
  return plan;
}
