/**
 * `kiln serve` end to end, in process, through the openai npm client on 127.0.0.1: completions
 * with token-id prompts (streamed and not; greedy tokens equal kiln.generate's, an independent
 * path), chat completions with the real Qwen3 tokenizer (deltas concatenate to the non-streamed
 * text), usage and finish reasons, stop ids and stop strings (with hold-back when streaming),
 * logprobs through a sampler that gives them, cancellation mid-stream (the engine frees every
 * block), 100 concurrent requests and a bounded load test with nothing lost, /metrics against the
 * requests made, /health and /v1/models, graceful close, and the `kiln serve` CLI in a child process.
 * Unit checks of the stop-string matcher and the Prometheus renderer come first.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type OpenAI from 'openai';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import type { SampledToken, Sampler, SamplingParams, SamplingRow } from '../src/serve/sampling-params.js';
import { Counter, Gauge, Histogram, Registry } from '../src/serve/http/prometheus.js';
import { chatModel, greedy, parsePrometheus, qwenTokenizerFolder, sampleValue, sseData, startServer, tinyModel, untilTrue } from './helpers/serve.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the CLI is dist/src/cli/main.js.
const MAIN = path.join(here, '../src/cli/main.js');

const model = tinyModel();
const tok = qwenTokenizerFolder();
after(() => tok.cleanup());
const tokenizer = kiln.io.Tokenizer.fromFolder(tok.dir);
const bigModel = chatModel();

/** Extension fields the openai types do not know. */
const tokenIds = (choice: object): number[] => (choice as { token_ids: number[] }).token_ids;

/** Deterministic pseudo-random prompts over the tiny vocabulary. */
function prompts(count: number, seed: number): number[][] {
  let s = seed;
  const next = (): number => (s = (s * 1103515245 + 12345) % 2147483648);
  return Array.from({ length: count }, (_, i) => Array.from({ length: 1 + ((i * 7 + seed) % 20) }, () => next() % 96));
}

/** Engine idle with every cache block free. */
function assertIdle(server: kiln.serve.KilnServer): void {
  const { engine } = server;
  assert.equal(engine.hasUnfinished(), false, 'no request left in the engine');
  assert.equal(engine.cache.allocator.numFree, engine.cache.numBlocks, 'every cache block is free');
}

/** Greedy sampling that also reports logprobs (log-softmax on the host) when a row asks: the Sampler contract's logprob path. */
class LogprobGreedy implements Sampler {
  sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
    const V = logits.shape[1]!;
    const flat = logits.toFlatArray();
    return rows.map((r, b) => {
      const row = flat.slice(b * V, (b + 1) * V);
      let id = 0;
      for (let v = 1; v < V; v++) if (row[v]! > row[id]!) id = v;
      if (r.params.logprobs === undefined) return { id };
      let sum = 0;
      for (const x of row) sum += Math.exp(x - row[id]!);
      const lse = row[id]! + Math.log(sum);
      const top: { id: number; logprob: number }[] = [];
      const taken = new Set<number>();
      for (let k = 0; k < r.params.logprobs; k++) {
        let best = -1;
        for (let v = 0; v < V; v++) if (!taken.has(v) && (best < 0 || row[v]! > row[best]!)) best = v;
        taken.add(best);
        top.push({ id: best, logprob: row[best]! - lse });
      }
      return { id, logprob: row[id]! - lse, top };
    });
  }

  check(params: SamplingParams, where: string): void {
    if (params.doSample) throw new Error(`${where}: doSample = true: this test sampler is greedy`);
  }
}

test('stop strings: matched across pieces, held back while they may start, never emitted', () => {
  const m = new kiln.serve.StopMatcher(['END', 'xyz']);
  assert.deepEqual(m.push('abc E'), { text: 'abc ', stopped: false }, "'E' may start END");
  assert.deepEqual(m.push('N'), { text: '', stopped: false });
  assert.deepEqual(m.push('Dgame'), { text: '', stopped: true }, 'END completed: nothing of it, nothing after');
  assert.deepEqual(m.push('more'), { text: '', stopped: true });
  assert.equal(m.flush(), '');
  const n = new kiln.serve.StopMatcher(['END']);
  assert.deepEqual(n.push('aEN'), { text: 'a', stopped: false });
  assert.deepEqual(n.push('x'), { text: 'ENx', stopped: false }, 'a false start is released');
  assert.deepEqual(n.push('E'), { text: '', stopped: false });
  assert.equal(n.flush(), 'E', 'held text comes out when the request ends otherwise');
  const first = new kiln.serve.StopMatcher(['cd', 'b']);
  assert.deepEqual(first.push('abcd'), { text: 'a', stopped: true }, 'the earliest match wins');
  assert.deepEqual(new kiln.serve.StopMatcher([]).push('anything'), { text: 'anything', stopped: false });
});

