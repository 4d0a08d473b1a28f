/**
 * webgpu matrix products through one tiled WGSL GEMM (gemm-codegen.ts): mm, bmm, matmul (batched
 * with broadcasting, 1-D operands as in torch), linear (a 1-D bias fused into the epilogue, the
 * weight read transposed in place), addmm (beta and alpha in the epilogue) and dot. float32,
 * float16 and bfloat16; products are accumulated in f32 and rounded once to the output's dtype.
 * Operands are read in place with any row/column strides and up to three batch dims with their own
 * strides (broadcast batches have stride 0); an operand whose batch dims do not collapse to three is
 * copied contiguous first. float16 products run on the subgroup matrix kernel
 * (gemm-subgroup-matrix.ts) where the device has subgroup matrices, shader-f16 and a fixed subgroup
 * size (and KILN_WEBGPU_SUBGROUP_MATRIX is on); else, and for the other dtypes, on the tiled kernel.
 * With KILN_WEBGPU_SM_KERNEL=staged, float16 products whose operands are 16-byte words along their
 * contiguous dims run on the staged subgroup matrix kernel (gemm-subgroup-matrix-staged.ts) instead,
 * on the planner's tiles or KILN_WEBGPU_SM_PLAN's (experiments; a stages-0 plan runs only on products
 * whose M, N and K are multiples of its tile, the others on the planner's).
 * With KILN_WEBGPU_GEMV (the default), products of at most 8 rows with both operands contiguous along K (a decode
 * step's projections, x @ W^T) run on the skinny kernel (gemv-codegen.ts) whatever the dtype: the
 * tiled kernels would give such a product N/64 or N/128 workgroups with one real row each.
 * With KILN_WEBGPU_GEMM_SMALL (the default), single-batch products with fewer than SPLIT_TARGET
 * output tiles (a 128-token prefill's projections: 8 to 32 tiles walking K = 1024..3072; the
 * 64-row MLP) take the staged kernel's 64x64 tiles instead of 128x128, and split K into slices
 * (planSplitK): f32 partial sums per slice, summed in slice order by a combine kernel that applies
 * alpha, bias and beta (gemm-codegen.ts), for the tiled and the staged kernels alike.
 * KILN_WEBGPU_GEMM_TILE picks the tiled kernel's form for the products that take it unsplit: the
 * 128x128 tiles (8x8 blocks per invocation from vec4 workgroup tiles, gemm-tile.ts) or the 64x64
 * ones; `auto` (the default) takes the large form for M, N >= 128 from LARGE_TILE_MIN tiles
 * (chooseLargeTile): on an H100, mlp-2048x4096 float32 5.93 -> 4.02 ms.
 */
