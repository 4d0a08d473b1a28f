/**
 * Async engine steps (EngineOptions.asyncSteps, serve/engine.ts) on the tiny Qwen3 checkpoint: a
 * decode step launched from the previous step's sampled ids on the device gives the same tokens
 * as synchronous steps (and transformers' greedy tokens, generate.json), for greedy, seeded and
 * unseeded sampling with logprobs, penalties, stop ids and length limits, requests that join and
 * are aborted mid-run, tiny blocks (new blocks allocated ahead) and preemption, and a redraw on
 * the host (a nucleus wider than the sampler's candidates); steps really run ahead (stepsAhead);
 * every block is free again at the end and the allocator's invariants hold; a long async loop
 * keeps live memory flat. Also: the transfer helpers (tensor/transfer.ts) and sampleAsync.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { EngineOptions, RequestOutput } from '../src/serve/engine.js';
import { LogitsSampler } from '../src/serve/sampler.js';
import type { SamplingParams } from '../src/serve/sampling-params.js';
import { readLater, uploadFromHost } from '../src/tensor/transfer.js';
import { decodeLoopMemory } from './helpers/serve.js';
import { randomInts } from './helpers/make.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const { Engine } = kiln.serve;

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
const cases = (JSON.parse(fs.readFileSync(path.join(DENSE, 'generate.json'), 'utf8')) as { cases: { prompt: number[]; generated: number[] }[] }).cases;
const prompts = cases.map((c) => c.prompt);
const model = kiln.models.Qwen3ForCausalLM.fromPretrained(DENSE);

type Engine_ = InstanceType<typeof Engine>;

function allFree(e: Engine_): void {
  assert.equal(e.cache.allocator.numFree, e.cache.numBlocks, 'every block is free again');
  e.cache.allocator.checkInvariants();
}

/** Final outputs (ids, reason, logprobs) of the prompts run together, with async steps on or off. */
function run(asyncSteps: boolean, ps: readonly number[][], params: SamplingParams | SamplingParams[], options: EngineOptions = {}): { outs: RequestOutput[]; e: Engine_ } {
  const e = new Engine(model, { numBlocks: 64, ...options, asyncSteps });
  assert.equal(e.asyncSteps, asyncSteps);
  const outs = e.generateAll(ps, params);
  allFree(e);
  return { outs, e };
}

const summary = (outs: readonly RequestOutput[]): unknown[] => outs.map((o) => ({ ids: o.outputIds, reason: o.finishReason, logprobs: o.logprobs }));

/**
 * Runs both ways; asserts equal outputs and that async steps really ran ahead (or not); returns
 * the async outputs. `options` may be a function: each engine then gets its own (a sampler).
 */
function same(label: string, ps: readonly number[][], params: SamplingParams | SamplingParams[], options: EngineOptions | (() => EngineOptions) = {}, ahead = true): RequestOutput[] {
  const opts = (): EngineOptions => (typeof options === 'function' ? options() : options);
  const off = run(false, ps, params, opts());
  const on = run(true, ps, params, opts());
  assert.deepEqual(summary(on.outs), summary(off.outs), `${label}: async steps give the synchronous outputs`);
  assert.equal(off.e.stats.stepsAhead, 0);
  if (ahead) assert.ok(on.e.stats.stepsAhead > 0, `${label}: no step ran ahead`);
  else assert.equal(on.e.stats.stepsAhead, 0, `${label}: steps ran ahead`);
  // The same tokens were generated, and no more were kept than the synchronous run's.
  assert.equal(on.e.stats.tokensGenerated, off.e.stats.tokensGenerated, `${label}: tokens generated`);
  off.e.dispose();
  on.e.dispose();
  return on.outs;
}