test('Prometheus renderer: counters with escaped labels, gauges read when scraped, cumulative histogram buckets', () => {
  const r = new Registry();
  const c = r.add(new Counter('x_total', 'Things.'));
  c.inc({ path: 'a"b\\c\nd' }, 2);
  c.inc({ path: 'a"b\\c\nd' });
  let g = 1;
  r.add(new Gauge('x_gauge', 'A gauge.', () => g));
  const h = r.add(new Histogram('x_seconds', 'Durations.', [0.1, 1]));
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  g = 7;
  const text = r.render();
  const { types, samples } = parsePrometheus(text);
  assert.deepEqual([...types], [
    ['x_total', 'counter'],
    ['x_gauge', 'gauge'],
    ['x_seconds', 'histogram'],
  ]);
  assert.ok(text.includes('x_total{path="a\\"b\\\\c\\nd"} 3\n'), text);
  assert.equal(sampleValue(samples, 'x_gauge'), 7);
  assert.deepEqual(
    samples.filter((s) => s.name === 'x_seconds_bucket').map((s) => [s.labels.le, s.value]),
    [
      ['0.1', 1],
      ['1', 2],
      ['+Inf', 3],
    ],
  );
  assert.equal(sampleValue(samples, 'x_seconds_count'), 3);
  assert.equal(sampleValue(samples, 'x_seconds_sum'), 5.55);
});

