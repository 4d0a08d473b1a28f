/**
 * What the endpoint handlers share: the engine loop, metrics, the tokenizer (if the model folder
 * has one), the served model's name and context length, and small helpers for ids and tokens.
 */
import { randomUUID } from '../../platform/index.js';
import type { Tokenizer } from '../../io/tokenizer.js';
import type { EngineLoop } from './engine-loop.js';
import { badRequest } from './errors.js';
import { type Body, optString } from './fields.js';
import type { ServerMetrics } from './metrics.js';

export interface EndpointContext {
  readonly loop: EngineLoop;
  readonly metrics: ServerMetrics;
  readonly tokenizer: Tokenizer | undefined;
  /** The name clients pass as `model`. */
  readonly modelName: string;
  /** Prompt plus new tokens at most. */
  readonly maxModelLen: number;
  readonly vocabSize: number;
}

/** 400 unless `model` is absent or names the served model. */
export function checkModel(body: Body, modelName: string): void {
  const m = optString(body, 'model');
  if (m !== undefined && m !== modelName) throw badRequest('model', `the model '${m}' does not exist; this server serves '${modelName}'`, 'model_not_found');
}

/** A response id: `prefix-` and 24 hex digits. */
export function newId(prefix: string): string {
  return `${prefix}-${randomUUID().replace(/-/g, '').slice(0, 24)}`;
}

/** Seconds since the epoch, OpenAI's `created`. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** One token as text for logprobs: its decoded text, or `token_id:N` without a tokenizer (vLLM's form). */
export function tokenText(tokenizer: Tokenizer | undefined, id: number): string {
  return tokenizer === undefined ? `token_id:${id}` : tokenizer.decode([id]);
}

/** 400 naming `param` when there is no tokenizer for what the request asks. */
export function needTokenizer(ctx: EndpointContext, param: string, what: string): Tokenizer {
  if (ctx.tokenizer === undefined) {
    throw badRequest(param, `${what} needs a tokenizer, and the model folder has no tokenizer (tokenizer.json)${param === 'prompt' ? '; send the prompt as token ids instead' : ''}`, 'tokenizer_missing');
  }
  return ctx.tokenizer;
}
