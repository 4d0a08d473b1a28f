/**
 * `kiln generate`: text or token-id generation with the serve engine, for a Hugging Face Qwen3
 * folder or seeded random weights of a named config (--random tiny|qwen3-0.6b, so it runs on a
 * fresh machine with no download). With a tokenizer (the folder's tokenizer.json, or --tokenizer
 * <dir>) a text prompt (--prompt, or --chat to wrap it in the chat template) is encoded and the
 * new text streams to stdout as it is generated (UTF-8 safe); without one, --prompt-ids in and
 * the generated ids out. Greedy unless --temperature > 0 (then --top-k, --top-p, --min-p,
 * --repetition-penalty and --sample-seed apply). The last line: token count, time, tokens/s and
 * time to first token.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import type { DType } from '../index.js';
import { getDiskCache } from '../runtime/cache/index.js';
import { diskCacheSummary, StartupClock } from './startup.js';

export const GENERATE_USAGE = `Usage: kiln generate <model-folder> (--prompt <text> [--chat] | --prompt-ids <ids>) [options]
       kiln generate --random <config> [--tokenizer <dir>] (--prompt <text> | --prompt-ids <ids>) [options]

Options:
  --prompt <text>       a text prompt (needs a tokenizer: the folder's tokenizer.json, or --tokenizer)
  --chat                wrap --prompt as a user message in the tokenizer's chat template
  --prompt-ids <ids>    prompt token ids, comma-separated (e.g. 1,2,3)
  --tokenizer <dir>     a folder with tokenizer.json (with --random: the model's vocabulary grows to the tokenizer's)
  --max-tokens <n>      new tokens at most (default 16)
  --temperature <t>     0 (default): greedy; > 0 samples
  --top-k <k>           keep the k most likely tokens (sampling)
  --top-p <p>           nucleus sampling: the smallest set reaching probability p
  --min-p <p>           drop tokens below p times the most likely one's probability
  --repetition-penalty <r>  transformers' repetition penalty (1: off)
  --sample-seed <n>     seed of the sampling (reproducible tokens)
  --random <config>     seeded random weights instead of a folder: ${['tiny', 'qwen3-0.6b'].join(', ')}
  --seed <n>            seed of the random weights (default 0)
  --device <d>          cpu (default), cuda or webgpu
  --dtype <t>           float32 (default), bfloat16 or float16
  --decode <path>       how decode steps run: compiled, eager or step (default: compiled on cuda and webgpu, else eager)
  --ignore-eos          keep going past the model's end-of-sequence ids (folder and tokenizer)

Streams the new text (or prints the generated ids), then tokens/s and the time to first token.`;

/** The named configs of --random (also kiln serve's). */
export const RANDOM_CONFIGS: Record<string, () => kiln.models.Qwen3Config> = {
  tiny: () => kiln.models.QWEN3_TINY,
  'qwen3-0.6b': () => kiln.models.QWEN3_0_6B,
};

const DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];
const DECODE_PATHS: readonly kiln.serve.DecodePath[] = ['compiled', 'eager', 'step'];

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

/** The sampling flags as SamplingParams: greedy at temperature 0, else sampling with the filters given. */
function samplingParams(values: Record<string, string | boolean | undefined>, maxNewTokens: number): kiln.serve.SamplingParams {
  const num = (flag: string): number | undefined => {
    const v = values[flag];
    if (v === undefined) return undefined;
    const x = Number(v);
    if (typeof v !== 'string' || v.trim() === '' || !Number.isFinite(x)) throw new Error(`generate: --${flag} must be a number, got '${String(v)}'`);
    return x;
  };
  const temperature = num('temperature') ?? 0;
  const params: kiln.serve.SamplingParams = { maxNewTokens, doSample: temperature > 0 };
  if (temperature > 0) {
    Object.assign(params, { temperature, topK: num('top-k'), topP: num('top-p'), minP: num('min-p'), seed: num('sample-seed') });
  }
  const rp = num('repetition-penalty');
  if (rp !== undefined) params.repetitionPenalty = rp;
  for (const k of Object.keys(params) as (keyof kiln.serve.SamplingParams)[]) if (params[k] === undefined) delete params[k];
  kiln.serve.validateSamplingParams(params, 'generate');
  return params;
}

