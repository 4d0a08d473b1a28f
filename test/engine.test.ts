/**
 * The generation engine on the tiny Qwen3 checkpoint: every request gets exactly the tokens it gets
 * alone (which are transformers' greedy tokens, generate.json) when batched with prompts of other
 * lengths, with chunked prefill, with prefix caching on or off, with requests leaving early, and
 * under a block budget small enough to force preemption; shared prefixes really share blocks;
 * abort frees everything; streams, stop ids and length limits; bad requests fail clearly; and a
 * 64-step decode loop leaves the allocator's live bytes flat.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { RequestOutput } from '../src/serve/engine.js';
import { assertThrowsWith } from './helpers/assert.js';
import { randomInts } from './helpers/make.js';
import { decodeLoopMemory } from './helpers/serve.js';

const { Engine } = kiln.serve;

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');

interface Case {
  prompt: number[];
  generated: number[];
}
const cases = (JSON.parse(fs.readFileSync(path.join(DENSE, 'generate.json'), 'utf8')) as { cases: Case[] }).cases;
const prompts = cases.map((c) => c.prompt);
const model = kiln.models.Qwen3ForCausalLM.fromPretrained(DENSE);

/** Each prompt run alone (its own engine), n new tokens. */
function alone(ps: readonly number[][], n: number, options: kiln.serve.EngineOptions = {}): number[][] {
  return ps.map((p) => {
    const e = new Engine(model, { numBlocks: 16, ...options });
    try {
      return [...e.generateAll([p], { maxNewTokens: n })[0]!.outputIds];
    } finally {
      e.dispose();
    }
  });
}

function allFree(e: InstanceType<typeof Engine>): void {
  assert.equal(e.cache.allocator.numFree, e.cache.numBlocks, 'every block is free again');
  e.cache.allocator.checkInvariants();
}

test('alone, each prompt gets transformers greedy tokens', () => {
  assert.deepEqual(alone(prompts, 32), cases.map((c) => c.generated));
});

for (const [label, options] of [
  ['batched (5 prompts of 1..20 tokens)', {}],
  ['batched, prefix caching off', { prefixCaching: false }],
  ['batched, chunked prefill (7 tokens per step)', { maxNumBatchedTokens: 7 }],
  ['batched, block size 4, at most 2 running', { blockSize: 4, maxNumSeqs: 2 }],
] as [string, kiln.serve.EngineOptions][]) {
  test(`${label}: each request gets its tokens alone`, () => {
    const e = new Engine(model, { numBlocks: 64, ...options });
    const outs = e.generateAll(prompts, { maxNewTokens: 32 });
    assert.deepEqual(
      outs.map((o) => o.outputIds),
      cases.map((c) => c.generated),
    );
    assert.ok(outs.every((o) => o.finished && o.finishReason === 'length'));
    if (options.maxNumBatchedTokens) assert.ok(e.stats.steps > 32, 'prefill really ran over several steps');
    allFree(e);
    e.dispose();
  });
}

test('requests that leave early do not disturb the others', () => {
  const n = [32, 4, 20, 32, 1];
  const e = new Engine(model, { numBlocks: 64 });
  const outs = e.generateAll(
    prompts,
    n.map((k) => ({ maxNewTokens: k })),
  );
  assert.deepEqual(
    outs.map((o) => o.outputIds),
    cases.map((c, i) => c.generated.slice(0, n[i])),
  );
  e.dispose();
});

