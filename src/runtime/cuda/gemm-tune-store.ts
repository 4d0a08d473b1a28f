/**
 * cuBLASLt autotune winners on disk, so a new process does not re-time its GEMM problems
 * (cublaslt.ts times each new problem's heuristic candidates once: a few synchronised runs each,
 * the largest part of a warm start's GEMM setup).
 *
 * Stored in the compile DiskCache (KILN_CACHE_DIR), namespace 'cublaslt-algo', one entry per
 * problem. The key holds everything a winner depends on: the device (architecture, name and SM
 * count: the same arch on another SKU can rank algorithms differently), cuBLASLt's version, the
 * problem (cublaslt.ts's plan key: dtypes, m/n/k, batch, operand layouts and transposes, leading
 * dims, alignments, epilogue, beta) and the candidate algorithms themselves (their bytes), so a
 * change of the heuristic's offer (a new cuBLASLt, another candidate count) is a new key. Kiln's
 * version is in every cacheKey. The entry holds the winner's index among the candidates and its
 * bytes; a load that does not find exactly those bytes there is a miss and the problem is timed.
 */
import { createHash } from '../../platform/index.js';
import { cacheKey } from '../cache/key.js';
import { getDiskCache } from '../cache/disk-cache.js';
import { configFingerprint, getOption } from '../config.js';
import type { CudaDeviceInfo } from './properties.js';

const NAMESPACE = 'cublaslt-algo';

/**
 * KILN_TUNE_STORE=0 times every problem in every process (as before winners were stored); it also
 * turns off the stored CUDA graph decisions (compile/cuda-graphs/decision-store.ts).
 */
const STORE = getOption('KILN_TUNE_STORE');

/** Problems whose winner came from disk, and problems timed here, in this process. */
export const gemmTuneStats = { loaded: 0, tuned: 0 };

/** The state of one cuBLASLt plan that tuning reads and sets (cublaslt.ts's Plan). */
export interface TunablePlan {
  algo: Uint8Array;
  readonly algos: readonly Uint8Array[];
  tuned: boolean;
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

/** What of a device a winner depends on (cublaslt.ts passes deviceInfo(index)). */
export type TuneDevice = Pick<CudaDeviceInfo, 'arch' | 'name' | 'smCount'>;

function storeKey(d: TuneDevice, problem: string, algos: readonly Uint8Array[], libVersion: number): string {
  const candidates = createHash('sha256');
  for (const a of algos) candidates.update(a);
  return cacheKey(['cublaslt-algo', d.arch, d.name, d.smCount, libVersion, problem, candidates.digest('hex'), configFingerprint()]);
}

/**
 * Sets `plan.algo` to the stored winner for `problem` on `device`, or runs `tune` (which
 * times the candidates and sets `plan.algo`) and stores its choice. Disk failures only cost a
 * re-tune: the DiskCache counts them and never throws on a failed write.
 */
export function tunePersisted(device: TuneDevice, problem: string, plan: TunablePlan, libVersion: number, tune: () => void): void {
  if (!STORE) {
    tune();
    gemmTuneStats.tuned++;
    return;
  }
  const key = storeKey(device, problem, plan.algos, libVersion);
  const cache = getDiskCache();
  const hit = cache.get(NAMESPACE, key) as { index?: unknown; algo?: unknown } | undefined;
  if (hit && typeof hit.index === 'number' && typeof hit.algo === 'string') {
    const algo = plan.algos[hit.index];
    if (algo && hex(algo) === hit.algo) {
      plan.algo = algo;
      plan.tuned = true;
      gemmTuneStats.loaded++;
      return;
    }
  }
  tune();
  gemmTuneStats.tuned++;
  const winner = plan.algos.indexOf(plan.algo);
  if (winner >= 0) cache.put(NAMESPACE, key, { index: winner, algo: hex(plan.algo), problem });
}
