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
 * - qkNormRotaryPagedAttention: the fused form with llm.qkNormRotaryCache's work as its prologue
 *   (pagedFusedSource's `qk`; KILN_WEBGPU_QK_ATTN's pass maps a compiled decode step's pair onto
 *   it): one dispatch where the two ops took two; the two ops where the fused form does not apply.
 */
import { cacheGeometry, pagedAttention, reshapeAndCache } from '../../ops/defs/llm-paged.js';
import { qkNormRotaryCache } from '../../ops/defs/llm-qk-norm-rotary-cache.js';
import { qkNormRotaryPagedAttention } from '../../ops/defs/llm-qk-norm-rotary-paged-attention.js';
import { dispatch } from '../../ops/dispatch.js';
import { broadcastStrides } from '../../tensor/layout.js';
import { registerLlmImpl, type ImplFn } from '../../ops/library/policy.js';
import type { OutMeta } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import type { DType } from '../../tensor/dtype.js';
import { getOption } from '../../runtime/config.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { lanesShape, lanesWorkgroupBytes, pagedLanesSource, type LanesShape } from './paged-attention-lanes.js';
import { PAGED_WG, pagedCombineSource, pagedFusedSource, pagedFusedWorkgroupBytes, pagedSplitSource, pagedSplitSourceV, pagedVecElems, pagedVecV, type PagedKinds, type PagedQk } from './paged-attention-source.js';
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

/** Workgroups up to which the lanes form takes KILN_WEBGPU_PAGED_LANES_HG query heads each (a batch of few sequences). */
const LANES_HG_MAX_GROUPS = 128;
/** Workgroups below which the keys are split. */
const TARGET_GROUPS = 256;
/** The largest head dim. */
const MAX_DIM = 512;
/** f32s of workgroup memory the head group's queries may take (8 KiB). */
const QUERY_FLOATS = 2048;
/** Most query heads per workgroup (each adds a row of accumulators per invocation). */
const MAX_HG = 8;

const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

