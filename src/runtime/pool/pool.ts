/**
 * The compile worker pool: a process-wide, lazily created set of `worker_threads` workers that run
 * compile tasks (code validation, hashing, anything a handler module does) off the main thread.
 *
 * - Size: `setCompileWorkers(n)`, else `KILN_COMPILE_WORKERS`, else max(1, min(8, availableParallelism - 1)).
 *   0 runs every task in-process through the same handler modules (for hosts without worker threads).
 * - Workers are spawned on demand up to the size and are unref'd while idle, so an idle pool never keeps
 *   the process alive; a worker is ref'd only while it runs a task that someone awaits.
 * - A task is `{ kind, payload }`; the handler for a kind is a module URL + export name
 *   (`registerCompileTaskHandler`), imported lazily by each worker. A kind may also register an
 *   in-process function for the synchronous path without workers (ES modules cannot be imported
 *   synchronously); layers above register their own kinds, so this module imports none of them.
 * - A handler error rejects the task with a `CompileTaskError` carrying the worker's stack; a worker
 *   that dies (uncaught error, `process.exit`, out of memory) rejects its in-flight task and is replaced
 *   by a fresh worker when the next task needs one.
 * - Synchronous tasks (`compileInPoolSync`, what kiln.compile waits on) whose worker times out, dies or
 *   fails are run again in-process when their kind has an in-process function, so a sick worker
 *   costs time, never the user's call; a worker past its deadline is stopped and replaced.
 */
import { os, path, url, workerExecArgv, workerThreads } from '../../platform/index.js';
import type { MessagePort, Worker } from 'node:worker_threads';
import { getOption } from '../../runtime/config.js';
import { jsKernelTask, type JsKernelPayload } from './js-kernel-task.js';
import { loadHandler, serializeError as serialize } from './handlers.js';
import type { CompileTask, HandlerSpec, ResultMessage, SerializedError, TaskMessage } from './types.js';

export type { CompileTask, HandlerSpec } from './types.js';

const WORKER_URL = new URL('./worker.js', import.meta.url);

/** A task that failed: the handler threw, or its worker died. */
export class CompileTaskError extends Error {
  readonly kind: string;
  /** The thread the task ran on (the main thread's id for in-process tasks); -1 if it never ran. */
  readonly threadId: number;
  /** The stack as the worker saw it ('' when the worker died without one). */
  readonly workerStack: string;

  constructor(kind: string, threadId: number, message: string, workerError?: SerializedError) {
    super(message);
    this.name = 'CompileTaskError';
    this.kind = kind;
    this.threadId = threadId;
    this.workerStack = workerError?.stack ?? '';
    if (workerError) this.stack = `${this.name}: ${message}\n    --- stack in worker thread ${threadId} ---\n${workerError.stack}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Handler registry (kind -> module URL + export). Plain data, so workers never need parent state.

const handlers = new Map<string, HandlerSpec>();
/** Kinds that can also run synchronously in-process (KILN_COMPILE_WORKERS=0): kind -> handler function. */
const inProcessHandlers = new Map<string, (payload: unknown) => unknown>();

function toModuleUrl(moduleUrl: string | URL): string {
  if (moduleUrl instanceof URL) return moduleUrl.href;
  if (typeof moduleUrl !== 'string' || moduleUrl === '') {
    throw new TypeError(`registerCompileTaskHandler: moduleUrl must be a URL or a non-empty string, got ${String(moduleUrl)}`);
  }
  if (/^[a-z][a-z0-9+.-]+:/i.test(moduleUrl)) return moduleUrl; // file:, data:, node: (two+ letters: not a Windows drive)
  if (path.isAbsolute(moduleUrl)) return url.pathToFileURL(moduleUrl).href;
  throw new TypeError(
    `registerCompileTaskHandler: moduleUrl '${moduleUrl}' is relative; pass an absolute URL such as new URL('./my-task.js', import.meta.url)`,
  );
}

/**
 * Registers the handler for compile tasks of `kind`: the function exported as `exportName` from
 * `moduleUrl`. Workers import the module themselves, so it must not rely on the parent's state.
 * Registering a kind again replaces it. `inProcess`, the same function imported by the caller, lets
 * `compileInPoolSync` run the kind without workers.
 */
export function registerCompileTaskHandler(kind: string, moduleUrl: string | URL, exportName: string, inProcess?: (payload: unknown) => unknown): void {
  if (typeof kind !== 'string' || kind === '') throw new TypeError(`registerCompileTaskHandler: kind must be a non-empty string, got ${String(kind)}`);
  if (typeof exportName !== 'string' || exportName === '') {
    throw new TypeError(`registerCompileTaskHandler('${kind}'): exportName must be a non-empty string, got ${String(exportName)}`);
  }
  handlers.set(kind, { moduleUrl: toModuleUrl(moduleUrl), exportName });
  if (inProcess) inProcessHandlers.set(kind, inProcess);
  else inProcessHandlers.delete(kind);
}

/** The registered handler for a kind, if any. */
export function compileTaskHandler(kind: string): HandlerSpec | undefined {
  const h = handlers.get(kind);
  return h ? { ...h } : undefined;
}

registerCompileTaskHandler('js-kernel', new URL('./js-kernel-task.js', import.meta.url), 'jsKernelTask', (p) => jsKernelTask(p as JsKernelPayload));
registerCompileTaskHandler('nvrtc', new URL('./nvrtc-task.js', import.meta.url), 'nvrtcTask');

// ---------------------------------------------------------------------------------------------
// Size configuration.

let sizeOverride: number | undefined;

export function defaultCompileWorkers(): number {
  return Math.max(1, Math.min(8, os.availableParallelism() - 1));
}

function checkCount(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative integer, got ${String(n)}`);
  return n;
}

