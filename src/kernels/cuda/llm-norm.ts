/**
 * cuda kernels of llm.rmsNorm, llm.fusedAddRmsNorm (in place, vLLM semantics) and llm.addRmsNorm
 * (codegen/llm.ts generateNorm), one kernel per (mode, dtype, hidden size) with the row length
 * compiled in, chosen once per call signature (launch plans). Inputs whose rows are not one uniform stride apart (or whose last
 * dim is not dense) are staged through dense copies; in-place results are copied back. 16-byte
 * vector loads when the row length, every row stride and every base address allow them, scalar
 * loads otherwise. float64 runs the same kernel in double.
 */
import { addRmsNorm, fusedAddRmsNorm, rmsNorm } from '../../ops/defs/llm.js';
import type { OutMeta } from '../../ops/schema.js';
import { assertNoOverlap } from '../../ops/library/overlap.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import { itemSize } from '../../tensor/dtype.js';
import { numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { generateNorm, pipelined, MAX_ITEMS, NORM_MAX_BLOCK, normKernelName, normVec, WARP_MODE_BLOCK, type NormMode, type NormSpec } from './codegen/llm.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { cachedKernel, registerCuda, rowStride, Temps, vecWidth } from './llm-util.js';

/**
 * Row vectors a thread aims to hold. 4 (64 bytes of loads in flight a thread): on the H200, R1's
 * 2 vectors on up to 512 threads (registers sized for 8) reached 53-67% of copy bandwidth at
 * 16384 rows; 4 with registers sized to what is used reached 91-94% (fp32) and 88-92% (fused
 * add, bf16). R2's sweep (bench/llm-cuda.ts --sweep) timed 2 / 4 / 8 at 2.007 / 1.991 / 2.152 ms
 * in total over the large norm shapes. Settable for benchmark sweeps.
 */
let vecsPerThread = 4;

export function setNormVecsPerThread(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_ITEMS) throw new RangeError(`setNormVecsPerThread: expected an integer in [1, ${MAX_ITEMS}], got ${n}`);
  vecsPerThread = n;
  clearPlans();
}

/**
 * Whether the grid is capped at two waves of resident blocks that loop over rows (true) or has a
 * block per row group (false, the default): R2's sweep measured 1.979 ms per row against 1.991 ms
 * capped in total over the large norm shapes, and its table was measured per row.
 */
let capGrid = false;

/**
 * Whether the register path loads the row's weights with the row, before the reduction
 * (codegen NormSpec.prefetchWeight): 'auto' (the default) does except for plain rmsNorm of 4-byte
 * and wider dtypes. H200 R2 (s4, 16384 rows, one run): prefetching took bf16 rmsNorm [.., 4096] /
 * [.., 8192] from 0.089 / 0.154 to 0.076 / 0.143 ms and every fusedAdd row down 2-7%, but fp32
 * rmsNorm up 2-6% (under the 64-register bound its 4 + 4 live vectors spill; R1 agreed).
 */
let prefetchWeight: boolean | 'auto' = 'auto';

/**
 * The emission before the phased loads (each vector's load and use under one branch), kept for
 * same-run benchmark comparison only (NormSpec.serialLoads).
 */
let serialLoads = false;

/**
 * Block mode: threads per row compiled in as a constant (NormSpec.tpr), and the threads an SM
 * must hold in plain mode (NormSpec.minThreadsPerSm, 0: no bound). H200 R1 (s4, 16384 rows,
 * phased loads): the 1024 bound took fp32 rmsNorm [16384, 8192] from 0.367 to 0.288 ms (ptxas had
 * spent 122 registers, one 512-thread block an SM) and left the others within noise; the residual
 * modes spilled under it (fusedAdd 2x slower), so they run unbounded (about 110 registers).
 */
let fixedTpr = true;

/**
 * Plain mode: prefetch each thread's next row (NormSpec.pipelineRows) on a grid of about one wave.
 * Off: H200 R2 timed it (2 vectors a thread) at 0.094 / 0.156 ms for bf16 [16384, 4096 / 8192]
 * against 0.088 / 0.184 without, and fp32 [16384, 8192] at 0.505 against 0.284 ms.
 */
