/**
 * webgpu kernels of llm.reshapeAndCache and llm.pagedAttention, neither reading device data on the
 * host (the references read the slot mapping back, and pagedAttention's computes slots in int64,
 * which WGSL lacks):
 *
 * - reshapeAndCache: one kernel writes the step's keys and values, read in place, into the caches
 *   at their tokens' slots, tokens whose slot is negative skipped (it was two row scatters, each
 *   copying its source contiguous first: four dispatches a layer, now one).
 * - pagedAttention: the split-over-keys decode kernel of paged-attention-source.ts (online softmax
 *   per split over 64-key blocks read through the block table, the query heads of one kv head
 *   sharing each key and value read, then a combine pass), float32 / float16 / bfloat16; where
 *   the splits fit one workgroup (splits x 64 invocations and the workgroup memory of
 *   pagedFusedWorkgroupBytes within the device's limits) and the value pass is the scalar one, the
 *   split kernel and the combine are one dispatch (pagedFusedSource, KILN_WEBGPU_PAGED_FUSED: a
 *   decode step at batch 1 launches one kernel a layer fewer). The plan
 *   (splits, heads per workgroup) depends on shapes only: a compiled decode step replays it for any
 *   length. A row of length 0 is zeros (as the reference); a block id outside the cache skips its
 *   token (the cpu and cuda kernels raise; a WebGPU kernel cannot).
 */
