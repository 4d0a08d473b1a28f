/**
 * LLM library ops, part 2: mixture-of-experts routing and expert compute (vLLM semantics).
 *
 *   llm.topkSoftmax(logits [T, E], k, renormalize)                  -> weights f32 [T, k], ids i32 [T, k]
 *   (weights are float64 for float64 logits)
 *   llm.groupedTopk(logits [T, E], k, renormalize, groups, topkGroup, scoring, bias?, scale)
 *                                                                   -> weights f32 [T, k], ids i32 [T, k]
 *   llm.moeSum(x [T, k, H])                                         -> [T, H]
 *   llm.fusedMoe(x [T, H], w13 [E, 2I, H], w2 [E, H, I], weights [T, k], ids [T, k], activation) -> [T, H]
 *
 * Expert ids are data, so an id outside [0, E) is reported by the kernel, not the meta function.
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { checkTensor, describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { computeDtype, dense, floatTensor, intTensor, oneOf, positiveFloat, posInt, sameDevice, sameDtype } from './llm-common.js';

/** Weights are float32 (float64 for float64 logits, so gradients can be checked), ids int32. */
function routingOut(logits: TensorMeta, k: number): OutMeta[] {
  const t = logits.shape[0]!;
  return [dense([t, k], computeDtype(logits), logits.device), dense([t, k], 'int32', logits.device)];
}

function logits2d(op: string, logits: TensorMeta): number {
  floatTensor(op, 'gatingOutput', logits);
  if (logits.shape.length !== 2) throw new Error(`${op}: argument 'gatingOutput' must be 2-d [tokens, experts], got ${describe(logits)}`);
  return logits.shape[1]!;
}

export const topkSoftmax = defineOp({
  name: 'llm.topkSoftmax',
  args: [
    { name: 'gatingOutput', type: 'Tensor' },
    { name: 'topk', type: 'int' },
    { name: 'renormalize', type: 'bool' },
  ],
  outputs: [
    { name: 'weights', type: 'Tensor' },
    { name: 'ids', type: 'Tensor' },
  ],
  meta(gatingOutput: TensorMeta, topk: number, renormalize: boolean): OutMeta[] {
    const op = 'llm.topkSoftmax';
    const e = logits2d(op, gatingOutput);
    posInt(op, 'topk', topk);
    if (topk > e) throw new RangeError(`${op}: topk=${topk} exceeds the number of experts ${e} in 'gatingOutput' ${describe(gatingOutput)}`);
    if (typeof renormalize !== 'boolean') throw new TypeError(`${op}: argument 'renormalize' must be a boolean, got ${String(renormalize)}`);
    return routingOut(gatingOutput, topk);
  },
});

export const SCORING_FUNCS = ['softmax', 'sigmoid'] as const;
export type ScoringFunc = (typeof SCORING_FUNCS)[number];

export const groupedTopk = defineOp({
  name: 'llm.groupedTopk',
  args: [
    { name: 'gatingOutput', type: 'Tensor' },
    { name: 'topk', type: 'int' },
    { name: 'renormalize', type: 'bool' },
    { name: 'numExpertGroup', type: 'int' },
    { name: 'topkGroup', type: 'int' },
    { name: 'scoringFunc', type: 'str' },
    { name: 'eScoreCorrectionBias', type: 'Tensor?' },
    { name: 'routedScalingFactor', type: 'float' },
  ],
  outputs: [
    { name: 'weights', type: 'Tensor' },
    { name: 'ids', type: 'Tensor' },
  ],
  meta(
    gatingOutput: TensorMeta,
    topk: number,
    renormalize: boolean,
    numExpertGroup: number,
    topkGroup: number,
    scoringFunc: ScoringFunc,
    bias: TensorMeta | null,
    routedScalingFactor: number,
  ): OutMeta[] {
    const op = 'llm.groupedTopk';
    const e = logits2d(op, gatingOutput);
    posInt(op, 'topk', topk);
    posInt(op, 'numExpertGroup', numExpertGroup);
    posInt(op, 'topkGroup', topkGroup);
    oneOf(op, 'scoringFunc', scoringFunc, SCORING_FUNCS);
    if (typeof renormalize !== 'boolean') throw new TypeError(`${op}: argument 'renormalize' must be a boolean, got ${String(renormalize)}`);
    positiveFloat(op, 'routedScalingFactor', routedScalingFactor);
    if (e % numExpertGroup !== 0) throw new Error(`${op}: the ${e} experts of 'gatingOutput' ${describe(gatingOutput)} do not split into numExpertGroup=${numExpertGroup} equal groups`);
    if (topkGroup > numExpertGroup) throw new RangeError(`${op}: topkGroup=${topkGroup} exceeds numExpertGroup=${numExpertGroup}`);
    const perGroup = e / numExpertGroup;
    if (topk > topkGroup * perGroup) {
      throw new RangeError(`${op}: topk=${topk} exceeds the ${topkGroup * perGroup} experts in the topkGroup=${topkGroup} selected groups of ${perGroup}`);
    }
    if (bias !== null && bias !== undefined) {
      floatTensor(op, 'eScoreCorrectionBias', bias);
      if (bias.shape.length !== 1 || bias.shape[0] !== e) throw new Error(`${op}: argument 'eScoreCorrectionBias' must have shape [${e}] (one per expert), got ${describe(bias)}`);
      sameDevice(op, ['gatingOutput', gatingOutput], ['eScoreCorrectionBias', bias]);
      // Group scores are the sum of each group's two best biased scores (DeepSeek-V3).
      if (perGroup < 2) throw new Error(`${op}: with eScoreCorrectionBias each group needs at least 2 experts (group score = sum of the top 2), got ${perGroup}`);
    }
    return routingOut(gatingOutput, topk);
  },
});