let pipelineRows = false;
let minThreadsPerSm = 1024;

/**
 * Residual modes (fusedAdd / addOut): the threads an SM must hold (NormSpec.minThreadsPerSm), 0:
 * no bound. 0 by default: under the 1024 bound the generic kernels spilled (s4 R1, above); with H
 * compiled in they fit 64 registers either way, and H200 s5 R2 timed 1024 within noise of 0
 * (1817 vs 1833 us in total over the 16384-row norms; the same run's repeats differ by ~2%).
 */
let resMinThreadsPerSm = 0;

/**
 * Register path: the row length compiled into the kernel (NormSpec.hConst), one kernel per hidden
 * size (a model has a few). ptxas -v (sm_90): the residual modes went from 110-112 registers a
 * thread to 62-64 (twice the resident rows), fp32 plain at 512 threads from 64 with 24 bytes
 * spilled to 56 without; the row's addresses become constant offsets and the bounds checks go.
 * H200 s5 R2 (bench/results/h200-s5-llmnorm-r2-sweep-2026-11-30.*): 1854 -> 1833 us in total over
 * the 16384-row norms, fusedAdd bf16 [16384, 4096] 141.7 -> 137-139 us; every 16384-row norm at
 * 96-100% of a copy_ of its own bytes in the same run.
 */
let specializeH = true;

/**
 * Streaming cache hints on the row's loads and stores (NormSpec.streaming). Off: H200 s5 R2 timed
 * them slower (1877 vs 1833 us over the 16384-row norms; bf16 rmsNorm [16384, 4096] 79.4 vs 74-76).
 */
let streaming = false;

/**
 * fp16/bf16: convert the row to float again after the barrier (NormSpec.unpackTwice). Off: with a
 * 1280-thread bound it fits 48 registers, but H200 s5 R2 timed no gain (bf16 rmsNorm [16384, 4096]
 * 75.2 us vs 74-76 at the defaults): those rows already run at the copy rate of their bytes.
 */
let unpackTwice = false;

export interface NormTuning {
  vecsPerThread: number;
  gridCap: boolean;
  prefetchWeight: boolean | 'auto';
  serialLoads: boolean;
  fixedTpr: boolean;
  minThreadsPerSm: number;
  pipelineRows: boolean;
  resMinThreadsPerSm: number;
  specializeH: boolean;
  streaming: boolean;
  unpackTwice: boolean;
}

/** The current tuning knobs (tests restore them after changing them). */
export function normTuning(): NormTuning {
  return { vecsPerThread, gridCap: capGrid, prefetchWeight, serialLoads, fixedTpr, minThreadsPerSm, pipelineRows, resMinThreadsPerSm, specializeH, streaming, unpackTwice };
}

/** Benchmark sweeps: the grid policy of the norm kernels. */
export function setNormGridCap(on: boolean): void {
  capGrid = on;
  clearPlans();
}

/** Sets any of the knobs (benchmark sweeps and tests); the others keep their values. */
export function setNormTuning(t: Partial<NormTuning>): void {
  if (t.vecsPerThread !== undefined) setNormVecsPerThread(t.vecsPerThread);
  if (t.gridCap !== undefined) capGrid = t.gridCap;
  if (t.prefetchWeight !== undefined) prefetchWeight = t.prefetchWeight;
  if (t.serialLoads !== undefined) serialLoads = t.serialLoads;
  if (t.fixedTpr !== undefined) fixedTpr = t.fixedTpr;
  if (t.pipelineRows !== undefined) pipelineRows = t.pipelineRows;
  if (t.minThreadsPerSm !== undefined) minThreadsPerSm = threadsBound('minThreadsPerSm', t.minThreadsPerSm);
  if (t.resMinThreadsPerSm !== undefined) resMinThreadsPerSm = threadsBound('resMinThreadsPerSm', t.resMinThreadsPerSm);
  if (t.specializeH !== undefined) specializeH = t.specializeH;
  if (t.streaming !== undefined) streaming = t.streaming;
  if (t.unpackTwice !== undefined) unpackTwice = t.unpackTwice;
  clearPlans();
}

