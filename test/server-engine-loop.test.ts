/**
 * The server's engine loop (src/serve/http/engine-loop.ts) schedules in slices: steps back to back,
 * then one flush per client that got outputs, then a turn of the event loop. Checked here: no
 * output is left unflushed when the loop yields, outputs and flushes keep their order, a slice
 * runs several steps when the I/O between slices is slow and one step when maxSliceMs is 0; over
 * HTTP, requests are accepted and answered while a long stream decodes, and a
 * client that stops reading stalls no one and later gets its whole stream in order.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { greedy, sseData, startServer, tinyModel, untilTrue } from './helpers/serve.js';

const model = tinyModel();
type RequestOutput = kiln.serve.RequestOutput;

interface Log {
  outputs: RequestOutput[];
  /** Outputs seen at each flush (cumulative). */
  flushes: number[];
  done: boolean;
}

/** Runs `count` requests of `newTokens` through an EngineLoop, busy-waiting `ioMs` in every event-loop turn (slow I/O). */
async function runLoop(
  maxSliceMs: number,
  ioMs: number,
  count: number,
  newTokens: number,
  flushWhileDeviceRuns = false,
): Promise<{ logs: Log[]; steps: number; turns: number; flushesInStep: number }> {
  const engine = new kiln.serve.Engine(model, { numBlocks: 64 });
  let steps = 0;
  // Flushes made while engine.step() runs (the deferred form flushes there, before the step's read).
  let stepping = false;
  let flushesInStep = 0;
  const step = engine.step.bind(engine);
  engine.step = (o) => {
    stepping = true;
    try {
      return step(o);
    } finally {
      stepping = false;
    }
  };
  const loop = new kiln.serve.EngineLoop(engine, { maxQueue: 16, maxSliceMs, onStep: () => steps++, flushWhileDeviceRuns });
  const logs: Log[] = [];
  for (let i = 0; i < count; i++) {
    const log: Log = { outputs: [], flushes: [], done: false };
    logs.push(log);
    loop.submit([{ requestId: `r${i}`, promptIds: [1 + i, 2, 3], params: { maxNewTokens: newTokens } }], {
      onOutput: (o) => log.outputs.push(o),
      onError: (e) => assert.fail(e),
      flush: () => {
        if (stepping) flushesInStep++;
        assert.ok(log.outputs.length > (log.flushes.at(-1) ?? 0), 'a flush follows new outputs');
        log.flushes.push(log.outputs.length);
        if (log.outputs.at(-1)!.finished) log.done = true;
      },
    });
  }
  let turns = 0;
  await untilTrue(() => {
    turns++;
    // Between two turns every output has been flushed (deferred: all but the last step's, whose
    // outputs go out during the next step).
    const slack = flushWhileDeviceRuns ? 1 : 0;
    for (const log of logs) assert.ok(log.outputs.length - (log.flushes.at(-1) ?? 0) <= slack, 'nothing more is left unflushed when the loop yields');
    const until = performance.now() + ioMs;
    while (performance.now() < until);
    return logs.every((l) => l.done);
  }, 'every request finished');
  for (const [i, log] of logs.entries()) {
    assert.deepEqual(log.outputs.at(-1)!.outputIds, greedy(model, [1 + i, 2, 3], newTokens), 'the tokens are the greedy ones');
    assert.deepEqual(
      log.outputs.map((o) => o.outputIds.length),
      log.outputs.map((_, k) => k + 1),
      'one output per token, in order',
    );
  }
  for (const log of logs) assert.equal(log.flushes.at(-1), log.outputs.length, 'every output is flushed in the end');
  assert.equal(engine.cache.allocator.numFree, engine.cache.numBlocks);
  engine.dispose();
  return { logs, steps, turns, flushesInStep };
}

test('engine loop: slow I/O between slices gets several steps per slice and one flush per client per slice', async (t) => {
  const { logs, steps } = await runLoop(200, 4, 3, 60);
  const flushes = logs[0]!.flushes.length;
  t.diagnostic(`${steps} steps, ${flushes} flushes of request 0 (60 outputs)`);
  assert.ok(flushes < 60 / 2, `outputs are flushed in groups: ${flushes} flushes for 60 outputs`);
});

