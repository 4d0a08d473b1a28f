/** The public functional API; importing it also attaches Tensor methods. */
export * from './core.js';
export * from './data.js';
export * from './creation.js';
export * from './views.js';
export * from './pointwise.js';
export * from './reduction.js';
export * from './linalg.js';
export type { RmsNormOptions } from './rms-norm-args.js';
export * from './indexing.js';
export * from './nn.js';
export * from './shape-extra.js';
export * from './pad.js';
export * from './norm.js';
export * from './einsum.js';
export * from './resample.js';
export * from './conv-extra.js';
export * from './random-extra.js';
import './convert.js';
