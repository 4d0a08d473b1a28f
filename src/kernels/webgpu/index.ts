/**
 * Registers every webgpu kernel group. Importing this opens nothing: kernels reach Dawn through the
 * webgpu accelerator, which starts its device thread on the first use of a webgpu device.
 */
import './core.js';
import './pointwise.js';
import './linalg.js';
import './reduction.js';
import './norm.js';
import './scan.js';
import './sort.js';
import './indexing.js';
import './index-put.js';
import './scatter.js';
import './masked.js';
import './pool.js';
import './conv.js';
import './conv-bn.js';
import './dropout.js';
import './attention.js';
import './llm-paged.js';
import './llm-rotary.js';
import './llm-linear-silu-mul.js';
import './llm-linear-gelu.js';
import './llm-add-rms-norm-linear.js';
