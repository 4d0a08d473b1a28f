/**
 * LLM library op: a decode layer's q/k norm + rotary and its paged-cache write in one call
 * (llm.qkNormRotary followed by llm.reshapeAndCache of the rotated keys and the values):
 *
 *   llm.qkNormRotaryCache(q, k, v, qWeight, kWeight, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping)
 *     = [q', keyCache, valueCache]
 *     [q', k'] = llm.qkNormRotary(q, k, qWeight, kWeight, eps, cos, sin, isNeox)
 *     llm.reshapeAndCache(k', v, keyCache, valueCache, slotMapping)      (in place; slot < 0 skips)
 *
 * The rotated keys are never materialised: a kernel writes them straight into their cache slots, so
 * a compiled decode step launches one kernel per layer where it launched two (issue #17: the
 * decode step at batch 1 is bound by launch latency and small-kernel tails, not bytes). Results are
 * those of the two ops (the same rounding: the norm rounds to the dtype, the rotation rounds once).
 * k and v are [N, kvHeads, headDim] (the cache's geometry), q [N, heads, headDim] or any shape
 * llm.qkNormRotary takes. kiln.compile maps a qkNormRotary whose rotated k is read only by a
 * reshapeAndCache onto it (src/llm/qk-norm-rotary-cache-pass.ts, behind KILN_QK_NORM_ROTARY_CACHE).
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { relabelErrors } from './llm-common.js';
import { reshapeAndCache } from './llm-paged.js';
import { qkNormRotary } from './llm-qk-norm-rotary.js';

const OP = 'llm.qkNormRotaryCache';

/** Re-labels an error of one of the two ops this one composes with this op's name. */
const relabel = <T>(fn: () => T): T => relabelErrors(OP, /llm\.(qkNormRotary|reshapeAndCache)\b/, fn);

export const qkNormRotaryCache = defineOp({
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
  ],
  outputs: [
    { name: 'qOut', type: 'Tensor' },
    { name: 'keyCache', type: 'Tensor', aliasOf: 'keyCache' },
    { name: 'valueCache', type: 'Tensor', aliasOf: 'valueCache' },
  ],
  tags: ['inplace'],
  meta(q: TensorMeta, k: TensorMeta, v: TensorMeta, qw: TensorMeta, kw: TensorMeta, eps: number, cos: TensorMeta, sin: TensorMeta, isNeox: boolean, keyCache: TensorMeta, valueCache: TensorMeta, slotMapping: TensorMeta): OutMeta[] {
    const [qo] = relabel(() => qkNormRotary.meta(q, k, qw, kw, eps, cos, sin, isNeox) as OutMeta[]);
    // k' has k's shape, dtype and device: the cache write's checks on k are its checks on k'.
    const [kc, vc] = relabel(() => reshapeAndCache.meta(k, v, keyCache, valueCache, slotMapping) as OutMeta[]);
    return [qo!, kc!, vc!];
  },
});
