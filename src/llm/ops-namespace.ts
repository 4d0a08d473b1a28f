/** kiln.ops: the op registry as users and tools see it, plus the LLM library as kiln.ops.llm. */
export * from '../ops/public.js';
export * as llm from './index.js';
