/**
 * Times a built workload eager and through kiln.compile, side by side: the compiled forward is
 * built first (its first call's wall time is the cold compile time: trace, passes, code
 * generation, one run; its output is compared with eager's for max_abs_diff), then warm-up runs,
 * then `reps` rounds that each time one eager run and one compiled run, bracketed by `kiln.Event`s
 * on the workload's device and synchronised. Alternating keeps clock or load drift from favouring
 * either side. Reported times are medians. Every run happens inside `kiln.scope`, so memory stays
 * flat. Rows follow the shared report schema used for the PyTorch peers.
 */
import * as kiln from '../index.js';
import { getOption } from '../runtime/config.js';
import type { DType, Tensor } from '../index.js';
import { warmUntilSteady, type SteadyReport } from './steady.js';
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
  /** The warm-up until steady speed on an accelerator (steady.ts), null on the cpu or when off. */
  steady: SteadyReport | null;
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

  // The compiled forward is built first (its first call is the cold compile), so that eager and
  // compiled reps can alternate: side by side, drift in clocks or load hits both equally.
  const eagerOut = kiln.scope(() => w.run());
  let compiled: CompiledSetup | null = null;
  let checksum: OutputSummary;
  try {
    checksum = summarize(eagerOut);
    if (options.compiled ?? true) compiled = setupCompiled(w, eagerOut);
  } finally {
    eagerOut.dispose();
  }
  const runCompiled = compiled?.run;

  for (let i = 0; i < warmup; i++) {
    kiln.scope(() => {
      w.run();
      runCompiled?.();
      kiln.synchronize(w.device);
    });
    tick();
  }
  // On an accelerator, then, until the GPU's clock has settled (steady.ts): eager and compiled alike.
  const steady = w.device === 'cpu' || getOption('KILN_BENCH_STEADY_MS') === 0 ? null : warmUntilSteady(w.device, runCompiled ? [() => void w.run(), runCompiled] : [() => void w.run()]);
  const afterWarmup = allocated(w.device);

  const start = new kiln.Event(w.device);
  const end = new kiln.Event(w.device);
  // On an accelerator each timed run follows KILN_BENCH_WARM_MS of the same function's calls, so
  // the GPU is timed at the clock that work brings it to: a webgpu kernel timed after the host's
  // idle gaps (compiles, the other variant's sync) ran at a fraction of it (issue #20, session 28:
  // the H100's SM clock sampled 345-600 MHz median through such runs; compiled elementwise-4096
  // float32 0.30-0.38 ms against 0.082 ms in other runs of the same build).
  const warmMs = w.device === 'cpu' ? 0 : getOption('KILN_BENCH_WARM_MS');
  const time = (fn: () => void): number => {
    if (warmMs > 0) {
      const until = performance.now() + warmMs;
      // Four calls queued between syncs: the GPU stays busy through the host's round trips.
      do {
        for (let k = 0; k < 4; k++) kiln.scope(fn);
        kiln.synchronize(w.device);
      } while (performance.now() < until);
    }
    kiln.scope(() => {
      start.record();
      fn();
      end.record();
      end.synchronize();
    });
    return start.elapsedTime(end);
  };
  const timesMs: number[] = [];
  const compiledMs: number[] = [];
  for (let i = 0; i < reps; i++) {
    timesMs.push(time(() => void w.run()));
    if (runCompiled) compiledMs.push(time(runCompiled));
    tick();
  }
  const afterReps = allocated(w.device);
  const compiledMedian = compiled ? median(compiledMs) : null;

  return {
    row: {
      framework: 'kiln',
      workload: w.name,
      device: w.device,
      dtype: w.dtype,
      size: w.size,
      eager_ms: median(timesMs),
      compiled_ms: compiledMedian,
      speedup: compiledMedian === null ? null : median(timesMs) / compiledMedian,
      compile_s: compiled?.compileS ?? null,
      max_abs_diff: compiled?.maxAbsDiff ?? null,
    },
    timesMs,
    minMs: Math.min(...timesMs),
    checksum,
    allocatedBytes: { afterWarmup, afterReps },
    steady,
  };
}

interface CompiledSetup {
  run: () => void;
  compileS: number;
  maxAbsDiff: number;
}

/**
 * The same forward through kiln.compile: the first call (trace, passes, code generation, kernel
 * compilation, one run) is the cold compile time, and its output is compared with eager's.
 */
function setupCompiled(w: BuiltWorkload, eagerOut: Tensor): CompiledSetup {
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
  return { run: () => void kiln.noGrad(() => cf(...w.inputs)), compileS, maxAbsDiff };
}
