/**
 * kiln serve's error answers, each in OpenAI's shape `{ error: { message, type, param, code } }`:
 * malformed JSON and non-object bodies (400), bodies over the limit (413), unknown routes (404),
 * wrong methods (405), missing or wrong API keys (401), every class of bad field (400 naming it),
 * text prompts, stop strings and chat without a tokenizer, prompts and max_tokens beyond the
 * context, options the sampler refuses (its message, 400), a full queue (429), and a step that
 * throws (500, or an error event mid-stream) after which the server goes on. Raw fetch where the
 * openai client would not send the request; the client where it shows how errors reach users.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import type { SampledToken, Sampler, SamplingParams, SamplingRow } from '../src/serve/sampling-params.js';
import { chatModel, greedy, qwenTokenizerFolder, sseData, startServer, tinyModel, untilTrue } from './helpers/serve.js';

const model = tinyModel();
const tok = qwenTokenizerFolder();
after(() => tok.cleanup());
const tokenizer = kiln.io.Tokenizer.fromFolder(tok.dir);
const bigModel = chatModel();

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

async function call(url: string, method: string, body?: string | object, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: ErrorJson }> {
  const res = await fetch(url, { method, body: typeof body === 'object' ? JSON.stringify(body) : body, headers: { 'Content-Type': 'application/json', ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as ErrorJson };
}

/** Asserts an OpenAI-shaped error with this status and param (and code, if given); returns its message. */
function expectError(r: { status: number; json: ErrorJson }, status: number, param: string | null, code?: string): string {
  assert.equal(r.status, status, JSON.stringify(r.json));
  const e = r.json.error;
  assert.ok(e !== undefined, `an error body: ${JSON.stringify(r.json)}`);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.equal(e.param, param, e.message);
  if (code !== undefined) assert.equal(e.code, code, e.message);
  return e.message;
}

function assertIdle(server: kiln.serve.KilnServer): void {
  assert.equal(server.engine.hasUnfinished(), false);
  assert.equal(server.engine.cache.allocator.numFree, server.engine.cache.numBlocks);
}

test('malformed JSON and non-object bodies: 400 invalid_json', async () => {
  const { server, url } = await startServer({ model });
  try {
    for (const body of ['{"prompt": [1, 2', '', 'not json', '[1, 2]', '"text"', 'null', '42']) {
      const r = await call(`${url}/v1/completions`, 'POST', body);
      const msg = expectError(r, 400, null, 'invalid_json');
      assert.equal(r.json.error.type, 'invalid_request_error');
      assert.match(msg, /not valid JSON|must be a JSON object/);
    }
    expectError(await call(`${url}/v1/chat/completions`, 'POST', '{"messages": '), 400, null, 'invalid_json');
  } finally {
    await server.close();
  }
});

test('bodies over the limit: 413, declared by Content-Length or found while reading a chunked body', async () => {
  const { server, url } = await startServer({ model, bodyLimit: 4096 });
  try {
    const big = JSON.stringify({ prompt: new Array(5000).fill(1) });
    const msg = expectError(await call(`${url}/v1/completions`, 'POST', big), 413, null, 'request_too_large');
    assert.match(msg, /larger than 4096 bytes/);
    // Chunked (no Content-Length): refused once the bytes read pass the limit.
    const { port } = new URL(url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/completions', method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      for (let i = 0; i < 10; i++) req.write(`{"prompt": [${new Array(400).fill(1).join(',')}]`.slice(0, 1000));
      req.end();
    });
    assert.equal(status, 413);
    // The default limit is 1 MiB.
    const { server: s2, url: u2 } = await startServer({ model });
    try {
      expectError(await call(`${u2}/v1/completions`, 'POST', JSON.stringify({ prompt: [1], user: 'x'.repeat((1 << 20) + 1) })), 413, null, 'request_too_large');
      const ok = await call(`${u2}/v1/completions`, 'POST', JSON.stringify({ prompt: [1], max_tokens: 1, temperature: 0, user: 'x'.repeat(1000) }));
      assert.equal(ok.status, 200, 'the same server answers the next request');
    } finally {
      await s2.close();
    }
  } finally {
    await server.close();
  }
});