export function runGenerate(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'prompt-ids': { type: 'string' },
      prompt: { type: 'string' },
      chat: { type: 'boolean', default: false },
      tokenizer: { type: 'string' },
      'max-tokens': { type: 'string', default: '16' },
      temperature: { type: 'string', default: '0' },
      'top-k': { type: 'string' },
      'top-p': { type: 'string' },
      'min-p': { type: 'string' },
      'repetition-penalty': { type: 'string' },
      'sample-seed': { type: 'string' },
      random: { type: 'string' },
      seed: { type: 'string', default: '0' },
      device: { type: 'string', default: 'cpu' },
      dtype: { type: 'string', default: 'float32' },
      decode: { type: 'string' },
      'ignore-eos': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(GENERATE_USAGE);
    return 0;
  }
  if ((values.prompt === undefined) === (values['prompt-ids'] === undefined)) {
    throw new Error(`generate: give --prompt <text> or --prompt-ids <ids>, not ${values.prompt === undefined ? 'neither' : 'both'}\n\n${GENERATE_USAGE}`);
  }
  if (values.chat && values.prompt === undefined) throw new Error('generate: --chat wraps a text --prompt in the chat template; it does not apply to --prompt-ids');
  const maxTokens = positiveInt('--max-tokens', values['max-tokens']!);
  const dtype = values.dtype as DType;
  if (!DTYPES.includes(dtype)) throw new Error(`generate: --dtype must be one of ${DTYPES.join(', ')}, got '${values.dtype}'`);
  const device = values.device!;
  const decode = values.decode as kiln.serve.DecodePath | undefined;
  if (decode !== undefined && !DECODE_PATHS.includes(decode)) throw new Error(`generate: --decode must be one of ${DECODE_PATHS.join(', ')}, got '${values.decode}'`);
  const folder = positionals[0];
  if ((folder === undefined) === (values.random === undefined)) {
    throw new Error(`generate: give a model folder or --random <config>, not ${folder === undefined ? 'neither' : 'both'}\n\n${GENERATE_USAGE}`);
  }
  const clock = new StartupClock();
  const tokenizerDir = values.tokenizer ?? (folder !== undefined && fs.existsSync(path.join(folder, 'tokenizer.json')) ? folder : undefined);
  const tokenizer = tokenizerDir === undefined ? null : kiln.io.Tokenizer.fromFolder(tokenizerDir);
  if (values.prompt !== undefined && tokenizer === null) {
    throw new Error(`generate: --prompt needs a tokenizer: ${folder !== undefined ? `${folder} has no tokenizer.json` : '--random has none'}; pass --tokenizer <dir> or token ids with --prompt-ids`);
  }
  const promptIds =
    values.prompt === undefined
      ? parseIds(values['prompt-ids']!)
      : values.chat
        ? tokenizer!.encode(tokenizer!.applyChatTemplate([{ role: 'user', content: values.prompt }], { addGenerationPrompt: true }), { addSpecialTokens: false })
        : tokenizer!.encode(values.prompt);
  const params = samplingParams(values, maxTokens);
  clock.mark('tokenizer');

  let model: kiln.models.Qwen3CausalLMBase;
  let eos: number[] = tokenizer?.eosTokenIds.slice() ?? [];
  if (values.random !== undefined) {
    const make = RANDOM_CONFIGS[values.random];
    if (make === undefined) throw new Error(`generate: --random must be one of ${Object.keys(RANDOM_CONFIGS).join(', ')}, got '${values.random}'`);
    let config = make();
    // A random model must cover the tokenizer's ids to take its prompts.
    if (tokenizer !== null && tokenizer.vocabSize > config.vocabSize) config = new kiln.models.Qwen3Config({ ...config, vocabSize: tokenizer.vocabSize });
    model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: positiveInt('--seed', values.seed!, true), dtype, device });
    model.eval();
  } else {
    model = kiln.models.loadQwen3(folder!, { dtype, device });
    eos = [...new Set([...eos, ...folderEosIds(folder!)])];
  }
  eos = eos.filter((id) => id < model.config.vocabSize);
  // Uploads are asynchronous: the weights phase ends when they have landed.
  kiln.synchronize(model.kvGeometry().device);
  clock.mark('weights');

  // One request: a cache of exactly the blocks it can use.
  const total = Math.min(promptIds.length + maxTokens, model.maxPositions);
  const engine = new kiln.serve.Engine(model, { eosTokenIds: eos, numBlocks: Math.ceil(total / kiln.serve.DEFAULT_BLOCK_SIZE), decode });
  kiln.synchronize(model.kvGeometry().device);
  clock.mark('engine and KV cache');
  // On stderr: stdout is the generated text (or ids) and the tokens/s line, for scripts to read.
  console.error(`kiln generate: ${clock.line()}; ${diskCacheSummary()}`);
  const diskAtReady = getDiskCache().stats();
  try {
    const start = performance.now();
    let firstToken = 0;
    let atFirstToken: { counters?: { compiles: number; diskHits: number }; disk: string } | undefined;
    let final: kiln.serve.RequestOutput | undefined;
    const text = tokenizer?.createStreamDecoder({ skipSpecialTokens: true });
    engine.addRequest(promptIds, { ...params, ignoreEos: values['ignore-eos'] }, {
      onOutput: (o) => {
        if (firstToken === 0 && o.newIds.length > 0) {
          firstToken = performance.now();
          atFirstToken = { counters: engine.decodeRunner?.compileCounters ?? undefined, disk: diskCacheSummary(diskAtReady) };
        }
        if (text) for (const id of o.newIds) process.stdout.write(text.push(id));
        if (o.finished) final = o;
      },
    });
    while (engine.hasUnfinished()) engine.step();
    const seconds = (performance.now() - start) / 1000;
    const ids = final!.outputIds;
    if (text) process.stdout.write(`${text.flush()}\n`);
    else console.log(ids.join(','));
    const ttft = firstToken === 0 ? 0 : firstToken - start;
    // What the first step paid for (compiled programs and kernels from the disk cache, or built).
    if (atFirstToken !== undefined) {
      const c = atFirstToken.counters;
      const compiled = c ? `compiled step: ${c.compiles} compiles, ${c.diskHits} from the program disk cache; ` : '';
      console.error(`kiln generate: first token ${(ttft / 1000).toFixed(2)} s after ready (${compiled}${atFirstToken.disk} since ready)`);
    }
    console.log(
      `${ids.length} tokens in ${seconds.toFixed(3)} s: ${(ids.length / seconds).toFixed(1)} tokens/s, time to first token ${ttft.toFixed(1)} ms ` +
        `(prompt ${promptIds.length} tokens, ${device} ${dtype}, finish: ${final!.finishReason})`,
    );
  } finally {
    engine.dispose();
  }
  return 0;
}
