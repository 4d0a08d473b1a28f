/**
 * Threads for the Wasm cpu path: one shared WebAssembly.Memory and a small pool of worker_threads
 * that run the same GEMM module on it (wasm-worker.ts). The calling thread takes a share of every
 * task itself and waits (Atomics.wait, synchronous like the rest of the eager kernels) for the
 * workers' shares, so a pool of W workers gives W + 1 threads.
 *
 * Protocol (a control block of Int32 words on a SharedArrayBuffer):
 * - the caller writes the layout (ARGS) and each worker's range (RANGE + 4w), tags the workers that
 *   have a share with TASK[w] = seq, bumps SEQ and notifies; a worker woken with TASK[w] != SEQ
 *   has no share and touches nothing, so a worker that became ready mid-task cannot read half-
 *   written arguments;
 * - a worker stores DONE[w] = seq when its share is done (ERR[w] = 1 if it threw), and the caller
 *   waits for exactly the workers it tagged before it reuses the arguments or the memory. A share
 *   that failed is recomputed by the caller (same kernel, same result).
 * - Workers start lazily on the first large task and set READY[w] once their module instance
 *   exists; until then the caller runs every share itself, so nothing waits for a worker to boot.
 * - Workers are unref'd: a process whose only remaining handles are these workers exits, and the
 *   workers die with it (they idle in Atomics.wait, which termination interrupts).
 * Where shared memory or worker_threads is unavailable (a browser page without cross-origin
 * isolation), `createWasmPool` returns a pool with a non-shared memory and no workers.
 */
import { workerExecArgv, workerThreads } from '../../platform/index.js';
import type { Worker } from 'node:worker_threads';
import { type SgemmLayout } from './wasm-sgemm.js';
import { wasmApi } from './wasm-asm.js';

export const MAX_WORKERS = 8;
export const CTRL = {
  SEQ: 0,
  /** 1: GEMM tiles (ARGS = the layout, RANGE = slivers); 2: a call list (ARGS[0] = its word address, RANGE = [first, end)). */
  OP: 1,
  READY: 8,
  DONE: 16,
  ERR: 24,
  TASK: 32,
  /** mS, nS, k, a, b, c, ldc, lda */
  ARGS: 40,
  /** i0, i1, j0, j1 per worker */
  RANGE: 48,
  WORDS: 48 + 4 * MAX_WORKERS,
} as const;

/** The shared memory's maximum: 1 GiB (16384 pages), well under wasm32's 4 GiB; callers chunk their work to fit. */
export const MAX_PAGES = 16384;

export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}

export interface WasmPool {
  readonly memory: WasmMemory;
  /** Whether the memory is shared (threads possible). */
  readonly shared: boolean;
  /** Workers started and ready now (0 until they boot; always 0 without shared memory). */
  readyWorkers(): number;
  /** Starts workers (lazily, asynchronously) up to `n`; no-op without shared memory. */
  want(n: number): void;
  /**
   * Runs `self` on the calling thread and ranges[w] on ready worker w (w < readyWorkers()),
   * returning when all are done; ranges a worker failed are rerun through `self`.
   */
  run(layout: SgemmLayout, ranges: readonly (readonly [number, number, number, number])[], self: (r: readonly [number, number, number, number]) => void): void;
  /** Like run, for a call list (wasm-sgemm.ts runCalls) at word `table`: ranges[t] = [first, end) of calls. */
  runCalls(table: number, ranges: readonly (readonly [number, number])[], self: (r: readonly [number, number]) => void): void;
  /** Terminates the workers (the pool stays usable single-threaded and restarts them on demand). */
  shutdown(): Promise<void>;
}

class Pool implements WasmPool {
  private readonly ctrl: Int32Array;
  private readonly workers: Worker[] = [];
  private seq = 0;

  constructor(
    readonly memory: WasmMemory,
    readonly shared: boolean,
    private readonly module: object | null,
  ) {
    this.ctrl = new Int32Array(shared ? new SharedArrayBuffer(CTRL.WORDS * 4) : new ArrayBuffer(CTRL.WORDS * 4));
  }

  readyWorkers(): number {
    let n = 0;
    while (n < this.workers.length && Atomics.load(this.ctrl, CTRL.READY + n) === 1) n++;
    return n;
  }

