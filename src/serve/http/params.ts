/**
 * The request fields /v1/completions and /v1/chat/completions share, read into the engine's
 * SamplingParams (sampling-params.ts) plus what the HTTP layer handles itself (streaming, n, stop
 * strings, the token limit). OpenAI's ranges are kept (temperature [0, 2], penalties [-2, 2],
 * top_p (0, 1]); top_k, min_p, repetition_penalty, stop_token_ids and ignore_eos are vLLM's
 * extensions. temperature 0 means greedy (doSample false); any other temperature, including the
 * default 1, asks the sampler to sample, so a greedy-only sampler refuses it with its own message.
 * Options at their neutral value are left out, so a sampler only ever sees what was asked.
 */
import type { SamplingParams } from '../sampling-params.js';
import { ApiError, badRequest } from './errors.js';
import { type Body, optBoolean, optNumber, optObject, show } from './fields.js';

/** Choices per request at most (each is one engine request). */
export const MAX_N = 128;
/** Stop strings per request at most. */
export const MAX_STOP = 16;

export interface CommonParams {
  readonly stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage. */
  readonly includeUsage: boolean;
  readonly n: number;
  /** The requested limit on new tokens and the field it came from, if any. */
  readonly maxTokens: number | undefined;
  readonly maxTokensParam: string;
  /** Everything but maxNewTokens and logprobs, which depend on the prompt and the endpoint. */
  readonly sampling: SamplingParams;
  /** Stop strings, matched by the server on the detokenized text. */
  readonly stop: readonly string[];
}

/** Fields read by readCommon (endpoints add their own). */
export const COMMON_FIELDS: readonly string[] = [
  'model',
  'stream',
  'stream_options',
  'n',
  'max_tokens',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'seed',
  'stop',
  'stop_token_ids',
  'ignore_eos',
  'logit_bias',
  'user',
];

function readStop(body: Body): string[] {
  const v = body.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.length > MAX_STOP || !list.every((s) => typeof s === 'string' && s.length > 0)) {
    throw badRequest('stop', `stop must be a non-empty string or an array of at most ${MAX_STOP} non-empty strings, got ${show(v)}`);
  }
  return list as string[];
}

function readStopIds(body: Body, vocabSize: number): number[] | undefined {
  const v = body.stop_token_ids;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((id) => Number.isInteger(id) && id >= 0 && id < vocabSize)) {
    throw badRequest('stop_token_ids', `stop_token_ids must be an array of token ids in [0, ${vocabSize}), got ${show(v)}`);
  }
  return v as number[];
}

