/**
 * An on-disk JSON cache shared by every kiln process of a user, with an in-memory layer in front.
 *
 * Layout: `<dir>/<namespace>/<sha256(key)[0..2]>/<sha256(key)>.json`. Each file is one header line
 * `{"magic":"kiln-cache","version":1,"key":...,"checksum":sha256(body)}` followed by the JSON body.
 * Writes go to a unique temp file in the same directory, are fsync'ed and renamed over the entry, so
 * readers see the old entry or the new one, never a mix. Anything that fails to verify (truncated,
 * bad JSON, checksum mismatch, another key's entry, foreign format) is deleted and counts as a miss.
 * A disk hit refreshes the entry's mtime and a write is accounted against the folder's size cap
 * (budget.ts: least recently used files go first); the folder itself is resolved in location.ts.
 */
import { createHash, nodeCrypto, fs, path, workerThreads } from '../../platform/index.js';
import { recordCacheWrite, touchEntry } from './budget.js';
import { cacheDir } from './location.js';

export { cacheDir };

export const CACHE_MAGIC = 'kiln-cache';
export const CACHE_FORMAT_VERSION = 1;

export interface CacheHeader {
  magic: typeof CACHE_MAGIC;
  version: typeof CACHE_FORMAT_VERSION;
  key: string;
  checksum: string;
}

export interface DiskCacheStats {
  /** get() calls answered (from memory or disk). */
  hits: number;
  /** Of the hits, those served by the in-memory layer. */
  memoryHits: number;
  /** get() calls with no valid entry (absent or corrupt). */
  misses: number;
  /** Entries found corrupt and deleted. */
  corrupt: number;
  /** Entries written to disk. */
  writes: number;
  /** put() calls whose disk write failed (the value stays in memory). */
  writeErrors: number;
}

export interface DiskCacheOptions {
  /** Root directory (default: `cacheDir()`). */
  dir?: string;
  /** Entries kept in the in-memory layer (default 1024; 0 disables it). */
  memoryEntries?: number;
}

const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

function checkNamespace(ns: string): void {
  if (typeof ns !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(ns)) {
    throw new TypeError(`DiskCache: namespace must be 1-64 characters [A-Za-z0-9_.-] starting with a letter or digit, got ${JSON.stringify(ns)}`);
  }
}

function checkKey(key: string): void {
  if (typeof key !== 'string' || key === '') throw new TypeError(`DiskCache: key must be a non-empty string, got ${JSON.stringify(key)}`);
}

/** Encodes an entry file; exported for tests that forge entries. */
export function encodeEntry(key: string, body: string): string {
  const header: CacheHeader = { magic: CACHE_MAGIC, version: CACHE_FORMAT_VERSION, key, checksum: sha256(body) };
  return `${JSON.stringify(header)}\n${body}`;
}

type Decoded = { ok: true; body: string; value: unknown } | { ok: false; why: string };

function decodeEntry(key: string, text: string): Decoded {
  const nl = text.indexOf('\n');
  if (nl < 0) return { ok: false, why: 'no header line' };
  let header: Partial<CacheHeader>;
  try {
    header = JSON.parse(text.slice(0, nl)) as Partial<CacheHeader>;
  } catch {
    return { ok: false, why: 'header is not JSON' };
  }
  if (typeof header !== 'object' || header === null || header.magic !== CACHE_MAGIC) return { ok: false, why: 'bad magic' };
  if (header.version !== CACHE_FORMAT_VERSION) return { ok: false, why: `format version ${String(header.version)}` };
  if (header.key !== key) return { ok: false, why: 'entry belongs to another key' };
  const body = text.slice(nl + 1);
  if (header.checksum !== sha256(body)) return { ok: false, why: 'checksum mismatch' };
  try {
    return { ok: true, body, value: JSON.parse(body) as unknown };
  } catch {
    return { ok: false, why: 'body is not JSON' };
  }
}

