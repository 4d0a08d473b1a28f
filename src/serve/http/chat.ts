/**
 * POST /v1/chat/completions. The messages are rendered with the tokenizer's chat template
 * (add_generation_prompt, so the model answers as the assistant) and encoded without added special
 * tokens, as transformers' apply_chat_template does; a folder without a tokenizer or without a
 * chat template gets a 400. Content is a string or a list of text parts (joined by newlines);
 * 'developer' is OpenAI's newer name for 'system'. chat_template_kwargs (vLLM's extension) passes
 * template variables such as Qwen3's enable_thinking. Streaming sends each choice's role first,
 * then `delta.content` pieces; logprobs/top_logprobs use the chat shape. Tools and structured
 * output are not supported and say so.
 */
import type { ServerResponse } from 'node:http';
import type { ChatMessage } from '../../io/tokenizer.js';
import type { SampledToken } from '../sampling-params.js';
import type { ChoiceDecoder, ChoiceDelta } from './choice.js';
import { checkModel, type EndpointContext, needTokenizer, newId, nowSeconds, tokenText } from './context.js';
import { badRequest } from './errors.js';
import { type Body, checkKnownFields, optBoolean, optNumber, optObject, show } from './fields.js';
import { Generation, type Usage } from './generation.js';
import { checkPromptLength, COMMON_FIELDS, readCommon, resolveMaxTokens } from './params.js';
import { type Formatter, respond } from './respond.js';

const FIELDS = new Set([
  ...COMMON_FIELDS,
  'messages',
  'max_completion_tokens',
  'logprobs',
  'top_logprobs',
  'chat_template_kwargs',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
]);
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
/** Message fields passed on to the template besides role and content. */
const PASSED = ['name', 'tool_call_id', 'reasoning_content'];
const MAX_TOP_LOGPROBS = 20;

function readContent(m: Body, i: number): string {
  const c = m.content;
  const where = `messages[${i}].content`;
  if (typeof c === 'string') return c;
  if ((c === undefined || c === null) && m.role === 'assistant') return '';
  if (!Array.isArray(c)) throw badRequest(where, `${where} must be a string or an array of text parts, got ${show(c)}`);
  return c
    .map((part: unknown, k) => {
      const p = part as Body;
      if (typeof p !== 'object' || p === null || p.type !== 'text' || typeof p.text !== 'string') {
        const type = typeof p === 'object' && p !== null ? p.type : undefined;
        throw badRequest(`${where}[${k}]`, typeof type === 'string' && type !== 'text' ? `${where}[${k}]: content parts of type '${type}' are not supported (text only)` : `${where}[${k}] must be { type: 'text', text: string }, got ${show(p)}`);
      }
      return p.text;
    })
    .join('\n');
}

function readMessages(body: Body): ChatMessage[] {
  const v = body.messages;
  if (!Array.isArray(v) || v.length === 0) throw badRequest('messages', `messages must be a non-empty array of { role, content }, got ${show(v)}`);
  return v.map((raw: unknown, i) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw badRequest(`messages[${i}]`, `messages[${i}] must be an object { role, content }, got ${show(raw)}`);
    const m = raw as Body;
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      throw badRequest(`messages[${i}].role`, `messages[${i}].role must be one of ${[...ROLES].join(', ')}, got ${show(m.role)}`);
    }
    if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) throw badRequest(`messages[${i}].tool_calls`, 'tool calls are not supported by this server');
    const out: ChatMessage = { role: m.role === 'developer' ? 'system' : m.role, content: readContent(m, i) };
    for (const k of PASSED) {
      if (m[k] === undefined || m[k] === null) continue;
      if (typeof m[k] !== 'string') throw badRequest(`messages[${i}].${k}`, `messages[${i}].${k} must be a string, got ${show(m[k])}`);
      out[k] = m[k];
    }
    return out;
  });
}

function checkUnsupported(body: Body): void {
  if (Array.isArray(body.tools) ? body.tools.length > 0 : body.tools !== undefined && body.tools !== null) throw badRequest('tools', 'tools are not supported by this server');
  if (body.tool_choice !== undefined && body.tool_choice !== null && body.tool_choice !== 'none') throw badRequest('tool_choice', 'tool_choice is not supported by this server (only "none")');
  const rf = optObject(body, 'response_format');
  if (rf !== undefined && rf.type !== 'text') throw badRequest('response_format', `response_format ${show(rf.type)} is not supported by this server (only "text")`);
  optBoolean(body, 'parallel_tool_calls');
}