test('unknown routes 404, wrong methods 405 with Allow', async () => {
  const { server, url } = await startServer({ model });
  try {
    for (const [method, path] of [
      ['GET', '/'],
      ['GET', '/v1'],
      ['POST', '/v1/embeddings'],
      ['GET', '/v2/models'],
    ]) {
      const r = await call(`${url}${path}`, method!, method === 'POST' ? {} : undefined);
      expectError(r, 404, null, 'not_found');
      assert.equal(r.json.error.type, 'not_found_error');
    }
    for (const [method, path, allow] of [
      ['GET', '/v1/completions', 'POST'],
      ['PUT', '/v1/chat/completions', 'POST'],
      ['POST', '/health', 'GET'],
      ['DELETE', '/v1/models', 'GET'],
      ['POST', '/metrics', 'GET'],
    ]) {
      const r = await call(`${url}${path}`, method!, method === 'GET' ? undefined : {});
      expectError(r, 405, null, 'method_not_allowed');
      assert.equal(r.headers.get('allow'), allow);
    }
  } finally {
    await server.close();
  }
});

test('--api-key: /v1 without the right Bearer key is 401; /health and /metrics stay open; the right key works', async () => {
  const { server, url } = await startServer({ model, apiKey: 'sekret' });
  try {
    const body = { prompt: [1, 2], max_tokens: 2, temperature: 0 };
    for (const headers of [{} as Record<string, string>, { Authorization: 'Bearer wrong' }, { Authorization: 'sekret' }, { Authorization: 'Basic sekret' }, { Authorization: 'Bearer sekret2' }]) {
      const r = await call(`${url}/v1/completions`, 'POST', body, headers);
      expectError(r, 401, null, 'invalid_api_key');
      assert.equal(r.json.error.type, 'authentication_error');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    }
    expectError(await call(`${url}/v1/models`, 'GET'), 401, null, 'invalid_api_key');
    assert.equal((await fetch(`${url}/health`)).status, 200);
    assert.equal((await fetch(`${url}/metrics`)).status, 200);
    const wrong = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const right = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sekret', maxRetries: 0 });
    const r = await right.completions.create({ model: 'kiln', ...body });
    assert.deepEqual((r.choices[0] as unknown as { token_ids: number[] }).token_ids, greedy(model, [1, 2], 2));
  } finally {
    await server.close();
  }
});