import { foldRows } from '../cpu/matrix-views.js';
import { addmm, bmm, dot, linear, matmul, mm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DeviceBuffer } from '../../runtime/accelerator.js';
import type { WebgpuKernel } from '../../runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../../tensor/dtype.js';
import { broadcastShapes, broadcastStrides, contiguousStrides, fmtShape, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { WGSL_TEMPLATES } from '../math/wgsl.js';
import { copyTensor } from './core.js';
import { allocOut, webgpu } from './device.js';
import { CONV_A_META, GEMM_BATCH_DIMS, GEMM_BK, GEMM_BM, GEMM_BN, GEMM_COMBINE_WG, GEMM_META, gemmCombineKey, gemmKey, generateGemm, generateGemmCombine, type GemmAct, type GemmGelu, type GemmSpec } from './gemm-codegen.js';
import { GEMM_LARGE_BM } from './gemm-tile.js';
import { GEMV_MAX_M, gemvCols, gemvKey, gemvRows, gemvUnroll, gemvVecElems, generateGemv, type GemvSpec } from './gemv-codegen.js';
import { generateStagedGemm, parseStagedPlan, planStaged, stagedKey, stagedPlanProblem, stagedTileK, stagedTileM, stagedTileN, type StagedLimits, type StagedPlan } from './gemm-subgroup-matrix-staged.js';
import type { StorageKind as Kind } from './storage.js';
import { f16StoreKey } from './f16-store-probe.js';
import { generateSubgroupMatrixGemm, planSubgroupMatrix, smKey, smTileM, smTileN, type SubgroupMatrixPlan } from './gemm-subgroup-matrix.js';
import { getOption } from '../../runtime/config.js';
import { runPointwise } from './pointwise-run.js';
import { coalesceDims as coalesce } from './fused/layout.js';
import { storageKind, type StorageKind } from './storage.js';

const GEMM_DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16'];
const programs = new Map<string, WebgpuKernel>();
/** The bits of v rounded to float32 (a metadata word). */
export const f32Bits = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

/** One GEMM problem: out [...batch, M, N] = alpha * a [...batch, M, K] @ b [...batch, K, N] (+ bias [N]) (+ beta * out). */
export interface WebgpuGemm {
  readonly op: string;
  readonly out: Tensor;
  readonly a: Tensor;
  readonly b: Tensor;
  readonly batch: readonly number[];
  readonly M: number;
  readonly N: number;
  readonly K: number;
  /** Indexed by the output column: a tensor whose every dim but the last has size 1. */
  readonly bias?: Tensor | null;
  readonly alpha?: number;
  readonly beta?: number;
  /** ReLU on the result (after alpha, bias and beta; GemmSpec.relu): conv2dBatchNorm's fused activation. */
  readonly relu?: boolean;
  /** GELU on the result (after alpha, bias and beta; GemmSpec.gelu): llm.linearGelu's activation. */
  readonly gelu?: GemmGelu;
  /**
   * `a` is a channels_last conv input read through im2col addresses (GemmSpec.aConv; the staged
   * float16 kernel only, which the caller checked is available): its CONV_A_META words. `a` itself
   * is then a [M, K] view at the input's offset (its strides only pass the word checks).
   */
  readonly convA?: readonly number[];
}

/** The pipeline for a spec, compiled on first use (exported for the null-backend validation test). */
export function gemmKernel(spec: GemmSpec): WebgpuKernel {
  const key = gemmKey(spec);
  let k = programs.get(key + f16StoreKey());
  if (!k) {
    k = webgpu().kernel(generateGemm(spec), `kiln.gemm (${key})`);
    programs.set(key + f16StoreKey(), k);
  }
  return k;
}

/** The split-K combine pipeline for an output kind and epilogue, compiled on first use. */
export function gemmCombineKernel(c: Kind, bias: boolean, beta: boolean, act: GemmAct = {}): WebgpuKernel {
  const key = gemmCombineKey(c, bias, beta, act);
  let k = programs.get(key + f16StoreKey());
  if (!k) {
    k = webgpu().kernel(generateGemmCombine(c, bias, beta, act), `kiln.gemm (${key})`);
    programs.set(key + f16StoreKey(), k);
  }
  return k;
}

/**
 * Whether float16 GEMMs of storage `kind` whose operands are 16-byte words run on the staged
 * subgroup matrix kernel here (conv-im2col.ts builds such operands for float16 convolutions).
 */
export function stagedGemmAvailable(kind: Kind): boolean {
  if (!(kind === 'f16' || (emulated !== null && kind === 'f16p')) || !getOption('KILN_WEBGPU_SUBGROUP_MATRIX')) return false;
  if (emulated === null && getOption('KILN_WEBGPU_SM_KERNEL') !== 'staged') return false;
  const plan = subgroupMatrixPlan();
  return !('reason' in plan) && stagedSubgroupMatrixPlan(plan) !== null;
}

/** Output tiles (workgroups) below which a single-batch product takes smaller tiles and splits K (the default of KILN_WEBGPU_GEMM_SPLIT_TARGET). */
export const SPLIT_TARGET = 256;
/** The split's workgroup target: KILN_WEBGPU_GEMM_SPLIT_TARGET (experiments), SPLIT_TARGET by default. */
const splitTarget = (): number => getOption('KILN_WEBGPU_GEMM_SPLIT_TARGET');
/** The shortest K slice of a split (elements): 8 tiled or 4 staged K steps. */
const SPLIT_MIN_K = 128;
/** The most f32 partial sums a split may hold (64 MiB of scratch). */
const SPLIT_MAX_PARTIALS = 1 << 24;

/**
 * K slices for a single-batch product of `tiles` output tiles (1: no split) and the K of each
 * slice, a multiple of the kernel's K step `kStep`: enough slices for about SPLIT_TARGET
 * workgroups, none shorter than SPLIT_MIN_K, the partial sums within SPLIT_MAX_PARTIALS.
 */
export function planSplitK(tiles: number, M: number, N: number, K: number, kStep: number): { splits: number; kc: number } {
  const none = { splits: 1, kc: K };
  const target = splitTarget();
  if (tiles >= target) return none;
  const want = Math.min(Math.ceil(target / tiles), Math.floor(K / SPLIT_MIN_K), Math.floor(SPLIT_MAX_PARTIALS / (M * N)));
  if (want <= 1) return none;
  const kc = Math.ceil(K / want / kStep) * kStep;
  const splits = Math.ceil(K / kc);
  return splits <= 1 ? none : { splits, kc };
}

/** Tiles of 128x128 (over all batches) from which KILN_WEBGPU_GEMM_TILE=auto takes the large form. */
export const LARGE_TILE_MIN = 256;

/**
 * Whether the plain tiled dispatch (no subgroup matrices, no split K) takes the 128x128 form for
 * [nb batches of] M x N: mode 'large' always, 'small' never, 'auto' where M and N are both at
 * least 128 (a smaller product, say attention scores over many batches, would leave most of each
 * 128x128 tile idle) and there are at least LARGE_TILE_MIN tiles of 128x128 (fewer leave SMs idle:
 * the 64x64 form gives four times the workgroups).
 */
export function chooseLargeTile(mode: 'auto' | 'small' | 'large', M: number, N: number, nb: number): boolean {
  if (mode !== 'auto') return mode === 'large';
  if (M < GEMM_LARGE_BM || N < GEMM_LARGE_BM) return false;
  return Math.ceil(M / GEMM_LARGE_BM) * Math.ceil(N / GEMM_LARGE_BM) * nb >= LARGE_TILE_MIN;
}

/** Plain tiled GEMM dispatches by form since the process started (tests: which form a product ran on). */
export const gemmStats = { small: 0, large: 0 };

/** Keys of the GEMM pipelines compiled so far (tests: which kernel a product ran on). */
export function gemmPipelineKeys(): string[] {
  return [...programs.keys()];
}

/**
 * The GEMV's per-shape tuning (issue #20): words per lane per K step (gemvUnroll with
 * KILN_WEBGPU_GEMV_UNROLL) and the team sums through subgroupAdd (KILN_WEBGPU_GEMV_TEAM_SUBGROUP,
 * where the device's subgroups are exactly 32 wide: a team is then one subgroup).
 */
export function gemvTuning(kind: GemvSpec['kind'], K: number, N: number, gated: boolean): Pick<GemvSpec, 'unroll' | 'teamSubgroup'> & { cols: 4 | 8 } {
  const acc = webgpu();
  const a = acc.bridge.adapter;
  const teamSubgroup = getOption('KILN_WEBGPU_GEMV_TEAM_SUBGROUP') && acc.hasFeature('subgroups') && a.subgroupMinSize === 32 && a.subgroupMaxSize === 32;
  // cols is always set (gemvKey leaves the default 8 out of the key), so callers size the grid from it.
  return { unroll: gemvUnroll(kind, K, gated, getOption('KILN_WEBGPU_GEMV_UNROLL')), ...(teamSubgroup ? { teamSubgroup } : {}), cols: gemvCols(N, getOption('KILN_WEBGPU_GEMV_COLS4_MAX_N')) };
}

/** The skinny-GEMM pipeline for a spec, compiled on first use. */
export function gemvKernel(spec: GemvSpec): WebgpuKernel {
  const key = gemvKey(spec);
  let k = programs.get(key + f16StoreKey());
  if (!k) {
    k = webgpu().kernel(generateGemv(spec), `kiln.gemm (${key})`);
    programs.set(key + f16StoreKey(), k);
  }
  return k;
}

/**
 * Whether `t`'s buffer is whole 16-byte words, so that a kernel viewing it as array<vec4<u32>> sees
 * every byte (the caching allocator rounds to 512 bytes; a buffer made otherwise might not).
 */
export const wholeWords = (t: Tensor): boolean => t.storage.buffer.capacity % 16 === 0;

/**
 * Whether a GEMM of a few rows runs on the skinny kernel (gemv-codegen.ts): KILN_WEBGPU_GEMV is on,
 * M <= GEMV_MAX_M, one batch, and A and B are exact as 16-byte words along K (unit K strides; K,
 * offsets and row strides multiples of a word's elements).
 */
export function gemvEligible(kind: StorageKind, M: number, K: number, nb: number, a: Tensor, b: Tensor): boolean {
  if (!getOption('KILN_WEBGPU_GEMV') || M > GEMV_MAX_M || nb !== 1 || K === 0) return false;
  const v = gemvVecElems(kind);
  if (v === 0 || K % v !== 0) return false;
  const sAm = a.strides[a.ndim - 2]!;
  const sAk = a.strides[a.ndim - 1]!;
  const sBk = b.strides[b.ndim - 2]!;
  const sBn = b.strides[b.ndim - 1]!;
  return sAk === 1 && sBk === 1 && a.offset % v === 0 && b.offset % v === 0 && (M === 1 || sAm % v === 0) && sBn % v === 0 && wholeWords(a) && wholeWords(b);
}

let smPlan: SubgroupMatrixPlan | { reason: string } | undefined;
/** Test hook (emulateSubgroupMatrix): the matrix shape and subgroup size the staged kernel emulates. */
let emulated: { m: number; n: number; k: number; sg: number } | null = null;

/** The subgroup matrix plan of this device (computed once), or why float16 GEMMs do not use one. */
export function subgroupMatrixPlan(): SubgroupMatrixPlan | { reason: string } {
  if (emulated) return { ...emulated, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: Math.max(1, Math.floor(32 / emulated.k)) };
  smPlan ??= planSubgroupMatrix(webgpu().bridge.adapter);
  return smPlan;
}

/** Whether the float16 matrix kernels are written emulated (tests; see emulateSubgroupMatrix). */
export function subgroupMatrixEmulated(): boolean {
  return emulated !== null;
}

/**
 * Tests only: float16 products run on the staged kernel written without subgroup matrices or
 * shader-f16 (gemm-subgroup-matrix-staged.ts, `emulate`) for matrices of this shape and subgroup
 * size, so SwiftShader checks the staged plans' numbers; null turns it off. Products the staged
 * kernel does not take run on the tiled kernel meanwhile (the first subgroup matrix kernel has no
 * emulation); the float16 attention prefill on matrices (flash-attention-matrix.ts) is emulated too.
 */
export function emulateSubgroupMatrix(shape: { m: number; n: number; k: number; sg: number } | null): void {
  emulated = shape;
  stagedPlans.clear();
}

/** The subgroup matrix pipeline for a spec and plan, compiled on first use. */
export function subgroupMatrixKernel(spec: GemmSpec, plan: SubgroupMatrixPlan): WebgpuKernel {
  const key = smKey(spec, plan);
  let k = programs.get(key + f16StoreKey());
  if (!k) {
    k = webgpu().kernel(generateSubgroupMatrixGemm(spec, plan), `kiln.gemm (${key})`);
    programs.set(key + f16StoreKey(), k);
  }
  return k;
}

/** Staged plans by KILN_WEBGPU_SM_PLAN ('' for the planner's): the plan, or null where no tile fits. */
const stagedPlans = new Map<string, StagedPlan | null>();

/** The device's limits a workgroup of the matrix kernels must fit (the staged GEMM, the matrix attention prefill). */
export function stagedLimits(): StagedLimits {
  const l = webgpu().bridge.adapter.limits;
  return { maxInvocations: Math.min(l.maxComputeInvocationsPerWorkgroup ?? 256, l.maxComputeWorkgroupSizeX ?? 256), maxWorkgroupBytes: l.maxComputeWorkgroupStorageSize ?? 16384 };
}

/**
 * The staged subgroup matrix plan (from the device's plan): KILN_WEBGPU_SM_PLAN's where set (a plan
 * the device cannot run throws, saying why), else the planner's; null where no tile fits.
 */
export function stagedSubgroupMatrixPlan(base: SubgroupMatrixPlan): StagedPlan | null {
  const text = getOption('KILN_WEBGPU_SM_PLAN') ?? '';
  const refill = getOption('KILN_WEBGPU_SM_REFILL');
  let plan = stagedPlans.get(`${text}|${refill}`);
  if (plan === undefined) {
    const opts = { emulate: emulated !== null };
    if (text === '') {
      plan = planStaged(base, stagedLimits(), opts, refill);
    } else {
      plan = parseStagedPlan(text, base, refill);
      const why = stagedPlanProblem(plan, stagedLimits(), opts);
      if (why !== null) throw new RangeError(`KILN_WEBGPU_SM_PLAN=${JSON.stringify(text)}: this device cannot run the plan: ${why} (matrices ${base.m}x${base.n}x${base.k}, subgroups of ${base.sg})`);
    }
    stagedPlans.set(`${text}|${refill}`, plan);
  }
  return plan;
}

/** The staged subgroup matrix pipeline for a spec and plan, compiled on first use. */
export function stagedKernel(spec: GemmSpec, plan: StagedPlan): WebgpuKernel {
  const opts = { emulate: emulated !== null };
  const key = stagedKey(spec, plan, opts);
  let k = programs.get(key + f16StoreKey());
  if (!k) {
    k = webgpu().kernel(generateStagedGemm(spec, plan, opts), `kiln.gemm (${key})`);
    programs.set(key + f16StoreKey(), k);
  }
  return k;
}

/**
 * Whether the staged kernel can read both operands as 16-byte words (gemm-subgroup-matrix-staged.ts):
 * each contiguous along the dim its spec names, that dim's extent a multiple of 8, and its offset,
 * other stride (where it has more than one line) and batch strides multiples of 8.
 */
function stagedEligible(spec: GemmSpec, M: number, N: number, K: number, a: Tensor, b: Tensor, batchStrides: readonly (readonly number[])[]): boolean {
  const sAm = a.strides[a.ndim - 2]!;
  const sAk = a.strides[a.ndim - 1]!;
  const sBk = b.strides[b.ndim - 2]!;
  const sBn = b.strides[b.ndim - 1]!;
  const w = (x: number): boolean => x % 8 === 0;
  const aOk = spec.aMajor === 'k' ? sAk === 1 && w(K) && (M === 1 || w(sAm)) : sAm === 1 && w(M) && (K === 1 || w(sAk));
  const bOk = spec.bMajor === 'n' ? sBn === 1 && w(N) && (K === 1 || w(sBk)) : sBk === 1 && w(K) && (N === 1 || w(sBn));
  return aOk && bOk && wholeWords(a) && wholeWords(b) && w(a.offset) && w(b.offset) && batchStrides[1]!.every(w) && batchStrides[2]!.every(w);
}

/** `t` [...tBatch, R, C] expanded to [...batch, R, C] and copied contiguous. */
function denseExpanded(t: Tensor, batch: readonly number[]): Tensor {
  const mat = t.shape.slice(-2);
  const shape = [...batch, ...mat];
  const strides = [...broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch), ...t.strides.slice(-2)];
  const view = new Tensor(t.storage, t.dtype, shape, strides, t.offset);
  try {
    return copyTensor(allocOut({ shape, strides: contiguousStrides(shape), dtype: t.dtype, device: t.device }), view);
  } finally {
    view.dispose();
  }
}

