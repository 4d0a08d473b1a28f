/**
 * float64 references of the sampler (serve/sampler.ts), written from the formulas and not from its
 * code, shared by the cpu and webgpu sampler tests: the processed logits in transformers' order
 * (repetition penalty, presence/frequency, then for sampling rows temperature, topK, topP, minP;
 * removed tokens -inf), their log_softmax, the support, and the inverse-CDF draw of a uniform.
 */
import type { SamplingParams } from '../../src/serve/sampling-params.js';

export function logSoftmax64(x: readonly number[]): number[] {
  const m = Math.max(...x);
  const lse = m + Math.log(x.reduce((s, v) => s + Math.exp(v - m), 0));
  return x.map((v) => v - lse);
}

export function softmax64(x: readonly number[]): number[] {
  return logSoftmax64(x).map(Math.exp);
}

/** The penalties alone: transformers' repetition penalty over prompt and output ids, then OpenAI's over output ids. */
export function refPenalised(logits: readonly number[], p: SamplingParams, promptIds: readonly number[] = [], outputIds: readonly number[] = []): number[] {
  const x = [...logits];
  const rp = p.repetitionPenalty ?? 1;
  if (rp !== 1) for (const id of new Set([...promptIds, ...outputIds])) x[id] = x[id]! < 0 ? x[id]! * rp : x[id]! / rp;
  const counts = new Map<number, number>();
  for (const id of outputIds) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, c] of counts) x[id] = x[id]! - (p.presencePenalty ?? 0) - (p.frequencyPenalty ?? 0) * c;
  return x;
}

/** transformers' order: repetition penalty, presence/frequency, then (sampling) T, topK, topP, minP. */
export function refProcessed(logits: readonly number[], p: SamplingParams, promptIds: readonly number[] = [], outputIds: readonly number[] = []): number[] {
  const x = refPenalised(logits, p, promptIds, outputIds);
  if (!p.doSample) return x;
  const t = p.temperature ?? 1;
  for (let i = 0; i < x.length; i++) x[i] = x[i]! / t;
  const topK = p.topK ?? 0;
  if (topK > 0 && topK < x.length) {
    const kth = [...x].sort((a, b) => b - a)[topK - 1]!;
    for (let i = 0; i < x.length; i++) if (x[i]! < kth) x[i] = -Infinity;
  }
  const topP = p.topP ?? 1;
  if (topP < 1) {
    const probs = softmax64(x);
    const order = x.map((_, i) => i).sort((a, b) => x[b]! - x[a]! || a - b);
    let before = 0;
    for (const i of order) {
      if (before >= topP) x[i] = -Infinity;
      before += probs[i]!;
    }
  }
  const minP = p.minP ?? 0;
  if (minP > 0) {
    const probs = softmax64(x);
    const top = Math.max(...probs);
    for (let i = 0; i < x.length; i++) if (probs[i]! < minP * top) x[i] = -Infinity;
  }
  return x;
}

/** Ids a processed row (or its logprobs) keeps: the finite entries. */
export const support = (lp: readonly number[]): number[] => lp.flatMap((v, i) => (v > -Infinity ? [i] : []));

/** The first argmax (torch's tie rule). */
export const argmax64 = (x: readonly number[]): number => x.indexOf(Math.max(...x));

/**
 * The inverse-CDF draw of `uniform` from softmax(`processed`) in id order: the first id of positive
 * probability whose running mass exceeds the uniform (the last such id if rounding leaves none).
 * `margin`: how far the uniform lies from the drawn id's interval ends [mass before, mass after];
 * below float32's rounding of those sums a device may pick a neighbour instead.
 */
export function refDraw(processed: readonly number[], uniform: number): { id: number; margin: number } {
  const p = softmax64(processed);
  let before = 0;
  let last = -1;
  for (let i = 0; i < p.length; i++) {
    if (!(p[i]! > 0)) continue;
    const after = before + p[i]!;
    if (after > uniform) return { id: i, margin: Math.min(uniform - before, after - uniform) };
    before = after;
    last = i;
  }
  return { id: last, margin: 0 };
}
