/**
 * Device time per call on webgpu for side-by-side benchmarks: each function's `calls` calls are
 * queued back to back between two kiln.Events (timestamp queries), so the host's per-dispatch cost
 * is hidden, and the batches alternate function by function `reps` times, so a clock change or a
 * neighbour's load hits every variant alike. Shared by the elementwise benchmarks.
 */
import * as kiln from '../src/index.js';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Device ms per call of each fn: the median over `reps` alternating batches of `calls` calls. */
export function deviceMsPerCall(fns: (() => void)[], reps: number, calls: number): number[] {
  for (const fn of fns) for (let i = 0; i < 3; i++) fn();
  kiln.synchronize('webgpu');
  const times = fns.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    fns.forEach((fn, k) => {
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
