/**
 * cuda kernels for sort, argsort and topk (codegen/sort.ts). The sorted dim is brought last as a
 * contiguous [rows, R] block (a view when it already is, else one transposing copy); results are
 * written contiguous in that order and copied into the outputs' layout when it differs.
 *
 * Kernel choice: topk with small k of short rows selects by warp-wide argmin rounds (no sort);
 * rows up to SORT_MAX elements are sorted whole in shared memory (bitonic; topk keeps the first
 * k). topk of longer rows: for 8 < k <= SORT_MAX a radix select over many blocks per row
 * (`radix`, codegen/topk-radix.ts); otherwise row segments, then topk again over the segments'
 * candidates: for k <= SELECT_MAX_K each segment keeps register lists (`select`); larger k sorts
 * each segment of SEGMENT_P elements in shared memory (`segments`, any k up to segmentsMaxK).
 * A full sort of longer rows is reported as not supported yet rather than computed some slower
 * way behind the caller's back.
 */
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, isContiguousStrides, normalizeDim } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { getOption, setOption } from '../../runtime/config.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import {
  bitonicSource,
  keyBytes,
  pickSource,
  selectListLength,
  selectSource,
  SELECT_MAX_K,
  SELECT_THREADS,
  SORT_MAX,
  type SortKernel,
  warpKeysPerLane,
  WARP_MAX_K,
  WARP_MAX_R,
  WARP_ROWS,
  warpSelectSource,
} from './codegen/sort.js';
import {
  radixCandidateBytes,
  radixCollectSource,
  radixCounterWords,
  radixDigits,
  radixFinishSource,
  radixHistSource,
  RADIX_FINISH_THREADS,
  RADIX_STATE_BYTES,
  RADIX_THREADS,
} from './codegen/topk-radix.js';
import { copyTensor } from './core.js';
import { allocOut, gridFor, ptrOf, streamOf } from './device.js';
import { toRows } from './rows-run.js';

const kernels = new Map<string, CudaKernel>();

/** Loads a generated kernel once per device, keyed by the generator's arguments (no source text per call). */
function load(index: number, key: string, gen: () => SortKernel, maxShared: number): CudaKernel {
  const full = `${index}#${key}`;
  let k = kernels.get(full);
  if (!k) {
    const g = gen();
    k = kernelFromSource(index, g.source, g.name, g.params, [], maxShared);
    kernels.set(full, k);
  }
  return k;
}