test('engine loop: maxSliceMs 0 is one step per slice, every output flushed at once', async () => {
  const { logs, steps } = await runLoop(0, 4, 2, 20);
  for (const log of logs) assert.deepEqual(log.flushes, log.outputs.map((_, k) => k + 1), 'a flush per output');
  assert.equal(steps, 20, 'the prefill step makes the first token, then one step per token');
});

test('engine loop: flushWhileDeviceRuns writes each step\'s outputs during the next step, first and last tokens at once', async () => {
  const { logs, steps, flushesInStep } = await runLoop(0, 1, 2, 20, true);
  assert.equal(steps, 20);
  for (const log of logs) {
    // The first token (end of prefill) is flushed at once; then each output goes out with the
    // next step (one per flush) and the last one, when the engine is idle, at the slice's end.
    assert.deepEqual(log.flushes, log.outputs.map((_, k) => k + 1), 'a flush per output, in order');
  }
  // Of each request's 20 flushes, the first (first token) and the last (engine idle) are made
  // outside a step; the 18 in between are made inside the next step, before its read.
  assert.equal(flushesInStep, 2 * 18, `flushes made during a step: ${flushesInStep}`);
});

/** POST /v1/completions with stream: true on a raw node:http request (the response can be paused). */
function rawStream(url: string, body: object): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, resolve);
    req.on('error', reject);
    req.end(JSON.stringify({ ...body, stream: true }));
  });
}

test('over HTTP: a client that stops reading a long stream stalls no one; requests are answered while it decodes; it later gets the whole stream in order', async () => {
  // One engine step per event-loop turn (maxSliceMs 0): the steps the long stream gets while a
  // short request makes its round trip are counted in turns, not milliseconds, so the check that it
  // is still decoding does not depend on the machine's speed or load (with time slices, a loaded CI
  // machine once let all 500 tokens through before the first short answer).
  const { server, url, client } = await startServer({ model, maxSliceMs: 0 });
  try {
    const long = 500;
    const res = await rawStream(url, { prompt: [5, 6, 7], max_tokens: long, temperature: 0, ignore_eos: true });
    assert.equal(res.statusCode, 200);
    res.pause(); // reads nothing for now
    await untilTrue(() => server.metrics.generationTokens.get() > 0, 'the long stream started');
    for (let i = 0; i < 3; i++) {
      const r = await client.completions.create({ model: 'kiln', prompt: [1, 2 + i], max_tokens: 3, temperature: 0 });
      assert.deepEqual((r.choices[0] as unknown as { token_ids: number[] }).token_ids, greedy(model, [1, 2 + i], 3));
      if (i === 0) assert.ok(server.engine.hasUnfinished(), 'the long stream is still decoding when a short request has its answer');
    }
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (text += d));
    const ended = new Promise<void>((resolve) => res.on('end', resolve));
    res.resume();
    await ended;
    const data = sseData(text);
    assert.equal(data.at(-1), '[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as { choices: { token_ids: number[]; finish_reason: string | null }[] });
    assert.deepEqual(
      chunks.flatMap((c) => c.choices[0]!.token_ids),
      greedy(model, [5, 6, 7], long),
      'every token, in order',
    );
    assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, 'length');
    assert.ok(chunks.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null));
  } finally {
    await server.close();
  }
});

/**
 * An EngineLoop over the tiny model whose engine traces its steps: [prefill sequences, decode
 * sequences] per step, and per request whether it finished.
 */
function windowLoop(batchWindowMs: number, engineOptions: kiln.serve.EngineOptions) {
  const steps: [number, number][] = [];
  const engine = new kiln.serve.Engine(model, { numBlocks: 64, ...engineOptions, trace: (e) => void (e.kind === 'step' && steps.push([e.prefillSeqs, e.decodeSeqs])) });
  // One step per slice (maxSliceMs 0), so a request submitted between turns joins a known step.
  const loop = new kiln.serve.EngineLoop(engine, { maxQueue: 16, batchWindowMs, maxSliceMs: 0 });
  const done = new Map<string, number[]>();
  const submit = (id: string, prompt: number[], n = 3): void =>
    loop.submit([{ requestId: id, promptIds: prompt, params: { maxNewTokens: n } }], {
      onOutput: (o) => void (o.finished && done.set(id, [...o.outputIds])),
      onError: (e) => assert.fail(e),
    });
  return { engine, loop, steps, done, submit };
}