interface ChatLogprob {
  token: string;
  logprob: number | null;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

function chatLogprobs(ctx: EndpointContext, ids: readonly number[], tokens: readonly SampledToken[]): { content: ChatLogprob[] } {
  const entry = (id: number): { token: string; bytes: number[] } => {
    const token = tokenText(ctx.tokenizer, id);
    return { token, bytes: [...Buffer.from(token, 'utf8')] };
  };
  return {
    content: ids.map((id, i) => ({
      ...entry(id),
      logprob: tokens[i]?.logprob ?? null,
      top_logprobs: (tokens[i]?.top ?? []).map((a) => ({ ...entry(a.id), logprob: a.logprob })),
    })),
  };
}

export function handleChat(ctx: EndpointContext, body: Body, res: ServerResponse, arrival: number): Promise<void> {
  checkKnownFields(body, FIELDS, '/v1/chat/completions');
  checkModel(body, ctx.modelName);
  const common = readCommon(body, ctx.vocabSize, ['max_completion_tokens', 'max_tokens']);
  checkUnsupported(body);
  const wantLogprobs = optBoolean(body, 'logprobs') ?? false;
  const top = optNumber(body, 'top_logprobs', { min: 0, max: MAX_TOP_LOGPROBS, integer: true });
  if (top !== undefined && !wantLogprobs) throw badRequest('top_logprobs', 'top_logprobs needs logprobs: true');
  const logprobs = wantLogprobs ? (top ?? 0) : undefined;
  const kwargs = optObject(body, 'chat_template_kwargs');
  const messages = readMessages(body);
  const tokenizer = needTokenizer(ctx, 'messages', 'a chat completion (its chat template)');
  if (!tokenizer.hasChatTemplate) throw badRequest('messages', 'the model folder\'s tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja); use /v1/completions', 'chat_template_missing');
  let text: string;
  try {
    text = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, templateKwargs: kwargs });
  } catch (e) {
    throw badRequest('messages', (e as Error).message, 'chat_template_error');
  }
  const prompt = tokenizer.encode(text, { addSpecialTokens: false });
  checkPromptLength('messages', prompt.length, ctx.maxModelLen);
  // OpenAI's chat default: no limit but the context.
  const maxNewTokens = resolveMaxTokens(common, prompt.length, ctx.maxModelLen, Infinity);
  const params = { ...common.sampling, maxNewTokens, ...(logprobs === undefined ? {} : { logprobs }) };

  const id = newId('chatcmpl');
  const created = nowSeconds();
  const gen = new Generation(ctx.loop, ctx.metrics, arrival, { prompts: [prompt], params: [params], n: common.n, stop: common.stop }, tokenizer, id);
  const head = { id, object: 'chat.completion.chunk', created, model: ctx.modelName };
  const usageNull = common.includeUsage ? { usage: null } : {};
  const fmt: Formatter = {
    opening: (choices) => choices.map((c) => ({ ...head, choices: [{ index: c.index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }], ...usageNull })),
    chunk: (choice: ChoiceDecoder, delta: ChoiceDelta) => ({
      ...head,
      choices: [
        {
          index: choice.index,
          delta: { content: delta.text },
          logprobs: logprobs === undefined ? null : chatLogprobs(ctx, delta.ids, delta.logprobs),
          finish_reason: delta.finishReason,
          token_ids: delta.ids,
        },
      ],
      ...usageNull,
    }),
    usageChunk: (usage: Usage) => ({ ...head, choices: [], usage }),
    response: (choices: readonly ChoiceDecoder[], usage: Usage) => ({
      id,
      object: 'chat.completion',
      created,
      model: ctx.modelName,
      choices: choices.map((c) => ({
        index: c.index,
        message: { role: 'assistant', content: c.text },
        logprobs: logprobs === undefined ? null : chatLogprobs(ctx, c.ids, c.logprobs),
        finish_reason: c.finishReason,
        token_ids: c.ids,
      })),
      usage,
    }),
  };
  return respond(res, gen, common, fmt);
}
