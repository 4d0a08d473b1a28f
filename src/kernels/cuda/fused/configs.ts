/**
 * The config space of a generated kernel and the launch geometry of each config. A config is plain
 * data (the autotuner stores its canonical JSON); geometry depends on the sizes of the call (the
 * layout), so it is computed per launch by `launchPlan`, which also says when a config cannot run
 * a layout (a vector width that does not divide the innermost dim or misaligns an operand); the
 * program then falls back to the best config that can. Moved here from compile/codegen/cuda/ (which
 * re-exports it) so that the eager cuda reductions launch their one-node programs with the default
 * config and geometry of the compiler's kernels.
 */
import { getOption, setOption } from '../../../runtime/config.js';
import { itemSize } from '../../../tensor/dtype.js';
import type { GroupCtx } from './body.js';
import type { PointwiseConfig } from './emit-pointwise.js';
import { COL_FINISH_BLOCK, colable } from './emit-col.js';
import { FINISH_BLOCK, type ReduceConfig, splittable } from './emit-reduce.js';
import type { HalfMode } from './prelude.js';
import type { ReduceShape } from './reduce-parts.js';
import { type KernelLayout, type KernelSpec, prod } from './spec.js';

export type { ReduceShape } from './reduce-parts.js';
export { reduceShape } from './reduce-parts.js';

export type CudaKernelConfig = PointwiseConfig | ReduceConfig;

/** What code generation and launch geometry need to know about the device. */
export interface CudaTarget {
  /** NVRTC / nvcc architecture, e.g. 'sm_90'. */
  readonly arch: string;
  readonly sms: number;
  readonly maxThreadsPerSm: number;
  readonly halfMode: HalfMode;
}

/** The H200 of the device machine (sm_90, 132 SMs); the real runtime's properties replace it. */
export const H200_TARGET: CudaTarget = { arch: 'sm_90', sms: 132, maxThreadsPerSm: 2048, halfMode: 'ptx' };

/**
 * Grid cap, in resident-block waves: enough blocks to fill every SM this many times over (latency
 * hiding across blocks); beyond it the grid-stride loops give threads more work instead of the
 * scheduler more blocks. Also keeps grid x block x EPT x vec far below 2^26 (see IDX32_LIMIT).
 */
const WAVES = 4;

/**
 * Grid cap of pointwise kernels in waves (Infinity, the default: a block for every block x EPT
 * units, no grid-stride trips, up to the 2^26-unit step bound of launchPlan). H200 R1
 * (elementwise-4096 fp32): b256 EPT 2 took 0.0359 ms one-shot against 0.0370 ms capped at WAVES
 * (the last partial trip of a capped grid is a tail); other configs within noise. Settable for
 * benchmark sweeps (bench/cuda-pointwise-configs.ts); kernels are correct for any grid. Option
 * 'cuda.pointwiseWaves' (runtime/config.ts, where its default lives).
 */
export function setPointwiseWaves(waves: number): void {
  if (!(waves >= 1)) throw new RangeError(`setPointwiseWaves: expected a number >= 1 (or Infinity), got ${waves}`);
  setOption('cuda.pointwiseWaves', waves);
}

export function pointwiseWavesSetting(): number {
  return getOption('cuda.pointwiseWaves');
}

/** Bytes of one vector access at most: 16 (ld.global.v4.u32 / LDG.128). */
const MAX_VECTOR_BYTES = 16;

const BLOCKS = [128, 256, 512, 1024] as const;
/** Rows per block of the default warp-per-row reduction (256 threads). */
const WARP_ROWS_PER_BLOCK = 8;

/**
 * Vector widths tried: scalar, and the widest access (16 bytes for the widest operand). Half
 * widths were measured to add candidates without winning on bandwidth-bound kernels in Inductor's
 * experience; the scalar config stays as the fallback for sizes the wide one cannot divide.
 */
function vecWidths(maxItem: number): (1 | 2 | 4 | 8)[] {
  const max = Math.min(8, MAX_VECTOR_BYTES / maxItem) as 1 | 2 | 4 | 8;
  return max >= 2 ? [1, max] : [1];
}

/** Operands that are read or written per element (row-scalar outputs are not). */
function elementOperands(spec: KernelSpec): number[] {
  return spec.ops.map((_, k) => k).filter((k) => !spec.ops[k]!.rowScalar);
}

