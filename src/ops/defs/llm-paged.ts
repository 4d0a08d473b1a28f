/**
 * LLM library ops over a paged key/value cache (vLLM's PagedAttention layout), the two ops a
 * generation step needs to stay on the device with no host read and no shape that depends on a
 * sequence's length:
 *
 *   llm.reshapeAndCache(key, value, keyCache, valueCache, slotMapping)
 *       in place: keyCache.flat[slotMapping[n]] = key[n] (and values); slot < 0 skips the token
 *       (padding rows of a batch bucket), as vLLM's kernel does.
 *   llm.pagedAttention(query, keyCache, valueCache, blockTables, contextLens, scale)
 *       one query token per sequence over its cached keys: out[b, h] = softmax(scale * q[b, h] .
 *       K[b]^T) V[b], where sequence b's token t lives in block blockTables[b, t / blockSize] at
 *       row t % blockSize, for t < contextLens[b]; query head h reads kv head h / (Hq / Hkv)
 *       (grouped-query attention). A row with contextLens[b] = 0 gives zeros.
 *
 * Shapes: key/value [N, Hkv, D]; caches [numBlocks, blockSize, Hkv, D] (contiguous: kernels address
 * slots by arithmetic); query [B, Hq, D]; blockTables [B, maxBlocks] and contextLens [B] int32 or
 * int64; slotMapping [N] int32 or int64. Output [B, Hq, D] contiguous. The output's shape depends
 * on B only, so a compiled decode step is traced once per batch size and replays for any length.
 */
import { fmtShape, isContiguousStrides } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { dense, floatTensor, intTensor, positiveFloat, sameDevice, sameDtype, sameView } from './llm-common.js';

/** [numBlocks, blockSize, Hkv, D] of the caches, checked to be one contiguous layout and dtype. */
export function cacheGeometry(op: string, keyCache: TensorMeta, valueCache: TensorMeta): { numBlocks: number; blockSize: number; kvHeads: number; headDim: number } {
  floatTensor(op, 'keyCache', keyCache);
  floatTensor(op, 'valueCache', valueCache);
  if (keyCache.shape.length !== 4) throw new Error(`${op}: argument 'keyCache' must be [numBlocks, blockSize, kvHeads, headDim], got ${describe(keyCache)}`);
  if (valueCache.shape.length !== 4 || valueCache.shape.some((s, i) => s !== keyCache.shape[i])) {
    throw new Error(`${op}: argument 'valueCache' (${describe(valueCache)}) must have the shape of 'keyCache' (${describe(keyCache)})`);
  }
  sameDtype(op, ['keyCache', keyCache], ['valueCache', valueCache]);
  sameDevice(op, ['keyCache', keyCache], ['valueCache', valueCache]);
  for (const [name, t] of [['keyCache', keyCache], ['valueCache', valueCache]] as const) {
    if (!isContiguousStrides(t.shape, t.strides)) throw new Error(`${op}: argument '${name}' (${describe(t)}) must be contiguous (strides [${t.strides.join(', ')}])`);
  }
  const [numBlocks, blockSize, kvHeads, headDim] = keyCache.shape as [number, number, number, number];
  return { numBlocks, blockSize, kvHeads, headDim };
}

function rowsOf(op: string, name: string, t: TensorMeta, kvHeads: number, headDim: number, cacheShape: readonly number[]): number {
  floatTensor(op, name, t);
  if (t.shape.length !== 3 || t.shape[1] !== kvHeads || t.shape[2] !== headDim) {
    throw new Error(`${op}: argument '${name}' must be [N, ${kvHeads}, ${headDim}] to match the cache ${fmtShape(cacheShape)}, got ${describe(t)}`);
  }
  return t.shape[0]!;
}

