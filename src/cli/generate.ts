/**
 * `kiln generate`: greedy generation from prompt token ids with the serve engine, for a Hugging
 * Face Qwen3 folder or seeded random weights of a named config (--random tiny|qwen3-0.6b, so it runs
 * on a fresh machine with no download). Prints the generated ids on one line, comma-separated, and
 * then one line with the token count, time, tokens/s and time to first token. Text prompts wait
 * for the tokenizer (src/io/tokenizer.ts); --prompt says so instead of guessing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import type { DType } from '../index.js';

export const GENERATE_USAGE = `Usage: kiln generate <model-folder> --prompt-ids <ids> [options]
       kiln generate --random <config> --prompt-ids <ids> [options]

Options:
  --prompt-ids <ids>    prompt token ids, comma-separated (e.g. 1,2,3)
  --max-tokens <n>      new tokens at most (default 16)
  --random <config>     seeded random weights instead of a folder: ${['tiny', 'qwen3-0.6b'].join(', ')}
  --seed <n>            seed of the random weights (default 0)
  --device <d>          cpu (default) or cuda
  --dtype <t>           float32 (default), bfloat16 or float16
  --ignore-eos          keep going past the model's end-of-sequence ids (from the folder)
  --prompt <text>       a text prompt: needs the tokenizer, not available yet

Prints the generated ids, then tokens/s and the time to first token.`;

/** The named configs of --random (also kiln serve's). */
export const RANDOM_CONFIGS: Record<string, () => kiln.models.Qwen3Config> = {
  tiny: () => kiln.models.QWEN3_TINY,
  'qwen3-0.6b': () => kiln.models.QWEN3_0_6B,
};

const DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];

function parseIds(text: string): number[] {
  const parts = text.split(',').map((s) => s.trim());
  const ids = parts.map(Number);
  const bad = parts.findIndex((s, i) => s === '' || !Number.isInteger(ids[i]) || ids[i]! < 0);
  if (bad >= 0) throw new Error(`generate: --prompt-ids must be comma-separated non-negative integers, got '${parts[bad]}' in '${text}'`);
  return ids;
}

function positiveInt(name: string, text: string, allowZero = false): number {
  const v = Number(text);
  if (!Number.isInteger(v) || v < (allowZero ? 0 : 1)) throw new Error(`generate: ${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer, got '${text}'`);
  return v;
}

/** eos_token_id from generation_config.json, else config.json (a number or a list; none if absent). */
export function folderEosIds(folder: string): number[] {
  for (const file of ['generation_config.json', 'config.json']) {
    const p = path.join(folder, file);
    if (!fs.existsSync(p)) continue;
    const v = (JSON.parse(fs.readFileSync(p, 'utf8')) as Record<string, unknown>).eos_token_id;
    if (typeof v === 'number') return [v];
    if (Array.isArray(v) && v.every((x) => typeof x === 'number')) return v as number[];
  }
  return [];
}

export function runGenerate(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'prompt-ids': { type: 'string' },
      prompt: { type: 'string' },
      'max-tokens': { type: 'string', default: '16' },
      random: { type: 'string' },
      seed: { type: 'string', default: '0' },
      device: { type: 'string', default: 'cpu' },
      dtype: { type: 'string', default: 'float32' },
      'ignore-eos': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(GENERATE_USAGE);
    return 0;
  }
  if (values.prompt !== undefined) {
    throw new Error('generate: --prompt needs a tokenizer (src/io/tokenizer.ts), which kiln does not have yet; pass token ids with --prompt-ids');
  }
  if (values['prompt-ids'] === undefined) throw new Error(`generate: --prompt-ids is required\n\n${GENERATE_USAGE}`);
  const promptIds = parseIds(values['prompt-ids']);
  const maxTokens = positiveInt('--max-tokens', values['max-tokens']!);
  const dtype = values.dtype as DType;
  if (!DTYPES.includes(dtype)) throw new Error(`generate: --dtype must be one of ${DTYPES.join(', ')}, got '${values.dtype}'`);
  const device = values.device!;
  const folder = positionals[0];
  if ((folder === undefined) === (values.random === undefined)) {
    throw new Error(`generate: give a model folder or --random <config>, not ${folder === undefined ? 'neither' : 'both'}\n\n${GENERATE_USAGE}`);
  }

  let model: kiln.models.Qwen3CausalLMBase;
  let eos: number[] = [];
  if (values.random !== undefined) {
    const make = RANDOM_CONFIGS[values.random];
    if (make === undefined) throw new Error(`generate: --random must be one of ${Object.keys(RANDOM_CONFIGS).join(', ')}, got '${values.random}'`);
    model = kiln.models.Qwen3ForCausalLM.fromConfig(make(), { seed: positiveInt('--seed', values.seed!, true), dtype, device });
    model.eval();
  } else {
    model = kiln.models.loadQwen3(folder!, { dtype, device });
    eos = folderEosIds(folder!);
  }

  // One request: a cache of exactly the blocks it can use.
  const total = Math.min(promptIds.length + maxTokens, model.maxPositions);
  const engine = new kiln.serve.Engine(model, { eosTokenIds: eos, numBlocks: Math.ceil(total / kiln.serve.DEFAULT_BLOCK_SIZE) });
  try {
    const start = performance.now();
    let firstToken = 0;
    let final: kiln.serve.RequestOutput | undefined;
    engine.addRequest(promptIds, { maxNewTokens: maxTokens, ignoreEos: values['ignore-eos'] }, {
      onOutput: (o) => {
        if (firstToken === 0 && o.newIds.length > 0) firstToken = performance.now();
        if (o.finished) final = o;
      },
    });
    while (engine.hasUnfinished()) engine.step();
    const seconds = (performance.now() - start) / 1000;
    const ids = final!.outputIds;
    console.log(ids.join(','));
    const ttft = firstToken === 0 ? 0 : firstToken - start;
    console.log(
      `${ids.length} tokens in ${seconds.toFixed(3)} s: ${(ids.length / seconds).toFixed(1)} tokens/s, time to first token ${ttft.toFixed(1)} ms ` +
        `(prompt ${promptIds.length} tokens, ${device} ${dtype}, finish: ${final!.finishReason})`,
    );
  } finally {
    engine.dispose();
  }
  return 0;
}
