/**
 * Text in, text out (issue #17's text-level helper): `streamText(model, tokenizer, prompt, options)`
 * is an async iterator of text pieces as they are generated, and `generateText` collects them.
 * The prompt is a string (encoded with the tokenizer's special tokens) or chat messages (rendered
 * with its chat template and a generation prompt, then encoded without adding special tokens, as
 * transformers' apply_chat_template(tokenize=True) does). Pieces come from the tokenizer's
 * streaming decoder, so none ends inside a multi-byte character; special tokens are left out. The
 * request ends on the tokenizer's eos ids (unless ignoreEos), stopTokenIds or maxNewTokens.
 *
 * One engine per call, sized for the one request, disposed when the iterator finishes or is left
 * early (break / return), so an abandoned stream frees its cache at once.
 */
import type { ChatMessage, ChatTemplateOptions, Tokenizer } from '../io/tokenizer.js';
import type { StepModel } from '../models/step-kv.js';
import { DEFAULT_MAX_NEW_TOKENS, Engine } from './engine.js';
import { DEFAULT_BLOCK_SIZE } from './kv-cache.js';
import type { Sampler, SamplingParams } from './sampling-params.js';

export interface TextOptions extends Omit<SamplingParams, 'stop' | 'logprobs'> {
  /** Picks tokens (default: the engine's LogitsSampler). */
  sampler?: Sampler;
  /** Options of the chat template (chat prompts only), e.g. { enableThinking: false }. */
  chatTemplate?: ChatTemplateOptions;
}

/** The prompt's token ids: a string as is, chat messages through the chat template. */
export function promptIds(tokenizer: Tokenizer, prompt: string | readonly ChatMessage[], chatTemplate: ChatTemplateOptions = {}): number[] {
  if (typeof prompt === 'string') return tokenizer.encode(prompt);
  if (!Array.isArray(prompt) || prompt.length === 0) throw new TypeError(`streamText: prompt must be a string or a non-empty array of chat messages, got ${JSON.stringify(prompt)}`);
  const text = tokenizer.applyChatTemplate(prompt, { addGenerationPrompt: true, ...chatTemplate });
  return tokenizer.encode(text, { addSpecialTokens: false });
}

/** Generated text, piece by piece (each piece is what the step's new token completed). */
export async function* streamText(model: StepModel, tokenizer: Tokenizer, prompt: string | readonly ChatMessage[], options: TextOptions = {}): AsyncGenerator<string, void, undefined> {
  const { sampler, chatTemplate, ...params } = options;
  const ids = promptIds(tokenizer, prompt, chatTemplate);
  const maxNew = params.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
  const total = Math.min(ids.length + maxNew, model.maxPositions);
  const engine = new Engine(model, { sampler, eosTokenIds: tokenizer.eosTokenIds, numBlocks: Math.ceil(total / DEFAULT_BLOCK_SIZE), maxNumSeqs: 1 });
  const decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true });
  try {
    const id = engine.addRequest(ids, { ...params, maxNewTokens: maxNew });
    while (engine.hasUnfinished()) {
      let piece = '';
      for (const o of engine.step()) if (o.requestId === id) for (const t of o.newIds) piece += decoder.push(t);
      if (piece !== '') yield piece;
    }
    const rest = decoder.flush();
    if (rest !== '') yield rest;
  } finally {
    engine.dispose();
  }
}

/** The whole generated text (streamText's pieces joined). */
export async function generateText(model: StepModel, tokenizer: Tokenizer, prompt: string | readonly ChatMessage[], options: TextOptions = {}): Promise<string> {
  let text = '';
  for await (const piece of streamText(model, tokenizer, prompt, options)) text += piece;
  return text;
}
