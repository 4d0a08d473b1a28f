/**
 * Times a built workload: warm-up runs, then `reps` timed runs, each bracketed by `kiln.Event`s
 * recorded on the workload's device and synchronised; the reported time is the median. Every run
 * happens inside `kiln.scope`, so its temporaries (and its output) are released before the next
 * one and memory stays flat. One more run, outside the timing, gives the output for the checksum.
 *
 * The row has the shared report schema; the compiled fields stay null until the compiler exists
 * (it will fill compiled_ms, speedup, compile_s and max_abs_diff against `BenchResult.output`).
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

/** Runs the workload's eager forward `warmup + reps` times and reports the median of the reps. */
export function benchEager(w: BuiltWorkload, options: HarnessOptions = {}): BenchResult {
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
  try {
    checksum = summarize(out);
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
      compiled_ms: null,
      speedup: null,
      compile_s: null,
      max_abs_diff: null,
    },
    timesMs,
    minMs: Math.min(...timesMs),
    checksum,
    allocatedBytes: { afterWarmup, afterReps },
  };
}
