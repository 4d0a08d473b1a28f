/**
 * The server's one engine loop. Handlers submit requests; while the engine has unfinished work the
 * loop runs slices of engine.step(), one slice per turn of the event loop (setImmediate): between
 * two slices sockets are read and written and newly arrived requests join the batch (continuous
 * batching). When the engine is idle the loop stops and the next submit starts it again.
 *
 * A slice runs steps back to back and then flushes: each client that got outputs during the slice
 * is told once (LoopClient.flush), so it writes its socket once per slice, not once per token. The
 * slice ends after the step in which the engine went idle or a request got its first token, or once
 * it has stepped for a budget: SLICE_SHARE (9) times what the last turns spent outside the loop
 * (writing, reading, parsing: an average of the gaps between slices), at most maxSliceMs. So when
 * a step costs much more than the I/O around it (a real model) every slice is one step and every
 * token streams at once; when steps are cheap (a tiny model, many clients) the engine still gets
 * most of the thread, and the event loop is never held longer than maxSliceMs plus one step.
 *
 * With flushWhileDeviceRuns (cuda, webgpu; off by default, no gain measured yet) the flush of a
 * slice that leaves work behind waits for the next step, which runs it while the device computes
 * (Engine.step's whileDeviceRuns). A first token, and the last outputs, are flushed at once.
 *
 * With batchWindowMs (default DEFAULT_BATCH_WINDOW_MS), a request that finds the engine idle (nothing
 * running) does not start a step at once: the loop waits until that many ms after it, so requests
 * that arrive together (a burst of clients, one client's parallel requests) are prefilled in one
 * step and then decode together, instead of the first prefilling alone and running a step or more
 * ahead of the rest (whose last tokens then run as a tail at a smaller batch). The wait ends early
 * once the waiting requests fill a step (maxNumSeqs of them, or maxNumBatchedTokens of prompt). A
 * lone request's first token is delayed by at most the window; requests that arrive while the
 * engine runs join the next step as before (their prefill mixed with the running decodes).
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
  /**
   * Send what the outputs since the last flush made: called once at the end of a slice for each
   * client that got outputs in it, and right after an output that came outside a slice (abort()).
   */
  flush?(): void;
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
  /** Longest a slice keeps stepping, ms (default DEFAULT_MAX_SLICE_MS); 0: one step per slice. */
  maxSliceMs?: number;
  /**
   * Flush a slice's outputs during the next step's device time rather than at the slice's end
   * (for cuda and webgpu, whose steps run asynchronously to the host; never useful on the cpu).
   * Default off: on the H200 (Qwen3-0.6B, 16 streaming clients) it measured no gain, 5018 against
   * 5057 tok/s (bench/results/h200-s14-serve-qwen3-0.6b-2026-12-03.json).
   */
  flushWhileDeviceRuns?: boolean;
  /**
   * How long a request that finds the engine idle waits for others to join its first step, ms
   * (default DEFAULT_BATCH_WINDOW_MS; 0: no wait). See the file header.
   */
  batchWindowMs?: number;
}

/**
 * The default batch window, ms: about the spread of a burst of loopback requests as the server
 * reads them (bench/serve.ts --trace), small next to a prefill step of a real model.
 */
export const DEFAULT_BATCH_WINDOW_MS = 2;
/** The default longest slice of steps between two turns of the event loop, ms. */
export const DEFAULT_MAX_SLICE_MS = 25;
/**
 * A slice steps for this many times the time spent outside the loop (the average gap between
 * slices), within maxSliceMs: the engine gets about 90% of the thread when I/O would take more.
 */
const SLICE_SHARE = 9;
/** Weight of the newest gap in the average. */
const GAP_WEIGHT = 0.25;

export class EngineLoop {
  private scheduled = false;
  /** The batch window's timer, while the loop waits for more requests before its first step. */
  private windowTimer: NodeJS.Timeout | null = null;
  private readonly batchWindowMs: number;
  private inStep = false;
  private closed = false;
  private readonly clients = new Map<string, LoopClient>();
  private readonly deferredAborts: string[] = [];
  /** During a slice: the clients that got outputs in it (null outside a slice). */
  private touched: Set<LoopClient> | null = null;
  /** Clients whose outputs are not flushed yet (see deferFlush). */
  private readonly pending = new Set<LoopClient>();
  /**
   * flushWhileDeviceRuns: a slice that leaves work for the next one does not flush at its end;
   * the next step flushes while the device computes it (StepOptions.whileDeviceRuns). On the cpu
   * the compute happens as it is queued, so that would delay every token by a step.
   */
  private readonly deferFlush: boolean;
  private readonly flushPendingFn = (): void => this.flushPending();
  /** A request got its first token in the step now running: the slice ends after it. */
  private firstToken = false;
  private readonly maxSliceMs: number;
  /** performance.now() when the last slice ended (null: the loop was idle). */
  private lastSliceEnd: number | null = null;
  /** Average ms spent outside the loop between two slices. */
  private gapMs = 0;

