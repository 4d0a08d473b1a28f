/**
 * One HTTP generation request in the engine: n choices per prompt, each its own engine request
 * (choice index = prompt index * n + j, as OpenAI numbers them; with a seed, choice j of a prompt
 * uses seed + j so the choices differ). It submits them together through the engine loop, feeds
 * each output to its ChoiceDecoder, reports every delta, aborts the engine request of a choice that
 * a stop string ended, and reports the end once all choices are done. cancel() (the client went
 * away) aborts whatever is unfinished. Token counts and the time to first token go to the metrics.
 */
import type { Tokenizer } from '../../io/tokenizer.js';
import type { RequestOutput } from '../engine.js';
import type { SamplingParams } from '../sampling-params.js';
import { type ChoiceDelta, ChoiceDecoder } from './choice.js';
import type { EngineLoop, LoopRequest } from './engine-loop.js';
import type { ServerMetrics } from './metrics.js';
import { engineRequestError } from './params.js';

export interface GenerationSpec {
  readonly prompts: readonly (readonly number[])[];
  /** Sampling params per prompt (maxNewTokens depends on the prompt's length). */
  readonly params: readonly SamplingParams[];
  readonly n: number;
  readonly stop: readonly string[];
}

export interface GenerationEvents {
  onDelta(choice: ChoiceDecoder, delta: ChoiceDelta): void;
  /** Every choice has finished, or the engine failed (`error`). Called once. */
  onDone(error?: Error): void;
  /** Send the deltas reported since the last flush (the engine loop's slice of steps ended). */
  onFlush?(): void;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export class Generation {
  readonly choices: ChoiceDecoder[] = [];
  private readonly byRequest = new Map<string, ChoiceDecoder>();
  private events: GenerationEvents | undefined;
  private done = false;
  private sawToken = false;

  constructor(
    private readonly loop: EngineLoop,
    private readonly metrics: ServerMetrics,
    /** performance.now() when the HTTP request arrived. */
    private readonly arrival: number,
    private readonly spec: GenerationSpec,
    tokenizer: Tokenizer | undefined,
    idPrefix: string,
  ) {
    spec.prompts.forEach((prompt, p) => {
      for (let j = 0; j < spec.n; j++) {
        const index = p * spec.n + j;
        const choice = new ChoiceDecoder(index, `${idPrefix}-${index}`, prompt, tokenizer, spec.stop);
        this.choices.push(choice);
        this.byRequest.set(choice.requestId, choice);
      }
    });
  }

  get usage(): Usage {
    const prompt = this.spec.prompts.reduce((s, p) => s + p.length, 0);
    const completion = this.choices.reduce((s, c) => s + c.ids.length, 0);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }

  /** Submits every choice; throws (429, 400, 503) without having started any if one is refused. */
  start(events: GenerationEvents): void {
    this.events = events;
    const requests: LoopRequest[] = this.choices.map((c) => {
      const p = Math.floor(c.index / this.spec.n);
      const j = c.index % this.spec.n;
      const base = this.spec.params[p]!;
      const params = j > 0 && base.seed !== undefined ? { ...base, seed: base.seed + j } : base;
      return { requestId: c.requestId, promptIds: c.promptIds, params };
    });
    try {
      this.loop.submit(requests, { onOutput: (o) => this.onOutput(o), onError: (e) => this.onError(e), flush: () => this.events?.onFlush?.() });
    } catch (e) {
      throw engineRequestError(e);
    }
    this.metrics.promptTokens.inc({}, this.usage.prompt_tokens);
  }

  /** Aborts the unfinished choices (their final outputs still arrive, with finish 'abort'). */
  cancel(): void {
    for (const c of this.choices) if (!c.finished) this.loop.abort(c.requestId);
  }

  private onOutput(o: RequestOutput): void {
    const choice = this.byRequest.get(o.requestId);
    const delta = choice?.accept(o);
    if (choice === undefined || delta === null || delta === undefined) return;
    if (delta.ids.length > 0) {
      this.metrics.generationTokens.inc({}, delta.ids.length);
      if (!this.sawToken) {
        this.sawToken = true;
        this.metrics.timeToFirstToken.observe((performance.now() - this.arrival) / 1000);
      }
    }
    if (delta.stopStringHit) this.loop.abort(choice.requestId);
    this.events?.onDelta(choice, delta);
    if (!this.done && this.choices.every((c) => c.finished)) {
      this.done = true;
      this.events?.onDone();
    }
  }

  private onError(e: Error): void {
    for (const c of this.choices) c.fail();
    if (this.done) return;
    this.done = true;
    this.events?.onDone(e);
  }
}
