/**
 * Registers every cuda kernel group. Importing this loads nothing native: kernels reach the driver
 * through the cuda accelerator, which loads on the first use of a cuda device.
 */
import './core.js';
import './pointwise.js';
import './reduction.js';
import './softmax-norm.js';
import './linalg.js';
import './indexing.js';
import './attention.js';
import './nn.js';
import './pool.js';
import './llm-rotary.js';
import './llm-qk-norm-rotary.js';
import './llm-linear-silu-mul.js';
import './llm-add-rms-norm-linear.js';
import './nn-extra.js';
import './scatter.js';
import './scatter-add.js';
import './llm-norm.js';
import './llm-act.js';
import './llm-rope.js';
import './llm-backward.js';
import './sort.js';
import './llm-moe.js';
import './llm-mhc.js';
import './llm-paged.js';
import './random-draw.js';
import './decode-megakernel.js';
