/**
 * The cache folder's size cap (KILN_CACHE_MAX_MB) with least-recently-used eviction, and the
 * whole-folder views behind `kiln cache info|clear`.
 *
 * Recency is a file's mtime: a write sets it, and a hit sets it again (`touchEntry`); atime is not
 * used because most file systems mount with relatime/noatime. Every file under the folder counts
 * (DiskCache entries, native shared objects, anything a later kind of entry adds), so the cap holds
 * whatever writes there. Scanning a large folder on every write would cost more than the write, so
 * each process scans a folder once (at its first write there), then adds the bytes it writes to
 * that total; when the total passes the cap it rescans (other processes may have written too) and
 * deletes the least recently used files until the folder is at 90% of the cap, so the next scan is
 * a tenth of the cap's worth of writes away. The file just written is never the one evicted.
 *
 * Files whose names start with '.' are writes in progress (temp files, compiler scratch folders):
 * they count towards the bytes but are removed only once an hour old (left by a crashed process).
 * A CACHEDIR.TAG (bford.info/cachedir) marks the folder, so backup tools skip it and `clear` knows
 * that it deletes a Kiln cache and not a folder that KILN_CACHE_DIR points at by mistake.
 */
import { fs, path } from '../../platform/index.js';
import type { Dirent } from 'node:fs';
import { getOption } from '../config.js';
import { runtimeLog } from '../notes.js';

export const CACHEDIR_TAG = 'CACHEDIR.TAG';
const TAG_TEXT = 'Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by Kiln (npm package kilnjs).\n# See https://bford.info/cachedir/ ; `kiln cache clear` empties this folder.\n';

/** Temp files older than this are debris of a crashed writer and may be evicted. */
const STALE_TEMP_MS = 60 * 60 * 1000;
/** After an eviction the folder holds at most this fraction of the cap. */
const LOW_WATER = 0.9;

export interface CacheFile {
  readonly path: string;
  readonly bytes: number;
  readonly mtimeMs: number;
  /** A write in progress (a name starting with '.', or inside such a folder). */
  readonly temp: boolean;
}

export interface CacheUsage {
  /** Files other than writes in progress and the tag. */
  readonly entries: number;
  /** Bytes of every file under the folder. */
  readonly bytes: number;
}

/** Every file under `dir` except the tag (a missing folder has none). */
export function scanCache(dir: string): CacheFile[] {
  const out: CacheFile[] = [];
  const walk = (d: string, temp: boolean, top: boolean): void => {
    let items: Dirent[];
    try {
      items = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return; // gone (another process cleared it) or unreadable: nothing to count
    }
    for (const e of items) {
      const p = path.join(d, e.name);
      const t = temp || e.name.startsWith('.');
      if (e.isDirectory()) walk(p, t, false);
      else if (e.isFile() && !(top && e.name === CACHEDIR_TAG)) {
        try {
          const st = fs.statSync(p);
          out.push({ path: p, bytes: st.size, mtimeMs: st.mtimeMs, temp: t });
        } catch {
          // removed between readdir and stat
        }
      }
    }
  };
  walk(dir, false, true);
  return out;
}

export function cacheUsage(dir: string): CacheUsage {
  const files = scanCache(dir);
  return { entries: files.filter((f) => !f.temp).length, bytes: files.reduce((s, f) => s + f.bytes, 0) };
}

/** The cap in bytes from KILN_CACHE_MAX_MB (MiB), or undefined for no cap (0). */
export function cacheCapBytes(): number | undefined {
  const mb = getOption('KILN_CACHE_MAX_MB');
  return mb === 0 ? undefined : Math.floor(mb * 1024 * 1024);
}

/** Marks `file` as just used (a cache hit), so eviction takes it last. */
export function touchEntry(file: string): void {
  const now = new Date();
  try {
    fs.utimesSync(file, now, now);
  } catch {
    // read-only cache or already evicted by another process: recency is a hint, not a contract
  }
}

/** Writes the CACHEDIR.TAG into `dir` if it is not there (best effort). */
export function ensureCacheTag(dir: string): void {
  const tag = path.join(dir, CACHEDIR_TAG);
  if (fs.existsSync(tag)) return;
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(tag, TAG_TEXT, { flag: 'wx' });
  } catch {
    // another process wrote it first, or the folder is read-only
  }
}

/**
 * Deletes the least recently used files of `dir` until at most `targetBytes` remain, never a path
 * in `keep` and never a fresh write in progress. Returns the removed files, oldest first.
 */
export function evictLeastRecentlyUsed(dir: string, targetBytes: number, keep: ReadonlySet<string> = new Set(), now = Date.now()): { removed: CacheFile[]; bytes: number } {
  const files = scanCache(dir);
  let bytes = files.reduce((s, f) => s + f.bytes, 0);
  const removed: CacheFile[] = [];
  // Ties (one mtime tick) fall back to the path, so the order never depends on readdir's.
  const candidates = files
    .filter((f) => !keep.has(f.path) && (!f.temp || now - f.mtimeMs > STALE_TEMP_MS))
    .sort((a, b) => a.mtimeMs - b.mtimeMs || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const f of candidates) {
    if (bytes <= targetBytes) break;
    try {
      fs.rmSync(f.path, { force: true });
    } catch {
      continue; // not ours to delete (permissions): it keeps counting
    }
    bytes -= f.bytes;
    removed.push(f);
  }
  return { removed, bytes };
}

/** Per folder: this process's estimate of the bytes under it (see the header). */
const estimates = new Map<string, number>();

/**
 * Accounts for `bytes` just written to `file` under `dir` and, when that takes the folder over the
 * cap, evicts down to 90% of it. Returns the files evicted (usually none).
 */
export function recordCacheWrite(dir: string, file: string, bytes: number, cap: number | undefined = cacheCapBytes()): CacheFile[] {
  let total = estimates.get(dir);
  if (total === undefined) {
    ensureCacheTag(dir);
    total = cacheUsage(dir).bytes; // includes `file`
  } else {
    total += bytes;
  }
  if (cap === undefined || total <= cap) {
    estimates.set(dir, total);
    return [];
  }
  const r = evictLeastRecentlyUsed(dir, Math.floor(cap * LOW_WATER), new Set([file]));
  estimates.set(dir, r.bytes);
  runtimeLog('cache', () => `${dir} passed its cap of ${cap} bytes: evicted ${r.removed.length} least recently used file(s), ${r.bytes} bytes remain`);
  return r.removed;
}

/** Forgets the per-process estimates (tests that change a folder behind the cache's back). */
export function resetCacheEstimates(): void {
  estimates.clear();
}

/**
 * Deletes everything under `dir` but the tag. Refuses a non-empty folder without the tag: it may
 * be a folder KILN_CACHE_DIR names by mistake, and its files are not Kiln's to delete.
 */
export function clearCache(dir: string): CacheUsage {
  let items: string[];
  try {
    items = fs.readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { entries: 0, bytes: 0 };
    throw e;
  }
  if (items.length > 0 && !items.includes(CACHEDIR_TAG)) {
    throw new Error(`${dir} has no ${CACHEDIR_TAG}, so it may not be a Kiln cache; not clearing it (delete it by hand if it is)`);
  }
  const before = cacheUsage(dir);
  for (const name of items) if (name !== CACHEDIR_TAG) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  estimates.delete(dir);
  return before;
}
