/**
 * Compiled webgpu programs across processes (issue #20): a child compiles and runs a fused
 * softmax kernel in mode 'max-autotune' against a fresh KILN_CACHE_DIR, twice. The first process
 * builds, renders WGSL, tunes (device timestamps) and stores the program; the second loads it
 * (a disk hit), renders nothing, re-tunes nothing (the stored decision), creates its pipeline
 * asynchronously from the stored source, and computes the same numbers. Counters, never timing.
 * Needs a webgpu adapter that computes (SwiftShader in CI); skips otherwise.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { webgpuCacheFn, webgpuCacheInputs } from './helpers/webgpu-cache-fn.js';
import * as kiln from '../src/index.js';

const skip = webgpuSkipReason();
const child = fileURLToPath(new URL('./helpers/webgpu-cache-child.js', import.meta.url));

interface Report {
  values: number[];
  counters: { diskHits: number; diskMisses: number };
  stats: { launches: number; tuned: number; tuneCacheHits: number; defaulted: number; seededDecisions: number };
  fused: { rendered: number; adopted: number };
  pipelines: { compiled: number; async: number };
}

function run(dir: string, mode: string, env: Record<string, string> = {}): { report: Report; stderr: string } {
  const r = spawnSync(process.execPath, [child, mode], { encoding: 'utf8', env: { ...process.env, KILN_CACHE_DIR: dir, ...env }, timeout: 300_000 });
  assert.equal(r.status, 0, `child failed (status ${r.status}):\n${r.stderr}`);
  return { report: JSON.parse(r.stdout.trim().split('\n').pop()!) as Report, stderr: r.stderr };
}

function closeToCpu(values: readonly number[]): void {
  const [x, b] = webgpuCacheInputs();
  const want = webgpuCacheFn(x, b).toFlatArray() as number[];
  assert.equal(values.length, want.length);
  for (let i = 0; i < want.length; i++) assert.ok(Math.abs(values[i]! - want[i]!) <= 1e-6 + 1e-5 * Math.abs(want[i]!), `element ${i}: ${values[i]} vs cpu ${want[i]}`);
}

test('a second process loads the compiled webgpu program from disk: no WGSL rendered, no re-tuning, async pipelines', { skip }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-wgcache-'));
  try {
    const timestamps = (kiln.getAccelerator('webgpu') as unknown as { deviceTimestamps: boolean }).deviceTimestamps;
    const cold = run(dir, 'max-autotune', { KILN_LOG: 'tune' }).report;
    assert.deepEqual([cold.counters.diskHits, cold.counters.diskMisses], [0, 1], 'the first process built and stored the program');
    assert.ok(cold.fused.rendered > 0 && cold.pipelines.compiled > 0, 'the first process rendered and compiled WGSL');
    if (timestamps) assert.equal(cold.stats.tuned, 1, 'the fused kernel was timed once (max-autotune, device timestamps), not again on the second call');
    else assert.equal(cold.stats.defaulted, 1, 'without timestamps the default config was kept');
    closeToCpu(cold.values);
    const stored = fs.readdirSync(path.join(dir, 'webgpu-programs'), { recursive: true }).filter((f) => String(f).endsWith('.json'));
    assert.equal(stored.length, 1, 'one program entry');

    const warm = run(dir, 'max-autotune').report;
    assert.deepEqual([warm.counters.diskHits, warm.counters.diskMisses], [1, 0], 'the second process loaded the program');
    assert.equal(warm.fused.rendered, 0, 'no WGSL was rendered');
    assert.equal(warm.pipelines.compiled, 0, 'no pipeline was compiled synchronously');
    assert.equal(warm.fused.adopted, 1, 'the stored source was adopted');
    assert.equal(warm.pipelines.async, 1, '... and its pipeline created asynchronously');
    assert.deepEqual([warm.stats.tuned, warm.stats.tuneCacheHits, warm.stats.defaulted, warm.stats.seededDecisions], [0, 0, 0, 1], 'the stored decision was used, nothing re-tuned');
    assert.equal(warm.stats.launches, 2, 'two calls, one kernel each');
    assert.deepEqual(warm.values, cold.values, 'the same numbers');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