/** The shared fields; `maxTokensFields` lists the names the endpoint accepts for the limit, in precedence order. */
export function readCommon(body: Body, vocabSize: number, maxTokensFields: readonly string[]): CommonParams {
  const stream = optBoolean(body, 'stream') ?? false;
  const options = optObject(body, 'stream_options');
  if (options !== undefined && !stream) throw badRequest('stream_options', 'stream_options is only allowed when stream is true');
  let includeUsage = false;
  if (options !== undefined) {
    for (const k of Object.keys(options)) {
      if (k !== 'include_usage') throw badRequest(`stream_options.${k}`, `unrecognized stream option: ${k}`, 'unknown_parameter');
    }
    const v = options.include_usage;
    if (v !== undefined && v !== null && typeof v !== 'boolean') throw badRequest('stream_options.include_usage', `stream_options.include_usage must be a boolean, got ${show(v)}`);
    includeUsage = v === true;
  }
  const n = optNumber(body, 'n', { min: 1, max: MAX_N, integer: true }) ?? 1;
  let maxTokens: number | undefined;
  let maxTokensParam = maxTokensFields[0]!;
  for (const f of maxTokensFields) {
    const v = optNumber(body, f, { min: 1, integer: true });
    if (v !== undefined && maxTokens === undefined) {
      maxTokens = v;
      maxTokensParam = f;
    }
  }

  const temperature = optNumber(body, 'temperature', { min: 0, max: 2 }) ?? 1;
  const sampling: SamplingParams = { doSample: temperature !== 0 };
  const set = <K extends keyof SamplingParams>(k: K, v: SamplingParams[K] | undefined, neutral?: SamplingParams[K]): void => {
    if (v !== undefined && v !== neutral) sampling[k] = v;
  };
  if (temperature !== 0) set('temperature', temperature);
  set('topP', optNumber(body, 'top_p', { min: 0, max: 1, minExclusive: true }), 1);
  // vLLM: -1 (and 0) turn top-k off.
  const topK = optNumber(body, 'top_k', { min: -1, integer: true });
  if (topK !== undefined && topK > 0) sampling.topK = topK;
  set('minP', optNumber(body, 'min_p', { min: 0, max: 1 }), 0);
  set('presencePenalty', optNumber(body, 'presence_penalty', { min: -2, max: 2 }), 0);
  set('frequencyPenalty', optNumber(body, 'frequency_penalty', { min: -2, max: 2 }), 0);
  set('repetitionPenalty', optNumber(body, 'repetition_penalty', { min: 0, minExclusive: true }), 1);
  set('seed', optNumber(body, 'seed', { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, integer: true }));
  set('stopTokenIds', readStopIds(body, vocabSize));
  set('ignoreEos', optBoolean(body, 'ignore_eos'), false);

  const bias = optObject(body, 'logit_bias');
  if (bias !== undefined && Object.keys(bias).length > 0) throw badRequest('logit_bias', 'logit_bias is not supported by this server');
  const user = body.user;
  if (user !== undefined && user !== null && typeof user !== 'string') throw badRequest('user', `user must be a string, got ${show(user)}`);

  return { stream, includeUsage, n, maxTokens, maxTokensParam, sampling, stop: readStop(body) };
}

/**
 * New tokens for a prompt of `promptLen` tokens: the request's limit, which must fit in the
 * context with the prompt, or `fallback` capped to what is left of the context.
 */
export function resolveMaxTokens(common: CommonParams, promptLen: number, maxModelLen: number, fallback: number): number {
  const room = maxModelLen - promptLen;
  if (common.maxTokens === undefined) return Math.min(fallback, room);
  if (common.maxTokens > room) {
    throw badRequest(
      common.maxTokensParam,
      `${common.maxTokensParam} = ${common.maxTokens} is too large: the prompt has ${promptLen} tokens and the model's context is ${maxModelLen} tokens, so at most ${room} can be generated`,
      'context_length_exceeded',
    );
  }
  return common.maxTokens;
}

/** 400 when a prompt leaves no room for a new token. */
export function checkPromptLength(param: string, promptLen: number, maxModelLen: number): void {
  if (promptLen >= maxModelLen) {
    throw badRequest(param, `the prompt has ${promptLen} tokens, but the model's context is ${maxModelLen} tokens (the prompt must leave room for at least one new token)`, 'context_length_exceeded');
  }
}

/** SamplingParams keys as the request fields they come from. */
const PARAM_OF: Readonly<Record<string, string>> = {
  doSample: 'temperature',
  temperature: 'temperature',
  topK: 'top_k',
  topP: 'top_p',
  minP: 'min_p',
  repetitionPenalty: 'repetition_penalty',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  seed: 'seed',
  logprobs: 'logprobs',
  stopTokenIds: 'stop_token_ids',
  maxNewTokens: 'max_tokens',
  promptIds: 'prompt',
};

/**
 * An error from Engine.addRequest (the engine or its sampler refusing an option) as a 400 that
 * keeps its message and names the request field the option came from.
 */
export function engineRequestError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  const message = (e instanceof Error ? e.message : String(e)).replace(/^Engine\.addRequest: /, '');
  const key = Object.keys(PARAM_OF)
    .map((k) => ({ k, at: message.search(new RegExp(`\\b${k}\\b`)) }))
    .filter((x) => x.at >= 0)
    .sort((a, b) => a.at - b.at)[0]?.k;
  const param = key === undefined ? null : PARAM_OF[key]!;
  const prefix = key === 'doSample' ? 'a temperature other than 0 asks for sampling, which the server\'s sampler refuses: ' : '';
  return badRequest(param, `${prefix}${message}`, 'unsupported_by_sampler');
}
