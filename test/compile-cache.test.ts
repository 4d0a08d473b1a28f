import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DiskCache, cacheDir, cacheKey, defaultCacheDir, canonicalJson, encodeEntry, getDiskCache, kilnVersion } from '../src/runtime/cache/index.js';

const CHILD = fileURLToPath(new URL('./helpers/compile-cache-child.js', import.meta.url));
const tmpDirs: string[] = [];
function tmpCache(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cache-test-'));
  tmpDirs.push(d);
  return d;
}
after(() => {
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

test('cacheKey: canonical (key order does not matter), sensitive to values and types, includes the version', () => {
  const pkg = JSON.parse(fs.readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string };
  assert.equal(kilnVersion(), pkg.version);
  const a = cacheKey(['matmul', { m: 4, n: 8, dtype: 'float32', nested: { b: 1, a: 2 } }]);
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.equal(a, cacheKey(['matmul', { nested: { a: 2, b: 1 }, dtype: 'float32', n: 8, m: 4 }]));
  assert.notEqual(a, cacheKey(['matmul', { m: 4, n: 9, dtype: 'float32', nested: { b: 1, a: 2 } }]));
  assert.notEqual(cacheKey([1]), cacheKey(['1']));
  assert.notEqual(cacheKey([NaN]), cacheKey([null]));
  assert.notEqual(cacheKey([1n]), cacheKey([1]));
  assert.notEqual(cacheKey([0]), cacheKey([-0]));
  assert.notEqual(cacheKey([['a', 'b']]), cacheKey(['a', 'b']));
  assert.equal(canonicalJson({ b: [1, 'x'], a: true }), '{"a":true,"b":[1,"x"]}');
  assert.notEqual(cacheKey([new Float32Array([1, 2])]), cacheKey([new Float32Array([1, 3])]));
  const cyc: Record<string, unknown> = {};
  cyc.self = cyc;
  assert.throws(() => cacheKey([cyc]), /cyclic value at \$\.parts\[0\]\.self/);
  assert.throws(() => cacheKey([() => 1]), /cannot encode a function/);
  assert.throws(() => cacheKey([new Map()]), /cannot encode a Map instance/);
});

test("KILN_CACHE_DIR chooses the directory; the default is the user's cache folder (cache-budget.test.ts has the cases)", () => {
  const saved = process.env.KILN_CACHE_DIR;
  try {
    delete process.env.KILN_CACHE_DIR;
    assert.equal(cacheDir(), defaultCacheDir().dir);
    assert.equal(path.basename(cacheDir()), 'kiln');
    const d = tmpCache();
    process.env.KILN_CACHE_DIR = d;
    assert.equal(cacheDir(), d);
    assert.equal(getDiskCache().dir, d);
    assert.equal(getDiskCache(), getDiskCache(), 'one shared instance per directory');
  } finally {
    if (saved === undefined) delete process.env.KILN_CACHE_DIR;
    else process.env.KILN_CACHE_DIR = saved;
  }
});

test('round trip through memory and disk, with stats', () => {
  const dir = tmpCache();
  const c = new DiskCache({ dir });
  const key = cacheKey(['k']);
  assert.equal(c.get('kernels', key), undefined);
  const value = { source: 'return x;', timings: [1.5, 2], nested: { ok: true, none: null } };
  assert.equal(c.put('kernels', key, value), true);
  const got = c.get('kernels', key) as typeof value;
  assert.deepEqual(got, value);
  got.nested.ok = false;
  assert.deepEqual(c.get('kernels', key), value, 'mutating a returned value does not change the cache');
  assert.deepEqual(c.stats(), { hits: 2, memoryHits: 2, misses: 1, corrupt: 0, writes: 1, writeErrors: 0 });

  const fresh = new DiskCache({ dir });
  assert.deepEqual(fresh.get('kernels', key), value, 'another instance reads it from disk');
  assert.deepEqual(fresh.stats(), { hits: 1, memoryHits: 0, misses: 0, corrupt: 0, writes: 0, writeErrors: 0 });
  assert.equal(fresh.get('other-ns', key), undefined, 'namespaces are separate');

  const file = c.entryPath('kernels', key);
  const [header, body] = fs.readFileSync(file, 'utf8').split('\n') as [string, string];
  const h = JSON.parse(header) as Record<string, unknown>;
  assert.equal(h.magic, 'kiln-cache');
  assert.equal(h.version, 1);
  assert.equal(h.key, key);
  assert.deepEqual(JSON.parse(body), value);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), [path.basename(file)], 'no temp files left behind');

  c.delete('kernels', key);
  assert.equal(c.get('kernels', key), undefined);
  assert.throws(() => c.put('kernels', key, undefined), /not JSON-serialisable/);
  assert.throws(() => c.get('../escape', key), /namespace must be/);
});

