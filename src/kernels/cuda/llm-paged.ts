/**
 * cuda kernels of llm.reshapeAndCache and llm.pagedAttention (codegen/paged-attention.ts). Neither
 * reads device data on the host, so both run inside a captured decode step (CUDA graphs): bad
 * slots, block ids and lengths go to the device-side error word (raised at the next sync).
 *
 * Three decode attention kernels, picked by KILN_CUDA_PAGED_ATTN (read per call, so a benchmark can
 * alternate them):
 * - v1 (codegen/paged-attention-v1.ts): a block per (kv head, sequence, split) over
 *   ceil(len / splits) tokens, a second kernel to merge the splits.
 * - v2 (codegen/paged-attention.ts; pagedSplits): enough (kv head, sequence, split) blocks for 4
 *   per SM, at most 64 and at most one per chunk of the table's capacity; each sequence uses as many
 *   of its splits as its length has chunks, decided on the device, and the last split to arrive
 *   folds the others' partials in the same launch (no block waits for another).
 * - v3 (codegen/paged-attention-v3.ts; pagedSplitsV3): v2's layout and fold with the next chunk's
 *   K/V loads in flight during the current chunk's math, an exp2 softmax, and splits that keep
 *   every block resident (floor(4 x SMs / pairs): one split at batch 64 on an H200); the default
 *   since session 17 (H200 decode A/B: batch 8 +9%, batch 64 +14%);
 *   KILN_CUDA_PAGED_SPLITS and KILN_CUDA_PAGED_UNROLL pin its split count and token batches
 *   (benchmarks).
 * All split counts depend on the batch size and the table width only (both fixed for a captured
 * graph), never on the lengths.
 */
