/**
 * The sampler against float64 references (helpers/sampling-ref.ts): greedy is the first argmax, each filter
 * keeps exactly the support the reference computes (and the hand-derived set), penalties move the
 * logits by their formulas (seen through the logprobs), draws follow softmax(x / T) within a
 * binomial tolerance (seeded, so deterministic), a seeded row's tokens do not depend on its batch,
 * and the device is read once per step.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { LogitsSampler } from '../src/serve/sampler.js';
import type { SampledToken, SamplingParams, SamplingRow } from '../src/serve/sampling-params.js';
import { seededUniform } from '../src/serve/sampler-random.js';
import { assertThrowsWith } from './helpers/assert.js';
import { logSoftmax64, refProcessed, softmax64, support } from './helpers/sampling-ref.js';

// ---- helpers -------------------------------------------------------------------------------

const row = (params: SamplingParams, promptIds: number[] = [], outputIds: number[] = []): SamplingRow => ({ params, promptIds, outputIds });

/** Samples one row asking for every logprob; returns the token and the logprobs by id. */
function full(logits: readonly number[], params: SamplingParams, promptIds: number[] = [], outputIds: number[] = [], sampler = new LogitsSampler()): { id: number; lp: number[]; tok: SampledToken } {
  const [tok] = sampler.sample(kiln.tensor([[...logits]]), [row({ ...params, logprobs: logits.length }, promptIds, outputIds)]);
  const lp = new Array<number>(logits.length).fill(NaN);
  for (const a of tok!.top!) lp[a.id] = a.logprob;
  return { id: tok!.id, lp, tok: tok! };
}

function assertLogprobs(got: readonly number[], want: readonly number[], label: string): void {
  assert.equal(got.length, want.length, label);
  for (let i = 0; i < want.length; i++) {
    if (want[i] === -Infinity) assert.equal(got[i], -Infinity, `${label}: id ${i}`);
    else assert.ok(Math.abs(got[i]! - want[i]!) <= 1e-5, `${label}: id ${i}: got ${got[i]}, want ${want[i]}`);
  }
}

/** Checks support and logprobs of one filtered row against the reference, and against `expected` when given. */
function checkFilter(logits: readonly number[], params: SamplingParams, expected?: number[]): void {
  const label = JSON.stringify(params);
  const want = logSoftmax64(refProcessed(logits, { doSample: true, seed: 7, ...params }));
  const { id, lp } = full(logits, { doSample: true, seed: 7, ...params });
  if (expected) assert.deepEqual(support(want), expected, `${label}: the reference's support`);
  assert.deepEqual(support(lp), support(want), `${label}: support`);
  assert.ok(support(want).includes(id), `${label}: drew ${id} outside the support`);
  assertLogprobs(lp, want, label);
}

// ---- tests ---------------------------------------------------------------------------------

test('greedy is argmax (first maximum) for float32, bfloat16 and float16 logits', () => {
  const values = [
    [0.5, 2, -1, 2, 1.5, 2], // ties: the lowest id
    [-3, -2, -2.5, -7, -2, -9],
    [1e-3, 0, 0, 0, 0, 1e-3],
  ];
  let s = 1;
  for (let r = 0; r < 5; r++) values.push(Array.from({ length: 6 }, () => ((s = (s * 48271) % 2147483647) / 2147483647) * 8 - 4));
  for (const dtype of ['float32', 'bfloat16', 'float16'] as const) {
    const logits = kiln.to(kiln.tensor(values), dtype);
    const rounded = kiln.to(logits, 'float32').toArray() as number[][];
    const want = rounded.map((v) => v.indexOf(Math.max(...v)));
    const got = new LogitsSampler().sample(logits, values.map(() => row({ logprobs: 2 })));
    assert.deepEqual(got.map((t) => t.id), want, dtype);
    got.forEach((t, r) => assert.ok(Math.abs(t.logprob! - logSoftmax64(rounded[r]!)[want[r]!]!) <= 1e-5, `${dtype} row ${r} logprob`));
  }
  assert.equal(full([0.5, 2, -1, 2], {}).id, 1);
});

