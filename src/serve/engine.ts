/**
 * The generation engine: requests in, tokens out, one scheduler iteration per step().
 *
 *   addRequest(promptIds, params) -> id      queue a request (validated here, not mid-step)
 *   step() -> outputs                        schedule (scheduler.ts), run the model once over the
 *                                            step's flat tokens with the paged cache
 *                                            (step-context.ts), sample one token per sequence whose
 *                                            tokens are all cached, append, finish on max tokens /
 *                                            stop ids / length, release finished requests' blocks
 *   stream(id), onOutput                     per-request outputs as they come
 *   abort(id)                                release at once
 *   generateAll(prompts, params)             many prompts to completion
 *
 * Each step runs inside noGrad and kiln.scope: every tensor it makes (indices, masks, activations,
 * logits) is freed when it returns, so a long decode loop holds only the cache and the weights.
 * The sampler is pluggable (sampling-params.ts' Sampler); the default is LogitsSampler (sampler.ts:
 * greedy unless doSample, temperature, top-k/p, min-p, penalties, seeds, logprobs).
 *
 * Async steps (EngineOptions.asyncSteps): step() launches the next step and then reads the one
 * launched by the previous call (an Inflight). When the batch stays the same, the next step is a
 * continuation: the decode runner copies the in-flight step's sampled ids (still on the device)
 * into its input ids, positions are the sequences' lengths, and a block is allocated ahead where a
 * sequence crosses into one. The continuation's entries are committed (numComputed, prefix hashes)
 * only after the read, when the tokens they hash are on the host. A row whose sequence finished
 * or was aborted meanwhile is dropped at the read; nothing else reads its extra key/value (the
 * blocks go back with the request; the slot is in its last, unregistered block). Whenever the
 * batch would change, the in-flight step is read first and the step is scheduled as usual.
 */
import { tensor } from '../api/data.js';
import { cat, indexSelect } from '../api/indexing.js';
import type { Tensor } from '../tensor/tensor.js';
import { noGrad } from '../autograd/index.js';
import type { StepModel } from '../models/step-kv.js';
import { scope } from '../tensor/scope.js';
import { LogitsSampler } from './sampler.js';
import { validateSamplingParams } from './sampling-validate.js';
import { DEFAULT_BLOCK_SIZE, type KvCacheOptions, PagedKvCache } from './kv-cache.js';
import type { PendingSample, SampledToken, Sampler, SamplingParams, SamplingRow } from './sampling-params.js';
import { hasPenalties } from './penalties.js';
import { getOption, optionSource } from '../runtime/config.js';
import { type ScheduledEntry, Scheduler, type SchedulerOptions } from './scheduler.js';
import { type FinishReason, Sequence } from './sequence.js';
import { PagedStepKv, type StepEntry } from './step-context.js';
import { DECODE_BUCKETS, DecodeRunner, decodeBucket, type DecodePath, type DecodeRow } from './decode-runner.js';
import type { CompileMode } from '../compile/backend.js';

/** Cache size when neither numBlocks nor memoryBytes is given (capped by what maxNumSeqs full-length sequences need). */
export const DEFAULT_CACHE_BYTES = 512 * 1024 * 1024;
/** New tokens per request when params.maxNewTokens is absent. */
export const DEFAULT_MAX_NEW_TOKENS = 16;

/** Options of one Engine.step(). */
export interface StepOptions {
  /**
   * Called once per step while the device computes it: after the step's model and sampling work
   * is queued and before the host waits for the sampled ids (on the cpu, where work runs as it is
   * queued, that is after the compute). Work done here (serve writes the previous step's tokens
   * to its sockets) overlaps a GPU's compute instead of adding to the step. It must not re-enter
   * the engine.
   */
  whileDeviceRuns?: () => void;
}