test('/health and /v1/models', async () => {
  const { server, url, client } = await startServer({ model, modelName: 'tiny-test' });
  try {
    const health = await fetch(`${url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    const card = list.data[0]!;
    assert.equal(card.id, 'tiny-test');
    assert.equal(card.object, 'model');
    assert.equal(card.owned_by, 'kiln');
    assert.equal(typeof card.created, 'number');
    assert.equal((card as unknown as { max_model_len: number }).max_model_len, kiln.models.QWEN3_TINY.maxPositionEmbeddings);
    assert.equal((await client.models.retrieve('tiny-test')).id, 'tiny-test');
    await assert.rejects(client.models.retrieve('other'), (e: { status?: number; param?: string }) => e.status === 404 && e.param === 'model');
  } finally {
    await server.close();
  }
});

test('completions with token-id prompts: greedy tokens equal kiln.generate, token_ids and usage in every choice, finish length', async (t) => {
  const ps = prompts(4, 3);
  const refs = ps.map((p) => greedy(model, p, 8));
  const { server, client } = await startServer({ model, modelName: 'tiny' });
  try {
    for (const [i, p] of ps.entries()) {
      const r = await client.completions.create({ model: 'tiny', prompt: p, max_tokens: 8, temperature: 0 });
      assert.equal(r.object, 'text_completion');
      assert.match(r.id, /^cmpl-/);
      assert.equal(r.model, 'tiny');
      assert.equal(r.choices.length, 1);
      const c = r.choices[0]!;
      assert.deepEqual(tokenIds(c), refs[i], `prompt ${i}: the server's greedy ids are kiln.generate's`);
      assert.equal(c.text, '', 'no tokenizer: no text');
      assert.equal(c.finish_reason, 'length');
      assert.equal(c.logprobs, null);
      assert.deepEqual(r.usage, { prompt_tokens: p.length, completion_tokens: 8, total_tokens: p.length + 8 });
    }
    // A batch of id prompts with n = 2: choice index = prompt * n + j.
    const r = await client.completions.create({ model: 'tiny', prompt: ps, n: 2, max_tokens: 8, temperature: 0 });
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1, 2, 3, 4, 5, 6, 7],
    );
    r.choices.forEach((c) => assert.deepEqual(tokenIds(c), refs[Math.floor(c.index / 2)]));
    const promptTokens = ps.reduce((s, p) => s + p.length, 0);
    assert.deepEqual(r.usage, { prompt_tokens: promptTokens, completion_tokens: 64, total_tokens: promptTokens + 64 });
    // No max_tokens: OpenAI's default of 16.
    const d = await client.completions.create({ model: 'tiny', prompt: ps[0]!, temperature: 0 });
    assert.equal(tokenIds(d.choices[0]!).length, 16);
    t.diagnostic(`4 prompts x 8 tokens equal kiln.generate, alone and as one batch with n = 2`);
    assertIdle(server);
  } finally {
    await server.close();
  }
});

test('streamed completions: SSE chunks of text_completion ending in [DONE]; ids concatenate to the non-streamed ones; include_usage adds a usage chunk', async () => {
  const p = [4, 8, 15, 16, 23, 42];
  const ref = greedy(model, p, 10);
  const { server, url, client } = await startServer({ model });
  try {
    // Raw: the wire format.
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: p, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const data = sseData(await res.text());
    assert.equal(data[data.length - 1], '[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as { object: string; choices: { text: string; finish_reason: string | null; token_ids: number[] }[]; usage: unknown });
    const usage = chunks[chunks.length - 1]!;
    assert.deepEqual(usage.choices, []);
    assert.deepEqual(usage.usage, { prompt_tokens: 6, completion_tokens: 10, total_tokens: 16 });
    const tokens = chunks.slice(0, -1);
    assert.ok(tokens.every((c) => c.object === 'text_completion' && c.choices.length === 1 && c.usage === null));
    assert.deepEqual(
      tokens.flatMap((c) => c.choices[0]!.token_ids),
      ref,
    );
    assert.deepEqual(
      tokens.map((c) => c.choices[0]!.finish_reason),
      [...new Array<null>(tokens.length - 1).fill(null), 'length'],
    );
    // Through the openai client.
    const stream = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 10, temperature: 0, stream: true });
    const ids: number[] = [];
    let finish: string | null = null;
    for await (const c of stream) {
      ids.push(...tokenIds(c.choices[0]!));
      finish = c.choices[0]!.finish_reason ?? finish;
    }
    assert.deepEqual(ids, ref);
    assert.equal(finish, 'length');
    assertIdle(server);
  } finally {
    await server.close();
  }
});

test('finish_reason stop: a forced stop id (the greedy token) and eos ids end the choice, the id kept in token_ids; ignore_eos runs on', async () => {
  const p = [7, 7, 7, 1];
  const ref = greedy(model, p, 8);
  const stopId = ref[3]!;
  const cut = ref.slice(0, ref.indexOf(stopId) + 1);
  {
    const { server, client } = await startServer({ model });
    try {
      const r = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 8, temperature: 0, stop_token_ids: [stopId] } as OpenAI.CompletionCreateParamsNonStreaming);
      assert.deepEqual(tokenIds(r.choices[0]!), cut);
      assert.equal(r.choices[0]!.finish_reason, 'stop');
      assert.equal(r.usage!.completion_tokens, cut.length);
    } finally {
      await server.close();
    }
  }
  {
    const { server, client } = await startServer({ model, eosTokenIds: [stopId] });
    try {
      const r = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 8, temperature: 0 });
      assert.deepEqual(tokenIds(r.choices[0]!), cut, 'eos stops');
      assert.equal(r.choices[0]!.finish_reason, 'stop');
      const on = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 8, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
      assert.deepEqual(tokenIds(on.choices[0]!), ref, 'ignore_eos');
      assert.equal(on.choices[0]!.finish_reason, 'length');
    } finally {
      await server.close();
    }
  }
});

test('chat completions with the Qwen3 tokenizer: the chat template prompt, text = decoded ids, streamed deltas concatenate to the non-streamed text', async (t) => {
  const { server, client } = await startServer({ model: bigModel, tokenizer, modelName: 'qwen3-random' });
  try {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Say hello in three languages.' },
    ];
    const promptIds = tokenizer.encode(tokenizer.applyChatTemplate(messages as kiln.io.ChatMessage[], { addGenerationPrompt: true }), { addSpecialTokens: false });
    const ref = greedy(bigModel, promptIds, 12);
    const eosAt = ref.findIndex((id) => tokenizer.eosTokenIds.includes(id));
    const want = eosAt < 0 ? ref : ref.slice(0, eosAt + 1);
    const full = await client.chat.completions.create({ model: 'qwen3-random', messages, max_tokens: 12, temperature: 0 });
    assert.equal(full.object, 'chat.completion');
    assert.match(full.id, /^chatcmpl-/);
    const c = full.choices[0]!;
    assert.equal(c.message.role, 'assistant');
    assert.deepEqual(tokenIds(c), want, 'greedy ids of the templated prompt equal kiln.generate');
    assert.equal(c.message.content, tokenizer.decode(want, { skipSpecialTokens: true }));
    assert.equal(c.finish_reason, eosAt < 0 ? 'length' : 'stop');
    assert.deepEqual(full.usage, { prompt_tokens: promptIds.length, completion_tokens: want.length, total_tokens: promptIds.length + want.length });

    const stream = await client.chat.completions.create({ model: 'qwen3-random', messages, max_completion_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const ch of stream) chunks.push(ch);
    assert.ok(chunks.every((ch) => ch.object === 'chat.completion.chunk' && ch.id === chunks[0]!.id));
    assert.equal(chunks[0]!.choices[0]!.delta.role, 'assistant', 'the first chunk gives the role');
    const last = chunks[chunks.length - 1]!;
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, full.usage);
    const body = chunks.slice(0, -1);
    assert.equal(body.map((ch) => ch.choices[0]!.delta.content ?? '').join(''), c.message.content, 'deltas concatenate to the non-streamed text');
    assert.deepEqual(
      body.flatMap((ch) => (ch.choices[0] as unknown as { token_ids?: number[] }).token_ids ?? []),
      want,
    );
    assert.equal(body[body.length - 1]!.choices[0]!.finish_reason, c.finish_reason);
    t.diagnostic(`prompt ${promptIds.length} tokens; ${want.length} generated: ${JSON.stringify(c.message.content)}`);
    assertIdle(server);
  } finally {
    await server.close();
  }
});

test('stop strings on the detokenized text: cut before the match, finish stop, streamed and not, a match across two tokens', async (t) => {
  const { server, client } = await startServer({ model: bigModel, tokenizer });
  try {
    const prompt = 'The quick brown fox';
    const base = await client.completions.create({ model: 'kiln', prompt, max_tokens: 16, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
    const text = base.choices[0]!.text;
    const streamed: string[] = [];
    for await (const ch of await client.completions.create({ model: 'kiln', prompt, max_tokens: 16, temperature: 0, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming)) {
      streamed.push(ch.choices[0]!.text);
    }
    assert.equal(streamed.join(''), text, 'streamed text equals the non-streamed text');
    // A stop string made of the end of one token's text and the start of the next one's.
    const k = streamed.findIndex((s, i) => i > 0 && s.length > 0 && (streamed[i + 1] ?? '').length > 0);
    assert.ok(k > 0, `two consecutive non-empty pieces in ${JSON.stringify(streamed)}`);
    const stop = streamed[k]!.slice(-1) + streamed[k + 1]!.slice(0, 1);
    const want = text.slice(0, text.indexOf(stop));
    const r = await client.completions.create({ model: 'kiln', prompt, max_tokens: 16, temperature: 0, ignore_eos: true, stop: [stop, '@@never@@'] } as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(r.choices[0]!.text, want);
    assert.equal(r.choices[0]!.finish_reason, 'stop');
    const ids = tokenIds(r.choices[0]!);
    assert.deepEqual(ids, tokenIds(base.choices[0]!).slice(0, ids.length), 'the ids up to the stop are the unstopped ones');
    assert.ok(ids.length < 16);
    const pieces: string[] = [];
    let finish: string | null = null;
    for await (const ch of await client.completions.create({ model: 'kiln', prompt, max_tokens: 16, temperature: 0, ignore_eos: true, stop, stream: true } as OpenAI.CompletionCreateParamsStreaming)) {
      pieces.push(ch.choices[0]!.text);
      finish = ch.choices[0]!.finish_reason ?? finish;
    }
    assert.equal(pieces.join(''), want, 'streamed with the stop string: the same cut');
    assert.equal(finish, 'stop');
    assert.ok(!pieces.join('').includes(stop));
    t.diagnostic(`stop ${JSON.stringify(stop)} cuts ${JSON.stringify(text)} to ${JSON.stringify(want)}`);
    await untilTrue(() => !server.engine.hasUnfinished(), 'the stopped request leaves the engine');
    assertIdle(server);
  } finally {
    await server.close();
  }
});

test('logprobs: passed to the sampler and returned in the completions and chat shapes', async () => {
  {
    const { server, client } = await startServer({ model, sampler: new LogprobGreedy() });
    try {
      const p = [3, 1, 4, 1, 5];
      const r = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 4, temperature: 0, logprobs: 3 });
      const c = r.choices[0]!;
      assert.deepEqual(tokenIds(c), greedy(model, p, 4));
      const lp = c.logprobs!;
      assert.deepEqual(
        lp.tokens,
        tokenIds(c).map((id) => `token_id:${id}`),
      );
      assert.ok(lp.token_logprobs!.every((x) => x <= 0));
      lp.top_logprobs!.forEach((top, i) => {
        const entries = Object.entries(top);
        assert.equal(entries.length, 3);
        assert.equal(entries[0]![0], lp.tokens![i], 'greedy: the sampled token is the most likely');
        assert.equal(entries[0]![1], lp.token_logprobs![i]);
      });
      assert.deepEqual(
        lp.text_offset,
        lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join('').length),
      );
    } finally {
      await server.close();
    }
  }
  {
    const { server, client } = await startServer({ model: bigModel, tokenizer, sampler: new LogprobGreedy() });
    try {
      const r = await client.chat.completions.create({ model: 'kiln', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
      const content = r.choices[0]!.logprobs!.content!;
      assert.equal(content.length, tokenIds(r.choices[0]!).length);
      content.forEach((e, i) => {
        assert.equal(e.token, tokenizer.decode([tokenIds(r.choices[0]!)[i]!]));
        assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
        assert.equal(e.top_logprobs.length, 2);
        assert.equal(e.top_logprobs[0]!.logprob, e.logprob);
      });
    } finally {
      await server.close();
    }
  }
});

test('cancellation mid-stream: the client aborts, the engine request ends at once and every block comes back', async (t) => {
  const { server, client } = await startServer({ model });
  try {
    const stream = await client.completions.create({ model: 'kiln', prompt: [1, 2, 3], max_tokens: 500, temperature: 0, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming);
    let got = 0;
    for await (const ch of stream) {
      got += tokenIds(ch.choices[0]!).length;
      if (got >= 3) break; // leaving the loop aborts the HTTP request
    }
    const turns = await untilTrue(() => !server.engine.hasUnfinished() && server.engine.cache.allocator.numFree === server.engine.cache.numBlocks, 'blocks back after the client left');
    assertIdle(server);
    assert.equal(server.engine.scheduler.running.length, 0);
    const generated = server.metrics.generationTokens.get();
    t.diagnostic(`aborted after ${got} tokens read; the engine had made ${generated} of 500 when it let go (${turns} event-loop turns after the break)`);
    // The server goes on serving.
    const r = await client.completions.create({ model: 'kiln', prompt: [1, 2, 3], max_tokens: 2, temperature: 0 });
    assert.deepEqual(tokenIds(r.choices[0]!), greedy(model, [1, 2, 3], 2));
  } finally {
    await server.close();
  }
});

test('100 concurrent requests, half streamed: each gets its own greedy continuation, nothing lost', async (t) => {
  const ps = prompts(100, 11);
  const refs = ps.map((p) => greedy(model, p, 6));
  const { server, client } = await startServer({ model });
  try {
    const start = performance.now();
    const results = await Promise.all(
      ps.map(async (p, i) => {
        if (i % 2 === 0) {
          const r = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 6, temperature: 0 });
          return { ids: tokenIds(r.choices[0]!), finish: r.choices[0]!.finish_reason };
        }
        const ids: number[] = [];
        let finish: string | null = null;
        for await (const ch of await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 6, temperature: 0, stream: true })) {
          ids.push(...tokenIds(ch.choices[0]!));
          finish = ch.choices[0]!.finish_reason ?? finish;
        }
        return { ids, finish };
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    results.forEach((r, i) => {
      assert.deepEqual(r.ids, refs[i], `request ${i}`);
      assert.equal(r.finish, 'length');
    });
    assertIdle(server);
    const steps = server.engine.stats.steps;
    t.diagnostic(`100 concurrent requests x 6 tokens: all correct in ${seconds.toFixed(2)} s (${steps} engine steps, ${((100 * 6) / seconds).toFixed(0)} tokens/s)`);
  } finally {
    await server.close();
  }
});

test('load: 200 requests from 16 concurrent clients all complete with the right tokens', async (t) => {
  const pool = prompts(20, 5);
  const refs = pool.map((p) => greedy(model, p, 8));
  const TOTAL = 200;
  const CLIENTS = 16;
  const { server, client } = await startServer({ model });
  try {
    let next = 0;
    let done = 0;
    const latencies: number[] = [];
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < TOTAL) {
          const i = next++;
          const t0 = performance.now();
          const r = await client.completions.create({ model: 'kiln', prompt: pool[i % pool.length]!, max_tokens: 8, temperature: 0 });
          latencies.push(performance.now() - t0);
          assert.deepEqual(tokenIds(r.choices[0]!), refs[i % pool.length], `request ${i}`);
          done++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    assert.equal(done, TOTAL);
    assertIdle(server);
    latencies.sort((a, b) => a - b);
    const p50 = latencies[Math.floor(TOTAL / 2)]!;
    const p99 = latencies[Math.floor(TOTAL * 0.99)]!;
    t.diagnostic(
      `${TOTAL} requests (8 tokens each) from ${CLIENTS} clients in ${seconds.toFixed(2)} s: ${(TOTAL / seconds).toFixed(1)} requests/s, ` +
        `${((TOTAL * 8) / seconds).toFixed(0)} generated tokens/s; latency p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms; ${server.engine.stats.steps} engine steps`,
    );
  } finally {
    await server.close();
  }
});

test('/metrics: Prometheus text whose counters match the requests made', async () => {
  const { server, url, client } = await startServer({ model });
  try {
    const ps = [[1, 2], [3, 4, 5], [6]];
    let completion = 0;
    for (const p of ps) completion += (await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 3 + p.length, temperature: 0 })).usage!.completion_tokens;
    await assert.rejects(client.completions.create({ model: 'kiln', prompt: [1], max_tokens: 0 }));
    await assert.rejects(client.chat.completions.create({ model: 'kiln', messages: [{ role: 'user', content: 'hi' }], temperature: 0 }));
    assert.equal((await fetch(`${url}/nowhere`)).status, 404);
    await untilTrue(() => server.metrics.requests.get({ endpoint: 'unmatched', status: '404' }) === 1, 'the 404 is counted');
    const res = await fetch(`${url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const { types, samples } = parsePrometheus(await res.text());
    for (const [name, type] of [
      ['kiln_requests_total', 'counter'],
      ['kiln_prompt_tokens_total', 'counter'],
      ['kiln_generation_tokens_total', 'counter'],
      ['kiln_time_to_first_token_seconds', 'histogram'],
      ['kiln_request_latency_seconds', 'histogram'],
      ['kiln_requests_running', 'gauge'],
      ['kiln_requests_waiting', 'gauge'],
      ['kiln_last_step_tokens', 'gauge'],
      ['kiln_last_step_sequences', 'gauge'],
      ['kiln_kv_cache_blocks_used', 'gauge'],
      ['kiln_kv_cache_blocks_total', 'gauge'],
    ]) {
      assert.equal(types.get(name!), type, name);
    }
    const v = (name: string, labels: Record<string, string> = {}): number => sampleValue(samples, name, labels);
    assert.equal(v('kiln_requests_total', { endpoint: '/v1/completions', status: '200' }), 3);
    assert.equal(v('kiln_requests_total', { endpoint: '/v1/completions', status: '400' }), 1);
    assert.equal(v('kiln_requests_total', { endpoint: '/v1/chat/completions', status: '400' }), 1);
    assert.equal(v('kiln_requests_total', { endpoint: 'unmatched', status: '404' }), 1);
    assert.equal(samples.filter((s) => s.name === 'kiln_requests_total').reduce((s, x) => s + x.value, 0), 6, 'nothing else counted (the scrape itself counts after it)');
    assert.equal(v('kiln_prompt_tokens_total'), 6);
    assert.equal(v('kiln_generation_tokens_total'), completion);
    assert.equal(v('kiln_time_to_first_token_seconds_count'), 3);
    assert.equal(v('kiln_request_latency_seconds_count'), 3);
    assert.equal(v('kiln_time_to_first_token_seconds_bucket', { le: '+Inf' }), 3);
    assert.equal(v('kiln_requests_running'), 0);
    assert.equal(v('kiln_requests_waiting'), 0);
    assert.equal(v('kiln_kv_cache_blocks_used'), 0);
    assert.equal(v('kiln_kv_cache_blocks_total'), server.engine.cache.numBlocks);
    assert.equal(v('kiln_engine_steps_total'), server.engine.stats.steps);
    assert.ok(v('kiln_last_step_tokens') >= 1);
  } finally {
    await server.close();
  }
});

test('graceful close: a request in flight finishes, then the server stops accepting and the engine is freed', async () => {
  const { server, url, client } = await startServer({ model });
  const p = [9, 8, 7];
  let closing: Promise<void> | undefined;
  try {
    const stream = await client.completions.create({ model: 'kiln', prompt: p, max_tokens: 40, temperature: 0, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming);
    const ids: number[] = [];
    let finish: string | null = null;
    for await (const ch of stream) {
      ids.push(...tokenIds(ch.choices[0]!));
      finish = ch.choices[0]!.finish_reason ?? finish;
      closing ??= server.close({ timeoutMs: 120_000 });
    }
    assert.deepEqual(ids, greedy(model, p, 40), 'the in-flight request got all its tokens');
    assert.equal(finish, 'length');
    await closing;
    await assert.rejects(fetch(`${url}/health`), 'no longer accepting');
  } finally {
    await (closing ?? server.close());
  }
});

test('close with a timeout: what is still running is aborted, its stream still ends in [DONE], and close resolves', async (t) => {
  const { server, url } = await startServer({ model });
  let closing: Promise<void> | undefined;
  try {
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [5, 6], max_tokens: 500, temperature: 0, ignore_eos: true, stream: true }) });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const first = await reader.read(); // the stream is open and generating
    assert.equal(first.done, false);
    closing = server.close({ timeoutMs: 0 });
    let text = new TextDecoder().decode(first.value);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    const data = sseData(text);
    assert.equal(data[data.length - 1], '[DONE]');
    const last = JSON.parse(data[data.length - 2]!) as { choices: { finish_reason: string; token_ids: number[] }[] };
    const finish = last.choices[0]!.finish_reason;
    assert.ok(finish === 'abort' || finish === 'length', finish);
    await closing;
    const n = data.slice(0, -1).reduce((s, d) => s + (JSON.parse(d) as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids.length, 0);
    t.diagnostic(`finish_reason ${finish} after ${n} of 500 tokens`);
  } finally {
    await (closing ?? server.close());
  }
});