/** Whether every per-element operand has innermost stride 1, or 0 for inputs (vector accesses possible). */
export function vectorizable(spec: KernelSpec): boolean {
  return elementOperands(spec).every((k) => {
    const o = spec.ops[k]!;
    const innerZero = spec.kind === 'pointwise' ? o.outerZero[spec.orank - 1] : o.rowZero[spec.rrank - 1];
    return o.unitInner || (!o.out && innerZero === true);
  });
}

/**
 * The 'col' strategy is opt-in (KILN_CUDA_COL_REDUCE=1) until it has run on a GPU: it was checked
 * on the host emulator (scripts/cuda-reduce-emu.mjs) and with nvcc, and a default that no GPU has
 * computed could give a silently wrong training step.
 */
const colAllowed = (): boolean => getOption('KILN_CUDA_COL_REDUCE') === true;

/**
 * col as the default of groups over very few long contiguous rows that split cannot run
 * (KILN_CUDA_COL_FEW_ROWS, on by default since the H200 measured it in session 13): see fewRowsCol.
 */
const colFewRowsAllowed = (): boolean => getOption('KILN_CUDA_COL_FEW_ROWS') === true;

/**
 * Whether a group over very few long rows, read at unit stride, takes col (one row per tile, a
 * wave of chunks along it) instead of a block per row: the group is not splittable (it has
 * full-size outputs or several levels of reductions), there are fewer rows than a quarter of the
 * SMs and they are at least 2^16 long. The conv-stack training step's loss, mean((relu(bn) -
 * target)^2) fused with the relu and the difference it stores for the backward, is one row of
 * 12.8M elements: a block per row ran it on one SM of the H200's 132.
 */
function fewRowsCol(c: GroupCtx, M: number, N: number, target: CudaTarget): boolean {
  return colFewRowsAllowed() && rowContiguous(c.spec) && !splittable(c) && colable(c) && M * 4 < target.sms && N >= 1 << 16;
}

/**
 * Every config of a kernel. The first is the default (used before or without autotuning); for
 * reductions it is chosen from the compile-time layout: thread-per-row when the row is strided and
 * rows are adjacent (reductions over a non-last dim), col for few long strided rows next to each
 * other, split for few long rows, else warp or block per row by row length. col is a candidate of
 * every group without arg reductions whose rows are strided for every operand (KILN_CUDA_COL_REDUCE)
 * or read at unit stride by some operand (KILN_CUDA_COL_FEW_ROWS).
 */
export function configSpace(c: GroupCtx, L: KernelLayout, target: CudaTarget): CudaKernelConfig[] {
  const { spec } = c;
  const maxItem = Math.max(...elementOperands(spec).map((k) => itemSize(spec.ops[k]!.dtype)));
  const vecs = vectorizable(spec) ? vecWidths(maxItem) : [1 as const];
  const best = vecs[vecs.length - 1]!;
  if (spec.kind === 'pointwise') {
    const all: PointwiseConfig[] = [];
    for (const block of BLOCKS) for (const ept of [1, 2, 4] as const) for (const vec of vecs) all.push({ kind: 'pointwise', block, ept, vec });
    // Two 16-byte units a thread where a unit is 4 elements (fp32), one where it is 8 (16-bit
    // floats): the H200 R1 sweep of elementwise-4096 (bench/cuda-pointwise-configs.ts, one-shot
    // grid) timed fp32 b256 EPT 1 / 2 / 4 at 0.0380 / 0.0359 / 0.0375 ms and bf16 at 0.0303 /
    // 0.0310 / 0.0332 ms (bf16 has twice the math per byte: its units are compute-bound already).
    return first(all, { kind: 'pointwise', block: 256, ept: best === 4 ? 2 : 1, vec: best });
  }
  const all: ReduceConfig[] = [];
  for (const block of [128, 256, 512] as const) all.push({ kind: 'reduce', strategy: 'thread', block, vec: 1 });
  for (const strategy of ['warp', 'block'] as const) for (const block of BLOCKS) for (const vec of vecs) all.push({ kind: 'reduce', strategy, block, vec });
  if (splittable(c)) for (const block of [256, 512, 1024] as const) for (const vec of vecs) all.push({ kind: 'reduce', strategy: 'split', block, vec });
  if (((colAllowed() && !rowContiguous(spec)) || (colFewRowsAllowed() && rowContiguous(spec))) && colable(c)) {
    for (const block of [128, 256, 512] as const) all.push({ kind: 'reduce', strategy: 'col', block, vec: 1 });
  }
  return first(all, defaultReduceConfig(c, L, target, best));
}

