/**
 * Qwen3 / Qwen3-MoE configuration, read from a Hugging Face config.json object (snake_case keys,
 * transformers' defaults for absent ones). The rope theta is `rope_theta` or, as transformers 5
 * writes it, `rope_parameters.rope_theta`. MoE fields are present (num_experts = 0) for dense models.
 */

export interface Qwen3ConfigFields {
  modelType: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  numKeyValueHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  tieWordEmbeddings: boolean;
  attentionBias: boolean;
  maxPositionEmbeddings: number;
  /** MoE: experts per sparse layer (0 for a dense model). */
  numExperts: number;
  numExpertsPerTok: number;
  moeIntermediateSize: number;
  normTopkProb: boolean;
  decoderSparseStep: number;
  mlpOnlyLayers: number[];
}

type Json = Record<string, unknown>;

function num(cfg: Json, key: string, fallback?: number, integer = true): number {
  const v = cfg[key];
  if (v === undefined || v === null) {
    if (fallback === undefined) throw new Error(`Qwen3Config: config.json is missing '${key}'`);
    return fallback;
  }
  if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v))) {
    throw new Error(`Qwen3Config: '${key}' must be ${integer ? 'an integer' : 'a number'}, got ${JSON.stringify(v)}`);
  }
  return v;
}

function bool(cfg: Json, key: string, fallback: boolean): boolean {
  const v = cfg[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw new Error(`Qwen3Config: '${key}' must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

export class Qwen3Config implements Qwen3ConfigFields {
  readonly modelType: string;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly tieWordEmbeddings: boolean;
  readonly attentionBias: boolean;
  readonly maxPositionEmbeddings: number;
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly normTopkProb: boolean;
  readonly decoderSparseStep: number;
  readonly mlpOnlyLayers: number[];

  constructor(fields: Partial<Qwen3ConfigFields> & Pick<Qwen3ConfigFields, 'vocabSize' | 'hiddenSize' | 'intermediateSize' | 'numHiddenLayers' | 'numAttentionHeads'>) {
    this.modelType = fields.modelType ?? ((fields.numExperts ?? 0) > 0 ? 'qwen3_moe' : 'qwen3');
    this.vocabSize = fields.vocabSize;
    this.hiddenSize = fields.hiddenSize;
    this.intermediateSize = fields.intermediateSize;
    this.numHiddenLayers = fields.numHiddenLayers;
    this.numAttentionHeads = fields.numAttentionHeads;
    this.numKeyValueHeads = fields.numKeyValueHeads ?? fields.numAttentionHeads;
    this.headDim = fields.headDim ?? Math.floor(fields.hiddenSize / fields.numAttentionHeads);
    this.rmsNormEps = fields.rmsNormEps ?? 1e-6;
    this.ropeTheta = fields.ropeTheta ?? 10000;
    this.tieWordEmbeddings = fields.tieWordEmbeddings ?? false;
    this.attentionBias = fields.attentionBias ?? false;
    this.maxPositionEmbeddings = fields.maxPositionEmbeddings ?? 32768;
    this.numExperts = fields.numExperts ?? 0;
    this.numExpertsPerTok = fields.numExpertsPerTok ?? 0;
    this.moeIntermediateSize = fields.moeIntermediateSize ?? 0;
    this.normTopkProb = fields.normTopkProb ?? false;
    this.decoderSparseStep = fields.decoderSparseStep ?? 1;
    this.mlpOnlyLayers = [...(fields.mlpOnlyLayers ?? [])];
    this.validate();
  }

  private validate(): void {
    const pos = (k: keyof Qwen3ConfigFields, allowZero = false): void => {
      const v = this[k] as number;
      if (!Number.isInteger(v) || v < (allowZero ? 0 : 1)) throw new Error(`Qwen3Config: ${k} must be a ${allowZero ? 'non-negative' : 'positive'} integer, got ${v}`);
    };
    for (const k of ['vocabSize', 'hiddenSize', 'intermediateSize', 'numAttentionHeads', 'numKeyValueHeads', 'headDim'] as const) pos(k);
    pos('numHiddenLayers', true);
    pos('numExperts', true);
    if (this.headDim % 2 !== 0) throw new Error(`Qwen3Config: headDim must be even for RoPE, got ${this.headDim}`);
    if (this.numAttentionHeads % this.numKeyValueHeads !== 0) {
      throw new Error(`Qwen3Config: numAttentionHeads (${this.numAttentionHeads}) must be a multiple of numKeyValueHeads (${this.numKeyValueHeads})`);
    }
    if (this.numExperts > 0) {
      pos('numExpertsPerTok');
      pos('moeIntermediateSize');
      pos('decoderSparseStep');
      if (this.numExpertsPerTok > this.numExperts) {
        throw new Error(`Qwen3Config: numExpertsPerTok (${this.numExpertsPerTok}) exceeds numExperts (${this.numExperts})`);
      }
    }
    if (!(this.rmsNormEps > 0)) throw new Error(`Qwen3Config: rmsNormEps must be positive, got ${this.rmsNormEps}`);
    if (!(this.ropeTheta > 0)) throw new Error(`Qwen3Config: ropeTheta must be positive, got ${this.ropeTheta}`);
  }

  get isMoe(): boolean {
    return this.numExperts > 0;
  }

  /** Whether decoder layer `i` uses the sparse MoE block (transformers' rule). */
  isSparseLayer(i: number): boolean {
    return this.numExperts > 0 && !this.mlpOnlyLayers.includes(i) && (i + 1) % this.decoderSparseStep === 0;
  }

  /** A config.json object (Qwen3ForCausalLM or Qwen3MoeForCausalLM). */
  static fromJSON(cfg: Json): Qwen3Config {
    if (typeof cfg !== 'object' || cfg === null) throw new Error('Qwen3Config: expected a config.json object');
    if (cfg.use_sliding_window === true) throw new Error('Qwen3Config: use_sliding_window = true is not supported');
    let ropeTheta = cfg.rope_theta;
    const rp = cfg.rope_parameters;
    if (ropeTheta === undefined && typeof rp === 'object' && rp !== null) {
      const r = rp as Json;
      if (r.rope_type !== undefined && r.rope_type !== 'default') throw new Error(`Qwen3Config: rope_type '${String(r.rope_type)}' is not supported (only 'default')`);
      ropeTheta = r.rope_theta;
    }
    const rs = cfg.rope_scaling;
    if (typeof rs === 'object' && rs !== null) {
      const t = (rs as Json).rope_type ?? (rs as Json).type;
      if (t !== undefined && t !== 'default') throw new Error(`Qwen3Config: rope_scaling type '${String(t)}' is not supported`);
    }
    if (ropeTheta !== undefined && (typeof ropeTheta !== 'number' || !(ropeTheta > 0))) throw new Error(`Qwen3Config: rope theta must be a positive number, got ${JSON.stringify(ropeTheta)}`);
    const mlpOnly = cfg.mlp_only_layers ?? [];
    if (!Array.isArray(mlpOnly) || !mlpOnly.every((x) => Number.isInteger(x))) throw new Error(`Qwen3Config: 'mlp_only_layers' must be a list of integers, got ${JSON.stringify(mlpOnly)}`);
    const numExperts = cfg.num_experts !== undefined ? num(cfg, 'num_experts', 0) : num(cfg, 'num_local_experts', 0);
    const modelType = typeof cfg.model_type === 'string' ? cfg.model_type : undefined;
    const hiddenSize = num(cfg, 'hidden_size');
    const heads = num(cfg, 'num_attention_heads');
    return new Qwen3Config({
      modelType,
      vocabSize: num(cfg, 'vocab_size'),
      hiddenSize,
      intermediateSize: num(cfg, 'intermediate_size'),
      numHiddenLayers: num(cfg, 'num_hidden_layers'),
      numAttentionHeads: heads,
      numKeyValueHeads: num(cfg, 'num_key_value_heads', heads),
      headDim: num(cfg, 'head_dim', Math.floor(hiddenSize / heads)),
      rmsNormEps: num(cfg, 'rms_norm_eps', 1e-6, false),
      ropeTheta: (ropeTheta as number | undefined) ?? 10000,
      tieWordEmbeddings: bool(cfg, 'tie_word_embeddings', false),
      attentionBias: bool(cfg, 'attention_bias', false),
      maxPositionEmbeddings: num(cfg, 'max_position_embeddings', 32768),
      numExperts,
      numExpertsPerTok: num(cfg, 'num_experts_per_tok', numExperts > 0 ? 8 : 0),
      moeIntermediateSize: num(cfg, 'moe_intermediate_size', numExperts > 0 ? 768 : 0),
      normTopkProb: bool(cfg, 'norm_topk_prob', false),
      decoderSparseStep: num(cfg, 'decoder_sparse_step', 1),
      mlpOnlyLayers: mlpOnly as number[],
    });
  }

  /** Back to a config.json-shaped object. */
  toJSON(): Json {
    const out: Json = {
      model_type: this.modelType,
      vocab_size: this.vocabSize,
      hidden_size: this.hiddenSize,
      intermediate_size: this.intermediateSize,
      num_hidden_layers: this.numHiddenLayers,
      num_attention_heads: this.numAttentionHeads,
      num_key_value_heads: this.numKeyValueHeads,
      head_dim: this.headDim,
      rms_norm_eps: this.rmsNormEps,
      rope_theta: this.ropeTheta,
      tie_word_embeddings: this.tieWordEmbeddings,
      attention_bias: this.attentionBias,
      max_position_embeddings: this.maxPositionEmbeddings,
    };
    if (this.numExperts > 0) {
      Object.assign(out, {
        num_experts: this.numExperts,
        num_experts_per_tok: this.numExpertsPerTok,
        moe_intermediate_size: this.moeIntermediateSize,
        norm_topk_prob: this.normTopkProb,
        decoder_sparse_step: this.decoderSparseStep,
        mlp_only_layers: [...this.mlpOnlyLayers],
      });
    }
    return out;
  }

  /** A copy with some fields replaced. */
  with(fields: Partial<Qwen3ConfigFields>): Qwen3Config {
    return new Qwen3Config({ ...this.fields(), ...fields });
  }

  private fields(): Qwen3ConfigFields {
    const { modelType, vocabSize, hiddenSize, intermediateSize, numHiddenLayers, numAttentionHeads, numKeyValueHeads, headDim, rmsNormEps, ropeTheta } = this;
    const { tieWordEmbeddings, attentionBias, maxPositionEmbeddings, numExperts, numExpertsPerTok, moeIntermediateSize, normTopkProb, decoderSparseStep, mlpOnlyLayers } = this;
    return {
      modelType,
      vocabSize,
      hiddenSize,
      intermediateSize,
      numHiddenLayers,
      numAttentionHeads,
      numKeyValueHeads,
      headDim,
      rmsNormEps,
      ropeTheta,
      tieWordEmbeddings,
      attentionBias,
      maxPositionEmbeddings,
      numExperts,
      numExpertsPerTok,
      moeIntermediateSize,
      normTopkProb,
      decoderSparseStep,
      mlpOnlyLayers: [...mlpOnlyLayers],
    };
  }
}

/** Qwen/Qwen3-0.6B's shapes (the benchmark model). */
export const QWEN3_0_6B = new Qwen3Config({
  modelType: 'qwen3',
  vocabSize: 151936,
  hiddenSize: 1024,
  intermediateSize: 3072,
  numHiddenLayers: 28,
  numAttentionHeads: 16,
  numKeyValueHeads: 8,
  headDim: 128,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  tieWordEmbeddings: true,
  attentionBias: false,
  maxPositionEmbeddings: 40960,
});

/**
 * A tiny Qwen3 (2 layers, hidden 64, GQA 4:2, head_dim 16, vocab 96, tied embeddings): the shapes
 * of the test checkpoints (test/fixtures/qwen3-tiny), for seeded random runs that need no weights.
 */
export const QWEN3_TINY = new Qwen3Config({
  modelType: 'qwen3',
  vocabSize: 96,
  hiddenSize: 64,
  intermediateSize: 128,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  tieWordEmbeddings: true,
  attentionBias: false,
  maxPositionEmbeddings: 512,
});
