/** Qwen3 and Qwen3-MoE causal language models. */
export { Qwen3Config, QWEN3_0_6B, QWEN3_TINY, type Qwen3ConfigFields } from './config.js';
export {
  Qwen3ForCausalLM,
  Qwen3MoeForCausalLM,
  Qwen3CausalLMBase,
  Qwen3Model,
  Qwen3DecoderLayer,
  Qwen3Attention,
  Qwen3MLP,
  Qwen3SparseMoeBlock,
  loadQwen3,
  ropeTables,
  rotateHalf,
  applyRotaryPosEmb,
  type FromConfigOptions,
  type FromPretrainedOptions,
  type Positions,
  type Routing,
} from './modeling.js';
