/**
 * `kiln serve --device webgpu` in a child process on the tiny Qwen3 checkpoint, asked through the
 * openai client on 127.0.0.1 with OpenAI's default sampling (temperature 1, top_p 1: the sampler's
 * cumsum, topk and gather run on webgpu): seeded requests, streamed and not, give the same tokens
 * each time; temperature 0, top_k 1 and a tiny top_p give transformers' greedy tokens; logprobs
 * come back as log-probabilities, the chosen one among the alternatives; penalties change the
 * greedy tokens; SIGTERM stops the server with exit code 0.
 *
 * Needs a real adapter (a GPU or SwiftShader); skips without one and on Dawn's null backend. The
 * child inherits the environment, so it uses the adapter this process probed.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { HANG_GUARD_MS } from './helpers/limits.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-tiny')))!;
const DENSE = path.join(fixtures, 'qwen3-tiny');
// Compiled tests run from dist/test; the CLI is dist/src/cli/main.js.
const MAIN = path.join(here, '../src/cli/main.js');

interface Reference {
  cases: { prompt: number[]; generated: number[] }[];
}

/** Extension field the openai types do not know: the generated ids (the checkpoint has no tokenizer). */
const tokenIds = (choice: object): number[] => (choice as { token_ids: number[] }).token_ids;

test('kiln serve --device webgpu: default sampling, seeds, greedy-equivalent settings, logprobs and penalties through the openai client', { skip, timeout: HANG_GUARD_MS }, async () => {
  const ref = JSON.parse(fs.readFileSync(path.join(DENSE, 'generate.json'), 'utf8')) as Reference;
  const child = spawn(process.execPath, [MAIN, 'serve', DENSE, '--device', 'webgpu', '--port', '0', '--served-model-name', 'tiny'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`kiln serve exited (${code}) before listening: ${out}${err}`)));
    });
    assert.match(out, /webgpu float32/);
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });
    const N = 8;
    const c = ref.cases[2]!;
    const greedy = c.generated.slice(0, N);
    const complete = async (extra: Record<string, unknown>): Promise<OpenAI.Completions.CompletionChoice> => {
      const r = await client.completions.create({ model: 'tiny', prompt: c.prompt, max_tokens: N, ...extra });
      assert.equal(r.choices.length, 1);
      assert.equal(r.usage!.completion_tokens, N);
      return r.choices[0]!;
    };

    // OpenAI's defaults sample (temperature 1); the same seed draws the same tokens.
    const sampled = await complete({ seed: 7 });
    assert.equal(sampled.finish_reason, 'length');
    const ids = tokenIds(sampled);
    assert.equal(ids.length, N);
    assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < 96), `ids in the vocabulary: ${ids.join(',')}`);
    assert.deepEqual(tokenIds(await complete({ seed: 7 })), ids, 'seed 7 again');
    const others = await Promise.all([8, 9, 10].map((seed) => complete({ seed })));
    assert.ok(
      others.some((o) => tokenIds(o).join() !== ids.join()),
      'other seeds draw other tokens',
    );
    // Streamed: the chunks' ids are the non-streamed request's.
    const stream = await client.completions.create({ model: 'tiny', prompt: c.prompt, max_tokens: N, seed: 7, stream: true });
    const streamed: number[] = [];
    for await (const chunk of stream) for (const ch of chunk.choices) streamed.push(...tokenIds(ch));
    assert.deepEqual(streamed, ids, 'streamed, seed 7');

    // Settings that leave one candidate are greedy: transformers' tokens.
    assert.deepEqual(tokenIds(await complete({ temperature: 0 })), greedy, 'temperature 0');
    assert.deepEqual(tokenIds(await complete({ top_k: 1, seed: 3 } as Record<string, unknown>)), greedy, 'top_k 1');
    assert.deepEqual(tokenIds(await complete({ top_p: 1e-6, temperature: 1.5, seed: 4 })), greedy, 'top_p 1e-6');

    // Logprobs of the processed distribution: <= 0, most likely first, the greedy token on top.
    const lp = (await complete({ temperature: 0, logprobs: 3 })).logprobs!;
    assert.deepEqual(lp.tokens, greedy.map((id) => `token_id:${id}`));
    lp.top_logprobs!.forEach((top, i) => {
      const entries = Object.entries(top);
      assert.equal(entries.length, 3);
      assert.equal(entries[0]![0], lp.tokens![i]);
      assert.equal(entries[0]![1], lp.token_logprobs![i]);
      const values = entries.map((e) => e[1]);
      assert.ok(values.every((v, j) => v <= 0 && (j === 0 || v <= values[j - 1]!)), `step ${i}: ${values.join(', ')}`);
    });
    const lpSampled = (await complete({ seed: 7, top_p: 0.9, logprobs: 2 })).logprobs!;
    assert.ok(lpSampled.token_logprobs!.every((v) => v !== null && v <= 0 && v > -Infinity), 'a drawn token has a finite logprob');

    // A frequency penalty moves the greedy tokens off a repeated id (case 3 repeats 29).
    const rep = ref.cases[3]!;
    const penalised = await client.completions.create({ model: 'tiny', prompt: rep.prompt, max_tokens: N, temperature: 0, frequency_penalty: 2 });
    const pIds = tokenIds(penalised.choices[0]!);
    assert.notDeepEqual(pIds, rep.generated.slice(0, N), 'the penalty changes the tokens');
    assert.ok(
      pIds.filter((id) => id === 29).length < rep.generated.slice(0, N).filter((id) => id === 29).length,
      `fewer repeats of 29: ${pIds.join(',')}`,
    );

    child.kill('SIGTERM');
    assert.equal(await exited, 0, `exit code (stderr: ${err})`);
    assert.match(out, /stopped/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});
