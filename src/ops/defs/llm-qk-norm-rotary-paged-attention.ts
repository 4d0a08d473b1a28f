/**
 * LLM library op: a decode layer's q/k norm + rotary, its paged-cache write and its paged attention
 * in one call (llm.qkNormRotaryCache followed by llm.pagedAttention of the rotated q over the
 * written caches):
 *
 *   llm.qkNormRotaryPagedAttention(q, k, v, qWeight, kWeight, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping, blockTables, contextLens, scale)
 *     = [out, keyCache, valueCache]
 *     [q', keyCache, valueCache] = llm.qkNormRotaryCache(q, k, v, qWeight, kWeight, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping)
 *     out = llm.pagedAttention(q', keyCache, valueCache, blockTables, contextLens, scale)
 *
 * The rotated q is never materialised: webgpu's fused paged-attention workgroup normalises and
 * rotates its query heads and its kv head's new key row itself, writes the key and value rows into
 * their cache slot, and attends (issue #20: a decode step at batch 1 is bound by its dispatch count;
 * one dispatch a layer fewer). Results are those of the two ops (the same roundings). q is
 * [B, heads, headDim] (one query token per sequence, as llm.pagedAttention takes), k and v
 * [B, kvHeads, headDim]. kiln.compile maps a qkNormRotaryCache whose rotated q is read only by a
 * pagedAttention of the caches it returned onto it on webgpu (src/llm/qk-norm-rotary-attention-pass.ts,
 * behind KILN_WEBGPU_QK_ATTN); every other device runs the reference composition.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { relabelErrors } from './llm-common.js';
import { pagedAttention } from './llm-paged.js';
import { qkNormRotaryCache } from './llm-qk-norm-rotary-cache.js';

const OP = 'llm.qkNormRotaryPagedAttention';

/** Re-labels an error of one of the two ops this one composes with this op's name. */
const relabel = <T>(fn: () => T): T => relabelErrors(OP, /llm\.(qkNormRotaryCache|pagedAttention)\b/, fn);

export const qkNormRotaryPagedAttention = defineOp({
  name: OP,
  args: [
    { name: 'q', type: 'Tensor' },
    { name: 'k', type: 'Tensor' },
    { name: 'v', type: 'Tensor' },
    { name: 'qWeight', type: 'Tensor' },
    { name: 'kWeight', type: 'Tensor' },
    { name: 'eps', type: 'float' },
    { name: 'cos', type: 'Tensor' },
    { name: 'sin', type: 'Tensor' },
    { name: 'isNeox', type: 'bool' },
    { name: 'keyCache', type: 'Tensor', mutated: true },
    { name: 'valueCache', type: 'Tensor', mutated: true },
    { name: 'slotMapping', type: 'Tensor' },
    { name: 'blockTables', type: 'Tensor' },
    { name: 'contextLens', type: 'Tensor' },
    { name: 'scale', type: 'float' },
  ],
  outputs: [
    { name: 'out', type: 'Tensor' },
    { name: 'keyCache', type: 'Tensor', aliasOf: 'keyCache' },
    { name: 'valueCache', type: 'Tensor', aliasOf: 'valueCache' },
  ],
  tags: ['inplace'],
  meta(q: TensorMeta, k: TensorMeta, v: TensorMeta, qw: TensorMeta, kw: TensorMeta, eps: number, cos: TensorMeta, sin: TensorMeta, isNeox: boolean, keyCache: TensorMeta, valueCache: TensorMeta, slotMapping: TensorMeta, blockTables: TensorMeta, contextLens: TensorMeta, scale: number): OutMeta[] {
    const [qo, kc, vc] = relabel(() => qkNormRotaryCache.meta(q, k, v, qw, kw, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping) as OutMeta[]);
    const out = relabel(() => pagedAttention.meta(qo!, kc!, vc!, blockTables, contextLens, scale) as OutMeta);
    return [out, kc!, vc!];
  },
});
