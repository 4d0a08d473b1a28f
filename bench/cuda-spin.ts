/**
 * Timers shared by the cuda A/B benches (copy reference, moeSum, topk).
 *
 * deviceMsBehindSpin: device time of a host callback, with the host's enqueue gaps hidden: a spin kernel
 * (__nanosleep) occupies the stream while `runs` calls are queued behind it between two events,
 * so the GPU runs them back to back; the median over `batches` such batches, per call.
 * perCallMs: events around one call (host dispatch and launch latency inside), median of `reps`.
 * waitForEvent/syncWithin: waits that poll an event and throw past a bound instead of blocking in
 * the driver forever (deviceMsBehindSpin's `timeoutMs`), so a kernel that never ends fails a bench
 * with its label instead of hanging the device session.
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
  /**
   * Bound on each wait for the device, in ms: the waits poll an event instead of blocking in the
   * driver, and a wait past the bound throws (naming `label`) instead of waiting forever.
   */
  readonly timeoutMs?: number;
  readonly label?: string;
}

/** Polls `e` until it completes; past `timeoutMs` throws. Blocks in the driver when no bound is given. */
export function waitForEvent(e: kiln.Event, timeoutMs: number | undefined, label = 'the device'): void {
  if (timeoutMs === undefined) return e.synchronize();
  const deadline = performance.now() + timeoutMs;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let spins = 0; !e.query(); spins++) {
    if (performance.now() > deadline) throw new Error(`${label}: the device did not finish within ${timeoutMs} ms (a kernel that never ends?)`);
    // A short busy phase (microsecond kernels), then 0.2 ms naps.
    if (spins > 1000) Atomics.wait(nap, 0, 0, 0.2);
  }
}

/** Waits for all work queued so far on cuda:0's default stream, within `timeoutMs` when given. */
export function syncWithin(timeoutMs: number | undefined, label?: string): void {
  if (timeoutMs === undefined) return kiln.synchronize('cuda');
  const e = new kiln.Event('cuda', { enableTiming: false });
  e.record();
  waitForEvent(e, timeoutMs, label);
}

/** Device ms per call of fn; each call runs in its own kiln.scope (a caller that drops its result). */
export function deviceMsBehindSpin(fn: () => void, o: SpinOptions): number {
  spin ??= kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);
  const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
  const times: number[] = [];
  for (let b = 0; b < o.batches; b++) {
    syncWithin(o.timeoutMs, o.label);
    launch(spin, [o.spinNs ?? 3_000_000], { grid: 1, block: 1 }, stream);
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    s.record();
    for (let i = 0; i < o.runs; i++) kiln.scope(fn);
    e.record();
    waitForEvent(e, o.timeoutMs, o.label);
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