/**
 * The GEMM_META words a skinny GEMV launch reads (shared by the gated and the norm-prologue GEMV):
 * sizes and grid ([M, N, K], one batch, N's groups of `cols` columns, row blocks of `mr`), out [M, N] dense,
 * x rows `lda` apart from `aOffset`, W's rows `ldw` apart from `bOffset`, the bias if any, alpha 1.
 */
export function setGemvMeta(meta: Uint32Array, M: number, N: number, K: number, mr: number, cols: number, out: Tensor, aOffset: number, lda: number, bOffset: number, ldw: number, bias: Tensor | null): void {
  const m = GEMM_META;
  meta.set([M, N, K, 1, Math.ceil(N / cols), Math.ceil(M / mr), 1, 1, 1]);
  meta.set([out.offset, N, 1, 0, 0, 0], m.c);
  meta.set([aOffset, lda, 1, 0, 0, 0], m.a);
  meta.set([bOffset, 1, ldw, 0, 0, 0], m.b);
  if (bias) meta.set([bias.offset, 1], m.bias);
  meta[m.alpha] = f32Bits(1);
}

/**
 * llm.linearSiluAndMul on the skinny kernel's gated variant (gemv-codegen.ts): out [M, I] =
 * silu(x W[:I]^T + b[:I]) * (x W[I:]^T + b[I:]) for x [M, K] with M <= GEMV_MAX_M rows, where the
 * plain GEMV would take x @ W^T (gemvEligible; x's rows one stride apart, W dense along K, a bias
 * dense too). Returns false, dispatching nothing, where it does not apply (the caller runs the two
 * ops). `out` is contiguous [..., I].
 */
