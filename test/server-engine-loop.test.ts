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
  const { server, url, client } = await startServer({ model });
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
