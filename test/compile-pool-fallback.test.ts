/**
 * A synchronous compile task whose worker fails (an error only the worker sees, a crash, a
 * timeout) runs again in-process when its kind has an in-process function, so kiln.compile calls
 * never fail because of a sick worker (issue #18 item 8: "compile task 'js-kernel' did not finish
 * in worker thread 1" once on a cold cache). Kinds without an in-process function still fail.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, beforeEach, test } from 'node:test';
import { threadId as mainThreadId } from 'node:worker_threads';

// A fresh kernel cache (the end-to-end test must really compile) and the JS kernel path.
process.env.KILN_CACHE_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-pool-fallback-'));
process.env.KILN_CPU_PATH = 'js';
const kiln = await import('../src/index.js');
const pool = await import('../src/runtime/pool/index.js');
const { compileInPoolSync, compilePoolStats, compileTaskHandler, jsKernelTask, registerCompileTaskHandler, setCompileWorkers, shutdownCompilePool, CompileTaskError } = pool;

const HANDLERS = new URL('./helpers/compile-pool-handlers.js', import.meta.url);
const here = (p: unknown) => ({ threadId: mainThreadId, payload: p });
registerCompileTaskHandler('test-fail-in-worker', HANDLERS, 'failInWorker', here);
registerCompileTaskHandler('test-exit-worker', HANDLERS, 'exitWorker', here);
registerCompileTaskHandler('test-hang', HANDLERS, 'hang', here);
registerCompileTaskHandler('test-hang-no-fallback', HANDLERS, 'hang');
registerCompileTaskHandler('test-fail-everywhere', HANDLERS, 'fail', () => {
  throw new RangeError('refused in-process too');
});

beforeEach(async () => {
  await shutdownCompilePool();
  setCompileWorkers(1);
});

after(async () => {
  await shutdownCompilePool();
  setCompileWorkers(undefined);
});

test('a task that fails in its worker is run again in-process', () => {
  const [r] = compileInPoolSync<{ threadId: number; payload: unknown }>([{ kind: 'test-fail-in-worker', payload: { n: 1 } }]);
  assert.deepEqual(r, { threadId: mainThreadId, payload: { n: 1 } });
  const s = compilePoolStats();
  assert.equal(s.inProcessRetries, 1);
  assert.equal(s.tasksFailed, 1, 'the worker attempt is still counted as failed');
});

test('a worker that exits mid-task: the task runs in-process, the next task gets a fresh worker', () => {
  // A dead worker's 'exit' event cannot arrive while the main thread blocks, so the death is
  // noticed at the deadline: keep it short here.
  const [r] = compileInPoolSync<{ threadId: number }>([{ kind: 'test-exit-worker', payload: 2 }], 1500);
  assert.equal(r!.threadId, mainThreadId);
  assert.equal(compilePoolStats().inProcessRetries, 1);
  const [again] = compileInPoolSync<{ threadId: number }>([{ kind: 'test-fail-in-worker', payload: 3 }]);
  assert.equal(again!.threadId, mainThreadId);
});

test('a worker past the deadline is stopped and the task runs in-process', () => {
  const [a, b] = compileInPoolSync<{ payload: unknown }>([{ kind: 'test-hang', payload: 'a' }, { kind: 'test-hang', payload: 'b' }], 300);
  assert.deepEqual([a!.payload, b!.payload], ['a', 'b']);
  const s = compilePoolStats();
  assert.equal(s.inProcessRetries, 2);
  assert.equal(s.workerCrashes, 1, 'the stuck worker was stopped');
});

test('without an in-process function, or when in-process fails too, the error names both attempts', () => {
  assert.throws(() => compileInPoolSync([{ kind: 'test-hang-no-fallback', payload: 0 }], 200), (e: unknown) => {
    assert.ok(e instanceof CompileTaskError);
    assert.match(e.message, /compile task 'test-hang-no-fallback' did not finish in worker thread \d+ \(timed out after 200 ms\)/);
    return true;
  });
  assert.throws(() => compileInPoolSync([{ kind: 'test-fail-everywhere', payload: 0 }]), (e: unknown) => {
    assert.ok(e instanceof CompileTaskError);
    assert.match(e.message, /failed in-process \(retried after: compile task 'test-fail-everywhere' failed in worker thread \d+: handler refused payload 0\): refused in-process too/);
    return true;
  });
});

test('kiln.compile succeeds when every js-kernel worker task fails', () => {
  const saved = compileTaskHandler('js-kernel')!;
  // The test hook: 'js-kernel' tasks fail in every worker but run normally in-process.
  registerCompileTaskHandler('js-kernel', HANDLERS, 'failInWorker', (p) => jsKernelTask(p as never));
  try {
    const f = (x: InstanceType<typeof kiln.Tensor>) => kiln.sum(kiln.exp(kiln.mul(x, 0.25)), -1);
    const x = kiln.arange(12, { dtype: 'float32' }).reshape([3, 4]);
    const got = kiln.noGrad(() => kiln.compile(f)(x)).toArray() as number[];
    const want = [0, 1, 2].map((r) => [0, 1, 2, 3].reduce((s, c) => s + Math.exp((r * 4 + c) * 0.25), 0));
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-4 * want[i]!, `row ${i}: ${v} vs ${want[i]}`));
    assert.ok(compilePoolStats().inProcessRetries >= 1, `retries: ${compilePoolStats().inProcessRetries}`);
  } finally {
    registerCompileTaskHandler('js-kernel', saved.moduleUrl, saved.exportName, (p) => jsKernelTask(p as never));
  }
});