  constructor(
    readonly engine: Engine,
    private readonly options: EngineLoopOptions,
  ) {
    this.maxSliceMs = options.maxSliceMs ?? DEFAULT_MAX_SLICE_MS;
    this.deferFlush = options.flushWhileDeviceRuns ?? false;
    this.batchWindowMs = options.batchWindowMs ?? DEFAULT_BATCH_WINDOW_MS;
    if (!(this.maxSliceMs >= 0)) throw new Error(`EngineLoop: maxSliceMs must be >= 0, got ${options.maxSliceMs}`);
    if (!(this.batchWindowMs >= 0 && Number.isFinite(this.batchWindowMs))) throw new Error(`EngineLoop: batchWindowMs must be a finite number >= 0, got ${options.batchWindowMs}`);
  }

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
    this.kick(true);
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
    if (client === undefined) return;
    if (o.newIds.length > 0 && o.outputIds.length === o.newIds.length) this.firstToken = true;
    client.onOutput(o);
    if (this.touched !== null) this.touched.add(client);
    else client.flush?.();
  }

  /** Schedules the next slice if there is work; `arrival`: called for a submit (the batch window may apply). */
  private kick(arrival = false): void {
    if (this.windowTimer !== null) {
      // Waiting for the batch to fill: start now if it has (or if everything was aborted).
      if (this.engine.hasUnfinished() && !this.batchFull()) return;
      clearTimeout(this.windowTimer);
      this.windowTimer = null;
    }
    if (this.scheduled || !this.engine.hasUnfinished()) {
      if (!this.scheduled) {
        this.lastSliceEnd = null;
        this.flushPending();
      }
      return;
    }
    if (arrival && this.batchWindowMs > 0 && this.numRunning === 0 && !this.batchFull()) {
      // The engine is idle: this is a first arrival. Give the others of its burst the window.
      this.windowTimer = setTimeout(() => {
        this.windowTimer = null;
        this.kick();
      }, this.batchWindowMs);
      return;
    }
    this.scheduled = true;
    setImmediate(() => this.slice());
  }

  /** Whether the waiting requests fill a step already (no point waiting for more). */
  private batchFull(): boolean {
    const s = this.engine.scheduler;
    if (s.waiting.length + s.running.length >= s.maxNumSeqs) return true;
    let tokens = 0;
    for (const seq of s.waiting) tokens += seq.length;
    return tokens >= s.maxNumBatchedTokens;
  }

  /** Steps back to back (see the file header), then flushes the clients that got outputs. */
  private slice(): void {
    this.scheduled = false;
    const start = performance.now();
    if (this.lastSliceEnd !== null) this.gapMs += GAP_WEIGHT * (start - this.lastSliceEnd - this.gapMs);
    const budget = Math.min(this.maxSliceMs, SLICE_SHARE * this.gapMs);
    this.touched = this.pending;
    try {
      for (;;) {
        const more = this.step();
        if (!more || this.firstToken || performance.now() - start >= budget) break;
      }
    } finally {
      this.touched = null;
      // A first token goes out at once (time to first token); so does everything once idle.
      const flushNow = !this.deferFlush || this.firstToken || !this.engine.hasUnfinished();
      this.firstToken = false;
      // Writing counts as time outside the loop.
      this.lastSliceEnd = performance.now();
      if (flushNow) this.flushPending();
    }
    this.kick();
  }

  /** Tells each client with unflushed outputs to send them (in the order they got outputs). */
  private flushPending(): void {
    if (this.pending.size === 0) return;
    const clients = [...this.pending];
    this.pending.clear();
    for (const client of clients) client.flush?.();
  }

  /** One engine step; whether the loop may step again at once (the engine ran and has work left). */
  private step(): boolean {
    if (!this.engine.hasUnfinished()) return false;
    const before = this.engine.stats;
    const start = performance.now();
    this.inStep = true;
    let outputs = 0;
    try {
      outputs = this.engine.step(this.deferFlush ? { whileDeviceRuns: this.flushPendingFn } : {}).length;
    } catch (e) {
      this.inStep = false;
      this.failAll(e instanceof Error ? e : new Error(String(e)));
    }
    this.inStep = false;
    for (const id of this.deferredAborts.splice(0)) this.engine.abort(id);
    const after = this.engine.stats;
    if (after.steps > before.steps) {
      this.options.onStep?.({ tokens: after.tokensComputed - before.tokensComputed, sequences: outputs, seconds: (performance.now() - start) / 1000 });
      return this.engine.hasUnfinished();
    }
    if (this.engine.hasUnfinished() && this.numRunning === 0) {
      // Nothing ran and nothing is running: the waiting requests can never be admitted.
      this.failAll(new Error(`no request can be scheduled (${this.numWaiting} waiting, ${this.engine.cache.allocator.numFree} of ${this.engine.cache.numBlocks} cache blocks free)`));
    }
    return false;
  }

  private failAll(e: Error): void {
    this.flushPending();
    const clients = [...this.clients];
    this.clients.clear();
    for (const [id, client] of clients) {
      client.onError(e);
      this.engine.abort(id);
    }
  }
}
