/**
 * The server's one engine loop. Handlers submit requests; while the engine has unfinished work the
 * loop runs engine.step() once per turn of the event loop (setImmediate), so between two steps
 * sockets are read and written and newly arrived requests join the batch (continuous batching).
 * The event loop is never held longer than one step. When the engine is idle the loop stops and
 * the next submit starts it again.
 *
 * Outputs reach each request's client through the engine's onOutput, during step(). Aborts asked
 * for during a step (a stop string matched while detokenizing) are applied right after it, so the
 * engine is never re-entered mid-delivery. If a step throws, every request in the engine fails
 * with that error (it is not known which one caused it) and the loop carries on with new work.
 */
import type { Engine, RequestOutput } from '../engine.js';
import type { SamplingParams } from '../sampling-params.js';
import { ApiError } from './errors.js';

export interface LoopClient {
  /** Every output of the request, its final one included (also after abort()). */
  onOutput(o: RequestOutput): void;
  /** The engine failed while the request was in it; no more outputs follow. */
  onError(e: Error): void;
}

export interface LoopRequest {
  readonly requestId: string;
  readonly promptIds: readonly number[];
  readonly params: SamplingParams;
}

export interface StepInfo {
  /** Tokens run through the model (prefill chunks and decode). */
  readonly tokens: number;
  /** Requests that got a token. */
  readonly sequences: number;
  readonly seconds: number;
}

export interface EngineLoopOptions {
  /** Requests waiting for admission at most; a submit that would pass it gets a 429. */
  maxQueue: number;
  /** Called after each step that ran. */
  onStep?: (info: StepInfo) => void;
}

export class EngineLoop {
  private scheduled = false;
  private inStep = false;
  private closed = false;
  private readonly clients = new Map<string, LoopClient>();
  private readonly deferredAborts: string[] = [];

  constructor(
    readonly engine: Engine,
    private readonly options: EngineLoopOptions,
  ) {}

  get numWaiting(): number {
    return this.engine.scheduler.waiting.length;
  }

  get numRunning(): number {
    return this.engine.scheduler.running.length;
  }

  /** Requests submitted and not finished. */
  get numActive(): number {
    return this.clients.size;
  }

  /**
   * Adds all of `requests` or none: a full queue is a 429, a request the engine refuses (its
   * message names the option) rejects the whole group with that error.
   */
  submit(requests: readonly LoopRequest[], client: LoopClient): void {
    if (this.closed) throw new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down');
    const waiting = this.numWaiting;
    if (waiting + requests.length > this.options.maxQueue) {
      throw new ApiError(
        429,
        `the server is busy: ${waiting} requests are waiting and at most ${this.options.maxQueue} may (this one adds ${requests.length}); retry later`,
        'rate_limit_error',
        null,
        'queue_full',
      );
    }
    const added: string[] = [];
    try {
      for (const r of requests) {
        this.engine.addRequest(r.promptIds, r.params, { requestId: r.requestId, onOutput: (o) => this.deliver(o) });
        this.clients.set(r.requestId, client);
        added.push(r.requestId);
      }
    } catch (e) {
      for (const id of added) this.abort(id);
      throw e;
    }
    this.kick();
  }

  /** Ends a request and frees its blocks (after the current step if one is running). */
  abort(requestId: string): void {
    if (this.inStep) this.deferredAborts.push(requestId);
    else this.engine.abort(requestId);
  }

  /** No more submits; every request still in the engine is aborted (its client sees finish 'abort'). */
  abortAll(): void {
    for (const id of [...this.clients.keys()]) this.abort(id);
  }

  close(): void {
    this.closed = true;
  }

  private deliver(o: RequestOutput): void {
    const client = this.clients.get(o.requestId);
    if (o.finished) this.clients.delete(o.requestId);
    client?.onOutput(o);
  }

  private kick(): void {
    if (this.scheduled || !this.engine.hasUnfinished()) return;
    this.scheduled = true;
    setImmediate(() => this.tick());
  }

  private tick(): void {
    this.scheduled = false;
    if (!this.engine.hasUnfinished()) return;
    const before = this.engine.stats;
    const start = performance.now();
    this.inStep = true;
    let outputs = 0;
    try {
      outputs = this.engine.step().length;
    } catch (e) {
      this.inStep = false;
      this.failAll(e instanceof Error ? e : new Error(String(e)));
    }
    this.inStep = false;
    for (const id of this.deferredAborts.splice(0)) this.engine.abort(id);
    const after = this.engine.stats;
    if (after.steps > before.steps) {
      this.options.onStep?.({ tokens: after.tokensComputed - before.tokensComputed, sequences: outputs, seconds: (performance.now() - start) / 1000 });
    } else if (this.engine.hasUnfinished() && this.numRunning === 0) {
      // Nothing ran and nothing is running: the waiting requests can never be admitted.
      this.failAll(new Error(`no request can be scheduled (${this.numWaiting} waiting, ${this.engine.cache.allocator.numFree} of ${this.engine.cache.numBlocks} cache blocks free)`));
    }
    this.kick();
  }

  private failAll(e: Error): void {
    const clients = [...this.clients];
    this.clients.clear();
    for (const [id, client] of clients) {
      client.onError(e);
      this.engine.abort(id);
    }
  }
}
