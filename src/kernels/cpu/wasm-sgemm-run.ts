/**
 * The Wasm cpu path's float32 GEMM (gemm.ts calls it for float32 operands when the active cpu
 * path is 'wasm'): C = alpha * A . B + beta * C through the operands' strides, like gemm.ts's gemm.
 *
 * Per call: A and B are packed from their strided float32 arrays straight into the Wasm memory
 * (wasm-sgemm.ts's sliver layout, zero padded to whole tiles), the tiles of C are split over the
 * thread pool (wasm-threads.ts) by column slivers (or row slivers when C is tall and narrow), and
 * the padded C buffer is copied out with alpha / beta. A problem too large for one pass of the
 * memory budget is cut into row / column chunks of C, each with the whole K, so every element's
 * sum is formed the same way whatever the chunking or the thread count.
 *
 * Small products stay single threaded: handing a share to a worker costs a notify + wait round
 * trip (~20-50 us), more than the whole product below THREAD_MIN multiply-adds.
 */
import { inNode } from '../../platform/index.js';
import type { GemmOperand } from './gemm.js';
import { getOption, setOption } from '../../runtime/config.js';
import { nativeThreads } from './native/threads.js';
import { relaxedSimdAvailable, runCalls, runTiles, warmUpMacros, SGEMM_KC, SGEMM_MR, SGEMM_NR, sgemmMacros, sgemmModule, type SgemmLayout, type SgemmMacros } from './wasm-sgemm.js';
import { createWasmPool, MAX_PAGES, type WasmPool } from './wasm-threads.js';
import { wasmApi } from './wasm-asm.js';

/** Products below this many multiply-adds run on one thread (~1 ms of work: 128^3 = 2M). */
const THREAD_MIN = 1 << 21;
/** Bytes of packed A + packed B + C per pass: 256 MiB, a quarter of the memory's 1 GiB maximum. */
const PASS_BYTES = 256 << 20;

interface Engine {
  pool: WasmPool;
  macros: SgemmMacros;
  fma: boolean;
  f32: Float32Array;
  i32: Int32Array;
}

let engine: Engine | null | undefined;
let calls = 0;

/** How many products the Wasm float32 GEMM has run (tests check the dispatch with it). */
export function wasmSgemmCalls(): number {
  return calls;
}

function getEngine(): Engine | null {
  if (engine !== undefined) return engine;
  try {
    const WA = wasmApi();
    if (!WA) return (engine = null);
    const fma = relaxedSimdAvailable();
    const shape = { mr: SGEMM_MR, nr: SGEMM_NR, unroll: 1, fma };
    const { pool, module } = createWasmPool(1, sgemmModule(shape, MAX_PAGES), sgemmModule(shape));
    const inst = new WA.Instance(module, { env: { mem: pool.memory } });
    engine = { pool, macros: sgemmMacros(inst.exports), fma, f32: new Float32Array(pool.memory.buffer), i32: new Int32Array(pool.memory.buffer) };
    // Nothing lives in the memory yet: its first page is scratch for the tier-up warm-up.
    warmUpMacros(engine.macros, 64);
  } catch {
    engine = null;
  }
  return engine;
}

/** Whether the float32 Wasm GEMM is available here (WebAssembly SIMD). */
export function wasmSgemmAvailable(): boolean {
  return getEngine() !== null;
}

/** Threads the Wasm GEMM uses: setWasmThreads, else the cpu thread count (KILN_NUM_THREADS / adaptive). */
export function wasmThreads(): number {
  // The Wasm GEMM's threads are Node worker threads (wasm-threads.ts); a browser runs it on one.
  if (!inNode) return 1;
  return getOption('cpu.wasmThreads') ?? nativeThreads();
}

/** Sets the Wasm GEMM's thread count (1 = single thread; undefined = back to the default). */
export function setWasmThreads(n: number | undefined): void {
  if (n !== undefined && (!Number.isInteger(n) || n < 1)) throw new RangeError(`setWasmThreads: expected a positive integer, got ${n}`);
  setOption('cpu.wasmThreads', n);
}

/** What the Wasm GEMM runs with, for `kiln info` and benchmarks. */
export function wasmSgemmInfo(): { available: boolean; relaxedSimd: boolean; sharedMemory: boolean; threads: number; workersReady: number } {
  const e = getEngine();
  return { available: e !== null, relaxedSimd: e?.fma ?? false, sharedMemory: e?.pool.shared ?? false, threads: wasmThreads(), workersReady: e?.pool.readyWorkers() ?? 0 };
}