const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

test('batch window: requests arriving over several turns while the engine is idle share one prefill step; a full batch starts at once', async () => {
  // A window no test could wait out: the step must start because the batch is full.
  for (const [label, options, count] of [
    ['maxNumSeqs', { maxNumSeqs: 4 }, 4],
    ['maxNumBatchedTokens', { maxNumBatchedTokens: 9 }, 3],
  ] as const) {
    const w = windowLoop(600_000, options);
    for (let i = 0; i < count; i++) {
      w.submit(`r${i}`, [1 + i, 2, 3]);
      for (let k = 0; k < 5; k++) await turn();
      if (i < count - 1) assert.equal(w.steps.length, 0, `${label}: no step while the batch is not full (after ${i + 1} requests)`);
    }
    await untilTrue(() => w.done.size === count, `${label}: every request finished`);
    assert.deepEqual(w.steps[0], [count, 0], `${label}: the first step prefills all ${count} requests`);
    assert.ok(
      w.steps.slice(1).every(([p, d]) => p === 0 && d === count),
      `${label}: then they decode together: ${JSON.stringify(w.steps)}`,
    );
    for (let i = 0; i < count; i++) assert.deepEqual(w.done.get(`r${i}`), greedy(model, [1 + i, 2, 3], 3), `${label}: request ${i} gets its greedy tokens`);
    w.engine.dispose();
  }
});

test('batch window: a lone request waits for the window and no longer; requests arriving while the engine runs are not held', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const w = windowLoop(5, { maxNumSeqs: 4 });
  w.submit('a', [1, 2, 3], 6);
  for (let k = 0; k < 5; k++) await turn();
  t.mock.timers.tick(4);
  for (let k = 0; k < 5; k++) await turn();
  assert.equal(w.steps.length, 0, 'no step 4 ms into a 5 ms window');
  t.mock.timers.tick(1);
  await untilTrue(() => w.steps.length > 0, 'the first step runs when the window ends');
  assert.deepEqual(w.steps[0], [1, 0]);
  // Now the engine runs: a new request joins the next steps with no timer (none is ticked).
  await untilTrue(() => w.steps.length >= 2, 'a decode step');
  w.submit('b', [4, 5, 6], 2);
  await untilTrue(() => w.done.size === 2, 'both requests finished without another tick');
  assert.ok(
    w.steps.some(([p, d]) => p === 1 && d === 1),
    `b's prefill ran beside a's decode: ${JSON.stringify(w.steps)}`,
  );
  assert.deepEqual(w.done.get('a'), greedy(model, [1, 2, 3], 6));
  assert.deepEqual(w.done.get('b'), greedy(model, [4, 5, 6], 2));
  // Idle again: the next request waits for the window again.
  const before = w.steps.length;
  w.submit('c', [7, 8, 9], 1);
  for (let k = 0; k < 5; k++) await turn();
  assert.equal(w.steps.length, before, 'idle again: the window applies');
  t.mock.timers.tick(5);
  await untilTrue(() => w.done.size === 3, 'c finished after its window');
  w.engine.dispose();
});

test('batch window: 0 starts the first step without a timer; a bad value is refused', async () => {
  const w = windowLoop(0, { maxNumSeqs: 4 });
  w.submit('a', [1, 2, 3]);
  await untilTrue(() => w.done.size === 1, 'finished');
  w.engine.dispose();
  const e = new kiln.serve.Engine(model, { numBlocks: 8 });
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => new kiln.serve.EngineLoop(e, { maxQueue: 1, batchWindowMs: bad }), /EngineLoop: batchWindowMs must be a finite number >= 0, got/);
  }
  e.dispose();
});
