/**
 * Thread count for native kernels: `setNativeThreads(n)`, else KILN_NUM_THREADS, else
 * os.availableParallelism() reduced while the machine is oversubscribed by other processes.
 * Passed to every call (OpenMP `num_threads`), so changing it needs no reload.
 *
 * The default adapts like OpenMP's OMP_DYNAMIC, but on the 1-minute load average (libgomp uses
 * the 15-minute one, which lags for a quarter of an hour): when the load exceeds the cores by more
 * than one (this process's own busy threads count towards the load, hence the slack), a parallel
 * region waits for workers the kernel cannot schedule. Measured on the shared 2-core machine at
 * load ~6: eager mlp-64x512 4.5 ms on 1 thread vs 15.9 ms on 2 (and ~1.3 ms either way when idle).
 * An explicit count (setNativeThreads / KILN_NUM_THREADS) is always used as given.
 */
import { inNode, os } from '../../../platform/index.js';
import { getOption, setOption } from '../../../runtime/config.js';

let cached = { at: -Infinity, n: 1 };

/** Re-read the load average at most this often (ms): a read costs a syscall, loads change slowly. */
const LOAD_REFRESH_MS = 1000;

function adaptive(): number {
  if (!inNode) return 1; // no native code in a browser
  const now = performance.now();
  if (now - cached.at < LOAD_REFRESH_MS) return cached.n;
  const cores = Math.max(1, os.availableParallelism());
  const load = os.loadavg()[0] ?? 0;
  const excess = load - (cores + 1);
  const n = excess > 0 ? Math.max(1, cores - Math.ceil(excess)) : cores;
  cached = { at: now, n };
  return n;
}

export function nativeThreads(): number {
  return getOption('KILN_NUM_THREADS') ?? adaptive();
}

/** Sets the native thread count (undefined: back to KILN_NUM_THREADS / the adaptive default). */
export function setNativeThreads(n: number | undefined): void {
  if (n !== undefined && (!Number.isInteger(n) || n < 1)) throw new RangeError(`setNativeThreads: n must be a positive integer, got ${String(n)}`);
  setOption('KILN_NUM_THREADS', n);
}