export class DiskCache {
  readonly dir: string;
  private readonly memoryEntries: number;
  /** namespace \0 key -> JSON body (parsed on every get, so callers can't mutate cached values). */
  private readonly memory = new Map<string, string>();
  private readonly counters: DiskCacheStats = { hits: 0, memoryHits: 0, misses: 0, corrupt: 0, writes: 0, writeErrors: 0 };
  /** The last problem seen (corrupt entry or failed write), for diagnostics. */
  lastProblem: string | undefined;

  constructor(options: DiskCacheOptions = {}) {
    this.dir = path.resolve(options.dir ?? cacheDir());
    const n = options.memoryEntries ?? 1024;
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`DiskCache: memoryEntries must be a non-negative integer, got ${n}`);
    this.memoryEntries = n;
  }

  /** The file that holds an entry. */
  entryPath(namespace: string, key: string): string {
    checkNamespace(namespace);
    checkKey(key);
    const h = sha256(key);
    return path.join(this.dir, namespace, h.slice(0, 2), `${h}.json`);
  }

  get(namespace: string, key: string): unknown {
    const file = this.entryPath(namespace, key);
    const mk = `${namespace}\0${key}`;
    const mem = this.memory.get(mk);
    if (mem !== undefined) {
      this.memory.delete(mk); // refresh LRU position
      this.memory.set(mk, mem);
      this.counters.hits++;
      this.counters.memoryHits++;
      return JSON.parse(mem) as unknown;
    }
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') this.lastProblem = `read ${file}: ${(e as Error).message}`;
      this.counters.misses++;
      return undefined;
    }
    const d = decodeEntry(key, text);
    if (!d.ok) {
      this.counters.corrupt++;
      this.counters.misses++;
      this.lastProblem = `corrupt cache entry ${file} (${d.why}); deleted`;
      try {
        fs.unlinkSync(file);
      } catch {
        // already gone (another process cleaned it up) or read-only: a miss either way
      }
      return undefined;
    }
    this.counters.hits++;
    touchEntry(file);
    this.remember(mk, d.body);
    return d.value;
  }

  /** Stores a JSON value. Throws for values JSON cannot represent; a failed disk write is counted, not thrown. */
  put(namespace: string, key: string, value: unknown): boolean {
    const file = this.entryPath(namespace, key);
    const body = JSON.stringify(value);
    if (body === undefined) throw new TypeError(`DiskCache.put(${namespace}): value is not JSON-serialisable (${typeof value})`);
    this.remember(`${namespace}\0${key}`, body);
    const text = encodeEntry(key, body);
    const dir = path.dirname(file);
    const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${workerThreads.threadId}.${nodeCrypto.randomBytes(6).toString('hex')}.tmp`);
    try {
      fs.mkdirSync(dir, { recursive: true });
      const fd = fs.openSync(tmp, 'wx', 0o644);
      try {
        fs.writeSync(fd, text);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(tmp, file);
    } catch (e) {
      this.counters.writeErrors++;
      this.lastProblem = `write ${file}: ${(e as Error).message}`;
      try {
        fs.unlinkSync(tmp);
      } catch {
        // never created
      }
      return false;
    }
    this.counters.writes++;
    recordCacheWrite(this.dir, file, Buffer.byteLength(text));
    return true;
  }

  /** Removes one entry from memory and disk. */
  delete(namespace: string, key: string): void {
    const file = this.entryPath(namespace, key);
    this.memory.delete(`${namespace}\0${key}`);
    fs.rmSync(file, { force: true });
  }

  /** Forgets the in-memory layer (the disk stays). */
  clearMemory(): void {
    this.memory.clear();
  }

  stats(): DiskCacheStats {
    return { ...this.counters };
  }

  private remember(mk: string, body: string): void {
    if (this.memoryEntries === 0) return;
    this.memory.delete(mk);
    this.memory.set(mk, body);
    while (this.memory.size > this.memoryEntries) this.memory.delete(this.memory.keys().next().value as string);
  }
}

const shared = new Map<string, DiskCache>();

/** The process-wide cache for `cacheDir()` (re-evaluated each call, so changing KILN_CACHE_DIR takes effect). */
export function getDiskCache(): DiskCache {
  const dir = cacheDir();
  let c = shared.get(dir);
  if (!c) shared.set(dir, (c = new DiskCache({ dir })));
  return c;
}
