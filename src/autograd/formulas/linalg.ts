/**
 * Backward formulas for the linalg group: matrix products (matmul in all its 1-d / n-d /
 * broadcast-batch forms, mm, bmm, dot, linear, addmm) and normalisation layers (layerNorm, rmsNorm,
 * groupNorm, batchNorm with weight and bias gradients; batchNorm in training mode differentiates
 * through the batch statistics, in eval mode it is an affine map of the input).
 *
 * Norm gradients of float16/bfloat16 inputs are computed in float32 (the engine casts them back).
 */
import * as L from '../../ops/defs/linalg.js';
import { bmm, matmul, mm } from '../../api/linalg.js';
import { add } from '../../api/core.js';
import { mul, rsqrt, square, sub } from '../../api/pointwise.js';
import { mean, sum } from '../../api/reduction.js';
import { reshape, transpose, unsqueeze } from '../../api/views.js';
import { zerosLike } from '../../api/creation.js';
import { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';
import { sumToShape } from '../utils.js';

/** float16/bfloat16 values are upcast to float32 for the arithmetic of a formula. */
function up(t: Tensor): Tensor {
  return t.dtype === 'float16' || t.dtype === 'bfloat16' ? t.to('float32') : t;
}

function mT(t: Tensor): Tensor {
  return transpose(t, -1, -2);
}

// ---------------------------------------------------------------------------------------------
// Matrix products

/**
 * matmul(a, b): 1-d operands are promoted to matrices (a: [k] -> [1, k], b: [k] -> [k, 1]) and the
 * gradient gets the removed dims back; then ga = g @ b^T and gb = a^T @ g, each summed over the
 * batch dims its operand was broadcast along (sumToShape), and reshaped to the operand's shape.
 */
defineBackward(
  L.matmul,
  (ctx, [g]) => {
    const [a, b] = ctx.args as [Tensor, Tensor];
    const a2 = a.ndim === 1 ? unsqueeze(a, 0) : a;
    const b2 = b.ndim === 1 ? unsqueeze(b, 1) : b;
    let g2 = g!;
    if (b.ndim === 1) g2 = unsqueeze(g2, g2.ndim);
    if (a.ndim === 1) g2 = unsqueeze(g2, g2.ndim - 1);
    const ga = ctx.needsInputGrad(0) ? reshape(sumToShape(matmul(g2, mT(b2)), a2.shape), [...a.shape]) : null;
    const gb = ctx.needsInputGrad(1) ? reshape(sumToShape(matmul(mT(a2), g2), b2.shape), [...b.shape]) : null;
    return [ga, gb];
  },
  { save: ['self', 'other'] },
);

defineBackward(
  L.mm,
  (ctx, [g]) => {
    const [a, b] = ctx.args as [Tensor, Tensor];
    return [ctx.needsInputGrad(0) ? mm(g!, mT(b)) : null, ctx.needsInputGrad(1) ? mm(mT(a), g!) : null];
  },
  { save: ['self', 'mat2'] },
);

defineBackward(
  L.bmm,
  (ctx, [g]) => {
    const [a, b] = ctx.args as [Tensor, Tensor];
    return [ctx.needsInputGrad(0) ? bmm(g!, mT(b)) : null, ctx.needsInputGrad(1) ? bmm(mT(a), g!) : null];
  },
  { save: ['self', 'mat2'] },
);

// dot(a, b) = sum(a * b): ga = g * b, gb = g * a (g is 0-d).
defineBackward(
  L.dot,
  (ctx, [g]) => {
    const [a, b] = ctx.args as [Tensor, Tensor];
    return [ctx.needsInputGrad(0) ? mul(b, g!) : null, ctx.needsInputGrad(1) ? mul(a, g!) : null];
  },
  { save: ['self', 'tensor'] },
);

/**
 * linear(x, W, b) = x @ W^T + b over any leading dims of x. W is [out, in] or [in] (then the
 * output has no feature dim). The weight gradient flattens the leading dims into one GEMM.
 */
defineBackward(
  L.linear,
  (ctx, [g]) => {
    const [input, weight, bias] = ctx.args as [Tensor, Tensor, Tensor | null];
    const inF = input.shape[input.ndim - 1]!;
    let gIn: Tensor | null = null;
    let gW: Tensor | null = null;
    if (weight.ndim === 2) {
      const outF = weight.shape[0]!;
      if (ctx.needsInputGrad(0)) gIn = matmul(g!, weight);
      if (ctx.needsInputGrad(1)) gW = mm(mT(reshape(g!, [-1, outF])), reshape(input, [-1, inF]));
    } else {
      if (ctx.needsInputGrad(0)) gIn = mul(unsqueeze(g!, g!.ndim), weight);
      if (ctx.needsInputGrad(1)) gW = matmul(reshape(g!, [-1]), reshape(input, [-1, inF]));
    }
    const gB = bias !== null && ctx.needsInputGrad(2) ? sumToShape(g!, bias.shape) : null;
    return [gIn, gW, gB];
  },
  { save: ['input', 'weight'] },
);

// addmm = beta * self + alpha * (mat1 @ mat2).
defineBackward(
  L.addmm,
  (ctx, [g]) => {
    const [self, m1, m2, betaArg, alphaArg] = ctx.args as [Tensor, Tensor, Tensor, number, number];
    const beta = Number(betaArg);
    const alpha = Number(alphaArg);
    const scaled = (t: Tensor, s: number): Tensor => (s === 1 ? t : mul(t, s));
    let gSelf: Tensor | null = null;
    if (ctx.needsInputGrad(0)) gSelf = beta === 0 ? zerosLike(self) : sumToShape(scaled(g!, beta), self.shape);
    return [
      gSelf,
      ctx.needsInputGrad(1) ? scaled(mm(g!, mT(m2)), alpha) : null,
      ctx.needsInputGrad(2) ? scaled(mm(mT(m1), g!), alpha) : null,
    ];
  },
  { save: ['mat1', 'mat2'] },
);

// ---------------------------------------------------------------------------------------------
// Normalisation

/**
 * The input gradient of y = (x - mean) * rstd (statistics over `dims`) given dxhat = dL/dy (times
 * the weight): rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
 */
function normInputGrad(dxhat: Tensor, xhat: Tensor, rstd: Tensor, dims: number[]): Tensor {
  const m1 = mean(dxhat, dims, true);
  const m2 = mean(mul(dxhat, xhat), dims, true);
  return mul(sub(sub(dxhat, m1), mul(xhat, m2)), rstd);
}

/** Normalised values and rstd of x over `dims` (biased variance). */
function normalise(x: Tensor, dims: number[], eps: number): { xhat: Tensor; rstd: Tensor } {
  const mu = mean(x, dims, true);
  const xc = sub(x, mu);
  const rstd = rsqrt(add(mean(square(xc), dims, true), eps));
  return { xhat: mul(xc, rstd), rstd };
}

function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);
}