for (const [label, options] of [
  ['decode eager, prefill step', { decode: 'eager', prefill: 'step' }],
  ['decode compiled, prefill rows', { decode: 'compiled', prefill: 'rows' }],
] as [string, EngineOptions][]) {
  test(`greedy: async steps give transformers' tokens, batch 1 and batched (${label})`, () => {
    const alone = same(`${label}, batch 1`, [prompts[2]!], { maxNewTokens: 32 }, options);
    assert.deepEqual(alone[0]!.outputIds, cases[2]!.generated);
    const outs = same(`${label}, batch 5`, prompts, { maxNewTokens: 32 }, options);
    assert.deepEqual(
      outs.map((o) => o.outputIds),
      cases.map((c) => c.generated),
    );
  });
}

test('async steps: one decode step per token after the first, each launched before the previous token is read', () => {
  const paths: string[] = [];
  const e = new Engine(model, { numBlocks: 16, asyncSteps: true, trace: (ev) => (ev.kind === 'step' ? paths.push(ev.path) : undefined) });
  const id = e.addRequest(prompts[1]!, { maxNewTokens: 20 });
  // The first call launches the prefill and reads nothing; each later call launches the next
  // decode step from the device's ids, then reads the step before it.
  const counts: number[] = [];
  while (e.hasUnfinished()) counts.push(e.step().filter((o) => o.requestId === id).length);
  assert.deepEqual(counts, [0, ...new Array<number>(20).fill(1)]);
  const s = e.stats;
  assert.equal(s.steps, 20);
  assert.equal(s.decodeSteps, 19);
  // The 20th token's limit is known before it is read: nothing is launched past it.
  assert.equal(s.stepsAhead, 19, 'every decode step ran ahead');
  assert.equal(s.tokensComputed, prompts[1]!.length + 19);
  assert.equal(s.tokensGenerated, 20);
  // EngineOptions.trace sees every launch, the steps launched ahead too.
  assert.deepEqual(paths, ['step', ...new Array<string>(19).fill('decode')]);
  allFree(e);
  e.dispose();
});

test('seeded and unseeded sampling with logprobs: the same tokens and logprobs', () => {
  const sampling: SamplingParams = { doSample: true, temperature: 0.8, topK: 40, topP: 0.9, minP: 0.02, logprobs: 2, maxNewTokens: 24 };
  same('seeded, batch 1', [prompts[0]!], { ...sampling, seed: 7 });
  same(
    'seeded, batched, different seeds and settings',
    prompts,
    prompts.map((_, i) => ({ ...sampling, seed: 100 + i, temperature: 0.5 + 0.2 * i })),
  );
  // Unseeded rows draw from the sampler's generator: the same draws in the same order as long as
  // no dropped row takes one (here every request ends by its length, which is known ahead).
  same(
    'unseeded, batched',
    prompts,
    prompts.map((_, i) => ({ doSample: true, temperature: 1.2, maxNewTokens: 10 + 3 * i })),
    () => ({ sampler: new LogitsSampler({ seed: 3 }) }),
  );
});

test('a redraw on the host (nucleus wider than the candidates): the row computed from the device id is dropped and recomputed', () => {
  // With two candidates a topP 0.95 nucleus rarely closes on the device: the sampler redoes those
  // rows exactly on the cpu, so the id the next step read on the device may be wrong.
  const params = prompts.map((_, i): SamplingParams => ({ doSample: true, topP: 0.95, temperature: 1.5, seed: 11 + i, maxNewTokens: 16 }));
  const off = run(false, prompts, params, { sampler: new LogitsSampler({ maxCandidates: 2 }) });
  const on = run(true, prompts, params, { sampler: new LogitsSampler({ maxCandidates: 2 }) });
  assert.deepEqual(summary(on.outs), summary(off.outs));
  // The same tokens as with enough candidates for every nucleus (no redraws at all).
  const wide = run(false, prompts, params);
  assert.deepEqual(summary(on.outs), summary(wide.outs));
  // Dropped rows were computed again: more tokens through the model than the synchronous run.
  assert.ok(on.e.stats.tokensComputed > off.e.stats.tokensComputed, `${on.e.stats.tokensComputed} vs ${off.e.stats.tokensComputed} tokens computed`);
  for (const r of [off, on, wide]) r.e.dispose();
});

