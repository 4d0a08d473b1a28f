/**
 * Serving benchmark (issue #17's "over HTTP" and "start to first token" rows), in one process:
 *
 *   engine  Engine.generateAll over N prompts of P random ids, T new tokens each (no eos): the
 *           engine's own throughput, tokens/s;
 *   http    the same N prompts as N concurrent streaming POST /v1/completions (token-id prompts,
 *           temperature 0: greedy like the engine run, where OpenAI's default 1 would sample over
 *           the vocabulary every step; SSE) against createServer on loopback, every chunk read by
 *           a fetch client: tokens/s counted from the chunks' token_ids, and its ratio to the
 *           engine's (goal >= 0.9);
 *   start   `kiln serve --random <config>` spawned with an empty cache folder (cold) and again with
 *           the same folder (warm; R times with --reps R, the median reported): time from spawn to
 *           the first streamed token of one request (P prompt tokens), with the server's own
 *           start-up lines (where the time went: weights, engine, the first step) in the row.
 *           --start-only runs just this (no model in the bench process, no throughput runs).
 * Both throughput runs go once untimed first (compile, capture; all N prompts, 4 new tokens), then
 * timed; rows are JSON like bench/decode.ts's: {framework, workload: 'serve' | 'engine' |
 * 'serve-start', ...}.
 *
 * With --reps R the engine and http runs alternate R times in the process (after the warm-ups) and
 * the rows give the medians, the serve row its ratio as the median of the R per-rep ratios (each
 * http run against the engine run just before it), with every rep's numbers beside: on a shared,
 * loaded cpu one pair of runs says little. --max-slice-ms 0,25 runs the http side once per value of
 * createServer's maxSliceMs in every rep (0: one engine step per event-loop turn), one serve row each;
 * --overlap on,off likewise for flushWhileDeviceRuns (streams written during the next GPU step or
 * between steps); --batch-window-ms 0,2 for batchWindowMs (how long a request finding the engine idle
 * waits for the rest of its burst).
 *
 * --replay adds an engine-replay row per http variant: the engine alone running each http run's
 * steps (its requests added at the same step boundaries: engineReplay), with the http run's ratio
 * to it.
 *
 *   node dist/bench/serve.js --config tiny --device cpu --clients 16 --new 32 --reps 5 --json out.json
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { DType } from '../src/index.js';

const { values: a } = parseArgs({
  options: {
    config: { type: 'string', default: 'tiny' },
    device: { type: 'string', default: 'cpu' },
    dtype: { type: 'string', default: 'float32' },
    clients: { type: 'string', default: '16' },
    prompt: { type: 'string', default: '16' },
    new: { type: 'string', default: '32' },
    reps: { type: 'string', default: '1' },
    'max-slice-ms': { type: 'string' },
    overlap: { type: 'string' },
    'batch-window-ms': { type: 'string' },
    json: { type: 'string' },
    trace: { type: 'string' },
    replay: { type: 'boolean', default: false },
    'no-start': { type: 'boolean', default: false },
    'start-only': { type: 'boolean', default: false },
  },
});
const configs: Record<string, () => kiln.models.Qwen3Config> = { tiny: () => kiln.models.QWEN3_TINY, 'qwen3-0.6b': () => kiln.models.QWEN3_0_6B };
const config = configs[a.config]?.();
if (!config) throw new Error(`bench/serve: unknown --config ${a.config}`);
const N = Number(a.clients);
const P = Number(a.prompt);
const T = Number(a.new);
const R = Number(a.reps);
// createServer's maxSliceMs and flushWhileDeviceRuns; comma lists run one serve row per
// combination, each rep running them all.
const sliceValues: (number | undefined)[] = a['max-slice-ms'] === undefined ? [undefined] : a['max-slice-ms'].split(',').map(Number);
const overlapValues: (boolean | undefined)[] =
  a.overlap === undefined
    ? [undefined]
    : a.overlap.split(',').map((v) => {
        if (v !== 'on' && v !== 'off') throw new Error(`bench/serve: --overlap takes on, off or on,off; got ${a.overlap}`);
        return v === 'on';
      });
const windowValues: (number | undefined)[] = a['batch-window-ms'] === undefined ? [undefined] : a['batch-window-ms'].split(',').map(Number);
const slices = sliceValues.flatMap((ms) => overlapValues.flatMap((overlap) => windowValues.map((window) => ({ ms, overlap, window }))));
if (!Number.isInteger(R) || R < 1) throw new Error(`bench/serve: --reps must be a positive integer, got ${a.reps}`);
if (a['no-start'] && a['start-only']) throw new Error('bench/serve: --no-start and --start-only exclude each other');
const dtype = a.dtype as DType;
const startOnly = a['start-only'];
// --start-only needs no model here: the spawned servers build their own.
const model = startOnly ? (undefined as unknown as kiln.models.Qwen3ForCausalLM) : kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 0, dtype, device: a.device });
if (!startOnly) model.eval();
const prompts = Array.from({ length: N }, (_, i) => Array.from({ length: P }, (_, j) => (i * 7919 + j * 104729) % config.vocabSize));
/**
 * --trace FILE: every engine and http run (warm-ups too) records the engine's trace events
 * (EngineOptions.trace: request arrivals, each step's prefill tokens, decode batch, path, bucket,
 * host ms) and this thread's garbage collections; FILE gets them all, stderr a summary per timed
 * run (where its time went) and for each http run its comparison with the engine run before it.
 */