/** One line for `kiln info`: the Wasm GEMM's instruction set and threading. */
export function wasmSgemmSummary(): string {
  const i = wasmSgemmInfo();
  if (!i.available) return 'Wasm GEMM unavailable (no WebAssembly SIMD)';
  const simd = i.relaxedSimd ? 'SIMD128 + relaxed-SIMD FMA' : 'SIMD128 mul+add (no relaxed SIMD; Node 20 enables it with --experimental-wasm-relaxed-simd)';
  const threads = i.sharedMemory ? `${i.threads} threads on shared memory` : 'single thread (no SharedArrayBuffer)';
  return `Wasm GEMM ${SGEMM_MR}x${SGEMM_NR} tiles, ${simd}, ${threads}`;
}

/** Waits until `n` - 1 workers are ready (tests and benchmarks; the kernels never wait for workers). */
export async function warmWasmThreads(n = wasmThreads(), timeoutMs = 10_000): Promise<number> {
  const e = getEngine();
  if (!e) return 0;
  e.pool.want(n - 1);
  const t0 = Date.now();
  while (e.pool.readyWorkers() < n - 1 && e.pool.shared && Date.now() - t0 < timeoutMs) await new Promise((r) => setTimeout(r, 5));
  return e.pool.readyWorkers();
}

/** Terminates the Wasm GEMM's worker threads (they restart on demand). */
export async function shutdownWasmThreads(): Promise<void> {
  await getEngine()?.pool.shutdown();
}

function ensureBytes(e: Engine, bytes: number): void {
  const have = e.pool.memory.buffer.byteLength;
  if (bytes > have) e.pool.memory.grow(Math.ceil((bytes - have) / 65536));
  if (e.f32.buffer !== e.pool.memory.buffer || e.f32.length * 4 !== e.pool.memory.buffer.byteLength) {
    e.f32 = new Float32Array(e.pool.memory.buffer);
    e.i32 = new Int32Array(e.pool.memory.buffer);
  }
}

/**
 * A B operand packed once into the engine's memory and kept there (a compiled linear's or a
 * convolution's weight: the caller repacks when the weight's version changes, into the same
 * region). Regions are bump-allocated below the per-call scratch; when the owner given to
 * wasmPackB is garbage collected its regions go to a free list that later packings reuse (first
 * fit), so weights that come and go don't grow the memory without bound.
 */
export interface PackedB {
  readonly at: number;
  readonly k: number;
  readonly n: number;
}

interface Region {
  at: number;
  bytes: number;
}

/** The end of the persistent regions; per-call scratch starts here (16-byte aligned). */
let persistTop = 64;
const freeRegions: Region[] = [];
const released = new FinalizationRegistry<Region>((r) => freeRegions.push(r));

/** Packed B above this size is not kept (it would crowd the scratch budget): callers pack per call. */
const PACKED_MAX_BYTES = PASS_BYTES >> 1;
/** All kept packings together stay under this (512 MiB, half the memory's maximum); past it wasmPackB returns null. */
const PERSIST_MAX_BYTES = 512 << 20;

/**
 * Packs B (k x n, any strides) for reuse; `reuse` (a previous packing of the same shape) is
 * overwritten in place; otherwise a region is taken (freed or new) and handed back when `owner`
 * is collected. Null where unavailable or too large.
 */
export function wasmPackB(b: GemmOperand, k: number, n: number, reuse: PackedB | null | undefined, owner: object): PackedB | null {
  const e = getEngine();
  const bytes = roundUp(n, SGEMM_NR) * k * 4;
  if (!e || bytes > PACKED_MAX_BYTES || k <= 0 || n <= 0) return null;
  let at: number;
  if (reuse && reuse.k === k && reuse.n === n) at = reuse.at;
  else {
    const q = freeRegions.findIndex((r) => r.bytes >= bytes);
    let region: Region;
    if (q >= 0) region = freeRegions.splice(q, 1)[0]!;
    else {
      const start = (persistTop + 15) & ~15;
      if (start + bytes > PERSIST_MAX_BYTES) return null;
      region = { at: start, bytes };
      persistTop = start + bytes;
    }
    released.register(owner, region);
    at = region.at;
  }
  ensureBytes(e, persistTop + 64);
  packB(e.f32, at >> 2, b, 0, n, roundUp(n, SGEMM_NR), k);
  return { at, k, n };
}

