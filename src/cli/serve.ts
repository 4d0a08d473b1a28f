/**
 * `kiln serve`: the OpenAI-compatible HTTP server (serve/http) for a Hugging Face Qwen3 folder, or
 * for seeded random weights of a named config (--random tiny|qwen3-0.6b) so it runs on a fresh
 * machine with no download. The folder's tokenizer.json, if any, enables text prompts and chat
 * (--tokenizer <folder> names another folder, e.g. to pair random weights with a real tokenizer).
 * Binds to 127.0.0.1 unless --host says otherwise and prints the URL once listening. SIGTERM or
 * SIGINT: stop accepting, let in-flight requests finish (up to --shutdown-timeout seconds), exit
 * 0; a second signal exits at once with 1.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import type { DType } from '../index.js';
import { folderEosIds, RANDOM_CONFIGS } from './generate.js';
import { diskCacheSummary, StartupClock } from './startup.js';
import { getDiskCache, type DiskCacheStats } from '../runtime/cache/index.js';

export const SERVE_USAGE = `Usage: kiln serve <model-folder> [options]
       kiln serve --random <config> [options]

Options:
  --port <n>                 port (default ${kiln.serve.DEFAULT_PORT}; 0 picks a free one)
  --host <addr>              address to bind (default ${kiln.serve.DEFAULT_HOST}: this machine only)
  --api-key <key>            require "Authorization: Bearer <key>" on /v1 routes (/health and /metrics stay open)
  --random <config>          seeded random weights instead of a folder: ${Object.keys(RANDOM_CONFIGS).join(', ')}
  --seed <n>                 seed of the random weights (default 0)
  --tokenizer <folder>       take tokenizer.json (and its configs) from this folder
  --served-model-name <s>    the name clients pass as "model" (default: the folder as given, or random-<config>)
  --device <d>               cpu (default), cuda or webgpu
  --dtype <t>                float32 (default), bfloat16 or float16
  --max-model-len <n>        prompt + new tokens at most (default: the model's max_position_embeddings)
  --max-num-seqs <n>         requests running at once (default 64)
  --max-queue <n>            requests waiting at most; more get HTTP 429 (default ${kiln.serve.DEFAULT_MAX_QUEUE})
  --batch-window-ms <ms>     a request finding the engine idle waits this long for others to share its first step (default 2; 0: none)
  --shutdown-timeout <s>     seconds in-flight requests get to finish on SIGTERM/SIGINT (default ${kiln.serve.DEFAULT_SHUTDOWN_MS / 1000})

Endpoints: GET /health, GET /metrics, GET /v1/models, POST /v1/completions, POST /v1/chat/completions.`;

const DTYPES: readonly DType[] = ['float32', 'bfloat16', 'float16'];

function intOption(name: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined) return undefined;
  const v = Number(text);
  if (!Number.isInteger(v) || v < min) throw new Error(`serve: ${name} must be an integer >= ${min}, got '${text}'`);
  return v;
}

function msOption(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const v = Number(text);
  if (text.trim() === '' || !Number.isFinite(v) || v < 0) throw new Error(`serve: ${name} must be a number of ms >= 0, got '${text}'`);
  return v;
}

export async function runServe(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      port: { type: 'string', default: String(kiln.serve.DEFAULT_PORT) },
      host: { type: 'string', default: kiln.serve.DEFAULT_HOST },
      'api-key': { type: 'string' },
      random: { type: 'string' },
      seed: { type: 'string', default: '0' },
      tokenizer: { type: 'string' },
      'served-model-name': { type: 'string' },
      device: { type: 'string', default: 'cpu' },
      dtype: { type: 'string', default: 'float32' },
      'max-model-len': { type: 'string' },
      'max-num-seqs': { type: 'string' },
      'max-queue': { type: 'string' },
      'shutdown-timeout': { type: 'string' },
      'batch-window-ms': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(SERVE_USAGE);
    return 0;
  }
  const folder = positionals[0];
  if (positionals.length > 1) throw new Error(`serve: one model folder at most, got ${positionals.join(' ')}\n\n${SERVE_USAGE}`);
  if ((folder === undefined) === (values.random === undefined)) {
    throw new Error(`serve: give a model folder or --random <config>, not ${folder === undefined ? 'neither' : 'both'}\n\n${SERVE_USAGE}`);
  }
  const port = intOption('--port', values.port, 0)!;
  if (port > 65535) throw new Error(`serve: --port must be at most 65535, got ${port}`);
  const dtype = values.dtype as DType;
  if (!DTYPES.includes(dtype)) throw new Error(`serve: --dtype must be one of ${DTYPES.join(', ')}, got '${values.dtype}'`);
  const device = values.device!;
  const shutdownSeconds = intOption('--shutdown-timeout', values['shutdown-timeout'], 0) ?? kiln.serve.DEFAULT_SHUTDOWN_MS / 1000;

  const clock = new StartupClock();
  let model: kiln.models.Qwen3CausalLMBase;
  let modelName: string;
  let eos: number[] = [];
  if (values.random !== undefined) {
    const make = RANDOM_CONFIGS[values.random];
    if (make === undefined) throw new Error(`serve: --random must be one of ${Object.keys(RANDOM_CONFIGS).join(', ')}, got '${values.random}'`);
    model = kiln.models.Qwen3ForCausalLM.fromConfig(make(), { seed: intOption('--seed', values.seed, 0), dtype, device });
    model.eval();
    modelName = `random-${values.random}`;
  } else {
    model = kiln.models.loadQwen3(folder!, { dtype, device });
    modelName = folder!;
    eos = folderEosIds(folder!);
  }
  // Uploads are asynchronous: the weights phase ends when they have landed.
  kiln.synchronize(model.kvGeometry().device);
  clock.mark('weights');
  const tokenizerDir = values.tokenizer ?? (folder !== undefined && fs.existsSync(path.join(folder, 'tokenizer.json')) ? folder : undefined);
  const tokenizer = tokenizerDir === undefined ? undefined : kiln.io.Tokenizer.fromFolder(tokenizerDir);
  if (tokenizer !== undefined && tokenizer.eosTokenIds.length > 0) eos = [...tokenizer.eosTokenIds];
  clock.mark('tokenizer');

  // The disk cache's counters when the server became ready; the first step is logged once.
  const firstStep: { disk?: DiskCacheStats; logged: boolean } = { logged: false };
  const server = kiln.serve.createServer({
    model,
    tokenizer,
    eosTokenIds: eos,
    modelName: values['served-model-name'] ?? modelName,
    apiKey: values['api-key'],
    maxModelLen: intOption('--max-model-len', values['max-model-len'], 2),
    maxNumSeqs: intOption('--max-num-seqs', values['max-num-seqs'], 1),
    maxQueue: intOption('--max-queue', values['max-queue'], 1),
    batchWindowMs: msOption('--batch-window-ms', values['batch-window-ms']),
    onStep: (s) => {
      // The first step pays for what start-up left to first use: on cuda the compiled step of the
      // request's token bucket (its program from the disk cache when warm, then a CUDA graph capture).
      if (firstStep.logged) return;
      firstStep.logged = true;
      const counters = server.engine.decodeRunner?.compileCounters;
      const compiled = counters ? `; compiled step: ${counters.compiles} compiles, ${counters.diskHits} from the program disk cache` : '';
      console.log(`kiln serve: first step ${s.seconds.toFixed(2)} s (${s.tokens} tokens${compiled}; ${diskCacheSummary(firstStep.disk)} since ready)`);
    },
  });
  kiln.synchronize(model.kvGeometry().device);
  clock.mark('engine and KV cache');
  let address: kiln.serve.ListenAddress;
  try {
    address = await server.listen(port, values.host);
  } catch (e) {
    await server.close({ timeoutMs: 0 });
    throw new Error(`serve: cannot listen on ${values.host}:${port}: ${(e as Error).message}`);
  }
  clock.mark('listen');
  firstStep.disk = getDiskCache().stats();
  const cache = server.engine.cache;
  console.log(`kiln serve: listening on ${address.url} (model '${server.modelName}', ${device} ${dtype}, max-model-len ${server.maxModelLen}, KV cache ${cache.numBlocks} blocks of ${cache.blockSize} tokens, ${tokenizer === undefined ? 'no tokenizer: token-id prompts only' : 'tokenizer loaded'})`);
  console.log(`kiln serve: ${clock.line()}; KV cache ${(cache.bytes / 2 ** 20).toFixed(0)} MiB; ${diskCacheSummary()}`);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) {
        console.error(`kiln serve: ${signal} again: exiting now`);
        process.exit(1);
      }
      stopping = true;
      console.log(`kiln serve: ${signal}: no new connections; finishing the requests in flight (up to ${shutdownSeconds} s)`);
      void server.close({ timeoutMs: shutdownSeconds * 1000 }).then(() => {
        console.log('kiln serve: stopped');
        resolve(0);
      });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}
