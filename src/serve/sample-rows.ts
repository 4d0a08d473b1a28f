/**
 * One sampling step over a [B, vocab] float32 logits tensor (penalties already applied), on the
 * tensor's device, all rows at once: the rows' settings go up as one [B, 9] table (one upload)
 * whose columns broadcast against the logits, so rows with different settings share every kernel.
 * Returns one small packed float32 tensor for the caller's single read.
 *
 * Per row, as transformers' generate orders its warpers: temperature (z = x / T), then topK, topP
 * and minP masks, then a draw from the softmax of what is left. Greedy rows take argmax(x) (first
 * maximum) and see none of the warpers.
 * - topK keeps the tokens >= the k-th largest logit (ties with it stay, as in transformers).
 * - topP keeps the shortest prefix of the tokens sorted by logit, ties by lower id, whose mass
 *   (after topK) reaches topP: a token stays when the mass strictly before it is < topP.
 * - minP keeps p >= minP * max p, i.e. exp(z - max z) >= minP.
 * Both prefix filters need the sorted head of the row. It comes from topk(z, C), C = min(vocab,
 * maxCandidates, the largest topK; maxCandidates for a topP row), not a full sort (the cuda sort
 * takes rows of at most 16384), and becomes a threshold on the whole row: keep z > tau, or z == tau
 * with id <= the boundary id. A row whose topK exceeds C or whose nucleus does not close inside the
 * candidates is marked not `fits`; the caller redoes it with C = vocab (sampler.ts).
 *
 * The draw is inverse-CDF in id order (no sort needed): the first token whose running weight exceeds
 * u * total, u being the row's uniform; only tokens of positive weight can be picked.
 * Log-probabilities are log_softmax of the processed logits (temperature and filters applied;
 * removed tokens are -inf); greedy rows' are log_softmax of the penalised logits.
 *
 * Packed row layout: [id, fits (1/0), logprob, top ids (n), top logprobs (n)], the last three only
 * when logprobs are asked for. Ids travel as float32, exact below 2^24 (the sampler checks vocab).
 *
 * Id arithmetic (the iota row, boundary ids, counts of masks, the picked id) is float32 too, exact
 * for the same reason, and only cast to int64 where an op takes indices (gather): webgpu computes
 * no int64 values (WGSL has no 64-bit integers; it stores them and casts them only), so int64
 * compares, wheres and sums would leave the sampler cpu- and cuda-only.
 */
import { to } from '../api/core.js';
import { full } from '../api/creation.js';
import { tensor } from '../api/data.js';
import { cat, gather } from '../api/indexing.js';
import { div, eq, exp, ge, gt, le, log, logicalAnd, logicalNot, logicalOr, lt, mul, sub, where } from '../api/pointwise.js';
import { amax, any, argmax, cumsum, logsumexp, sum, topk } from '../api/reduction.js';
import { narrow } from '../api/views.js';
import type { Tensor } from '../tensor/tensor.js';
import { toDeviceNonBlocking } from '../tensor/transfer.js';

/** One row's settings for the step, already validated and defaulted. */
export interface RowPlan {
  greedy: boolean;
  /** 1 for greedy rows. */
  temperature: number;
  /** 0: off (also when >= vocab). */
  topK: number;
  /** 1: off. */
  topP: number;
  /** 0: off. */
  minP: number;
  /** The row's draw in [0, 1); unused by greedy rows. */
  uniform: number;
}

/** The largest float32 below 1: a draw rounded up to 1 would fall past the last token. */
const BELOW_ONE = 1 - 2 ** -24;

function and(masks: readonly Tensor[]): Tensor | null {
  let m: Tensor | null = null;
  for (const t of masks) m = m === null ? t : logicalAnd(m, t);
  return m;
}

/** Columns of the per-row settings table, uploaded once per step as one [B, SETTINGS] tensor. */
const enum Col {
  Temperature,
  TopP,
  MinP,
  Uniform,
  /** min(topK, C) - 1, clamped at 0: where the k-th largest sits among the candidates. */
  KIndex,
  /** 1 when topK is on and at most C, so its threshold is known. */
  KKnown,
  KOn,
  POn,
  Sampling,
  Count,
}

/** `t` (float32 ids) as the int64 indices gather takes. */
const indices = (t: Tensor): Tensor => to(t, 'int64');

/**
 * Samples one token per row of `x` [B, V] (float32, penalties applied). `nTop`: alternatives to
 * return (the largest any row asks for); `withLogprobs`: whether any row wants logprobs at all;
 * `iota`: [1, V] float32 0..V-1 on x's device (the caller caches it across steps).
 */