export interface EngineOptions extends KvCacheOptions, SchedulerOptions {
  /** Picks the tokens (default: a LogitsSampler the engine owns and disposes). */
  sampler?: Sampler;
  /** The model's end-of-sequence ids: they finish every request unless it sets ignoreEos. */
  eosTokenIds?: readonly number[];
  /**
   * How steps in which every sequence adds one token run (decode-runner.ts): 'compiled' (the
   * model's decodeStep under kiln.compile, one program per batch bucket; CUDA graphs on cuda,
   * recorded replays on webgpu), 'eager' (decodeStep op by op) or 'step' (the general forwardStep,
   * as prefill runs). Default: 'compiled' on cuda and webgpu, 'eager' on cpu; 'step' for a model
   * without decodeStep. (On webgpu a compiled Qwen3-0.6B step is about 316 dispatches replayed from
   * one command, where eager issues about 570 one by one from the main thread: issue #20. Each new
   * bucket compiles first, which adds to its first step.)
   */
  decode?: DecodePath;
  /** kiln.compile mode of the compiled decode (default 'reduce-overhead' on cuda and webgpu, 'default' on cpu). */
  decodeMode?: CompileMode;
  /**
   * How prompt tokens (prefill chunks) run: 'rows' puts every new token of the step, prompt or
   * decode, through the decode runner as one row each (its own position, slot, block table and
   * context length = position + 1, so the paged attention of a row is causal attention over the
   * sequence so far): one compiled program per token bucket serves prefill, decode and their mix,
   * captured as a CUDA graph on cuda. 'step' runs them through the model's forwardStep (op by op).
   * Default: 'rows' when decode is 'compiled' (the lm head then runs on every row, cheap on a
   * GPU), else 'step'.
   */
  prefill?: 'rows' | 'step';
  /**
   * Debugging and benchmarks: called with every request added and every step run (its batch
   * composition and host time; see EngineTraceEvent). Off by default; costs nothing when absent.
   */
  trace?: (e: EngineTraceEvent) => void;
  /**
   * Async steps (vLLM's async scheduling; gpt-fast's loop): a decode step is launched before the
   * host has read the previous step's sampled ids, which stay on the device and are copied into
   * the new step's input ids (decode-runner.ts); the host then reads the previous ids while the
   * device runs, so the host's share of a step (the read, streaming, stop checks, bookkeeping,
   * the next launch) no longer leaves the device idle. step() then returns the outputs of the
   * step before the one it launched. A sequence that stopped (eos, stop id) has had one more token
   * computed: it is dropped unread. Steps run synchronously (the previous ids read first) when
   * the batch would change: a request joins, leaves (its length limit is known ahead), is
   * aborted, or needs a block that is not free; or a row has penalties (they need the ids). The
   * tokens are those of synchronous steps, seeded sampling included; unseeded sampling draws from
   * the sampler's generator in the same order unless a dropped row took a draw.
   * Needs the decode runner (decode 'eager' or 'compiled') and a sampler with sampleAsync.
   * Default: on for compiled decode on cuda (an H200 A/B of Qwen3-0.6B bf16 decode measured batch
   * 1 / 8 / 64 at 915 / 5,328 / 23,421 tok/s against 854 / 5,068 / 16,594 synchronous,
   * bench/results/h200-s15-final-2026-12-03.json), off elsewhere (webgpu's reads wait for all
   * queued work, so nothing would overlap; cpu has no device to overlap with); KILN_ASYNC_STEPS=1
   * (or 0) sets the default everywhere.
   */
  asyncSteps?: boolean;
}

/**
 * What EngineOptions.trace sees. Times are performance.now() ms. A step's `ms` is its host time,
 * which on cuda and webgpu includes the wait for the sampled ids (the step's device time).
 */
export type EngineTraceEvent =
  | { readonly kind: 'add'; readonly t: number; readonly requestId: string; readonly promptTokens: number }
  | {
      readonly kind: 'step';
      readonly t: number;
      readonly ms: number;
      /** Prompt tokens computed in the step (prefill chunks; recompute after preemption counts too). */
      readonly prefillTokens: number;
      /** Sequences with a prefill chunk in the step. */
      readonly prefillSeqs: number;
      /** Sequences adding their next token (one each). */
      readonly decodeSeqs: number;
      /** How it ran: 'rows' (every token a decode-runner row), 'decode' (decode runner only), 'step' (forwardStep, with or without decode-runner rows). */
      readonly path: 'rows' | 'decode' | 'step';
      /** Rows the decode runner ran, padded to its bucket (0 when it did not run). */
      readonly bucket: number;
    };

export interface RequestOutput {
  readonly requestId: string;
  readonly promptIds: readonly number[];
  /** Every id generated so far. */
  readonly outputIds: readonly number[];
  /** The ids this output adds (one per step; none in an abort's final output). */
  readonly newIds: readonly number[];
  readonly finished: boolean;
  readonly finishReason: FinishReason | null;
  /** Prompt tokens taken from the prefix cache at the latest admission. */
  readonly numCachedTokens: number;
  /** The sampler's answer for each of newIds (logprob, top alternatives), when the request asked for logprobs. */
  readonly logprobs?: readonly SampledToken[];
}