function threadsBound(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 0 || n > 2048) throw new RangeError(`setNormTuning: ${name} must be an integer in [0, 2048], got ${n}`);
  return n;
}

/**
 * Threads per row and vectors per thread for a row of `nvec` vectors: a warp when it covers the
 * row with at most vecsPerThread vectors a lane (4 rows a block), else a block of the multiple of
 * 32 threads that gives each about vecsPerThread vectors (at most NORM_MAX_BLOCK); rows that need
 * more than MAX_ITEMS vectors a thread take the loop path (items 0).
 */
export function normThreads(nvec: number): { warpPerRow: boolean; tpr: number; items: number } {
  if (nvec <= 32 * vecsPerThread) return { warpPerRow: true, tpr: 32, items: Math.max(1, Math.ceil(nvec / 32)) };
  const tpr = Math.min(NORM_MAX_BLOCK, Math.ceil(nvec / vecsPerThread / 32) * 32);
  const items = Math.ceil(nvec / tpr);
  return { warpPerRow: false, tpr, items: items <= MAX_ITEMS ? items : 0 };
}

interface NormCall {
  mode: NormMode;
  out: Tensor;
  x: Tensor;
  res: Tensor | null;
  resOut: Tensor | null;
  w: Tensor;
  eps: number;
}

/** What a call of one (device, mode, dtype, row length, vector or not) launches. */
interface NormPlan {
  kernel: CudaKernel;
  block: number;
  rowsPerBlock: number;
  pipe: boolean;
}

/**
 * Launch plans by call signature, cleared when a knob changes: a repeated call (every decode step
 * of a model) skips building the spec and the kernel name, a few hundred ns of host time.
 */
const plans = new Map<string, NormPlan>();

/** Forgets every plan (a knob changed). */
function clearPlans(): void {
  plans.clear();
  last = undefined;
}

/** The previous call's signature and plan: a loop of one call skips even the key string. */
let last: { index: number; mode: NormMode; dtype: Tensor['dtype']; h: number; vector: boolean; plan: NormPlan } | undefined;

function planFor(index: number, mode: NormMode, dtype: Tensor['dtype'], h: number, vector: boolean): NormPlan {
  const l = last;
  if (l !== undefined && l.index === index && l.mode === mode && l.dtype === dtype && l.h === h && l.vector === vector) return l.plan;
  const key = `${index}|${mode}|${dtype}|${h}|${vector ? 1 : 0}`;
  let p = plans.get(key);
  if (p) {
    last = { index, mode, dtype, h, vector, plan: p };
    return p;
  }
  // Threads depend on the row length only (not on alignment): see NormSpec.vector.
  const { warpPerRow, tpr, items } = normThreads(Math.ceil(h / normVec(dtype)));
  const pw = prefetchWeight === 'auto' ? !(mode === 'plain' && itemSize(dtype) >= 4) : prefetchWeight;
  const bound = mode === 'plain' ? minThreadsPerSm : resMinThreadsPerSm;
  const spec: NormSpec = {
    dtype,
    mode,
    vector,
    warpPerRow,
    items,
    prefetchWeight: pw,
    serialLoads,
    pipelineRows,
    streaming,
    unpackTwice,
    ...(warpPerRow || !fixedTpr ? {} : { tpr, minThreadsPerSm: bound }),
    ...(specializeH ? { hConst: h } : {}),
  };
  const kernel = cachedKernel(index, normKernelName(spec), () => generateNorm(spec));
  p = { kernel, block: warpPerRow ? WARP_MODE_BLOCK : tpr, rowsPerBlock: warpPerRow ? WARP_MODE_BLOCK / 32 : 1, pipe: pipelined(spec) };
  plans.set(key, p);
  last = { index, mode, dtype, h, vector, plan: p };
  return p;
}