/** Query heads per workgroup: the largest divisor of the group size `g` whose queries fit, at most `most`. */
function headGroup(g: number, d: number, most = MAX_HG): number {
  for (let hg = Math.min(g, most, MAX_HG, Math.max(1, Math.floor(QUERY_FLOATS / d))); hg > 1; hg--) if (g % hg === 0) return hg;
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

/** The launch of a pagedAttention kernel over q: its plan, kinds, metadata and tag (shapes only). */
interface PagedLaunch {
  readonly x: StorageKind;
  readonly hg: number;
  readonly splits: number;
  readonly vecV: boolean;
  readonly kinds: PagedKinds;
  readonly meta: number[];
  readonly tag: string;
  readonly items: number;
  /** The lanes form's shape where it applies (pagedLanes), else null. */
  readonly lanes: LanesShape | null;
}

/**
 * The lanes form (paged-attention-lanes.ts) for a table of `capacity` tokens: KILN_WEBGPU_PAGED_LANES
 * (the largest capacity it takes; 0 off), both caches readable as 16-byte words, and NI invocations
 * (KILN_WEBGPU_PAGED_LANES_WG, capped by the device, halved until the workgroup memory fits). Shapes only.
 */
function pagedLanes(kinds: PagedKinds, capacity: number, valueWords: boolean): LanesShape | null {
  const most = getOption('KILN_WEBGPU_PAGED_LANES');
  if (most === 0 || capacity > most || kinds.vecK !== true || !valueWords) return null;
  const lim = webgpu().bridge.adapter.limits;
  let ni = Math.min(getOption('KILN_WEBGPU_PAGED_LANES_WG'), lim.maxComputeInvocationsPerWorkgroup ?? 256, lim.maxComputeWorkgroupSizeX ?? 256);
  ni -= ni % PAGED_WG;
  for (; ni >= 2 * PAGED_WG; ni /= 2) {
    const sh = lanesShape(kinds.x, kinds.d, kinds.hg, ni);
    if (sh && lanesWorkgroupBytes(sh, kinds.hg, kinds.d) <= (lim.maxComputeWorkgroupStorageSize ?? 16384)) return sh;
    if (ni % (2 * PAGED_WG) !== 0) break;
  }
  return null;
}

function pagedLaunch(op: string, q: Tensor, kc: Tensor, vc: Tensor, tables: Tensor, lens: Tensor, scale: number, outOffset: number): PagedLaunch {
  const g = cacheGeometry(op, kc, vc);
  const [b, heads, d] = q.shape as [number, number, number];
  if (d > MAX_DIM) throw new Error(`${op}: the webgpu kernel supports head dims up to ${MAX_DIM}, got ${d} (query ${JSON.stringify(q.shape)})`);
  const x = dataKind(op, q).kind;
  if (x !== 'f32' && x !== 'f16' && x !== 'f16p' && x !== 'bf16p') throw unsupportedDtype(op, q);
  if (q.strides[2] !== 1) throw new Error(`${op}: the webgpu kernel reads the query's head dim contiguous, got strides [${q.strides.join(', ')}]`);
  const maxBlocks = tables.shape[1]!;
  // The lanes form with fewer query heads per workgroup (KILN_WEBGPU_PAGED_LANES_HG): more workgroups
  // (SMs) for a batch of few sequences, each key and value row then read once per head group.
  // Only while the workgroups stay few (b x heads / lanesHg <= LANES_HG_MAX_GROUPS: about one per SM of a large GPU).
  const lanesHg = getOption('KILN_WEBGPU_PAGED_LANES_HG');
  const fewer = lanesHg > 0 && b * heads <= LANES_HG_MAX_GROUPS * lanesHg && maxBlocks * g.blockSize <= getOption('KILN_WEBGPU_PAGED_LANES');
  const hg = headGroup(heads / g.kvHeads, d, fewer ? lanesHg : MAX_HG);
  const groups = heads / g.kvHeads / hg;
  const { splits, splitLen } = pagedPlan(b * g.kvHeads * groups, maxBlocks * g.blockSize);
  const ve = pagedVecElems(x);
  const vecK = ve > 0 && d % ve === 0 && kc.offset % ve === 0 && kc.storage.buffer.capacity % 16 === 0;
  const vecV = vecK && pagedVecV(x, d) && vc.offset % ve === 0 && vc.storage.buffer.capacity % 16 === 0 && getOption('KILN_WEBGPU_PAGED_VECV');
  const unroll = getOption('KILN_WEBGPU_PAGED_UNROLL');
  const kinds: PagedKinds = { x, table: tables.dtype, lens: lens.dtype, d, hg, vecK, vecV, unroll };
  const meta = [
    b, heads, g.kvHeads, g.blockSize, maxBlocks, q.strides[0]!, q.strides[1]!, q.offset, tables.strides[0]!, tables.offset,
    lens.offset, lens.strides[0] ?? 1, f32Bits(scale), g.numBlocks, kc.offset, vc.offset, splits, splitLen, groups, outOffset,
  ];
  const tag = `${x}.${tables.dtype}.${lens.dtype}.${d}.${hg}${vecK ? '.vk' : ''}${vecV ? '.vv' : ''}${unroll ? '.u' : ''}`;
  const valueWords = vecK && vc.offset % ve === 0 && vc.storage.buffer.capacity % 16 === 0;
  const lanes = pagedLanes(kinds, maxBlocks * g.blockSize, valueWords);
  return { x, hg, splits, vecV, kinds, meta, tag, items: b * g.kvHeads * groups * splits, lanes };
}

registerWebgpu(pagedAttention.name, (ctx, query, keyCache, valueCache, blockTables, contextLens, scale) => {
  const op = pagedAttention.name;
  const kc = keyCache as Tensor;
  const vc = valueCache as Tensor;
  const q = query as Tensor;
  const tables = blockTables as Tensor;
  const lens = contextLens as Tensor;
  const [b, heads, d] = q.shape as [number, number, number];
  const out = allocOut(ctx.out as OutMeta);
  if (b === 0 || heads === 0 || d === 0) return out;
  const { x, hg, splits, vecV, kinds, meta: m, tag, items, lanes } = pagedLaunch(op, q, kc, vc, tables, lens, scale as number, out.offset);
  const meta = words(m);
  const acc = webgpu();
  const inputs = [q.storage.buffer, kc.storage.buffer, vc.storage.buffer, tables.storage.buffer, lens.storage.buffer];
  if (lanes) {
    // One workgroup per (sequence, kv head, head group), the keys in chunks of its invocations.
    acc.dispatch(kernelFor(`paged.lanes.${tag}.n${lanes.ni}`, () => pagedLanesSource(kinds, lanes)), [out.storage.buffer, ...inputs], meta, groupsFor(items / splits, 1));
    return out;
  }
  const source = (partial: boolean): string => (vecV ? pagedSplitSourceV(kinds, partial) : pagedSplitSource(kinds, partial));
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
    acc.dispatch(kernelFor(`paged.combine.${x}.${d}.${lens.dtype}${kinds.unroll === true ? '.u' : ''}`, () => pagedCombineSource(x, d, lens.dtype, kinds.unroll === true)), [out.storage.buffer, part.storage.buffer, lens.storage.buffer], meta, groupsFor(b * heads * d, PAGED_WG));
  } finally {
    part.dispose();
  }
  return out;
});

