/**
 * The process-wide work-sharing pool (pool-c.ts): a tiny shared object exporting
 * `kiln_pool_run_shared`, loaded once with RTLD_GLOBAL so that every native object loaded after
 * it (base GEMM, compiled GEMM variants, ops) finds it with dlsym and shares one set of workers.
 * Failing to build or load it is not an error: each object then runs its own copy of the pool.
 */
import { loadLibrary } from './koffi.js';
import { POOL_SHARED_SOURCE } from './pool-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { probeToolchain } from './toolchain.js';

let state: 'untried' | 'loaded' | 'failed' = 'untried';

/** Loads the shared pool object if it is not loaded yet; returns whether it is. */
export function ensureSharedPool(): boolean {
  if (state === 'untried') {
    state = 'failed';
    const probe = probeToolchain();
    if (probe.ok) {
      try {
        loadLibrary(buildSharedObjectSync('kiln_pool', POOL_SHARED_SOURCE, probe.toolchain), { global: true });
        state = 'loaded';
      } catch (e) {
        process.emitWarning(`kiln: the shared native thread pool is unavailable, each native object uses its own: ${(e as Error).message}`, { code: 'KILN_NATIVE_POOL' });
      }
    }
  }
  return state === 'loaded';
}