test('a small block budget forces preemption by recompute; tokens are unchanged', () => {
  // 5 requests of up to 52 tokens need up to 13 blocks of 4 each; 20 blocks hold fewer than two.
  const e = new Engine(model, { blockSize: 4, numBlocks: 20 });
  const outs = e.generateAll(prompts, { maxNewTokens: 32 });
  assert.ok(e.stats.numPreemptions > 0, 'something was preempted');
  assert.deepEqual(
    outs.map((o) => o.outputIds),
    cases.map((c) => c.generated),
  );
  allFree(e);
  // Without prefix caching the recompute starts from nothing; same tokens.
  const f = new Engine(model, { blockSize: 4, numBlocks: 20, prefixCaching: false });
  assert.deepEqual(
    f.generateAll(prompts, { maxNewTokens: 32 }).map((o) => o.outputIds),
    cases.map((c) => c.generated),
  );
  assert.ok(f.stats.numPreemptions > 0);
  e.dispose();
  f.dispose();
});

test('prefix caching: a long common prefix is shared, not recomputed', () => {
  const prefix = randomInts(40, 77, 0, 96);
  const a = [...prefix, 5, 9, 13, 2, 60];
  const b = [...prefix, 7, 7, 1];
  const ref = alone([a, b], 24, { prefixCaching: false, blockSize: 8 });
  const e = new Engine(model, { blockSize: 8, numBlocks: 32 });
  const outs = new Map<string, RequestOutput>();
  const keep = (o: RequestOutput): void => void outs.set(o.requestId, o);
  const ida = e.addRequest(a, { maxNewTokens: 24 }, { onOutput: keep });
  e.step(); // a's prompt is cached: its 5 full blocks (40 tokens) are registered
  const idb = e.addRequest(b, { maxNewTokens: 24 }, { onOutput: keep });
  e.step(); // b is admitted with those 5 blocks
  assert.equal(e.cache.allocator.numShared, 5, 'five blocks in use by both requests');
  assert.equal(outs.get(idb)!.numCachedTokens, 40);
  assert.equal(e.stats.prefixHitTokens, 40);
  while (e.hasUnfinished()) e.step();
  assert.deepEqual(outs.get(ida)!.outputIds, ref[0]);
  assert.deepEqual(outs.get(idb)!.outputIds, ref[1]);
  allFree(e);
  // Finished requests leave their full blocks cached: the same prompt again hits all blocks but
  // the one holding its last token, and gets the same tokens.
  assert.ok(e.cache.allocator.numCachedFree >= 5);
  const again = e.generateAll([b], { maxNewTokens: 24 })[0]!;
  assert.equal(again.numCachedTokens, 40);
  assert.deepEqual(again.outputIds, ref[1]);
  e.dispose();
});

test('abort frees a request at once, running or waiting; unknown ids give false', () => {
  const e = new Engine(model, { numBlocks: 32, maxNumSeqs: 2 });
  const finals: RequestOutput[] = [];
  const ids = prompts.slice(0, 3).map((p) => e.addRequest(p, { maxNewTokens: 32 }, { onOutput: (o) => (o.finished ? finals.push(o) : undefined) }));
  e.step();
  e.step();
  assert.equal(e.scheduler.running.length, 2);
  assert.equal(e.scheduler.waiting.length, 1);
  assert.ok(e.cache.allocator.numFree < e.cache.numBlocks);
  assert.equal(e.abort(ids[2]!), true, 'waiting');
  assert.equal(e.abort(ids[0]!), true, 'running');
  assert.equal(e.abort(ids[0]!), false, 'already aborted');
  assert.equal(e.abort('nope'), false);
  assert.deepEqual(
    finals.map((o) => [o.requestId, o.finishReason, o.newIds.length]),
    [
      [ids[2], 'abort', 0],
      [ids[0], 'abort', 0],
    ],
  );
  assert.equal(finals[1]!.outputIds.length, 2);
  assert.equal(e.abort(ids[1]!), true);
  allFree(e);
  assert.equal(e.hasUnfinished(), false);
  e.dispose();
});

