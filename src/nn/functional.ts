/**
 * `kiln.nn.functional` (torch.nn.functional): the functional ops under their camelCase names, and
 * the losses, written by composing differentiable ops (logSoftmax, gather, mul, sum, ...) so they
 * backpropagate through the ordinary backward formulas.
 */
import { add } from '../api/core.js';
import { autocastFloat32 as f32 } from '../api/autocast.js';
import { arange } from '../api/creation.js';
import { gather, indexSelect } from '../api/indexing.js';
import { abs, clamp, div, eq, exp, log, log1p, mul, ne, neg, pow, relu, softplus, sub, where } from '../api/pointwise.js';
import { logSoftmax, mean, sum } from '../api/reduction.js';
import { dispatchModeActive } from '../ops/dispatch.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape, shapeEquals } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';

export { linear, layerNorm, rmsNorm, groupNorm, batchNorm } from '../api/linalg.js';
export { conv2d, conv2dBatchNorm, type BatchNormStats, maxPool2d, maxPool2dWithIndices, avgPool2d, scaledDotProductAttention, type SdpaOptions, dropout, type ConvPadding, type IntPair } from '../api/nn.js';
export { embedding } from '../api/indexing.js';
export { pad, type PadMode } from '../api/pad.js';
export { interpolate, adaptiveAvgPool2d, type InterpolateOptions } from '../api/resample.js';
export { conv1d, convTranspose2d, type ConvTranspose2dOptions } from '../api/conv-extra.js';
export { relu, relu_, gelu, silu, sigmoid, tanh, softplus } from '../api/pointwise.js';
export { softmax, logSoftmax } from '../api/reduction.js';

export type Reduction = 'mean' | 'sum' | 'none';

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

function checkReduction(fn: string, reduction: string): void {
  if (reduction !== 'mean' && reduction !== 'sum' && reduction !== 'none') {
    throw new Error(`${fn}: reduction must be 'mean', 'sum' or 'none', got '${reduction}'`);
  }
}

/** 1 - t */
function oneMinus(t: Tensor): Tensor {
  return add(neg(t), 1);
}

function reduce(loss: Tensor, reduction: Reduction): Tensor {
  return reduction === 'none' ? loss : reduction === 'sum' ? sum(loss) : mean(loss);
}

function checkSameShape(fn: string, input: Tensor, target: Tensor): void {
  if (!shapeEquals(input.shape, target.shape)) {
    throw new Error(`${fn}: 'input' ${describe(input)} and 'target' ${describe(target)} must have the same shape`);
  }
  if (!isFloating(input.dtype)) throw new TypeError(`${fn}: 'input' must be a floating point tensor, got ${describe(input)}`);
}

/** log-sigmoid, computed stably as -softplus(-x). */
export function logsigmoid(x: Tensor): Tensor {
  return neg(softplus(neg(x)));
}

/** max(0, x) + negativeSlope * min(0, x). */
export function leakyRelu(x: Tensor, negativeSlope = 0.01): Tensor {
  return where(x.gt(0), x, mul(x, negativeSlope));
}

/** clamp(x, minVal, maxVal). */
export function hardtanh(x: Tensor, minVal = -1, maxVal = 1): Tensor {
  return clamp(x, minVal, maxVal);
}

/** One-hot encoding of integer class indices: an int64 tensor of shape [...tensor.shape, numClasses]. */
export function oneHot(tensor: Tensor, numClasses = -1): Tensor {
  if (isFloating(tensor.dtype) || tensor.dtype === 'bool') throw new TypeError(`oneHot: expected an integer tensor of class indices, got ${describe(tensor)}`);
  const values = tensor.toFlatArray();
  const hi = values.reduce((a, b) => Math.max(a, b), -1);
  const lo = values.reduce((a, b) => Math.min(a, b), 0);
  const c = numClasses < 0 ? hi + 1 : numClasses;
  if (lo < 0) throw new Error(`oneHot: class values must be non-negative, got ${lo}`);
  if (hi >= c) throw new Error(`oneHot: class value ${hi} is out of range for numClasses = ${c}`);
  return eq(tensor.unsqueeze(-1), arange(c, { dtype: 'int64', device: tensor.device })).to('int64');
}