test('penalties: the same tokens; a batch with a penalised row never runs ahead', () => {
  const pen: SamplingParams = { repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3, maxNewTokens: 20 };
  same('greedy with penalties, batch 1', [prompts[3]!], pen, {}, false);
  same('seeded with penalties, batched', prompts, { ...pen, doSample: true, seed: 5 }, {}, false);
  // One penalised request among greedy ones: the batch runs synchronously while it is there,
  // ahead once it has finished (the others go on longer).
  same(
    'one penalised row among greedy rows',
    prompts,
    prompts.map((_, i) => (i === 1 ? { ...pen, maxNewTokens: 6 } : { maxNewTokens: 28 })),
  );
});

test('stop ids, eos ids and length limits: the stop token is the last, the extra token is dropped, blocks are freed', () => {
  const c = cases[2]!;
  const stop = c.generated[4]!;
  const k = c.generated.indexOf(stop);
  // The stop is found a step late: by then the next step (one more token) was already launched.
  const outs = same('eos, stop ids, ignoreEos, lengths', [c.prompt, c.prompt, c.prompt, prompts[0]!], [{ maxNewTokens: 32 }, { maxNewTokens: 32, ignoreEos: true }, { maxNewTokens: 32, ignoreEos: true, stopTokenIds: [stop] }, { maxNewTokens: 3 }], { eosTokenIds: [stop] });
  assert.deepEqual(outs[0]!.outputIds, c.generated.slice(0, k + 1));
  assert.equal(outs[0]!.finishReason, 'stop');
  assert.deepEqual(outs[1]!.outputIds, c.generated);
  assert.deepEqual(outs[2]!.outputIds, c.generated.slice(0, k + 1));
  assert.deepEqual(outs[3]!.outputIds, cases[0]!.generated.slice(0, 3));
  assert.equal(outs[3]!.finishReason, 'length');
  // The model's position limit (128): a 120-token prompt gets 8 tokens.
  const long = same('position limit', [randomInts(120, 5, 0, 96)], { maxNewTokens: 32 });
  assert.equal(long[0]!.outputIds.length, 8);
  assert.equal(long[0]!.finishReason, 'length');
});

test('tiny blocks (size 4): blocks for the next position are allocated ahead; preemption under a small budget; prefix caching', () => {
  same('block size 4', prompts, { maxNewTokens: 32 }, { blockSize: 4, numBlocks: 80 });
  // 20 blocks of 4 hold fewer than two full requests: preemption by recompute (synchronous steps
  // whenever a block is short), then ahead again.
  const off = run(false, prompts, { maxNewTokens: 32 }, { blockSize: 4, numBlocks: 20 });
  const on = run(true, prompts, { maxNewTokens: 32 }, { blockSize: 4, numBlocks: 20 });
  assert.deepEqual(
    on.outs.map((o) => o.outputIds),
    cases.map((c) => c.generated),
  );
  assert.ok(on.e.stats.numPreemptions > 0, 'something was preempted');
  assert.ok(on.e.stats.stepsAhead > 0);
  off.e.dispose();
  on.e.dispose();
  // Prefix caching: a finished request's full blocks stay cached and are hit again.
  const e = new Engine(model, { blockSize: 8, numBlocks: 32, asyncSteps: true });
  const p = [...randomInts(40, 77, 0, 96), 5, 9];
  const first = e.generateAll([p], { maxNewTokens: 20 })[0]!;
  allFree(e);
  const again = e.generateAll([p], { maxNewTokens: 20 })[0]!;
  assert.equal(again.numCachedTokens, 40);
  assert.deepEqual(again.outputIds, first.outputIds);
  allFree(e);
  e.dispose();
});

