/**
 * Timers shared by the cuda A/B benches (copy reference, moeSum, topk).
 *
 * deviceMsBehindSpin: device time of a host callback, with the host's enqueue gaps hidden: a spin kernel
 * (__nanosleep) occupies the stream while `runs` calls are queued behind it between two events,
 * so the GPU runs them back to back; the median over `batches` such batches, per call.
 * perCallMs: events around one call (host dispatch and launch latency inside), median of `reps`.
 */
import * as kiln from '../src/index.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch, type CudaKernel } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';

const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(100000); t += 100000; } }`;
let spin: CudaKernel | undefined;

export interface SpinOptions {
  /** Calls per batch. */
  readonly runs: number;
  /** Batches (the median is reported). */
  readonly batches: number;
  /** Nanoseconds the spin kernel sleeps: long enough for the host to queue all `runs` calls. */
  readonly spinNs?: number;
}

/** Device ms per call of fn; each call runs in its own kiln.scope (a caller that drops its result). */
export function deviceMsBehindSpin(fn: () => void, o: SpinOptions): number {
  spin ??= kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);
  const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
  const times: number[] = [];
  for (let b = 0; b < o.batches; b++) {
    kiln.synchronize('cuda');
    launch(spin, [o.spinNs ?? 3_000_000], { grid: 1, block: 1 }, stream);
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    s.record();
    for (let i = 0; i < o.runs; i++) kiln.scope(fn);
    e.record();
    e.synchronize();
    times.push(s.elapsedTime(e) / o.runs);
  }
  return times.sort((a, b) => a - b)[times.length >> 1]!;
}

/** Median ms of `reps` calls of fn, each between two events and in its own kiln.scope, after `warmup` calls. */
export function perCallMs(fn: () => void, reps: number, warmup = 0): number {
  for (let i = 0; i < warmup; i++) kiln.scope(fn);
  const s = new kiln.Event('cuda');
  const e = new kiln.Event('cuda');
  const t: number[] = [];
  for (let r = 0; r < reps; r++) {
    kiln.scope(() => {
      s.record();
      fn();
      e.record();
      e.synchronize();
    });
    t.push(s.elapsedTime(e));
  }
  return t.sort((a, b) => a - b)[t.length >> 1]!;
}
