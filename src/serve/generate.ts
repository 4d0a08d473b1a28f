/**
 * generate() in transformers' shape: `generate(model, inputIds, { maxNewTokens, doSample, ... })`
 * returns the prompts followed by the new tokens as an int64 tensor [B, T + n], n being the most
 * new tokens any row got; rows that stop early (eos) are padded with padTokenId (else the first
 * eos id), as transformers does. Every row runs as its own request in one Engine (engine.ts) with
 * a cache sized for the batch, so rows are batched together but never padded on the input side.
 * Greedy unless doSample (then temperature, topK, topP, minP, penalties and seed apply: serve/sampler.ts).
 *
 * It lives in serve/, not on the model classes, because models/ may not import serve/.
 */
import { tensor } from '../api/data.js';
import type { StepModel } from '../models/step-kv.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { DEFAULT_MAX_NEW_TOKENS, Engine } from './engine.js';
import { DEFAULT_BLOCK_SIZE, type KvCacheOptions } from './kv-cache.js';
import type { DecodePath } from './decode-runner.js';
import type { Sampler, SamplingParams } from './sampling-params.js';
import type { SchedulerOptions } from './scheduler.js';

export interface GenerateOptions extends Omit<SamplingParams, 'stop' | 'logprobs' | 'ignoreEos'>, KvCacheOptions, SchedulerOptions {
  /** New tokens per row at most (default 16). */
  maxNewTokens?: number;
  /** End-of-sequence id(s): a row that produces one stops (the id is kept in the output). */
  eosTokenId?: number | readonly number[];
  /** Fills the rows that stop early (default: the first eos id). */
  padTokenId?: number;
  /** Picks tokens (default: the engine's LogitsSampler). */
  sampler?: Sampler;
  /** How decode steps run (EngineOptions.decode: 'compiled', 'eager' or 'step'; default the engine's for the device). */
  decode?: DecodePath;
}

function readRows(inputIds: Tensor | readonly (readonly number[])[]): { rows: number[][]; device: Tensor['device'] | undefined } {
  const fn = 'generate';
  if (inputIds instanceof Tensor) {
    if (inputIds.ndim !== 2) throw new Error(`${fn}: inputIds must be [batch, tokens], got ${fmtShape(inputIds.shape)}`);
    if (inputIds.dtype !== 'int64' && inputIds.dtype !== 'int32') throw new Error(`${fn}: inputIds must be int64 (or int32), got ${inputIds.dtype}`);
    const [B, T] = inputIds.shape as [number, number];
    const flat = inputIds.toFlatArray();
    return { rows: Array.from({ length: B }, (_, b) => flat.slice(b * T, (b + 1) * T)), device: inputIds.device };
  }
  if (!Array.isArray(inputIds) || inputIds.length === 0 || !inputIds.every((r) => Array.isArray(r))) {
    throw new Error(`${fn}: inputIds must be an int64 tensor [B, T] or a non-empty number[][]`);
  }
  const T = inputIds[0]!.length;
  inputIds.forEach((r, i) => {
    if (r.length !== T) throw new Error(`${fn}: inputIds rows must have one length (row 0 has ${T}, row ${i} has ${r.length}); for prompts of different lengths use Engine.generateAll`);
  });
  return { rows: inputIds.map((r) => [...r]), device: undefined };
}

/** Prompt + generated ids [B, T + n] (int64, on the input tensor's device; cpu for number[][]). */
export function generate(model: StepModel, inputIds: Tensor | readonly (readonly number[])[], options: GenerateOptions = {}): Tensor {
  const fn = 'generate';
  const { rows, device } = readRows(inputIds);
  const B = rows.length;
  const T = rows[0]!.length;
  if (T === 0) throw new Error(`${fn}: inputIds has no tokens (shape [${B}, 0])`);
  const maxNew = options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
  if (!Number.isInteger(maxNew) || maxNew < 0) throw new Error(`${fn}: maxNewTokens must be a non-negative integer, got ${maxNew}`);
  const eos = options.eosTokenId === undefined ? [] : typeof options.eosTokenId === 'number' ? [options.eosTokenId] : [...options.eosTokenId];
  if (maxNew === 0) return tensor(rows, { dtype: 'int64', device });

  const { eosTokenId: _e, padTokenId, sampler, decode, blockSize, numBlocks, memoryBytes, prefixCaching, maxNumSeqs, maxNumBatchedTokens, ...sampling } = options;
  const bs = blockSize ?? DEFAULT_BLOCK_SIZE;
  const total = Math.min(T + maxNew, model.maxPositions);
  const engine = new Engine(model, {
    sampler,
    decode,
    eosTokenIds: eos,
    blockSize: bs,
    numBlocks: numBlocks ?? (memoryBytes === undefined ? B * Math.ceil(total / bs) : undefined),
    memoryBytes,
    prefixCaching,
    maxNumSeqs: maxNumSeqs ?? B,
    maxNumBatchedTokens,
  });
  let outs: number[][];
  try {
    const params: SamplingParams = { ...sampling, maxNewTokens: maxNew };
    outs = engine.generateAll(rows, params).map((o) => [...o.outputIds]);
  } finally {
    engine.dispose();
  }
  const n = Math.max(...outs.map((o) => o.length));
  const pad = padTokenId ?? eos[0];
  const result = rows.map((r, b) => {
    const o = outs[b]!;
    if (o.length < n && pad === undefined) {
      throw new Error(`${fn}: row ${b} ended after ${o.length} of ${n} new tokens (at ${model.maxPositions} positions) and there is no padTokenId or eosTokenId to pad it with`);
    }
    return [...r, ...o, ...new Array<number>(n - o.length).fill(pad ?? 0)];
  });
  return tensor(result, { dtype: 'int64', device });
}
