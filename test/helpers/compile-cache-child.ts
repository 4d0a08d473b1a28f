/**
 * Child process for the cache tests: `node compile-cache-child.js <namespace> <key> <tag> <times>`
 * writes `{ tag, i, blob }` `times` times under KILN_CACHE_DIR, reading the entry back between writes.
 */
import { getDiskCache } from '../../src/runtime/cache/index.js';

const [namespace, key, tag, times] = process.argv.slice(2) as [string, string, string, string];
const cache = getDiskCache();
const blob = tag.repeat(2000);
let badReads = 0;
for (let i = 0; i < Number(times); i++) {
  cache.put(namespace, key, { tag, i, blob });
  cache.clearMemory();
  const v = cache.get(namespace, key) as { tag: string; blob: string } | undefined;
  if (v !== undefined && v.blob !== v.tag.repeat(2000)) badReads++;
}
console.log(JSON.stringify({ dir: cache.dir, stats: cache.stats(), badReads }));