  want(n: number): void {
    if (!this.shared || this.module === null) return;
    while (this.workers.length < Math.min(n, MAX_WORKERS)) {
      const index = this.workers.length;
      const start = (execArgv: string[]): Worker =>
        new workerThreads.Worker(new URL('./wasm-worker.js', import.meta.url), { workerData: { memory: this.memory, module: this.module, ctrl: this.ctrl, index }, execArgv });
      let w: Worker;
      try {
        w = start(workerExecArgv());
      } catch {
        // V8 flags (--experimental-wasm-relaxed-simd) are refused in a worker's execArgv; they are
        // process-wide anyway, so the worker still has them with no options at all.
        try {
          w = start([]);
        } catch {
          return;
        }
      }
      w.unref();
      // A worker that fails to boot never sets READY, so it is never given a share.
      w.on('error', () => Atomics.store(this.ctrl, CTRL.READY + index, -1));
      this.workers.push(w);
    }
  }

  run(layout: SgemmLayout, ranges: readonly (readonly [number, number, number, number])[], self: (r: readonly [number, number, number, number]) => void): void {
    this.dispatch(1, [layout.mS, layout.nS, layout.k, layout.a, layout.b, layout.c, layout.ldc, layout.lda], ranges, self);
  }

  runCalls(table: number, ranges: readonly (readonly [number, number])[], self: (r: readonly [number, number]) => void): void {
    this.dispatch(2, [table], ranges, self);
  }

  private dispatch<R extends readonly number[]>(op: number, args: readonly number[], ranges: readonly R[], self: (r: R) => void): void {
    const nw = Math.min(ranges.length - 1, this.readyWorkers());
    if (nw <= 0) {
      for (const r of ranges) self(r);
      return;
    }
    const c = this.ctrl;
    const s = ++this.seq;
    c[CTRL.OP] = op;
    for (let q = 0; q < args.length; q++) c[CTRL.ARGS + q] = args[q]!;
    for (let w = 0; w < nw; w++) {
      const r = ranges[w + 1]!;
      for (let q = 0; q < r.length; q++) c[CTRL.RANGE + 4 * w + q] = r[q]!;
      Atomics.store(c, CTRL.ERR + w, 0);
      Atomics.store(c, CTRL.TASK + w, s);
    }
    Atomics.store(c, CTRL.SEQ, s);
    Atomics.notify(c, CTRL.SEQ);
    self(ranges[0]!);
    for (let w = 0; w < nw; w++) {
      for (let d = Atomics.load(c, CTRL.DONE + w); d !== s; d = Atomics.load(c, CTRL.DONE + w)) Atomics.wait(c, CTRL.DONE + w, d);
      if (Atomics.load(c, CTRL.ERR + w) !== 0) self(ranges[w + 1]!);
    }
    // Shares beyond the ready workers run here too.
    for (let t = nw + 1; t < ranges.length; t++) self(ranges[t]!);
  }

  async shutdown(): Promise<void> {
    const ws = this.workers.splice(0);
    for (let w = 0; w < MAX_WORKERS; w++) Atomics.store(this.ctrl, CTRL.READY + w, 0);
    await Promise.all(ws.map((w) => w.terminate()));
  }
}

/**
 * A pool over a fresh memory of `pages` pages: shared (for `sharedBytes`, the module assembled
 * with a shared memory import) where possible, else plain (for `plainBytes`, single thread).
 */
export function createWasmPool(pages: number, sharedBytes: Uint8Array, plainBytes: Uint8Array): { pool: WasmPool; bytes: Uint8Array; module: object } {
  const WA = wasmApi()!;
  if (typeof SharedArrayBuffer !== 'undefined') {
    try {
      const memory = new WA.Memory({ initial: pages, maximum: MAX_PAGES, shared: true }) as unknown as WasmMemory;
      const module = new WA.Module(sharedBytes);
      return { pool: new Pool(memory, true, module), bytes: sharedBytes, module };
    } catch {
      // no shared memory here (e.g. a page without cross-origin isolation): single thread
    }
  }
  const memory = new WA.Memory({ initial: pages, maximum: MAX_PAGES }) as unknown as WasmMemory;
  const module = new WA.Module(plainBytes);
  return { pool: new Pool(memory, false, null), bytes: plainBytes, module };
}
