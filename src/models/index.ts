/** `kiln.models`: model architectures with Hugging Face checkpoint-compatible parameter names. */
export * from './qwen3/index.js';
export { ModuleList } from './module-list.js';