export interface AddRequestOptions {
  /** Defaults to a fresh numeric id. */
  requestId?: string;
  /** Called with each output of this request (new token, finish, abort). */
  onOutput?: (out: RequestOutput) => void;
}

/** A step whose sampled ids the host has not read yet (asyncSteps). */
interface Inflight {
  /** The sequences that sample in it, in the row order of `pending`. */
  readonly sampling: readonly Sequence[];
  readonly pending: PendingSample;
  /** Rows to drop unread: their input id was redrawn on the host after the step was launched. */
  readonly discard: Set<Sequence>;
  /** A continuation's entries: committed once the tokens before them are on the host (prefix hashes). */
  readonly uncommitted: readonly ScheduledEntry[];
}

interface Request {
  readonly seq: Sequence;
  readonly onOutput?: (out: RequestOutput) => void;
  /** Outputs not yet taken by a stream() consumer (made on the first stream() call). */
  queue?: RequestOutput[];
}

export interface EngineStats {
  steps: number;
  /** Of the steps, those in which the decode runner ran (sequences adding their next token). */
  decodeSteps: number;
  /** Of the steps, those that ran prompt tokens through the decode runner as rows (prefill 'rows'). */
  rowsSteps: number;
  /** Of the decode steps, those launched before the previous step's ids were read (asyncSteps). */
  stepsAhead: number;
  /** Tokens run through the model (prefill and decode). */
  tokensComputed: number;
  tokensGenerated: number;
  numPreemptions: number;
  prefixHitTokens: number;
}

export class Engine {
  readonly cache: PagedKvCache;
  readonly scheduler: Scheduler;
  readonly sampler: Sampler;
  private readonly ownSampler: LogitsSampler | null;
  readonly eosTokenIds: readonly number[];
  private readonly requests = new Map<string, Request>();
  private nextId = 0;
  private readonly counters = { steps: 0, tokensComputed: 0, tokensGenerated: 0, decodeSteps: 0, rowsSteps: 0, stepsAhead: 0 };
  /** Runs the all-decode steps on the device (null: decode: 'step'). */
  readonly decodeRunner: DecodeRunner | null;
  /** Whether prompt tokens run through the decode runner too (EngineOptions.prefill 'rows'). */
  readonly prefillRows: boolean;
  private readonly trace: ((e: EngineTraceEvent) => void) | undefined;
  /** Whether steps run ahead of the host's read (EngineOptions.asyncSteps, when the runner and sampler allow). */
  readonly asyncSteps: boolean;
  /** The launched step not read yet (asyncSteps). */
  private inflight: Inflight | null = null;

  constructor(
    readonly model: StepModel,
    options: EngineOptions = {},
  ) {
    const g = model.kvGeometry();
    const memoryBytes = options.memoryBytes;
    let numBlocks = options.numBlocks;
    if (numBlocks === undefined && memoryBytes === undefined) {
      const bs = options.blockSize ?? DEFAULT_BLOCK_SIZE;
      const wanted = (options.maxNumSeqs ?? 64) * Math.ceil(model.maxPositions / bs);
      numBlocks = Math.max(1, Math.min(wanted, Math.floor(DEFAULT_CACHE_BYTES / PagedKvCache.bytesPerBlock(g, bs))));
    }
    this.cache = new PagedKvCache(g, { blockSize: options.blockSize, numBlocks, memoryBytes, prefixCaching: options.prefixCaching });
    this.scheduler = new Scheduler(this.cache, options);
    this.ownSampler = options.sampler === undefined ? new LogitsSampler() : null;
    this.sampler = options.sampler ?? this.ownSampler!;
    this.eosTokenIds = [...(options.eosTokenIds ?? [])];
    for (const id of this.eosTokenIds) this.checkTokenId('Engine', 'eosTokenIds', id);
    const path = options.decode ?? (model.decodeStep === undefined ? 'step' : g.device.type === 'cuda' || g.device.type === 'webgpu' ? 'compiled' : 'eager');
    if (path !== 'step' && path !== 'eager' && path !== 'compiled') throw new Error(`Engine: options.decode must be 'compiled', 'eager' or 'step', got ${JSON.stringify(path)}`);
    if (path !== 'step' && model.decodeStep === undefined) throw new Error(`Engine: options.decode '${path}' needs a model with decodeStep; this one has only forwardStep (use decode: 'step')`);
    this.decodeRunner = path === 'step' ? null : new DecodeRunner(model, this.cache, path, { mode: options.decodeMode });
    const prefill = options.prefill ?? (path === 'compiled' ? 'rows' : 'step');
    if (prefill !== 'rows' && prefill !== 'step') throw new Error(`Engine: options.prefill must be 'rows' or 'step', got ${JSON.stringify(prefill)}`);
    if (prefill === 'rows' && path === 'step') throw new Error(`Engine: options.prefill 'rows' runs prompts through the decode runner, which decode: 'step' does not have`);
    this.prefillRows = prefill === 'rows';
    this.trace = options.trace;
    // The environment (or setOption) decides when set; else the measured default: cuda compiled decode.
    const wantAsync = options.asyncSteps ?? (optionSource('KILN_ASYNC_STEPS') === 'default' ? g.device.type === 'cuda' && path === 'compiled' : getOption('KILN_ASYNC_STEPS'));
    if (typeof wantAsync !== 'boolean') throw new Error(`Engine: options.asyncSteps must be a boolean, got ${JSON.stringify(wantAsync)}`);
    this.asyncSteps = wantAsync && this.decodeRunner !== null && this.sampler.sampleAsync !== undefined;
  }

