/**
 * Thread count for native kernels: `setNativeThreads(n)`, else KILN_NUM_THREADS, else
 * os.availableParallelism(). Passed to every call (OpenMP `num_threads`), so changing it needs no
 * reload.
 */
import os from 'node:os';

let override: number | undefined;

export function nativeThreads(): number {
  if (override !== undefined) return override;
  const env = process.env.KILN_NUM_THREADS;
  if (env !== undefined && env.trim() !== '') {
    const n = Number(env.trim());
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`KILN_NUM_THREADS must be a positive integer, got '${env}'`);
    return n;
  }
  return Math.max(1, os.availableParallelism());
}

/** Sets the native thread count (undefined: back to KILN_NUM_THREADS / the default). */
export function setNativeThreads(n: number | undefined): void {
  if (n !== undefined && (!Number.isInteger(n) || n < 1)) throw new RangeError(`setNativeThreads: n must be a positive integer, got ${String(n)}`);
  override = n;
}
