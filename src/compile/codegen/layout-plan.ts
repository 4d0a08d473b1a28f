/**
 * Layout helpers shared by the code generators' programs (JS/Wasm/C on cpu, CUDA C on cuda):
 * collapsing dims that are contiguous in every operand, and the per-call plan of every value's
 * metadata (shape, strides, dtype, offset) for one input signature.
 */
import type { ValueId } from '../ir.js';
import { type Lowered, type MetaLike, nodeMeta } from '../lower/lower.js';
import type { Tensor } from '../../tensor/tensor.js';

/**
 * Drops size-1 dims and merges neighbours that are contiguous in every operand's strides, so a
 * kernel loops over as few dims as possible. A 0-d result becomes one dim of size 1, stride 0.
 */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const size = shape[d]!;
    if (size === 1) continue;
    const last = outShape.length - 1;
    if (last >= 0 && size !== 0 && outShape[last] !== 0 && strides.every((s, k) => outStrides[k]![last] === s[d]! * size)) {
      outShape[last]! *= size;
      strides.forEach((s, k) => (outStrides[k]![last] = s[d]!));
    } else {
      outShape.push(size);
      strides.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  if (outShape.length === 0) {
    outShape.push(1);
    strides.forEach((_, k) => outStrides[k]!.push(0));
  }
  return { shape: outShape, strides: outStrides };
}

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
