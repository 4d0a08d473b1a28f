/** Every op definition group; importing this registers all ops. */
import './defs/core.js';
import './defs/creation.js';
import './defs/views.js';
import './defs/pointwise.js';
import './defs/reduction.js';
import './defs/linalg.js';
import './defs/indexing.js';
import './defs/nn.js';
import './defs/conv-fused.js';
import './defs/llm.js';
import './defs/llm-moe.js';
import './defs/llm-mhc.js';
import './defs/llm-rotary.js';
import './defs/llm-qk-norm-rotary.js';
import './defs/llm-paged.js';
import './defs/llm-qk-norm-rotary-cache.js';
import './defs/llm-qk-norm-rotary-paged-attention.js';
import './defs/llm-linear-silu-mul.js';
import './defs/llm-gate-up-silu-mul.js';
import './defs/llm-add-rms-norm-linear.js';
import './defs/shape-extra.js';
import './defs/nonzero.js';
// The decomposition table (eager fallback and the compiler's rewrites), once the ops exist.
import './decompositions.js';
import './decompositions-shape.js';
export * from './registry.js';
export * from './dispatch.js';
export type * from './schema.js';