/** Whether some per-element operand reads its rows at unit stride (row-major rows). */
function rowContiguous(spec: KernelSpec): boolean {
  return spec.ops.some((o) => !o.rowScalar && o.unitInner);
}

/**
 * Whether the rows of L lie next to each other: every per-element operand that moves along the row
 * has innermost outer stride 0 or 1, and some has 1 (the outer dim of a channels_last activation).
 */
export function rowsAdjacent(spec: KernelSpec, L: KernelLayout): boolean {
  let one = false;
  for (let k = 0; k < spec.ops.length; k++) {
    const o = spec.ops[k]!;
    if (o.rowScalar || o.rowZero.every((z) => z)) continue;
    const s = Math.abs(L.ost[k]![L.ost[k]!.length - 1]!);
    if (s > 1) return false;
    if (s === 1) one = true;
  }
  return one;
}

/**
 * The default config of a reduce kernel, chosen from the layout: thread-per-row when the row is
 * strided and rows are adjacent, col when such rows are few and long, split for few long rows, else
 * warp or block per row by row length. `best`: the widest vector width the spec allows
 * (vectorWidthFor).
 */
export function defaultReduceConfig(c: GroupCtx, L: KernelLayout, target: CudaTarget, best: 1 | 2 | 4 | 8): ReduceConfig {
  const { spec } = c;
  const M = prod(L.oshape);
  const N = prod(L.rshape);
  const rowContig = rowContiguous(spec);
  // Thread-per-row needs rows to fill the GPU: BatchNorm's statistics and gradients in training
  // reduce [16, 64, 112, 112] over all but the 64 channels, and 64 threads walking 200k elements
  // each made the conv-stack training step take 446 ms on the H200 (eager: 28 ms). Fewer rows
  // than a warp per SM with long rows go to split (one pass, no full-size outputs) or a block per row.
  const fewLongRows = M < target.sms * 32 && N >= 4096;
  if (!rowContig && M >= 32 && !fewLongRows) return { kind: 'reduce', strategy: 'thread', block: 256, vec: 1 };
  // Few long strided rows next to each other (BatchNorm over a channels_last [16, 64, 112, 112]:
  // 64 rows of 200704 elements at stride 64): split and block-per-row read one element per 32-byte
  // sector with 64 row-blocks (or one pass only); col tiles adjacent rows across lanes (coalesced),
  // a wave of blocks over the reduced range, and runs groups of any number of passes.
  if (colAllowed() && !rowContig && fewLongRows && colable(c) && rowsAdjacent(spec, L)) return { kind: 'reduce', strategy: 'col', block: 256, vec: 1 };
  if (splittable(c) && ((M < target.sms && N >= 1 << 16) || (!rowContig && fewLongRows))) return { kind: 'reduce', strategy: 'split', block: 512, vec: best };
  if (fewRowsCol(c, M, N, target)) return { kind: 'reduce', strategy: 'col', block: 256, vec: 1 };
  if (N >= 2048) return { kind: 'reduce', strategy: 'block', block: N >= 8192 ? 1024 : 512, vec: best };
  if (rowContig && Math.ceil(M / WARP_ROWS_PER_BLOCK) < target.sms && N >= 128 * best) {
    // Few medium rows (a transformer's add+RMSNorm over 128 tokens x 1024): warp-per-row blocks
    // would occupy M / 8 SMs, each lane walking N / (32 vec) vectors one dependent load after
    // another, twice (the sum of squares, then the normalised output): 8.4 us per [128,1024] fp32
    // call in the session-4 H200 profile, for 2 MB of traffic. A block per row covers the row in
    // one vector per thread, so each pass is one load latency and every SM gets a row.
    const want = N / best;
    return { kind: 'reduce', strategy: 'block', block: BLOCKS.find((b) => b >= want) ?? 1024, vec: best };
  }
  return { kind: 'reduce', strategy: 'warp', block: 256, vec: N >= 32 * best ? best : 1 };
}

/** The widest vector width of a kernel's spec: 16 bytes of its widest per-element operand, or 1 when some operand cannot be read in vectors. */
export function vectorWidthFor(spec: KernelSpec): 1 | 2 | 4 | 8 {
  const maxItem = Math.max(...elementOperands(spec).map((k) => itemSize(spec.ops[k]!.dtype)));
  const vecs = vectorizable(spec) ? vecWidths(maxItem) : [1 as const];
  return vecs[vecs.length - 1]!;
}