test('kiln serve --random tiny --port 0: prints its URL, answers, exits 0 on SIGTERM', { timeout: HANG_GUARD_MS }, async () => {
  const child = spawn(process.execPath, [MAIN, 'serve', '--random', 'tiny', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`kiln serve exited (${code}) before listening: ${out}${err}`)));
    });
    const health = await fetch(`${url}/health`);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const r = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'random-tiny', prompt: [1, 2, 3], max_tokens: 4, temperature: 0 }) });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { choices: { token_ids: number[] }[] };
    assert.equal(body.choices[0]!.token_ids.length, 4);
    // Where start-up went: the phases (each listed one at least 5 ms) add up to at most the total.
    const ready = /kiln serve: ready in (\d+\.\d\d) s: (.*); KV cache \d+ MiB; disk cache \d+ hits, \d+ misses, \d+ writes\n/.exec(out);
    assert.ok(ready, out);
    const phases = ready[2]!.split(', ').map((p) => /^([A-Za-z ]+) (\d+\.\d\d) s$/.exec(p));
    assert.ok(phases.every((m) => m !== null) && phases[0]![1] === 'node and imports', ready[2]);
    const sum = phases.reduce((s, m) => s + Number(m![2]), 0);
    assert.ok(sum <= Number(ready[1]) + 0.005 * (phases.length + 1), `phases add up to ${sum} s, more than the total ${ready[1]} s`);
    // The first step is logged once, with its tokens (the 3 prompt tokens).
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(out.match(/kiln serve: first step/g)?.length, 1, out);
    assert.match(out, /kiln serve: first step \d+\.\d\d s \(3 tokens; disk cache \d+ hits, \d+ misses, \d+ writes since ready\)/);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, `exit code (stderr: ${err})`);
    assert.match(out, /stopped/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});
