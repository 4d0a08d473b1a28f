/**
 * The per-call plan of every value's metadata (shape, strides, dtype, offset) for one input
 * signature, shared by the code generators' programs (JS/Wasm/C on cpu, CUDA C on cuda). Collapsing
 * dims contiguous in every operand is tensor/layout.ts's coalesceDims.
 */
import type { ValueId } from '../ir.js';
import { type Lowered, type MetaLike, nodeMeta } from '../lower/lower.js';
import type { Tensor } from '../../tensor/tensor.js';

/** Plans kept per program before the cache is reset (bounds memory under many input layouts). */
const MAX_PLANS = 64;

/**
 * Every value's metadata for these inputs, from the nodes' meta functions; memoised in `plans`
 * by the inputs' dtypes, shapes, strides and offsets.
 */
export function planValueMetas(low: Lowered, inputs: readonly Tensor[], plans: Map<string, Map<ValueId, MetaLike>>): Map<ValueId, MetaLike> {
  let key = '';
  for (const t of inputs) key += `${t.dtype}[${t.shape.join(',')}|${t.strides.join(',')}|${t.offset}]`;
  let p = plans.get(key);
  if (p) return p;
  const plan = new Map<ValueId, MetaLike>();
  low.graph.inputs.forEach((inp, i) => {
    const t = inputs[i]!;
    plan.set(inp.id, { shape: t.shape, strides: t.strides, dtype: t.dtype, device: t.device, offset: t.offset });
  });
  for (const n of low.nodes) nodeMeta(n, plan).forEach((m, k) => plan.set(n.outputs[k]!, m));
  if (plans.size > MAX_PLANS) plans.clear();
  plans.set(key, plan);
  p = plan;
  return p;
}
