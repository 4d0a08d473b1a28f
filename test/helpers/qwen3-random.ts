/**
 * What the decode-kernel tests share: a Qwen3 config.json object for seeded random models of given
 * sizes (tied embeddings, 512 positions), a deterministic permutation for scattered block tables, and
 * norm weights other than 1.
 */
import * as kiln from '../../src/index.js';
import type { Tensor } from '../../src/index.js';

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

/**
 * Gives every RMSNorm weight of a model (names ending in `norm.weight`) seeded values around 1
 * (1 + 0.25 * N(0, 1), rounded to the weight's dtype), in place: a model made by `fromConfig` has
 * all of them at 1, where a kernel reading one norm's weights for another's, or no weights at all,
 * computes the same numbers.
 */
export function perturbNorms(model: { namedParameters(): Iterable<[string, Tensor]> }, seed: number): number {
  kiln.manualSeed(seed);
  let n = 0;
  for (const [name, p] of model.namedParameters()) {
    if (!name.endsWith('norm.weight')) continue;
    kiln.noGrad(() => {
      const r = kiln.randn(p.shape as number[], { dtype: 'float32' }).mul(0.25).add(1).to(p.dtype).to(p.device.toString());
      p.copy_(r);
      r.dispose();
    });
    n++;
  }
  return n;
}
