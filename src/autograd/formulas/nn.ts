/**
 * Backward formulas for the nn group: conv2d (input, weight, bias), maxPool2d,
 * maxPool2dWithIndices, avgPool2d, scaledDotProductAttention (query, key, value and an additive
 * mask) and dropout.
 */
import * as nn from '../../ops/defs/nn.js';
import { add } from '../../api/core.js';
import { tensor } from '../../api/data.js';
import { arange, zeros } from '../../api/creation.js';
import { scatterAdd } from '../../api/indexing.js';
import { matmul } from '../../api/linalg.js';
import { maxPool2dWithIndices } from '../../api/nn.js';
import { ge, isnan, logicalAnd, logicalNot, mul, ne, sub, where } from '../../api/pointwise.js';
import { softmax, sum } from '../../api/reduction.js';
import { expand, reshape, transpose, unsqueeze } from '../../api/views.js';
import type { Generator } from '../../tensor/random.js';
import { Tensor } from '../../tensor/tensor.js';
import { addPostDispatchHook } from '../../ops/dispatch.js';
import { isGradEnabled, noGrad } from '../grad-mode.js';
import { defineBackward } from '../graph.js';
import { sumToShape } from '../utils.js';
import { avgPool2dInputGrad, conv2dInputGrad, conv2dWeightGrad } from './conv-grad.js';

/** Gives a computed input gradient the input's dtype and device. */
function likeInput(g: Tensor, input: Tensor): Tensor {
  return g.to({ dtype: input.dtype, device: input.device });
}

function batched4(t: Tensor, isBatched: boolean): Tensor {
  return isBatched ? t : unsqueeze(t, 0);
}

// ---------------------------------------------------------------------------------------------
// conv2d

/**
 * conv2d: input gradient as a transposed convolution, weight gradient as a convolution of the input
 * with the output gradient (conv-grad.ts: both are conv2d compositions, so kiln.compile traces
 * them), bias gradient the output gradient summed over batch and pixels. Any stride, 2- or 4-value
 * padding, dilation, groups, unbatched input and any input/weight layout.
 */
defineBackward(
  nn.conv2d,
  (ctx, [g]) => {
    const [input, weight, bias, stride, padding, dilation, groups] = ctx.args as [Tensor, Tensor, Tensor | null, number[], number[], number[], number];
    const isBatched = input.ndim === 4;
    const two = (v: readonly number[]): [number, number] => [v[0]!, v[v.length - 1]!];
    const geometry = { stride: two(stride), padding: nn.convPadding('conv2d backward', padding), dilation: two(dilation), groups };
    const g4 = batched4(g!, isBatched);
    const x4 = batched4(input, isBatched);
    let gInput: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const gi = conv2dInputGrad(g4, weight.dtype === g4.dtype ? weight : weight.to(g4.dtype), [x4.shape[2]!, x4.shape[3]!], geometry);
      gInput = likeInput(isBatched ? gi : reshape(gi, [...input.shape]), input);
    }
    const gWeight = ctx.needsInputGrad(1) ? conv2dWeightGrad(x4.dtype === g4.dtype ? x4 : x4.to(g4.dtype), g4, weight.shape, geometry).to(weight.dtype) : null;
    const gBias = bias !== null && ctx.needsInputGrad(2) ? sum(g!, isBatched ? [0, 2, 3] : [1, 2]) : null;
    return [gInput, gWeight, gBias];
  },
  { save: ['input', 'weight'] },
);

// ---------------------------------------------------------------------------------------------
// pooling

/**
 * Max pooling: the gradient of each output goes to the input element its window's maximum came
 * from (the int64 flat index h * W + w of the forward; overlapping windows accumulate).
 */
function maxPoolInputGrad(input: Tensor, g: Tensor, indices: Tensor): Tensor {
  const lead = input.shape.slice(0, input.ndim - 2);
  const plane = input.shape[input.ndim - 2]! * input.shape[input.ndim - 1]!;
  const flat = zeros([...lead, plane], { dtype: g.dtype, device: g.device });
  const gi = scatterAdd(flat, lead.length, reshape(indices, [...lead, -1]), reshape(g, [...lead, -1]));
  return likeInput(reshape(gi, [...input.shape]), input);
}

type PoolArgs = [Tensor, number[], number[], number[], number[], boolean];

