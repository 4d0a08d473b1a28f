/**
 * Sampling on webgpu (serve/sampler.ts, sample-rows.ts, penalties.ts on webgpu logits) against the
 * float64 references of helpers/sampling-ref.ts, computed from the very logits the device saw:
 * - the LogitsSampler on random [B, V] logits (V = 20 with every logprob; V = 3000 with the top 5,
 *   with the default candidates and with 64, which sends wide nuclei to the cpu pass): each token
 *   lies in the reference support (topK, topP, minP after temperature and penalties), top-k = 1
 *   and top-p = 1e-6 give the greedy token, greedy rows the first argmax of the penalised logits,
 *   logprobs and the top alternatives equal float64 log_softmax of the processed logits, and every
 *   draw is the reference's inverse-CDF draw of the same uniform;
 * - applyPenalties on webgpu moves exactly the penalised logits, by the formulas, and no other;
 * - the engine on the tiny Qwen3 checkpoint, decode 'eager' and 'compiled': top-k = 1 and
 *   top-p = 1e-6 requests give transformers' greedy tokens, every step of every request passes the
 *   checks above, and a second engine with the same seeds gives the same tokens.
 *
 * The random stream is the cpu's: the uniforms are drawn on the host (a seeded request's from
 * (seed, step), sampler-random.ts; an unseeded one's from the sampler's Generator, in row order),
 * and only the draw from them runs on the device. So the draw checks below use the same uniforms
 * as the cpu sampler would, and the webgpu ids equal the cpu sampler's ids on the same logits.
 * A draw whose uniform lies within DRAW_MARGIN of its interval's ends may differ (float32 sums).
 *
 * Needs a real adapter (a GPU or SwiftShader); skips without one and on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { applyPenalties } from '../src/serve/penalties.js';
import { LogitsSampler } from '../src/serve/sampler.js';
import { seededUniform } from '../src/serve/sampler-random.js';
import type { SampledToken, Sampler, SamplingParams, SamplingRow } from '../src/serve/sampling-params.js';
import { argmax64, logSoftmax64, refDraw, refPenalised, refProcessed, support } from './helpers/sampling-ref.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');

/** float32 logprobs against float64: a few ulps of logits of size ~10. */
const LOGPROB_TOL = 2e-5;
/** Uniforms this close (in probability) to the ends of the drawn id's interval may pick a neighbour. */
const DRAW_MARGIN = 1e-5;

const row = (params: SamplingParams, promptIds: readonly number[] = [], outputIds: readonly number[] = []): SamplingRow => ({ params, promptIds, outputIds });

/** The uniform each sampling row of one step draws: seeded from (seed, step), else the next of `gen` (the sampler's Generator, in row order). */
function uniforms(rows: readonly SamplingRow[], gen: kiln.Generator): (number | null)[] {
  return rows.map((r) => (!r.params.doSample ? null : Math.fround(r.params.seed !== undefined ? seededUniform(r.params.seed, r.outputIds.length) : gen.nextDouble())));
}

