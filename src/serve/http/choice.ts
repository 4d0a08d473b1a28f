/**
 * One choice of a response: the engine outputs of one request turned into text deltas. Ids are
 * detokenized incrementally (the tokenizer's UTF-8-safe stream decoder, special tokens skipped, as
 * OpenAI and vLLM do by default), then passed through the stop-string matcher, which holds back
 * text that may be the start of a stop string. The token that ends a request by a stop id (eos or
 * stop_token_ids) is kept in the ids but not in the text. Without a tokenizer the text stays empty
 * and only ids flow.
 */
import type { Tokenizer, StreamDecoder } from '../../io/tokenizer.js';
import type { RequestOutput } from '../engine.js';
import type { SampledToken } from '../sampling-params.js';
import { StopMatcher } from './stop-matcher.js';

/** 'stop': eos, a stop id or a stop string; 'length': max_tokens or the context; 'abort': cancelled. */
export type ChoiceFinish = 'stop' | 'length' | 'abort';

export interface ChoiceDelta {
  readonly text: string;
  /** The ids this delta adds. */
  readonly ids: readonly number[];
  /** The sampler's logprobs for `ids`, when the request asked for them. */
  readonly logprobs: readonly SampledToken[];
  readonly finishReason: ChoiceFinish | null;
  /** A stop string ended the choice: its engine request must be aborted. */
  readonly stopStringHit: boolean;
}

export class ChoiceDecoder {
  readonly ids: number[] = [];
  readonly logprobs: SampledToken[] = [];
  /** All text emitted so far. */
  text = '';
  finishReason: ChoiceFinish | null = null;
  private readonly decoder: StreamDecoder | undefined;
  private readonly matcher: StopMatcher;

  constructor(
    readonly index: number,
    readonly requestId: string,
    readonly promptIds: readonly number[],
    tokenizer: Tokenizer | undefined,
    stop: readonly string[],
  ) {
    this.decoder = tokenizer?.createStreamDecoder({ skipSpecialTokens: true });
    this.matcher = new StopMatcher(stop);
  }

  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** The delta one engine output makes, or null once the choice has finished. */
  accept(o: RequestOutput): ChoiceDelta | null {
    if (this.finished) return null;
    let piece = '';
    o.newIds.forEach((id, i) => {
      this.ids.push(id);
      const endsByStopId = o.finishReason === 'stop' && i === o.newIds.length - 1;
      if (this.decoder !== undefined && !endsByStopId) piece += this.decoder.push(id);
    });
    if (o.logprobs !== undefined) this.logprobs.push(...o.logprobs);
    if (o.finished && this.decoder !== undefined) piece += this.decoder.flush();
    const r = this.matcher.push(piece);
    let text = r.text;
    if (r.stopped) this.finishReason = 'stop';
    else if (o.finished) {
      this.finishReason = o.finishReason ?? 'abort';
      text += this.matcher.flush();
    }
    this.text += text;
    return { text, ids: o.newIds, logprobs: o.logprobs ?? [], finishReason: this.finishReason, stopStringHit: r.stopped && !o.finished };
  }

  /** Ends the choice without an engine output (the engine failed). */
  fail(): void {
    if (!this.finished) this.finishReason = 'abort';
  }
}
