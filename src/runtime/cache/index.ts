/** The content-addressed disk cache and its keys: shared infrastructure for every layer above the runtime. */
export { cacheKey, canonicalJson, kilnVersion } from './key.js';
export { cacheDir, defaultCacheDir, resolveCacheDir, type CacheDirSource } from './location.js';
export {
  CACHEDIR_TAG,
  cacheCapBytes,
  cacheUsage,
  clearCache,
  evictLeastRecentlyUsed,
  recordCacheWrite,
  resetCacheEstimates,
  scanCache,
  touchEntry,
  type CacheFile,
  type CacheUsage,
} from './budget.js';
export {
  DiskCache,
  getDiskCache,
  encodeEntry,
  CACHE_MAGIC,
  CACHE_FORMAT_VERSION,
  type CacheHeader,
  type DiskCacheOptions,
  type DiskCacheStats,
} from './disk-cache.js';
