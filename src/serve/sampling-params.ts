/**
 * Per-request sampling options and the sampler contract shared by the generation engine
 * (engine.ts) and the sampler (sampler.ts). Names follow transformers' generate() where it has
 * one (doSample, temperature, topK, topP, minP, repetitionPenalty, maxNewTokens) and the OpenAI /
 * vLLM API otherwise (presencePenalty, frequencyPenalty, logprobs, stop, seed).
 */
import type { Tensor } from '../tensor/tensor.js';

export interface SamplingParams {
  /** false (default): greedy (argmax; ties go to the lowest id, as torch.argmax). */
  doSample?: boolean;
  /** Divides the logits before sampling (default 1); must be > 0 when sampling. */
  temperature?: number;
  /** Keep only the k most likely tokens (default 0: off). */
  topK?: number;
  /** Keep the smallest set of most likely tokens whose probability reaches p (default 1: off). */
  topP?: number;
  /** Drop tokens whose probability is below minP times the most likely token's (default 0: off). */
  minP?: number;
  /** transformers' repetition penalty over prompt and generated tokens (default 1: off). */
  repetitionPenalty?: number;
  /** OpenAI presence penalty over generated tokens (default 0). */
  presencePenalty?: number;
  /** OpenAI frequency penalty over generated tokens (default 0). */
  frequencyPenalty?: number;
  /** Per-request seed: the same seed gives the same tokens whatever else is in the batch. */
  seed?: number;
  /** Return the sampled token's logprob and this many top alternatives per step (default: none). */
  logprobs?: number;
  /** New tokens at most (default 16 in the engine; generate() takes maxNewTokens). */
  maxNewTokens?: number;
  /** Token ids that end the request (the model's eos ids are added unless ignoreEos). */
  stopTokenIds?: readonly number[];
  /** Strings that end the request (matched on the detokenized text; not included in the output). */
  stop?: readonly string[];
  ignoreEos?: boolean;
}

/** One sequence's row in a sampling step. */
export interface SamplingRow {
  readonly params: SamplingParams;
  /** Prompt and generated token ids so far (penalties read them). */
  readonly promptIds: readonly number[];
  readonly outputIds: readonly number[];
  /**
   * Tokens the sequence generated before this one: outputIds.length, except in an async engine
   * step (engine.ts, asyncSteps), where the previous token is still on the device and outputIds
   * lacks it. Seeded draws use this count. Rows of such steps never have penalties (which need
   * the ids themselves: the engine reads them first).
   */
  readonly numGenerated?: number;
}

export interface SampledToken {
  readonly id: number;
  /** log softmax of the processed logits at `id`, when the row asked for logprobs. */
  readonly logprob?: number;
  /** The row's top-n alternatives (id, logprob), most likely first, when asked for. */
  readonly top?: readonly { id: number; logprob: number }[];
}

/** A sampling step queued on the device whose result the host has not read yet (Sampler.sampleAsync). */
export interface PendingSample {
  /**
   * int64 [rows] on the logits' device: the sampled ids, valid in stream order, so the next step
   * can read them on the device before the host has. They equal read()'s ids except at the rows
   * read() reports `redrawn` (picked again on the host after the device's pick).
   */
  readonly ids: Tensor;
  /** Waits for the result (the step's one host read) and returns one token per row. */
  read(): { tokens: SampledToken[]; redrawn: readonly number[] };
  /** Frees what it holds (after read(), or instead of it). */
  dispose(): void;
}

/**
 * Picks one token per row of `logits` [B, vocab] (any float dtype, any device). Implementations
 * read the device once per step (the chosen ids, and logprobs where asked), never once per row.
 */
export interface Sampler {
  /**
   * `whileDeviceRuns`, when given, is called once after the sampling work is queued on the device
   * and before the host waits for its result (the engine's StepOptions.whileDeviceRuns); a sampler
   * that ignores it is still correct: the engine then calls it after sample() returns.
   */
  sample(logits: Tensor, rows: readonly SamplingRow[], whileDeviceRuns?: () => void): SampledToken[];
  /**
   * Optional: queues the step and returns before the host read, leaving the ids on the device.
   * `logits` may be overwritten by device work queued after this call (a CUDA graph's static
   * output): what read() needs later must be copied now. The engine's async steps (asyncSteps)
   * need it; without it the engine runs every step synchronously.
   */
  sampleAsync?(logits: Tensor, rows: readonly SamplingRow[]): PendingSample;
  /**
   * Optional: throws, naming the option, if this sampler cannot honour `params` (`where` prefixes
   * the message). The engine calls it in addRequest, so a bad option fails its own request there
   * (an HTTP 400 in serve/http) instead of failing a whole step later.
   */
  check?(params: SamplingParams, where: string): void;
}
