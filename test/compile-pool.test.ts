import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, beforeEach, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { threadId as mainThreadId } from 'node:worker_threads';
import {
  CompileTaskError,
  compileInPool,
  compilePoolStats,
  compileWorkers,
  defaultCompileWorkers,
  registerCompileTaskHandler,
  setCompileWorkers,
  shutdownCompilePool,
  type JsKernelResult,
} from '../src/runtime/pool/index.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const HANDLERS = new URL('./helpers/compile-pool-handlers.js', import.meta.url);
for (const name of ['echo', 'slowEcho', 'fail', 'exitWorker', 'uncaught', 'returnsFunction', 'notAFunction']) {
  registerCompileTaskHandler(`test-${name}`, HANDLERS, name);
}
registerCompileTaskHandler('test-missing-module', new URL('./helpers/compile-no-such-module.js', import.meta.url), 'x');

interface Echo {
  threadId: number;
  payload: unknown;
}

beforeEach(async () => {
  await shutdownCompilePool();
  setCompileWorkers(2);
});

after(async () => {
  await shutdownCompilePool();
  setCompileWorkers(undefined);
});

test('default size and KILN_COMPILE_WORKERS parsing', () => {
  const saved = process.env.KILN_COMPILE_WORKERS;
  try {
    setCompileWorkers(undefined);
    delete process.env.KILN_COMPILE_WORKERS;
    const d = defaultCompileWorkers();
    assert.ok(d >= 1 && d <= 8);
    assert.equal(compileWorkers(), d);
    process.env.KILN_COMPILE_WORKERS = '3';
    assert.equal(compileWorkers(), 3);
    process.env.KILN_COMPILE_WORKERS = 'lots';
    assert.throws(() => compileWorkers(), /KILN_COMPILE_WORKERS.*'lots'/);
    setCompileWorkers(1);
    assert.equal(compileWorkers(), 1, 'setCompileWorkers wins over the environment');
    assert.throws(() => setCompileWorkers(-1), /non-negative integer, got -1/);
    assert.throws(() => setCompileWorkers(1.5), /1\.5/);
  } finally {
    if (saved === undefined) delete process.env.KILN_COMPILE_WORKERS;
    else process.env.KILN_COMPILE_WORKERS = saved;
  }
});

test('tasks run off the main thread, in parallel, and stats count them per worker', async () => {
  assert.equal(compilePoolStats().workers, 0, 'the pool is created lazily');
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) => compileInPool<Echo & { start: number; end: number }>({ kind: 'test-slowEcho', payload: { ms: 60, i, nested: { a: [1, 2n] } } })),
  );
  results.forEach((r, i) => {
    assert.notEqual(r.threadId, mainThreadId);
    assert.deepEqual(r.payload, { ms: 60, i, nested: { a: [1, 2n] } }, 'payload arrives by structured clone');
  });
  const threads = new Set(results.map((r) => r.threadId));
  assert.equal(threads.size, 2, 'both workers took tasks');
  const overlapping = results.some((a) => results.some((b) => a.threadId !== b.threadId && a.start < b.end && b.start < a.end));
  assert.ok(overlapping, 'tasks on the two workers ran at the same time');
  const s = compilePoolStats();
  assert.equal(s.workers, 2);
  assert.equal(s.tasksCompleted, 6);
  assert.equal(s.inFlight, 0);
  assert.deepEqual(Object.keys(s.tasksPerWorker).map(Number).sort(), [...threads].sort());
  assert.equal(Object.values(s.tasksPerWorker).reduce((a, b) => a + b, 0), 6);
});

test('inFlight counts running and queued tasks', async () => {
  setCompileWorkers(1);
  const ps = [1, 2, 3].map((i) => compileInPool<Echo>({ kind: 'test-slowEcho', payload: { ms: 20, i } }));
  const s = compilePoolStats();
  assert.equal(s.inFlight, 3);
  assert.equal(s.queued, 2);
  await Promise.all(ps);
  assert.equal(compilePoolStats().inFlight, 0);
});

test('js-kernel: valid source gives the sha256 of the source', async () => {
  const source = 'const n = x.length;\nfor (let i = 0; i < n; i++) out[i] = x[i] * 2;\nreturn out;';
  const r = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source, name: 'double', params: ['x', 'out'] } });
  assert.ok(r.ok);
  const { createHash } = await import('node:crypto');
  assert.equal(r.hash, createHash('sha256').update(source).digest('hex'));
  assert.equal(r.source, source);
  // the validated source really is the function
  const fn = new Function('x', 'out', r.source) as (x: number[], out: number[]) => number[];
  assert.deepEqual(fn([1, 2], [0, 0]), [2, 4]);
  const r2 = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source: source + ' ', name: 'double' } });
  assert.ok(r2.ok && r2.hash !== r.hash, 'a different source hashes differently');
});

test('js-kernel: syntax errors come back with the line and a caret, and never run the code', async () => {
  const source = 'let a = 1;\nlet b = a +* 2;\nreturn b;';
  const r = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source, name: 'bad_kernel', params: ['x'] } });
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(r.line, 2);
  assert.equal(r.column, 12);
  const lines = r.error.split('\n');
  assert.match(lines[0]!, /^bad_kernel:2:12: SyntaxError: Unexpected token '\*'/);
  assert.equal(lines[1], '2 | let b = a +* 2;');
  assert.equal(lines[2]!.indexOf('^'), lines[1]!.indexOf('*'), 'the caret points at the offending token');

  const unclosed = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source: 'if (x) {\n  return 1;', name: 'k2', params: ['x'] } });
  assert.equal(unclosed.ok, false);
  if (!unclosed.ok) {
    assert.equal(unclosed.line, 2);
    assert.match(unclosed.error, /^k2:2:\d+: SyntaxError/);
  }
  // construction only: a body that would throw if executed is valid
  const sideEffect = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source: 'throw new Error("ran")', name: 'k3' } });
  assert.equal(sideEffect.ok, true);
});