/** The pool size in effect: setCompileWorkers, else KILN_COMPILE_WORKERS, else the default. */
export function compileWorkers(): number {
  if (sizeOverride !== undefined) return sizeOverride;
  return getOption('KILN_COMPILE_WORKERS') ?? defaultCompileWorkers();
}

/**
 * Sets the pool size (0: run tasks in-process). Applies to a running pool too: extra idle workers
 * stop at once, busy ones after their task. `undefined` goes back to KILN_COMPILE_WORKERS / the default.
 */
export function setCompileWorkers(n: number | undefined): void {
  sizeOverride = n === undefined ? undefined : checkCount(n, 'setCompileWorkers: n');
  pool?.resize(compileWorkers());
}

// ---------------------------------------------------------------------------------------------
// The pool.

interface Pending {
  id: number;
  task: CompileTask;
  handler: HandlerSpec;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  threadId: number;
  busy: Pending | null;
  online: boolean;
  /** The uncaught error that is about to kill this worker, if any. */
  fatal: Error | null;
  exited: boolean;
}

export interface CompilePoolStats {
  /** Live worker threads. */
  workers: number;
  /** Configured size (0: in-process). */
  size: number;
  /** Tasks that settled (fulfilled or rejected). */
  tasksCompleted: number;
  /** Of those, the rejected ones. */
  tasksFailed: number;
  /** Settled tasks by the thread id that ran them (the main thread's id for in-process tasks). */
  tasksPerWorker: Record<number, number>;
  /** Tasks submitted and not yet settled (running + queued). */
  inFlight: number;
  /** Of those, the ones waiting for a worker. */
  queued: number;
  /** Workers that died while alive (crash, process.exit, startup failure) or were stopped past a deadline. */
  workerCrashes: number;
  /** Synchronous tasks that failed in a worker (timeout, crash, error) and ran again in-process. */
  inProcessRetries: number;
}

class CompilePool {
  private size: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 1;
  private inline = 0;
  private closed = false;
  completed = 0;
  failed = 0;
  crashes = 0;
  /** Synchronous tasks that failed in a worker and were run again in-process. */
  retries = 0;
  readonly perWorker = new Map<number, number>();

  constructor(size: number) {
    this.size = size;
  }