function first<T>(all: T[], def: T): T[] {
  const key = JSON.stringify(def);
  const i = all.findIndex((x) => JSON.stringify(x) === key);
  if (i < 0) return all;
  return [all[i]!, ...all.slice(0, i), ...all.slice(i + 1)];
}

/** A short tag for kernel names. */
export function configTag(cfg: CudaKernelConfig): string {
  if (cfg.kind === 'pointwise') return `b${cfg.block}e${cfg.ept}v${cfg.vec}`;
  return `${cfg.strategy}_b${cfg.block}v${cfg.vec}`;
}

export interface KernelLaunch {
  /** Index into the variant's kernels. */
  readonly kernel: number;
  readonly grid: number;
  readonly block: number;
  readonly sharedBytes: number;
}

export interface LaunchPlan {
  readonly launches: readonly KernelLaunch[];
  /** Bytes of scratch device memory the launches need (split reductions' partials). */
  readonly workspaceBytes: number;
  /** Integer arguments computed for this launch (beyond sizes and strides of the layout). */
  readonly extraInts: Readonly<Record<string, number>>;
}

const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);

/** Why `cfg` cannot run layout L (vector width vs sizes, strides, offsets), or null. */
export function inapplicable(cfg: CudaKernelConfig, spec: KernelSpec, L: KernelLayout): string | null {
  const V = cfg.kind === 'reduce' && cfg.strategy === 'thread' ? 1 : cfg.vec;
  if (V === 1) return null;
  const pw = spec.kind === 'pointwise';
  const inner = pw ? L.oshape[L.oshape.length - 1]! : L.rshape[L.rshape.length - 1]!;
  if (inner % V !== 0) return `innermost size ${inner} is not a multiple of vector width ${V}`;
  for (let k = 0; k < spec.ops.length; k++) {
    const o = spec.ops[k]!;
    if (o.rowScalar || !o.unitInner) continue;
    const strides = pw ? L.ost[k]!.slice(0, -1) : [...L.ost[k]!, ...L.rst[k]!.slice(0, -1)];
    if (strides.some((s) => s % V !== 0)) return `operand ${k}: strides [${strides.join(', ')}] are not multiples of vector width ${V}`;
    if (L.operands[k]!.offset % V !== 0) return `operand ${k}: offset ${L.operands[k]!.offset} is not a multiple of vector width ${V}`;
  }
  return null;
}

/**
 * Grid, block, shared memory and workspace of `cfg` for layout L (assumes `inapplicable` is null).
 * `shape`: the group's reductions and passes (reduceShape; pointwise kernels: any).
 */
export function launchPlan(cfg: CudaKernelConfig, spec: KernelSpec, L: KernelLayout, target: CudaTarget, shape: ReduceShape): LaunchPlan {
  const B = cfg.block;
  const cap = target.sms * Math.max(1, Math.floor(target.maxThreadsPerSm / B)) * WAVES;
  const grid = (n: number): number => Math.max(1, Math.min(n, cap));
  const warpsShared = (B / 32) * 8;
  if (cfg.kind === 'pointwise') {
    const total = prod(L.oshape);
    if (total === 0) return { launches: [], workspaceBytes: 0, extraInts: {} };
    const pcap = target.sms * Math.max(1, Math.floor(target.maxThreadsPerSm / B)) * pointwiseWavesSetting();
    // The grid-stride step (grid x block x EPT units) stays at most 2^26 whatever the waves (the
    // 32-bit index bound of IDX32_LIMIT).
    const blocks = Math.max(1, Math.min(ceilDiv(total / cfg.vec, B * cfg.ept), pcap, Math.floor(2 ** 26 / (B * cfg.ept))));
    return { launches: [{ kernel: 0, grid: blocks, block: B, sharedBytes: 0 }], workspaceBytes: 0, extraInts: {} };
  }
  const M = prod(L.oshape);
  const N = prod(L.rshape);
  if (M === 0) return { launches: [], workspaceBytes: 0, extraInts: {} };
  switch (cfg.strategy) {
    case 'thread':
      return { launches: [{ kernel: 0, grid: grid(ceilDiv(M, B)), block: B, sharedBytes: 0 }], workspaceBytes: 0, extraInts: {} };
    case 'warp':
      return { launches: [{ kernel: 0, grid: grid(ceilDiv(M, B / 32)), block: B, sharedBytes: 0 }], workspaceBytes: 0, extraInts: {} };
    case 'block':
      return { launches: [{ kernel: 0, grid: grid(M), block: B, sharedBytes: warpsShared }], workspaceBytes: 0, extraInts: {} };
    case 'split': {
      // Partials per row: about one wave of resident blocks in all, at least B*V elements each.
      const target1 = target.sms * Math.max(1, Math.floor(target.maxThreadsPerSm / B));
      let G = N === 0 ? 1 : Math.max(1, Math.min(ceilDiv(target1, M), ceilDiv(N, B * cfg.vec)));
      const chunk = N === 0 ? 0 : ceilDiv(ceilDiv(N, G), cfg.vec) * cfg.vec;
      if (N > 0) G = ceilDiv(N, chunk);
      return {
        launches: [
          { kernel: 0, grid: grid(M * G), block: B, sharedBytes: warpsShared },
          { kernel: 1, grid: Math.max(1, Math.min(ceilDiv(M, FINISH_BLOCK), target.sms * WAVES * 4)), block: FINISH_BLOCK, sharedBytes: 0 },
        ],
        workspaceBytes: shape.reductions * M * G * 8,
        extraInts: { G, chunk },
      };
    }
    case 'col':
      return colPlan(B, M, N, target, shape, grid, rowContiguous(spec));
  }
}