/** start, end: the timed region (performance.now() of this thread), set after the run. */
interface RunTrace {
  run: string;
  events: kiln.serve.EngineTraceEvent[];
  start?: number;
  end?: number;
}
const traces: RunTrace[] = [];
let traceSink: kiln.serve.EngineTraceEvent[] | null = null;
// --replay needs the http runs' arrivals: the trace is on for it too.
const tracing = a.trace !== undefined || a.replay;
const traceRun = (run: string): void => {
  if (!tracing) return;
  traceSink = [];
  traces.push({ run, events: traceSink });
};
const traceSpan = (start: number, end: number): void => {
  const last = traces.at(-1);
  if (!tracing || last === undefined) return;
  last.start = start;
  last.end = end;
  traceSink = null;
};
/** Garbage collections of this thread (start, ms) while tracing: each run's line sums those in its span. */
const gcEntries: [number, number][] = [];
if (tracing) new PerformanceObserver((list) => void list.getEntries().forEach((e) => gcEntries.push([e.startTime, e.duration]))).observe({ entryTypes: ['gc'] });
const trace = !tracing ? undefined : (e: kiln.serve.EngineTraceEvent): void => void traceSink?.push(e);
const engineOptions = { numBlocks: N * Math.ceil((P + T + 1) / 16) + 8, maxNumSeqs: N, maxNumBatchedTokens: Math.max(512, N * P), prefixCaching: false, trace };

let runNo = 0;
function engineRun(): number {
  const engine = new kiln.serve.Engine(model, engineOptions);
  const no = runNo++;
  traceRun(`engine ${no} warm-up`);
  engine.generateAll(prompts, { maxNewTokens: 4 });
  traceRun(`engine ${no}`);
  const t0 = performance.now();
  const outs = engine.generateAll(prompts, { maxNewTokens: T });
  const t1 = performance.now();
  const ms = t1 - t0;
  traceSpan(t0, t1);
  const tokens = outs.reduce((s, o) => s + o.outputIds.length, 0);
  engine.dispose();
  return tokens / (ms / 1000);
}

/**
 * --replay: the engine alone, given the http run's requests at the same step boundaries: a
 * request the server added after its k-th step is added here after the k-th step too, so every
 * step has the http run's batch composition (prefills split the same way, the same decode batch
 * sizes and tail), run back to back with no idle time. Run once untimed first (the same steps, so
 * the same compiled buckets), then timed from its first step. http/replay is HTTP's own cost
 * (lead-in, batch window, I/O between steps, delivery, tail) at equal steps; replay/engine is what
 * the http run's arrival pattern costs the engine.
 */