/**
 * llm.qkNormRotaryPagedAttention: the fused paged-attention kernel with the q/k norm + rotary and
 * the cache write as its prologue (pagedFusedSource's `qk`), one dispatch, where it applies: the
 * attention's plan takes the fused form (pagedFuses, more than one split), one sequence (batch 1:
 * with several, one row may attend to a slot another row writes in the same step), q, k and v are
 * [B, heads | kvHeads, D] with the head dim contiguous, cos and sin the same for every head, one
 * slot per sequence, no cache buffer shared with an input, and the device binds every operand
 * (distinct buffers: out, the q|k|v output, the caches, tables, lengths, slots, the two weights,
 * cos and sin, the metadata: 12 for a decode step; SwiftShader binds 12, the H200 16). Elsewhere it
 * runs llm.qkNormRotaryCache then llm.pagedAttention (their webgpu kernels).
 */
registerWebgpu(qkNormRotaryPagedAttention.name, (ctx, ...args) => {
  const [qIn, kIn, vIn, qwIn, kwIn, eps, cosIn, sinIn, isNeox, kcIn, vcIn, slotsIn, tablesIn, lensIn, scale] = args;
  const [q, k, v, qw, kw, cos, sin, kc, vc, slotsT, tables, lens] = [qIn, kIn, vIn, qwIn, kwIn, cosIn, sinIn, kcIn, vcIn, slotsIn, tablesIn, lensIn] as Tensor[];
  const metas = ctx.out as unknown as OutMeta[];
  const slots = slotsT!.device.type === 'webgpu' ? slotsT! : slotsT!.to(kc!.device);
  try {
    const out = allocOut(metas[0]!);
    if (qkAttentionLaunch(q!, k!, v!, qw!, kw!, eps as number, cos!, sin!, isNeox as boolean, kc!, vc!, slots, tables!, lens!, scale as number, out)) return [out, kc!, vc!];
    out.dispose();
    // The two ops it fuses.
    const [qr] = dispatch(qkNormRotaryCache, q!, k!, v!, qw!, kw!, eps as number, cos!, sin!, isNeox as boolean, kc!, vc!, slots) as unknown as Tensor[];
    try {
      return [dispatch(pagedAttention, qr!, kc!, vc!, tables!, lens!, scale as number) as unknown as Tensor, kc!, vc!];
    } finally {
      qr!.dispose();
    }
  } finally {
    if (slots !== slotsT) slots.dispose();
  }
});

/** Whether the adapter's subgroups are at most 64 wide (a 64-lane row of the prologue is whole subgroups), and the rotary kernel takes them (llm-rotary.ts rotaryForm). */
function qkSubgroups(): boolean {
  const acc = webgpu();
  const max = acc.bridge.adapter.subgroupMaxSize ?? 0;
  return getOption('KILN_WEBGPU_ROTARY_REGISTERS') && acc.hasFeature('subgroups') && max > 0 && max <= PAGED_WG;
}