  /** Longest sequence (prompt + output) a request can reach: model positions or cache capacity. */
  get maxLength(): number {
    return Math.min(this.model.maxPositions, this.cache.capacityTokens);
  }

  get stats(): EngineStats {
    return { ...this.counters, numPreemptions: this.scheduler.numPreemptions, prefixHitTokens: this.scheduler.numPrefixHitTokens };
  }

  hasUnfinished(): boolean {
    return this.scheduler.numUnfinished > 0;
  }

  /** Queues a request; returns its id. Bad prompts and options fail here, naming the value. */
  addRequest(promptIds: readonly number[], params: SamplingParams = {}, options: AddRequestOptions = {}): string {
    const fn = 'Engine.addRequest';
    if (!Array.isArray(promptIds) || promptIds.length === 0) throw new Error(`${fn}: promptIds must be a non-empty array of token ids, got ${JSON.stringify(promptIds)}`);
    promptIds.forEach((id, i) => this.checkTokenId(fn, `promptIds[${i}]`, id));
    if (promptIds.length >= this.maxLength) {
      throw new Error(`${fn}: a prompt of ${promptIds.length} tokens leaves no room for a new token (at most ${this.maxLength}: ${this.model.maxPositions} model positions, ${this.cache.capacityTokens} cache slots)`);
    }
    const maxNew = params.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
    if (!Number.isInteger(maxNew) || maxNew < 1) throw new Error(`${fn}: maxNewTokens must be a positive integer, got ${maxNew}`);
    if (params.stop !== undefined && params.stop.length > 0) throw new Error(`${fn}: stop strings ${JSON.stringify(params.stop)} need a detokenizer, which the engine does not have yet; use stopTokenIds`);
    (params.stopTokenIds ?? []).forEach((id, i) => this.checkTokenId(fn, `stopTokenIds[${i}]`, id));
    validateSamplingParams(params, fn);
    this.sampler.check?.(params, fn);
    const requestId = options.requestId ?? String(this.nextId++);
    if (this.requests.has(requestId)) throw new Error(`${fn}: request id '${requestId}' is already in use`);
    const stopIds = new Set([...(params.stopTokenIds ?? []), ...(params.ignoreEos ? [] : this.eosTokenIds)]);
    const seq = new Sequence(requestId, [...promptIds], { ...params }, maxNew, stopIds, this.maxLength);
    this.requests.set(requestId, { seq, onOutput: options.onOutput });
    this.scheduler.add(seq);
    this.trace?.({ kind: 'add', t: performance.now(), requestId, promptTokens: promptIds.length });
    return requestId;
  }