defineBackward(
  L.layerNorm,
  (ctx, [gOut]) => {
    const [input, normalizedShape, weight, bias, eps] = ctx.args as [Tensor, number[], Tensor | null, Tensor | null, number];
    const g = up(gOut!);
    const lead = input.ndim - normalizedShape.length;
    const normDims = range(lead, input.ndim);
    const leadDims = range(0, lead);
    const needX = ctx.needsInputGrad(0) || (weight !== null && ctx.needsInputGrad(2));
    const { xhat, rstd } = needX ? normalise(up(input), normDims, Number(eps)) : { xhat: null, rstd: null };
    let gIn: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const dxhat = weight !== null ? mul(g, up(weight)) : g;
      gIn = normInputGrad(dxhat, xhat!, rstd!, normDims);
    }
    const reduceLead = (t: Tensor): Tensor => (leadDims.length > 0 ? sum(t, leadDims) : t);
    const gW = weight !== null && ctx.needsInputGrad(2) ? reduceLead(mul(g, xhat!)) : null;
    const gB = bias !== null && ctx.needsInputGrad(3) ? reduceLead(g) : null;
    return [gIn, null, gW, gB, null];
  },
  { save: ['input', 'weight'] },
);

/** rmsNorm: y = x * r * w, r = rsqrt(mean(x^2) + eps); dx = r * (dxhat - xhat * mean(dxhat * xhat)). */
defineBackward(
  L.rmsNorm,
  (ctx, [gOut]) => {
    const [input, normalizedShape, weight, epsArg] = ctx.args as [Tensor, number[], Tensor | null, number | null];
    const eps = epsArg === null || epsArg === undefined ? L.finfoEps(input.dtype) : Number(epsArg);
    const g = up(gOut!);
    const x = up(input);
    const lead = input.ndim - normalizedShape.length;
    const normDims = range(lead, input.ndim);
    const leadDims = range(0, lead);
    const r = rsqrt(add(mean(square(x), normDims, true), eps));
    const xhat = mul(x, r);
    let gIn: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const dxhat = weight !== null ? mul(g, up(weight)) : g;
      gIn = mul(sub(dxhat, mul(xhat, mean(mul(dxhat, xhat), normDims, true))), r);
    }
    const gW = weight !== null && ctx.needsInputGrad(2) ? (leadDims.length > 0 ? sum(mul(g, xhat), leadDims) : mul(g, xhat)) : null;
    return [gIn, null, gW, null];
  },
  { save: ['input', 'weight'] },
);

