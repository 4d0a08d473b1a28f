/**
 * createServer(): the OpenAI-compatible HTTP server over one Engine, on node:http.
 *
 *   GET  /health                 200 { status: 'ok' } (503 while shutting down); never needs the API key
 *   GET  /metrics                Prometheus text (metrics.ts); never needs the API key
 *   GET  /v1/models[/{id}]       the served model
 *   POST /v1/completions         completions.ts
 *   POST /v1/chat/completions    chat.ts
 *
 * Unknown paths are 404, known paths with another method 405 (with Allow), /v1 requests without
 * `Authorization: Bearer <apiKey>` 401 when an API key is set, bodies over the limit 413, bad JSON
 * and bad fields 400, a full queue 429; every error has OpenAI's JSON shape (errors.ts). One
 * EngineLoop (engine-loop.ts) steps the engine for all requests, in slices of steps between turns
 * of the event loop, writing each stream once per slice.
 *
 * close(): stop accepting connections, let in-flight requests finish (keep-alive connections are
 * closed as they go idle); after `timeoutMs` the rest are aborted (their responses end with
 * finish_reason 'abort'), and connections still open shortly after are cut; then the engine's
 * cache is freed.
 */
import { nodeCrypto, http } from '../../platform/index.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Tokenizer } from '../../io/tokenizer.js';
import type { StepModel } from '../../models/step-kv.js';
import { DEFAULT_CACHE_BYTES, Engine, type EngineOptions } from '../engine.js';
import { DEFAULT_BLOCK_SIZE, type KvCacheOptions, PagedKvCache } from '../kv-cache.js';
import type { Sampler } from '../sampling-params.js';
import type { SchedulerOptions } from '../scheduler.js';
import { DEFAULT_BODY_LIMIT, readJsonObject } from './body.js';
import { handleChat } from './chat.js';
import { handleCompletions } from './completions.js';
import { type EndpointContext, nowSeconds } from './context.js';
import { EngineLoop, type StepInfo } from './engine-loop.js';
import { ApiError } from './errors.js';
import { ServerMetrics } from './metrics.js';
import { CONTENT_TYPE } from './prometheus.js';
import { sendError, sendJson, sendText } from './reply.js';

export interface ServerOptions extends KvCacheOptions, SchedulerOptions, Pick<EngineOptions, 'decode' | 'decodeMode' | 'trace' | 'asyncSteps'> {
  model: StepModel;
  /** Text prompts, chat and text in responses need one; without it only token-id prompts work. */
  tokenizer?: Tokenizer;
  /** Picks tokens (default: the engine's, greedy). */
  sampler?: Sampler;
  /** Ids that end generation (default: the tokenizer's eos ids, else none). */
  eosTokenIds?: readonly number[];
  /** The name clients pass as `model` (default 'kiln'). */
  modelName?: string;
  /** Require `Authorization: Bearer <apiKey>` on /v1 routes. */
  apiKey?: string;
  /** Prompt plus new tokens at most (default and maximum: the model's positions). */
  maxModelLen?: number;
  /** Engine requests waiting for admission at most; more get 429 (default 1024). */
  maxQueue?: number;
  /** Request bodies larger than this get 413 (default 1 MiB). */
  bodyLimit?: number;
  /**
   * Longest run of engine steps between two turns of the event loop, ms (default 25): when steps
   * are cheap next to writing the streams, the loop steps back to back and writes each stream once
   * per run (engine-loop.ts); 0 is one step per turn and a write per token.
   */
  maxSliceMs?: number;
  /**
   * Write a step's streamed tokens while the device computes the next step (cuda, webgpu; default
   * off: no gain measured on the H200 yet; engine-loop.ts).
   */
  flushWhileDeviceRuns?: boolean;
  /**
   * A request that finds the engine idle waits up to this many ms for others to join its first
   * step (default 2; 0: none), so a burst of requests prefills together and decodes together
   * (engine-loop.ts). Requests arriving while the engine runs join the next step regardless.
   */
  batchWindowMs?: number;
  /** Called after each engine step the server runs (after its metrics see it): `kiln serve` logs the first. */
  onStep?: (info: StepInfo) => void;
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
  /** http://host:port */
  readonly url: string;
}

export interface CloseOptions {
  /** How long in-flight requests may take to finish before they are aborted (default 30 s). */
  timeoutMs?: number;
}

export interface KilnServer {
  readonly engine: Engine;
  readonly metrics: ServerMetrics;
  readonly modelName: string;
  readonly maxModelLen: number;
  /** Starts listening (default port 8000, host 127.0.0.1); resolves with the bound address. */
  listen(port?: number, host?: string): Promise<ListenAddress>;
  /** Graceful shutdown (see the file header); resolves once every connection is closed. */
  close(options?: CloseOptions): Promise<void>;
}