  submit(task: CompileTask, handler: HandlerSpec): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, task, handler, resolve, reject });
      this.pump();
    });
  }

  /**
   * Runs tasks on the workers and blocks until all are done (kiln.compile is synchronous, like
   * torch.compile). Tasks are spread over the workers, which run them in parallel while this thread
   * waits in Atomics.wait; each reply comes back on the task's own MessageChannel. In-process pools
   * (size 0) and environments without workers run the handlers here.
   */
  runSync(tasks: readonly { task: CompileTask; handler: HandlerSpec }[], timeoutMs: number): unknown[] {
    if (this.closed) throw new Error('compile pool: shut down');
    if (this.size === 0) return tasks.map(({ task, handler }) => runHandlerSync(task, handler));
    while (this.slots.length < Math.min(this.size, tasks.length)) this.spawn();
    const pending = tasks.map(({ task, handler }, i) => {
      const slot = this.slots[i % this.slots.length]!;
      const channel = new workerThreads.MessageChannel();
      const done = new Int32Array(new SharedArrayBuffer(4));
      const msg: TaskMessage = { id: this.nextId++, kind: task.kind, handler, payload: task.payload, replyPort: channel.port2, done };
      // Nothing here may keep the process alive: the reply is read synchronously below.
      channel.port1.unref();
      slot.worker.postMessage(msg, [channel.port2]);
      return { slot, port: channel.port1, done, kind: task.kind };
    });
    const deadline = Date.now() + timeoutMs;
    // Attaching the 'message' listener at spawn refs a worker's port; idle workers must not keep
    // the process alive, so every worker used here is unref'd again (busy async ones stay ref'd).
    for (const { slot } of pending) if (!slot.busy) slot.worker.unref();
    return pending.map(({ slot, port, done, kind }, i) => {
      try {
        return this.awaitSync(slot, port, done, kind, timeoutMs, deadline);
      } catch (e) {
        // A worker that timed out, died or failed (seen once on a cold cache: the worker still
        // importing its handler when the deadline passed) must not fail the user's call: the
        // task runs again here when its kind has an in-process function (issue #18 item 8).
        const { task } = tasks[i]!;
        if (!inProcessHandlers.has(task.kind)) throw e;
        this.retries++;
        try {
          return runHandlerSync(task, tasks[i]!.handler);
        } catch (e2) {
          const se = serialize(e2);
          throw new CompileTaskError(kind, workerThreads.threadId, `compile task '${kind}' failed in-process (retried after: ${(e as Error).message}): ${se.message}`, se);
        }
      }
    });
  }

  /** Waits for one synchronous task's reply; throws a CompileTaskError on timeout, exit or failure. */
  private awaitSync(slot: Slot, port: MessagePort, done: Int32Array, kind: string, timeoutMs: number, deadline: number): unknown {
    while (Atomics.load(done, 0) === 0) {
      const left = deadline - Date.now();
      if (left <= 0 || slot.exited) {
        port.close();
        // A worker past the deadline may be stuck for good; a fresh one replaces it on demand.
        if (!slot.exited && this.slots.includes(slot)) {
          this.crashes++;
          this.retire(slot);
        }
        throw new CompileTaskError(kind, slot.threadId, `compile task '${kind}' did not finish in worker thread ${slot.threadId} (${slot.exited ? 'the worker exited' : `timed out after ${timeoutMs} ms`})`);
      }
      Atomics.wait(done, 0, 0, Math.min(left, 100));
    }
    const reply = workerThreads.receiveMessageOnPort(port)?.message as ResultMessage | undefined;
    port.close();
    this.completed++;
    this.perWorker.set(slot.threadId, (this.perWorker.get(slot.threadId) ?? 0) + 1);
    if (!reply || !reply.ok) {
      this.failed++;
      const detail = reply && !reply.ok ? reply.error.message : 'no reply';
      throw new CompileTaskError(kind, slot.threadId, `compile task '${kind}' failed in worker thread ${slot.threadId}: ${detail}`, reply && !reply.ok ? reply.error : undefined);
    }
    return reply.value;
  }

  resize(n: number): void {
    this.size = n;
    for (const s of [...this.slots]) if (this.slots.length > n && !s.busy) this.retire(s);
    this.pump();
  }

  stats(): CompilePoolStats {
    const running = this.slots.filter((s) => s.busy).length + this.inline;
    return {
      workers: this.slots.length,
      size: this.size,
      tasksCompleted: this.completed,
      tasksFailed: this.failed,
      tasksPerWorker: Object.fromEntries(this.perWorker),
      inFlight: running + this.queue.length,
      queued: this.queue.length,
      workerCrashes: this.crashes,
      inProcessRetries: this.retries,
    };
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    const err = (p: Pending) => new CompileTaskError(p.task.kind, -1, `compile task '${p.task.kind}' cancelled: the compile pool was shut down`);
    for (const p of this.queue.splice(0)) p.reject(err(p));
    const slots = this.slots.splice(0);
    for (const s of slots) {
      if (s.busy) {
        const p = s.busy;
        s.busy = null;
        p.reject(err(p));
      }
    }
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private settle(p: Pending, threadId: number, ok: boolean, value: unknown): void {
    this.completed++;
    if (!ok) this.failed++;
    this.perWorker.set(threadId, (this.perWorker.get(threadId) ?? 0) + 1);
    if (ok) p.resolve(value);
    else p.reject(value as Error);
  }

  private pump(): void {
    if (this.closed) return;
    while (this.queue.length > 0) {
      if (this.size === 0) {
        this.runInline(this.queue.shift()!);
        continue;
      }
      let slot = this.slots.find((s) => !s.busy);
      if (!slot) {
        if (this.slots.length >= this.size) return;
        slot = this.spawn();
      }
      this.dispatch(slot, this.queue.shift()!);
    }
  }

  private runInline(p: Pending): void {
    this.inline++;
    const run = async () => {
      const payload = structuredClone(p.task.payload);
      const fn = await loadHandler(p.task.kind, p.handler);
      return structuredClone(await fn(payload));
    };
    run().then(
      (v) => {
        this.inline--;
        this.settle(p, workerThreads.threadId, true, v);
      },
      (e: unknown) => {
        this.inline--;
        const se = serialize(e);
        this.settle(p, workerThreads.threadId, false, new CompileTaskError(p.task.kind, workerThreads.threadId, `compile task '${p.task.kind}' failed (in-process): ${se.message}`, se));
      },
    );
  }

  private dispatch(slot: Slot, p: Pending): void {
    const msg: TaskMessage = { id: p.id, kind: p.task.kind, handler: p.handler, payload: p.task.payload };
    try {
      slot.worker.postMessage(msg);
    } catch (e) {
      // Not structured-cloneable (functions, symbols...): the task never left this thread.
      this.settle(p, -1, false, new CompileTaskError(p.task.kind, -1, `compile task '${p.task.kind}': payload cannot be sent to a worker: ${(e as Error).message}`));
      return;
    }
    slot.busy = p;
    slot.worker.ref();
  }

  private spawn(): Slot {
    // Explicit options: a parent started with `node --input-type=module -e` would pass on options a
    // worker running a file rejects (platform/worker-argv.ts); V8 flags Node refuses per worker apply anyway.
    let worker: InstanceType<typeof workerThreads.Worker>;
    try {
      worker = new workerThreads.Worker(WORKER_URL, { name: 'kiln-compile', execArgv: workerExecArgv() });
    } catch {
      worker = new workerThreads.Worker(WORKER_URL, { name: 'kiln-compile', execArgv: [] });
    }
    worker.unref();
    const slot: Slot = { worker, threadId: worker.threadId, busy: null, online: false, fatal: null, exited: false };
    this.slots.push(slot);
    worker.on('online', () => {
      slot.online = true;
    });
    worker.on('message', (msg: ResultMessage) => this.onMessage(slot, msg));
    worker.on('error', (e: Error) => {
      slot.fatal = e;
    });
    worker.on('exit', (code: number) => this.onExit(slot, code));
    return slot;
  }

  private onMessage(slot: Slot, msg: ResultMessage): void {
    const p = slot.busy;
    if (!p || p.id !== msg.id) return; // a task already rejected (shutdown)
    slot.busy = null;
    slot.worker.unref();
    if (msg.ok) this.settle(p, slot.threadId, true, msg.value);
    else {
      const message = `compile task '${p.task.kind}' failed in worker thread ${slot.threadId}: ${msg.error.message}`;
      this.settle(p, slot.threadId, false, new CompileTaskError(p.task.kind, slot.threadId, message, msg.error));
    }
    if (this.slots.length > this.size) this.retire(slot);
    this.pump();
  }

  private retire(slot: Slot): void {
    this.remove(slot);
    void slot.worker.terminate();
  }

  private remove(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
  }

  private onExit(slot: Slot, code: number): void {
    if (slot.exited) return;
    slot.exited = true;
    const wasMember = this.slots.includes(slot);
    this.remove(slot);
    if (!wasMember || this.closed) return; // retired or shut down on purpose
    this.crashes++;
    const why = slot.fatal ? `${slot.fatal.name}: ${slot.fatal.message}` : `exit code ${code}`;
    const fatal: SerializedError | undefined = slot.fatal ? serialize(slot.fatal) : undefined;
    const p = slot.busy;
    slot.busy = null;
    if (p) {
      const message = `compile task '${p.task.kind}' lost: worker thread ${slot.threadId} died while running it (${why}); the worker will be replaced`;
      this.settle(p, slot.threadId, false, new CompileTaskError(p.task.kind, slot.threadId, message, fatal));
    }
    if (!slot.online) {
      // The worker could not even start (missing dist file, no worker support): fail everything
      // queued now instead of spawning doomed workers forever.
      for (const q of this.queue.splice(0)) {
        this.settle(q, -1, false, new CompileTaskError(q.task.kind, -1, `compile task '${q.task.kind}': compile worker failed to start (${why}); set KILN_COMPILE_WORKERS=0 to compile in-process`, fatal));
      }
      return;
    }
    this.pump(); // spawns the replacement if work is waiting
  }
}


