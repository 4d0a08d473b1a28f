/** The content-addressed disk cache and its keys: shared infrastructure for every layer above the runtime. */
export { cacheKey, canonicalJson, kilnVersion } from './key.js';
export {
  DiskCache,
  cacheDir,
  getDiskCache,
  encodeEntry,
  CACHE_MAGIC,
  CACHE_FORMAT_VERSION,
  type CacheHeader,
  type DiskCacheOptions,
  type DiskCacheStats,
} from './disk-cache.js';
