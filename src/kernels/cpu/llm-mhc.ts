/**
 * CPU kernels of the LLM library, part 3: mHC pre-mix (projection, sigmoid pre/post weights,
 * Sinkhorn-Knopp combination matrix, pre-mixed layer input), post-mix and head collapse. The math
 * and parameterisation are documented in src/ops/defs/llm-mhc.ts; this file follows it line by
 * line, per token, in JS doubles.
 */
import { mhcGeometry, mhcHeadCollapse, mhcPost, mhcPostGeometry, mhcPre } from '../../ops/defs/llm-mhc.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Tensor } from '../../tensor/tensor.js';
import { registerCpu } from './llm.js';
import { denseValues, fromDense } from './numeric.js';
import { sigmoid } from './pointwise-math.js';

/** m = (phi v) / sqrt(mean(v^2) + rmsEps) for the token's flat streams v (length nh). */
function mixLogits(xs: ArrayLike<number>, base: number, nh: number, phi: ArrayLike<number>, rows: number, rmsEps: number, out: Float64Array): void {
  let ss = 0;
  for (let i = 0; i < nh; i++) ss += xs[base + i]! * xs[base + i]!;
  const inv = 1 / Math.sqrt(ss / nh + rmsEps);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    const pb = r * nh;
    for (let i = 0; i < nh; i++) s += phi[pb + i]! * xs[base + i]!;
    out[r] = s * inv;
  }
}

/**
 * Sinkhorn-Knopp on exp(logits) for one n x n matrix, in place: a row softmax (the first row
 * normalisation of exp(logits), computed stably) plus eps, a column normalisation, then
 * `iters - 1` rounds of row and column normalisation; each divides by (sum + eps).
 */
export function sinkhorn(m: Float64Array, n: number, iters: number, eps: number): void {
  const rows = (): void => {
    for (let i = 0; i < n; i++) {
      let s = 0;
      for (let j = 0; j < n; j++) s += m[i * n + j]!;
      for (let j = 0; j < n; j++) m[i * n + j]! /= s + eps;
    }
  };
  const cols = (): void => {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let i = 0; i < n; i++) s += m[i * n + j]!;
      for (let i = 0; i < n; i++) m[i * n + j]! /= s + eps;
    }
  };
  for (let i = 0; i < n; i++) {
    let mx = -Infinity;
    for (let j = 0; j < n; j++) mx = Math.max(mx, m[i * n + j]!);
    let s = 0;
    for (let j = 0; j < n; j++) s += m[i * n + j] = Math.exp(m[i * n + j]! - mx);
    for (let j = 0; j < n; j++) m[i * n + j] = m[i * n + j]! / s + eps;
  }
  cols();
  for (let k = 1; k < iters; k++) {
    rows();
    cols();
  }
}

registerCpu(mhcPre.name, (ctx, streamsArg, phiArg, alphaArg, biasArg, rmsEps, preEps, postMult, iters, sinkEps) => {
  const streams = streamsArg as Tensor;
  const { tokens, n, hidden: h } = mhcGeometry(streams);
  const nh = n * h;
  const rows = n * (n + 2);
  const xs = denseValues(streams);
  const phi = denseValues(phiArg as Tensor);
  const alpha = denseValues(alphaArg as Tensor);
  const bias = denseValues(biasArg as Tensor);
  const layerIn = new Float64Array(tokens * h);
  const post = new Float64Array(tokens * n);
  const comb = new Float64Array(tokens * n * n);
  const m = new Float64Array(rows);
  const pre = new Float64Array(n);
  const c = new Float64Array(n * n);
  for (let t = 0; t < tokens; t++) {
    const base = t * nh;
    mixLogits(xs, base, nh, phi, rows, rmsEps as number, m);
    for (let i = 0; i < n; i++) {
      pre[i] = sigmoid(alpha[0]! * m[i]! + bias[i]!) + (preEps as number);
      post[t * n + i] = (postMult as number) * sigmoid(alpha[1]! * m[n + i]! + bias[n + i]!);
    }
    for (let i = 0; i < n * n; i++) c[i] = alpha[2]! * m[2 * n + i]! + bias[2 * n + i]!;
    sinkhorn(c, n, iters as number, sinkEps as number);
    comb.set(c, t * n * n);
    for (let i = 0; i < n; i++) {
      const p = pre[i]!;
      const sb = base + i * h;
      for (let o = 0; o < h; o++) layerIn[t * h + o]! += p * xs[sb + o]!;
    }
  }
  const [mi, mp, mc] = ctx.out as OutMeta[];
  return [fromDense(mi!, layerIn), fromDense(mp!, post), fromDense(mc!, comb)];
});

registerCpu(mhcPost.name, (ctx, layerOutArg, streamsArg, postArg, combArg) => {
  const g = mhcPostGeometry(layerOutArg as Tensor, streamsArg as Tensor, postArg as Tensor, combArg as Tensor);
  const { tokens, n, hidden: h } = g;
  const f = denseValues(layerOutArg as Tensor);
  const xs = denseValues(streamsArg as Tensor);
  const post = denseValues(postArg as Tensor);
  const comb = denseValues(combArg as Tensor);
  const out = new Float64Array(tokens * n * h);
  for (let t = 0; t < tokens; t++) {
    for (let k = 0; k < n; k++) {
      const ob = (t * n + k) * h;
      const pk = post[t * n + k]!;
      for (let o = 0; o < h; o++) out[ob + o] = pk * f[t * h + o]!;
      // (comb^T x)[k] = sum_j comb[j, k] x[j]
      for (let j = 0; j < n; j++) {
        const cjk = comb[(t * n + j) * n + k]!;
        const sb = (t * n + j) * h;
        for (let o = 0; o < h; o++) out[ob + o]! += cjk * xs[sb + o]!;
      }
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});

registerCpu(mhcHeadCollapse.name, (ctx, streamsArg, phiArg, alphaArg, biasArg, rmsEps, eps) => {
  const streams = streamsArg as Tensor;
  const { tokens, n, hidden: h } = mhcGeometry(streams);
  const nh = n * h;
  const xs = denseValues(streams);
  const phi = denseValues(phiArg as Tensor);
  const alpha = denseValues(alphaArg as Tensor);
  const bias = denseValues(biasArg as Tensor);
  const out = new Float64Array(tokens * h);
  const m = new Float64Array(n);
  for (let t = 0; t < tokens; t++) {
    mixLogits(xs, t * nh, nh, phi, n, rmsEps as number, m);
    for (let i = 0; i < n; i++) {
      const w = sigmoid(alpha[0]! * m[i]! + bias[i]!) + (eps as number);
      const sb = t * nh + i * h;
      for (let o = 0; o < h; o++) out[t * h + o]! += w * xs[sb + o]!;
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});