test('requests joining mid-run and aborted mid-run (from a callback and between steps): the others keep their tokens, blocks back to zero', () => {
  for (const asyncSteps of [false, true]) {
    const e = new Engine(model, { numBlocks: 64, asyncSteps });
    const finals = new Map<string, RequestOutput>();
    const seen = new Map<string, number[]>();
    const onOutput = (o: RequestOutput): void => {
      seen.set(o.requestId, [...(seen.get(o.requestId) ?? []), ...o.newIds]);
      if (o.finished) finals.set(o.requestId, o);
    };
    const a = e.addRequest(prompts[0]!, { maxNewTokens: 32 }, { onOutput });
    const b = e.addRequest(prompts[1]!, { maxNewTokens: 32 }, { onOutput });
    // c aborts itself from its own callback at its 5th token.
    const c = e.addRequest(prompts[2]!, { maxNewTokens: 32 }, { onOutput: (o) => (onOutput(o), o.outputIds.length === 5 && !o.finished ? e.abort(o.requestId) : undefined) });
    for (let i = 0; i < 8; i++) e.step();
    const d = e.addRequest(prompts[3]!, { maxNewTokens: 20 }, { onOutput });
    for (let i = 0; i < 6; i++) e.step();
    assert.equal(e.abort(b), true, 'b is running');
    const f = e.addRequest(prompts[4]!, { maxNewTokens: 12 }, { onOutput });
    while (e.hasUnfinished()) e.step();
    allFree(e);
    const label = `asyncSteps ${asyncSteps}`;
    assert.deepEqual(finals.get(a)!.outputIds, cases[0]!.generated, label);
    assert.deepEqual(finals.get(d)!.outputIds, cases[3]!.generated.slice(0, 20), label);
    assert.deepEqual(finals.get(f)!.outputIds, cases[4]!.generated.slice(0, 12), label);
    assert.equal(finals.get(c)!.finishReason, 'abort');
    assert.deepEqual(finals.get(c)!.outputIds, cases[2]!.generated.slice(0, 5), `${label}: c kept exactly its 5 tokens`);
    assert.equal(finals.get(b)!.finishReason, 'abort');
    const bIds = finals.get(b)!.outputIds;
    assert.ok(bIds.length > 5 && bIds.length < 32, `${label}: b aborted after ${bIds.length} tokens`);
    assert.deepEqual(bIds, cases[1]!.generated.slice(0, bIds.length));
    // Every request's streamed ids are its final ids: nothing after a stop or an abort was delivered.
    for (const [id, o] of finals) assert.deepEqual(seen.get(id) ?? [], o.outputIds, `${label}: request ${id}'s outputs`);
    if (asyncSteps) assert.ok(e.stats.stepsAhead > 0);
    e.dispose();
  }
});

test('streams with async steps: each consumer gets its tokens in order; dispose with a step in flight', async () => {
  const e = new Engine(model, { numBlocks: 32, asyncSteps: true });
  const ids = [1, 3].map((i) => e.addRequest(prompts[i]!, { maxNewTokens: 12 }));
  const streams = ids.map((id) => e.stream(id));
  const got = await Promise.all(
    streams.map(async (s) => {
      const out: number[] = [];
      for await (const o of s) out.push(...o.newIds);
      return out;
    }),
  );
  assert.deepEqual(got, [cases[1]!.generated.slice(0, 12), cases[3]!.generated.slice(0, 12)]);
  allFree(e);
  // A step left in flight when the engine is disposed is dropped (nothing leaks, nothing throws).
  e.addRequest(prompts[0]!, { maxNewTokens: 30 });
  for (let i = 0; i < 5; i++) e.step();
  e.dispose();
});

test('a 64-step async decode loop leaves live memory flat', () => {
  const { tokens, before, after } = decodeLoopMemory(model, { numBlocks: 16, asyncSteps: true });
  // Each call returns the previous step's token: 4 + 64 calls, 67 tokens read.
  assert.equal(tokens, 67, 'the loop really decoded');
  assert.equal(after.allocatedBytes, before.allocatedBytes, 'live bytes unchanged');
  assert.equal(after.activeAllocations, before.activeAllocations, 'live allocations unchanged');
});