/**
 * Per-call scratch for a caller that lays out its own operands and call list (the direct
 * convolution): `bytes` from a 64-byte aligned base above the persistent regions. The views are
 * valid until the next engine call.
 */
export function wasmScratch(bytes: number): { at: number; f32: Float32Array; i32: Int32Array } {
  const e = getEngine();
  if (!e) throw new Error('wasmScratch: WebAssembly SIMD is not available');
  const at = (persistTop + 63) & ~63;
  ensureBytes(e, at + bytes);
  return { at, f32: e.f32, i32: e.i32 };
}

/**
 * Runs a call list (wasm-sgemm.ts runCalls) at word `table` whose calls fall into groups
 * (groupStarts[g] .. groupStarts[g + 1]); groups are dealt to threads whole and in order, so
 * calls accumulating into one tile stay on one thread. `work`: multiply-adds, for the thread count.
 */
export function wasmRunCalls(table: number, groupStarts: readonly number[], work: number): void {
  const e = getEngine();
  if (!e) throw new Error('wasmRunCalls: WebAssembly SIMD is not available');
  const groups = groupStarts.length - 1;
  calls++;
  const threads = work >= THREAD_MIN ? Math.max(1, Math.min(wasmThreads(), groups)) : 1;
  const self = (r: readonly [number, number]): void => runCalls(e.macros, e.i32, table, r[0], r[1]);
  if (threads === 1) {
    self([groupStarts[0]!, groupStarts[groups]!]);
    return;
  }
  e.pool.want(threads - 1);
  const ranges = Array.from({ length: threads }, (_, t) => [groupStarts[Math.round((t * groups) / threads)]!, groupStarts[Math.round(((t + 1) * groups) / threads)]!] as [number, number]);
  e.pool.runCalls(table, ranges, self);
}

/**
 * Writes rows m0 .. m0 + m of a custom A (k columns) into `out` from word `at` as dense rows of k
 * floats (the kernel reads them in place): the convolution writes its patches this way, straight
 * into the Wasm memory.
 */
export type ARows = (out: Float32Array, at: number, m0: number, m: number, k: number) => void;

export interface SgemmOptions {
  /** Bytes of Wasm memory one pass may use (tests lower it to exercise the chunking). */
  readonly passBytes?: number;
  /** B already packed by wasmPackB (then `b` is ignored). */
  readonly packed?: PackedB | null;
  /** Produces A's rows instead of reading `a` (then `a` is ignored). */
  readonly rowsA?: ARows;
  /** Added to every row of C after alpha / beta (a convolution's bias), element j at data[offset + j * stride]. */
  readonly bias?: { readonly data: ArrayLike<number>; readonly offset: number; readonly stride: number } | null;
}

/** C = alpha * A . B + beta * C (+ bias) for float32 operands (see the header and SgemmOptions). */
export function wasmSgemm(m: number, n: number, k: number, alpha: number, a: GemmOperand | null, b: GemmOperand | null, beta: number, c: GemmOperand, opts: SgemmOptions = {}): void {
  const passBytes = opts.passBytes ?? PASS_BYTES;
  const packed = opts.packed ?? null;
  const e = getEngine();
  if (!e) throw new Error('wasmSgemm: WebAssembly SIMD is not available');
  if (m <= 0 || n <= 0) return;
  if (packed && (packed.k !== k || packed.n !== n)) throw new RangeError(`wasmSgemm: packed B is ${packed.k} x ${packed.n}, the product needs ${k} x ${n}`);
  if (!packed && !b) throw new TypeError('wasmSgemm: B or a packed B is required');
  if (!opts.rowsA && !a) throw new TypeError('wasmSgemm: A or an A row writer is required');
  calls++;
  // Chunk C so that one pass's packed A rows + packed B columns + C fit the budget (a packed B
  // is resident: only rows are chunked).
  const perRow = (k + 16) * 4;
  let mb = roundUp(m, SGEMM_MR);
  let nb = roundUp(n, SGEMM_NR);
  while ((mb + (packed ? 0 : nb)) * perRow + mb * nb * 4 > passBytes && (mb > SGEMM_MR || (!packed && nb > SGEMM_NR))) {
    if (nb >= mb && !packed) nb = Math.max(SGEMM_NR, roundUp(nb >> 1, SGEMM_NR));
    else mb = Math.max(SGEMM_MR, roundUp(mb >> 1, SGEMM_MR));
  }
  for (let n0 = 0; n0 < n; n0 += nb) {
    for (let m0 = 0; m0 < m; m0 += mb) pass(e, Math.min(mb, m - m0), Math.min(nb, n - n0), k, alpha, a, b, beta, c, m0, n0, opts);
  }
}

