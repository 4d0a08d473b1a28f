/**
 * The compile caches across processes: a second process with the same KILN_CACHE_DIR loads the
 * whole compiled program from disk (a disk hit) and needs no compile workers; corrupt entries
 * (program and kernels) are detected, discarded and rebuilt, with the same results each time.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

interface Report {
  sum: number;
  first: number;
  poolTasks: number;
  cache: { hits: number; misses: number; corrupt: number; writes: number };
  firstCallMs: number;
  counters: { compiles: number; diskHits: number; diskMisses: number };
}

const child = fileURLToPath(new URL('./helpers/compile-kernel-cache-child.js', import.meta.url));

function run(dir: string): Report {
  const r = spawnSync(process.execPath, [child], { encoding: 'utf8', env: { ...process.env, KILN_CACHE_DIR: dir } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Report;
}

function files(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name));
}

test('a second process loads the program from disk (no pool); corrupt entries are rebuilt', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cache-proc-'));
  try {
    const cold = run(dir);
    assert.ok(cold.poolTasks > 0, 'the first process compiled kernels in the pool');
    assert.ok(cold.cache.writes > 0);
    assert.deepEqual([cold.counters.diskHits, cold.counters.diskMisses], [0, 1], 'the first process built and stored the program');
    const warm = run(dir);
    assert.equal(warm.poolTasks, 0, 'the second process needed no compile workers');
    assert.deepEqual([warm.counters.diskHits, warm.counters.diskMisses], [1, 0], 'the second process loaded the program');
    assert.equal(warm.cache.hits, 1, 'one read: the program entry (its kernels are inside it)');
    assert.equal(warm.sum, cold.sum);
    assert.equal(warm.first, cold.first);
    for (const f of files(dir)) fs.writeFileSync(f, 'garbage, not a cache entry');
    const rebuilt = run(dir);
    assert.ok(rebuilt.cache.corrupt > 0, 'corrupt entries were detected');
    assert.ok(rebuilt.poolTasks > 0, 'and the kernels were compiled again');
    assert.deepEqual([rebuilt.counters.diskHits, rebuilt.counters.diskMisses], [0, 1], 'the corrupt program entry was a miss');
    assert.equal(rebuilt.first, cold.first);
    const again = run(dir);
    assert.equal(again.poolTasks, 0, 'the rebuilt entries are valid');
    assert.equal(again.counters.diskHits, 1);
    assert.equal(again.sum, cold.sum);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
