/**
 * Public functions of the nn group (torch.nn.functional): conv2d, maxPool2d, maxPool2dWithIndices,
 * avgPool2d, scaledDotProductAttention and dropout. PyTorch has no Tensor methods for these.
 */
import { dispatch } from '../ops/dispatch.js';
import * as nn from '../ops/defs/nn.js';
import { conv2dBatchNorm as convBnOp } from '../ops/defs/conv-fused.js';
import type { Generator } from '../tensor/random.js';
import { Tensor } from '../tensor/tensor.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';

export type IntPair = number | readonly number[];
export type ConvPadding = IntPair | 'same' | 'valid';

function pair(v: IntPair): number[] {
  return typeof v === 'number' ? [v, v] : [...v];
}

/**
 * torch.nn.functional.conv2d. `padding` is a number, [ph, pw], 'valid' (no padding) or 'same'
 * (stride 1 only; an odd total padding puts the extra row/column at the bottom/right, as torch).
 */
export function conv2d(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null = null,
  stride: IntPair = 1,
  padding: ConvPadding = 0,
  dilation: IntPair = 1,
  groups = 1,
): Tensor {
  const st = pair(stride);
  const dil = pair(dilation);
  let pad: number[];
  if (padding === 'valid') pad = [0, 0];
  else if (padding === 'same') pad = nn.samePadding('conv2d', weight.shape, st, dil);
  else if (typeof padding === 'string') throw new TypeError(`conv2d: invalid padding string '${String(padding)}', should be one of 'valid' or 'same'`);
  else pad = pair(padding);
  return dispatch(nn.conv2d, input, weight, bias, st, pad, dil, groups);
}

/** Eval-mode BatchNorm statistics and affine parameters for conv2dBatchNorm. */
export interface BatchNormStats {
  runningMean: Tensor;
  runningVar: Tensor;
  weight?: Tensor | null;
  bias?: Tensor | null;
  eps?: number;
}

/**
 * conv2d -> batchNorm (eval, running statistics) -> optional ReLU as one op: what kiln.compile
 * turns that chain into for inference, so backends run the normalisation and the ReLU in the
 * convolution's epilogue. Same arguments as conv2d (padding as numbers), plus the BatchNorm tensors.
 */
export function conv2dBatchNorm(
  input: Tensor,
  weight: Tensor,
  bias: Tensor | null,
  bn: BatchNormStats,
  options: { stride?: IntPair; padding?: IntPair; dilation?: IntPair; groups?: number; relu?: boolean } = {},
): Tensor {
  const { stride = 1, padding = 0, dilation = 1, groups = 1, relu = false } = options;
  return dispatch(convBnOp, input, weight, bias, pair(stride), pair(padding), pair(dilation), groups, bn.runningMean, bn.runningVar, bn.weight ?? null, bn.bias ?? null, bn.eps ?? 1e-5, relu);
}

/** torch.nn.functional.max_pool2d (values only). `stride` defaults to `kernelSize`. */
export function maxPool2d(input: Tensor, kernelSize: IntPair, stride: IntPair | null = null, padding: IntPair = 0, dilation: IntPair = 1, ceilMode = false): Tensor {
  const k = pair(kernelSize);
  return dispatch(nn.maxPool2d, input, k, stride === null ? k : pair(stride), pair(padding), pair(dilation), ceilMode);
}

/** torch.nn.functional.max_pool2d_with_indices: values and int64 flat (h * W + w) indices per plane. */
export function maxPool2dWithIndices(
  input: Tensor,
  kernelSize: IntPair,
  stride: IntPair | null = null,
  padding: IntPair = 0,
  dilation: IntPair = 1,
  ceilMode = false,
): { values: Tensor; indices: Tensor } {
  const k = pair(kernelSize);
  const [values, indices] = dispatch(nn.maxPool2dWithIndices, input, k, stride === null ? k : pair(stride), pair(padding), pair(dilation), ceilMode);
  return { values: values!, indices: indices! };
}

/** torch.nn.functional.avg_pool2d. `stride` defaults to `kernelSize`. */
export function avgPool2d(
  input: Tensor,
  kernelSize: IntPair,
  stride: IntPair | null = null,
  padding: IntPair = 0,
  ceilMode = false,
  countIncludePad = true,
  divisorOverride: number | null = null,
): Tensor {
  const k = pair(kernelSize);
  return dispatch(nn.avgPool2d, input, k, stride === null ? k : pair(stride), pair(padding), ceilMode, countIncludePad, divisorOverride);
}

export interface SdpaOptions {
  /** Bool (true = take part) or additive float, broadcastable to [..., L, S]. */
  attnMask?: Tensor | null;
  dropoutP?: number;
  isCausal?: boolean;
  /** Default 1 / sqrt(E). */
  scale?: number | null;
  /** Share key/value heads (dim -3) across groups of query heads. */
  enableGqa?: boolean;
  /** For the dropout mask. */
  generator?: Generator | null;
}

const SDPA_KEYS = keysOf<SdpaOptions>({ attnMask: true, dropoutP: true, isCausal: true, scale: true, enableGqa: true, generator: true });

/**
 * torch.nn.functional.scaled_dot_product_attention. query [..., L, E], key [..., S, E], value
 * [..., S, Ev]; attnMask is bool (true = take part) or additive float, broadcastable to [..., L, S].
 * Key/value heads (dim -3) that divide the query heads are shared by groups of query heads.
 * Takes PyTorch's positional arguments or, after value, one options object:
 * `scaledDotProductAttention(q, k, v, { isCausal: true, scale })`.
 */
export function scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, options: SdpaOptions): Tensor;
export function scaledDotProductAttention(
  query: Tensor,
  key: Tensor,
  value: Tensor,
  attnMask?: Tensor | null,
  dropoutP?: number,
  isCausal?: boolean,
  scale?: number | null,
  enableGqa?: boolean,
  generator?: Generator | null,
): Tensor;
export function scaledDotProductAttention(
  query: Tensor,
  key: Tensor,
  value: Tensor,
  attnMaskOrOptions: Tensor | SdpaOptions | null = null,
  dropoutP = 0,
  isCausal = false,
  scale: number | null = null,
  enableGqa = false,
  generator: Generator | null = null,
): Tensor {
  if (attnMaskOrOptions !== null && !(attnMaskOrOptions instanceof Tensor)) {
    if (typeof attnMaskOrOptions !== 'object') throw new TypeError(`scaledDotProductAttention: 'attnMask' must be a Tensor, null or an options object, got ${typeof attnMaskOrOptions}`);
    const o = attnMaskOrOptions;
    checkOptionKeys('scaledDotProductAttention', o, SDPA_KEYS);
    return dispatch(nn.scaledDotProductAttention, query, key, value, o.attnMask ?? null, o.dropoutP ?? 0, o.isCausal ?? false, o.scale ?? null, o.enableGqa ?? false, o.generator ?? null);
  }
  return dispatch(nn.scaledDotProductAttention, query, key, value, attnMaskOrOptions, dropoutP, isCausal, scale, enableGqa, generator);
}

/** torch.nn.functional.dropout; returns a new tensor (a copy when p = 0 or not training). */
export function dropout(input: Tensor, p = 0.5, training = true, generator: Generator | null = null): Tensor {
  return dispatch(nn.dropout, input, p, training, generator);
}
