/** Registers every CPU kernel group. */
import './core.js';
import './creation.js';
import './views.js';
import './pointwise.js';
import './reduction.js';
import './linalg.js';
import './indexing.js';
import './nn.js';
import './llm.js';
import './llm-moe.js';
import './llm-mhc.js';
import './llm-rotary.js';
import './llm-paged.js';
import './native/decode-step.js';
import './shape-extra.js';
import './nonzero.js';