test('asyncSteps: off by default, KILN_ASYNC_STEPS sets the default, a bad value is an error', () => {
  const prev = process.env.KILN_ASYNC_STEPS;
  try {
    delete process.env.KILN_ASYNC_STEPS;
    assert.equal(new Engine(model, { numBlocks: 4 }).asyncSteps, false);
    process.env.KILN_ASYNC_STEPS = '1';
    assert.equal(new Engine(model, { numBlocks: 4 }).asyncSteps, true);
    assert.equal(new Engine(model, { numBlocks: 4, asyncSteps: false }).asyncSteps, false);
    // decode 'step' has no decode runner to launch ahead with.
    assert.equal(new Engine(model, { numBlocks: 4, decode: 'step' }).asyncSteps, false);
  } finally {
    if (prev === undefined) delete process.env.KILN_ASYNC_STEPS;
    else process.env.KILN_ASYNC_STEPS = prev;
  }
  assert.throws(() => new Engine(model, { numBlocks: 4, asyncSteps: 'yes' as unknown as boolean }), /Engine: options\.asyncSteps must be a boolean, got "yes"/);
});

test('sampleAsync: ids on the device equal the ids read; numGenerated sets the seeded draw', () => {
  const s = new LogitsSampler();
  const logits = kiln.tensor(Array.from({ length: 3 }, (_, r) => Array.from({ length: 12 }, (_, j) => Math.sin(3 * r + j))));
  for (const params of [{}, { doSample: true, seed: 9, topP: 0.8 }, { doSample: true, seed: 9, logprobs: 1 }] as SamplingParams[]) {
    const rows = [0, 1, 2].map(() => ({ params, promptIds: [1], outputIds: [2, 3] }));
    const p = s.sampleAsync(logits, rows);
    const device = p.ids.toFlatArray();
    const { tokens, redrawn } = p.read();
    p.dispose();
    assert.deepEqual(device, tokens.map((t) => t.id));
    assert.deepEqual(redrawn, []);
    assert.deepEqual(tokens, s.sample(logits, rows));
  }
  // A row whose previous token is still on the device (outputIds lacks it) draws for step 3.
  const params: SamplingParams = { doSample: true, seed: 4, temperature: 3 };
  const one = logits.narrow(0, 1, 1);
  const ahead = s.sampleAsync(one, [{ params, promptIds: [1], outputIds: [2, 3], numGenerated: 3 }]);
  const got = ahead.read().tokens;
  assert.deepEqual(got, s.sample(one, [{ params, promptIds: [1], outputIds: [2, 3, 5] }]));
  // Not the draw of step 2: with temperature 3 over 12 tokens the two draws pick different ids.
  assert.notDeepEqual(got, s.sample(one, [{ params, promptIds: [1], outputIds: [2, 3] }]));
  ahead.dispose();
});

const devices = ['cpu', ...(kiln.isAvailable('cuda') ? ['cuda'] : [])];