export function runGemvGated(x: Tensor, w: Tensor, bias: Tensor | null, out: Tensor): boolean {
  const K = x.shape[x.ndim - 1]!;
  const I = w.shape[0]! / 2;
  const M = numel(x.shape) / Math.max(K, 1);
  if (M === 0 || I === 0 || M > GEMV_MAX_M || !GEMM_DTYPES.includes(x.dtype)) return false;
  if (bias !== null && bias.strides[0] !== 1) return false;
  // x's rows as one matrix: every leading dim folds into the row stride (contiguous x, or one row).
  const rowStride = M === 1 ? K : x.isContiguous() ? K : -1;
  if (rowStride < 0 || x.strides[x.ndim - 1] !== 1) return false;
  const acc = webgpu();
  const kind = storageKind(x.dtype, acc.hasFeature('shader-f16'))!;
  const a = new Tensor(x.storage, x.dtype, [M, K], [rowStride, 1], x.offset);
  const b = new Tensor(w.storage, w.dtype, [K, 2 * I], [w.strides[1]!, w.strides[0]!], w.offset);
  try {
    if (!gemvEligible(kind, M, K, 1, a, b)) return false;
    const mr = gemvRows(M);
    const tuning = gemvTuning(kind, K, I, true);
    const groups = Math.ceil(I / tuning.cols);
    const meta = new Uint32Array(GEMM_META.words);
    setGemvMeta(meta, M, I, K, mr, tuning.cols, out, a.offset, rowStride, b.offset, w.strides[0]!, bias);
    const buffers: DeviceBuffer[] = [out.storage.buffer, x.storage.buffer, w.storage.buffer, ...(bias ? [bias.storage.buffer] : [])];
    acc.dispatch(gemvKernel({ kind, mr, bias: bias !== null, beta: false, gated: true, ...tuning }), buffers, meta, [Math.min(groups, 65535), Math.ceil(M / mr), 1]);
    return true;
  } finally {
    a.dispose();
    b.dispose();
  }
}