/** Launches one norm kernel on tensors whose rows are uniformly strided (callers stage others). */
function launchNorm(c: NormCall): void {
  const h = c.x.shape[c.x.ndim - 1]!;
  const rows = h === 0 ? 0 : numel(c.x.shape) / h;
  if (rows === 0) return;
  const os = rowStride(c.out)!;
  const xs = rowStride(c.x)!;
  const rs = c.res ? rowStride(c.res)! : 0;
  const ros = c.resOut ? rowStride(c.resOut)! : 0;
  const po = ptrOf(c.out);
  const px = ptrOf(c.x);
  const pr = c.res ? ptrOf(c.res) : 0;
  const pro = c.resOut ? ptrOf(c.resOut) : 0;
  const pw = ptrOf(c.w);
  const v = normVec(c.x.dtype);
  // 16-byte vectors need every row start and base address 16-byte aligned.
  const vector = h % v === 0 && os % v === 0 && xs % v === 0 && rs % v === 0 && ros % v === 0 && po % 16 === 0 && px % 16 === 0 && pr % 16 === 0 && pro % 16 === 0 && pw % 16 === 0;
  const index = c.x.device.index;
  const { kernel, block, rowsPerBlock, pipe } = planFor(index, c.mode, c.x.dtype, h, vector);
  const blocks = Math.ceil(rows / rowsPerBlock);
  // Pipelined rows: about one wave of the blocks an SM holds under the register bound (two rows of
  // each thread in flight), every block looping over its rows. Capped: at most two waves of
  // resident blocks, looping over the remaining rows; else a block per row group (the kernel loops
  // either way, so both are correct for any row count).
  const wave = (): number => deviceInfo(index).smCount * Math.max(1, Math.floor((minThreadsPerSm || 1024) / block));
  const grid = pipe ? Math.min(blocks, wave()) : capGrid ? gridFor(index, blocks * block, block) : Math.min(blocks, 2 ** 31 - 1);
  launch(kernel, [po, px, pr, pro, pw, rows, h, xs, rs, os, ros, c.eps], { grid, block }, streamOf(c.x));
}

/** The longest row kept in registers (longer rows take the re-reading loop path). */
export function normRegisterLimit(dtype: Tensor['dtype']): number {
  return NORM_MAX_BLOCK * MAX_ITEMS * vecWidth(dtype);
}

registerCuda(rmsNorm.name, (ctx, input, weight, eps) => {
  const out = allocOut(ctx.out as OutMeta);
  const t = new Temps();
  try {
    launchNorm({ mode: 'plain', out, x: t.rows(input as Tensor), res: null, resOut: null, w: t.rows(weight as Tensor), eps: eps as number });
  } finally {
    t.dispose();
  }
  return out;
});

registerCuda(addRmsNorm.name, (ctx, input, residual, weight, eps) => {
  const [mo, mr] = ctx.out as OutMeta[];
  const out = allocOut(mo!);
  const resOut = allocOut(mr!);
  const t = new Temps();
  try {
    launchNorm({ mode: 'addOut', out, x: t.rows(input as Tensor), res: t.rows(residual as Tensor), resOut, w: t.rows(weight as Tensor), eps: eps as number });
  } finally {
    t.dispose();
  }
  return [out, resOut];
});

registerCuda(fusedAddRmsNorm.name, (_ctx, input, residual, weight, eps) => {
  const x = input as Tensor;
  const r = residual as Tensor;
  assertNoOverlap(fusedAddRmsNorm.name, ['input', x], ['residual', r]);
  const h = x.shape[x.ndim - 1]!;
  const t = new Temps();
  try {
    // Written tensors need rows at least a row apart (no element written twice); else stage.
    const xd = t.rows(x, h);
    const rd = t.rows(r, h);
    launchNorm({ mode: 'addInPlace', out: xd, x: xd, res: rd, resOut: rd, w: t.rows(weight as Tensor), eps: eps as number });
    if (xd !== x) copyTensor(x, xd);
    if (rd !== r) copyTensor(r, rd);
  } finally {
    t.dispose();
  }
  return [x, r];
});

/** Bytes a norm call moves (for bandwidth figures): read x (and residual), write out (and residual). */
export function normBytes(mode: NormMode, rows: number, h: number, dtype: Tensor['dtype']): number {
  const per = itemSize(dtype) * rows * h;
  return mode === 'plain' ? 2 * per : 4 * per;
}