function pass(e: Engine, m: number, n: number, k: number, alpha: number, a: GemmOperand | null, b: GemmOperand | null, beta: number, c: GemmOperand, m0: number, n0: number, opts: SgemmOptions): void {
  const packed = opts.packed ?? null;
  const mS = Math.ceil(m / SGEMM_MR);
  const nS = Math.ceil(n / SGEMM_NR);
  const Mp = mS * SGEMM_MR;
  const Np = nS * SGEMM_NR;
  const aAt = (persistTop + 63) & ~63;
  const bAt = packed ? packed.at : aAt + Mp * k * 4;
  const cAt = (packed ? aAt + Mp * k * 4 : bAt + Np * k * 4) + 64;
  ensureBytes(e, cAt + Mp * Np * 4);
  const f = e.f32;
  // A with unit column stride (a contiguous activation, an im2col): its rows are copied (memcpy)
  // and read in place by macroRow, with no packing pass; any other A is packed into slivers.
  const rowA = opts.rowsA !== undefined || a!.colStride === 1;
  if (opts.rowsA) opts.rowsA(f, aAt >> 2, m0, m, k);
  else if (rowA) copyRowsA(f, aAt >> 2, a!, m0, m, k);
  else packA(f, aAt >> 2, a!, m0, m, Mp, k);
  // Padding rows: zeros, not leftovers (stale bits could be denormals, which are slow to multiply).
  if (rowA) f.fill(0, (aAt >> 2) + m * k, (aAt >> 2) + Mp * k);
  if (!packed) packB(f, bAt >> 2, b!, n0, n, Np, k);
  const layout: SgemmLayout = { mS, nS, k, a: aAt, b: bAt, c: cAt, ldc: Np * 4, lda: rowA ? k * 4 : 0 };
  // k = 0: the kernel never runs, C's product part is zero.
  if (k === 0) f.fill(0, cAt >> 2, (cAt >> 2) + Mp * Np);
  const threads = m * n * k >= THREAD_MIN ? Math.max(1, Math.min(wasmThreads(), nS * SGEMM_NR >= Mp ? nS : mS)) : 1;
  const self = (r: readonly [number, number, number, number]): void => runTiles(e.macros, layout, r[0], r[1], r[2], r[3]);
  if (threads === 1) self([0, mS, 0, nS]);
  else {
    e.pool.want(threads - 1);
    // Split the longer side of C into equal runs of slivers (one per thread).
    const byCols = nS * SGEMM_NR >= Mp;
    const total = byCols ? nS : mS;
    const ranges = Array.from({ length: threads }, (_, t) => {
      const lo = Math.round((t * total) / threads);
      const hi = Math.round(((t + 1) * total) / threads);
      return (byCols ? [0, mS, lo, hi] : [lo, hi, 0, nS]) as [number, number, number, number];
    });
    e.pool.run(layout, ranges, self);
  }
  copyOut(e.f32, cAt >> 2, Np, m, n, alpha, beta, c, m0, n0, opts.bias ?? null);
}

function roundUp(x: number, to: number): number {
  return Math.ceil(x / to) * to;
}

/** A[m0 .. m0 + m, 0 .. k] (unit column stride) as dense rows at word `at`. */
function copyRowsA(out: Float32Array, at: number, a: GemmOperand, m0: number, m: number, k: number): void {
  const ad = a.data as Float32Array;
  const start = a.offset + m0 * a.rowStride;
  if (a.rowStride === k) out.set(ad.subarray(start, start + m * k), at);
  else for (let i = 0; i < m; i++) out.set(ad.subarray(start + i * a.rowStride, start + i * a.rowStride + k), at + i * k);
}

/**
 * A[m0 .. m0 + m, 0 .. k] into KC-deep blocks of MR-row slivers at word `at` (rows past m are
 * zero): block pc starts at at + Mp * pc; in it, sliver i holds A[i * MR + r, pc + p] at [p * MR + r].
 */