/** Runs one GEMM on webgpu; returns `out`. */
export function runGemm(g: WebgpuGemm): Tensor {
  const { op, out, M, N, K, batch } = g;
  const dtype = out.dtype;
  const shapes = `${fmtShape(g.a.shape)} @ ${fmtShape(g.b.shape)}`;
  if (!GEMM_DTYPES.includes(dtype)) throw new TypeError(`${op}: the webgpu GEMM supports float32, float16 and bfloat16, got ${dtype} (${shapes})`);
  const nb = numel(batch);
  if (M === 0 || N === 0 || nb === 0) return out;
  const acc = webgpu();
  const kind = storageKind(dtype, acc.hasFeature('shader-f16'))!;
  const temps: Tensor[] = [];
  try {
    let a = g.a;
    let b = g.b;
    const batchStrides = (): { shape: number[]; strides: number[][] } =>
      coalesce(batch, [out.strides.slice(0, -2), broadcastStrides(a.shape.slice(0, -2), a.strides.slice(0, -2), batch), broadcastStrides(b.shape.slice(0, -2), b.strides.slice(0, -2), batch)]);
    let bs = batchStrides();
    if (bs.shape.length > GEMM_BATCH_DIMS) {
      // The output is contiguous, so dense operands collapse to one batch dim.
      a = denseExpanded(a, batch);
      b = denseExpanded(b, batch);
      temps.push(a, b);
      bs = batchStrides();
    }
    const pad = GEMM_BATCH_DIMS - bs.shape.length;
    const sizes = [...new Array<number>(pad).fill(1), ...bs.shape];
    const bstr = bs.strides.map((s) => [...new Array<number>(pad).fill(0), ...s]);

    const bias = g.bias ?? null;
    const sAm = a.strides[a.ndim - 2]!;
    const sAk = a.strides[a.ndim - 1]!;
    const sBk = b.strides[b.ndim - 2]!;
    const sBn = b.strides[b.ndim - 1]!;
    const spec: GemmSpec = {
      a: kind,
      b: kind,
      c: kind,
      aMajor: sAm === 1 && sAk !== 1 ? 'm' : 'k',
      bMajor: sBk === 1 && sBn !== 1 ? 'k' : 'n',
      bias: bias !== null,
      beta: (g.beta ?? 0) !== 0,
      ...(g.relu === true ? { relu: true } : {}),
      ...(g.gelu !== undefined ? { gelu: g.gelu } : {}),
      ...(g.convA ? { aConv: true, ...(getOption('KILN_WEBGPU_CONV_CARRY') ? { aConvCarry: true } : {}) } : {}),
    };
    if (g.convA && (g.convA.length !== CONV_A_META.words || spec.aMajor !== 'k')) throw new Error(`${op}: a conv-input GEMM takes ${CONV_A_META.words} geometry words and a row-major [M, K] view, got ${g.convA.length} words (${shapes})`);
    const buffers: DeviceBuffer[] = [out.storage.buffer, a.storage.buffer, b.storage.buffer];
    if (bias) buffers.push(bias.storage.buffer);
    const limit = acc.bridge.adapter.limits.maxStorageBufferBindingSize ?? 2 ** 27;
    for (const buf of buffers) if (buf.capacity > limit) throw new RangeError(`${op}: a webgpu buffer of ${buf.capacity} bytes exceeds the device's maxStorageBufferBindingSize (${limit}) (${shapes}); tensors that large need chunked kernels (not yet)`);

    const meta = new Uint32Array(GEMM_META.words + (g.convA ? CONV_A_META.words : 0));
    if (g.convA) meta.set(g.convA, CONV_A_META.at);
    const fillMeta = (tilesN: number, tilesM: number): void => {
      const w = GEMM_META;
      meta.set([M, N, K, nb, tilesN, tilesM, ...sizes]);
      meta.set([out.offset, out.strides[out.ndim - 2]!, out.strides[out.ndim - 1]!, ...bstr[0]!], w.c);
      meta.set([a.offset, sAm, sAk, ...bstr[1]!], w.a);
      meta.set([b.offset, sBk, sBn, ...bstr[2]!], w.b);
      if (bias) meta.set([bias.offset, bias.ndim === 0 || bias.shape[bias.ndim - 1] === 1 ? 0 : bias.strides[bias.ndim - 1]!], w.bias);
      meta[w.alpha] = f32Bits(g.alpha ?? 1);
      meta[w.beta] = f32Bits(g.beta ?? 0);
    };
    // (The GEMV has no ReLU epilogue: a product with one takes the tiled kernels.)
    if (g.relu !== true && !g.convA && gemvEligible(kind, M, K, nb, a, b)) {
      // A few rows (a decode step's projections): the skinny kernel, grid x over column groups (8, or 4: gemvCols).
      const mr = gemvRows(M);
      const tuning = gemvTuning(kind, K, N, false);
      const groups = Math.ceil(N / tuning.cols);
      fillMeta(groups, Math.ceil(M / mr));
      acc.dispatch(gemvKernel({ kind, mr, bias: spec.bias, beta: spec.beta, ...tuning }), buffers, meta, [Math.min(groups, 65535), Math.ceil(M / mr), 1]);
      // Its GELU as a pass over the few rows: the GEMV streams the weight at a rate the tiled kernels
      // do not reach at these sizes, which is worth more than the dispatch the epilogue saves.
      if (g.gelu !== undefined) runPointwise(op, out, [out, g.gelu], (m) => geluEntry(m, { out: out.dtype }));
      return out;
    }
    const plan = (kind === 'f16' || (emulated !== null && kind === 'f16p')) && getOption('KILN_WEBGPU_SUBGROUP_MATRIX') ? subgroupMatrixPlan() : null;
    let sm = plan !== null && !('reason' in plan) ? plan : null;
    let staged = sm && (emulated !== null || getOption('KILN_WEBGPU_SM_KERNEL') === 'staged') && stagedEligible(spec, M, N, K, a, b, bstr) ? stagedSubgroupMatrixPlan(sm) : null;
    // Stages 0 loads whole matrices from the operands, the first K step's before the loop: only
    // whole tiles and K > 0 (else the planner's plan), so no matrix load leaves its operand.
    if (g.convA && !staged) throw new Error(`${op}: a conv-input GEMM needs the staged float16 subgroup-matrix kernel, which this call cannot take (${shapes})`);
    if (staged && staged.stages === 0 && (g.convA !== undefined || K === 0 || M % stagedTileM(staged) !== 0 || N % stagedTileN(staged) !== 0 || K % stagedTileK(staged) !== 0)) staged = planStaged(sm!, stagedLimits(), { emulate: emulated !== null });
    const small = nb === 1 && getOption('KILN_WEBGPU_GEMM_SMALL');
    // Split K: the partial kernel writes raw f32 sums per slice, the combine applies the epilogue.
    const splitRun = (kernel: (s: GemmSpec) => WebgpuKernel, tn: number, tm: number, split: { splits: number; kc: number }): void => {
      const scratch = allocOut({ shape: [split.splits * M * N], strides: [1], dtype: 'float32', device: out.device });
      try {
        fillMeta(tn, tm);
        meta[GEMM_META.batch] = split.splits;
        meta[GEMM_META.kc] = split.kc;
        const { relu: _relu, gelu: _gelu, ...raw } = spec;
        const pspec: GemmSpec = { ...raw, c: 'f32', bias: false, beta: false, partial: true };
        acc.dispatch(kernel(pspec), [scratch.storage.buffer, a.storage.buffer, b.storage.buffer], meta, [Math.min(tn, 65535), Math.min(tm, 65535), split.splits]);
        const cbufs = [out.storage.buffer, scratch.storage.buffer, ...(bias ? [bias.storage.buffer] : [])];
        const groups = Math.ceil((M * N) / GEMM_COMBINE_WG);
        acc.dispatch(gemmCombineKernel(kind, spec.bias, spec.beta, spec), cbufs, meta, [Math.min(groups, 65535), Math.min(Math.ceil(groups / 65535), 65535), 1]);
      } finally {
        scratch.dispose();
      }
    };
    if (staged) {
      // The planner's plan only: 64-wide tiles along a dim of at most 64 (a 128-wide tile would
      // be half padding), and 64x64 tiles where 128x128 ones give a single batch few workgroups.
      if (getOption('KILN_WEBGPU_GEMM_SMALL') && getOption('KILN_WEBGPU_SM_PLAN') === undefined) {
        let tm = M <= 64 ? Math.min(2, staged.tm) : staged.tm;
        let tn = N <= 64 ? Math.min(2, staged.tn) : staged.tn;
        const base = staged;
        const tilesAt = (tm: number, tn: number): number => Math.ceil(N / (base.sgn * tn * base.n)) * Math.ceil(M / (base.sgm * tm * base.m));
        let ks = staged.ks;
        if (nb === 1 && tilesAt(tm, tn) < splitTarget()) {
          [tm, tn] = [Math.min(2, tm), Math.min(2, tn)];
          // KILN_WEBGPU_SM_SMALL_DEEP: K steps twice as deep where the 64x64 tiles are at most 128
          // (each workgroup's K loop is latency-bound: half the steps, half the barriers), and 32x32
          // tiles for a product of at most 64 rows with fewer than 16 of them. H100, session 34
          // (bench/webgpu-gemm-shapes.ts): Qwen3 128-token qkv 21.1 -> 18.2 us, down 16.6 -> 15.0,
          // o_proj 14.2 -> 13.1 (gate_up, 192 tiles: 26.0 -> 30.1, so not there); mlp-64x512's layer
          // 10.3 -> 7.6 us.
          if (getOption('KILN_WEBGPU_SM_SMALL_DEEP')) {
            const tiles64 = tilesAt(tm, tn);
            if (tiles64 <= 128) ks = 2 * staged.ks;
            if (M <= 64 && tiles64 < 16) [tm, tn] = [1, 1];
          }
        }
        const shrunk: StagedPlan = { ...staged, tm, tn, ks };
        if ((tm !== staged.tm || tn !== staged.tn || ks !== staged.ks) && stagedPlanProblem(shrunk, stagedLimits(), { emulate: emulated !== null }) === null) staged = shrunk;
      }
      const plan = staged;
      const tn = Math.ceil(N / stagedTileN(plan));
      const tm = Math.ceil(M / stagedTileM(plan));
      const split = small && plan.stages !== 0 ? planSplitK(tn * tm, M, N, K, stagedTileK(plan)) : { splits: 1, kc: K };
      if (split.splits > 1) {
        splitRun((s) => stagedKernel(s, plan), tn, tm, split);
        return out;
      }
      fillMeta(tn, tm);
      acc.dispatch(stagedKernel(spec, plan), buffers, meta, [Math.min(tn, 65535), Math.min(tm, 65535), Math.min(nb, 65535)]);
      return out;
    }
    // Emulation covers the staged kernel only: what it does not take runs on the tiled kernel.
    if (emulated !== null) sm = null;
    if (!sm && small) {
      // KILN_WEBGPU_GEMM_SPLIT_TILE=large: the 128x128 form splits K too (M and N of 128 or more),
      // fewer tiles with more K slices each, at the large form's better FMAs per load.
      const largeSplit = getOption('KILN_WEBGPU_GEMM_SPLIT_TILE') === 'large' && M >= GEMM_LARGE_BM && N >= GEMM_LARGE_BM;
      const bt = largeSplit ? GEMM_LARGE_BM : GEMM_BN;
      const tn = Math.ceil(N / bt);
      const tm = Math.ceil(M / bt);
      const split = planSplitK(tn * tm, M, N, K, GEMM_BK);
      if (split.splits > 1) {
        splitRun((s) => gemmKernel(largeSplit ? { ...s, tile: 'large' } : s), tn, tm, split);
        return out;
      }
    }
    // The tiled kernel's large form where it has the tiles to fill the GPU.
    const large = !sm && chooseLargeTile(getOption('KILN_WEBGPU_GEMM_TILE'), M, N, nb);
    const tileN = sm ? smTileN(sm) : large ? GEMM_LARGE_BM : GEMM_BN;
    const tileM = sm ? smTileM(sm) : large ? GEMM_LARGE_BM : GEMM_BM;
    fillMeta(Math.ceil(N / tileN), Math.ceil(M / tileM));
    const tilesN = meta[GEMM_META.tilesN]!;
    const tilesM = meta[GEMM_META.tilesM]!;
    if (!sm) gemmStats[large ? 'large' : 'small']++;
    acc.dispatch(sm ? subgroupMatrixKernel(spec, sm) : gemmKernel(large ? { ...spec, tile: 'large' } : spec), buffers, meta, [Math.min(tilesN, 65535), Math.min(tilesM, 65535), Math.min(nb, 65535)]);
  } finally {
    for (const t of temps) t.dispose();
  }
  return out;
}

