/**
 * Device time per call on webgpu for side-by-side benchmarks: each function's `calls` calls are
 * queued back to back between two kiln.Events (timestamp queries), so the host's per-dispatch cost
 * is hidden, and the batches alternate function by function `reps` times, so a clock change or a
 * neighbour's load hits every variant alike. All of it follows a warm-up until the device's speed
 * stops rising (src/bench/steady.ts), and each batch KILN_BENCH_WARM_MS of the same
 * function's calls (as kiln bench's harness does): without them the GPU's clock fell in the host's
 * gaps and some batches ran at a fraction of it (session 28; a copy read 412 GB/s in session 15).
 * Shared by the webgpu side-by-side benchmarks.
 */
import * as kiln from '../src/index.js';
import { getOption } from '../src/runtime/config.js';
import { warmUntilSteady } from '../src/bench/steady.js';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Device ms per call of each fn: the median over `reps` alternating batches of `calls` calls. */
export function deviceMsPerCall(fns: (() => void)[], reps: number, calls: number): number[] {
  for (const fn of fns) for (let i = 0; i < 3; i++) kiln.scope(fn);
  kiln.synchronize('webgpu');
  if (getOption('KILN_BENCH_STEADY_MS') > 0) {
    const s = warmUntilSteady('webgpu', fns);
    console.error(`(steady after ${s.rounds} rounds, ${s.wallMs.toFixed(0)} ms: a round ${s.firstMs.toFixed(3)} -> ${s.lastMs.toFixed(3)} ms${s.settled ? '' : ', not settled'})`);
  }
  const times = fns.map(() => [] as number[]);
  const warmMs = getOption('KILN_BENCH_WARM_MS');
  for (let r = 0; r < reps; r++) {
    fns.forEach((fn, k) => {
      const until = performance.now() + warmMs;
      while (performance.now() < until) {
        for (let i = 0; i < 4; i++) kiln.scope(fn);
        kiln.synchronize('webgpu');
      }
      kiln.scope(() => {
        const s = new kiln.Event('webgpu').record();
        for (let i = 0; i < calls; i++) fn();
        const e = new kiln.Event('webgpu').record();
        e.synchronize();
        times[k]!.push(s.elapsedTime(e) / calls);
      });
    });
  }
  return times.map(median);
}
