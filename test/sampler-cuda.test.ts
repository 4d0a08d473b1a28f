/**
 * The sampler on cuda logits of Qwen3's vocabulary size against the same sampler on the CPU copy:
 * the same tokens and logprobs to 1e-4 (cuda's exp and scans round differently). Covers greedy,
 * topK, topP (nucleus inside the candidates, and wider than them: the CPU pass), minP, penalties
 * and bfloat16 logits. Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { LogitsSampler } from '../src/serve/sampler.js';
import type { SampledToken, SamplingRow } from '../src/serve/sampling-params.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const VOCAB = 151936;

function rows(): SamplingRow[] {
  const r = (params: SamplingRow['params'], outputIds: number[] = []): SamplingRow => ({ params, promptIds: [11, 12, 151643], outputIds });
  return [
    r({ logprobs: 5 }),
    r({ doSample: true, seed: 1, temperature: 0.6, topK: 20, topP: 0.95, logprobs: 5 }),
    r({ doSample: true, seed: 2, topP: 0.9, logprobs: 2 }, [7]),
    r({ doSample: true, seed: 3, temperature: 1.2, minP: 0.05 }),
    r({ doSample: true, seed: 4, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.2, logprobs: 1 }, [5, 5, 9]),
    r({ doSample: true, seed: 5, temperature: 3, topP: 0.99 }), // a nucleus far wider than 4096 tokens
  ];
}

function same(label: string, got: SampledToken[], want: SampledToken[]): void {
  assert.deepEqual(got.map((t) => t.id), want.map((t) => t.id), `${label}: ids`);
  got.forEach((t, r) => {
    const w = want[r]!;
    if (w.logprob === undefined) return;
    assert.ok(Math.abs(t.logprob! - w.logprob) <= 1e-4, `${label} row ${r}: logprob ${t.logprob} vs ${w.logprob}`);
    assert.deepEqual(t.top!.map((a) => a.id), w.top!.map((a) => a.id), `${label} row ${r}: top ids`);
    t.top!.forEach((a, j) => assert.ok(Math.abs(a.logprob - w.top![j]!.logprob) <= 1e-4, `${label} row ${r}: top ${j}`));
  });
}

test('cuda sampling equals CPU sampling on [6, 151936] logits', { skip }, () => {
  const g = new kiln.Generator(42);
  // Peaked like a language model's output: a few large logits over a noisy floor.
  const cpu = kiln.mul(kiln.randn([6, VOCAB], { generator: g }), 2.5);
  for (const dtype of ['float32', 'bfloat16'] as const) {
    const x = kiln.to(cpu, dtype);
    const want = new LogitsSampler().sample(x, rows());
    const got = new LogitsSampler().sample(kiln.to(x, 'cuda'), rows());
    same(dtype, got, want);
    // Candidates too few for every nucleus: the CPU pass gives the same tokens.
    same(`${dtype} maxCandidates 64`, new LogitsSampler({ maxCandidates: 64 }).sample(kiln.to(x, 'cuda'), rows()), want);
  }
});
