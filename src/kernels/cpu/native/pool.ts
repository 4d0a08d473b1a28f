/**
 * The process-wide work-sharing pool (pool-c.ts): a tiny shared object exporting
 * `kiln_pool_run_shared`, loaded once with RTLD_GLOBAL so that every native object loaded after
 * it (base GEMM, compiled GEMM variants, ops) finds it with dlsym and shares one set of workers.
 * Failing to build or load it is not an error: each object then runs its own copy of the pool.
 */
import { emitWarning } from '../../../platform/index.js';
import { loadLibrary, type KoffiLib, type NativeFn } from './koffi.js';
import { POOL_SHARED_SOURCE } from './pool-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { probeToolchain } from './toolchain.js';

let state: 'untried' | 'loaded' | 'failed' = 'untried';
let statsFn: NativeFn | undefined;

/** Counters of the shared pool since the process started (pool-c.ts `kiln_pool_stats`). */
export interface PoolStats {
  /** Jobs that ran with more than one thread allowed. */
  jobs: number;
  /** Items the calling thread ran itself / items pool workers ran. */
  itemsCaller: number;
  itemsWorkers: number;
  /** Worker arrivals at a job, and their summed delay after the job was published (ns). */
  joins: number;
  joinNs: number;
  /** Times a worker stopped spinning and slept on the condition variable. */
  sleeps: number;
  /** Weight bytes waiting workers prefetched (KILN_CPU_WEIGHT_PREFETCH_MB). */
  prefetchedBytes: number;
}

/** Loads the shared pool object if it is not loaded yet; returns whether it is. */
export function ensureSharedPool(): boolean {
  if (state === 'untried') {
    state = 'failed';
    const probe = probeToolchain();
    if (probe.ok) {
      try {
        const lib = loadLibrary(buildSharedObjectSync('kiln_pool', POOL_SHARED_SOURCE, probe.toolchain), { global: true });
        statsFn = lib.func('void kiln_pool_stats(void *out)');
        state = 'loaded';
      } catch (e) {
        emitWarning(`kiln: the shared native thread pool is unavailable, each native object uses its own: ${(e as Error).message}`, { code: 'KILN_NATIVE_POOL' });
      }
    }
  }
  return state === 'loaded';
}

/**
 * Builds (or takes from the cache) and loads the native object of a C source whose jobs run on the
 * pool, after the shared pool's object so that its dlsym finds it. Throws when there is no
 * working C compiler.
 */
export function loadPoolObject(name: string, source: string): KoffiLib {
  const probe = probeToolchain();
  if (!probe.ok) throw new Error(`native cpu path: ${probe.reason}`);
  ensureSharedPool();
  return loadLibrary(buildSharedObjectSync(name, source, probe.toolchain));
}

/** The shared pool's counters, or null when it is not loaded (diagnostics: scripts/bench-cpu-pool.mjs). */
export function sharedPoolStats(): PoolStats | null {
  if (!ensureSharedPool() || !statsFn) return null;
  const out = new BigInt64Array(7); // PS_N of pool-c.ts
  statsFn(out);
  const [jobs, itemsCaller, itemsWorkers, joins, joinNs, sleeps, prefetchedBytes] = Array.from(out, Number) as [number, number, number, number, number, number, number];
  return { jobs, itemsCaller, itemsWorkers, joins, joinNs, sleeps, prefetchedBytes };
}
