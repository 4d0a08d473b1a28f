/**
 * What the decode-kernel tests share: a Qwen3 config.json object for seeded random models of given
 * sizes (tied embeddings, 512 positions) and a deterministic permutation for scattered block tables.
 */
export function qwen3Config(hidden: number, heads: number, kvHeads: number, headDim: number, intermediate: number, layers: number, vocab: number): Record<string, unknown> {
  return {
    model_type: 'qwen3',
    hidden_size: hidden,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    vocab_size: vocab,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-6,
    rope_theta: 1_000_000,
    tie_word_embeddings: true,
  };
}

/** A permutation of 0..n-1 from a linear congruential generator. */
export function shuffled(n: number, seed: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  let s = seed;
  for (let i = n - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