test('streams: two consumers at once, each gets its tokens in order; abort ends a stream', async () => {
  const e = new Engine(model, { numBlocks: 32 });
  const ida = e.addRequest(prompts[1]!, { maxNewTokens: 12 });
  const idb = e.addRequest(prompts[3]!, { maxNewTokens: 12 });
  const idc = e.addRequest(prompts[4]!, { maxNewTokens: 32 });
  // Streams opened before any consumer steps the engine see every token.
  const [ga, gb, gc] = [e.stream(ida), e.stream(idb), e.stream(idc)];
  const read = async (stream: AsyncIterable<RequestOutput>, id: string, abortAfter?: number): Promise<RequestOutput[]> => {
    const got: RequestOutput[] = [];
    for await (const o of stream) {
      got.push(o);
      if (abortAfter !== undefined && o.outputIds.length === abortAfter) e.abort(id);
    }
    return got;
  };
  const [sa, sb, sc] = await Promise.all([read(ga, ida), read(gb, idb), read(gc, idc, 3)]);
  for (const [s, c] of [
    [sa, cases[1]!],
    [sb, cases[3]!],
  ] as const) {
    assert.deepEqual(
      s.flatMap((o) => o.newIds),
      c.generated.slice(0, 12),
    );
    assert.deepEqual(s[s.length - 1]!.outputIds, c.generated.slice(0, 12));
    assert.ok(s.slice(0, -1).every((o) => !o.finished) && s[s.length - 1]!.finishReason === 'length');
  }
  assert.equal(sc[sc.length - 1]!.finishReason, 'abort');
  // Other consumers may have stepped further before the abort: the tokens made until then still come.
  const cut = sc[sc.length - 1]!.outputIds;
  assert.ok(cut.length >= 3 && cut.length < 32, `aborted after ${cut.length} tokens`);
  assert.deepEqual(cut, cases[4]!.generated.slice(0, cut.length));
  assert.deepEqual(
    sc.flatMap((o) => o.newIds),
    cut,
  );
  allFree(e);
  await assert.rejects(async () => {
    for await (const o of e.stream(ida)) void o;
  }, /Engine\.stream: no unfinished request '0'/);
  e.dispose();
});

test('stop ids, eos ids, ignoreEos and the length limit', () => {
  const c = cases[2]!;
  const stop = c.generated[4]!;
  const k = c.generated.indexOf(stop);
  const e = new Engine(model, { numBlocks: 32, eosTokenIds: [stop] });
  const [viaEos, ignored] = e.generateAll([c.prompt, c.prompt], [{ maxNewTokens: 32 }, { maxNewTokens: 32, ignoreEos: true }]);
  assert.deepEqual(viaEos!.outputIds, c.generated.slice(0, k + 1), 'the stop token is kept, nothing after it');
  assert.equal(viaEos!.finishReason, 'stop');
  assert.deepEqual(ignored!.outputIds, c.generated);
  const f = new Engine(model, { numBlocks: 32 });
  const [viaStop] = f.generateAll([c.prompt], { maxNewTokens: 32, stopTokenIds: [stop] });
  assert.deepEqual(viaStop!.outputIds, c.generated.slice(0, k + 1));
  // max_position_embeddings is 128: a 120-token prompt gets 8 tokens.
  const long = f.generateAll([randomInts(120, 5, 0, 96)], { maxNewTokens: 32 })[0]!;
  assert.equal(long.outputIds.length, 8);
  assert.equal(long.finishReason, 'length');
  e.dispose();
  f.dispose();
});