export function sampleRows(x: Tensor, plans: readonly RowPlan[], nTop: number, withLogprobs: boolean, maxCandidates: number, iota: Tensor): Tensor {
  const [B, V] = x.shape as [number, number];
  const device = x.device;
  const sampling = plans.map((p) => !p.greedy);
  const ones = full([B, 1], 1, { dtype: 'float32', device });
  let id: Tensor;
  let logProb: Tensor | null = null;
  let fits: Tensor = ones;

  if (!sampling.some(Boolean)) {
    id = to(argmax(x, 1, true), 'float32');
    if (withLogprobs) logProb = sub(x, logsumexp(x, 1, true));
  } else {
    const kOn = plans.map((p, r) => sampling[r]! && p.topK > 0);
    const pOn = plans.map((p, r) => sampling[r]! && p.topP < 1);
    const need = Math.max(0, ...plans.map((p, r) => (pOn[r] ? Infinity : kOn[r] ? p.topK : 0)));
    const C = Math.min(V, maxCandidates, need);
    // Made on the cpu and uploaded without waiting: in an async engine step the previous
    // step's work (and this one's model) are still queued, and a waiting upload would idle the
    // device while the host catches up (tensor/transfer.ts).
    const hostTable = tensor(
      plans.map((p, r) => {
        const row = new Array<number>(Col.Count).fill(0);
        row[Col.Temperature] = p.temperature;
        row[Col.TopP] = p.topP;
        row[Col.MinP] = sampling[r] ? p.minP : 0;
        row[Col.Uniform] = Math.min(Math.fround(p.uniform), BELOW_ONE);
        row[Col.KIndex] = Math.max(0, Math.min(p.topK, C) - 1);
        row[Col.KKnown] = kOn[r] && p.topK <= C ? 1 : 0;
        row[Col.KOn] = kOn[r] ? 1 : 0;
        row[Col.POn] = pOn[r] ? 1 : 0;
        row[Col.Sampling] = sampling[r] ? 1 : 0;
        return row;
      }),
      { dtype: 'float32' },
    );
    const table = toDeviceNonBlocking(hostTable, device);
    const col = (c: Col): Tensor => narrow(table, 1, c, 1);
    const flag = (c: Col): Tensor => gt(col(c), 0);

    const z = plans.some((p) => p.temperature !== 1) ? div(x, col(Col.Temperature)) : x;
    const zmax = amax(z, 1, true);
    const shifted = sub(z, zmax);
    const e = exp(shifted);
    const masks: Tensor[] = [];
    const fitMasks: Tensor[] = [];
    if (C > 0) {
      const cand = topk(z, C, 1); // sorted, ties by lower id
      const kKnown = flag(Col.KKnown);
      const tauK = where(kKnown, gather(cand.values, 1, indices(col(Col.KIndex))), -Infinity);
      const keepK = ge(z, tauK);
      if (kOn.some(Boolean)) masks.push(keepK);
      if (kOn.some((on, r) => on && plans[r]!.topK > C)) fitMasks.push(logicalOr(kKnown, logicalNot(flag(Col.KOn))));
      if (pOn.some(Boolean)) {
        // Candidate probabilities under the topK-filtered distribution of the whole row.
        const massK = sum(where(keepK, e, 0), 1, true);
        const p = div(where(ge(cand.values, tauK), exp(sub(cand.values, zmax)), 0), massK);
        const cum = cumsum(p, 1);
        // The mass strictly before each candidate, as the exact running sum shifted by one.
        const zero = full([B, 1], 0, { dtype: 'float32', device });
        const before = C > 1 ? cat([zero, narrow(cum, 1, 0, C - 1)], 1) : zero;
        const topP = col(Col.TopP);
        const last = indices(sub(sum(lt(before, topP), 1, true, 'float32'), 1)); // >= 0: before[0] = 0 < topP
        const on = flag(Col.POn);
        const tauP = where(on, gather(cand.values, 1, last), -Infinity);
        const idP = where(on, to(gather(cand.indices, 1, last), 'float32'), V);
        masks.push(logicalOr(gt(z, tauP), logicalAnd(eq(z, tauP), le(iota, idP))));
        if (C < V) {
          // The nucleus is known when the candidates reach topP, or hold every topK survivor.
          const closed = logicalOr(ge(narrow(cum, 1, C - 1, 1), topP), le(sum(keepK, 1, true, 'float32'), C));
          fitMasks.push(logicalOr(closed, logicalNot(on)));
        }
      }
    }
    if (plans.some((p, r) => sampling[r]! && p.minP > 0)) masks.push(ge(e, col(Col.MinP)));
    const keep = and(masks);
    const fitAll = and(fitMasks);
    if (fitAll) fits = to(fitAll, 'float32');
    const w = keep ? where(keep, e, 0) : e;
    const cdf = cumsum(w, 1);
    const total = narrow(cdf, 1, V - 1, 1);
    const target = mul(col(Col.Uniform), total);
    const positive = gt(w, 0);
    const crossing = logicalAnd(gt(cdf, target), positive);
    // A scan need not be monotone to the last bit on every device: fall back to the last token of
    // positive weight when rounding left no crossing.
    const lastPositive = amax(where(positive, iota, -1), 1, true);
    const drawn = where(any(crossing, 1, true), to(argmax(to(crossing, 'float32'), 1, true), 'float32'), lastPositive);
    id = sampling.every(Boolean) ? drawn : where(flag(Col.Sampling), drawn, to(argmax(z, 1, true), 'float32'));
    if (withLogprobs) {
      const lp = sub(shifted, log(total));
      logProb = keep ? where(keep, lp, -Infinity) : lp;
    }
  }

  const parts: Tensor[] = [];
  parts.push(id, fits);
  if (logProb) {
    parts.push(gather(logProb, 1, indices(id)));
    if (nTop > 0) {
      const top = topk(logProb, Math.min(nTop, V), 1);
      parts.push(to(top.indices, 'float32'), top.values);
    }
  }
  return cat(parts, 1);
}