let pool: CompilePool | null = null;

/**
 * Runs a task on the shared compile pool (created on first use) and resolves with the handler's
 * return value. Rejects with a `CompileTaskError` if the kind is unknown, the payload cannot be
 * cloned, the handler throws, or its worker dies.
 */
export function compileInPool<T>(task: CompileTask): Promise<T> {
  if (typeof task !== 'object' || task === null || typeof task.kind !== 'string') {
    return Promise.reject(new TypeError(`compileInPool: task must be { kind: string; payload: unknown }, got ${String(task)}`));
  }
  const handler = handlers.get(task.kind);
  if (!handler) {
    const known = [...handlers.keys()].join(', ') || 'none';
    return Promise.reject(
      new CompileTaskError(task.kind, -1, `compileInPool: no handler registered for compile task kind '${task.kind}' (registered: ${known})`),
    );
  }
  if (!pool) {
    let size: number;
    try {
      size = compileWorkers();
    } catch (e) {
      return Promise.reject(e as Error);
    }
    pool = new CompilePool(size);
  }
  return pool.submit(task, { ...handler }) as Promise<T>;
}

/** Pool counters; all zero when no pool exists (does not create one). */
export function compilePoolStats(): CompilePoolStats {
  if (pool) return pool.stats();
  let size = 0;
  try {
    size = compileWorkers();
  } catch {
    size = -1;
  }
  return { workers: 0, size, tasksCompleted: 0, tasksFailed: 0, tasksPerWorker: {}, inFlight: 0, queued: 0, workerCrashes: 0, inProcessRetries: 0 };
}

