/**
 * The webgpu flash attention's host side (its WGSL: flash-attention-source.ts): picks the kernel
 * for a scaled_dot_product_attention call and launches it over the op's batch map (broadcast and
 * grouped-query heads read through each operand's strides and divisors, as the CPU kernel does).
 *
 * Prefill (more than DECODE_ROWS query rows per head) runs the tiled kernel (flash-attention-tiled.ts:
 * a workgroup per tile of query rows) where its tiles fit the device's workgroup memory and
 * KILN_WEBGPU_ATTN_PREFILL is 'tiled' (the default), else the row-per-invocation kernel; fewer
 * rows run the decode kernel, split over the keys when the rows alone would leave most of the
 * device idle (fewer than TARGET_GROUPS workgroups) and each split still has SPLIT_MIN keys, the
 * splits merged by the combine kernel. `flashAttention` returns null where the flash path does not
 * apply (head dims above MAX_DIM, a 64-bit mask), and the caller keeps its math path.
 */
import type { AttentionGeometry } from '../../ops/defs/nn.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import { allocOut, webgpu } from './device.js';
import { ATTN_WG, combineSource, decodeSource, prefillBlock, prefillSource, type AttnKinds } from './flash-attention-source.js';
import { dataKind, groupsFor, kernelFor, words } from './template.js';
import { tiledPrefillPlan, tiledPrefillSource, tiledWordWidth } from './flash-attention-tiled.js';
import { getOption } from '../../runtime/config.js';
import { matrixPrefillPlan, matrixPrefillRows, matrixPrefillSource, matrixSplitWanted } from './flash-attention-matrix.js';
import { matrixOnlinePlan, matrixOnlinePrefillSource } from './flash-attention-matrix-online.js';
import { matrixSplitPrefillSource } from './flash-attention-matrix-split.js';
import { stagedLimits, subgroupMatrixEmulated, subgroupMatrixPlan } from './linalg.js';

/** The largest head dim (query/key and value) of the flash kernels. */
export const MAX_DIM = 256;
/**
 * Query rows per (batch, head) from which KILN_WEBGPU_ATTN_PREFILL=auto takes the float16 prefill
 * on subgroup matrices: on an H100 it took 422 against 667 us (tiled) at 512 rows (the transformer
 * block's attention) and 289 against 622 us at 1024, but 34 against 22 us at 128 (a Qwen3-0.6B
 * prefill: its 128 one-subgroup workgroups wait out each block's round trips) and 101 against 69
 * us at 256 (bench/results/h100-s31-final-2026-12-06.json). From it auto takes the planner's
 * form: the key split (flash-attention-matrix-split.ts) where row tiles of 4 subgroups would give
 * fewer than 256 workgroups, else the row tiles.
 */
export const MATRIX_MIN_ROWS = 512;
/**
 * Query rows per (batch, head) from which auto takes the key-split form where its rule holds (few
 * heads): Qwen3 heads (16 over 8, dim 128) on an H100, float16, key split against tiled: 128 rows
 * 14.6 against 22.3 us, 256 rows 39.9 against 68.5, 512 rows 99.8 against 200.6 (row tiles 156.9)
 * (bench/results/h100-s32-sweep-2026-12-06.json). Below 128 rows it is not measured: tiled.
 */
export const MATRIX_SPLIT_MIN_ROWS = 128;
/** Query rows per (batch, head) at or below which the decode kernel runs. */
const DECODE_ROWS = 8;
/** Workgroups below which decode splits the keys. */
const TARGET_GROUPS = 256;
/** Fewest keys per split. */
const SPLIT_MIN = 256;

/** Prefill launches by kernel form (tests read it: which kernel a call took). */
export const prefillStats = { matrix: 0, tiled: 0, rows: 0, matrixPlans: new Set<string>() };

/** Test hook: the most subgroups a workgroup of the key-split matrix prefill (null: the planner's 4). */
let splitSubgroups: number | null = null;
/** Tests only: caps the key-split matrix prefill's subgroups a workgroup (2 or 4), so SwiftShader runs both; null: the planner's. */
export function setMatrixSplitSubgroups(n: number | null): void {
  splitSubgroups = n;
}

const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

/**
 * Whether `t` can be read as 16-byte words of `w` elements: contiguous along its last dim, and its
 * offset and every other stride (of dims longer than 1) whole words, so each word lies in one row.
 */