export const moeSum = defineOp({
  name: 'llm.moeSum',
  args: [{ name: 'input', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(input: TensorMeta): OutMeta {
    floatTensor('llm.moeSum', 'input', input);
    if (input.shape.length !== 3) throw new Error(`llm.moeSum: argument 'input' must be 3-d [tokens, topk, hidden], got ${describe(input)}`);
    return dense([input.shape[0]!, input.shape[2]!], input.dtype, input.device);
  },
});

export const MOE_ACTIVATIONS = ['silu', 'gelu'] as const;
export type MoeActivation = (typeof MOE_ACTIVATIONS)[number];

/** Sizes of a fusedMoe call (validated). */
export interface MoeGeometry {
  tokens: number;
  hidden: number;
  experts: number;
  inter: number;
  topk: number;
}

export function moeGeometry(x: TensorMeta, w13: TensorMeta, w2: TensorMeta, weights: TensorMeta, ids: TensorMeta, activation: MoeActivation): MoeGeometry {
  const op = 'llm.fusedMoe';
  floatTensor(op, 'hidden', x);
  if (x.shape.length !== 2) throw new Error(`${op}: argument 'hidden' must be 2-d [tokens, hidden], got ${describe(x)}`);
  const [tokens, hidden] = x.shape as [number, number];
  floatTensor(op, 'w13', w13);
  if (w13.shape.length !== 3 || w13.shape[2] !== hidden || w13.shape[1]! % 2 !== 0) {
    throw new Error(`${op}: argument 'w13' must be [experts, 2 * intermediate, hidden=${hidden}] (gate rows, then up rows), got ${describe(w13)}`);
  }
  const [experts, twoI] = w13.shape as [number, number];
  const inter = twoI / 2;
  floatTensor(op, 'w2', w2);
  if (w2.shape.length !== 3 || w2.shape[0] !== experts || w2.shape[1] !== hidden || w2.shape[2] !== inter) {
    throw new Error(`${op}: argument 'w2' must be [experts=${experts}, hidden=${hidden}, intermediate=${inter}], got ${describe(w2)}`);
  }
  sameDtype(op, ['hidden', x], ['w13', w13]);
  sameDtype(op, ['hidden', x], ['w2', w2]);
  floatTensor(op, 'topkWeights', weights);
  checkTensor(op, 'topkIds', ids);
  intTensor(op, 'topkIds', ids);
  if (ids.shape.length !== 2 || ids.shape[0] !== tokens) throw new Error(`${op}: argument 'topkIds' must be [tokens=${tokens}, topk], got ${describe(ids)}`);
  const topk = ids.shape[1]!;
  if (weights.shape.length !== 2 || weights.shape[0] !== tokens || weights.shape[1] !== topk) {
    throw new Error(`${op}: argument 'topkWeights' must have the shape of 'topkIds' [${tokens}, ${topk}], got ${describe(weights)}`);
  }
  oneOf(op, 'activation', activation, MOE_ACTIVATIONS);
  for (const [n, t] of [['w13', w13], ['w2', w2], ['topkWeights', weights], ['topkIds', ids]] as const) sameDevice(op, ['hidden', x], [n, t]);
  return { tokens, hidden, experts, inter, topk };
}

export const fusedMoe = defineOp({
  name: 'llm.fusedMoe',
  args: [
    { name: 'hidden', type: 'Tensor' },
    { name: 'w13', type: 'Tensor' },
    { name: 'w2', type: 'Tensor' },
    { name: 'topkWeights', type: 'Tensor' },
    { name: 'topkIds', type: 'Tensor' },
    { name: 'activation', type: 'str' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(hidden: TensorMeta, w13: TensorMeta, w2: TensorMeta, topkWeights: TensorMeta, topkIds: TensorMeta, activation: MoeActivation): OutMeta {
    moeGeometry(hidden, w13, w2, topkWeights, topkIds, activation);
    return dense(hidden.shape, hidden.dtype, hidden.device);
  },
});