function engineReplay(addedAfterStep: readonly number[]): number {
  const engine = new kiln.serve.Engine(model, engineOptions);
  const no = runNo++;
  const once = (): number => {
    let finished = 0;
    let next = 0;
    let t0 = 0;
    for (let k = 0; finished < N; k++) {
      for (; next < N && addedAfterStep[next]! <= k; next++) engine.addRequest(prompts[next]!, { maxNewTokens: T }, { onOutput: (o) => void (o.finished && finished++) });
      if (k === 0) t0 = performance.now();
      engine.step();
    }
    return t0;
  };
  traceRun(`engine-replay ${no} warm-up`);
  once();
  traceRun(`engine-replay ${no}`);
  const t0 = once();
  const t1 = performance.now();
  traceSpan(t0, t1);
  engine.dispose();
  return (N * T) / ((t1 - t0) / 1000);
}

/** For each request of a traced run, in arrival order: how many steps had run when it was added. */
function stepsBeforeAdds(events: readonly kiln.serve.EngineTraceEvent[]): number[] {
  const out: number[] = [];
  let steps = 0;
  for (const e of events) {
    if (e.kind === 'step') steps++;
    else out.push(steps);
  }
  return out;
}

/**
 * The clients run in a worker thread, as separate client processes would: in the server's own
 * event loop their SSE parsing would compete with the engine's steps for one thread. For each
 * message {url, prompts, n} the worker streams every prompt concurrently with fetch and posts back
 * the token count and elapsed ms. One worker serves a server's warm-up and timed runs, so the timed
 * run has fetch loaded and its keep-alive connections open (the warm-up sends all N prompts), as a
 * long-running client would: what is timed is serving, not a fresh thread's first fetch.
 */
const CLIENT_WORKER = `
const { parentPort } = require('node:worker_threads');
async function one(url, prompt, n) {
  const res = await fetch(url + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'bench', prompt, max_tokens: n, temperature: 0, stream: true }) });
  if (!res.ok) throw new Error('HTTP ' + res.status + ': ' + (await res.text()));
  let ids = 0, buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let at;
    while ((at = buf.indexOf('\\n\\n')) >= 0) {
      const data = buf.slice(0, at).replace(/^data: /, '');
      buf = buf.slice(at + 2);
      if (data === '[DONE]') return ids;
      for (const c of JSON.parse(data).choices ?? []) ids += (c.token_ids ?? []).length;
    }
  }
  return ids;
}
parentPort.on('message', ({ url, prompts, n }) => {
  const t0 = performance.now();
  Promise.all(prompts.map((p) => one(url, p, n))).then(
    (counts) => { const t1 = performance.now(); parentPort.postMessage({ tokens: counts.reduce((a, b) => a + b, 0), ms: t1 - t0, start: performance.timeOrigin + t0, end: performance.timeOrigin + t1 }); },
    (e) => parentPort.postMessage({ error: String(e) }),
  );
});
`;

/** A client worker: run(url, prompts, n) streams them all and resolves with tokens and ms. */
/** start and end: the run's first fetch and its last [DONE], as performance.timeOrigin + now (comparable across threads). */
interface ClientRun {
  tokens: number;
  ms: number;
  start: number;
  end: number;
}

function clientWorker(): { run: (url: string, ps: number[][], n: number) => Promise<ClientRun>; close: () => Promise<number> } {
  const w = new Worker(CLIENT_WORKER, { eval: true });
  return {
    run: (url, ps, n) =>
      new Promise((resolve, reject) => {
        const onError = (e: Error): void => reject(e);
        w.once('error', onError);
        w.once('message', (m: ClientRun & { error?: string }) => {
          w.off('error', onError);
          if (m.error) reject(new Error(`bench/serve client: ${m.error}`));
          else resolve(m);
        });
        w.postMessage({ url, prompts: ps, n });
      }),
    close: () => w.terminate(),
  };
}