test('a cache shared between two processes: the child writes, the parent hits', () => {
  const dir = tmpCache();
  const r = spawnSync(process.execPath, [CHILD, 'shared', 'the-key', 'z', '1'], { encoding: 'utf8', env: { ...process.env, KILN_CACHE_DIR: dir } });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { dir: string; stats: { writes: number } };
  assert.equal(out.dir, dir);
  assert.equal(out.stats.writes, 1);
  const c = new DiskCache({ dir });
  assert.deepEqual(c.get('shared', 'the-key'), { tag: 'z', i: 0, blob: 'z'.repeat(2000) });
  assert.equal(c.stats().hits, 1);
});

test('corrupt entries are detected, deleted, reported as misses and rebuilt', () => {
  const dir = tmpCache();
  const c = new DiskCache({ dir, memoryEntries: 0 });
  const value = { a: [1, 2, 3], s: 'hello world' };
  const good = encodeEntry('k', JSON.stringify(value));
  const cases: [string, (file: string) => void][] = [
    ['truncated', (f) => fs.writeFileSync(f, good.slice(0, good.length - 5))],
    ['truncated inside the header', (f) => fs.writeFileSync(f, good.slice(0, 20))],
    ['flipped byte in the body', (f) => {
      const b = fs.readFileSync(f);
      const i = b.indexOf('hello');
      b[i] = 'j'.charCodeAt(0);
      fs.writeFileSync(f, b);
    }],
    ['garbage', (f) => fs.writeFileSync(f, Buffer.from([0xff, 0x00, 0x13, 0x37, 0x0a, 0x80]))],
    ['empty file', (f) => fs.writeFileSync(f, '')],
    ['another key\'s entry', (f) => fs.writeFileSync(f, encodeEntry('other', JSON.stringify(value)))],
    ['valid checksum, body not JSON', (f) => fs.writeFileSync(f, encodeEntry('k', '{"a":'))],
    ['unknown format version', (f) => fs.writeFileSync(f, good.replace('"version":1', '"version":2'))],
  ];
  let corrupt = 0;
  for (const [what, damage] of cases) {
    assert.equal(c.put('ns', 'k', value), true);
    const file = c.entryPath('ns', 'k');
    assert.equal(fs.readFileSync(file, 'utf8'), good, 'the writer produces the canonical entry');
    damage(file);
    assert.equal(c.get('ns', 'k'), undefined, `${what}: reported as a miss`);
    assert.equal(c.stats().corrupt, ++corrupt, `${what}: counted as corrupt`);
    assert.match(c.lastProblem ?? '', /corrupt cache entry/);
    assert.equal(fs.existsSync(file), false, `${what}: the bad file is deleted`);
    assert.equal(c.get('ns', 'k'), undefined, `${what}: then a plain miss`);
    assert.equal(c.stats().corrupt, corrupt);
    c.put('ns', 'k', value);
    assert.deepEqual(c.get('ns', 'k'), value, `${what}: rebuilt`);
  }
});

test('concurrent writers of the same key (4 processes) leave a valid entry', async () => {
  const dir = tmpCache();
  const tags = ['a', 'b', 'c', 'd'];
  const runs = tags.map(
    (tag) =>
      new Promise<{ badReads: number; stats: { writes: number; corrupt: number } }>((resolve, reject) => {
        const p = spawn(process.execPath, [CHILD, 'race', 'same-key', tag, '40'], { env: { ...process.env, KILN_CACHE_DIR: dir } });
        let out = '';
        let err = '';
        p.stdout.on('data', (d: Buffer) => (out += d.toString()));
        p.stderr.on('data', (d: Buffer) => (err += d.toString()));
        p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as { badReads: number; stats: { writes: number; corrupt: number } }) : reject(new Error(err))));
      }),
  );
  const results = await Promise.all(runs);
  for (const r of results) {
    assert.equal(r.stats.writes, 40);
    assert.equal(r.badReads, 0, 'readers never saw a mixed entry');
    assert.equal(r.stats.corrupt, 0, 'readers never saw a partial entry');
  }
  const c = new DiskCache({ dir });
  const v = c.get('race', 'same-key') as { tag: string; i: number; blob: string };
  assert.ok(tags.includes(v.tag));
  assert.equal(v.blob, v.tag.repeat(2000));
  assert.equal(c.stats().corrupt, 0);
  const entryDir = path.dirname(c.entryPath('race', 'same-key'));
  assert.deepEqual(fs.readdirSync(entryDir).filter((f) => f.endsWith('.tmp')), [], 'no temp files left behind');
});

test('a write that fails is counted and does not throw', () => {
  const dir = tmpCache();
  const blocker = path.join(dir, 'file-not-dir');
  fs.writeFileSync(blocker, 'x');
  const c = new DiskCache({ dir: blocker });
  assert.equal(c.put('ns', 'k', 1), false);
  assert.equal(c.stats().writeErrors, 1);
  assert.match(c.lastProblem ?? '', /write/);
  assert.equal(c.get('ns', 'k'), 1, 'still served from memory');
});