/** What is wrong with `tok` as the sampler's answer for `r` over `logits` (float32 values), or null. */
function checkToken(logits: readonly number[], r: SamplingRow, tok: SampledToken, uniform: number | null): string | null {
  const want = refProcessed(logits, r.params, r.promptIds, r.outputIds);
  const keep = support(want);
  if (!keep.includes(tok.id)) return `id ${tok.id} outside the reference support [${keep.slice(0, 8).join(', ')}${keep.length > 8 ? ', ...' : ''}]`;
  if (!r.params.doSample) {
    if (tok.id !== argmax64(want)) return `greedy id ${tok.id}, reference argmax ${argmax64(want)}`;
  } else if (uniform !== null) {
    const d = refDraw(want, uniform);
    if (d.id !== tok.id && d.margin > DRAW_MARGIN) return `drew ${tok.id}, the reference draws ${d.id} from uniform ${uniform} (margin ${d.margin})`;
  }
  const n = r.params.logprobs;
  if (n === undefined) return tok.logprob === undefined ? null : 'logprobs nobody asked for';
  const lp = logSoftmax64(want);
  if (!(Math.abs(tok.logprob! - lp[tok.id]!) <= LOGPROB_TOL)) return `logprob ${tok.logprob}, reference ${lp[tok.id]}`;
  const order = lp.map((_, i) => i).sort((a, b) => lp[b]! - lp[a]! || a - b);
  if (tok.top!.length !== Math.min(n, logits.length)) return `${tok.top!.length} alternatives, asked for ${n}`;
  for (let j = 0; j < tok.top!.length; j++) {
    const a = tok.top![j]!;
    const w = lp[order[j]!]!;
    if (w === -Infinity) {
      if (a.logprob !== -Infinity) return `alternative ${j}: logprob ${a.logprob}, the reference filtered it`;
      continue;
    }
    // Ids may swap only where the reference's logprobs tie within the tolerance.
    if (a.id !== order[j] && !(Math.abs(lp[a.id]! - w) <= LOGPROB_TOL)) return `alternative ${j}: id ${a.id}, reference ${order[j]}`;
    if (!(Math.abs(a.logprob - lp[a.id]!) <= LOGPROB_TOL)) return `alternative ${j} (id ${a.id}): logprob ${a.logprob}, reference ${lp[a.id]}`;
  }
  return null;
}

/** Seeded random logits [B, V] (float32; a peaked floor like a language model's) as a cpu tensor and its values. */
function randomLogits(B: number, V: number, seed: number): { cpu: Tensor; values: number[][] } {
  const cpu = kiln.mul(kiln.randn([B, V], { generator: new kiln.Generator(seed) }), 2.5);
  return { cpu, values: cpu.toArray() as number[][] };
}

/** Sampling settings the sampler tests cover, each used with several seeds. */
const SETTINGS: readonly SamplingParams[] = [
  {},
  { doSample: true, topK: 1, temperature: 0.7 },
  { doSample: true, topP: 1e-6 },
  { doSample: true, temperature: 0.6, topK: 5, topP: 0.9 },
  { doSample: true, topP: 0.8 },
  { doSample: true, temperature: 1.3, minP: 0.1 },
  { doSample: true },
  { doSample: true, temperature: 0.9, topK: 8, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.2 },
  { repetitionPenalty: 0.8, frequencyPenalty: -0.4 },
  { doSample: true, temperature: 3, topP: 0.99 },
];

/** One row per (setting, seed); every other row unseeded (the sampler's Generator draws for it). */
function samplerRows(V: number, seeds: number, logprobs: number): SamplingRow[] {
  return SETTINGS.flatMap((p, k) =>
    Array.from({ length: seeds }, (_, s) => {
      const seed = s % 2 === 0 ? 100 * k + s : undefined;
      const output = [(7 * s + k) % V, 3, 3, (5 * s) % V].slice(0, s % 4);
      return row({ ...p, seed, logprobs }, [1, 3, (11 * k) % V, 1], output);
    }),
  );
}