for (const device of devices) {
  test(`transfers: uploadFromHost and readLater copy values in stream order and name bad arguments [${device}]`, () => {
    const dst = kiln.zeros([4], { dtype: 'int64', device });
    const host = kiln.tensor([5, -1, 2 ** 40, 7], { dtype: 'int64' });
    uploadFromHost(dst, host);
    // The bytes were staged: changing the host tensor at once does not change the upload.
    host.fill_(0);
    assert.deepEqual(dst.toFlatArray(), [5, -1, 2 ** 40, 7]);
    // A read started before later work sees the values from before it.
    const t = kiln.tensor([1.5, -2, 3], { dtype: 'float32', device });
    const r = readLater(t);
    t.fill_(9);
    assert.deepEqual(r.wait(), [1.5, -2, 3]);
    assert.deepEqual(t.toFlatArray(), [9, 9, 9]);
    // More bytes in flight than cuda's pinned ring (8 MiB) holds: older reads are copied out
    // before their bytes are reused, and every read keeps its values.
    const big = Array.from({ length: 4 }, (_, i) => kiln.full([768 * 1024], i + 0.5, { device }));
    const reads = big.map((b) => readLater(b));
    for (const b of big) b.fill_(-1);
    reads.forEach((rd, i) => {
      const v = rd.wait();
      assert.equal(v.length, 768 * 1024);
      assert.ok(v[0] === i + 0.5 && v[v.length - 1] === i + 0.5, `read ${i}: ${v[0]}, ${v[v.length - 1]}`);
    });
    assert.throws(() => uploadFromHost(dst, kiln.tensor([1, 2], { dtype: 'int64' })), /uploadFromHost: dst int64 \[4\] and src int64 \[2\] must have the same dtype and element count/);
    assert.throws(() => readLater(kiln.zeros([2, 3], { device }).transpose(0, 1)), /readLater: t must be contiguous, got shape \[3, 2\] strides \[1, 3\]/);
  });
}

if (devices.includes('cuda')) {
  test('cuda, compiled decode (CUDA graphs): async steps give the synchronous tokens; greedy gives transformers\' tokens', () => {
    const cudaModel = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'cuda' });
    const runOn = (asyncSteps: boolean, params: SamplingParams | SamplingParams[]): { outs: RequestOutput[]; ahead: number } => {
      const e = new Engine(cudaModel, { numBlocks: 64, asyncSteps });
      assert.equal(e.decodeRunner?.path, 'compiled');
      const outs = e.generateAll(prompts, params);
      allFree(e);
      const ahead = e.stats.stepsAhead;
      e.dispose();
      return { outs, ahead };
    };
    const greedy = runOn(true, { maxNewTokens: 32 });
    assert.deepEqual(
      greedy.outs.map((o) => o.outputIds),
      cases.map((c) => c.generated),
    );
    assert.ok(greedy.ahead > 0);
    const sampled = prompts.map((_, i): SamplingParams => ({ doSample: true, temperature: 0.9, topP: 0.9, seed: 40 + i, logprobs: 1, maxNewTokens: 24 - 3 * i }));
    const on = runOn(true, sampled);
    const off = runOn(false, sampled);
    assert.deepEqual(
      on.outs.map((o) => o.outputIds),
      off.outs.map((o) => o.outputIds),
    );
    assert.ok(on.ahead > 0);
  });
}

// webgpu: the compiled decode step is a replayed recording; a step launched ahead takes its ids
// from the previous step's on the device (a copy recorded in the queue) while the device thread
// encodes it and the host reads the ids before. Greedy on float32 weights: transformers' tokens.
const webgpuSkip = webgpuSkipReason();
test('webgpu, compiled decode (replayed recordings): async steps give transformers\' greedy tokens and the synchronous ones', { skip: webgpuSkip }, () => {
  const wgModel = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'webgpu' });
  const two = [0, 2];
  const runOn = (asyncSteps: boolean): { ids: number[][]; ahead: number } => {
    const e = new Engine(wgModel, { numBlocks: 32, asyncSteps, decode: 'compiled' });
    assert.equal(e.asyncSteps, asyncSteps);
    const outs = e.generateAll(two.map((i) => prompts[i]!), { maxNewTokens: 12 });
    allFree(e);
    const ahead = e.stats.stepsAhead;
    e.dispose();
    return { ids: outs.map((o) => [...o.outputIds]), ahead };
  };
  const on = runOn(true);
  assert.deepEqual(on.ids, two.map((i) => cases[i]!.generated.slice(0, 12)));
  assert.ok(on.ahead > 0, 'no step ran ahead');
  const off = runOn(false);
  assert.deepEqual(off.ids, on.ids);
  assert.equal(off.ahead, 0);
});