// maxPool2d returns no indices: they are recomputed from the saved input.
defineBackward(
  nn.maxPool2d,
  (ctx, [g]) => {
    const [input, kernel, stride, padding, dilation, ceilMode] = ctx.args as PoolArgs;
    const { indices } = maxPool2dWithIndices(input, kernel, stride, padding, dilation, ceilMode);
    return [maxPoolInputGrad(input, g!, indices)];
  },
  { save: ['input'] },
);

defineBackward(
  nn.maxPool2dWithIndices,
  (ctx, [g]) => {
    const input = ctx.args[0] as Tensor;
    return [maxPoolInputGrad(input, g!, ctx.outputs[1]!)];
  },
  { saveOutputs: true },
);

defineBackward(nn.avgPool2d, (ctx, [g]) => {
  const [input, kernel, stride, padding, , countIncludePad, divisorOverride] = ctx.args as [Tensor, number[], number[], number[], boolean, boolean, number | null];
  const isBatched = input.ndim === 4;
  const in4 = isBatched ? input.shape : [1, ...input.shape];
  const pair = (v: readonly number[]): [number, number] => (v.length === 1 ? [v[0]!, v[0]!] : [v[0]!, v[1]!]);
  const k = pair(kernel);
  const gi = avgPool2dInputGrad(in4, batched4(g!, isBatched), {
    kernel: k,
    stride: stride.length === 0 ? k : pair(stride),
    padding: pair(padding),
    countIncludePad,
    divisorOverride: divisorOverride ?? null,
  });
  return [likeInput(isBatched ? gi : reshape(gi, [...input.shape]), input)];
});

// ---------------------------------------------------------------------------------------------
// scaled dot-product attention

function up(t: Tensor): Tensor {
  return t.dtype === 'float16' || t.dtype === 'bfloat16' ? t.to('float32') : t;
}

function mT(t: Tensor): Tensor {
  return transpose(t, -1, -2);
}

/** Heads (dim -3) of an operand of rank >= 3, else 1. */
function headsOf(t: Tensor): number {
  return t.ndim >= 3 ? t.shape[t.ndim - 3]! : 1;
}

/** Grouped-query: repeats each of an operand's hx heads hOut / hx times (repeat_interleave on dim -3). */
function expandHeads(t: Tensor, hOut: number): Tensor {
  const hx = headsOf(t);
  if (t.ndim < 3 || hx === hOut || hx === 1) return t;
  const rep = hOut / hx;
  const shape = [...t.shape];
  const u = unsqueeze(t, t.ndim - 2); // [..., hx, 1, S, E]
  const e = expand(u, [...shape.slice(0, -2), rep, ...shape.slice(-2)]);
  return reshape(e, [...shape.slice(0, -3), hx * rep, ...shape.slice(-2)]);
}

/** Reverses expandHeads and batch broadcasting: sums a full-batch gradient back to `t`'s shape. */
function reduceToOperand(grad: Tensor, t: Tensor, hOut: number): Tensor {
  const hx = headsOf(t);
  let gr = grad;
  if (t.ndim >= 3 && hx !== hOut && hx !== 1) {
    const shape = [...gr.shape];
    gr = sum(reshape(gr, [...shape.slice(0, -3), hx, hOut / hx, ...shape.slice(-2)]), gr.ndim - 2);
  }
  return sumToShape(gr, t.shape);
}

/**
 * Attention math, as torch's math path: S = q @ k^T * scale (+ additive mask, or -inf where a bool
 * mask / the causal triangle excludes a key), P = softmax(S), out = P @ v. Backward:
 * dv = P^T @ g, dP = g @ v^T, dS = P * (dP - rowsum(dP * P)), dq = dS @ k * scale,
 * dk = dS^T @ q * scale, dmask = dS; grouped key/value heads sum the gradients of their query heads.
 */