test('js-kernel: a malformed payload rejects with the reason', async () => {
  await assert.rejects(compileInPool({ kind: 'js-kernel', payload: { name: 'k' } }), /'source' must be a string/);
});

test('handler errors reject with the worker stack and keep the worker alive', async () => {
  const err = await compileInPool({ kind: 'test-fail', payload: { n: 1 } }).then(
    () => assert.fail('should reject'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof CompileTaskError);
  assert.match(err.message, /compile task 'test-fail' failed in worker thread \d+: handler refused payload \{"n":1\}/);
  assert.match(err.workerStack, /RangeError: handler refused/);
  assert.match(err.workerStack, /compile-pool-handlers\.js/, 'the stack shows where in the worker it failed');
  assert.match(err.stack ?? '', /stack in worker thread/);
  assert.equal(compilePoolStats().workerCrashes, 0);
  const ok = await compileInPool<Echo>({ kind: 'test-echo', payload: 1 });
  assert.equal(ok.threadId, err.threadId, 'the same worker serves the next task');
});

test('a crashing worker rejects its task clearly and is replaced', async () => {
  setCompileWorkers(1);
  const first = await compileInPool<Echo>({ kind: 'test-echo', payload: 0 });
  await assert.rejects(compileInPool({ kind: 'test-exitWorker', payload: null }), (e: Error) => {
    assert.ok(e instanceof CompileTaskError);
    assert.match(e.message, new RegExp(`worker thread ${first.threadId} died while running it \\(exit code 7\\)`));
    return true;
  });
  const second = await compileInPool<Echo>({ kind: 'test-echo', payload: 1 });
  assert.notEqual(second.threadId, first.threadId, 'a new worker took over');
  await assert.rejects(compileInPool({ kind: 'test-uncaught', payload: null }), /died while running it \(Error: uncaught explosion in a timer\)/);
  const third = await compileInPool<Echo>({ kind: 'test-echo', payload: 2 });
  assert.equal(third.payload, 2);
  const s = compilePoolStats();
  assert.equal(s.workerCrashes, 2);
  assert.equal(s.workers, 1);
});

test('bad kinds, payloads, results and handler modules are reported', async () => {
  await assert.rejects(compileInPool({ kind: 'nope', payload: 1 }), /no handler registered for compile task kind 'nope' \(registered: js-kernel/);
  await assert.rejects(compileInPool({ kind: 'test-echo', payload: { f: () => 1 } }), /payload cannot be sent to a worker/);
  await assert.rejects(compileInPool({ kind: 'test-returnsFunction', payload: 1 }), /result cannot be sent back/);
  await assert.rejects(compileInPool({ kind: 'test-notAFunction', payload: 1 }), /no exported function 'notAFunction' \(found number\)/);
  await assert.rejects(compileInPool({ kind: 'test-missing-module', payload: 1 }), /cannot import handler module .*compile-no-such-module\.js/);
  assert.throws(() => registerCompileTaskHandler('k', './relative.js', 'f'), /relative/);
  assert.equal((await compileInPool<Echo>({ kind: 'test-echo', payload: 'still fine' })).payload, 'still fine');
});

test('KILN_COMPILE_WORKERS=0 runs the same handlers in-process', async () => {
  const saved = process.env.KILN_COMPILE_WORKERS;
  setCompileWorkers(undefined);
  process.env.KILN_COMPILE_WORKERS = '0';
  try {
    const r = await compileInPool<Echo>({ kind: 'test-echo', payload: { a: 1 } });
    assert.equal(r.threadId, mainThreadId);
    const k = await compileInPool<JsKernelResult>({ kind: 'js-kernel', payload: { source: 'return (', name: 'k' } });
    assert.equal(k.ok, false);
    await assert.rejects(compileInPool({ kind: 'test-fail', payload: 2 }), /failed \(in-process\): handler refused payload 2/);
    const s = compilePoolStats();
    assert.equal(s.workers, 0);
    assert.deepEqual(s.tasksPerWorker, { [mainThreadId]: 3 });
  } finally {
    if (saved === undefined) delete process.env.KILN_COMPILE_WORKERS;
    else process.env.KILN_COMPILE_WORKERS = saved;
  }
});

test('shutdown rejects pending tasks; resizing retires extra workers', async () => {
  setCompileWorkers(2);
  await Promise.all([1, 2].map((i) => compileInPool({ kind: 'test-slowEcho', payload: { ms: 10, i } })));
  assert.equal(compilePoolStats().workers, 2);
  setCompileWorkers(1);
  assert.equal(compilePoolStats().workers, 1);
  const pending = assert.rejects(compileInPool({ kind: 'test-slowEcho', payload: { ms: 5000 } }), /cancelled: the compile pool was shut down/);
  await shutdownCompilePool();
  await pending;
  assert.equal(compilePoolStats().workers, 0);
});

test('an idle pool does not keep the process alive, a busy one does', () => {
  const child = fileURLToPath(new URL('./helpers/compile-pool-child.js', import.meta.url));
  const env = { ...process.env, KILN_COMPILE_WORKERS: '2' };
  const r = spawnSync(process.execPath, [child], { encoding: 'utf8', env, timeout: HANG_GUARD_MS });
  assert.equal(r.signal, null, 'the child exited by itself (not killed by the timeout)');
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { slow: { ms: 100 }, kernelOk: true, workers: 1 });
});