function wordAligned(t: Tensor, w: number): boolean {
  const r = t.ndim;
  if (r === 0 || t.offset % w !== 0 || (t.shape[r - 1]! > 1 && t.strides[r - 1] !== 1)) return false;
  return t.shape.every((n, d) => d === r - 1 || n === 1 || t.strides[d]! % w === 0);
}

/**
 * The float16 prefill on subgroup matrices (flash-attention-matrix.ts; its key-split form,
 * flash-attention-matrix-split.ts, where `split` forces it, 'auto' lets the planner's rule take
 * it, or 'rule' takes it where the rule holds and nothing otherwise) where it applies: float16 storage (packed float16 when emulated), the device's square
 * matrices, head dims and operands in whole 16-byte words, a plan within the workgroup limits.
 * Returns false (nothing done) elsewhere.
 */
function matrixPrefill(o: Tensor, query: Tensor, key: Tensor, value: Tensor, kinds: AttnKinds, nb: number, l: number, meta: Uint32Array, inputs: DeviceBuffer[], tag: string, split: boolean | 'auto' | 'rule'): boolean {
  const emulate = subgroupMatrixEmulated();
  if (kinds.x !== (emulate ? 'f16p' : 'f16') || !getOption('KILN_WEBGPU_SUBGROUP_MATRIX')) return false;
  const sm = subgroupMatrixPlan();
  if ('reason' in sm || sm.m !== sm.n || sm.m !== sm.k) return false;
  if (![query, key, value].every((t) => wordAligned(t, 8))) return false;
  if (split === 'rule' && !matrixSplitWanted(sm.m, nb, l)) return false;
  const acc = webgpu();
  const lim = stagedLimits();
  const plan = matrixPrefillPlan(sm.m, sm.sg, nb, l, kinds.e, kinds.ev, lim.maxWorkgroupBytes, lim.maxInvocations, { tileBytes: emulate ? 4 : 2, split: split === 'rule' ? true : split, maxSplitSubgroups: splitSubgroups ?? undefined });
  if (plan === null) return false;
  // The one-pass form (flash-attention-matrix-online.ts) in place of row tiles, where its plan fits.
  const online = !plan.split && getOption('KILN_WEBGPU_ATTN_MATRIX_FORM') === 'online' ? matrixOnlinePlan(sm.m, sm.sg, nb, l, kinds.e, kinds.ev, lim.maxWorkgroupBytes, lim.maxInvocations, emulate ? 4 : 2) : null;
  const run = online ?? plan;
  const form = online !== null ? 'online.' : plan.split ? 'split.' : '';
  const source = online !== null ? matrixOnlinePrefillSource : plan.split ? matrixSplitPrefillSource : matrixPrefillSource;
  const k = kernelFor(`attn.prefill.matrix.${form}${run.t}.${run.sg}.${run.sgs}.${run.bk}.${tag}${emulate ? '.emu' : ''}`, () => source(kinds, run, { emulate }));
  acc.dispatch(k, [o.storage.buffer, ...inputs], meta, groupsFor(nb * Math.ceil(l / matrixPrefillRows(run)), 1));
  prefillStats.matrix++;
  prefillStats.matrixPlans.add(`${online !== null ? 'online ' : plan.split ? 'split ' : ''}t${run.t} sg${run.sg} sgs${run.sgs} bk${run.bk}`);
  return true;
}

/**
 * softmax(q k^T * scale + mask) v into a new tensor of `out`'s meta, or null where the flash
 * kernels do not apply. `geo` is the op's geometry of these operands; S > 0 and the output is
 * non-empty.
 */
