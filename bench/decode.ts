/**
 * Generation benchmark of the serve engine (issue #17's rows): seeded random weights of a named
 * Qwen3 config, B requests of `prompt` random tokens each, `new` tokens each (ignoreEos), run to
 * completion by Engine.step(). Per batch size:
 *   decode_tok_s  B x (new - 1) tokens / the time of the steps after every request has its first
 *                 token (each step ends with the host read of the sampled ids, so wall time is
 *                 device time plus the host's share);
 *   ttft_ms       the first step's time at batch 1 (the 128-token prefill plus the first sample),
 *                 median of `reps` runs; the prefill runs as rows of the compiled step (the
 *                 engine's default with compiled decode) or through forwardStep (--prefill step).
 * On cpu, the decode row also carries the bandwidth bound (issue #17): the machine's read bandwidth
 * (bandwidth-lib.ts, measured right before and after the runs, the mean taken, since a shared
 * machine's load moves it) over the weight bytes one token reads (every parameter once; a tied LM
 * head is the embedding, read whole for the logits; untied embedding rows are negligible), and
 * decode_tok_s as a fraction of it. --no-bound skips the measurement.
 * --breakdown adds, per batch size, where a decode step's time goes (medians of 30 steps on the
 * warm engine, every request mid-decode): the whole engine.step() (30 steps back to back, then
 * each part alone); the decode runner's call alone
 * (host: input upload and the graph launch, until it returns), its device time (kiln.Event around
 * it) and its wall time to a synchronize; the sampler alone on those logits (it ends with the host
 * read of the ids). Step minus runner-to-sync minus sampler is the engine's own host share.
 * With async steps (EngineOptions.asyncSteps) step_ms is a step's time in a run of steps, each
 * launched before the previous one is read, and the parts are measured alone (synchronised).
 * --async on,off runs each batch size with async steps on and then off (one engine each; rows
 * carry async_steps), for a side-by-side A/B in one process; without it, the engine's default.
 * Prompts are chunked by the engine's token budget per step (--max-batched-tokens, default 512 as
 * the engine's): at batch 8 and 64 the first tokens come after several prefill steps.
 * One engine per batch size; a warm-up run on it compiles (and captures) first. Rows follow the issue's schema:
 * {framework, workload, model, device, dtype, batch, prompt_tokens, new_tokens, decode_tok_s, ttft_ms}.
 *
 *   node dist/bench/decode.js --device cuda --dtype bfloat16 --batches 1,8,64 --json out.json
 *   node dist/bench/decode.js --config qwen3-30b-a3b-4l --device cuda --batches 1,32   (MoE rows)
 * --config: qwen3-0.6b (default), qwen3-30b-a3b-4l, tiny, tiny-moe.
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as kiln from '../src/index.js';
import { itemSize } from '../src/tensor/dtype.js';
import { readBandwidth } from './bandwidth-lib.js';
import type { DType } from '../src/index.js';

const { values: a } = parseArgs({
  options: {
    config: { type: 'string', default: 'qwen3-0.6b' },
    device: { type: 'string', default: 'cpu' },
    dtype: { type: 'string', default: 'bfloat16' },
    batches: { type: 'string', default: '1,8' },
    prompt: { type: 'string', default: '128' },
    new: { type: 'string', default: '256' },
    reps: { type: 'string', default: '5' },
    decode: { type: 'string', default: '' },
    prefill: { type: 'string', default: '' },
    'max-batched-tokens': { type: 'string', default: '512' },
    json: { type: 'string' },
    'no-bound': { type: 'boolean', default: false },
    breakdown: { type: 'boolean', default: false },
    async: { type: 'string', default: '' },
  },
});

/**
 * Qwen3-30B-A3B's layer shapes (hidden 2048, 32 query / 4 key-value heads of 128, 128 experts of
 * 768, top-8 with normalised weights, untied 151936-token embeddings; its config.json) with
 * `layers` decoder layers: issue #17's MoE decode rows use 4.
 */
const qwen3MoeA3b = (layers: number): kiln.models.Qwen3Config =>
  kiln.models.QWEN3_0_6B.with({
    modelType: 'qwen3_moe',
    hiddenSize: 2048,
    intermediateSize: 6144,
    numHiddenLayers: layers,
    numAttentionHeads: 32,
    numKeyValueHeads: 4,
    headDim: 128,
    tieWordEmbeddings: false,
    numExperts: 128,
    numExpertsPerTok: 8,
    moeIntermediateSize: 768,
    normTopkProb: true,
    decoderSparseStep: 1,
    mlpOnlyLayers: [],
  });
