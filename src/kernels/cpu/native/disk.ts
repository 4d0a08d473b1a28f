/**
 * The native path's own DiskCache instance over the shared cache directory: toolchain probes and
 * shared-object records live there without touching the compiler's process-wide cache (and its
 * statistics, which the program-cache tests count read by read).
 */
import { cacheDir, DiskCache } from '../../../runtime/cache/disk-cache.js';

const caches = new Map<string, DiskCache>();

/** The native cache for the current `cacheDir()` (re-evaluated each call, as getDiskCache). */
export function nativeDiskCache(): DiskCache {
  const dir = cacheDir();
  let c = caches.get(dir);
  if (!c) caches.set(dir, (c = new DiskCache({ dir, memoryEntries: 256 })));
  return c;
}