/** Stops every worker, rejects pending tasks and forgets the pool (and its stats); the next task starts a new one. */
export async function shutdownCompilePool(): Promise<void> {
  const p = pool;
  pool = null;
  if (p) await p.shutdown();
}

/**
 * Synchronous in-process fallback (KILN_COMPILE_WORKERS=0). ES modules cannot be loaded
 * synchronously, so only kinds registered with an in-process function run here.
 */
function runHandlerSync(task: CompileTask, _handler: HandlerSpec): unknown {
  const fn = inProcessHandlers.get(task.kind);
  if (!fn) throw new Error(`compile task '${task.kind}': synchronous compile without workers supports only task kinds registered with an in-process function (${[...inProcessHandlers.keys()].join(', ')})`);
  return structuredClone(fn(structuredClone(task.payload)));
}

/** Runs tasks in the shared pool and waits for all of them (see CompilePool.runSync). */
export function compileInPoolSync<T>(tasks: readonly CompileTask[], timeoutMs = 60_000): T[] {
  const specs = tasks.map((task) => {
    const handler = compileTaskHandler(task.kind);
    if (!handler) throw new Error(`compileInPoolSync: no handler registered for task kind '${task.kind}'`);
    return { task, handler };
  });
  if (!pool) pool = new CompilePool(compileWorkers());
  return pool.runSync(specs, timeoutMs) as T[];
}