/** `fill(out)`, disposing `out` when it throws (an output nobody receives must not stay allocated). */
export function into(out: Tensor, fill: (out: Tensor) => void): Tensor {
  try {
    fill(out);
  } catch (e) {
    out.dispose();
    throw e;
  }
  return out;
}

/** A 1-D operand as a matrix: [1, K] on the left, [K, 1] on the right. */
function asMatrix(t: Tensor, side: 'lhs' | 'rhs'): Tensor {
  if (t.ndim !== 1) return t;
  const n = t.shape[0]!;
  return side === 'lhs' ? new Tensor(t.storage, t.dtype, [1, n], [0, t.strides[0]!], t.offset) : new Tensor(t.storage, t.dtype, [n, 1], [t.strides[0]!, 0], t.offset);
}

function matmulKernel(op: string, meta: OutMeta, a: Tensor, b: Tensor): Tensor {
  return into(allocOut(meta), (out) => matmulInto(op, out, a, b));
}

function matmulInto(op: string, out: Tensor, a: Tensor, b: Tensor): void {
  const a2 = asMatrix(a, 'lhs');
  const b2 = asMatrix(b, 'rhs');
  const views: Tensor[] = [];
  try {
    const M = a2.shape[a2.ndim - 2]!;
    const K = a2.shape[a2.ndim - 1]!;
    const N = b2.shape[b2.ndim - 1]!;
    const batch = broadcastShapes(op, a2.shape.slice(0, -2), b2.shape.slice(0, -2));
    // x @ W with a 2-D right operand: fold the batch into M when `a` allows it (one big tile grid).
    if (b2.ndim === 2 && batch.length > 0) {
      const rows = numel(batch) * M;
      const af = foldRows(a2, rows, K);
      if (af) {
        views.push(af);
        const flat = new Tensor(out.storage, out.dtype, [rows, N], [N, 1], out.offset);
        views.push(flat);
        runGemm({ op, out: flat, a: af, b: b2, batch: [], M: rows, N, K });
        return;
      }
    }
    const view = new Tensor(out.storage, out.dtype, [...batch, M, N], contiguousStrides([...batch, M, N]), out.offset);
    views.push(view);
    runGemm({ op, out: view, a: a2, b: b2, batch, M, N, K });
  } finally {
    for (const v of views) v.dispose();
    if (a2 !== a) a2.dispose();
    if (b2 !== b) b2.dispose();
  }
}