test('greedy ignores temperature and the filters; its logprobs are log_softmax of the logits', () => {
  const logits = [0.3, 1.1, -0.4, 1.0, 0.2];
  const { id, lp } = full(logits, { temperature: 0.2, topK: 1, topP: 0.1, minP: 0.9 });
  assert.equal(id, 1);
  assertLogprobs(lp, logSoftmax64(logits), 'greedy');
});

test('topK keeps exactly the k largest (ties with the k-th stay, as in transformers)', () => {
  const logits = [0.1, 2, -1, 3, 0.5, 2.5, -3, 1];
  checkFilter(logits, { topK: 3 }, [1, 3, 5]);
  checkFilter(logits, { topK: 1 }, [3]);
  checkFilter(logits, { topK: 8 }, [0, 1, 2, 3, 4, 5, 6, 7]);
  checkFilter(logits, { topK: 50 }, [0, 1, 2, 3, 4, 5, 6, 7]);
  checkFilter([1, 5, 5, 5, 0], { topK: 2 }, [1, 2, 3]);
});

test('topP keeps the shortest prefix reaching p, including an exactly equal cumulative mass', () => {
  const probs = [0.1, 0.4, 0.2, 0.3];
  const logits = probs.map(Math.log);
  checkFilter(logits, { topP: 0.35 }, [1]);
  checkFilter(logits, { topP: 0.65 }, [1, 3]);
  checkFilter(logits, { topP: 0.75 }, [1, 2, 3]);
  checkFilter(logits, { topP: 0.95 }, [0, 1, 2, 3]);
  checkFilter(logits, { topP: 1 }, [0, 1, 2, 3]);
  // Four tokens of probability exactly 0.25 (the rest -inf): the mass of two is exactly 0.5, so
  // topP = 0.5 keeps two of them, the lowest ids, as argmax does among ties.
  const tied = [-Infinity, 0, 0, -Infinity, 0, 0];
  checkFilter(tied, { topP: 0.5 }, [1, 2]);
  checkFilter(tied, { topP: 0.25 }, [1]);
  checkFilter(tied, { topP: 0.5000001 }, [1, 2, 4]);
  checkFilter(tied, { topP: 0.75 }, [1, 2, 4]);
  checkFilter(tied, { topP: 0.7500001 }, [1, 2, 4, 5]);
});

test('minP keeps p >= minP * max p', () => {
  const probs = [0.5, 0.25, 0.15, 0.1];
  const logits = probs.map(Math.log);
  checkFilter(logits, { minP: 0.4 }, [0, 1]);
  checkFilter(logits, { minP: 0.25 }, [0, 1, 2]);
  checkFilter(logits, { minP: 0.1 }, [0, 1, 2, 3]);
  checkFilter([2, 2, 1], { minP: 1 }, [0, 1]);
});

test('filters compose in transformers order: T, then topK, then topP on the renormalised rest, then minP', () => {
  const logits = [0.4, 0.3, 0.2, 0.1].map(Math.log);
  // Alone, topP 0.5 needs two tokens (0.4 < 0.5); after topK 2 the top one has 4/7 >= 0.5.
  checkFilter(logits, { topP: 0.5 }, [0, 1]);
  checkFilter(logits, { topK: 2, topP: 0.5 }, [0]);
  // Temperature flattens before topP: at T = 3 the top two hold less than 0.6.
  checkFilter(logits, { topP: 0.6 }, [0, 1]);
  checkFilter(logits, { temperature: 3, topP: 0.6 }, [0, 1, 2]);
  checkFilter(logits, { temperature: 0.5, topK: 3, topP: 0.9, minP: 0.3 }, [0, 1]);
  const wide = [1.2, -0.3, 0.8, 2.1, 0.05, -1.7, 1.9, 0.6, -0.9, 1.4];
  checkFilter(wide, { temperature: 0.8, topK: 6, topP: 0.8, minP: 0.05 });
  checkFilter(wide, { temperature: 1.7, topP: 0.9 });
  checkFilter(wide, { temperature: 0.6, minP: 0.2 });
});