async function httpRun(v: { ms: number | undefined; overlap: boolean | undefined; window: number | undefined }): Promise<number> {
  const server = kiln.serve.createServer({ model, modelName: 'bench', ...engineOptions, maxSliceMs: v.ms, flushWhileDeviceRuns: v.overlap, batchWindowMs: v.window });
  const { url } = await server.listen(0);
  const clients = clientWorker();
  const no = runNo++;
  traceRun(`http ${no}${v.window === undefined ? '' : ` window ${v.window}`} warm-up`);
  await clients.run(url, prompts, 4);
  traceRun(`http ${no}${v.window === undefined ? '' : ` window ${v.window}`}`);
  const { tokens, ms, start, end } = await clients.run(url, prompts, T);
  traceSpan(start - performance.timeOrigin, end - performance.timeOrigin);
  await clients.close();
  await server.close();
  if (tokens !== N * T) throw new Error(`bench/serve: ${tokens} tokens streamed, expected ${N * T}`);
  return tokens / (ms / 1000);
}

/**
 * Spawn to first streamed token of `kiln serve --random`, with the given cache folder; with the
 * server's 'ready in' and 'first step' lines (where its start-up went).
 */
async function startToFirstToken(cacheDir: string): Promise<{ ms: number; ready: string; firstStep: string }> {
  const main = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src/cli/main.js');
  const t0 = performance.now();
  const child = spawn(process.execPath, [main, 'serve', '--random', a.config, '--device', a.device, '--dtype', dtype, '--port', '0'], { env: { ...process.env, KILN_CACHE_DIR: cacheDir }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const line = (re: RegExp): string => re.exec(out)?.[1] ?? '';
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`kiln serve exited with ${code} before listening`)));
    });
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: `random-${a.config}`, prompt: prompts[0], max_tokens: 2, stream: true }) });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const ms = performance.now() - t0;
    await reader.cancel();
    // The first-step line is printed with the step; give its pipe a moment.
    for (let i = 0; i < 40 && !/first step/.test(out); i++) await new Promise((r) => setTimeout(r, 50));
    return { ms, ready: line(/kiln serve: (ready in [^\n]*)/), firstStep: line(/kiln serve: (first step [^\n]*)/) };
  } finally {
    child.kill('SIGKILL');
  }
}

