/** `kiln.models`: model architectures with Hugging Face checkpoint-compatible parameter names. */
export * from './qwen3/index.js';
export type { StepKv, StepModel, AttentionGroup, GroupKv, KvGeometry } from './step-kv.js';