export function flashAttention(out: OutMeta, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | null, isCausal: boolean, scale: number, geo: AttentionGeometry): Tensor | null {
  const op = 'scaledDotProductAttention';
  const { e, ev, l, s } = geo;
  if (e > MAX_DIM || ev > MAX_DIM || e === 0) return null;
  const xk = dataKind(op, query);
  if (xk.wide) return null;
  let maskKind: AttnKinds['mask'] = null;
  if (mask !== null) {
    const mk = dataKind(op, mask);
    if (mk.wide) return null;
    maskKind = mk.kind;
  }
  const kinds: AttnKinds = { x: xk.kind, mask: maskKind, maskBool: mask?.dtype === 'bool', e, ev };
  const nb = geo.batch.reduce((a, b) => a * b, 1);
  const r = (t: Tensor, back: number): number => t.strides[t.ndim - back]!;
  const o = allocOut(out);
  const ob = geo.batch.length;
  const ms = geo.maskStrides;
  const decode = l <= DECODE_ROWS;
  const rows = nb * l;
  const splits = decode ? Math.max(1, Math.min(Math.ceil(TARGET_GROUPS / rows), Math.floor(s / SPLIT_MIN))) : 1;
  const splitLen = Math.ceil(s / splits);
  const meta = words([
    nb,
    l,
    s,
    f32Bits(scale),
    isCausal ? 1 : 0,
    r(query, 2),
    r(query, 1),
    r(key, 2),
    r(key, 1),
    r(value, 2),
    r(value, 1),
    ms ? ms[ob]! : 0,
    ms ? ms[ob + 1]! : 0,
    r(o, 2),
    r(o, 1),
    query.offset,
    key.offset,
    value.offset,
    mask?.offset ?? 0,
    o.offset,
    splits,
    splitLen,
    ob,
    ...geo.batch.flatMap((size, d) => [size, geo.q.strides[d]!, geo.q.divisors[d]!, geo.k.strides[d]!, geo.k.divisors[d]!, geo.v.strides[d]!, geo.v.divisors[d]!, ms ? ms[d]! : 0, o.strides[d]!]),
  ]);
  const acc = webgpu();
  const inputs = [query.storage.buffer, key.storage.buffer, value.storage.buffer, ...(mask ? [mask.storage.buffer] : [])];
  const tag = `${kinds.x}.${e}.${ev}.${kinds.mask ?? ''}${kinds.maskBool ? 'b' : ''}`;
  if (!decode) {
    const form = getOption('KILN_WEBGPU_ATTN_PREFILL');
    // matrix: the row tiles; matrix-split: the key split; auto: the planner's form from
    // MATRIX_MIN_ROWS rows, the key split where its rule holds from MATRIX_SPLIT_MIN_ROWS.
    const split = form === 'auto' ? (l >= MATRIX_MIN_ROWS ? 'auto' : 'rule') : form === 'matrix-split';
    const matrix = form === 'matrix' || form === 'matrix-split' || (form === 'auto' && l >= MATRIX_SPLIT_MIN_ROWS);
    if (matrix && matrixPrefill(o, query, key, value, kinds, nb, l, meta, inputs, tag, split)) return o;
    const plan = form !== 'rows' ? tiledPrefillPlan(nb * Math.ceil(l / 32), e, ev, acc.bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384) : null;
    if (plan) {
      const w = getOption('KILN_WEBGPU_ATTN_WORDS') ? tiledWordWidth(kinds.x) : null;
      const byWords = w !== null && e % w === 0 && ev % w === 0 && [query, key, value].every((t) => wordAligned(t, w));
      const k = kernelFor(`attn.prefill.tiled.${plan.bq}.${plan.bk}.${tag}${byWords ? '.w' : ''}`, () => tiledPrefillSource(kinds, plan, byWords));
      acc.dispatch(k, [o.storage.buffer, ...inputs], meta, groupsFor(nb * Math.ceil(l / plan.bq), 1));
      prefillStats.tiled++;
      return o;
    }
    const bk = prefillBlock(e, ev);
    const k = kernelFor(`attn.prefill.${tag}`, () => prefillSource(kinds, bk));
    acc.dispatch(k, [o.storage.buffer, ...inputs], meta, groupsFor(nb * Math.ceil(l / ATTN_WG), 1));
    prefillStats.rows++;
    return o;
  }
  if (splits === 1) {
    acc.dispatch(kernelFor(`attn.decode.${tag}`, () => decodeSource(kinds, false)), [o.storage.buffer, ...inputs], meta, groupsFor(rows, 1));
    return o;
  }
  const part = allocOut({ shape: [rows * splits * (ev + 3)], strides: [1], dtype: 'float32', device: o.device });
  try {
    acc.dispatch(kernelFor(`attn.split.${tag}`, () => decodeSource(kinds, true)), [part.storage.buffer, ...inputs], meta, groupsFor(rows * splits, 1));
    acc.dispatch(kernelFor(`attn.combine.${kinds.x}.${ev}`, () => combineSource(kinds.x, ev)), [o.storage.buffer, part.storage.buffer], meta, groupsFor(rows * ev, ATTN_WG));
  } finally {
    part.dispose();
  }
  return o;
}