function packA(out: Float32Array, at: number, a: GemmOperand, m0: number, m: number, Mp: number, k: number): void {
  const ad = a.data;
  const rs = a.rowStride;
  const cs = a.colStride;
  for (let pc = 0; pc < k; pc += SGEMM_KC) {
    const kcb = Math.min(SGEMM_KC, k - pc);
    let o = at + Mp * pc;
    for (let i = 0; i < Mp; i += SGEMM_MR, o += kcb * SGEMM_MR) {
      for (let r = 0; r < SGEMM_MR; r++) {
        const row = i + r;
        if (row >= m) {
          for (let p = 0, t = o + r; p < kcb; p++, t += SGEMM_MR) out[t] = 0;
          continue;
        }
        let q = a.offset + (m0 + row) * rs + pc * cs;
        for (let p = 0, t = o + r; p < kcb; p++, t += SGEMM_MR, q += cs) out[t] = ad[q]!;
      }
    }
  }
}

/**
 * B[0 .. k, n0 .. n0 + n] into KC-deep blocks of NR-column slivers at word `at` (columns past n
 * are zero): block pc starts at at + Np * pc; in it, sliver j holds B[pc + p, j * NR + q] at [p * NR + q].
 */
function packB(out: Float32Array, at: number, b: GemmOperand, n0: number, n: number, Np: number, k: number): void {
  const bd = b.data;
  const rs = b.rowStride;
  const cs = b.colStride;
  for (let pc = 0; pc < k; pc += SGEMM_KC) {
    const kcb = Math.min(SGEMM_KC, k - pc);
    let o = at + Np * pc;
    for (let j = 0; j < Np; j += SGEMM_NR, o += kcb * SGEMM_NR) {
      const w = Math.min(SGEMM_NR, n - j);
      const base = b.offset + pc * rs + (n0 + j) * cs;
      if (w === SGEMM_NR && cs === 1) {
        // Row-major B: eight contiguous values per k step.
        for (let p = 0, q = base, t = o; p < kcb; p++, q += rs, t += SGEMM_NR) {
          out[t] = bd[q]!;
          out[t + 1] = bd[q + 1]!;
          out[t + 2] = bd[q + 2]!;
          out[t + 3] = bd[q + 3]!;
          out[t + 4] = bd[q + 4]!;
          out[t + 5] = bd[q + 5]!;
          out[t + 6] = bd[q + 6]!;
          out[t + 7] = bd[q + 7]!;
        }
        continue;
      }
      // Any other stride (a linear's weight read transposed: rs = 1): one column at a time walks k.
      for (let q = 0; q < SGEMM_NR; q++) {
        if (q >= w) {
          for (let p = 0, t = o + q; p < kcb; p++, t += SGEMM_NR) out[t] = 0;
          continue;
        }
        for (let p = 0, s = base + q * cs, t = o + q; p < kcb; p++, s += rs, t += SGEMM_NR) out[t] = bd[s]!;
      }
    }
  }
}

/** C[m0 + i, n0 + j] = alpha * buf[i, j] + beta * C[...] (+ bias[n0 + j]) (beta = 0 overwrites, NaNs in C included). */
function copyOut(buf: Float32Array, at: number, ld: number, m: number, n: number, alpha: number, beta: number, c: GemmOperand, m0: number, n0: number, bias: SgemmOptions['bias'] | null): void {
  const cd = c.data;
  const crs = c.rowStride;
  const ccs = c.colStride;
  if (bias) {
    const bv = new Float32Array(n);
    for (let j = 0; j < n; j++) bv[j] = bias.data[bias.offset + (n0 + j) * bias.stride]!;
    for (let i = 0; i < m; i++) {
      const q0 = c.offset + (m0 + i) * crs + n0 * ccs;
      const t0 = at + i * ld;
      if (beta === 0 && alpha === 1) for (let j = 0, q = q0, t = t0; j < n; j++, q += ccs, t++) cd[q] = buf[t]! + bv[j]!;
      else for (let j = 0, q = q0, t = t0; j < n; j++, q += ccs, t++) cd[q] = (beta === 0 ? alpha * buf[t]! : alpha * buf[t]! + beta * cd[q]!) + bv[j]!;
    }
    return;
  }
  for (let i = 0; i < m; i++) {
    const q0 = c.offset + (m0 + i) * crs + n0 * ccs;
    const t0 = at + i * ld;
    if (beta === 0 && alpha === 1 && ccs === 1 && cd instanceof Float32Array) {
      cd.set(buf.subarray(t0, t0 + n), q0);
      continue;
    }
    for (let j = 0, q = q0, t = t0; j < n; j++, q += ccs, t++) cd[q] = beta === 0 ? alpha * buf[t]! : alpha * buf[t]! + beta * cd[q]!;
  }
}