const rows: Record<string, unknown>[] = [];
const base = { model: a.config, device: a.device, dtype, batch: N, prompt_tokens: P, new_tokens: T };
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const engineReps: number[] = [];
const httpReps: number[][] = slices.map(() => []);
const replayReps: number[][] = slices.map(() => []);
if (!startOnly) {
  engineRun(); // warm-up of the process (kernels, compile caches)
  for (let r = 0; r < R; r++) {
    engineReps.push(engineRun());
    for (const [i, v] of slices.entries()) {
      httpReps[i]!.push(await httpRun(v));
      if (a.replay) {
        replayReps[i]!.push(engineReplay(stepsBeforeAdds(traces.at(-1)!.events)));
      }
    }
  }
}
const repFields = (xs: readonly number[]): object => (R > 1 ? { reps: R, reps_tok_s: xs.map(Math.round) } : {});
if (!startOnly) rows.push({ framework: 'kiln', workload: 'engine', ...base, decode_tok_s: null, throughput_tok_s: Math.round(median(engineReps)), ...repFields(engineReps) });
for (const [i, { ms, overlap, window }] of startOnly ? [] : slices.entries()) {
  const reps = httpReps[i]!;
  const ratios = reps.map((h, j) => h / engineReps[j]!);
  rows.push({
    framework: 'kiln',
    workload: 'serve',
    ...base,
    decode_tok_s: null,
    throughput_tok_s: Math.round(median(reps)),
    ratio_to_engine: Number(median(ratios).toFixed(3)),
    clients: N,
    ...(ms === undefined ? {} : { max_slice_ms: ms }),
    ...(overlap === undefined ? {} : { flush_while_device_runs: overlap }),
    ...(window === undefined ? {} : { batch_window_ms: window }),
    ...repFields(reps),
    ...(R > 1 ? { reps_ratio: ratios.map((x) => Number(x.toFixed(3))) } : {}),
  });
  if (a.replay) {
    // The engine under the http run's arrivals, and the http run against it (see engineReplay).
    const rr = replayReps[i]!;
    const vsReplay = reps.map((h, j) => h / rr[j]!);
    rows.push({
      framework: 'kiln',
      workload: 'engine-replay',
      ...base,
      decode_tok_s: null,
      throughput_tok_s: Math.round(median(rr)),
      ratio_to_engine: Number(median(rr.map((x, j) => x / engineReps[j]!)).toFixed(3)),
      http_ratio_to_replay: Number(median(vsReplay).toFixed(3)),
      ...(ms === undefined ? {} : { max_slice_ms: ms }),
      ...(overlap === undefined ? {} : { flush_while_device_runs: overlap }),
      ...(window === undefined ? {} : { batch_window_ms: window }),
      ...repFields(rr),
    });
  }
}
if (!a['no-start']) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-serve-start-'));
  const cold = await startToFirstToken(dir);
  const warm = [];
  for (let r = 0; r < R; r++) warm.push(await startToFirstToken(dir));
  fs.rmSync(dir, { recursive: true, force: true });
  const warmMs = warm.map((w) => w.ms);
  const mid = warm[warmMs.indexOf([...warmMs].sort((x, y) => x - y)[(R - 1) >> 1]!)]!;
  rows.push({
    framework: 'kiln',
    workload: 'serve-start',
    ...base,
    batch: 1,
    cold_ms: Math.round(cold.ms),
    warm_ms: Math.round(median(warmMs)),
    ...(R > 1 ? { warm_reps_ms: warmMs.map(Math.round) } : {}),
    cold_ready: cold.ready,
    cold_first_step: cold.firstStep,
    warm_ready: mid.ready,
    warm_first_step: mid.firstStep,
  });
}
if (a.trace !== undefined) {
  fs.writeFileSync(a.trace, JSON.stringify({ traces, gc: gcEntries }));
  let engineTrace: TraceNumbers | undefined;
  let httpTrace: TraceNumbers | undefined;
  for (const t of traces) {
    if (t.run.endsWith('warm-up')) continue;
    const n = traceNumbers(t);
    console.error(`${t.run}: ${n.line}`);
    if (t.run.startsWith('engine ')) engineTrace = n;
    else if (t.run.startsWith('http') && engineTrace !== undefined) console.error(`  vs ${engineTrace.run}: ${traceCompare(engineTrace, n)}`);
    else if (t.run.startsWith('engine-replay') && httpTrace !== undefined) console.error(`  ${httpTrace.run} against this replay of its steps: ${traceCompare(n, httpTrace)}`);
    if (t.run.startsWith('http')) httpTrace = n;
  }
}
const out = { meta: { machine: os.hostname(), cpus: os.cpus().length, loadavg: os.loadavg(), date: new Date().toISOString(), command: `node dist/bench/serve.js ${process.argv.slice(2).join(' ')}`, kiln_version: kiln.version, node: process.version }, results: rows };
if (a.json) fs.writeFileSync(a.json, JSON.stringify(out, null, 2));
for (const r of rows) console.log(JSON.stringify(r));

interface TraceNumbers {
  run: string;
  /** The timed region, ms. */
  totalMs: number;
  /** Region start to the first request's arrival at the engine. */
  leadMs: number;
  /** Time inside engine steps. */
  stepMs: number;
  /** Between the first step's start and the last step's end, outside steps. */
  gapMs: number;
  /** Last step's end to the region's end. */
  tailMs: number;
  steps: number;
  /** Of stepMs, the steps with prefill. */
  prefillMs: number;
  line: string;
}

/**
 * A run's trace in numbers (see TraceNumbers) and one line: arrivals (ms after the region's
 * start), steps by kind with their host ms, decode batch sizes and where the region's time went.
 */