test('penalties change the logits exactly as their formulas (seen through the logprobs)', () => {
  const logits = [0.8, -1.2, 2.5, 0.4, -0.6, 1.9, -2.2, 0.1, 1.1, -0.3, 0.7, -1.5];
  const prompt = [1, 3, 3, 7];
  const output = [3, 5, 5, 5, 9, 1];
  const cases: SamplingParams[] = [
    { repetitionPenalty: 1.3 },
    { repetitionPenalty: 0.7 },
    { presencePenalty: 0.4 },
    { frequencyPenalty: 0.25 },
    { presencePenalty: -0.5, frequencyPenalty: 0.6 },
    { repetitionPenalty: 1.3, presencePenalty: 0.4, frequencyPenalty: 0.25 },
  ];
  for (const p of cases) {
    const processed = refProcessed(logits, p, prompt, output);
    // The penalties must move the logits this test looks at, or it could not fail.
    assert.ok(processed.some((v, i) => Math.abs(v - logits[i]!) > 0.1), JSON.stringify(p));
    assertLogprobs(full(logits, p, prompt, output).lp, logSoftmax64(processed), `greedy ${JSON.stringify(p)}`);
    const sampled = { ...p, doSample: true, temperature: 0.9, seed: 3 };
    assertLogprobs(full(logits, sampled, prompt, output).lp, logSoftmax64(refProcessed(logits, sampled, prompt, output)), `sampled ${JSON.stringify(p)}`);
  }
  // A row without penalties next to one with them is left alone.
  const s = new LogitsSampler();
  const both = s.sample(kiln.tensor([logits, logits]), [row({ logprobs: 12 }, prompt, output), row({ logprobs: 12, repetitionPenalty: 2 }, prompt, output)]);
  const byId = (t: SampledToken): number[] => t.top!.slice().sort((a, b) => a.id - b.id).map((a) => a.logprob);
  assertLogprobs(byId(both[0]!), logSoftmax64(logits), 'unpenalised row');
  assertLogprobs(byId(both[1]!), logSoftmax64(refProcessed(logits, { repetitionPenalty: 2 }, prompt, output)), 'penalised row');
});

test('draws follow softmax(x / T): 4000 seeded draws within 4.5 binomial standard deviations', () => {
  const logits = [1.0, 0.5, 0.0, -0.5, -1.5];
  const T = 0.7;
  const n = 4000;
  const want = softmax64(logits.map((v) => v / T));
  const batch = kiln.tensor(Array.from({ length: n }, () => logits));
  const rows = Array.from({ length: n }, (_, i) => row({ doSample: true, temperature: T, seed: 1000 + i }));
  const ids = new LogitsSampler().sample(batch, rows).map((t) => t.id);
  const counts = logits.map((_, k) => ids.filter((id) => id === k).length);
  const tol = want.map((p) => 4.5 * Math.sqrt(n * p * (1 - p)));
  counts.forEach((c, k) => assert.ok(Math.abs(c - n * want[k]!) <= tol[k]!, `token ${k}: ${c} draws, expected ${(n * want[k]!).toFixed(1)} ± ${tol[k]!.toFixed(1)}`));
  // The tolerance separates T = 0.7 from T = 1, so the check can fail.
  const atOne = softmax64(logits);
  assert.ok(counts.some((c, k) => Math.abs(c - n * atOne[k]!) > tol[k]!), 'T = 1 would pass too');
  // Deterministic: the same seeds draw the same tokens.
  assert.deepEqual(new LogitsSampler().sample(batch, rows).map((t) => t.id), ids);
  // Unseeded rows draw from the sampler's generator, with the same distribution.
  const free = new LogitsSampler({ seed: 99 }).sample(batch, rows.map(() => row({ doSample: true, temperature: T }))).map((t) => t.id);
  logits.forEach((_, k) => {
    const c = free.filter((id) => id === k).length;
    assert.ok(Math.abs(c - n * want[k]!) <= tol[k]!, `unseeded token ${k}: ${c}`);
  });
});

