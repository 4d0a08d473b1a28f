/**
 * The persistent, bounded cache: the default folder (XDG_CACHE_HOME, else ~/.cache/kiln, with
 * KILN_CACHE_DIR winning), resolved in a child process with its own environment; the size cap's
 * least-recently-used eviction through DiskCache with a tiny cap in a temp folder (a hit moves an
 * entry to the back of the queue, the entry just written survives); the tag and `clearCache`'s
 * refusal of a folder that is not a Kiln cache.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CACHEDIR_TAG, DiskCache, cacheUsage, clearCache, defaultCacheDir, evictLeastRecentlyUsed, resetCacheEstimates } from '../src/runtime/cache/index.js';
import { setOption } from '../src/runtime/config.js';

const LOCATION = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src/runtime/cache/location.js');
const tmpDirs: string[] = [];
const tmp = (): string => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-budget-'));
  tmpDirs.push(d);
  return d;
};
after(() => {
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** cacheDir() as a child process with exactly `env` (plus PATH) sees it. */
function childCacheDir(env: Record<string, string>): string {
  const code = `import(${JSON.stringify(LOCATION)}).then((m) => process.stdout.write(m.cacheDir()))`;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', ...env } });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('default cache folder: XDG_CACHE_HOME/kiln, else HOME/.cache/kiln; KILN_CACHE_DIR wins', () => {
  const home = tmp();
  const xdg = tmp();
  assert.equal(childCacheDir({ HOME: home }), path.join(home, '.cache', 'kiln'));
  assert.equal(childCacheDir({ HOME: home, XDG_CACHE_HOME: xdg }), path.join(xdg, 'kiln'));
  // The XDG spec ignores a relative XDG_CACHE_HOME.
  assert.equal(childCacheDir({ HOME: home, XDG_CACHE_HOME: 'relative/dir' }), path.join(home, '.cache', 'kiln'));
  assert.equal(childCacheDir({ HOME: home, XDG_CACHE_HOME: xdg, KILN_CACHE_DIR: path.join(home, 'mine') }), path.join(home, 'mine'));
  // The pure resolution, including the platform branches a Linux test machine cannot reach.
  assert.deepEqual(defaultCacheDir({ LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'C:\\Users\\u', 'win32'), { dir: 'C:\\Users\\u\\AppData\\Local\\kiln\\cache', source: 'LOCALAPPDATA' });
  assert.equal(defaultCacheDir({}, null, 'linux').source, 'tmpdir');
});

/** Sets a file's mtime (and atime) to `secondsAgo` before now: a deterministic use order. */
function age(file: string, secondsAgo: number): void {
  const t = new Date(Date.now() - secondsAgo * 1000);
  fs.utimesSync(file, t, t);
}

test('size cap: past it, the least recently used entries go first; a hit refreshes an entry', () => {
  const dir = tmp();
  resetCacheEstimates();
  const cache = new DiskCache({ dir, memoryEntries: 0 });
  const body = 'x'.repeat(1000);
  for (const k of ['a', 'b', 'c']) assert.equal(cache.put('ns', k, body), true);
  const entry = fs.statSync(cache.entryPath('ns', 'a')).size;
  assert.equal(cacheUsage(dir).entries, 3);
  assert.ok(fs.existsSync(path.join(dir, CACHEDIR_TAG)), 'the first write tags the folder');
  // Use order a (oldest) < b < c, then a hit on a makes b the least recently used.
  age(cache.entryPath('ns', 'a'), 300);
  age(cache.entryPath('ns', 'b'), 200);
  age(cache.entryPath('ns', 'c'), 100);
  assert.deepEqual(cache.get('ns', 'a'), body);
  // Cap: three and a half entries. A fourth write passes it; eviction goes down to 90% of the cap
  // (3.15 entries), so exactly one entry, b, is removed.
  setOption('KILN_CACHE_MAX_MB', (3.5 * entry) / (1024 * 1024));
  try {
    cache.put('ns', 'd', body);
    const present = (k: string): boolean => fs.existsSync(cache.entryPath('ns', k));
    assert.deepEqual(['a', 'b', 'c', 'd'].map(present), [true, false, true, true]);
    assert.equal(cache.get('ns', 'b'), undefined, 'an evicted entry is a miss');
    // Next in line is c (100 s old); a and d were used just now.
    cache.put('ns', 'e', body);
    assert.deepEqual(['a', 'c', 'd', 'e'].map(present), [true, false, true, true]);
    assert.equal(cacheUsage(dir).entries, 3);
  } finally {
    setOption('KILN_CACHE_MAX_MB', undefined);
    resetCacheEstimates();
  }
});

test('eviction keeps the file just written and fresh writes in progress, even under a cap smaller than one entry', () => {
  const dir = tmp();
  fs.mkdirSync(path.join(dir, 'ns'), { recursive: true });
  const old = path.join(dir, 'ns', 'old.json');
  const fresh = path.join(dir, 'ns', 'fresh.json');
  const inProgress = path.join(dir, 'ns', '.fresh.json.123.tmp');
  const debris = path.join(dir, 'ns', '.old.json.456.tmp');
  for (const f of [old, fresh, inProgress, debris]) fs.writeFileSync(f, 'y'.repeat(100));
  age(old, 50);
  age(debris, 2 * 3600); // left by a crashed writer two hours ago
  const r = evictLeastRecentlyUsed(dir, 0, new Set([fresh]));
  assert.deepEqual(r.removed.map((f) => path.basename(f.path)), ['.old.json.456.tmp', 'old.json']);
  assert.equal(r.bytes, 200);
  assert.ok(fs.existsSync(fresh) && fs.existsSync(inProgress));
});

test('clearCache empties a tagged folder and refuses an untagged one', () => {
  const dir = tmp();
  resetCacheEstimates();
  const cache = new DiskCache({ dir });
  cache.put('ns', 'k', [1, 2, 3]);
  const u = clearCache(dir);
  assert.equal(u.entries, 1);
  assert.deepEqual(fs.readdirSync(dir), [CACHEDIR_TAG]);
  const foreign = tmp();
  fs.writeFileSync(path.join(foreign, 'notes.txt'), 'mine');
  assert.throws(() => clearCache(foreign), /no CACHEDIR\.TAG.*not clearing/);
  assert.ok(fs.existsSync(path.join(foreign, 'notes.txt')));
  assert.deepEqual(clearCache(path.join(foreign, 'missing')), { entries: 0, bytes: 0 });
});