test('bad fields of /v1/completions: 400 naming the param', async () => {
  const { server, url } = await startServer({ model, modelName: 'tiny' });
  try {
    const ok = { model: 'tiny', prompt: [1, 2, 3], max_tokens: 2, temperature: 0 };
    const cases: [Record<string, unknown>, string, string?][] = [
      [{ model: 'gpt-4' }, 'model', 'model_not_found'],
      [{ model: 3 }, 'model'],
      [{ prompt: undefined }, 'prompt'],
      [{ prompt: [] }, 'prompt'],
      [{ prompt: [1, 'a'] }, 'prompt'],
      [{ prompt: [[1], []] }, 'prompt'],
      [{ prompt: [1.5] }, 'prompt'],
      [{ prompt: [96] }, 'prompt'],
      [{ prompt: [[1, 2], [-1]] }, 'prompt'],
      [{ prompt: { ids: [1] } }, 'prompt'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ max_tokens: 2.5 }, 'max_tokens'],
      [{ max_tokens: '5' }, 'max_tokens'],
      [{ temperature: 'hot' }, 'temperature'],
      [{ temperature: -0.1 }, 'temperature'],
      [{ temperature: 2.5 }, 'temperature'],
      [{ top_p: 0 }, 'top_p'],
      [{ top_p: 1.5 }, 'top_p'],
      [{ top_k: -2 }, 'top_k'],
      [{ top_k: 1.5 }, 'top_k'],
      [{ min_p: 2 }, 'min_p'],
      [{ presence_penalty: 3 }, 'presence_penalty'],
      [{ frequency_penalty: -2.5 }, 'frequency_penalty'],
      [{ repetition_penalty: 0 }, 'repetition_penalty'],
      [{ seed: 1.5 }, 'seed'],
      [{ seed: 'x' }, 'seed'],
      [{ n: 0 }, 'n'],
      [{ n: 1000 }, 'n'],
      [{ stream: 'yes' }, 'stream'],
      [{ stream_options: { include_usage: true } }, 'stream_options'],
      [{ stream: true, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
      [{ stream: true, stream_options: { other: true } }, 'stream_options.other', 'unknown_parameter'],
      [{ stop: 5 }, 'stop'],
      [{ stop: [''] }, 'stop'],
      [{ stop: new Array(17).fill('x') }, 'stop'],
      [{ stop_token_ids: [-1] }, 'stop_token_ids'],
      [{ stop_token_ids: [96] }, 'stop_token_ids'],
      [{ stop_token_ids: 3 }, 'stop_token_ids'],
      [{ ignore_eos: 1 }, 'ignore_eos'],
      [{ logprobs: 50 }, 'logprobs'],
      [{ logprobs: true }, 'logprobs'],
      [{ logit_bias: { '5': 10 } }, 'logit_bias'],
      [{ echo: true }, 'echo'],
      [{ suffix: 'end' }, 'suffix'],
      [{ best_of: 3 }, 'best_of'],
      [{ user: 5 }, 'user'],
      [{ frobnicate: true }, 'frobnicate', 'unknown_parameter'],
    ];
    for (const [patch, param, code] of cases) {
      const body = { ...ok, ...patch };
      const r = await call(`${url}/v1/completions`, 'POST', body);
      expectError(r, 400, param, code);
      assert.equal(r.json.error.type, 'invalid_request_error');
    }
    // Accepted as OpenAI sends them: nulls, empty logit_bias, best_of = n, user.
    const fine = await call(`${url}/v1/completions`, 'POST', { ...ok, top_p: null, stop: null, logit_bias: {}, best_of: 1, user: 'me', echo: false, suffix: '' });
    assert.equal(fine.status, 200, JSON.stringify(fine.json));
    assertIdle(server);
  } finally {
    await server.close();
  }
});

test('bad fields of /v1/chat/completions: 400 naming the param (messages, roles, content parts, unsupported tools)', async () => {
  const { server, url } = await startServer({ model: bigModel, tokenizer, modelName: 'q' });
  try {
    const ok = { model: 'q', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 };
    const cases: [Record<string, unknown>, string, string?][] = [
      [{ messages: undefined }, 'messages'],
      [{ messages: [] }, 'messages'],
      [{ messages: 'hi' }, 'messages'],
      [{ messages: ['hi'] }, 'messages[0]'],
      [{ messages: [{ content: 'hi' }] }, 'messages[0].role'],
      [{ messages: [{ role: 'user', content: 'a' }, { role: 'wizard', content: 'hi' }] }, 'messages[1].role'],
      [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content[0]'],
      [{ messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0]'],
      [{ messages: [{ role: 'user', content: 'hi', name: 7 }] }, 'messages[0].name'],
      [{ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'x' }] }] }, 'messages[0].tool_calls'],
      [{ model: 'gpt-4o' }, 'model', 'model_not_found'],
      [{ max_completion_tokens: 0 }, 'max_completion_tokens'],
      [{ logprobs: 'yes' }, 'logprobs'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
      [{ tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
      [{ tool_choice: 'auto' }, 'tool_choice'],
      [{ response_format: { type: 'json_object' } }, 'response_format'],
      [{ chat_template_kwargs: 'x' }, 'chat_template_kwargs'],
      [{ prompt: [1] }, 'prompt', 'unknown_parameter'],
    ];
    for (const [patch, param, code] of cases) {
      expectError(await call(`${url}/v1/chat/completions`, 'POST', { ...ok, ...patch }), 400, param, code);
    }
    // Accepted: text parts, developer role, an assistant turn without content, tool_choice none.
    const fine = await call(`${url}/v1/chat/completions`, 'POST', {
      ...ok,
      messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] },
        { role: 'assistant', content: null },
        { role: 'user', content: 'Again.' },
      ],
      tool_choice: 'none',
      response_format: { type: 'text' },
      chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(fine.status, 200, JSON.stringify(fine.json));
  } finally {
    await server.close();
  }
});

test('no tokenizer: text prompts, stop strings and chat are 400s that say the model folder has no tokenizer; ids still work', async () => {
  const { server, url } = await startServer({ model });
  try {
    for (const [path, body, param] of [
      ['/v1/completions', { prompt: 'Hello', max_tokens: 2, temperature: 0 }, 'prompt'],
      ['/v1/completions', { prompt: ['a', 'b'], max_tokens: 2, temperature: 0 }, 'prompt'],
      ['/v1/completions', { prompt: [1, 2], stop: 'x', max_tokens: 2, temperature: 0 }, 'stop'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 }, 'messages'],
    ] as const) {
      const msg = expectError(await call(`${url}${path}`, 'POST', body), 400, param, 'tokenizer_missing');
      assert.match(msg, /model folder has no tokenizer/);
    }
  } finally {
    await server.close();
  }
});