test('bad requests fail at addRequest, naming the argument and value', () => {
  const e = new Engine(model, { numBlocks: 4, blockSize: 16 });
  assertThrowsWith(() => e.addRequest([]), 'Engine.addRequest', 'promptIds', 'non-empty');
  assertThrowsWith(() => e.addRequest([1, 96]), 'Engine.addRequest', 'promptIds[1] = 96', '[0, 96)');
  assertThrowsWith(() => e.addRequest([1, 2.5]), 'promptIds[1] = 2.5');
  // 4 blocks of 16 hold 64 tokens: a 64-token prompt leaves no room.
  assertThrowsWith(() => e.addRequest(randomInts(64, 1, 0, 96)), 'Engine.addRequest', '64 tokens', 'at most 64', '128 model positions', '64 cache slots');
  assertThrowsWith(() => e.addRequest([1], { maxNewTokens: 0 }), 'maxNewTokens', '0');
  assertThrowsWith(() => e.addRequest([1], { stop: ['\n'] }), 'stop strings', 'stopTokenIds');
  assertThrowsWith(() => e.addRequest([1], { stopTokenIds: [-1] }), 'stopTokenIds[0] = -1');
  // Sampling options are checked at admission by the default sampler's rules (sampling-validate.ts).
  assertThrowsWith(() => e.addRequest([1], { doSample: true, temperature: 0 }), 'Engine.addRequest.temperature', '> 0 when sampling', 'got 0');
  assertThrowsWith(() => e.addRequest([1], { repetitionPenalty: 0 }), 'Engine.addRequest.repetitionPenalty', 'got 0');
  assertThrowsWith(() => e.addRequest([1], { logprobs: 21 }), 'Engine.addRequest.logprobs', 'got 21');
  assertThrowsWith(() => e.addRequest([1], { topP: 1.5 }), 'Engine.addRequest.topP', 'got 1.5');
  e.addRequest([1], {}, { requestId: 'x' });
  assertThrowsWith(() => e.addRequest([1], {}, { requestId: 'x' }), "request id 'x' is already in use");
  assertThrowsWith(() => new Engine(model, { numBlocks: 4, eosTokenIds: [100] }), 'Engine', 'eosTokenIds = 100');
  assertThrowsWith(() => new Engine(model, { numBlocks: 4, maxNumSeqs: 0 }), 'maxNumSeqs', '0');
  e.dispose();
});

test('a 64-step decode loop leaves live device memory flat', () => {
  const { tokens, before, after } = decodeLoopMemory(model, { numBlocks: 16 });
  assert.equal(tokens, 68, 'the loop really decoded');
  assert.equal(after.allocatedBytes, before.allocatedBytes, 'live bytes unchanged');
  assert.equal(after.activeAllocations, before.activeAllocations, 'live allocations unchanged');
});

test('trace: arrivals and each step\'s composition (chunked prefill mixed with decode)', () => {
  const events: kiln.serve.EngineTraceEvent[] = [];
  // A budget of 6 tokens: the 5-token prompt and the first token of the 4-token one, then the
  // rest of that prompt beside the first request's first decode.
  const e = new Engine(model, { numBlocks: 16, maxNumBatchedTokens: 6, trace: (ev) => events.push(ev) });
  e.generateAll([prompts[4]!.slice(0, 5), prompts[3]!.slice(0, 4)], { maxNewTokens: 3 });
  const adds = events.filter((ev) => ev.kind === 'add');
  assert.deepEqual(
    adds.map((ev) => ev.promptTokens),
    [5, 4],
  );
  const steps = events.flatMap((ev) => (ev.kind === 'step' ? [ev] : []));
  assert.deepEqual(
    steps.map((s) => [s.prefillTokens, s.prefillSeqs, s.decodeSeqs]),
    [
      [6, 2, 0], // prompt 0 whole, prompt 1's first token (chunked prefill)
      [3, 1, 1], // prompt 1's other 3 tokens and prompt 0's next token
      [0, 0, 2],
      [0, 0, 1], // prompt 0 done after 3 tokens; prompt 1's last
    ],
  );
  assert.equal(e.stats.steps, steps.length);
  // On the cpu the default decode is eager (decode runner) with prefill through forwardStep.
  assert.deepEqual(
    steps.map((s) => [s.path, s.bucket]),
    [
      ['step', 0],
      ['step', 1],
      ['decode', 2],
      ['decode', 1],
    ],
  );
  for (const s of steps) assert.ok(s.ms >= 0 && Number.isFinite(s.t));
  e.dispose();
});