test('a seeded row draws the same tokens alone and in any batch', () => {
  let s = 5;
  const rand = (): number => (s = (s * 48271) % 2147483647) / 2147483647;
  const V = 64;
  const steps = 10;
  const logitsAt = Array.from({ length: steps }, () => Array.from({ length: V }, () => rand() * 4));
  const mine: SamplingParams = { doSample: true, seed: 1234, temperature: 1.3, topP: 0.95, topK: 40, logprobs: 3 };
  const others: SamplingParams[] = [{}, { doSample: true, seed: 9, minP: 0.2 }, { doSample: true, repetitionPenalty: 1.5, frequencyPenalty: 0.3 }];
  const run = (position: number | null, seed = mine.seed): SampledToken[] => {
    const sampler = new LogitsSampler({ seed: position ?? 0 });
    const out: number[] = [];
    const got: SampledToken[] = [];
    for (let t = 0; t < steps; t++) {
      const rows = others.map((p) => row(p, [1, 2], out.slice(0, t)));
      const logits = others.map((_, i) => logitsAt[(t + i + 1) % steps]!);
      const me = row({ ...mine, seed }, [1, 2], out);
      if (position !== null) {
        rows.splice(position, 0, me);
        logits.splice(position, 0, logitsAt[t]!);
      }
      const res = sampler.sample(kiln.tensor(position === null ? [logitsAt[t]!] : logits), position === null ? [me] : rows);
      const tok = res[position ?? 0]!;
      got.push(tok);
      out.push(tok.id);
    }
    return got;
  };
  const alone = run(null);
  for (const position of [0, 2, 3]) assert.deepEqual(run(position), alone, `position ${position}`);
  assert.notDeepEqual(run(null, 4321).map((t) => t.id), alone.map((t) => t.id), 'another seed draws other tokens');
  // The draw of a step is a pure function of (seed, step).
  assert.equal(seededUniform(1234, 3), seededUniform(1234, 3));
  assert.notEqual(seededUniform(1234, 3), seededUniform(1234, 4));
  assert.notEqual(seededUniform(2 ** 40 + 1234, 3), seededUniform(1234, 3));
});

test('logprobs: the chosen token and the top n, most likely first, equal float64 log_softmax', () => {
  const logits = [0.2, 1.7, -0.4, 1.2, 0.9, -2, 0.5, 1.6];
  const params: SamplingParams = { doSample: true, seed: 11, temperature: 0.8, topK: 5, logprobs: 3 };
  const want = logSoftmax64(refProcessed(logits, params));
  const [tok] = new LogitsSampler().sample(kiln.tensor([logits]), [row(params)]);
  assert.ok(Math.abs(tok!.logprob! - want[tok!.id]!) <= 1e-5);
  const order = want.map((_, i) => i).sort((a, b) => want[b]! - want[a]! || a - b);
  assert.deepEqual(tok!.top!.map((a) => a.id), order.slice(0, 3));
  tok!.top!.forEach((a) => assert.ok(Math.abs(a.logprob - want[a.id]!) <= 1e-5));
  // logprobs: 0 gives the chosen token's only; no logprobs field, none at all.
  const [zero, none] = new LogitsSampler().sample(kiln.tensor([logits, logits]), [row({ ...params, logprobs: 0 }), row({ ...params, logprobs: undefined })]);
  assert.deepEqual(zero!.top, []);
  assert.ok(Math.abs(zero!.logprob! - want[zero!.id]!) <= 1e-5);
  assert.deepEqual(Object.keys(none!), ['id']);
});

test('bfloat16 and float16 logits sample like float32 logits of the same values', () => {
  const base = [[0.3, 1.2, -0.7, 0.9, 0.1, 1.25], [2, 1.5, 1, 0.5, 0, -0.5]];
  const rows = [row({ doSample: true, seed: 5, topP: 0.8, logprobs: 6 }), row({ doSample: true, seed: 6, temperature: 1.5, minP: 0.1, logprobs: 6 })];
  for (const dtype of ['bfloat16', 'float16'] as const) {
    const low = kiln.to(kiln.tensor(base), dtype);
    const asF32 = kiln.to(low, 'float32');
    const a = new LogitsSampler().sample(low, rows);
    const b = new LogitsSampler().sample(asF32, rows);
    assert.deepEqual(a, b, dtype);
    const rounded = asF32.toArray() as number[][];
    a.forEach((t, r) => assert.ok(Math.abs(t.logprob! - logSoftmax64(refProcessed(rounded[r]!, rows[r]!.params))[t.id]!) <= 1e-5));
  }
});

