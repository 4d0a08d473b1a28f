/**
 * POST /v1/completions. The prompt is a string, a list of strings (both need a tokenizer), a list
 * of token ids, or a list of such lists; each prompt gets n choices. Every choice carries
 * `token_ids` (the generated ids) beside its text; without a tokenizer the text is empty.
 * `logprobs: k` asks the sampler for each token's logprob and k alternatives (OpenAI's legacy
 * shape: tokens, token_logprobs, top_logprobs, text_offset). max_tokens defaults to 16, as in
 * OpenAI's API. echo, suffix and best_of other than n are refused as unsupported.
 */
import type { ServerResponse } from 'node:http';
import type { SampledToken } from '../sampling-params.js';
import type { ChoiceDecoder, ChoiceDelta } from './choice.js';
import { checkModel, type EndpointContext, needTokenizer, newId, nowSeconds, tokenText } from './context.js';
import { badRequest } from './errors.js';
import { type Body, checkKnownFields, optBoolean, optNumber, optString, show } from './fields.js';
import { Generation, type Usage } from './generation.js';
import { checkPromptLength, COMMON_FIELDS, readCommon, resolveMaxTokens } from './params.js';
import { type Formatter, respond } from './respond.js';

const FIELDS = new Set([...COMMON_FIELDS, 'prompt', 'logprobs', 'echo', 'suffix', 'best_of']);
/** OpenAI's default max_tokens for completions. */
const DEFAULT_MAX_TOKENS = 16;
/** Alternatives per token at most (vLLM's default max_logprobs). */
const MAX_LOGPROBS = 20;

const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'number');

function checkIds(ctx: EndpointContext, ids: readonly number[], where: string): void {
  const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= ctx.vocabSize);
  if (bad >= 0) throw badRequest('prompt', `${where}[${bad}] = ${show(ids[bad])} is not a token id in [0, ${ctx.vocabSize})`);
}

/** The prompts as token ids. */
function readPrompts(ctx: EndpointContext, body: Body): number[][] {
  const v = body.prompt;
  const encode = (text: string, where: string): number[] => {
    const ids = needTokenizer(ctx, 'prompt', 'a text prompt').encode(text);
    if (ids.length === 0) throw badRequest('prompt', `${where} is empty (no tokens)`);
    return ids;
  };
  const shape = 'prompt must be a string, an array of strings, an array of token ids, or an array of arrays of token ids';
  if (v === undefined || v === null) throw badRequest('prompt', `prompt is required: ${shape}`);
  if (typeof v === 'string') return [encode(v, 'prompt')];
  if (!Array.isArray(v) || v.length === 0) throw badRequest('prompt', `${shape} (non-empty), got ${show(v)}`);
  if (v.every((x) => typeof x === 'string')) return v.map((s, i) => encode(s as string, `prompt[${i}]`));
  if (isIds(v)) {
    checkIds(ctx, v, 'prompt');
    return [v];
  }
  if (v.every(isIds)) {
    v.forEach((ids, i) => checkIds(ctx, ids as number[], `prompt[${i}]`));
    return v as number[][];
  }
  throw badRequest('prompt', `${shape}, got ${show(v)}`);
}

interface LegacyLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: Record<string, number>[] | null;
  text_offset: number[];
}

function legacyLogprobs(ctx: EndpointContext, ids: readonly number[], tokens: readonly SampledToken[], startOffset: number): LegacyLogprobs {
  const out: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = startOffset;
  ids.forEach((id, i) => {
    const t = tokens[i];
    const text = tokenText(ctx.tokenizer, id);
    out.tokens.push(text);
    out.token_logprobs.push(t?.logprob ?? null);
    out.top_logprobs!.push(Object.fromEntries((t?.top ?? []).map((a) => [tokenText(ctx.tokenizer, a.id), a.logprob])));
    out.text_offset.push(offset);
    offset += text.length;
  });
  return out;
}

export function handleCompletions(ctx: EndpointContext, body: Body, res: ServerResponse, arrival: number): Promise<void> {
  checkKnownFields(body, FIELDS, '/v1/completions');
  checkModel(body, ctx.modelName);
  const common = readCommon(body, ctx.vocabSize, ['max_tokens']);
  const logprobs = optNumber(body, 'logprobs', { min: 0, max: MAX_LOGPROBS, integer: true });
  if (optBoolean(body, 'echo') === true) throw badRequest('echo', 'echo is not supported by this server');
  if ((optString(body, 'suffix') ?? '') !== '') throw badRequest('suffix', 'suffix is not supported by this server');
  const bestOf = optNumber(body, 'best_of', { min: 1, integer: true });
  if (bestOf !== undefined && bestOf !== common.n) throw badRequest('best_of', `best_of other than n is not supported by this server (best_of ${bestOf}, n ${common.n})`);
  if (common.stop.length > 0) needTokenizer(ctx, 'stop', 'stop strings');
  const prompts = readPrompts(ctx, body);
  const params = prompts.map((p) => {
    checkPromptLength('prompt', p.length, ctx.maxModelLen);
    const maxNewTokens = resolveMaxTokens(common, p.length, ctx.maxModelLen, DEFAULT_MAX_TOKENS);
    return { ...common.sampling, maxNewTokens, ...(logprobs === undefined ? {} : { logprobs }) };
  });

  const id = newId('cmpl');
  const created = nowSeconds();
  const gen = new Generation(ctx.loop, ctx.metrics, arrival, { prompts, params, n: common.n, stop: common.stop }, ctx.tokenizer, id);
  // Streamed logprob offsets continue from the text already sent.
  const sentText = new Map<number, number>();
  const head = { id, object: 'text_completion', created, model: ctx.modelName };
  const fmt: Formatter = {
    opening: () => [],
    chunk: (choice: ChoiceDecoder, delta: ChoiceDelta) => {
      const offset = sentText.get(choice.index) ?? 0;
      const lp = logprobs === undefined ? null : legacyLogprobs(ctx, delta.ids, delta.logprobs, offset);
      if (lp !== null) sentText.set(choice.index, lp.tokens.reduce((s, t) => s + t.length, offset));
      return {
        ...head,
        choices: [{ index: choice.index, text: delta.text, logprobs: lp, finish_reason: delta.finishReason, token_ids: delta.ids }],
        ...(common.includeUsage ? { usage: null } : {}),
      };
    },
    usageChunk: (usage: Usage) => ({ ...head, choices: [], usage }),
    response: (choices: readonly ChoiceDecoder[], usage: Usage) => ({
      ...head,
      choices: choices.map((c) => ({
        index: c.index,
        text: c.text,
        logprobs: logprobs === undefined ? null : legacyLogprobs(ctx, c.ids, c.logprobs, 0),
        finish_reason: c.finishReason,
        token_ids: c.ids,
      })),
      usage,
    }),
  };
  return respond(res, gen, common, fmt);
}
