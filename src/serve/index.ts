/** `kiln.serve`: text generation — paged KV cache, scheduler, engine, generate(), and the OpenAI-compatible HTTP server. */
export { generate, type GenerateOptions } from './generate.js';
export { streamText, generateText, promptIds, type TextOptions } from './text.js';
export { Engine, DEFAULT_CACHE_BYTES, DEFAULT_MAX_NEW_TOKENS, type EngineOptions, type EngineStats, type EngineTraceEvent, type RequestOutput, type AddRequestOptions } from './engine.js';
export type { DecodePath } from './decode-runner.js';
export { PagedKvCache, DEFAULT_BLOCK_SIZE, type KvCacheOptions } from './kv-cache.js';
export { BlockAllocator, type BlockAllocatorStats } from './block-allocator.js';
export { PagedStepKv, type StepEntry } from './step-context.js';
export { Scheduler, type SchedulerOptions, type ScheduledEntry, type SchedulerOutput } from './scheduler.js';
export { Sequence, type FinishReason, type SequenceStatus } from './sequence.js';
export { LogitsSampler, type LogitsSamplerOptions } from './sampler.js';
export { validateSamplingParams } from './sampling-validate.js';
export { hashBlock, extendBlockHashes } from './prefix-hash.js';
export type { Sampler, SamplingParams, SamplingRow, SampledToken } from './sampling-params.js';
export type { StepKv, StepModel, AttentionGroup, GroupKv, KvGeometry } from '../models/step-kv.js';
export * from './http/index.js';