defineBackward(
  nn.scaledDotProductAttention,
  (ctx, [gOut]) => {
    const [query, key, value, mask, dropoutP, isCausal, scaleArg] = ctx.args as [
      Tensor,
      Tensor,
      Tensor,
      Tensor | null,
      number,
      boolean,
      number | null,
      boolean,
      Generator | null,
    ];
    if (dropoutP > 0) {
      throw new Error(
        `scaledDotProductAttention backward: dropoutP > 0 (got ${dropoutP}) is not implemented (the dropout mask of the forward is not kept); ` +
          'use dropoutP = 0 when gradients are needed',
      );
    }
    const hasHeads = query.ndim >= 3 || key.ndim >= 3 || value.ndim >= 3;
    const hq = headsOf(query);
    const hOut = !hasHeads ? 1 : hq !== 1 ? hq : Math.max(headsOf(key), headsOf(value));
    const e = query.shape[query.ndim - 1]!;
    const scale = scaleArg === null || scaleArg === undefined ? 1 / Math.sqrt(e) : Number(scaleArg);
    const q = up(query);
    const k = expandHeads(up(key), hOut);
    const v = expandHeads(up(value), hOut);
    const g = up(gOut!);
    let scores = mul(matmul(q, mT(k)), scale);
    const l = scores.shape[scores.ndim - 2]!;
    const s = scores.shape[scores.ndim - 1]!;
    if (isCausal) {
      // int32 positions: webgpu compares no int64 (WGSL has no 64-bit types).
      const rows = unsqueeze(arange(l, { device: query.device, dtype: 'int32' }), 1);
      const colsIdx = unsqueeze(arange(s, { device: query.device, dtype: 'int32' }), 0);
      scores = where(ge(rows, colsIdx), scores, -Infinity);
    } else if (mask) {
      scores = mask.dtype === 'bool' ? where(mask, scores, -Infinity) : add(scores, up(mask));
    }
    const p = softmax(scores, -1);
    const dP = matmul(g, mT(v));
    const dS = mul(p, sub(dP, sum(mul(dP, p), -1, true)));
    const gq = ctx.needsInputGrad(0) ? reduceToOperand(mul(matmul(dS, k), scale), query, hOut) : null;
    const gk = ctx.needsInputGrad(1) ? reduceToOperand(mul(matmul(mT(dS), q), scale), key, hOut) : null;
    const gv = ctx.needsInputGrad(2) ? reduceToOperand(matmul(mT(p), g), value, hOut) : null;
    const gm = mask !== null && mask.dtype !== 'bool' && ctx.needsInputGrad(3) ? sumToShape(dS, mask.shape) : null;
    return [gq, gk, gv, gm, null, null, null, null, null];
  },
  { save: ['query', 'key', 'value', 'attnMask'] },
);

// ---------------------------------------------------------------------------------------------
// dropout

/** 1/(1-p) as the forward kernel applies it: rounded to float16/bfloat16 for those, else to float32. */
function dropoutScale(dtype: Tensor['dtype'], p: number): number {
  const s = 1 / (1 - p);
  if (dtype === 'float16' || dtype === 'bfloat16') return tensor([s], { dtype }).item() as number;
  return Math.fround(s);
}

/**
 * dropout: out = input * mask * scale, so dinput = g * mask * scale. The op does not return its
 * mask and the generator has moved on by backward time, so the mask is recovered from the output
 * right after the forward (a post-dispatch hook, only when recording a graph through dropout) and
 * kept with the output tensor; the formula then reads neither the input nor the output, so either
 * may be modified in place afterwards (as in torch, which saves the mask).
 *
 * Where the input is nonzero and not NaN, an element was kept exactly when its output is nonzero
 * and not NaN (a dropped inf gives inf * 0 = NaN). Where the input is 0 (or NaN) kept and dropped
 * elements give the same output and the mask cannot be known; there the gradient factor is the
 * mask's expectation, (1 - p) * scale = 1 (unbiased; usually moot, as such zeros mostly come from
 * relu, whose gradient at 0 is 0). Exact values there would need the op to return its mask (as
 * torch's native_dropout). Eval mode or p = 0: identity; p = 1: zero gradient.
 */
function dropoutFactor(input: Tensor, out: Tensor, p: number): Tensor {
  const scale = dropoutScale(input.dtype, p);
  const known = logicalAnd(ne(input, 0), logicalNot(isnan(input)));
  const kept = logicalAnd(ne(out, 0), logicalNot(isnan(out)));
  return where(known, where(kept, scale, 0), 1).to(input.dtype);
}

const dropoutFactors = new WeakMap<Tensor, Tensor>();

addPostDispatchHook((op, args, result) => {
  if (op.name !== nn.dropout.name || !isGradEnabled() || Array.isArray(result)) return;
  const [input, p, training] = args as [Tensor, number, boolean];
  if (!input.requiresGrad || !training || !(p > 0 && p < 1)) return;
  dropoutFactors.set(result, noGrad(() => dropoutFactor(input, result, p)));
});

defineBackward(nn.dropout, (ctx, [g]) => {
  const [, p, training] = ctx.args as [Tensor, number, boolean];
  if (!training || p === 0) return [g];
  if (p === 1) return [mul(g!, 0)];
  const factor = dropoutFactors.get(ctx.outputs[0]!);
  if (!factor) throw new Error('dropout backward: the dropout mask of the forward was not recorded');
  return [mul(g!, factor)];
});
