/** LayerNorm, GroupNorm and BatchNorm1d/2d modules with PyTorch's defaults and state. */
import { add_ } from '../../api/core.js';
import { ones, zeros } from '../../api/creation.js';
import { batchNorm, groupNorm, layerNorm } from '../../api/linalg.js';
import { noGrad } from '../../autograd/index.js';
import { checkOptionKeys } from '../../runtime/option-keys.js';
import { fmtShape } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { Module, Parameter } from '../module.js';
import { LAYER_KEYS, type LayerOptions } from './basic.js';

/** Normalises over the trailing `normalizedShape` dims; weight ones, bias zeros. */
export class LayerNorm extends Module {
  weight: Parameter | null;
  bias: Parameter | null;
  readonly normalizedShape: number[];

  constructor(
    normalizedShape: number | readonly number[],
    readonly eps = 1e-5,
    elementwiseAffine = true,
    bias = true,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    this.normalizedShape = typeof normalizedShape === 'number' ? [normalizedShape] : [...normalizedShape];
    const o = { dtype: options.dtype, device: options.device };
    this.weight = elementwiseAffine ? new Parameter(ones(this.normalizedShape, o)) : null;
    this.bias = elementwiseAffine && bias ? new Parameter(zeros(this.normalizedShape, o)) : null;
  }

  forward(x: Tensor): Tensor {
    return layerNorm(x, this.normalizedShape, this.weight, this.bias, this.eps);
  }
}

/** Normalises (N, C, *) input over groups of C / numGroups channels; per-channel affine. */
export class GroupNorm extends Module {
  weight: Parameter | null;
  bias: Parameter | null;

  constructor(
    readonly numGroups: number,
    readonly numChannels: number,
    readonly eps = 1e-5,
    affine = true,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    if (numChannels % numGroups !== 0) throw new Error(`GroupNorm: numChannels (${numChannels}) must be divisible by numGroups (${numGroups})`);
    const o = { dtype: options.dtype, device: options.device };
    this.weight = affine ? new Parameter(ones([numChannels], o)) : null;
    this.bias = affine ? new Parameter(zeros([numChannels], o)) : null;
  }

  forward(x: Tensor): Tensor {
    return groupNorm(x, this.numGroups, this.weight, this.bias, this.eps);
  }
}

/**
 * Batch normalisation over the channel dim 1. Training: batch statistics, and (trackRunningStats)
 * runningMean/runningVar updated in place with `momentum` (unbiased variance), numBatchesTracked
 * incremented; momentum null means a cumulative average (1 / numBatchesTracked). Eval: the
 * running statistics (batch statistics when trackRunningStats is false).
 */
abstract class BatchNormBase extends Module {
  weight: Parameter | null;
  bias: Parameter | null;
  declare runningMean: Tensor | null;
  declare runningVar: Tensor | null;
  declare numBatchesTracked: Tensor | null;
  protected abstract readonly name: string;
  protected abstract readonly ranks: readonly number[];

  constructor(
    readonly numFeatures: number,
    readonly eps = 1e-5,
    readonly momentum: number | null = 0.1,
    readonly affine = true,
    readonly trackRunningStats = true,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    const o = { dtype: options.dtype, device: options.device };
    this.weight = affine ? new Parameter(ones([numFeatures], o)) : null;
    this.bias = affine ? new Parameter(zeros([numFeatures], o)) : null;
    if (trackRunningStats) {
      this.registerBuffer('runningMean', zeros([numFeatures], o));
      this.registerBuffer('runningVar', ones([numFeatures], o));
      this.registerBuffer('numBatchesTracked', zeros([], { dtype: 'int64', device: options.device }));
    } else {
      this.registerBuffer('runningMean', null);
      this.registerBuffer('runningVar', null);
      this.registerBuffer('numBatchesTracked', null);
    }
  }

  /** Running statistics back to mean 0, variance 1, count 0. */
  resetRunningStats(): void {
    noGrad(() => {
      this.runningMean?.zero_();
      this.runningVar?.fill_(1);
      this.numBatchesTracked?.zero_();
    });
  }

  forward(x: Tensor): Tensor {
    if (!this.ranks.includes(x.ndim)) {
      throw new Error(`${this.name}: expected ${this.ranks.map((r) => `${r}D`).join(' or ')} input, got ${x.ndim}D input ${fmtShape(x.shape)}`);
    }
    if (x.shape[1] !== this.numFeatures) {
      throw new Error(`${this.name}: expected input with ${this.numFeatures} channels in dim 1, got ${fmtShape(x.shape)}`);
    }
    let factor = this.momentum ?? 0;
    if (this.training && this.trackRunningStats && this.numBatchesTracked) {
      const nbt = this.numBatchesTracked;
      noGrad(() => add_(nbt, 1));
      if (this.momentum === null) factor = 1 / Number(nbt.item());
    }
    const useBatchStats = this.training || this.runningMean === null;
    // In training the running buffers are passed so the op updates them; in eval they normalise.
    const track = this.training ? this.trackRunningStats : true;
    return batchNorm(
      x,
      track ? this.runningMean : null,
      track ? this.runningVar : null,
      this.weight,
      this.bias,
      useBatchStats,
      factor,
      this.eps,
    );
  }
}

/** torch.nn.BatchNorm2d on (N, C, H, W) input. */
export class BatchNorm2d extends BatchNormBase {
  protected readonly name = 'BatchNorm2d';
  protected readonly ranks = [4] as const;
}

/** torch.nn.BatchNorm1d on (N, C) or (N, C, L) input. */
export class BatchNorm1d extends BatchNormBase {
  protected readonly name = 'BatchNorm1d';
  protected readonly ranks = [2, 3] as const;
}
