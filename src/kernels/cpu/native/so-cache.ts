/**
 * Builds generated C into shared objects and caches them on disk.
 *
 * Key: sha256 of (source, toolchain fingerprint = compiler path + version + flags + CPU features).
 * Layout: `<cacheDir>/native-so/objects/<key>.so` holds the object; a DiskCache entry
 * (namespace 'native-so') records its sha256. A lookup re-hashes the file before it is loaded, so
 * a truncated or overwritten object is detected, deleted and rebuilt instead of being dlopen'ed.
 * Builds run as 'cc' tasks in the compile worker pool (in-process when KILN_COMPILE_WORKERS=0),
 * write to a unique temp name and are renamed into place: a concurrent process sees the old object
 * or the new one, and two processes building the same key both end up with identical files.
 * Objects count towards the cache's size cap and are evicted least recently used first like any
 * entry (runtime/cache/budget.ts); a record without its object, or the reverse, is a miss.
 */
import { createHash, fs, path } from '../../../platform/index.js';
import { nativeDiskCache } from './disk.js';
import { recordCacheWrite, touchEntry } from '../../../runtime/cache/budget.js';
import { runtimeLog, timeBuild, timeBuildAsync } from '../../../runtime/notes.js';
import { ccTask, type CcPayload, type CcResult } from '../../../runtime/pool/cc-task.js';
import { compileInPool, compileInPoolSync, compileWorkers, registerCompileTaskHandler } from '../../../runtime/pool/pool.js';
import { toolchainFingerprint, type Toolchain } from './toolchain.js';

registerCompileTaskHandler('cc', new URL('../../../runtime/pool/cc-task.js', import.meta.url), 'ccTask', (p) => ccTask(p as CcPayload));

/** A generated C file failed to compile; `message` holds the compiler's diagnostics. */
export class NativeCompileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NativeCompileError';
  }
}

export interface NativeCacheStats {
  hits: number;
  builds: number;
  /** Objects whose bytes did not match their recorded hash (deleted and rebuilt). */
  corrupt: number;
}

const stats: NativeCacheStats = { hits: 0, builds: 0, corrupt: 0 };

export function nativeCacheStats(): NativeCacheStats {
  return { ...stats };
}

interface Entry {
  file: string;
  sha256: string;
}

export function objectsDir(): string {
  return path.join(nativeDiskCache().dir, 'native-so', 'objects');
}

export function objectKey(source: string, tc: Toolchain): string {
  return createHash('sha256').update(toolchainFingerprint(tc)).update('\0').update(source).digest('hex');
}

function sha256File(file: string): string | undefined {
  try {
    return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  } catch {
    return undefined;
  }
}

/** The cached object for `key` if present and intact; deletes a corrupt one. */
function lookup(key: string): string | undefined {
  const disk = nativeDiskCache();
  const e = disk.get('native-so', key) as Entry | undefined;
  const file = path.join(objectsDir(), `${key}.so`);
  if (!e) return undefined;
  const h = sha256File(file);
  if (h !== undefined && h === e.sha256) {
    stats.hits++;
    runtimeLog('cache', () => `native object ${key.slice(0, 12)} from ${file}`);
    touchEntry(file); // recency for the cache's LRU eviction (the record's get touched its entry)
    return file;
  }
  if (h !== undefined) stats.corrupt++;
  disk.delete('native-so', key);
  fs.rmSync(file, { force: true });
  return undefined;
}

function payloadFor(key: string, name: string, source: string, tc: Toolchain): CcPayload {
  const tmp = path.join(objectsDir(), `.${key}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp.so`);
  return { compiler: tc.compiler, args: tc.flags, libs: tc.libs, source, name, outFile: tmp };
}

function install(key: string, r: CcResult): string {
  if (!r.ok) throw new NativeCompileError(r.error);
  const file = path.join(objectsDir(), `${key}.so`);
  fs.renameSync(r.outFile, file);
  recordCacheWrite(nativeDiskCache().dir, file, fs.statSync(file).size);
  nativeDiskCache().put('native-so', key, { file: path.basename(file), sha256: r.sha256 } satisfies Entry);
  stats.builds++;
  return file;
}

/** The cached, intact object for `source` under `tc`, if any (no build). */
export function lookupObject(source: string, tc: Toolchain): string | undefined {
  return lookup(objectKey(source, tc));
}

/** A build to run as a 'cc' task (for callers that batch many builds into one pool call). */
export function pendingBuild(name: string, source: string, tc: Toolchain): { key: string; payload: CcPayload } {
  const key = objectKey(source, tc);
  return { key, payload: payloadFor(key, name, source, tc) };
}

/** Moves a finished 'cc' build into the cache; throws NativeCompileError for a failed one. */
export function installBuilt(key: string, r: CcResult): string {
  return install(key, r);
}

/**
 * Runs 'cc' builds (in the pool, or in-process without workers), blocking, timed as one build of
 * `what` (a slow one prints a note on stderr: runtime/notes.ts).
 */
export function runBuildsSync(what: string, payloads: readonly CcPayload[]): CcResult[] {
  return timeBuild(what, () => (compileWorkers() === 0 ? payloads.map((p) => ccTask(p)) : compileInPoolSync<CcResult>(payloads.map((payload) => ({ kind: 'cc', payload })), 300_000)));
}

/** Path of the shared object built from `source`, compiling it (blocking) on a cache miss. */
export function buildSharedObjectSync(name: string, source: string, tc: Toolchain): string {
  const key = objectKey(source, tc);
  const hit = lookup(key);
  if (hit) return hit;
  const [r] = runBuildsSync(`native CPU kernels (${name})`, [payloadFor(key, name, source, tc)]);
  return install(key, r!);
}

/** As buildSharedObjectSync, but the compile runs in the pool without blocking the caller. */
export async function buildSharedObject(name: string, source: string, tc: Toolchain): Promise<string> {
  const key = objectKey(source, tc);
  const hit = lookup(key);
  if (hit) return hit;
  const payload = payloadFor(key, name, source, tc);
  const r = await timeBuildAsync(`native CPU kernels (${name})`, async () => (compileWorkers() === 0 ? ccTask(payload) : await compileInPool<CcResult>({ kind: 'cc', payload })));
  return install(key, r);
}
