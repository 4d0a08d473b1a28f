/**
 * cuda kernel of llm.rotaryEmbedding, in place on query and key (codegen/llm.ts generateRope): one
 * block per token (grid-stride beyond the grid), its threads over (head, group of VP pairs) of q
 * and k together, cos/sin read from the cache row of the token's position. neox rotates pairs
 * (i, i + rot/2) with VP-wide vector loads of each half; gpt-j rotates (2i, 2i + 1) with 2VP-wide
 * loads. Only the first rotaryDim features of each head are touched. q/k may be [T, H*hs] or
 * [T, H, hs] with any token and head strides (dense features); other layouts are staged and
 * copied back. Positions outside the cache give NaN in the rotated features (checking them on
 * the host would need a device sync per call; the cpu kernel throws).
 */
import { ropeGeometry, rotaryEmbedding } from '../../ops/defs/llm.js';
import { assertNoOverlap } from '../../ops/library/overlap.js';
import { launch } from '../../runtime/cuda/launch.js';
import { itemSize } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import { generateRope, ROPE_MAX_BLOCK, ropeKernelName, type RopeSpec } from './codegen/llm.js';
import { copyTensor } from './core.js';
import { ptrOf, streamOf } from './device.js';
import { cachedKernel, registerCuda, Temps } from './llm-util.js';

/** Token and head strides of q/k with dense features, or null. */
function headStrides(t: Tensor, headSize: number): [number, number] | null {
  if (t.ndim === 3) return t.strides[2] === 1 || t.shape[2] === 1 ? [t.strides[0]!, t.strides[1]!] : null;
  return t.strides[1] === 1 || t.shape[1] === 1 ? [t.strides[0]!, headSize] : null;
}

/** Largest pairs-per-thread whose vectors (VP or 2VP elements, <= 16 bytes) every access can use. */
function pairsPerThread(neox: boolean, half: number, dtype: Tensor['dtype'], strides: number[], ptrs: number[]): number {
  const size = itemSize(dtype);
  for (let vp = (neox ? 16 : 8) / size; vp > 1; vp /= 2) {
    const width = neox ? vp : 2 * vp;
    if (half % vp === 0 && strides.every((s) => s % width === 0) && ptrs.every((p) => p % (width * size) === 0)) return vp;
  }
  return 1;
}

registerCuda(rotaryEmbedding.name, (_ctx, positions, query, key, headSize, cosSinCache, isNeox) => {
  const q = query as Tensor;
  const k = key as Tensor | null;
  const hs = headSize as number;
  const neox = isNeox as boolean;
  assertNoOverlap(rotaryEmbedding.name, ['query', q], ['key', k]);
  const g = ropeGeometry(positions as Tensor, q, k, hs, cosSinCache as Tensor, neox);
  if (g.tokens === 0 || g.qHeads + g.kHeads === 0) return k ? [q, k] : [q];
  const t = new Temps();
  try {
    const qd = headStrides(q, hs) ? q : t.dense(q);
    const kd = k && !headStrides(k, hs) ? t.dense(k) : k;
    const pos = (positions as Tensor).strides[0] === 1 ? (positions as Tensor) : t.dense(positions as Tensor);
    let cache = cosSinCache as Tensor;
    if (cache.strides[1] !== 1) cache = t.dense(cache);
    const [qts, qhs] = headStrides(qd, hs)!;
    const [kts, khs] = kd ? headStrides(kd, hs)! : [0, 0];
    const half = g.rotDim / 2;
    const ptrs = [ptrOf(qd), ...(kd ? [ptrOf(kd)] : [])];
    const vp = pairsPerThread(neox, half, q.dtype, kd ? [qts, qhs, kts, khs] : [qts, qhs], ptrs);
    const spec: RopeSpec = { dtype: q.dtype, cacheDtype: cache.dtype, posDtype: pos.dtype === 'int32' ? 'int32' : 'int64', neox, half, vp };
    const kern = cachedKernel(q.device.index, ropeKernelName(spec), () => generateRope(spec));
    const work = (g.qHeads + g.kHeads) * (half / vp);
    const block = Math.min(ROPE_MAX_BLOCK, Math.ceil(work / 32) * 32);
    launch(
      kern,
      [ptrOf(pos), ptrOf(qd), kd ? ptrOf(kd) : 0, ptrOf(cache), g.tokens, g.qHeads, g.kHeads, qts, qhs, kts, khs, cache.strides[0]!, cache.shape[0]!],
      { grid: Math.min(g.tokens, 2 ** 31 - 1), block },
      streamOf(q),
    );
    if (qd !== q) copyTensor(q, qd);
    if (k && kd && kd !== k) copyTensor(k, kd);
  } finally {
    t.dispose();
  }
  return k ? [q, k] : [q];
});
