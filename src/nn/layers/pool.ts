/**
 * MaxPool2d and AvgPool2d (torch.nn): modules holding the pooling arguments and calling the
 * functional ops, so their forward, autograd and compile paths are the ops' own. Arguments are
 * normalised to pairs and checked here so that a bad kernel size fails at construction, naming the
 * module, rather than at the first forward.
 */
import { avgPool2d, maxPool2d, maxPool2dWithIndices, type IntPair } from '../../api/nn.js';
import { checkOptionKeys, keysOf } from '../../runtime/option-keys.js';
import type { Tensor } from '../../tensor/tensor.js';
import { Module } from '../module.js';

function pair(owner: string, name: string, v: IntPair, min: number): [number, number] {
  const p = typeof v === 'number' ? [v, v] : [...v];
  if (p.length !== 2 || !p.every((x) => Number.isInteger(x) && x >= min)) {
    throw new Error(`${owner}: '${name}' must be an integer >= ${min} or a pair of them, got ${JSON.stringify(v)}`);
  }
  return [p[0]!, p[1]!];
}

export interface MaxPool2dOptions {
  /** Default: kernelSize. */
  stride?: IntPair | null;
  padding?: IntPair;
  dilation?: IntPair;
  ceilMode?: boolean;
}

const MAX_KEYS = keysOf<MaxPool2dOptions>({ stride: true, padding: true, dilation: true, ceilMode: true });

/** Max over kh x kw windows of [N, C, H, W] (or [C, H, W]) input. */
export class MaxPool2d extends Module {
  readonly kernelSize: [number, number];
  readonly stride: [number, number];
  readonly padding: [number, number];
  readonly dilation: [number, number];
  readonly ceilMode: boolean;

  constructor(kernelSize: IntPair, options: MaxPool2dOptions = {}) {
    super();
    checkOptionKeys('nn.MaxPool2d', options, MAX_KEYS);
    this.kernelSize = pair('nn.MaxPool2d', 'kernelSize', kernelSize, 1);
    this.stride = options.stride == null ? this.kernelSize : pair('nn.MaxPool2d', 'stride', options.stride, 1);
    this.padding = pair('nn.MaxPool2d', 'padding', options.padding ?? 0, 0);
    this.dilation = pair('nn.MaxPool2d', 'dilation', options.dilation ?? 1, 1);
    this.ceilMode = options.ceilMode ?? false;
  }

  /**
   * The pooled values. torch's return_indices=True makes forward return a tuple; here the indices
   * come from forwardWithIndices instead, so forward keeps one type (and Sequential can chain it).
   */
  forward(x: Tensor): Tensor {
    return maxPool2d(x, this.kernelSize, this.stride, this.padding, this.dilation, this.ceilMode);
  }

  /** Values and int64 flat indices per plane, for MaxUnpool-style uses. */
  forwardWithIndices(x: Tensor): { values: Tensor; indices: Tensor } {
    return maxPool2dWithIndices(x, this.kernelSize, this.stride, this.padding, this.dilation, this.ceilMode);
  }
}

export interface AvgPool2dOptions {
  /** Default: kernelSize. */
  stride?: IntPair | null;
  padding?: IntPair;
  ceilMode?: boolean;
  /** Count the zero padding in the divisor (default true, as torch). */
  countIncludePad?: boolean;
  /** Divide every window by this instead. */
  divisorOverride?: number | null;
}

const AVG_KEYS = keysOf<AvgPool2dOptions>({ stride: true, padding: true, ceilMode: true, countIncludePad: true, divisorOverride: true });

/** Mean over kh x kw windows of [N, C, H, W] (or [C, H, W]) input. */
export class AvgPool2d extends Module {
  readonly kernelSize: [number, number];
  readonly stride: [number, number];
  readonly padding: [number, number];
  readonly ceilMode: boolean;
  readonly countIncludePad: boolean;
  readonly divisorOverride: number | null;

  constructor(kernelSize: IntPair, options: AvgPool2dOptions = {}) {
    super();
    checkOptionKeys('nn.AvgPool2d', options, AVG_KEYS);
    this.kernelSize = pair('nn.AvgPool2d', 'kernelSize', kernelSize, 1);
    this.stride = options.stride == null ? this.kernelSize : pair('nn.AvgPool2d', 'stride', options.stride, 1);
    this.padding = pair('nn.AvgPool2d', 'padding', options.padding ?? 0, 0);
    this.ceilMode = options.ceilMode ?? false;
    this.countIncludePad = options.countIncludePad ?? true;
    this.divisorOverride = options.divisorOverride ?? null;
    if (this.divisorOverride !== null && !(Number.isInteger(this.divisorOverride) && this.divisorOverride !== 0)) {
      throw new Error(`nn.AvgPool2d: divisorOverride must be a non-zero integer, got ${this.divisorOverride}`);
    }
  }

  forward(x: Tensor): Tensor {
    return avgPool2d(x, this.kernelSize, this.stride, this.padding, this.ceilMode, this.countIncludePad, this.divisorOverride);
  }
}