/** x / max(||x||_p over dim, eps). */
export function normalize(x: Tensor, p = 2, dim = 1, eps = 1e-12): Tensor {
  const norm = pow(sum(pow(abs(x), p), dim, true), 1 / p);
  return div(x, clamp(norm, eps));
}

export interface ReductionOptions {
  reduction?: Reduction;
}

/** Mean squared error (input - target)^2; input and target must have the same shape. */
export function mseLoss(input: Tensor, target: Tensor, reduction: Reduction = 'mean'): Tensor {
  // Under autocast losses run in float32 (torch's autocast lists them so).
  input = f32(input);
  target = f32(target);
  checkReduction('mseLoss', reduction);
  checkSameShape('mseLoss', input, target);
  const d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

/** Mean absolute error |input - target|; input and target must have the same shape. */
export function l1Loss(input: Tensor, target: Tensor, reduction: Reduction = 'mean'): Tensor {
  input = f32(input);
  target = f32(target);
  checkReduction('l1Loss', reduction);
  checkSameShape('l1Loss', input, target);
  return reduce(abs(sub(input, target)), reduction);
}

/** Huber loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta). */
export function huberLoss(input: Tensor, target: Tensor, reduction: Reduction = 'mean', delta = 1): Tensor {
  input = f32(input);
  target = f32(target);
  checkReduction('huberLoss', reduction);
  checkSameShape('huberLoss', input, target);
  if (!(delta > 0)) throw new Error(`huberLoss: delta must be positive, got ${delta}`);
  const d = sub(input, target);
  const a = abs(d);
  return reduce(where(a.lt(delta), mul(mul(d, d), 0.5), mul(sub(a, 0.5 * delta), delta)), reduction);
}

export interface BceWithLogitsOptions extends ReductionOptions {
  /** Per-element rescaling, broadcastable to input. */
  weight?: Tensor | null;
  /** Weight of positive examples, broadcastable to input (per class along the last dim). */
  posWeight?: Tensor | null;
}

/**
 * Binary cross entropy on logits, in the stable form
 * (1 - t) x + (1 + (posWeight - 1) t) (log1p(exp(-|x|)) + max(-x, 0)).
 */
const BCE_LOGITS_KEYS = keysOf<BceWithLogitsOptions>({ reduction: true, weight: true, posWeight: true });
const BCE_KEYS = ['reduction', 'weight'] as const;
const NLL_KEYS = keysOf<NllOptions>({ reduction: true, weight: true, ignoreIndex: true });
const CROSS_ENTROPY_KEYS = keysOf<CrossEntropyOptions>({ reduction: true, weight: true, ignoreIndex: true, labelSmoothing: true });

export function binaryCrossEntropyWithLogits(input: Tensor, target: Tensor, options: BceWithLogitsOptions = {}): Tensor {
  input = f32(input);
  target = f32(target);
  checkOptionKeys('binaryCrossEntropyWithLogits', options, BCE_LOGITS_KEYS);
  const reduction = options.reduction ?? 'mean';
  checkReduction('binaryCrossEntropyWithLogits', reduction);
  checkSameShape('binaryCrossEntropyWithLogits', input, target);
  const softTerm = add(log1p(exp(neg(abs(input)))), relu(neg(input)));
  const pw = options.posWeight ?? null;
  const logWeight = pw ? add(mul(sub(pw, 1), target), 1) : null;
  let loss = add(mul(oneMinus(target), input), logWeight ? mul(logWeight, softTerm) : softTerm);
  if (options.weight) loss = mul(loss, options.weight);
  return reduce(loss, reduction);
}

/** Binary cross entropy on probabilities; the logs are clamped to >= -100 as in PyTorch. */
export function binaryCrossEntropy(input: Tensor, target: Tensor, options: { weight?: Tensor | null; reduction?: Reduction } = {}): Tensor {
  input = f32(input);
  target = f32(target);
  checkOptionKeys('binaryCrossEntropy', options, BCE_KEYS);
  const reduction = options.reduction ?? 'mean';
  checkReduction('binaryCrossEntropy', reduction);
  checkSameShape('binaryCrossEntropy', input, target);
  const lp = clamp(log(input), -100);
  const lq = clamp(log(oneMinus(input)), -100);
  let loss = neg(add(mul(target, lp), mul(oneMinus(target), lq)));
  if (options.weight) loss = mul(loss, options.weight);
  return reduce(loss, reduction);
}

export interface NllOptions extends ReductionOptions {
  /** Per-class weights [C]. */
  weight?: Tensor | null;
  /** Targets equal to this are skipped (no loss, not counted in the mean). Default -100. */
  ignoreIndex?: number;
}

export interface CrossEntropyOptions extends NllOptions {
  /** Mixes the target with the uniform distribution: (1 - s) one-hot + s / C. Default 0. */
  labelSmoothing?: number;
}

interface Prepared {
  /** [N, C, ...] */
  input: Tensor;
  /** [N, ...] int64, or probabilities [N, C, ...] */
  target: Tensor;
  probs: boolean;
  unbatched: boolean;
  c: number;
}

/** Validates (input, target) of nllLoss/crossEntropy and brings the unbatched form to a batch of 1. */
function prepare(fn: string, input: Tensor, target: Tensor, weight: Tensor | null, ignoreIndex: number): Prepared {
  if (!isFloating(input.dtype)) throw new TypeError(`${fn}: 'input' must be a floating point tensor, got ${describe(input)}`);
  if (input.ndim < 1) throw new Error(`${fn}: 'input' must have a class dim, got a 0-dim tensor`);
  const unbatched = input.ndim === 1;
  const x = unbatched ? input.unsqueeze(0) : input;
  const c = x.shape[1]!;
  if (weight && (weight.ndim !== 1 || weight.shape[0] !== c)) {
    throw new Error(`${fn}: 'weight' must be a 1-D tensor of ${c} class weights, got ${describe(weight)} for input ${describe(input)}`);
  }
  if (isFloating(target.dtype)) {
    if (!shapeEquals(target.shape, input.shape)) {
      throw new Error(`${fn}: probability 'target' ${describe(target)} must have the shape of 'input' ${describe(input)} (class indices must be an integer tensor)`);
    }
    return { input: x, target: unbatched ? target.unsqueeze(0) : target, probs: true, unbatched, c };
  }
  if (target.dtype !== 'int64' && target.dtype !== 'int32' && target.dtype !== 'uint8') {
    throw new TypeError(`${fn}: 'target' must hold integer class indices (int64), got ${describe(target)}`);
  }
  const expected = [x.shape[0]!, ...x.shape.slice(2)];
  const t = unbatched ? target.unsqueeze(0) : target;
  if (!shapeEquals(t.shape, expected)) {
    throw new Error(`${fn}: 'target' ${describe(target)} does not match 'input' ${describe(input)}: expected target shape ${fmtShape(unbatched ? [] : expected)}`);
  }
  // The friendly class-range check reads the targets on the host: done eagerly on cpu only. On an
  // accelerator it would synchronise every step, and under kiln.compile the targets have no data
  // (it was a graph break). There the gather of the picked log-probabilities (and indexSelect of
  // the class weights) checks every non-ignored index instead, on the device, as gather always does.
  if (t.device.type === 'cpu' && !dispatchModeActive()) {
    for (const v of t.toFlatArray()) {
      if (v !== ignoreIndex && (v < 0 || v >= c)) throw new Error(`${fn}: target class ${v} is out of bounds for ${c} classes (input ${describe(input)})`);
    }
  }
  return { input: x, target: t.dtype === 'int64' ? t : t.to('int64'), probs: false, unbatched, c };
}

/** Shape [1, C, 1, ...] to broadcast class weights against [N, C, ...]. */
function classView(w: Tensor, rank: number): Tensor {
  const shape = new Array<number>(rank).fill(1);
  shape[1] = w.shape[0]!;
  return w.reshape(shape);
}

/** Per-element NLL of log-probabilities logp [N, C, ...] and the per-element weights (0 where ignored). */
function nllTerms(logp: Tensor, target: Tensor, weight: Tensor | null, ignoreIndex: number): { loss: Tensor; w: Tensor; keep: Tensor } {
  const keepMask = ne(target, ignoreIndex);
  const safe = where(keepMask, target, 0);
  const keep = keepMask.to(logp.dtype);
  const picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  const w = weight ? mul(indexSelect(weight, 0, safe.flatten()).reshape(safe.shape).to(logp.dtype), keep) : keep;
  return { loss: neg(mul(picked, w)), w, keep };
}

function finish(loss: Tensor, reduction: Reduction, unbatched: boolean): Tensor {
  return reduction === 'none' && unbatched ? loss.squeeze(0) : loss;
}

/**
 * Negative log likelihood of log-probabilities input [N, C, ...] (or [C]) at integer targets
 * [N, ...] (or []). 'mean' divides by the summed weights of the non-ignored targets.
 */
export function nllLoss(input: Tensor, target: Tensor, options: NllOptions = {}): Tensor {
  input = f32(input);
  target = f32(target);
  checkOptionKeys('nllLoss', options, NLL_KEYS);
  const reduction = options.reduction ?? 'mean';
  const ignoreIndex = options.ignoreIndex ?? -100;
  checkReduction('nllLoss', reduction);
  const p = prepare('nllLoss', input, target, options.weight ?? null, ignoreIndex);
  if (p.probs) throw new TypeError(`nllLoss: 'target' must hold integer class indices, got ${describe(target)}`);
  const { loss, w } = nllTerms(p.input, p.target, options.weight ?? null, ignoreIndex);
  if (reduction === 'none') return finish(loss, reduction, p.unbatched);
  return reduction === 'sum' ? sum(loss) : div(sum(loss), sum(w));
}

/**
 * Cross entropy of logits input [N, C, ...] (or [C]) with integer class targets [N, ...] (or []),
 * or class probabilities of input's shape: logSoftmax over dim 1, then the NLL. With label
 * smoothing s the loss is (1 - s) nll + s / C * sum_c(-w_c logp_c), as torch computes it.
 */
export function crossEntropy(input: Tensor, target: Tensor, options: CrossEntropyOptions = {}): Tensor {
  input = f32(input);
  target = f32(target);
  checkOptionKeys('crossEntropy', options, CROSS_ENTROPY_KEYS);
  const reduction = options.reduction ?? 'mean';
  const ignoreIndex = options.ignoreIndex ?? -100;
  const s = options.labelSmoothing ?? 0;
  const weight = options.weight ?? null;
  checkReduction('crossEntropy', reduction);
  if (!(s >= 0 && s <= 1)) throw new Error(`crossEntropy: labelSmoothing must be between 0.0 and 1.0, got ${s}`);
  const p = prepare('crossEntropy', input, target, weight, ignoreIndex);
  const logp = logSoftmax(p.input, 1);
  const wv = weight ? classView(weight.to(logp.dtype), logp.ndim) : null;
  if (p.probs) {
    let t = p.target.to(logp.dtype);
    if (s > 0) t = add(mul(t, 1 - s), s / p.c);
    const prod = wv ? mul(mul(logp, t), wv) : mul(logp, t);
    const loss = neg(sum(prod, 1));
    if (reduction === 'none') return finish(loss, reduction, p.unbatched);
    return reduction === 'sum' ? sum(loss) : mean(loss);
  }
  const { loss: nll, w, keep } = nllTerms(logp, p.target, weight, ignoreIndex);
  if (s === 0) {
    if (reduction === 'none') return finish(nll, reduction, p.unbatched);
    return reduction === 'sum' ? sum(nll) : div(sum(nll), sum(w));
  }
  const smooth = mul(neg(sum(wv ? mul(logp, wv) : logp, 1)), keep);
  let a: Tensor;
  let b: Tensor;
  if (reduction === 'none') {
    a = nll;
    b = smooth;
  } else if (reduction === 'sum') {
    a = sum(nll);
    b = sum(smooth);
  } else {
    const denom = sum(w);
    a = div(sum(nll), denom);
    b = div(sum(smooth), denom);
  }
  return finish(add(mul(a, 1 - s), mul(b, s / p.c)), reduction, p.unbatched);
}