/** A small MoE with the same structure (8 experts, top-2), for a quick check on cpu. */
const tinyMoe = (): kiln.models.Qwen3Config =>
  kiln.models.QWEN3_TINY.with({ modelType: 'qwen3_moe', numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] });
const configs: Record<string, () => kiln.models.Qwen3Config> = {
  tiny: () => kiln.models.QWEN3_TINY,
  'tiny-moe': tinyMoe,
  'qwen3-0.6b': () => kiln.models.QWEN3_0_6B,
  'qwen3-30b-a3b-4l': () => qwen3MoeA3b(4),
};
const config = configs[a.config]?.();
if (!config) throw new Error(`bench/decode: unknown --config ${a.config} (${Object.keys(configs).join(', ')})`);
const dtype = a.dtype as DType;
const promptLen = Number(a.prompt);
const newTokens = Number(a.new);
const reps = Number(a.reps);
const decode = a.decode === '' ? undefined : (a.decode as 'compiled' | 'eager' | 'step');
const prefill = a.prefill === '' ? undefined : (a.prefill as 'rows' | 'step');
/** --async on,off: one engine per batch size and mode, rows side by side (undefined: the engine's default). */
const asyncModes: (boolean | undefined)[] =
  a.async === ''
    ? [undefined]
    : a.async.split(',').map((m) => {
        if (m !== 'on' && m !== 'off') throw new Error(`bench/decode: --async takes on, off or both (on,off), got ${a.async}`);
        return m === 'on';
      });

const model = (config.isMoe ? kiln.models.Qwen3MoeForCausalLM : kiln.models.Qwen3ForCausalLM).fromConfig(config, { seed: 0, dtype, device: a.device });
model.eval();

/** Weight bytes one decode token reads: every parameter once (a tied LM head is the embedding), without untied embedding rows. */
function weightBytesPerToken(): number {
  const seen = new Set<unknown>();
  let bytes = 0;
  for (const [name, p] of model.namedParameters()) {
    if (seen.has(p.storage)) continue;
    seen.add(p.storage);
    if (name.endsWith('embed_tokens.weight') && !config!.tieWordEmbeddings) continue;
    bytes += p.numel() * itemSize(p.dtype);
  }
  return bytes;
}
const bound = a.device === 'cpu' && !a['no-bound'];

function prompts(b: number, seed: number): number[][] {
  let s = seed;
  const next = (): number => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Array.from({ length: b }, () => Array.from({ length: promptLen }, () => Math.floor(next() * config!.vocabSize)));
}

interface Run {
  ttftMs: number;
  decodeMs: number;
  decodeSteps: number;
  /** Median and max time of one decode step. */
  stepMedianMs: number;
  stepMaxMs: number;
}

const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

/** One engine per batch size (its compiled decode programs and CUDA graphs live as long as it does). */
function makeEngine(b: number, asyncSteps: boolean | undefined): kiln.serve.Engine {
  const blocks = b * Math.ceil((promptLen + newTokens + 1) / 16) + 8;
  return new kiln.serve.Engine(model, { numBlocks: blocks, maxNumSeqs: b, maxNumBatchedTokens: Number(a['max-batched-tokens']), decode, prefill, prefixCaching: false, asyncSteps });
}

function runOnce(engine: kiln.serve.Engine, b: number, n: number, seed: number): Run {
  for (const p of prompts(b, seed)) engine.addRequest(p, { maxNewTokens: n, ignoreEos: true });
  const t0 = performance.now();
  let firstDone = -1;
  let started = 0;
  const steps: number[] = [];
  const have = new Set<string>();
  while (engine.hasUnfinished()) {
    const ts = performance.now();
    const outs = engine.step();
    const te = performance.now();
    if (firstDone < 0) {
      for (const o of outs) have.add(o.requestId);
      if (have.size === b) {
        firstDone = te - t0;
        started = te;
      }
    } else {
      steps.push(te - ts);
    }
  }
  const decodeMs = performance.now() - started;
  return { ttftMs: firstDone, decodeMs, decodeSteps: steps.length, stepMedianMs: steps.length ? median(steps) : 0, stepMaxMs: steps.length ? Math.max(...steps) : 0 };
}

const rows: Record<string, unknown>[] = [];
for (const b of a.batches.split(',').map(Number)) for (const mode of asyncModes) benchBatch(b, mode);