import { cacheGeometry, pagedAttention, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import type { OutMeta } from '../../ops/schema.js';
import { deviceCheckCode, deviceErrorArgs } from '../../runtime/cuda/device-errors.js';
import { launch, type CudaKernel, type LaunchDims } from '../../runtime/cuda/launch.js';
import type { Tensor } from '../../tensor/tensor.js';
import {
  generatePagedAttention,
  generateReshapeAndCache,
  pagedAttentionName,
  pagedAttentionSupported,
  pagedPlan,
  pagedSplits,
  reshapeAndCacheName,
  type PagedAttentionSpec,
} from './codegen/paged-attention.js';
import {
  generatePagedAttentionV1,
  generatePagedReduceV1,
  pagedAttentionNameV1,
  pagedVectorBytesV1,
  pagedWarpsV1,
  type PagedAttentionSpecV1,
} from './codegen/paged-attention-v1.js';
import { generatePagedAttentionV3, pagedAttentionNameV3, pagedPlanV3, pagedSplitsV3, type PagedAttentionSpecV3 } from './codegen/paged-attention-v3.js';
import { getOption } from '../../runtime/config.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { cachedKernel, registerCuda, Temps } from './llm-util.js';

/** Splits of the v1 kernel: at most 32. */
const MAX_SPLITS_V1 = 32;
/** Tokens a table row may address: below 2^31 with room for the kernel's next-chunk index (int). */
const MAX_TABLE_TOKENS = 2 ** 31 - 2 ** 16;

/** Largest power of two up to 16 dividing `ptr`. */
function alignment(ptr: number): number {
  let a = 16;
  while (a > 1 && ptr % a !== 0) a >>= 1;
  return a;
}

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
    const maxBlocks = tables.shape[1]!;
    if (maxBlocks * g.blockSize > MAX_TABLE_TOKENS) throw new Error(`${op}: block tables of ${maxBlocks} blocks of ${g.blockSize} tokens address more than 2^31 - 2^16 tokens; the cuda kernel indexes a row's tokens with 32-bit integers`);
    const index = q.device.index;
    const { claim, report } = deviceErrorArgs(index);
    const codeBlock = deviceCheckCode({ op, what: "the cache's blocks (a blockTables entry)" });
    const codeLen = deviceCheckCode({ op, what: 'the block table of a row (contextLens)' });
    // v2 only: a split ticket past the last (launches of one kernel overlapping; never expected).
    const codeSplit = deviceCheckCode({ op, what: 'the split tickets of a (sequence, kv head) pair (two launches of the v2 kernel overlapped)' });
    const sms = deviceInfo(index).smCount;
    const acc = q.dtype === 'float64' ? 'float64' : 'float32';
    const kind = getOption('KILN_CUDA_PAGED_ATTN');
    const v1 = kind === 'v1';
    let splits: number;
    let kern: CudaKernel;
    let dims: LaunchDims;
    if (v1) {
      const vb = pagedVectorBytesV1(q.dtype, d);
      const vec = vb > 0 && ptrOf(kc) % vb === 0 && ptrOf(vc) % vb === 0;
      const spec: PagedAttentionSpecV1 = { dtype: q.dtype, tableDtype: intKind(tables), lenDtype: intKind(lens), headDim: d, group, vec };
      kern = cachedKernel(index, pagedAttentionNameV1(spec), () => generatePagedAttentionV1(spec));
      splits = Math.max(1, Math.min(MAX_SPLITS_V1, Math.ceil((2 * sms) / (b * g.kvHeads)), Math.ceil((maxBlocks * g.blockSize) / 32)));
      dims = { grid: g.kvHeads, gridY: b, gridZ: splits, block: pagedWarpsV1(spec) * 32 };
    } else if (kind === 'v3') {
      const unroll = getOption('KILN_CUDA_PAGED_UNROLL');
      if (unroll > 8) throw new Error(`${op}: KILN_CUDA_PAGED_UNROLL takes 0 (the kernel rule) to 8, got ${unroll}`);
      // A power-of-two block size becomes a shift, a cache under 2^31 elements 32-bit addressing
      // (PagedAttentionSpec.blockShift / index32); both keep the kernel's signature and results.
      const fast = getOption('KILN_CUDA_PAGED_INDEX') === 'fast';
      const pow2 = fast && Number.isInteger(g.blockSize) && g.blockSize > 0 && (g.blockSize & (g.blockSize - 1)) === 0;
      const index32 = fast && g.numBlocks * g.blockSize * g.kvHeads * d < 2 ** 31;
      const spec: PagedAttentionSpecV3 = {
        dtype: q.dtype, tableDtype: intKind(tables), lenDtype: intKind(lens), headDim: d, group, align: Math.min(alignment(ptrOf(kc)), alignment(ptrOf(vc))),
        ...(unroll > 0 ? { unroll } : {}), ...(pow2 ? { blockShift: Math.log2(g.blockSize) } : {}), ...(index32 ? { index32 } : {}),
        ...(getOption('KILN_CUDA_PAGED_PIPE') === 'pingpong' ? { pingpong: true } : {}),
      };
      const plan = pagedPlanV3(spec);
      kern = cachedKernel(index, pagedAttentionNameV3(spec), () => generatePagedAttentionV3(spec));
      splits = pagedSplitsV3(b, g.kvHeads, maxBlocks * g.blockSize, plan.span, sms, getOption('KILN_CUDA_PAGED_SPLITS'));
      dims = { grid: g.kvHeads, gridY: b, gridZ: splits, block: plan.nw * 32 };
    } else {
      const spec: PagedAttentionSpec = { dtype: q.dtype, tableDtype: intKind(tables), lenDtype: intKind(lens), headDim: d, group, align: Math.min(alignment(ptrOf(kc)), alignment(ptrOf(vc))) };
      const plan = pagedPlan(spec);
      kern = cachedKernel(index, pagedAttentionName(spec), () => generatePagedAttention(spec));
      splits = pagedSplits(b, g.kvHeads, maxBlocks * g.blockSize, plan.span, sms);
      dims = { grid: g.kvHeads, gridY: b, gridZ: splits, block: plan.nw * 32 };
    }
    const pacc = splits > 1 ? t.keep(allocOut({ shape: [b * heads * splits * d], strides: [1], dtype: acc, device: q.device })) : null;
    const pml = splits > 1 ? t.keep(allocOut({ shape: [b * heads * splits * 2], strides: [1], dtype: acc, device: q.device })) : null;
    launch(
      kern,
      [
        claim, report, codeBlock, codeLen, ...(v1 ? [] : [codeSplit]),
        ptrOf(qd), qd.strides[0]!, qd.strides[1]!,
        ptrOf(kc), ptrOf(vc),
        ptrOf(tables), tables.strides[0]!,
        ptrOf(lens),
        ptrOf(out), pacc ? ptrOf(pacc) : 0, pml ? ptrOf(pml) : 0,
        g.numBlocks, g.blockSize, maxBlocks, g.kvHeads, scale as number, splits,
      ],
      dims,
      streamOf(q),
    );
    if (v1 && pacc && pml) {
      const reduce = cachedKernel(index, `kiln_paged_attn_v1_reduce_${q.dtype}`, () => generatePagedReduceV1(q.dtype));
      launch(reduce, [ptrOf(out), ptrOf(pacc), ptrOf(pml), d, splits], { grid: b * heads, block: Math.min(256, Math.ceil(d / 32) * 32) }, streamOf(q));
    }
  } finally {
    t.dispose();
  }
  return out;
});