import { cacheGeometry, pagedAttention, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import { registerLlmImpl, type ImplFn } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import type { DType } from '../../tensor/dtype.js';
import { getOption } from '../../runtime/config.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { PAGED_WG, pagedCombineSource, pagedFusedSource, pagedFusedWorkgroupBytes, pagedSplitSource, pagedSplitSourceV, pagedVecElems, pagedVecV, type PagedKinds } from './paged-attention-source.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { type Bind, dataKind, groupsFor, header, indexBind, indexLoad, kernelFor, WG, words } from './template.js';

function registerWebgpu(opName: string, fn: ImplFn): void {
  registerLlmImpl(opName, { name: 'webgpu-kernel', kind: 'kernel', device: 'webgpu', priority: 0, fn });
}

/**
 * reshapeAndCache's kernel: one invocation per (token, head, element) writes the key's element and
 * the value's into their caches at the token's slot (a negative slot or one past the capacity
 * skips it). Keys and values are read in place with their strides (a decode step's values are a
 * column slice of the fused qkv output); a key and value in one buffer share a binding.
 * Metadata: [N, kvHeads, headDim, capacity, kcOff, vcOff, kOff, k strides x3, vOff, v strides x3,
 * slotOff, slotStride].
 */
function cacheWriteSource(x: StorageKind, slots: DType, shared: boolean): string {
  const kv: Bind[] = shared ? [{ kind: x, written: false }] : [{ kind: x, written: false }, { kind: x, written: false }];
  const slotBind = 2 + kv.length;
  const lines = header([{ kind: x, written: true }, { kind: x, written: true }, ...kv, { kind: indexBind(slots), written: false }]);
  const vb = shared ? 'b2' : 'b3';
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let N = kmeta[0]; let H = kmeta[1]; let D = kmeta[2]; let cap = kmeta[3];',
    '  let total = N * H * D;',
    `  for (var i = gid.x; i < total; i = i + ng.x * ${WG}u) {`,
    '    let e = i % D; let h = (i / D) % H; let n = i / (D * H);',
    `    let slot = ${indexLoad(slots, `b${slotBind}`, 'kmeta[14] + n * kmeta[15]')};`,
    '    if (slot < 0i || u32(slot) >= cap) { continue; }',
    '    let at = (u32(slot) * H + h) * D + e;',
    '    let ki = u32(i32(kmeta[6]) + i32(n) * bitcast<i32>(kmeta[7]) + i32(h) * bitcast<i32>(kmeta[8]) + i32(e) * bitcast<i32>(kmeta[9]));',
    '    let vi = u32(i32(kmeta[10]) + i32(n) * bitcast<i32>(kmeta[11]) + i32(h) * bitcast<i32>(kmeta[12]) + i32(e) * bitcast<i32>(kmeta[13]));',
    `    let kval = ${loadExpr(x, 'b2', 'ki', false)};`,
    `    let vval = ${loadExpr(x, vb, 'vi', false)};`,
    `    ${storeStmt(x, 'b0', 'kmeta[4] + at', 'kval').replace(/\n/g, '\n    ')}`,
    `    ${storeStmt(x, 'b1', 'kmeta[5] + at', 'vval').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}

registerWebgpu(reshapeAndCache.name, (_ctx, key, value, keyCache, valueCache, slotMapping) => {
  const op = reshapeAndCache.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const k = key as Tensor;
  const v = value as Tensor;
  const slots = slotMapping as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const n = k.shape[0]!;
  if (n === 0 || g.kvHeads === 0 || g.headDim === 0) return [kc, vc];
  if (kc.storage.buffer === vc.storage.buffer) throw new Error(`${op}: the webgpu kernel writes 'keyCache' and 'valueCache' as two buffers; they share one`);
  const x = dataKind(op, kc).kind;
  if (dataKind(op, k).wide) throw unsupportedDtype(op, k);
  const idx = slots.device.type === 'webgpu' ? slots : slots.to(kc.device);
  try {
    const shared = k.storage.buffer === v.storage.buffer;
    const meta = words([
      n, g.kvHeads, g.headDim, g.numBlocks * g.blockSize, kc.offset, vc.offset,
      k.offset, k.strides[0]!, k.strides[1]!, k.strides[2]!, v.offset, v.strides[0]!, v.strides[1]!, v.strides[2]!,
      idx.offset, idx.ndim === 0 ? 0 : idx.strides[0]!,
    ]);
    const kernel = kernelFor(`paged.cache.${x}.${idx.dtype}${shared ? '.shared' : ''}`, () => cacheWriteSource(x, idx.dtype, shared));
    const buffers = shared ? [kc.storage.buffer, vc.storage.buffer, k.storage.buffer, idx.storage.buffer] : [kc.storage.buffer, vc.storage.buffer, k.storage.buffer, v.storage.buffer, idx.storage.buffer];
    webgpu().dispatch(kernel, buffers, meta, groupsFor(n * g.kvHeads * g.headDim));
  } finally {
    if (idx !== slots) idx.dispose();
  }
  return [kc, vc];
});

/** Workgroups below which the keys are split. */
const TARGET_GROUPS = 256;
/** The largest head dim. */
const MAX_DIM = 512;
/** f32s of workgroup memory the head group's queries may take (8 KiB). */
const QUERY_FLOATS = 2048;
/** Most query heads per workgroup (each adds a row of accumulators per invocation). */
const MAX_HG = 8;

const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

/** Query heads per workgroup: the largest divisor of the group size `g` whose queries fit. */
function headGroup(g: number, d: number): number {
  for (let hg = Math.min(g, MAX_HG, Math.max(1, Math.floor(QUERY_FLOATS / d))); hg > 1; hg--) if (g % hg === 0) return hg;
  return 1;
}

/**
 * The launch plan for B sequences of up to `capacity` tokens: splits over the keys when the
 * (sequence, kv head, head group) work items alone would leave most of the device idle (at most one
 * per 64-key block of the capacity). The kernel spreads each sequence's actual keys over all the
 * splits (ceil(len / splits) rounded up to 64), so a batch-1 decode step of a short context still
 * runs on `splits` workgroups per item; `splitLen` is what a split takes at full capacity.
 * Depends on shapes only, never on the lengths (no host read).
 */
export function pagedPlan(items: number, capacity: number): { splits: number; splitLen: number } {
  const splits = Math.max(1, Math.min(Math.ceil(TARGET_GROUPS / Math.max(items, 1)), Math.ceil(capacity / PAGED_WG)));
  return { splits, splitLen: Math.max(PAGED_WG, Math.ceil(Math.ceil(capacity / splits) / PAGED_WG) * PAGED_WG) };
}

/**
 * Whether the split kernel and the combine run as one dispatch (pagedFusedSource): KILN_WEBGPU_PAGED_FUSED,
 * more than one split, the scalar value pass, and `splits` sub-splits of 64 invocations and their
 * workgroup memory within the device's limits. Shapes only, as the plan.
 */
export function pagedFuses(splits: number, hg: number, d: number, vecV: boolean): boolean {
  if (splits <= 1 || vecV || !getOption('KILN_WEBGPU_PAGED_FUSED')) return false;
  const lim = webgpu().bridge.adapter.limits;
  const inv = splits * PAGED_WG;
  return inv <= (lim.maxComputeInvocationsPerWorkgroup ?? 256) && inv <= (lim.maxComputeWorkgroupSizeX ?? 256) && pagedFusedWorkgroupBytes(splits, hg, d) <= (lim.maxComputeWorkgroupStorageSize ?? 16384);
}

registerWebgpu(pagedAttention.name, (ctx, query, keyCache, valueCache, blockTables, contextLens, scale) => {
  const op = pagedAttention.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const g = cacheGeometry(op, kc, vc);
  const q = query as Tensor;
  const tables = blockTables as Tensor;
  const lens = contextLens as Tensor;
  const [b, heads, d] = q.shape as [number, number, number];
  const out = allocOut(ctx.out as OutMeta);
  if (b === 0 || heads === 0 || d === 0) return out;
  if (d > MAX_DIM) throw new Error(`${op}: the webgpu kernel supports head dims up to ${MAX_DIM}, got ${d} (query ${JSON.stringify(q.shape)})`);
  const x = dataKind(op, q).kind;
  if (x !== 'f32' && x !== 'f16' && x !== 'f16p' && x !== 'bf16p') throw unsupportedDtype(op, q);
  if (q.strides[2] !== 1) throw new Error(`${op}: the webgpu kernel reads the query's head dim contiguous, got strides [${q.strides.join(', ')}]`);
  const maxBlocks = tables.shape[1]!;
  const hg = headGroup(heads / g.kvHeads, d);
  const groups = heads / g.kvHeads / hg;
  const { splits, splitLen } = pagedPlan(b * g.kvHeads * groups, maxBlocks * g.blockSize);
  // Key rows as 16-byte words where they are exact (pagedVecElems): the head dim and the cache's offset whole words, its buffer whole words.
  const ve = pagedVecElems(x);
  const vecK = ve > 0 && d % ve === 0 && kc.offset % ve === 0 && kc.storage.buffer.capacity % 16 === 0;
  // Value rows as 16-byte words too where exact, with the value pass split over keys (pagedSplitSourceV).
  const vecV = vecK && pagedVecV(x, d) && vc.offset % ve === 0 && vc.storage.buffer.capacity % 16 === 0 && getOption('KILN_WEBGPU_PAGED_VECV');
  const unroll = getOption('KILN_WEBGPU_PAGED_UNROLL');
  const kinds: PagedKinds = { x, table: tables.dtype, lens: lens.dtype, d, hg, vecK, vecV, unroll };
  const meta = words([
    b, heads, g.kvHeads, g.blockSize, maxBlocks, q.strides[0]!, q.strides[1]!, q.offset, tables.strides[0]!, tables.offset,
    lens.offset, lens.strides[0] ?? 1, f32Bits(scale as number), g.numBlocks, kc.offset, vc.offset, splits, splitLen, groups, out.offset,
  ]);
  const acc = webgpu();
  const inputs = [q.storage.buffer, kc.storage.buffer, vc.storage.buffer, tables.storage.buffer, lens.storage.buffer];
  const tag = `${x}.${tables.dtype}.${lens.dtype}.${d}.${hg}${vecK ? '.vk' : ''}${vecV ? '.vv' : ''}${unroll ? '.u' : ''}`;
  const source = (partial: boolean): string => (vecV ? pagedSplitSourceV(kinds, partial) : pagedSplitSource(kinds, partial));
  const items = b * g.kvHeads * groups * splits;
  if (splits === 1) {
    acc.dispatch(kernelFor(`paged.decode.${tag}`, () => source(false)), [out.storage.buffer, ...inputs], meta, groupsFor(items, 1));
    return out;
  }
  if (pagedFuses(splits, hg, d, vecV)) {
    // One workgroup of `splits` x 64 invocations per (sequence, kv head, head group): splits and combine in one dispatch.
    acc.dispatch(kernelFor(`paged.fused.${tag}.s${splits}`, () => pagedFusedSource(kinds, splits)), [out.storage.buffer, ...inputs], meta, groupsFor(items / splits, 1));
    return out;
  }
  const part = allocOut({ shape: [b * heads * splits * (d + 3)], strides: [1], dtype: 'float32', device: out.device });
  try {
    acc.dispatch(kernelFor(`paged.split.${tag}`, () => source(true)), [part.storage.buffer, ...inputs], meta, groupsFor(items, 1));
    acc.dispatch(kernelFor(`paged.combine.${x}.${d}.${lens.dtype}${unroll ? '.u' : ''}`, () => pagedCombineSource(x, d, lens.dtype, unroll)), [out.storage.buffer, part.storage.buffer, lens.storage.buffer], meta, groupsFor(b * heads * d, PAGED_WG));
  } finally {
    part.dispose();
  }
  return out;
});