function benchBatch(b: number, mode: boolean | undefined): void {
  const engine = makeEngine(b, mode);
  const asyncSteps = engine.asyncSteps;
  // Warm-up: compile and capture this batch's buckets. The whole batch must decode together at
  // least once, else its full-batch decode step is captured inside the measured run (on the H200 a
  // 116 ms step in a 0.8 s batch-64 run): the prompts take ceil(b x prompt / token budget)
  // prefill steps, during which the first requests already decode, so the warm-up generates more
  // tokens than that.
  const prefillSteps = Math.ceil((b * promptLen) / Number(a['max-batched-tokens']));
  const warm = runOnce(engine, b, Math.min(newTokens, Math.max(8, prefillSteps + 8)), 1);
  const runs: Run[] = [];
  const bwBefore = bound ? readBandwidth() : null;
  const loadBefore = os.loadavg();
  for (let r = 0; r < (b >= 32 ? 1 : 2); r++) runs.push(runOnce(engine, b, newTokens, 100 + r));
  const loadAfter = os.loadavg();
  const bwAfter = bound ? readBandwidth() : null;
  const best = runs.reduce((x, y) => (y.decodeMs < x.decodeMs ? y : x));
  const decodeTokS = (b * (newTokens - 1)) / (best.decodeMs / 1000);
  let boundRow: Record<string, unknown> = {};
  if (bwBefore && bwAfter) {
    const gbS = (bwBefore.gbS + bwAfter.gbS) / 2;
    const bytes = weightBytesPerToken();
    const boundTokS = (gbS * 1e9) / bytes;
    // At batch b one pass over the weights yields b tokens.
    boundRow = { bandwidth_gb_s: Number(gbS.toFixed(2)), bandwidth_samples_gb_s: [bwBefore.gbS, bwAfter.gbS], weight_bytes_per_step: bytes, bound_tok_s: Number((b * boundTokS).toFixed(2)), fraction_of_bound: Number((decodeTokS / (b * boundTokS)).toFixed(3)) };
  }
  const counters = engine.decodeRunner?.compileCounters;
  rows.push({
    framework: 'kiln', workload: 'decode', model: a.config, device: a.device, dtype, batch: b, prompt_tokens: promptLen, new_tokens: newTokens,
    decode_tok_s: Number(decodeTokS.toFixed(2)), ttft_ms: Number(best.ttftMs.toFixed(2)), decode_path: engine.decodeRunner?.path ?? 'step', whole_step: engine.decodeRunner?.wholeStepDecoder?.name ?? null, whole_step_reason: engine.decodeRunner?.wholeStepReason ?? null, prefill_path: engine.prefillRows ? 'rows' : 'step', async_steps: asyncSteps, ...boundRow, loadavg_1m: [loadBefore[0], loadAfter[0]],
    step_median_ms: Number(best.stepMedianMs.toFixed(3)), step_max_ms: Number(best.stepMaxMs.toFixed(2)), warmup_ms: Number((warm.ttftMs + warm.decodeMs).toFixed(0)),
    compile: counters ? { traces: counters.traces, compiles: counters.compiles, cacheHits: counters.cacheHits, graphBreaks: counters.graphBreaks } : null,
    runs: runs.map((r) => ({ decode_ms: Number(r.decodeMs.toFixed(1)), ttft_ms: Number(r.ttftMs.toFixed(2)) })),
  });
  if (boundRow.bound_tok_s !== undefined) console.error(`batch ${b}: bound ${String(boundRow.bound_tok_s)} tok/s at ${String(boundRow.bandwidth_gb_s)} GB/s; ${(100 * Number(boundRow.fraction_of_bound)).toFixed(1)}% of it`);
  const whole = engine.decodeRunner?.wholeStepDecoder?.name ?? engine.decodeRunner?.wholeStepReason;
  if (whole) console.error(`batch ${b}: whole-step decoder ${engine.decodeRunner?.wholeStepDecoder ? whole : `none: ${whole}`}`);
  console.error(`batch ${b}${asyncSteps ? ' async' : ''}: ${decodeTokS.toFixed(2)} tok/s decode (step median ${best.stepMedianMs.toFixed(2)} ms), first tokens after ${best.ttftMs.toFixed(1)} ms`);
  if (a.breakdown && engine.decodeRunner) rows.push(breakdown(engine, b));
  if (b === 1) {
    // Time to first token at batch 1: the median of `reps` short runs on the warm engine.
    const ttfts: number[] = [];
    for (let r = 0; r < reps; r++) ttfts.push(runOnce(engine, 1, 1, 200 + r).ttftMs);
    rows.push({ framework: 'kiln', workload: 'ttft', model: a.config, device: a.device, dtype, batch: 1, prompt_tokens: promptLen, new_tokens: 1, decode_tok_s: null, ttft_ms: Number(median(ttfts).toFixed(2)), prefill_path: engine.prefillRows ? 'rows' : 'step', async_steps: asyncSteps, samples_ms: ttfts.map((x) => Number(x.toFixed(2))) });
  }
  engine.dispose();
}