function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Short rows share a block so it has at least this many threads (one row per thread pair would
// otherwise leave most of every warp idle).
const MIN_BLOCK = 128;

/** The [rows, count] target in `out`'s layout permuted like the rows, or a contiguous temporary. */
function target(out: Tensor, perm: readonly number[]): { t: Tensor; direct: boolean; view: Tensor } {
  const shape = perm.map((d) => out.shape[d]!);
  const strides = perm.map((d) => out.strides[d]!);
  const view = new Tensor(out.storage, out.dtype, shape, strides, out.offset);
  if (isContiguousStrides(shape, strides)) return { t: view, direct: true, view };
  return { t: allocOut({ shape, strides: contiguousStrides(shape), dtype: out.dtype, device: out.device }), direct: false, view };
}

function notSupported(op: string, x: Tensor, dim: number, len: number, count: number): Error {
  return new RangeError(
    `${op}: not supported yet on cuda: dim ${dim} of input ${fmtShape(x.shape)} (${x.dtype}) has ${len} elements and ${count} are asked for; ` +
      `the cuda kernels (src/kernels/cuda/sort.ts) sort rows of up to ${SORT_MAX} elements, and take topk of longer rows with k <= ${Math.max(RADIX_MAX_K, segmentsMaxK(len))} (for rows of ${len})`,
  );
}

/**
 * The first `count` entries of each line along `dim` in sorted order: values into `values`
 * (when given), int64 positions into `indices`. `descending` puts the largest first.
 */
function sortLines(op: string, x: Tensor, dim: number, descending: boolean, count: number, values: Tensor | null, indices: Tensor): void {
  const dims = x.ndim === 0 ? [] : [normalizeDim(op, dim, x.ndim)];
  const r = toRows(x, dims);
  const len = r.R;
  const temps: Tensor[] = [r.src];
  try {
    if (r.rows === 0 || count === 0) return;
    if (len > 2 ** 31 - 1) throw notSupported(op, x, dims[0] ?? 0, len, count);
    const vt = values ? target(values, r.perm) : null;
    const it = target(indices, r.perm);
    temps.push(it.view, ...(it.direct ? [] : [it.t]));
    if (vt) temps.push(vt.view, ...(vt.direct ? [] : [vt.t]));
    const index = x.device.index;
    const stream = streamOf(x);
    const P = nextPow2(len);
    const kb = keyBytes(x.dtype);
    if (count <= WARP_MAX_K && len <= WARP_MAX_R && count < len) {
      const vpt = warpKeysPerLane(len);
      const k = load(index, `warp:${x.dtype}:${vpt}`, () => warpSelectSource(x.dtype, vpt), 0);
      launch(k, [ptrOf(r.src), vt ? ptrOf(vt.t) : 0, ptrOf(it.t), r.rows, len, count, descending ? 1 : 0], { grid: gridFor(index, r.rows * 32, WARP_ROWS * 32), block: WARP_ROWS * 32 }, stream);
    } else if (P <= SORT_MAX) {
      const tpr = Math.min(1024, Math.max(1, P / 2));
      const rpb = tpr >= MIN_BLOCK ? 1 : MIN_BLOCK / tpr;
      const shared = rpb * P * (kb + 4);
      const k = load(index, `bitonic:${x.dtype}`, () => bitonicSource(x.dtype), SORT_MAX * (kb + 4));
      const grid = gridFor(index, Math.ceil(r.rows / rpb) * tpr * rpb, tpr * rpb);
      launch(k, [ptrOf(r.src), vt ? ptrOf(vt.t) : 0, ptrOf(it.t), r.rows, len, P, count, descending ? 1 : 0, vt ? 1 : 0, rpb, len, 1], { grid, block: tpr * rpb, sharedBytes: shared }, stream);
    } else if (longTopkPath(len, count) === 'radix') {
      radixLong(r.src, r.rows, len, count, descending, vt ? vt.t : null, it.t);
    } else if (longTopkPath(len, count) === 'segments') {
      segmentsLong(op, r.src, r.rows, len, count, descending, vt ? vt.t : null, it.t);
    } else if (count <= SELECT_MAX_K) {
      selectLong(op, r.src, r.rows, len, count, descending, vt ? vt.t : null, it.t);
    } else {
      throw notSupported(op, x, dims[0] ?? 0, len, count);
    }
    if (!it.direct) copyTensor(it.view, it.t);
    if (vt && !vt.direct) copyTensor(vt.view, vt.t);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/**
 * How topk of rows longer than SORT_MAX picks its first pass: 'auto' by k (RADIX_MIN_K), or
 * pinned by tests and benches (setLongTopk) to compare the three on the same inputs.
 */
export type LongTopk = 'auto' | 'select' | 'segments' | 'radix';
export function setLongTopk(mode: LongTopk): void {
  setOption('cuda.longTopk', mode);
}

// Segment length of the 'segments' path: sorted by one block of SEGMENT_P / 2 threads in 16 KiB
// (32-bit keys) of shared memory.
const SEGMENT_P = 2048;

function segmentGeometry(len: number): { chunks: number; chunkLen: number; last: number } {
  const chunks = Math.ceil(len / SEGMENT_P);
  const chunkLen = Math.ceil(len / chunks);
  return { chunks, chunkLen, last: len - (chunks - 1) * chunkLen };
}

/**
 * The largest k the 'segments' path takes for rows of len: every segment must hold k elements (its
 * sorted first k are all real), and the candidates (k per segment) must be at most half the row,
 * so the second pass, which may take this path again, works on a row at least twice shorter.
 */
function segmentsMaxK(len: number): number {
  const { chunks, last } = segmentGeometry(len);
  return Math.min(last, Math.floor(len / 2 / chunks));
}

function longTopkPath(len: number, count: number): 'select' | 'segments' | 'radix' {
  const longTopk = getOption('cuda.longTopk');
  if (count <= RADIX_MAX_K && (longTopk === 'radix' || (longTopk === 'auto' && count > RADIX_MIN_K))) return 'radix';
  // Otherwise the segment paths: the register lists up to SELECT_MAX_K (session 6 measured them
  // ahead of sorted segments at every k <= 64 but one), sorted segments beyond, where they hold k.
  if (count > segmentsMaxK(len)) return 'select';
  return longTopk === 'segments' || count > SELECT_MAX_K ? 'segments' : 'select';
}

/**
 * topk of contiguous [rows, len] rows longer than SORT_MAX: each segment of at most SEGMENT_P
 * elements sorted in shared memory (the bitonic kernel over (row, segment) lines), its first
 * `count` kept as candidates, then topk over each row's candidates (sortLines again) and a pick
 * of their positions. The candidates' (key, candidate position) order is the (key, row position)
 * order: segments are in position order and each one's candidates are sorted by (key, position).
 */
function segmentsLong(op: string, src: Tensor, rows: number, len: number, count: number, descending: boolean, vals: Tensor | null, idx: Tensor): void {
  const index = src.device.index;
  const stream = streamOf(src);
  const { chunks, chunkLen } = segmentGeometry(len);
  const kb = keyBytes(src.dtype);
  const tpr = Math.min(1024, SEGMENT_P / 2);
  const rpb = tpr >= MIN_BLOCK ? 1 : MIN_BLOCK / tpr;
  const k = load(index, `bitonic:${src.dtype}`, () => bitonicSource(src.dtype), SORT_MAX * (kb + 4));
  const lines = rows * chunks;
  candidatesThenPick(op, src, rows, chunks * count, count, descending, vals, idx, (candV, candI) =>
    launch(k, [ptrOf(src), ptrOf(candV), ptrOf(candI), lines, len, SEGMENT_P, count, descending ? 1 : 0, 1, rpb, chunkLen, chunks], {
      grid: gridFor(index, Math.ceil(lines / rpb) * tpr * rpb, tpr * rpb),
      block: tpr * rpb,
      sharedBytes: rpb * SEGMENT_P * (kb + 4),
    }, stream),
  );
}

/**
 * The second pass of both long-row paths: `first` writes each row's n candidates (values, row
 * positions) to contiguous [rows, n]; topk over them gives the values and, through their
 * candidate positions, the row positions.
 */
function candidatesThenPick(op: string, src: Tensor, rows: number, n: number, count: number, descending: boolean, vals: Tensor | null, idx: Tensor, first: (candV: Tensor, candI: Tensor) => void): void {
  const index = src.device.index;
  const dense = (dtype: DType, c: number): Tensor => allocOut({ shape: [rows, c], strides: [c, 1], dtype, device: src.device });
  const candV = dense(src.dtype, n);
  const candI = dense('int64', n);
  const pick = dense('int64', count);
  const outV = vals ? new Tensor(vals.storage, vals.dtype, [rows, count], [count, 1], vals.offset) : null;
  try {
    first(candV, candI);
    sortLines(op, candV, 1, descending, count, outV, pick);
    const pk = load(index, 'pick', pickSource, 0);
    launch(pk, [ptrOf(candI), ptrOf(pick), ptrOf(idx), rows, n, count], { grid: gridFor(index, rows * count, 256), block: 256 }, streamOf(src));
  } finally {
    for (const t of [candV, candI, pick, ...(outV ? [outV] : [])]) t.dispose();
  }
}

// The radix path gathers at most `cap` candidates and sorts them in shared memory: a power of two
// at least twice k (so that a k-th key shared by a few elements rarely overflows into the slow
// ordered gather) and at least RADIX_MIN_CAP (so that one digit pass usually suffices), at most
// SORT_MAX (128 KiB of packed 32-bit keys, 192 KiB of 64-bit ones).
const RADIX_MIN_CAP = 1024;
const RADIX_MAX_K = SORT_MAX;
// 'auto' keeps the register lists up to this k: the radix path costs six launches whatever k is,
// and on the H200 (bench/cuda-topk.ts, session 7) the lists were faster at k <= 8 ([32, 151936]
// k 8: 0.063 against 0.074 ms; [256, 32000]: 0.064 against 0.094) and slower from k = 16 on
// ([32, 151936] k 50: 0.276 against 0.075).
const RADIX_MIN_K = 8;
// Blocks per row: enough for about four blocks per SM over all rows, each with at least one full
// step of loads (RADIX_THREADS x 8 keys of 32 bits, x 4 of 64).
const RADIX_BLOCKS_PER_SM = 4;

/**
 * topk of contiguous [rows, len] rows longer than SORT_MAX by radix select (codegen/topk-radix.ts):
 * a histogram launch per digit and a collect launch over many blocks per row, then one sorting
 * block per row writes `vals` / `idx` ([rows, count]).
 */
function radixLong(src: Tensor, rows: number, len: number, count: number, descending: boolean, vals: Tensor | null, idx: Tensor): void {
  const index = src.device.index;
  const stream = streamOf(src);
  const dtype = src.dtype;
  const cap = Math.min(SORT_MAX, Math.max(RADIX_MIN_CAP, 2 * nextPow2(count)));
  const passes = radixDigits(dtype).length;
  const candBytes = radixCandidateBytes(dtype);
  const step = RADIX_THREADS * (keyBytes(dtype) === 4 ? 8 : 4);
  const perRow = Math.max(1, Math.min(Math.ceil(len / step), Math.ceil((deviceInfo(index).smCount * RADIX_BLOCKS_PER_SM) / rows)));
  const chunk = Math.ceil(len / perRow);
  const stateBytes = rows * RADIX_STATE_BYTES;
  const bytes = (n: number): Tensor => allocOut({ shape: [n], strides: [1], dtype: 'uint8', device: src.device }, false);
  const work = allocOut({ shape: [stateBytes + rows * radixCounterWords(dtype) * 4], strides: [1], dtype: 'uint8', device: src.device }, true);
  const cand = bytes(rows * cap * candBytes);
  try {
    const state = ptrOf(work);
    const counters = state + stateBytes;
    const hist = load(index, `radix-hist:${dtype}`, () => radixHistSource(dtype), 0);
    const many = { grid: rows * perRow, block: RADIX_THREADS };
    for (let pass = 0; pass < passes; pass++) {
      launch(hist, [ptrOf(src), state, counters, rows, len, count, descending ? 1 : 0, cap, pass, perRow, chunk], many, stream);
    }
    const collect = load(index, `radix-collect:${dtype}`, () => radixCollectSource(dtype), 0);
    launch(collect, [ptrOf(src), state, counters, ptrOf(cand), rows, len, descending ? 1 : 0, cap, perRow, chunk], many, stream);
    const finish = load(index, `radix-finish:${dtype}`, () => radixFinishSource(dtype), SORT_MAX * candBytes);
    launch(finish, [ptrOf(src), state, counters, ptrOf(cand), vals ? ptrOf(vals) : 0, ptrOf(idx), rows, len, count, descending ? 1 : 0, cap], {
      grid: gridFor(index, rows * RADIX_FINISH_THREADS, RADIX_FINISH_THREADS),
      block: RADIX_FINISH_THREADS,
      sharedBytes: cap * candBytes,
    }, stream);
  } finally {
    work.dispose();
    cand.dispose();
  }
}

// Segments of long rows hold at least this many elements (16 per thread of the selection
// kernel, so the register lists amortise), and a row is cut into at most MAX_SEGMENTS of them;
// rows are cut until there are about two blocks per SM.
const SEGMENT_MIN = 2048;
const MAX_SEGMENTS = 64;

/**
 * topk (count <= SELECT_MAX_K) of contiguous [rows, len] rows longer than SORT_MAX into the
 * contiguous [rows, count] `vals` / `idx`: the selection kernel over row segments, then (when a
 * row has several segments) topk again over the segments' candidates and a pick of their positions.
 */
function selectLong(op: string, src: Tensor, rows: number, len: number, count: number, descending: boolean, vals: Tensor | null, idx: Tensor): void {
  const index = src.device.index;
  const stream = streamOf(src);
  const sm = deviceInfo(index).smCount;
  const want = Math.max(1, Math.min(MAX_SEGMENTS, Math.floor(len / SEGMENT_MIN), Math.ceil((2 * sm) / rows)));
  const chunkLen = Math.ceil(len / want);
  const chunks = Math.ceil(len / chunkLen);
  const L = selectListLength(count);
  const k = load(index, `select:${src.dtype}:${L}`, () => selectSource(src.dtype, L), 0);
  const run = (v: Tensor | null, i: Tensor): void =>
    launch(k, [ptrOf(src), v ? ptrOf(v) : 0, ptrOf(i), rows, len, count, descending ? 1 : 0, chunkLen, chunks], { grid: gridFor(index, rows * chunks * SELECT_THREADS, SELECT_THREADS), block: SELECT_THREADS }, stream);
  if (chunks === 1) {
    run(vals, idx);
    return;
  }
  candidatesThenPick(op, src, rows, chunks * count, count, descending, vals, idx, run);
}

/** Dtypes the key functions order (every Kiln dtype). */
const SORTABLE: ReadonlySet<DType> = new Set(['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8', 'bool']);

function checkDtype(op: string, x: Tensor): void {
  if (!SORTABLE.has(x.dtype)) throw new TypeError(`${op}: the cuda kernel does not support dtype ${x.dtype} (input ${fmtShape(x.shape)})`);
}

function lineLength(x: Tensor, op: string, dim: number): number {
  return x.ndim === 0 ? 1 : x.shape[normalizeDim(op, dim, x.ndim)]!;
}

registerKernel(R.sort, 'cuda', (ctx, self, dim, descending) => {
  checkDtype('sort', self);
  const [mv, mi] = ctx.out as OutMeta[];
  const values = allocOut(mv!);
  const indices = allocOut(mi!);
  sortLines('sort', self, dim as number, descending === true, lineLength(self, 'sort', dim as number), values, indices);
  return [values, indices];
});

registerKernel(R.argsort, 'cuda', (ctx, self, dim, descending) => {
  checkDtype('argsort', self);
  const indices = allocOut(ctx.out);
  sortLines('argsort', self, dim as number, descending === true, lineLength(self, 'argsort', dim as number), null, indices);
  return indices;
});

registerKernel(R.topk, 'cuda', (ctx, self, k, dim, largest) => {
  checkDtype('topk', self);
  const [mv, mi] = ctx.out as OutMeta[];
  const values = allocOut(mv!);
  const indices = allocOut(mi!);
  sortLines('topk', self, dim as number, largest === true, k as number, values, indices);
  return [values, indices];
});
