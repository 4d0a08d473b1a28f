/**
 * cuda kernels of llm.reshapeAndCache and llm.pagedAttention (codegen/paged-attention.ts). Neither
 * reads device data on the host, so both run inside a captured decode step (CUDA graphs): bad
 * slots, block ids and lengths go to the device-side error word (raised at the next sync).
 *
 * Splits of the decode attention: enough (kv head, sequence) blocks to fill the GPU twice over, at
 * most 32 and at most one per 32 tokens of the table's capacity. The count depends on the batch
 * size and the table width only (both fixed for a captured graph), never on the lengths; each
 * block sizes its own share of a sequence from that sequence's length on the device.
 */
import { cacheGeometry, pagedAttention, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import type { OutMeta } from '../../ops/schema.js';
import { deviceCheckCode, deviceErrorArgs } from '../../runtime/cuda/device-errors.js';
import { launch } from '../../runtime/cuda/launch.js';
import type { Tensor } from '../../tensor/tensor.js';
import {
  generatePagedAttention,
  generatePagedReduce,
  generateReshapeAndCache,
  pagedAttentionName,
  pagedVectorBytes,
  pagedAttentionSupported,
  pagedWarps,
  reshapeAndCacheName,
  type PagedAttentionSpec,
} from './codegen/paged-attention.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { cachedKernel, registerCuda, Temps } from './llm-util.js';

const MAX_SPLITS = 32;

function intKind(t: Tensor): 'int32' | 'int64' {
  return t.dtype === 'int32' ? 'int32' : 'int64';
}

registerCuda(reshapeAndCache.name, (_ctx, key, value, keyCache, valueCache, slotMapping) => {
  const op = reshapeAndCache.name;
  const k = key as Tensor;
  const v = value as Tensor;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const n = k.shape[0]!;
  const total = n * g.kvHeads * g.headDim;
  if (total === 0) return [kc, vc];
  const t = new Temps();
  try {
    const slots = (slotMapping as Tensor).strides[0] === 1 ? (slotMapping as Tensor) : t.dense(slotMapping as Tensor);
    const sd = intKind(slots);
    const kern = cachedKernel(kc.device.index, reshapeAndCacheName(kc.dtype, sd), () => generateReshapeAndCache(kc.dtype, sd));
    const { claim, report } = deviceErrorArgs(kc.device.index);
    const code = deviceCheckCode({ op, what: "the cache's slots" });
    const block = 256;
    launch(
      kern,
      [claim, report, code, ptrOf(k), ptrOf(v), ptrOf(kc), ptrOf(vc), ptrOf(slots), total, g.kvHeads, g.headDim, g.numBlocks * g.blockSize, k.strides[0]!, k.strides[1]!, k.strides[2]!, v.strides[0]!, v.strides[1]!, v.strides[2]!],
      { grid: gridFor(kc.device.index, total, block), block },
      streamOf(kc),
    );
  } finally {
    t.dispose();
  }
  return [kc, vc];
});

registerCuda(pagedAttention.name, (ctx, query, keyCache, valueCache, blockTables, contextLens, scale) => {
  const op = pagedAttention.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const q = query as Tensor;
  const [b, heads, d] = q.shape as [number, number, number];
  const out = allocOut(ctx.out as OutMeta);
  if (b === 0 || heads === 0) return out;
  const group = heads / g.kvHeads;
  if (!pagedAttentionSupported({ headDim: d, group, dtype: q.dtype })) {
    throw new Error(`${op}: the cuda kernel supports head dims up to 512 and up to 16 query heads per kv head (within 48 KiB of shared memory); got headDim ${d}, ${group} query heads per kv head (query ${JSON.stringify(q.shape)})`);
  }
  const t = new Temps();
  try {
    const qd = q.strides[2] === 1 ? q : t.dense(q);
    const tables = (blockTables as Tensor).strides[1] === 1 ? (blockTables as Tensor) : t.dense(blockTables as Tensor);
    const lens = (contextLens as Tensor).strides[0] === 1 ? (contextLens as Tensor) : t.dense(contextLens as Tensor);
    const vb = pagedVectorBytes(q.dtype, d);
    const vec = vb > 0 && ptrOf(kc) % vb === 0 && ptrOf(vc) % vb === 0;
    const spec: PagedAttentionSpec = { dtype: q.dtype, tableDtype: intKind(tables), lenDtype: intKind(lens), headDim: d, group, vec };
    const index = q.device.index;
    if (tables.shape[1]! * g.blockSize >= 2 ** 31) throw new Error(`${op}: block tables of ${tables.shape[1]} blocks of ${g.blockSize} tokens address 2^31 tokens or more; the cuda kernel indexes a row's tokens with 32-bit integers`);
    const kern = cachedKernel(index, pagedAttentionName(spec), () => generatePagedAttention(spec));
    const maxBlocks = tables.shape[1]!;
    const sms = deviceInfo(index).smCount;
    const splits = Math.max(1, Math.min(MAX_SPLITS, Math.ceil((2 * sms) / (b * g.kvHeads)), Math.ceil((maxBlocks * g.blockSize) / 32)));
    const acc = q.dtype === 'float64' ? 'float64' : 'float32';
    const pacc = splits > 1 ? t.keep(allocOut({ shape: [b * heads * splits * d], strides: [1], dtype: acc, device: q.device })) : null;
    const pml = splits > 1 ? t.keep(allocOut({ shape: [b * heads * splits * 2], strides: [1], dtype: acc, device: q.device })) : null;
    const { claim, report } = deviceErrorArgs(index);
    const codeBlock = deviceCheckCode({ op, what: "the cache's blocks (a blockTables entry)" });
    const codeLen = deviceCheckCode({ op, what: 'the block table of a row (contextLens)' });
    launch(
      kern,
      [
        claim, report, codeBlock, codeLen,
        ptrOf(qd), qd.strides[0]!, qd.strides[1]!,
        ptrOf(kc), ptrOf(vc),
        ptrOf(tables), tables.strides[0]!,
        ptrOf(lens),
        ptrOf(out), pacc ? ptrOf(pacc) : 0, pml ? ptrOf(pml) : 0,
        g.numBlocks, g.blockSize, maxBlocks, g.kvHeads, scale as number, splits,
      ],
      { grid: g.kvHeads, gridY: b, gridZ: splits, block: pagedWarps(spec) * 32 },
      streamOf(q),
    );
    if (pacc && pml) {
      const reduce = cachedKernel(index, `kiln_paged_attn_reduce_${q.dtype}`, () => generatePagedReduce(q.dtype));
      launch(reduce, [ptrOf(out), ptrOf(pacc), ptrOf(pml), d, splits], { grid: b * heads, block: Math.min(256, Math.ceil(d / 32) * 32) }, streamOf(q));
    }
  } finally {
    t.dispose();
  }
  return out;
});
