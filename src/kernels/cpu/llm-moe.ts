/**
 * CPU kernels of the LLM library, part 2: MoE routing (topkSoftmax, DeepSeek-V3 groupedTopk),
 * moeSum and fusedMoe. Top-k breaks ties by the lower expert index (stable), like a sort by
 * (score desc, index asc). fusedMoe runs as vLLM's does: count tokens per expert, permute the
 * (token, slot) pairs into expert order, per expert one gate/up GEMM -> act-and-mul -> one down
 * GEMM over its block of rows, then un-permute with the routing weights (summed per token in
 * slot order, so the result does not depend on how experts are scheduled). Everything is
 * computed in JS doubles; the intermediate activation stays unrounded.
 */
import { fusedMoe, groupedTopk, moeGeometry, type MoeActivation, moeSum, type ScoringFunc, topkSoftmax } from '../../ops/defs/llm-moe.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import { gelu, registerCpu } from './llm.js';
import { gemm } from './gemm.js';
import { denseValues, fromDense } from './numeric.js';
import { sigmoid, silu } from './pointwise-math.js';

/** Indices of the k largest of `v` (desc; ties -> lower index first), skipping -Infinity masks last. */
export function topkIndices(v: ArrayLike<number>, k: number): number[] {
  const idx = Array.from({ length: v.length }, (_, i) => i);
  idx.sort((a, b) => {
    const d = v[b]! - v[a]!;
    return d !== 0 && !Number.isNaN(d) ? d : a - b;
  });
  return idx.slice(0, k);
}

function softmaxRow(x: ArrayLike<number>, off: number, e: number, out: Float64Array): void {
  let m = -Infinity;
  for (let i = 0; i < e; i++) m = Math.max(m, x[off + i]!);
  let s = 0;
  for (let i = 0; i < e; i++) s += out[i] = Math.exp(x[off + i]! - m);
  for (let i = 0; i < e; i++) out[i]! /= s;
}

function finishRouting(ctx: { out: unknown }, weights: Float64Array, ids: Int32Array): Tensor[] {
  const [mw, mi] = ctx.out as OutMeta[];
  return [fromDense(mw!, weights), fromDense(mi!, ids)];
}

registerCpu(topkSoftmax.name, (ctx, gating, topkArg, renormArg) => {
  const g = gating as Tensor;
  const k = topkArg as number;
  const [t, e] = g.shape as [number, number];
  const x = denseValues(g);
  const p = new Float64Array(e);
  const weights = new Float64Array(t * k);
  const ids = new Int32Array(t * k);
  for (let r = 0; r < t; r++) {
    softmaxRow(x, r * e, e, p);
    const top = topkIndices(p, k);
    let s = 0;
    for (const i of top) s += p[i]!;
    top.forEach((i, j) => {
      ids[r * k + j] = i;
      weights[r * k + j] = renormArg ? p[i]! / s : p[i]!;
    });
  }
  return finishRouting(ctx, weights, ids);
});

registerCpu(groupedTopk.name, (ctx, gating, topkArg, renormArg, groupsArg, topkGroupArg, scoringArg, biasArg, scaleArg) => {
  const g = gating as Tensor;
  const k = topkArg as number;
  const groups = groupsArg as number;
  const topkGroup = topkGroupArg as number;
  const scoring = scoringArg as ScoringFunc;
  const bias = biasArg ? denseValues(biasArg as Tensor) : null;
  const scale = scaleArg as number;
  const [t, e] = g.shape as [number, number];
  const per = e / groups;
  const x = denseValues(g);
  const scores = new Float64Array(e);
  const biased = new Float64Array(e);
  const groupScore = new Float64Array(groups);
  const weights = new Float64Array(t * k);
  const ids = new Int32Array(t * k);
  for (let r = 0; r < t; r++) {
    if (scoring === 'softmax') softmaxRow(x, r * e, e, scores);
    else for (let i = 0; i < e; i++) scores[i] = sigmoid(x[r * e + i]!);
    // The correction bias steers which experts are selected; the weights come from the raw scores.
    for (let i = 0; i < e; i++) biased[i] = bias ? scores[i]! + bias[i]! : scores[i]!;
    for (let gi = 0; gi < groups; gi++) {
      const slice = biased.subarray(gi * per, (gi + 1) * per);
      if (bias) {
        const [a, b] = topkIndices(slice, 2);
        groupScore[gi] = slice[a!]! + slice[b!]!;
      } else {
        let m = -Infinity;
        for (const v of slice) m = Math.max(m, v);
        groupScore[gi] = m;
      }
    }
    const keep = new Set(topkIndices(groupScore, topkGroup));
    const masked = new Float64Array(e);
    for (let i = 0; i < e; i++) masked[i] = keep.has(Math.floor(i / per)) ? biased[i]! : -Infinity;
    const top = topkIndices(masked, k);
    let s = 0;
    for (const i of top) s += scores[i]!;
    top.forEach((i, j) => {
      ids[r * k + j] = i;
      weights[r * k + j] = (renormArg ? scores[i]! / s : scores[i]!) * scale;
    });
  }
  return finishRouting(ctx, weights, ids);
});

