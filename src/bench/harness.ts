/**
 * Times a built workload: warm-up runs, then `reps` timed runs, each bracketed by `kiln.Event`s
 * recorded on the workload's device and synchronised; the reported time is the median. Every run
 * happens inside `kiln.scope`, so its temporaries (and its output) are released before the next
 * one and memory stays flat. One more run, outside the timing, gives the output for the checksum.
 *
 * The same is then done for the forward through kiln.compile (unless `compiled: false`): the
 * first call's wall time is the cold compile time (trace, passes, code generation, one run), and
 * the compiled output is compared with eager's for max_abs_diff. Rows follow the shared report
 * schema used for the PyTorch peers.
 */
import * as kiln from '../index.js';
import type { DType, Tensor } from '../index.js';
import type { BenchSize, BuiltWorkload } from './workloads.js';

/** One row of the report; the field names are shared with the PyTorch peers' reports. */
export interface BenchRow {
  framework: 'kiln';
  workload: string;
  device: string;
  dtype: DType;
  size: BenchSize;
  eager_ms: number;
  compiled_ms: number | null;
  speedup: number | null;
  compile_s: number | null;
  max_abs_diff: number | null;
}

export interface HarnessOptions {
  /** Also compile the forward with kiln.compile and time it side by side (default true). */
  compiled?: boolean;
  /** Timed runs (default 10). */
  reps?: number;
  /** Untimed runs first (default 3). */
  warmup?: number;
  /** Called after every run: `done` of `total` (warm-up included). */
  onProgress?: (done: number, total: number) => void;
}

export interface OutputSummary {
  shape: number[];
  /** Sum of the output, accumulated in float64. */
  sum: number;
  /** Sum of |output|, accumulated in float64. */
  absSum: number;
  /** Whether every element is finite. */
  finite: boolean;
}

export interface BenchResult {
  row: BenchRow;
  /** Every timed rep, in ms. */
  timesMs: number[];
  minMs: number;
  checksum: OutputSummary;
  /** Bytes allocated on the device after the warm-up and after the last rep (flat memory check). */
  allocatedBytes: { afterWarmup: number; afterReps: number };
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Shape, float64 sum, float64 sum of |x| and finiteness of a tensor (read back to the host). */
export function summarize(t: Tensor): OutputSummary {
  const values = t.toFlatArray();
  let sum = 0;
  let absSum = 0;
  let finite = true;
  for (const v of values) {
    if (!Number.isFinite(v)) finite = false;
    sum += v;
    absSum += Math.abs(v);
  }
  return { shape: [...t.shape], sum, absSum, finite };
}

function allocated(device: string): number {
  return kiln.memoryStats(device).allocatedBytes;
}

/** Runs the eager forward `warmup + reps` times, then the kiln.compile-d forward the same way; reports medians and parity. */
export function benchWorkload(w: BuiltWorkload, options: HarnessOptions = {}): BenchResult {
  const reps = options.reps ?? 10;
  const warmup = options.warmup ?? 3;
  if (!Number.isInteger(reps) || reps < 1) throw new Error(`bench: reps must be a positive integer, got ${reps}`);
  if (!Number.isInteger(warmup) || warmup < 0) throw new Error(`bench: warmup must be a non-negative integer, got ${warmup}`);
  const total = warmup + reps;
  let done = 0;
  const tick = (): void => options.onProgress?.(++done, total);

  for (let i = 0; i < warmup; i++) {
    kiln.scope(() => {
      w.run();
      kiln.synchronize(w.device);
    });
    tick();
  }
  const afterWarmup = allocated(w.device);

  const start = new kiln.Event(w.device);
  const end = new kiln.Event(w.device);
  const timesMs: number[] = [];
  for (let i = 0; i < reps; i++) {
    kiln.scope(() => {
      start.record();
      w.run();
      end.record();
      end.synchronize();
    });
    timesMs.push(start.elapsedTime(end));
    tick();
  }
  const afterReps = allocated(w.device);

  const out = kiln.scope(() => w.run());
  let checksum: OutputSummary;
  let compiled: CompiledTiming | null = null;
  try {
    checksum = summarize(out);
    if (options.compiled ?? true) compiled = benchCompiled(w, out, reps, warmup);
  } finally {
    out.dispose();
  }

  return {
    row: {
      framework: 'kiln',
      workload: w.name,
      device: w.device,
      dtype: w.dtype,
      size: w.size,
      eager_ms: median(timesMs),
      compiled_ms: compiled?.ms ?? null,
      speedup: compiled ? median(timesMs) / compiled.ms : null,
      compile_s: compiled?.compileS ?? null,
      max_abs_diff: compiled?.maxAbsDiff ?? null,
    },
    timesMs,
    minMs: Math.min(...timesMs),
    checksum,
    allocatedBytes: { afterWarmup, afterReps },
  };
}

interface CompiledTiming {
  ms: number;
  compileS: number;
  maxAbsDiff: number;
}

/** Times `fn` between two kiln.Events on the device, reps times after warm-up; returns the median. */
function timeReps(device: string, reps: number, warmup: number, fn: () => void): number {
  for (let i = 0; i < warmup; i++) kiln.scope(fn);
  const start = new kiln.Event(device);
  const end = new kiln.Event(device);
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    kiln.scope(() => {
      start.record();
      fn();
      end.record();
      end.synchronize();
    });
    times.push(start.elapsedTime(end));
  }
  return median(times);
}

/**
 * The same forward through kiln.compile: the first call (trace, passes, code generation, kernel
 * compilation, one run) is the cold compile time; then the same warm-up and reps as eager; the
 * output is compared with eager's.
 */
function benchCompiled(w: BuiltWorkload, eagerOut: Tensor, reps: number, warmup: number): CompiledTiming {
  const cf = kiln.compile(w.forward, { name: w.name });
  const t0 = performance.now();
  const first = kiln.noGrad(() => cf(...w.inputs));
  kiln.synchronize(w.device);
  const compileS = (performance.now() - t0) / 1000;
  let maxAbsDiff: number;
  try {
    maxAbsDiff = kiln.noGrad(() => kiln.amax(kiln.abs(kiln.sub(first.to('float32'), eagerOut.to('float32')))).item() as number);
  } finally {
    first.dispose();
  }
  const ms = timeReps(w.device, reps, warmup, () => {
    kiln.noGrad(() => cf(...w.inputs));
  });
  return { ms, compileS, maxAbsDiff };
}