registerKernel(matmul, 'webgpu', (ctx, self, other) => matmulKernel('matmul', ctx.out, self, other));
registerKernel(mm, 'webgpu', (ctx, self, mat2) => matmulKernel('mm', ctx.out, self, mat2));
registerKernel(bmm, 'webgpu', (ctx, self, mat2) => matmulKernel('bmm', ctx.out, self, mat2));
registerKernel(dot, 'webgpu', (ctx, self, tensor) => matmulKernel('dot', ctx.out, self, tensor));

/** Whether a bias broadcast to [rows, N] varies only along N (so the epilogue can add it). */
const columnBias = (bias: Tensor): boolean => bias.shape.slice(0, -1).every((s) => s === 1);

const addEntry = WGSL_TEMPLATES.get('add')!;
const geluEntry = WGSL_TEMPLATES.get('gelu')!;

registerKernel(linear, 'webgpu', (ctx, input, weight, bias) => into(allocOut(ctx.out), (out) => linearInto(out, input, weight, bias)));

/**
 * out = input @ weight^T (+ bias) [then GELU, `gelu`: in the GEMM's epilogue, the value rounded
 * once; llm.linearGelu's kernel, llm-linear-gelu.ts, passes it with a [N] bias and a 2-d weight].
 */
export function linearInto(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor | null, gelu?: GemmGelu): void {
  const K = input.shape[input.ndim - 1]!;
  const rows = numel(input.shape.slice(0, -1));
  const N = weight.ndim === 2 ? weight.shape[0]! : 1;
  const temps: Tensor[] = [];
  try {
    let x = input.ndim === 1 ? new Tensor(input.storage, input.dtype, [1, K], [K, input.strides[0]!], input.offset) : foldRows(input, rows, K);
    if (!x) {
      const dense = copyTensor(allocOut({ shape: input.shape, strides: contiguousStrides(input.shape), dtype: input.dtype, device: input.device }), input);
      temps.push(dense);
      x = new Tensor(dense.storage, dense.dtype, [rows, K], [K, 1], dense.offset);
    }
    temps.push(x);
    // y = x W^T: W [N, K] read transposed is a [K, N] operand with strides (sK, sN).
    const wt = weight.ndim === 2 ? new Tensor(weight.storage, weight.dtype, [K, N], [weight.strides[1]!, weight.strides[0]!], weight.offset) : new Tensor(weight.storage, weight.dtype, [K, 1], [weight.strides[0]!, 0], weight.offset);
    temps.push(wt);
    const flat = new Tensor(out.storage, out.dtype, [rows, N], [N, 1], out.offset);
    temps.push(flat);
    const fused = bias !== null && weight.ndim === 2 && columnBias(bias);
    // (A bias the epilogue cannot add comes after the product, so its GELU cannot be in the epilogue.)
    if (gelu !== undefined && !fused && bias !== null) throw new Error(`llm.linearGelu: the webgpu kernel takes a [${N}] bias, got ${fmtShape(bias.shape)}`);
    runGemm({ op: gelu === undefined ? 'linear' : 'llm.linearGelu', out: flat, a: x, b: wt, batch: [], M: rows, N, K, bias: fused ? bias : null, ...(gelu !== undefined ? { gelu } : {}) });
    if (bias !== null && !fused) runPointwise('linear', out, [out, bias], (m) => addEntry(m, { out: out.dtype }));
  } finally {
    for (const t of temps) t.dispose();
  }
}

registerKernel(addmm, 'webgpu', (ctx, self, mat1, mat2, beta, alpha) =>
  into(allocOut(ctx.out), (out) => {
    const b = Number(beta);
    // beta 0 ignores self (NaN included), as torch does.
    if (b !== 0) copyTensor(out, self);
    runGemm({ op: 'addmm', out, a: mat1, b: mat2, batch: [], M: out.shape[0]!, N: out.shape[1]!, K: mat1.shape[1]!, alpha: Number(alpha), beta: b });
  }),
);