export const reshapeAndCache = defineOp({
  name: 'llm.reshapeAndCache',
  args: [
    { name: 'key', type: 'Tensor' },
    { name: 'value', type: 'Tensor' },
    { name: 'keyCache', type: 'Tensor', mutated: true },
    { name: 'valueCache', type: 'Tensor', mutated: true },
    { name: 'slotMapping', type: 'Tensor' },
  ],
  outputs: [
    { name: 'keyCache', type: 'Tensor', aliasOf: 'keyCache' },
    { name: 'valueCache', type: 'Tensor', aliasOf: 'valueCache' },
  ],
  tags: ['inplace'],
  meta(key: TensorMeta, value: TensorMeta, keyCache: TensorMeta, valueCache: TensorMeta, slotMapping: TensorMeta): OutMeta[] {
    const op = 'llm.reshapeAndCache';
    const g = cacheGeometry(op, keyCache, valueCache);
    // The cache's shape is formatted only for an error (a decode step calls this 28 times).
    const n = rowsOf(op, 'key', key, g.kvHeads, g.headDim, keyCache.shape);
    if (rowsOf(op, 'value', value, g.kvHeads, g.headDim, keyCache.shape) !== n) throw new Error(`${op}: 'key' (${describe(key)}) and 'value' (${describe(value)}) must have the same number of tokens`);
    sameDtype(op, ['key', key], ['keyCache', keyCache]);
    sameDtype(op, ['value', value], ['valueCache', valueCache]);
    sameDevice(op, ['key', key], ['keyCache', keyCache]);
    sameDevice(op, ['value', value], ['keyCache', keyCache]);
    intTensor(op, 'slotMapping', slotMapping);
    if (slotMapping.shape.length !== 1 || slotMapping.shape[0] !== n) throw new Error(`${op}: argument 'slotMapping' must be [${n}] (one slot per token of 'key' ${fmtShape(key.shape)}), got ${describe(slotMapping)}`);
    sameDevice(op, ['slotMapping', slotMapping], ['keyCache', keyCache]);
    return [sameView(keyCache), sameView(valueCache)];
  },
});

export const pagedAttention = defineOp({
  name: 'llm.pagedAttention',
  args: [
    { name: 'query', type: 'Tensor' },
    { name: 'keyCache', type: 'Tensor' },
    { name: 'valueCache', type: 'Tensor' },
    { name: 'blockTables', type: 'Tensor' },
    { name: 'contextLens', type: 'Tensor' },
    { name: 'scale', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(query: TensorMeta, keyCache: TensorMeta, valueCache: TensorMeta, blockTables: TensorMeta, contextLens: TensorMeta, scale: number): OutMeta {
    const op = 'llm.pagedAttention';
    const g = cacheGeometry(op, keyCache, valueCache);
    floatTensor(op, 'query', query);
    if (query.shape.length !== 3 || query.shape[2] !== g.headDim) throw new Error(`${op}: argument 'query' must be [B, heads, ${g.headDim}] (head dim of the cache ${fmtShape(keyCache.shape)}), got ${describe(query)}`);
    const [b, heads] = query.shape as [number, number];
    if (heads % g.kvHeads !== 0) throw new Error(`${op}: query heads (${heads}) must be a multiple of the cache's kv heads (${g.kvHeads}) for grouped-query attention`);
    sameDtype(op, ['query', query], ['keyCache', keyCache]);
    sameDevice(op, ['query', query], ['keyCache', keyCache]);
    intTensor(op, 'blockTables', blockTables);
    if (blockTables.shape.length !== 2 || blockTables.shape[0] !== b) throw new Error(`${op}: argument 'blockTables' must be [${b}, maxBlocks] (one row per query row), got ${describe(blockTables)}`);
    intTensor(op, 'contextLens', contextLens);
    if (contextLens.shape.length !== 1 || contextLens.shape[0] !== b) throw new Error(`${op}: argument 'contextLens' must be [${b}], got ${describe(contextLens)}`);
    sameDevice(op, ['blockTables', blockTables], ['keyCache', keyCache]);
    sameDevice(op, ['contextLens', contextLens], ['keyCache', keyCache]);
    positiveFloat(op, 'scale', scale);
    return dense(query.shape, query.dtype, query.device);
  },
});