/** A per-channel [C] parameter shaped to broadcast against (N, C, *) input of rank `ndim`. */
function channelView(p: Tensor, ndim: number): Tensor {
  return reshape(p, [p.shape[0]!, ...new Array<number>(Math.max(0, ndim - 2)).fill(1)]);
}

/** Dims of (N, C, *) other than the channel dim. */
function nonChannelDims(ndim: number): number[] {
  return [0, ...range(2, ndim)];
}

defineBackward(
  L.groupNorm,
  (ctx, [gOut]) => {
    const [input, numGroups, weight, bias, eps] = ctx.args as [Tensor, number, Tensor | null, Tensor | null, number];
    const g = up(gOut!);
    const n = input.shape[0]!;
    const shape = [...input.shape];
    const needX = ctx.needsInputGrad(0) || (weight !== null && ctx.needsInputGrad(2));
    let xhat: Tensor | null = null;
    let rstd: Tensor | null = null;
    if (needX) {
      const grouped = reshape(up(input), [n, numGroups, -1]);
      const st = normalise(grouped, [2], Number(eps));
      xhat = st.xhat;
      rstd = st.rstd;
    }
    let gIn: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const dxhat = weight !== null ? mul(g, channelView(up(weight), input.ndim)) : g;
      gIn = reshape(normInputGrad(reshape(dxhat, [n, numGroups, -1]), xhat!, rstd!, [2]), shape);
    }
    const red = nonChannelDims(input.ndim);
    const gW = weight !== null && ctx.needsInputGrad(2) ? sum(mul(g, reshape(xhat!, shape)), red) : null;
    const gB = bias !== null && ctx.needsInputGrad(3) ? sum(g, red) : null;
    return [gIn, null, gW, gB, null];
  },
  { save: ['input', 'weight'] },
);

/**
 * batchNorm. Training: statistics over (N, *) per channel, differentiated through (like layerNorm
 * over those dims). Eval: y = (x - runningMean) * rsqrt(runningVar + eps) * w + b with the running
 * statistics as constants. The running statistics never receive a gradient (the op updates them in
 * place in training mode; ctx.args holds their values from before the op).
 */
defineBackward(
  L.batchNorm,
  (ctx, [gOut]) => {
    const [input, runningMean, runningVar, weight, bias, training, , eps] = ctx.args as [
      Tensor,
      Tensor | null,
      Tensor | null,
      Tensor | null,
      Tensor | null,
      boolean,
      number,
      number,
    ];
    const g = up(gOut!);
    const red = nonChannelDims(input.ndim);
    const needX = ctx.needsInputGrad(0) || (weight !== null && ctx.needsInputGrad(3));
    let xhat: Tensor | null = null;
    let rstd: Tensor | null = null;
    if (needX) {
      if (training) {
        const st = normalise(up(input), red, Number(eps));
        xhat = st.xhat;
        rstd = st.rstd;
      } else {
        rstd = channelView(rsqrt(add(up(runningVar!), Number(eps))), input.ndim);
        xhat = mul(sub(up(input), channelView(up(runningMean!), input.ndim)), rstd);
      }
    }
    let gIn: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const dxhat = weight !== null ? mul(g, channelView(up(weight), input.ndim)) : g;
      gIn = training ? normInputGrad(dxhat, xhat!, rstd!, red) : mul(dxhat, rstd!);
    }
    const gW = weight !== null && ctx.needsInputGrad(3) ? sum(mul(g, xhat!), red) : null;
    const gB = bias !== null && ctx.needsInputGrad(4) ? sum(g, red) : null;
    return [gIn, null, null, gW, gB, null, null, null];
  },
  { save: ['input', 'runningMean', 'runningVar', 'weight'] },
);