/** Elements a thread of a col tile reduces at least (per pass), before more chunks are made. */
const COL_MIN_PER_THREAD = 8;

/**
 * Geometry of the col strategy (emit-col.ts): TX adjacent rows per tile (a power of two up to a
 * warp; 1 when some operand reads its rows at unit stride, so a warp's lanes walk one row's
 * consecutive elements), TY = B / TX slices; about one wave of resident blocks over (row tiles x G
 * chunks); per level a tile launch and a finishing launch (a warp per row), then the stores' tile
 * launch.
 */
function colPlan(B: number, M: number, N: number, target: CudaTarget, shape: ReduceShape, grid: (n: number) => number, rowContig: boolean): LaunchPlan {
  let TX = 1;
  while (!rowContig && TX < 32 && TX < M) TX *= 2;
  const TY = B / TX;
  const T = ceilDiv(M, TX);
  const wave = target.sms * Math.max(1, Math.floor(target.maxThreadsPerSm / B));
  let G = N === 0 ? 1 : Math.max(1, Math.min(ceilDiv(wave, T), ceilDiv(N, TY * COL_MIN_PER_THREAD)));
  const chunk = N === 0 ? 0 : ceilDiv(ceilDiv(N, G), TY) * TY;
  if (N > 0) G = ceilDiv(N, chunk);
  const tiles = grid(T * G);
  const finish = Math.max(1, Math.min(ceilDiv(M, COL_FINISH_BLOCK / 32), target.sms * WAVES * 4));
  const launches: KernelLaunch[] = [];
  for (let p = 0; p < shape.levels; p++) {
    launches.push({ kernel: 2 * p, grid: tiles, block: B, sharedBytes: B * 8 });
    launches.push({ kernel: 2 * p + 1, grid: finish, block: COL_FINISH_BLOCK, sharedBytes: 0 });
  }
  if (shape.stores) launches.push({ kernel: 2 * shape.levels, grid: tiles, block: B, sharedBytes: 0 });
  return { launches, workspaceBytes: shape.reductions * M * (G + 1) * 8, extraInts: { G, chunk, TX } };
}

/** The value of integer parameter `name` for layout L. */
export function intArg(name: string, L: KernelLayout, extra: Readonly<Record<string, number>>): number {
  if (name in extra) return extra[name]!;
  const m = /^([nsMRab])(\d+)(?:_(\d+))?$/.exec(name);
  if (!m) throw new Error(`kiln cuda: unknown kernel argument '${name}'`);
  const a = Number(m[2]);
  const b = m[3] === undefined ? -1 : Number(m[3]);
  let v: number | undefined;
  switch (m[1]) {
    case 'n':
    case 'M':
      v = L.oshape[a];
      break;
    case 'R':
      v = L.rshape[a];
      break;
    case 's':
    case 'a':
      v = L.ost[a]?.[b];
      break;
    case 'b':
      v = L.rst[a]?.[b];
      break;
  }
  if (v === undefined) throw new Error(`kiln cuda: kernel argument '${name}' is outside the layout (ranks ${L.oshape.length}/${L.rshape.length})`);
  return v;
}