registerCpu(moeSum.name, (ctx, input) => {
  const x = input as Tensor;
  const [t, k, h] = x.shape as [number, number, number];
  const v = denseValues(x);
  const out = new Float64Array(t * h);
  for (let r = 0; r < t; r++) {
    for (let j = 0; j < k; j++) {
      const base = (r * k + j) * h;
      for (let i = 0; i < h; i++) out[r * h + i]! += v[base + i]!;
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});

registerCpu(fusedMoe.name, (ctx, hiddenArg, w13Arg, w2Arg, weightsArg, idsArg, activationArg) => {
  const x = hiddenArg as Tensor;
  const g = moeGeometry(x, w13Arg as Tensor, w2Arg as Tensor, weightsArg as Tensor, idsArg as Tensor, activationArg as MoeActivation);
  const { tokens, hidden: h, experts, inter, topk } = g;
  const act = activationArg === 'silu' ? silu : (a: number) => gelu(a, 'none');
  const xs = denseValues(x);
  const w13 = denseValues(w13Arg as Tensor);
  const w2 = denseValues(w2Arg as Tensor);
  const tw = denseValues(weightsArg as Tensor);
  const ids = denseValues(idsArg as Tensor);
  // 1. count rows per expert and validate ids (data, so checked here rather than in meta).
  const counts = new Int32Array(experts + 1);
  for (let p = 0; p < tokens * topk; p++) {
    const e = ids[p]!;
    if (!(Number.isInteger(e) && e >= 0 && e < experts)) {
      throw new RangeError(`llm.fusedMoe: topkIds[${Math.floor(p / topk)}, ${p % topk}] = ${e} is not an expert index in [0, ${experts}) (w13 [${(w13Arg as Tensor).shape.join(', ')}])`);
    }
    counts[e + 1]!++;
  }
  for (let e = 0; e < experts; e++) counts[e + 1]! += counts[e]!;
  // 2. permute: rows of expert e are perm[counts[e] .. counts[e + 1]), in (token, slot) order.
  const perm = new Int32Array(tokens * topk);
  const fill = counts.slice(0, experts);
  for (let p = 0; p < tokens * topk; p++) perm[fill[ids[p]!]!++] = p;
  // 3. per expert: gather its rows, gate/up GEMM, act-and-mul, down GEMM (the shared CPU GEMM
  //    reads the weights through strides, no transposed copies), into a per-(token, slot) result.
  const slotOut = new Float64Array(tokens * topk * h);
  const maxRows = Math.max(0, ...Array.from({ length: experts }, (_, e) => counts[e + 1]! - counts[e]!));
  const rowsBuf = new Float64Array(maxRows * h);
  const gu = new Float64Array(maxRows * 2 * inter);
  const a = new Float64Array(maxRows * inter);
  const down = new Float64Array(maxRows * h);
  for (let e = 0; e < experts; e++) {
    const first = counts[e]!;
    const m = counts[e + 1]! - first;
    if (m === 0) continue;
    for (let q = 0; q < m; q++) {
      const xb = Math.floor(perm[first + q]! / topk) * h;
      for (let i = 0; i < h; i++) rowsBuf[q * h + i] = xs[xb + i]!;
    }
    // gu[m, 2I] = rows[m, H] @ w13[e]^T   (B[k, n] = w13[e, n, k])
    gemm(m, 2 * inter, h, 1, { data: rowsBuf, offset: 0, rowStride: h, colStride: 1 }, { data: w13, offset: e * 2 * inter * h, rowStride: 1, colStride: h }, 0, { data: gu, offset: 0, rowStride: 2 * inter, colStride: 1 });
    for (let q = 0; q < m; q++) for (let i = 0; i < inter; i++) a[q * inter + i] = act(gu[q * 2 * inter + i]!) * gu[q * 2 * inter + inter + i]!;
    // down[m, H] = a[m, I] @ w2[e]^T   (B[k, n] = w2[e, n, k])
    gemm(m, h, inter, 1, { data: a, offset: 0, rowStride: inter, colStride: 1 }, { data: w2, offset: e * h * inter, rowStride: 1, colStride: inter }, 0, { data: down, offset: 0, rowStride: h, colStride: 1 });
    for (let q = 0; q < m; q++) slotOut.set(down.subarray(q * h, (q + 1) * h), perm[first + q]! * h);
  }
  // 4. un-permute: weighted sum over each token's slots, in slot order.
  const out = new Float64Array(tokens * h);
  for (let r = 0; r < tokens; r++) {
    for (let j = 0; j < topk; j++) {
      const p = r * topk + j;
      const w = tw[p]!;
      for (let o = 0; o < h; o++) out[r * h + o]! += w * slotOut[p * h + o]!;
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});