test('context limits: prompts that leave no room and max_tokens beyond the context are 400s (--max-model-len or the config)', async () => {
  const { server, url, client } = await startServer({ model, maxModelLen: 32 });
  try {
    assert.equal(server.maxModelLen, 32);
    const long = new Array(32).fill(1);
    expectError(await call(`${url}/v1/completions`, 'POST', { prompt: long, temperature: 0 }), 400, 'prompt', 'context_length_exceeded');
    expectError(await call(`${url}/v1/completions`, 'POST', { prompt: [[1], long], temperature: 0 }), 400, 'prompt', 'context_length_exceeded');
    const msg = expectError(await call(`${url}/v1/completions`, 'POST', { prompt: new Array(30).fill(1), max_tokens: 3, temperature: 0 }), 400, 'max_tokens', 'context_length_exceeded');
    assert.match(msg, /at most 2 can be generated/);
    // Exactly filling the context is fine; the default of 16 is capped to what is left.
    const full = await client.completions.create({ model: 'kiln', prompt: new Array(30).fill(1), max_tokens: 2, temperature: 0 });
    assert.equal(full.usage!.completion_tokens, 2);
    const capped = await client.completions.create({ model: 'kiln', prompt: new Array(28).fill(1), temperature: 0 });
    assert.equal(capped.usage!.completion_tokens, 4);
    // The openai client shows the param.
    await assert.rejects(client.completions.create({ model: 'kiln', prompt: long, temperature: 0 }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'prompt' && e.code === 'context_length_exceeded');
  } finally {
    await server.close();
  }
  // The model's own limit (max_position_embeddings) when no --max-model-len.
  const { server: s2, url: u2 } = await startServer({ model });
  try {
    expectError(await call(`${u2}/v1/completions`, 'POST', { prompt: [1], max_tokens: 512, temperature: 0 }), 400, 'max_tokens', 'context_length_exceeded');
  } finally {
    await s2.close();
  }
  // Chat: the templated prompt counts.
  const { server: s3, url: u3 } = await startServer({ model: bigModel, tokenizer, maxModelLen: 40 });
  try {
    const msg = expectError(await call(`${u3}/v1/chat/completions`, 'POST', { messages: [{ role: 'user', content: 'word '.repeat(40) }], temperature: 0 }), 400, 'messages', 'context_length_exceeded');
    assert.match(msg, /the model's context is 40 tokens/);
    expectError(await call(`${u3}/v1/chat/completions`, 'POST', { messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 39, temperature: 0 }), 400, 'max_completion_tokens', 'context_length_exceeded');
  } finally {
    await s3.close();
  }
  assert.throws(() => kiln.serve.createServer({ model, maxModelLen: 513 }), /maxModelLen must be in \[2, 512\]/);
});

/** The default sampler, but refusing penalties and logprobs in check(): a sampler that supports less. */
class PlainSampler implements Sampler {
  private readonly inner = new kiln.serve.LogitsSampler();
  check(params: SamplingParams, where: string): void {
    for (const k of ['presencePenalty', 'frequencyPenalty', 'repetitionPenalty', 'logprobs'] as const) {
      if (params[k] !== undefined) throw new Error(`${where}: ${k} = ${String(params[k])} is not supported by this plain sampler`);
    }
  }
  sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
    return this.inner.sample(logits, rows);
  }
}

test("options the sampler refuses: 400 with the sampler's own message, naming the field", async () => {
  const { server, url, client } = await startServer({ model, sampler: new PlainSampler() });
  try {
    for (const [body, param] of [
      [{ prompt: [1], max_tokens: 2, temperature: 0, presence_penalty: 0.5 }, 'presence_penalty'],
      [{ prompt: [1], max_tokens: 2, temperature: 0, frequency_penalty: 1 }, 'frequency_penalty'],
      [{ prompt: [1], max_tokens: 2, temperature: 0, repetition_penalty: 1.2 }, 'repetition_penalty'],
      [{ prompt: [1], max_tokens: 2, temperature: 0, logprobs: 2 }, 'logprobs'],
    ] as const) {
      const msg = expectError(await call(`${url}/v1/completions`, 'POST', body), 400, param, 'unsupported_by_sampler');
      assert.match(msg, /plain sampler/);
    }
    await assert.rejects(client.completions.create({ model: 'kiln', prompt: [1], temperature: 0.7, presence_penalty: 1 }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'presence_penalty');
    // Sampling itself passes through to the sampler: OpenAI's default temperature (1) samples.
    const sampled = await call(`${url}/v1/completions`, 'POST', { prompt: [1], max_tokens: 2, seed: 3 });
    assert.equal(sampled.status, 200, JSON.stringify(sampled.json));
    assertIdle(server);
  } finally {
    await server.close();
  }
  const { server: s2, url: u2 } = await startServer({ model: bigModel, tokenizer, sampler: new PlainSampler() });
  try {
    expectError(await call(`${u2}/v1/chat/completions`, 'POST', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0, logprobs: true }), 400, 'logprobs', 'unsupported_by_sampler');
  } finally {
    await s2.close();
  }
});

test('a full queue is 429: more than --max-queue requests waiting for admission', async () => {
  const { server, url } = await startServer({ model, maxNumSeqs: 1, maxQueue: 2 });
  try {
    // One request whose choices alone pass the limit (each choice is an engine request).
    let r = await call(`${url}/v1/completions`, 'POST', { prompt: [[1], [2], [3]], max_tokens: 2, temperature: 0 });
    let msg = expectError(r, 429, null, 'queue_full');
    assert.equal(r.json.error.type, 'rate_limit_error');
    assert.match(msg, /0 requests are waiting and at most 2 may \(this one adds 3\)/);
    expectError(await call(`${url}/v1/completions`, 'POST', { prompt: [1], n: 3, max_tokens: 2, temperature: 0 }), 429, null, 'queue_full');
    const fits = await call(`${url}/v1/completions`, 'POST', { prompt: [[1], [2]], max_tokens: 2, temperature: 0 });
    assert.equal(fits.status, 200, 'two fit');
    // Requests already waiting count: one queued straight into the engine while the loop is idle
    // (nothing steps it until the next submit), so the state does not depend on timing.
    const queued = server.engine.addRequest([4, 5], { maxNewTokens: 2 });
    server.engine.addRequest([6], { maxNewTokens: 2 });
    assert.equal(server.engine.scheduler.waiting.length, 2);
    r = await call(`${url}/v1/completions`, 'POST', { prompt: [7], max_tokens: 2, temperature: 0 });
    msg = expectError(r, 429, null, 'queue_full');
    assert.match(msg, /2 requests are waiting and at most 2 may \(this one adds 1\)/);
    server.engine.abort(queued);
    const ok = await call(`${url}/v1/completions`, 'POST', { prompt: [7], max_tokens: 2, temperature: 0 });
    assert.equal(ok.status, 200, 'room again');
    assert.deepEqual((ok.json as unknown as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids, greedy(model, [7], 2));
    await untilTrue(() => !server.engine.hasUnfinished(), 'the queued request ran too');
    assertIdle(server);
  } finally {
    await server.close();
  }
});

/** Greedy, but throws during the step for any row with seed 13: an engine failure mid-generation. */
class FailingSampler implements Sampler {
  private readonly inner = new kiln.serve.LogitsSampler();
  sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
    if (rows.some((r) => r.params.seed === 13)) throw new Error('the device fell over');
    return this.inner.sample(logits, rows);
  }
}

test('a step that throws: 500 for the requests in the engine (an error event mid-stream), then the server goes on', async () => {
  const { server, url } = await startServer({ model, sampler: new FailingSampler() });
  try {
    const r = await call(`${url}/v1/completions`, 'POST', { prompt: [1, 2], max_tokens: 3, temperature: 0, seed: 13 });
    const msg = expectError(r, 500, null);
    assert.equal(r.json.error.type, 'server_error');
    assert.match(msg, /the device fell over/);
    const s = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [1, 2], max_tokens: 3, temperature: 0, seed: 13, stream: true }) });
    assert.equal(s.status, 200);
    const data = sseData(await s.text());
    assert.equal(data[data.length - 1], '[DONE]');
    assert.match((JSON.parse(data[data.length - 2]!) as ErrorJson).error.message, /the device fell over/);
    assertIdle(server);
    const ok = await call(`${url}/v1/completions`, 'POST', { prompt: [1, 2], max_tokens: 3, temperature: 0 });
    assert.equal(ok.status, 200);
  } finally {
    await server.close();
  }
});