export const DEFAULT_PORT = 8000;
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_MAX_QUEUE = 1024;
export const DEFAULT_SHUTDOWN_MS = 30_000;
/** After the shutdown timeout has aborted what was running, how long connections get to end. */
const FORCE_CLOSE_MS = 2_000;

interface Route {
  readonly methods: readonly string[];
  /** Needs the API key when one is set. */
  readonly auth: boolean;
  readonly handle: (req: IncomingMessage, res: ServerResponse, arrival: number, path: string) => Promise<void> | void;
}

function positiveInt(fn: string, name: string, v: number | undefined): void {
  if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new Error(`${fn}: ${name} must be a positive integer, got ${v}`);
}

function bearerMatches(header: string | undefined, key: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  if (m === null) return false;
  const a = Buffer.from(m[1]!.trim());
  const b = Buffer.from(key);
  return a.length === b.length && nodeCrypto.timingSafeEqual(a, b);
}

export function createServer(options: ServerOptions): KilnServer {
  const fn = 'createServer';
  const { model, tokenizer } = options;
  if (model === undefined || typeof model.forwardStep !== 'function') throw new TypeError(`${fn}: options.model must be a causal LM with forwardStep (a kiln.models Qwen3 model)`);
  positiveInt(fn, 'maxModelLen', options.maxModelLen);
  positiveInt(fn, 'maxQueue', options.maxQueue);
  positiveInt(fn, 'bodyLimit', options.bodyLimit);
  if (options.maxSliceMs !== undefined && !(Number.isFinite(options.maxSliceMs) && options.maxSliceMs >= 0)) throw new Error(`${fn}: maxSliceMs must be a number >= 0, got ${options.maxSliceMs}`);
  if (options.batchWindowMs !== undefined && !(Number.isFinite(options.batchWindowMs) && options.batchWindowMs >= 0)) throw new Error(`${fn}: batchWindowMs must be a number >= 0, got ${options.batchWindowMs}`);
  if (options.maxModelLen !== undefined && (options.maxModelLen > model.maxPositions || options.maxModelLen < 2)) {
    throw new Error(`${fn}: maxModelLen must be in [2, ${model.maxPositions}] (the model's max_position_embeddings), got ${options.maxModelLen}`);
  }
  if (tokenizer !== undefined && tokenizer.vocabSize > model.vocabSize) {
    throw new Error(`${fn}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocabulary has ${model.vocabSize}: they do not belong together`);
  }
  if (options.apiKey !== undefined && options.apiKey.length === 0) throw new Error(`${fn}: apiKey must not be empty`);
  const wantedLen = options.maxModelLen ?? model.maxPositions;
  let numBlocks = options.numBlocks;
  if (numBlocks === undefined && options.memoryBytes === undefined) {
    // Room for maxNumSeqs sequences of the full context, within the engine's default byte budget.
    const bs = options.blockSize ?? DEFAULT_BLOCK_SIZE;
    const perBlock = PagedKvCache.bytesPerBlock(model.kvGeometry(), bs);
    numBlocks = Math.max(Math.ceil(wantedLen / bs), Math.min((options.maxNumSeqs ?? 64) * Math.ceil(wantedLen / bs), Math.floor(DEFAULT_CACHE_BYTES / perBlock)));
  }
  const engine = new Engine(model, {
    sampler: options.sampler,
    eosTokenIds: options.eosTokenIds ?? tokenizer?.eosTokenIds ?? [],
    blockSize: options.blockSize,
    numBlocks,
    memoryBytes: options.memoryBytes,
    prefixCaching: options.prefixCaching,
    maxNumSeqs: options.maxNumSeqs,
    maxNumBatchedTokens: options.maxNumBatchedTokens,
    decode: options.decode,
    decodeMode: options.decodeMode,
    trace: options.trace,
    asyncSteps: options.asyncSteps,
  });
  const maxModelLen = Math.min(wantedLen, engine.maxLength);
  const modelName = options.modelName ?? 'kiln';
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  // onStep first runs after the first submit, when metrics exists.
  const onStep = (s: StepInfo): void => {
    metrics.onStep(s);
    options.onStep?.(s);
  };
  const loop = new EngineLoop(engine, { maxQueue: options.maxQueue ?? DEFAULT_MAX_QUEUE, maxSliceMs: options.maxSliceMs, flushWhileDeviceRuns: options.flushWhileDeviceRuns, batchWindowMs: options.batchWindowMs, onStep });
  const metrics = new ServerMetrics(loop);
  const ctx: EndpointContext = { loop, metrics, tokenizer, modelName, maxModelLen, vocabSize: model.vocabSize };
  const created = nowSeconds();
  const modelCard = { id: modelName, object: 'model', created, owned_by: 'kiln', max_model_len: maxModelLen };
  let closing = false;

  const generation =
    (handler: typeof handleCompletions) =>
    async (req: IncomingMessage, res: ServerResponse, arrival: number): Promise<void> => {
      const body = await readJsonObject(req, bodyLimit);
      await handler(ctx, body, res, arrival);
      metrics.requestLatency.observe((performance.now() - arrival) / 1000);
    };
  const routes = new Map<string, Route>([
    ['/health', { methods: ['GET'], auth: false, handle: (_q, res) => sendJson(res, closing ? 503 : 200, { status: closing ? 'shutting down' : 'ok' }) }],
    ['/metrics', { methods: ['GET'], auth: false, handle: (_q, res) => sendText(res, 200, metrics.render(), CONTENT_TYPE) }],
    ['/v1/models', { methods: ['GET'], auth: true, handle: (_q, res) => sendJson(res, 200, { object: 'list', data: [modelCard] }) }],
    [
      '/v1/models/{model}',
      {
        methods: ['GET'],
        auth: true,
        handle: (_q, res, _a, path) => {
          let id = path.slice('/v1/models/'.length);
          try {
            id = decodeURIComponent(id);
          } catch {
            // Not valid percent-encoding: compared as sent, so it is simply not found.
          }
          if (id !== modelName) throw new ApiError(404, `the model '${id}' does not exist; this server serves '${modelName}'`, 'not_found_error', 'model', 'model_not_found');
          sendJson(res, 200, modelCard);
        },
      },
    ],
    ['/v1/completions', { methods: ['POST'], auth: true, handle: generation(handleCompletions) }],
    ['/v1/chat/completions', { methods: ['POST'], auth: true, handle: generation(handleChat) }],
  ]);
  const match = (path: string): string | undefined => {
    if (routes.has(path)) return path;
    if (path.startsWith('/v1/models/') && path.length > '/v1/models/'.length) return '/v1/models/{model}';
    return undefined;
  };

  const server = http.createServer((req, res) => {
    const arrival = performance.now();
    const path = (req.url ?? '/').split('?')[0]!;
    const key = match(path);
    res.once('close', () => metrics.requests.inc({ endpoint: key ?? 'unmatched', status: String(res.statusCode) }));
    if (closing) res.setHeader('Connection', 'close');
    const extra: Record<string, string> = {};
    const run = async (): Promise<void> => {
      const route = key === undefined ? undefined : routes.get(key)!;
      if (route === undefined) throw new ApiError(404, `there is no route ${path}`, 'not_found_error', null, 'not_found');
      if (!route.methods.includes(req.method ?? '')) {
        extra.Allow = route.methods.join(', ');
        throw new ApiError(405, `${req.method} is not allowed on ${path} (allowed: ${extra.Allow})`, 'invalid_request_error', null, 'method_not_allowed');
      }
      if (route.auth && options.apiKey !== undefined && !bearerMatches(req.headers.authorization, options.apiKey)) {
        extra['WWW-Authenticate'] = 'Bearer';
        throw new ApiError(401, 'a valid API key is required: send the header Authorization: Bearer <key>', 'authentication_error', null, 'invalid_api_key');
      }
      await route.handle(req, res, arrival, path);
    };
    run().catch((e: unknown) => {
      // A request the client abandoned mid-body has no one to answer.
      if (!res.destroyed) sendError(res, e, extra);
    });
  });
  // Long generations: no timeout on a request in progress (the client's disconnect aborts it).
  server.requestTimeout = 0;

  // Responses in progress, so that shutdown can close each connection once it goes idle.
  const inFlight = new Set<ServerResponse>();
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });

  let closed: Promise<void> | undefined;
  const close = (closeOptions: CloseOptions = {}): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      closing = true;
      loop.close();
      const idle = (): void => server.closeIdleConnections();
      let force: NodeJS.Timeout | undefined;
      const timer = setTimeout(() => {
        // Aborted responses end with finish_reason 'abort' and [DONE]; connections that still do
        // not end (a client that stopped reading) are cut a little later.
        loop.abortAll();
        force = setTimeout(() => server.closeAllConnections(), FORCE_CLOSE_MS);
      }, closeOptions.timeoutMs ?? DEFAULT_SHUTDOWN_MS);
      // Stops accepting; the callback runs once every connection has ended.
      server.close(() => {
        clearTimeout(timer);
        clearTimeout(force);
        engine.dispose();
        resolve();
      });
      idle();
      for (const res of inFlight) res.once('finish', () => setImmediate(idle));
    });
    return closed;
  };

  const listen = (port = DEFAULT_PORT, host = DEFAULT_HOST): Promise<ListenAddress> =>
    new Promise((resolve, reject) => {
      const onError = (e: Error): void => reject(e);
      server.once('error', onError);
      server.listen(port, host, () => {
        server.off('error', onError);
        const a = server.address() as AddressInfo;
        const h = a.address.includes(':') ? `[${a.address}]` : a.address;
        resolve({ host: a.address, port: a.port, url: `http://${h}:${a.port}` });
      });
    });

  return { engine, metrics, modelName, maxModelLen, listen, close };
}
