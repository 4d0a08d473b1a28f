/** `kiln.nn`: modules, parameters, initialisers, functional ops and losses, gradient clipping. */
export { Module, Parameter, type LoadResult } from './module.js';
export { Linear, Embedding, RMSNorm, type LayerOptions } from './layers/basic.js';
export { LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d } from './layers/norm.js';
export { Conv2d, type Conv2dOptions } from './layers/conv.js';
export { ReLU, GELU, SiLU, Tanh, Sigmoid, Identity, Dropout } from './layers/activation.js';
export { Flatten, Unflatten } from './layers/shape.js';
export { MaxPool2d, AvgPool2d, type MaxPool2dOptions, type AvgPool2dOptions } from './layers/pool.js';
export { MultiheadAttention, type MultiheadAttentionOptions, type MhaForwardOptions, type MhaOutput } from './layers/attention.js';
export { LSTM, GRU, type RNNOptions, type LSTMState, type LSTMOutput, type GRUOutput } from './layers/rnn.js';
export { Sequential, ModuleList, type ForwardModule } from './layers/container.js';
export * as init from './init.js';
export * as functional from './functional.js';
export * as utils from './utils.js';
export { clipGradNorm_, clipGradValue_ } from './utils.js';