function traceNumbers(t: RunTrace): TraceNumbers {
  const adds = t.events.filter((e) => e.kind === 'add');
  const steps = t.events.flatMap((e) => (e.kind === 'step' ? [e] : []));
  const t0 = t.start ?? adds[0]?.t ?? 0;
  const end = t.end ?? t0;
  const sum = (xs: readonly number[]): number => xs.reduce((x, y) => x + y, 0);
  const pre = steps.filter((s) => s.prefillTokens > 0);
  const dec = steps.filter((s) => s.prefillTokens === 0);
  const batches = new Map<number, number>();
  for (const s of dec) batches.set(s.decodeSeqs, (batches.get(s.decodeSeqs) ?? 0) + 1);
  const first = steps[0];
  const last = steps.at(-1);
  const stepMs = sum(steps.map((s) => s.ms));
  const n = {
    run: t.run,
    totalMs: end - t0,
    leadMs: (adds[0]?.t ?? t0) - t0,
    stepMs,
    gapMs: first && last ? last.t + last.ms - first.t - stepMs : 0,
    tailMs: last ? end - (last.t + last.ms) : 0,
    steps: steps.length,
    prefillMs: sum(pre.map((s) => s.ms)),
  };
  const f = (x: number): string => x.toFixed(1);
  const gc = gcEntries.filter(([at]) => at >= t0 && at <= end);
  // The decode steps at the run's largest batch: their median host ms compares step cost alone.
  const top = Math.max(0, ...dec.map((s) => s.decodeSeqs));
  const topMs = dec.filter((s) => s.decodeSeqs === top).map((s) => s.ms).sort((x, y) => x - y);
  const slow = steps.reduce((m, s) => (s.ms > m.ms ? s : m), steps[0] ?? { ms: 0, prefillTokens: 0, decodeSeqs: 0, path: 'step', bucket: 0 });
  const line = [
    `${f(n.totalMs)} ms = lead-in ${f(n.leadMs)} + first arrival to first step ${f(first ? first.t - (adds[0]?.t ?? t0) : 0)} + steps ${f(stepMs)} + between steps ${f(n.gapMs)} + tail ${f(n.tailMs)}`,
    `arrivals at +${adds.map((e) => f(e.t - t0)).join(',')}`,
    `${steps.length} steps`,
    `${pre.length} with prefill (${f(n.prefillMs)} ms) [${pre.map((s) => `+${f(s.t - t0)}: ${s.prefillTokens}p/${s.prefillSeqs}+${s.decodeSeqs}d ${s.path}${s.bucket ? '/' + s.bucket : ''} ${f(s.ms)}ms`).join(', ')}]`,
    `${dec.length} decode-only (${f(sum(dec.map((s) => s.ms)))} ms), batch:steps ${[...batches].sort((x, y) => y[0] - x[0]).map(([b, k]) => `${b}:${k}`).join(' ')}`,
    `batch-${top} decode step median ${topMs.length ? topMs[topMs.length >> 1]!.toFixed(2) : '-'} ms`,
    `slowest step ${f(slow.ms)} ms (${slow.prefillTokens}p+${slow.decodeSeqs}d ${slow.path}${slow.bucket ? '/' + slow.bucket : ''})`,
    `GC ${gc.length}x ${f(sum(gc.map(([, d]) => d)))} ms`,
  ].join('; ');
  return { ...n, line };
}

/**
 * The http run against the engine run before it: the ratio measured, and the ratio if the http
 * run's only cost were its steps (lead-in, gaps and tail free): what the step composition alone
 * explains.
 */
function traceCompare(e: TraceNumbers, h: TraceNumbers): string {
  const f = (x: number): string => x.toFixed(3);
  return [
    `ratio ${f(e.totalMs / h.totalMs)}`,
    `steps alone predict ${f(e.totalMs / (h.stepMs + (e.totalMs - e.stepMs)))} (${h.steps} steps, ${h.stepMs.toFixed(1)} ms, against ${e.steps}, ${e.stepMs.toFixed(1)} ms)`,
    `extra ms: lead-in ${(h.leadMs - e.leadMs).toFixed(1)}, steps ${(h.stepMs - e.stepMs).toFixed(1)} (prefill steps ${(h.prefillMs - e.prefillMs).toFixed(1)}), between steps ${(h.gapMs - e.gapMs).toFixed(1)}, tail ${(h.tailMs - e.tailMs).toFixed(1)}`,
  ].join('; ');
}