/** The one-dispatch launch of qkNormRotaryPagedAttention, or false (nothing dispatched) where it does not apply (see above). */
function qkAttentionLaunch(q: Tensor, k: Tensor, v: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, kc: Tensor, vc: Tensor, slots: Tensor, tables: Tensor, lens: Tensor, scale: number, out: Tensor): boolean {
  const op = qkNormRotaryPagedAttention.name;
  const g = cacheGeometry(op, kc, vc);
  if (q.ndim !== 3 || k.ndim !== 3 || v.ndim !== 3) return false;
  const [b, heads, d] = q.shape as [number, number, number];
  // One sequence: rows of one step may read each other's new slots (a prompt fed as decode rows, rows
  // sharing blocks), which the two ops order (every write before any attention) and one dispatch of
  // independent workgroups cannot. At batch 1 the row's workgroups are the only readers of its slot.
  if (b !== 1 || heads === 0 || d === 0 || d % 2 !== 0) return false;
  const kvShape = (t: Tensor): boolean => t.shape[0] === b && t.shape[1] === g.kvHeads && t.shape[2] === d && t.strides[2] === 1;
  if (!kvShape(k) || !kvShape(v) || q.strides[2] !== 1 || d !== g.headDim) return false;
  if (slots.ndim !== 1 || slots.shape[0] !== b || (slots.dtype !== 'int32' && slots.dtype !== 'int64')) return false;
  if (qw.ndim !== 1 || kw.ndim !== 1 || qw.shape[0] !== d || kw.shape[0] !== d) return false;
  if (![k, v, qw, kw, cos, sin].every((t) => t.dtype === q.dtype) || kc.dtype !== q.dtype) return false;
  // cos / sin: one row per sequence, the same for every head.
  const trig = (t: Tensor): number[] | null => {
    const sq = broadcastStrides(t.shape, t.strides, q.shape);
    const sk = broadcastStrides(t.shape, t.strides, k.shape);
    return t.ndim <= 3 && sq[1] === 0 && sk[1] === 0 && sq[0] === sk[0] && sq[2] === sk[2] ? [t.offset, sq[0]!, sq[2]!] : null;
  };
  const tc = trig(cos);
  const ts = trig(sin);
  if (!tc || !ts) return false;
  const L = pagedLaunch(op, q, kc, vc, tables, lens, scale, out.offset);
  if (!L.lanes && !pagedFuses(L.splits, L.hg, d, L.vecV)) return false;
  const { wide } = dataKind(op, q);
  if (wide) return false;
  // Bindings: b0..b5 the attention's (b1 the raw q), then each further buffer once (read-only data may share; the caches share nothing).
  const cacheBufs = [kc.storage.buffer, vc.storage.buffer];
  if (kc.storage.buffer === vc.storage.buffer || [q, k, v, qw, kw, cos, sin, slots, tables, lens, out].some((t) => cacheBufs.includes(t.storage.buffer))) return false;
  const buffers = [out.storage.buffer, q.storage.buffer, kc.storage.buffer, vc.storage.buffer, tables.storage.buffer, lens.storage.buffer];
  const data = (t: Tensor): number => {
    const at = buffers.findIndex((bf, i) => bf === t.storage.buffer && (i === 1 || i >= 6));
    if (at >= 0) return at;
    buffers.push(t.storage.buffer);
    return buffers.length - 1;
  };
  const bindK = data(k);
  const bindV = data(v);
  const bindQw = data(qw);
  const bindKw = data(kw);
  const bindCos = data(cos);
  const bindSin = data(sin);
  // The slots (an index dtype) get a binding of their own.
  buffers.push(slots.storage.buffer);
  const bindSlots = buffers.length - 1;
  if (out.storage.buffer === q.storage.buffer || buffers.slice(6).includes(out.storage.buffer)) return false;
  const acc = webgpu();
  if (buffers.length + 1 > (acc.bridge.adapter.limits.maxStorageBuffersPerShaderStage ?? 8)) return false;
  const subgroups = qkSubgroups();
  const qk: PagedQk = { isNeox, slots: slots.dtype, subgroups, bindK, bindV, bindQw, bindKw, bindCos, bindSin, bindSlots, binds: buffers.length };
  const meta = [
    ...L.meta,
    k.offset, k.strides[0]!, k.strides[1]!, v.offset, v.strides[0]!, v.strides[1]!,
    qw.offset, qw.strides[0]!, kw.offset, kw.strides[0]!,
    ...tc, ...ts,
    slots.offset, slots.strides[0]!, f32Bits(eps),
  ];
  const binds = `${isNeox ? 'neox' : 'gptj'}.${slots.dtype}.${[bindK, bindV, bindQw, bindKw, bindCos, bindSin, bindSlots].join('')}${subgroups ? '.sg' : ''}`;
  const lanes = L.lanes;
  if (lanes) acc.dispatch(kernelFor(`paged.lanes.qk.${L.tag}.n${lanes.ni}.${binds}`, () => pagedLanesSource(L.kinds, lanes, qk)), buffers, words(meta), groupsFor(L.items / L.splits, 1));
  else acc.dispatch(kernelFor(`paged.fused.qk.${L.tag}.s${L.splits}.${binds}`, () => pagedFusedSource(L.kinds, L.splits, qk)), buffers, words(meta), groupsFor(L.items / L.splits, 1));
  return true;
}
