/**
 * Automatic dynamic shapes and the disk cache (issue #18 item 4d), on the tiny Qwen3 forward run
 * at several sequence lengths in child processes (test/helpers/compile-dynamic-child.ts), each
 * starting cold: after the first change the sequence dim is symbolic (one recompile, then no
 * recompiles), every length gives eager's logits, a second process with the same KILN_CACHE_DIR
 * loads every program from disk, and the sizes derived from T (view/reshape sizes, the RoPE
 * table's slice) are symbolic sizes (src/compile/symbolic.ts), so one program serves every length.
 * The disk test runs with the default passes (horizontally fused linears' concatenated weights are
 * lifted inputs the program store takes from the fresh trace) and without horizontal fusion.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

interface Report {
  counters: { compiles: number; traces: number; recompiles: number; graphBreaks: number; eagerCalls: number; diskHits: number; diskMisses: number };
  symbolic: string[];
  runs: { len: number; maxDiff: number; sum: number }[];
}

const child = fileURLToPath(new URL('./helpers/compile-dynamic-child.js', import.meta.url));
const LENGTHS = ['5', '7', '9', '12'];

function run(dir: string, lengths: readonly string[], env: Record<string, string> = {}): Report {
  const r = spawnSync(process.execPath, [child, ...lengths], { encoding: 'utf8', env: { ...process.env, ...env, KILN_CACHE_DIR: dir } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Report;
}

function withDir(f: (dir: string) => void): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-dyn-disk-'));
  try {
    f(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('tiny Qwen3 at 4 sequence lengths: the length becomes symbolic after one change, and a second process loads every program from disk', () => {
  // With the default passes (horizontal fusion's concatenated weights are lifted inputs too) and without.
  for (const env of [{}, { KILN_HORIZONTAL_FUSION: '0' }] as Record<string, string>[]) withDir((dir) => {
    const cold = run(dir, LENGTHS, env);
    for (const r of cold.runs) assert.ok(r.maxDiff <= 1e-4, `length ${r.len}: max |compiled - eager| ${r.maxDiff}`);
    assert.deepEqual(cold.symbolic, ['arg0#1'], 'the sequence dim became symbolic');
    assert.equal(cold.counters.recompiles, 1, 'one recompile (the first change); later lengths are not recompiles');
    assert.equal(cold.counters.graphBreaks + cold.counters.eagerCalls, 0);
    assert.ok(cold.counters.compiles >= 1 && cold.counters.diskMisses === cold.counters.compiles, 'every program was built and stored');
    assert.equal(cold.counters.diskHits, 0);
    const warm = run(dir, LENGTHS, env);
    assert.deepEqual([warm.counters.diskHits, warm.counters.diskMisses], [cold.counters.compiles, 0], 'the second process loaded every program');
    warm.runs.forEach((r, i) => assert.equal(r.sum, cold.runs[i]!.sum, `length ${r.len}: the same logits`));
  });
});

test('tiny Qwen3 at 3 sequence lengths: at most 2 compiles, stored on disk with the default passes', () => {
  withDir((dir) => {
    const cold = run(dir, ['5', '7', '9']);
    assert.ok(cold.counters.compiles <= 2, `${cold.counters.compiles} compiles`);
    assert.equal(cold.counters.diskMisses, cold.counters.compiles, 'every program was stored');
    for (const r of cold.runs) assert.ok(r.maxDiff <= 1e-4, `length ${r.len}: max |compiled - eager| ${r.maxDiff}`);
    // A second process: the static and the symbolic program from disk; lengths never seen (11),
    // and 2 (the smallest symbolic size), run the symbolic program; 1 is specialised (its own program).
    const warm = run(dir, ['5', '7', '9', '11', '2', '1']);
    assert.deepEqual([warm.counters.diskHits, warm.counters.compiles], [cold.counters.compiles, cold.counters.compiles + 1], 'one new program: length 1');
    for (const r of warm.runs) assert.ok(r.maxDiff <= 1e-4, `length ${r.len}: max |compiled - eager| ${r.maxDiff}`);
    warm.runs.slice(0, 3).forEach((r, i) => assert.equal(r.sum, cold.runs[i]!.sum, `length ${r.len}: the same logits`));
  });
});