  /** One scheduler iteration; returns the outputs of the requests that got a token or finished. */
  step(options: StepOptions = {}): RequestOutput[] {
    // Called once: by the sampler before its host read, or by runStep before it delivers outputs.
    let hookDue = options.whileDeviceRuns !== undefined;
    const whileDeviceRuns = (): void => {
      if (!hookDue) return;
      hookDue = false;
      options.whileDeviceRuns!();
    };
    if (this.asyncSteps) return this.asyncStep(whileDeviceRuns);
    const { entries } = this.scheduler.schedule();
    if (entries.length === 0) return [];
    if (this.trace === undefined) return this.runStep(entries, whileDeviceRuns, false) as RequestOutput[];
    return this.tracedStep(entries, whileDeviceRuns, this.trace, false) as RequestOutput[];
  }

  /**
   * runStep, reporting the step's composition and time to EngineOptions.trace (with async steps,
   * `ms` is the launch's host time: the read comes in a later call).
   */
  private tracedStep(entries: readonly ScheduledEntry[], whileDeviceRuns: () => void, trace: (e: EngineTraceEvent) => void, async: boolean): RequestOutput[] | Inflight {
    let prefillTokens = 0;
    let prefillSeqs = 0;
    let tokens = 0;
    for (const { seq, numNew } of entries) {
      // A decode entry adds the token sampled last step; anything else is a prefill chunk (a
      // prompt's, or a preempted sequence's recompute).
      const decode = numNew === 1 && seq.numComputed + 1 === seq.length && seq.outputIds.length > 0;
      if (!decode) {
        prefillTokens += numNew;
        prefillSeqs++;
      }
      tokens += numNew;
    }
    const decodeSeqs = entries.length - prefillSeqs;
    const rowsBefore = this.counters.rowsSteps;
    const runnerBefore = this.decodeRunner?.counters.steps ?? 0;
    const t = performance.now();
    const out = this.runStep(entries, whileDeviceRuns, async);
    const ms = performance.now() - t;
    const ran = (this.decodeRunner?.counters.steps ?? 0) > runnerBefore;
    const path = this.counters.rowsSteps > rowsBefore ? 'rows' : ran && prefillSeqs === 0 ? 'decode' : 'step';
    // The runner's rows: every token ('rows') or the decode sequences, padded to the bucket.
    const bucket = !ran ? 0 : decodeBucket(path === 'rows' ? tokens : decodeSeqs);
    trace({ kind: 'step', t, ms, prefillTokens, prefillSeqs, decodeSeqs, path, bucket });
    return out;
  }

  /**
   * One step of the async loop (EngineOptions.asyncSteps): launch the next step, from the
   * in-flight one's ids on the device when the batch stays the same (a continuation), else after
   * reading them; then read the in-flight step while the new one runs. Returns the outputs read.
   */
  private asyncStep(whileDeviceRuns: () => void): RequestOutput[] {
    const outputs: RequestOutput[] = [];
    let prev = this.inflight;
    this.inflight = null;
    let next: Inflight | null = null;
    try {
      if (prev !== null && !this.canContinue(prev)) {
        const done = prev;
        prev = null;
        outputs.push(...this.complete(done).outputs);
      }
      if (prev !== null) {
        next = this.launchContinuation(prev);
      } else {
        const { entries } = this.scheduler.schedule();
        if (entries.length === 0) return outputs;
        const ran = this.trace === undefined ? this.runStep(entries, whileDeviceRuns, true) : this.tracedStep(entries, whileDeviceRuns, this.trace, true);
        if (Array.isArray(ran)) return [...outputs, ...ran];
        next = ran;
      }
      whileDeviceRuns();
      if (prev !== null) {
        const done = prev;
        prev = null;
        const { outputs: read, redrawn } = this.complete(done);
        outputs.push(...read);
        // A row whose input id was redrawn on the host computed from the wrong token: dropped, and
        // its sequence runs that position again in the next (synchronous) step.
        for (const seq of redrawn) next.discard.add(seq);
        this.scheduler.commit(next.uncommitted.filter((e) => e.seq.status === 'running' && !next!.discard.has(e.seq)));
      }
      if (next.sampling.some((seq) => seq.status === 'running' && !next!.discard.has(seq))) this.inflight = next;
      else next.pending.dispose();
      return outputs;
    } catch (e) {
      // Leave no half-read step behind: the requests' state is that of the last completed read.
      prev?.pending.dispose();
      if (next !== null && this.inflight !== next) next.pending.dispose();
      throw e;
    }
  }