/** Where one decode step's time goes at batch b (see --breakdown in the header). */
function breakdown(engine: kiln.serve.Engine, b: number): Record<string, unknown> {
  const runner = engine.decodeRunner!;
  const ids = prompts(b, 300).map((p) => engine.addRequest(p, { maxNewTokens: 200, ignoreEos: true }));
  while (engine.scheduler.running.length < b || engine.scheduler.running.some((s) => s.outputIds.length === 0)) engine.step();
  const reps = 30;
  const stepMs: number[] = [];
  const launchMs: number[] = [];
  const deviceMs: number[] = [];
  const syncMs: number[] = [];
  const sampleMs: number[] = [];
  const device = engine.cache.geometry.device;
  // Whole steps back to back (with async steps each overlaps the next one's launch), then the parts.
  for (let r = 0; r < reps; r++) {
    const t = performance.now();
    engine.step();
    stepMs.push(performance.now() - t);
  }
  kiln.synchronize(device);
  for (let r = 0; r < reps; r++) {
    let t = 0;
    const seqs = engine.scheduler.running;
    // Each row redoes its sequence's last cached token (same id and position: the cache gets the
    // same keys and values back), so no block beyond the scheduler's allocation is touched.
    const rowsIn = seqs.map((s) => ({ tokenId: s.tokens[s.numComputed - 1]!, position: s.numComputed - 1, blockTable: s.blockTable }));
    const samplingRows = seqs.map((s) => ({ params: s.params, promptIds: s.promptIds, outputIds: s.outputIds }));
    kiln.synchronize(device);
    kiln.noGrad(() =>
      kiln.scope(() => {
        const e0 = new kiln.Event(device, { enableTiming: true }).record();
        t = performance.now();
        const logits = runner.run(rowsIn);
        launchMs.push(performance.now() - t);
        const e1 = new kiln.Event(device, { enableTiming: true }).record();
        kiln.synchronize(device);
        syncMs.push(performance.now() - t);
        deviceMs.push(e0.elapsedTime(e1));
        t = performance.now();
        engine.sampler.sample(logits, samplingRows);
        sampleMs.push(performance.now() - t);
      }),
    );
  }
  for (const id of ids) engine.abort(id);
  const m = (xs: number[]): number => Number(median(xs).toFixed(3));
  const row = { framework: 'kiln', workload: 'decode-breakdown', model: a.config, device: a.device, dtype, batch: b, async_steps: engine.asyncSteps, step_ms: m(stepMs), runner_launch_ms: m(launchMs), runner_device_ms: m(deviceMs), runner_sync_ms: m(syncMs), sample_ms: m(sampleMs), engine_host_ms: Number((median(stepMs) - median(syncMs) - median(sampleMs)).toFixed(3)) };
  console.error(`batch ${b}${engine.asyncSteps ? ' async' : ''} breakdown: step ${row.step_ms} ms = runner ${row.runner_sync_ms} (launch ${row.runner_launch_ms}, device ${row.runner_device_ms}) + sample ${row.sample_ms} + engine ${row.engine_host_ms}`);
  return row;
}

let commit = '';
try {
  commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
} catch {
  /* not a checkout */
}
const out = { meta: { machine: os.hostname(), cpu: os.cpus()[0]?.model, cpus: os.cpus().length, date: new Date().toISOString(), command: `node dist/bench/decode.js ${process.argv.slice(2).join(' ')}`, commit, kiln_version: kiln.version, node: process.version }, results: rows };
if (a.json) fs.writeFileSync(a.json, JSON.stringify(out, null, 2));
for (const r of rows) console.log(`${String(r.workload).padEnd(7)} batch ${String(r.batch).padStart(3)}${r.async_steps ? ' async' : '      '}  decode ${String(r.decode_tok_s ?? '-').padStart(7)} tok/s  ttft ${r.ttft_ms} ms${r.step_ms !== undefined ? `  step ${String(r.step_ms)} ms` : ''}`);
