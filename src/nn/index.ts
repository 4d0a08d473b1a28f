/** `kiln.nn`: modules, parameters and initialisers. */
export { Module, Parameter, type LoadResult } from './module.js';
export { Linear, Embedding, RMSNorm, type LayerOptions } from './layers/basic.js';
export * as init from './init.js';