test('webgpu LogitsSampler on random logits: support, greedy, logprobs and every draw equal the float64 reference; ids equal the cpu sampler', { skip }, () => {
  const cases = [
    { V: 20, seeds: 6, logprobs: 20, maxCandidates: [undefined] },
    { V: 3000, seeds: 2, logprobs: 5, maxCandidates: [undefined, 64] },
  ];
  for (const { V, seeds, logprobs, maxCandidates } of cases) {
    const rows = samplerRows(V, seeds, logprobs);
    const { cpu, values } = randomLogits(rows.length, V, V);
    const gpu = cpu.to('webgpu');
    const cpuIds = new LogitsSampler({ seed: 99 }).sample(cpu, rows).map((t) => t.id);
    for (const mc of maxCandidates) {
      const label = `V ${V}, maxCandidates ${mc ?? 'default'}`;
      const got = new LogitsSampler({ seed: 99, maxCandidates: mc }).sample(gpu, rows);
      const u = uniforms(rows, new kiln.Generator(99));
      const bad = rows.flatMap((r, i) => {
        const m = checkToken(values[i]!, r, got[i]!, u[i]!);
        return m === null ? [] : [`row ${i} ${JSON.stringify(r.params)}: ${m}`];
      });
      assert.deepEqual(bad, [], label);
      // top-k = 1 and top-p -> 0 are greedy: the first argmax of the (tempered) logits.
      rows.forEach((r, i) => {
        if (r.params.topK === 1 || r.params.topP === 1e-6) assert.equal(got[i]!.id, argmax64(values[i]!), `${label} row ${i}: ${JSON.stringify(r.params)}`);
      });
      // The uniforms come from the host, so the draws are the cpu sampler's; they may differ only
      // where a draw sits on a boundary.
      const differ = rows.flatMap((r, i) => {
        if (got[i]!.id === cpuIds[i]) return [];
        const d = refDraw(refProcessed(values[i]!, r.params, r.promptIds, r.outputIds), u[i] ?? 0);
        return r.params.doSample && d.margin <= DRAW_MARGIN ? [] : [`row ${i}: webgpu ${got[i]!.id}, cpu ${cpuIds[i]}`];
      });
      assert.deepEqual(differ, [], `${label}: webgpu and cpu ids`);
      // The same seeds (and sampler seed) draw the same tokens again.
      assert.deepEqual(new LogitsSampler({ seed: 99, maxCandidates: mc }).sample(gpu, rows).map((t) => t.id), got.map((t) => t.id), `${label}: a second run`);
      // The check can fail: another seed moves some draws.
      const other = new LogitsSampler({ seed: 99, maxCandidates: mc }).sample(gpu, rows.map((r) => row({ ...r.params, seed: (r.params.seed ?? 0) + 7 }, r.promptIds, r.outputIds)));
      assert.ok(other.some((t, i) => t.id !== got[i]!.id), `${label}: other seeds draw other tokens somewhere`);
    }
  }
});

test('applyPenalties on webgpu changes exactly the penalised logits, by the float64 formulas', { skip }, () => {
  const V = 300;
  const rows = [
    row({ repetitionPenalty: 1.3 }, [1, 3, 3, 7], [3, 5, 5, 5, 9, 1]),
    row({ repetitionPenalty: 0.7 }, [250, 2], [299]),
    row({}, [4, 5], [6]), // no penalties: left alone next to rows with them
    row({ presencePenalty: 0.4 }, [8], [10, 10, 11]),
    row({ frequencyPenalty: 0.25 }, [8], [12, 12, 12, 13]),
    row({ repetitionPenalty: 1.3, presencePenalty: -0.5, frequencyPenalty: 0.6 }, [0, 20, 40, 60, 80, 100, 120], [20, 20, 140, 299, 0]),
  ];
  const { cpu, values } = randomLogits(rows.length, V, 5);
  const got = applyPenalties(cpu.to('webgpu'), rows).toArray() as number[][];
  rows.forEach((r, i) => {
    const want = refPenalised(values[i]!, r.params, r.promptIds, r.outputIds);
    const moved = want.flatMap((w, v) => (w !== values[i]![v] ? [v] : []));
    // Every row with penalties must move logits this test looks at, or it could not fail.
    assert.equal(moved.length > 0, Object.keys(r.params).length > 0, `row ${i}: ${moved.length} logits moved`);
    for (let v = 0; v < V; v++) {
      const g = got[i]![v]!;
      // Untouched logits come back bit for bit; penalised ones within float32's rounding of the formula.
      if (!moved.includes(v)) assert.equal(g, values[i]![v], `row ${i} id ${v}: untouched`);
      else assert.ok(Math.abs(g - want[v]!) <= 2 ** -22 * Math.max(1, Math.abs(want[v]!)), `row ${i} id ${v}: ${g}, reference ${want[v]} (from ${values[i]![v]})`);
    }
  });
});

interface Reference {
  cases: { prompt: number[]; generated: number[] }[];
}

/** The LogitsSampler, recording each step's logits (read back, float32), rows and answers. */
class Recorder implements Sampler {
  static readonly SEED = 0x5eed;
  readonly inner = new LogitsSampler({ seed: Recorder.SEED });
  readonly steps: { logits: number[][]; rows: SamplingRow[]; out: SampledToken[] }[] = [];

  sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
    assert.equal(logits.device.type, 'webgpu', 'the engine samples webgpu logits');
    const values = kiln.to(logits, 'float32').toArray() as number[][];
    const out = this.inner.sample(logits, rows);
    this.steps.push({ logits: values, rows: rows.map((r) => row(r.params, [...r.promptIds], [...r.outputIds])), out });
    return out;
  }

  /** Every step checked against the reference: the messages of those that fail. */
  failures(): string[] {
    const gen = new kiln.Generator(Recorder.SEED);
    return this.steps.flatMap((s, k) => {
      const u = uniforms(s.rows, gen);
      return s.rows.flatMap((r, i) => {
        const m = checkToken(s.logits[i]!, r, s.out[i]!, u[i]!);
        return m === null ? [] : [`step ${k} row ${i} ${JSON.stringify(r.params)}: ${m}`];
      });
    });
  }
}

test("webgpu engine, decode 'eager' and 'compiled': top-k 1 and top-p 1e-6 give transformers' greedy tokens; every sampled step equals the float64 reference; seeds reproduce", { skip }, () => {
  const ref = JSON.parse(fs.readFileSync(path.join(DENSE, 'generate.json'), 'utf8')) as Reference;
  const model = kiln.models.loadQwen3(DENSE, { dtype: 'float32', device: 'webgpu' });
  const N = 12;
  const requests: { prompt: number[]; params: SamplingParams }[] = [
    { prompt: ref.cases[0]!.prompt, params: { doSample: true, seed: 11, topK: 1, temperature: 0.7 } },
    { prompt: ref.cases[1]!.prompt, params: { doSample: true, seed: 12, topP: 1e-6 } },
    { prompt: ref.cases[2]!.prompt, params: { doSample: true, seed: 13, temperature: 0.8, topK: 20, topP: 0.9, minP: 0.05, repetitionPenalty: 1.2, presencePenalty: 0.3, frequencyPenalty: 0.2, logprobs: 5 } },
    { prompt: ref.cases[3]!.prompt, params: { doSample: true, seed: 14, logprobs: 3 } },
    { prompt: ref.cases[4]!.prompt, params: { doSample: true, temperature: 1.5, topK: 10, logprobs: 2 } },
    { prompt: ref.cases[0]!.prompt, params: { repetitionPenalty: 1.5, logprobs: 4 } },
  ];
  const run = (decode: 'eager' | 'compiled'): { ids: number[][]; recorder: Recorder; engine: kiln.serve.Engine } => {
    const recorder = new Recorder();
    const engine = new kiln.serve.Engine(model, { numBlocks: 48, decode, sampler: recorder });
    const outs = engine.generateAll(
      requests.map((r) => r.prompt),
      requests.map((r) => ({ ...r.params, maxNewTokens: N })),
    );
    return { ids: outs.map((o) => [...o.outputIds]), recorder, engine };
  };
  for (const decode of ['eager', 'compiled'] as const) {
    const first = run(decode);
    const second = run(decode);
    try {
      const { ids, recorder, engine } = first;
      assert.deepEqual(ids[0], ref.cases[0]!.generated.slice(0, N), `${decode}: top-k 1`);
      assert.deepEqual(ids[1], ref.cases[1]!.generated.slice(0, N), `${decode}: top-p 1e-6`);
      assert.deepEqual(recorder.failures(), [], `${decode}: steps against the reference`);
      assert.equal(recorder.steps.reduce((n, s) => n + s.rows.length, 0), requests.length * N, `${decode}: every token sampled through the recorder`);
      // The penalised greedy request leaves transformers' plain greedy path (so its check can fail).
      assert.notDeepEqual(ids[5], ref.cases[0]!.generated.slice(0, N), `${decode}: the repetition penalty changes the tokens`);
      assert.deepEqual(second.ids, ids, `${decode}: the same seeds give the same tokens`);
      if (decode === 'compiled') {
        const c = engine.decodeRunner!.compileCounters!;
        assert.equal(c.graphBreaks + c.fallbacks + c.eagerCalls, 0, `${decode}: compile counters ${JSON.stringify(c)}`);
      }
    } finally {
      for (const r of [first, second]) {
        r.engine.dispose();
        r.recorder.inner.dispose();
      }
    }
  }
});
