/**
 * transformers' greedy tokens of the tiny checkpoints (test/fixtures/<name>/generate.json, made by
 * scripts/make_generate_fixtures.py: 5 prompts of 1..20 tokens, 32 new tokens each, and the top-2
 * logit gap at each step) and the comparison the half-precision generation tests make with them.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface GenerateReference {
  new_tokens: number;
  cases: { prompt: number[]; generated: number[]; top2_gap: number[] }[];
}

export function readGenerateReference(folder: string): GenerateReference {
  return JSON.parse(fs.readFileSync(path.join(folder, 'generate.json'), 'utf8')) as GenerateReference;
}

/**
 * Top-2 logit gaps (of transformers' float32 logits) below which a half-precision run may pick the
 * other token: the logits of these models are a few units large, float16 rounds to 2^-11 and
 * bfloat16 to 2^-8 relative, and two layers of products and sums round many times. float32 has
 * none: every token must match.
 */
export const NEAR_TIE: Record<'float32' | 'float16' | 'bfloat16', number> = { float32: 0, float16: 0.02, bfloat16: 0.06 };

/**
 * Null when `got` equals transformers' tokens, or first differs at a step whose top-2 gap is below
 * the dtype's near-tie bound (after that the contexts differ and nothing more can be compared);
 * else what differs where.
 */
export function checkTokens(got: readonly number[], c: GenerateReference['cases'][number], nearTie: number): string | null {
  const i = c.generated.findIndex((t, k) => got[k] !== t);
  if (i < 0) return got.length === c.generated.length ? null : `${got.length} tokens, want ${c.generated.length}`;
  const gap = c.top2_gap[i]!;
  return gap < nearTie ? null : `step ${i}: kiln ${got[i]}, transformers ${c.generated[i]} (top-2 gap there ${gap}, not below ${nearTie})`;
}

/** Steps matched before the first difference, over all prompts (for the diagnostics). */
export function matchedSteps(ref: GenerateReference, outs: readonly (readonly number[])[]): number {
  return outs.reduce((n, o, p) => {
    const i = ref.cases[p]!.generated.findIndex((t, k) => o[k] !== t);
    return n + (i < 0 ? ref.new_tokens : i);
  }, 0);
}
