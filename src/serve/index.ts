/** `kiln.serve`: text generation — paged KV cache, scheduler, engine, generate(). */
export { PagedKvCache, DEFAULT_BLOCK_SIZE, type KvCacheOptions } from './kv-cache.js';
export { BlockAllocator, type BlockAllocatorStats } from './block-allocator.js';
export { PagedStepKv, type StepEntry } from './step-context.js';
export { hashBlock, extendBlockHashes } from './prefix-hash.js';
export type { Sampler, SamplingParams, SamplingRow, SampledToken } from './sampling-params.js';
export type { StepKv, StepModel, AttentionGroup, GroupKv, KvGeometry } from '../models/step-kv.js';
