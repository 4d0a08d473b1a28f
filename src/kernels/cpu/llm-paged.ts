/**
 * CPU kernels of llm.reshapeAndCache and llm.pagedAttention (ops/defs/llm-paged.ts). The caches
 * are read and written in place through their storage words, a row of headDim elements at a
 * time: decoding a whole bfloat16 cache per call (what denseValues would do) would cost the
 * cache's size per layer and step, where decode needs only the rows a sequence owns. Arithmetic
 * in JS doubles with an online softmax (one pass over the keys), rounded once on store. Bad slots,
 * block ids and lengths are RangeErrors naming the row (the cpu can check for free; the cuda
 * kernels report them through the device-side error word). On the native path, attention runs in
 * C (native/paged-c.ts: float32 accumulation, float32 or bfloat16 caches), and so do the cache
 * writes when key / value have the cache's dtype (native/rows.ts: bit copies of the rows).
 * llm.qkNormRotaryCache runs as one native call where it fits (neox, contiguous, float32 /
 * bfloat16: an eager cpu decode layer's q/k norms, rotaries and cache write), else as its
 * reference composition.
 */
import { pagedAttention, reshapeAndCache, cacheGeometry } from '../../ops/defs/llm-paged.js';
import { qkNormRotaryCache } from '../../ops/defs/llm-qk-norm-rotary-cache.js';
import { llmImpls } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { itemSize } from '../../tensor/dtype.js';
import { float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../../tensor/half.js';
import type { Tensor } from '../../tensor/tensor.js';
import { storageArray } from '../../tensor/typed.js';
import { registerCpu } from './llm.js';
import { denseValues, fromDense } from './numeric.js';
import { cpuPath } from './native/path.js';
import { nativePagedAttention } from './native/paged.js';
import { nativeCacheRows, nativeQkNormRotaryCache } from './native/rows.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Reads `n` elements of a contiguous float tensor from element `at` into `out` (as doubles). */
type RowReader = (at: number, n: number, out: Float64Array) => void;
/** Writes `n` doubles from `src` (from `from`) into the tensor at element `at`, rounded to its dtype. */
type RowWriter = (at: number, n: number, src: ArrayLike<number>, from: number) => void;

function words(t: Tensor): Float32Array | Float64Array | Uint16Array {
  const w = storageArray(t.dtype, t.storage.cpuArrayBuffer(), t.offset * itemSize(t.dtype), t.numel());
  return w as Float32Array | Float64Array | Uint16Array;
}

function rowReader(t: Tensor): RowReader {
  const w = words(t);
  const dtype: DType = t.dtype;
  if (dtype === 'bfloat16') {
    return (at, n, out) => {
      for (let i = 0; i < n; i++) {
        u32[0] = w[at + i]! << 16;
        out[i] = f32[0]!;
      }
    };
  }
  if (dtype === 'float16') return (at, n, out) => { for (let i = 0; i < n; i++) out[i] = float16BitsToFloat32(w[at + i]!); };
  return (at, n, out) => { for (let i = 0; i < n; i++) out[i] = w[at + i]!; };
}

function rowWriter(t: Tensor): RowWriter {
  const w = words(t);
  if (t.dtype === 'bfloat16') return (at, n, src, from) => { for (let i = 0; i < n; i++) w[at + i] = float32ToBfloat16Bits(src[from + i]!); };
  if (t.dtype === 'float16') return (at, n, src, from) => { for (let i = 0; i < n; i++) w[at + i] = float32ToFloat16Bits(src[from + i]!); };
  return (at, n, src, from) => { for (let i = 0; i < n; i++) w[at + i] = src[from + i]!; };
}

registerCpu(reshapeAndCache.name, (_ctx, key, value, keyCache, valueCache, slotMapping) => {
  const op = reshapeAndCache.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const row = g.kvHeads * g.headDim;
  const capacity = g.numBlocks * g.blockSize;
  const bad = (n: number, s: number): RangeError => new RangeError(`${op}: slotMapping[${n}] = ${s} is outside the cache's ${capacity} slots (${g.numBlocks} blocks of ${g.blockSize})`);
  if (nativeCacheRows(key as Tensor, value as Tensor, kc, vc, slotMapping as Tensor, row, capacity, bad)) return [kc, vc];
  const slots = denseValues(slotMapping as Tensor);
  // Token-major dense copies of the new rows (N x row elements: small next to the cache).
  const kv = denseValues(key as Tensor);
  const vv = denseValues(value as Tensor);
  const writeK = rowWriter(kc);
  const writeV = rowWriter(vc);
  for (let n = 0; n < slots.length; n++) {
    const s = slots[n]!;
    if (s < 0) continue;
    if (s >= capacity) throw bad(n, s);
    writeK(s * row, row, kv, n * row);
    writeV(s * row, row, vv, n * row);
  }
  return [kc, vc];
});

registerCpu(pagedAttention.name, (ctx, query, keyCache, valueCache, blockTables, contextLens, scale) => {
  const op = pagedAttention.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const [B, H, D] = (query as Tensor).shape as [number, number, number];
  const group = H / g.kvHeads;
  const tables = denseValues(blockTables as Tensor);
  const maxBlocks = (blockTables as Tensor).shape[1]!;
  const lens = denseValues(contextLens as Tensor);
  if (cpuPath() === 'native') {
    // The checks the loop below makes as it goes, up front: the native kernel trusts its inputs.
    for (let b = 0; b < B; b++) {
      const len = lens[b]!;
      if (!(len >= 0 && len <= maxBlocks * g.blockSize)) {
        throw new RangeError(`${op}: contextLens[${b}] = ${len} is outside [0, ${maxBlocks * g.blockSize}] (blockTables holds ${maxBlocks} blocks of ${g.blockSize} per row)`);
      }
      for (let i = 0; i < Math.ceil(len / g.blockSize); i++) {
        const blk = tables[b * maxBlocks + i]!;
        if (!(blk >= 0 && blk < g.numBlocks)) throw new RangeError(`${op}: blockTables[${b}, ${i}] = ${blk} is outside the cache's ${g.numBlocks} blocks`);
      }
    }
    const native = nativePagedAttention(ctx.out as OutMeta, query as Tensor, kc, vc, g.kvHeads, g.blockSize, tables, maxBlocks, lens, scale as number);
    if (native) return native;
  }
  // Decoded here, after the native path (which reads q's bits itself): a bfloat16 q decoded in JS
  // cost a decode step ~10 us per layer for nothing.
  const q = denseValues(query as Tensor);
  const readK = rowReader(kc);
  const readV = rowReader(vc);
  const out = new Float64Array(B * H * D);
  const k = new Float64Array(D);
  const v = new Float64Array(D);
  const acc = new Float64Array(group * D);
  const m = new Float64Array(group);
  const l = new Float64Array(group);
  const sc = scale as number;
  for (let b = 0; b < B; b++) {
    const len = lens[b]!;
    if (!(len >= 0 && len <= maxBlocks * g.blockSize)) {
      throw new RangeError(`${op}: contextLens[${b}] = ${len} is outside [0, ${maxBlocks * g.blockSize}] (blockTables holds ${maxBlocks} blocks of ${g.blockSize} per row)`);
    }
    for (let kh = 0; kh < g.kvHeads; kh++) {
      acc.fill(0);
      m.fill(-Infinity);
      l.fill(0);
      for (let t = 0; t < len; t++) {
        const blk = tables[b * maxBlocks + Math.floor(t / g.blockSize)]!;
        if (!(blk >= 0 && blk < g.numBlocks)) throw new RangeError(`${op}: blockTables[${b}, ${Math.floor(t / g.blockSize)}] = ${blk} is outside the cache's ${g.numBlocks} blocks`);
        const at = ((blk * g.blockSize + (t % g.blockSize)) * g.kvHeads + kh) * D;
        readK(at, D, k);
        readV(at, D, v);
        for (let j = 0; j < group; j++) {
          const qa = (b * H + kh * group + j) * D;
          let s = 0;
          for (let d = 0; d < D; d++) s += q[qa + d]! * k[d]!;
          s *= sc;
          const mNew = Math.max(m[j]!, s);
          const corr = Math.exp(m[j]! - mNew);
          const p = Math.exp(s - mNew);
          l[j] = l[j]! * corr + p;
          for (let d = 0; d < D; d++) acc[j * D + d] = acc[j * D + d]! * corr + p * v[d]!;
          m[j] = mNew;
        }
      }
      for (let j = 0; j < group; j++) {
        const oa = (b * H + kh * group + j) * D;
        const inv = l[j]! > 0 ? 1 / l[j]! : 0;
        for (let d = 0; d < D; d++) out[oa + d] = acc[j * D + d]! * inv;
      }
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});

registerCpu(qkNormRotaryCache.name, (ctx, q, k, v, qw, kw, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping) => {
  const op = qkNormRotaryCache.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const capacity = g.numBlocks * g.blockSize;
  const bad = (n: number, s: number): RangeError => new RangeError(`${op}: slotMapping[${n}] = ${s} is outside the cache's ${capacity} slots (${g.numBlocks} blocks of ${g.blockSize})`);
  const [qMeta] = ctx.out as OutMeta[];
  const native = nativeQkNormRotaryCache(qMeta!, q as Tensor, k as Tensor, v as Tensor, qw as Tensor, kw as Tensor, eps as number, cos as Tensor, sin as Tensor, isNeox as boolean, kc, vc, slotMapping as Tensor, capacity, bad);
  if (native) return [native, kc, vc];
  // Other layouts, dtypes and the gpt-j rotation: the op's reference composition (core ops).
  const ref = llmImpls(op).find((m) => m.kind === 'reference');
  if (!ref) throw new Error(`${op}: no reference composition registered for the cpu fallback`);
  return ref.fn(ctx, q, k, v, qw, kw, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping);
});