test('one device read per step; a second only when a nucleus is wider than maxCandidates, with the same result', () => {
  let s = 17;
  const rand = (): number => (s = (s * 48271) % 2147483647) / 2147483647;
  const logits = kiln.tensor(Array.from({ length: 4 }, () => Array.from({ length: 20 }, () => rand() * 2)));
  const rows = [
    row({ logprobs: 2 }, [1, 2], [3]),
    row({ doSample: true, seed: 1, topP: 0.9, logprobs: 2 }),
    row({ doSample: true, seed: 2, topK: 12, minP: 0.05, repetitionPenalty: 1.2 }, [4], [5, 5]),
    row({ doSample: true, seed: 3, temperature: 2 }),
  ];
  let reads = 0;
  const proto = kiln.Tensor.prototype;
  const original = proto.toFlatArray;
  proto.toFlatArray = function (this: kiln.Tensor): number[] {
    reads++;
    return original.call(this);
  };
  try {
    const wide = new LogitsSampler().sample(logits, rows);
    assert.equal(reads, 1, 'reads with every nucleus inside the candidates');
    reads = 0;
    const narrow = new LogitsSampler({ maxCandidates: 8 }).sample(logits, rows);
    assert.equal(reads, 2, 'reads with the CPU pass for wide rows');
    assert.deepEqual(narrow, wide);
  } finally {
    proto.toFlatArray = original;
  }
  // The fallback rows are exact: compare with the reference support.
  const values = logits.toArray() as number[][];
  const lp = full(values[1]!, { doSample: true, seed: 1, topP: 0.9 }, [], [], new LogitsSampler({ maxCandidates: 8 })).lp;
  assert.deepEqual(support(lp), support(refProcessed(values[1]!, { doSample: true, topP: 0.9 })));
  assert.ok(support(lp).length > 8, 'the nucleus is wider than the candidates');
});

test('bad parameters and inputs get errors naming the argument and value', () => {
  const s = new LogitsSampler();
  const x = kiln.tensor([[1, 2, 3]]);
  const bad = (params: SamplingParams, ...fragments: string[]): void => assertThrowsWith(() => s.sample(x, [row(params)]), 'LogitsSampler.sample: rows[0].params', ...fragments);
  bad({ doSample: true, temperature: 0 }, 'temperature', '> 0 when sampling', 'got 0');
  bad({ temperature: -1 }, 'temperature', 'got -1');
  bad({ temperature: NaN }, 'temperature', 'got NaN');
  bad({ topP: 0 }, 'topP', '(0, 1]', 'got 0');
  bad({ topP: 1.5 }, 'topP', 'got 1.5');
  bad({ topK: -1 }, 'topK', 'integer >= 0', 'got -1');
  bad({ topK: 2.5 }, 'topK', 'got 2.5');
  bad({ minP: 1.2 }, 'minP', '[0, 1]', 'got 1.2');
  bad({ repetitionPenalty: 0 }, 'repetitionPenalty', '> 0', 'got 0');
  bad({ presencePenalty: Infinity }, 'presencePenalty', 'got Infinity');
  bad({ frequencyPenalty: NaN }, 'frequencyPenalty', 'got NaN');
  bad({ logprobs: 21 }, 'logprobs', '0..20', 'got 21');
  bad({ logprobs: -1 }, 'logprobs', 'got -1');
  bad({ seed: 1.5 }, 'seed', 'got 1.5');
  bad({ doSample: 'yes' as unknown as boolean }, 'doSample', '"yes"');
  assertThrowsWith(() => s.sample(kiln.tensor([1, 2, 3]), [row({})]), 'LogitsSampler.sample', 'logits', '[3]');
  assertThrowsWith(() => s.sample(kiln.tensor([[1, 2]], { dtype: 'int64' }), [row({})]), 'LogitsSampler.sample', 'float', 'int64');
  assertThrowsWith(() => s.sample(x, [row({}), row({})]), 'LogitsSampler.sample', 'rows', '(1)', 'got 2');
  assertThrowsWith(() => s.sample(x, [row({ repetitionPenalty: 1.1 }, [0, 3])]), 'rows[0].promptIds[1]', '0..2', 'got 3');
  assertThrowsWith(() => s.sample(x, [row({ frequencyPenalty: 1 }, [], [-1])]), 'rows[0].outputIds[0]', 'got -1');
  assertThrowsWith(() => new LogitsSampler({ maxCandidates: 0 }), 'LogitsSampler', 'maxCandidates', 'got 0');
  assert.deepEqual(s.sample(kiln.zeros([0, 5]), []), []);
});
