/**
 * Kernels of a compiled function really are compiled in the worker pool (checked in the pool's
 * per-thread counters), a file run alone included: the pool is created lazily by the first compile.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { threadId } from 'node:worker_threads';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as kiln from '../src/index.js';

// A fresh kernel cache, so the kernels are not already known from an earlier run.
process.env.KILN_CACHE_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-workers-'));
import { compilePoolStats, shutdownCompilePool } from '../src/runtime/pool/index.js';

test('kiln.compile compiles its kernels in worker threads, in parallel batches', async () => {
  const before = compilePoolStats();
  const f = (x: kiln.Tensor, y: kiln.Tensor) => ({
    a: kiln.softmax(kiln.mul(x, 2), -1),
    b: kiln.sum(kiln.mul(y, y), -1),
    c: kiln.sigmoid(kiln.matmul(x, kiln.transpose(y, 0, 1))),
  });
  const cf = kiln.compile(f);
  const x = kiln.randn([4, 8]);
  const y = kiln.randn([4, 8]);
  const got = kiln.noGrad(() => cf(x, y));
  const want = kiln.noGrad(() => f(x, y));
  for (const k of ['a', 'b', 'c'] as const) {
    const d = kiln.amax(kiln.abs(kiln.sub(got[k], want[k]))).item() as number;
    assert.ok(d <= 1e-5, `${k}: max |compiled - eager| = ${d}`);
  }
  const after = compilePoolStats();
  const ran = after.tasksCompleted - before.tasksCompleted;
  assert.ok(ran >= 3, `kernels compiled in the pool: ${ran}`);
  const threads = Object.keys(after.tasksPerWorker).map(Number);
  assert.ok(threads.some((t) => t !== threadId), `a worker thread (not the main thread ${threadId}) compiled kernels: ${JSON.stringify(after.tasksPerWorker)}`);
  assert.equal(after.workerCrashes, 0);
  await shutdownCompilePool();
});