  /**
   * Whether the next step can start from `f`'s ids on the device: the same sequences, in the
   * scheduler's order, each adding one token, none ending by length with f's token (known ahead),
   * nobody waiting to join, no penalties, and free blocks for the sequences crossing into a new one.
   */
  private canContinue(f: Inflight): boolean {
    const running = this.scheduler.running;
    const seqs = f.sampling;
    if (seqs.length === 0 || seqs.length !== running.length || f.discard.size > 0) return false;
    if (seqs.length > this.scheduler.maxNumBatchedTokens) return false;
    if (this.scheduler.waiting.length > 0 && running.length < this.scheduler.maxNumSeqs) return false;
    let blocks = 0;
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]!;
      if (seq !== running[i] || seq.status !== 'running' || seq.numComputed !== seq.length) return false;
      if (seq.outputIds.length + 1 >= seq.maxNewTokens || seq.length + 1 >= seq.maxLength) return false;
      if (hasPenalties(seq)) return false;
      blocks += this.cache.blocksFor(seq.length + 1) - seq.blockTable.length;
    }
    return blocks <= this.cache.allocator.numFree;
  }

  /** Launches the decode step after `f`: each sequence's next token is f's sampled id, on the device. */
  private launchContinuation(f: Inflight): Inflight {
    const runner = this.decodeRunner!;
    const seqs = f.sampling;
    // The position of f's token is known (the sequence's length): its block is allocated now.
    for (const seq of seqs) this.cache.grow(seq.blockTable, seq.length + 1);
    const rows: DecodeRow[] = seqs.map((seq) => ({ tokenId: 0, position: seq.length, blockTable: seq.blockTable }));
    const samplingRows: SamplingRow[] = seqs.map((s) => ({ params: s.params, promptIds: s.promptIds, outputIds: s.outputIds, numGenerated: s.outputIds.length + 1 }));
    const t = performance.now();
    const pending = noGrad(() => scope(() => this.sampler.sampleAsync!(runner.run(rows, f.pending.ids), samplingRows)));
    this.trace?.({ kind: 'step', t, ms: performance.now() - t, prefillTokens: 0, prefillSeqs: 0, decodeSeqs: seqs.length, path: 'decode', bucket: decodeBucket(seqs.length) });
    this.counters.steps++;
    this.counters.decodeSteps++;
    this.counters.stepsAhead++;
    this.counters.tokensComputed += seqs.length;
    return { sampling: seqs, pending, discard: new Set(), uncommitted: seqs.map((seq) => ({ seq, numNew: 1 })) };
  }

  /** The host read of `f`: appends each live row's token, finishes those that are done, delivers. */
  private complete(f: Inflight): { outputs: RequestOutput[]; redrawn: Sequence[] } {
    let read: ReturnType<PendingSample['read']>;
    try {
      read = f.pending.read();
    } finally {
      f.pending.dispose();
    }
    const live = f.sampling.map((seq) => seq.status === 'running' && !f.discard.has(seq));
    const outputs = this.append(
      f.sampling.filter((_, i) => live[i]),
      read.tokens.filter((_, i) => live[i]),
    );
    return { outputs, redrawn: read.redrawn.map((r) => f.sampling[r]!) };
  }

  private runStep(entries: readonly ScheduledEntry[], whileDeviceRuns: () => void, async: boolean): RequestOutput[] | Inflight {
    // Sequences adding their next sampled token run through the device-side decode step (one
    // row each); the rest (prefill chunks) through forwardStep, in the same engine step.
    const runner = this.decodeRunner;
    if (runner && this.prefillRows && entries.some((e) => e.numNew !== 1)) {
      const total = entries.reduce((n, e) => n + e.numNew, 0);
      if (total <= DECODE_BUCKETS[DECODE_BUCKETS.length - 1]!) return this.rowsStep(runner, entries, whileDeviceRuns, async);
    }
    const fast = runner ? entries.filter((e) => e.numNew === 1 && e.seq.numComputed + 1 === e.seq.length) : [];
    const fastSet = new Set(fast);
    const rest = fast.length === 0 ? entries : entries.filter((e) => !fastSet.has(e));
    // One-token entries first: they form a single batched attention group (step-context.ts).
    const restOrder: ScheduledEntry[] = [...rest.filter((e) => e.numNew === 1), ...rest.filter((e) => e.numNew !== 1)];
    const order = [...fast, ...restOrder];
    const ids: number[] = [];
    const positions: number[] = [];
    const stepEntries: StepEntry[] = [];
    const logitsRows: number[] = [];
    const sampling: Sequence[] = fast.map((e) => e.seq);
    for (const { seq, numNew } of restOrder) {
      for (let p = seq.numComputed; p < seq.numComputed + numNew; p++) {
        ids.push(seq.tokens[p]!);
        positions.push(p);
      }
      stepEntries.push({ blockTable: seq.blockTable, contextLen: seq.numComputed, numNew });
      // A sequence samples once all its tokens are cached (the end of a prefill, or any decode).
      if (seq.numComputed + numNew === seq.length) {
        logitsRows.push(ids.length - 1);
        sampling.push(seq);
      }
    }
    if (fast.length > 0) this.counters.decodeSteps++;
    this.counters.steps++;
    this.counters.tokensComputed += ids.length + fast.length;
    return this.sampleStep(order, sampling, whileDeviceRuns, async, () => {
      const parts: Tensor[] = [];
      if (fast.length > 0) parts.push(runner!.run(fast.map(({ seq }) => ({ tokenId: seq.tokens[seq.numComputed]!, position: seq.numComputed, blockTable: seq.blockTable }))));
      if (restOrder.length > 0) {
        const kv = new PagedStepKv(this.cache, stepEntries);
        const input = tensor(ids, { dtype: 'int64', device: this.cache.geometry.device });
        const logits = this.model.forwardStep(input, positions, kv, logitsRows);
        if (logitsRows.length > 0) parts.push(logits);
      }
      return parts.length === 0 ? null : parts.length === 1 ? parts[0]! : cat(parts, 0);
    });
  }

  /**
   * Runs a step's model work (`forward`: the sampling rows' logits, or null when no row samples)
   * and its sampling, then commits `entries` (their tokens are cached). Synchronous: reads the ids
   * and returns the outputs. `async` (with rows to sample): leaves the sampling in flight.
   */
  private sampleStep(entries: readonly ScheduledEntry[], sampling: readonly Sequence[], whileDeviceRuns: () => void, async: boolean, forward: () => Tensor | null): RequestOutput[] | Inflight {
    const rows: SamplingRow[] = sampling.map((s) => ({ params: s.params, promptIds: s.promptIds, outputIds: s.outputIds }));
    if (async && sampling.length > 0) {
      const pending = noGrad(() => scope(() => this.sampler.sampleAsync!(forward()!, rows)));
      this.scheduler.commit(entries);
      return { sampling, pending, discard: new Set(), uncommitted: [] };
    }
    const sampled = noGrad(() =>
      scope(() => {
        const logits = forward();
        if (sampling.length === 0) return [];
        return this.sampler.sample(logits!, rows, whileDeviceRuns);
      }),
    );
    this.scheduler.commit(entries);
    whileDeviceRuns();
    return this.append(sampling, sampled);
  }

  /**
   * A step whose every new token, prompt or decode, is one row of the decode runner
   * (EngineOptions.prefill 'rows'): the rows of a sequence's chunk share its block table and see
   * positions 0..own (context length = position + 1), so the runner's paged attention is the
   * causal attention of the chunk over its cached prefix. Logits come back for every row; the
   * rows that sample (each sequence's last token once its prompt is all cached) are selected on
   * the device.
   */
  private rowsStep(runner: DecodeRunner, entries: readonly ScheduledEntry[], whileDeviceRuns: () => void, async: boolean): RequestOutput[] | Inflight {
    const rows: DecodeRow[] = [];
    const pick: number[] = [];
    const sampling: Sequence[] = [];
    for (const { seq, numNew } of entries) {
      for (let p = seq.numComputed; p < seq.numComputed + numNew; p++) rows.push({ tokenId: seq.tokens[p]!, position: p, blockTable: seq.blockTable });
      if (seq.numComputed + numNew === seq.length) {
        pick.push(rows.length - 1);
        sampling.push(seq);
      }
    }
    if (entries.every((e) => e.numNew === 1)) this.counters.decodeSteps++;
    this.counters.steps++;
    this.counters.rowsSteps++;
    this.counters.tokensComputed += rows.length;
    return this.sampleStep(entries, sampling, whileDeviceRuns, async, () => {
      const logits = runner.run(rows);
      if (sampling.length === 0) return null;
      return pick.length === rows.length ? logits : indexSelect(logits, 0, tensor(pick, { dtype: 'int64', device: logits.device }));
    });
  }

  /** Appends each sampling sequence's token, finishes those that are done, delivers the outputs. */
  private append(sampling: readonly Sequence[], sampled: readonly SampledToken[]): RequestOutput[] {
    const outputs: RequestOutput[] = [];
    sampling.forEach((seq, i) => {
      seq.append(sampled[i]!.id);
      this.counters.tokensGenerated++;
      const reason = seq.finishCheck();
      if (reason !== null) this.finish(seq, reason);
      outputs.push(this.output(seq, [sampled[i]!.id], seq.params.logprobs === undefined ? undefined : [sampled[i]!]));
    });
    for (const o of outputs) this.deliver(o);
    return outputs;
  }

  /** Ends a request now and releases its blocks; false if it is unknown or already finished. */
  abort(requestId: string): boolean {
    const req = this.requests.get(requestId);
    if (req === undefined || req.seq.status === 'finished') return false;
    this.finish(req.seq, 'abort');
    this.deliver(this.output(req.seq, []));
    return true;
  }

  /**
   * The request's outputs from this call on (call it before stepping to see every token; each
   * output's outputIds is complete anyway). When nothing is queued the consumer drives the engine
   * itself (one step, then a turn of the event loop), so several streams can be read at once with
   * no background loop: whichever needs a token steps, and every stream gets its share.
   */
  stream(requestId: string): AsyncGenerator<RequestOutput, void, undefined> {
    const req = this.requests.get(requestId);
    if (req === undefined) throw new Error(`Engine.stream: no unfinished request '${requestId}'`);
    // Made now, not when the generator first runs, so steps before the first next() are queued.
    req.queue ??= [];
    return this.drain(req, req.queue);
  }

  private async *drain(req: Request, queue: RequestOutput[]): AsyncGenerator<RequestOutput, void, undefined> {
    for (;;) {
      const o = queue.shift();
      if (o !== undefined) {
        yield o;
        if (o.finished) return;
        continue;
      }
      if (req.seq.status === 'finished') return;
      this.step();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Runs the prompts to completion (with whatever else is queued); final outputs in prompt order. */
  generateAll(prompts: readonly (readonly number[])[], params: SamplingParams | readonly SamplingParams[] = {}): RequestOutput[] {
    if (Array.isArray(params) && params.length !== prompts.length) throw new Error(`Engine.generateAll: ${params.length} params for ${prompts.length} prompts`);
    const finals: (RequestOutput | undefined)[] = new Array<undefined>(prompts.length).fill(undefined);
    prompts.forEach((p, i) => {
      const pi = Array.isArray(params) ? (params as readonly SamplingParams[])[i]! : (params as SamplingParams);
      this.addRequest(p, pi, { onOutput: (o) => (o.finished ? (finals[i] = o) : undefined) });
    });
    while (finals.some((f) => f === undefined)) {
      if (this.step().length === 0 && this.scheduler.running.length === 0 && this.scheduler.waiting.length > 0) {
        throw new Error(`Engine.generateAll: no request can be scheduled (${this.scheduler.waiting.length} waiting, ${this.cache.allocator.numFree} of ${this.cache.numBlocks} blocks free)`);
      }
    }
    return finals as RequestOutput[];
  }

  /** Frees the cache. */
  dispose(): void {
    this.inflight?.pending.dispose();
    this.inflight = null;
    for (const { seq } of this.requests.values()) if (seq.status !== 'finished') this.finish(seq, 'abort');
    this.decodeRunner?.dispose();
    this.cache.dispose();
    this.ownSampler?.dispose();
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    this.scheduler.remove(seq);
    seq.finishReason = reason;
  }

  private output(seq: Sequence, newIds: number[], logprobs?: SampledToken[]): RequestOutput {
    const out: RequestOutput = {
      requestId: seq.id,
      promptIds: seq.promptIds,
      outputIds: [...seq.outputIds],
      newIds,
      finished: seq.status === 'finished',
      finishReason: seq.finishReason,
      numCachedTokens: seq.numCachedTokens,
    };
    return logprobs === undefined ? out : { ...out, logprobs };
  }

  private deliver(o: RequestOutput): void {
    const req = this.requests.get(o.requestId);
    if (req === undefined) return;
    req.queue?.push(o);
    if (o.finished) this.requests.delete(o.requestId);
    req.onOutput?.(o);
  }

  private checkTokenId(fn: string, what: string, id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.model.vocabSize) throw new Error(`${fn}: ${what} = ${id} is not a token id in [0, ${this.model.vocabSize})`);
  }
}
