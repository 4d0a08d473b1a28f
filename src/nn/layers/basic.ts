/** Linear, Embedding and RMSNorm modules with PyTorch's defaults and initialisation. */
import { empty, ones } from '../../api/creation.js';
import { embedding } from '../../api/indexing.js';
import { linear, rmsNorm } from '../../api/linalg.js';
import type { DeviceLike } from '../../runtime/device.js';
import { checkOptionKeys, keysOf } from '../../runtime/option-keys.js';
import type { DType } from '../../tensor/dtype.js';
import type { Generator } from '../../tensor/random.js';
import type { Tensor } from '../../tensor/tensor.js';
import { kaimingUniform_, normal_, uniform_, zeros_ } from '../init.js';
import { Module, Parameter } from '../module.js';

export interface LayerOptions {
  dtype?: DType;
  device?: DeviceLike;
  /** Generator for the initial weights (the global one by default). */
  generator?: Generator;
  /**
   * Draw the initial weights (default). `false` leaves them uninitialised (like torch's skip_init):
   * for modules whose weights are about to be loaded or drawn by a faster model-wide initialiser.
   */
  init?: boolean;
}

/** LayerOptions' keys: constructors reject others (a misspelt `dtpye` would build float32 weights). */
export const LAYER_KEYS = keysOf<LayerOptions>({ dtype: true, device: true, generator: true, init: true });

/** y = x W^T + b with W [outFeatures, inFeatures]; weights and bias U(-1/sqrt(in), 1/sqrt(in)). */
export class Linear extends Module {
  weight: Parameter;
  bias: Parameter | null;

  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    bias = true,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    const o = { dtype: options.dtype, device: options.device };
    const init = options.init ?? true;
    this.weight = new Parameter(empty([outFeatures, inFeatures], o));
    if (init) kaimingUniform_(this.weight, Math.sqrt(5), 'fanIn', 'leaky_relu', options.generator);
    this.bias = null;
    if (bias) {
      this.bias = new Parameter(empty([outFeatures], o));
      const bound = inFeatures > 0 ? 1 / Math.sqrt(inFeatures) : 0;
      if (init) uniform_(this.bias, -bound, bound, options.generator);
    }
  }

  forward(x: Tensor): Tensor {
    return linear(x, this.weight, this.bias);
  }
}

/** A lookup table [numEmbeddings, embeddingDim], N(0, 1) initialised; the paddingIdx row is zero. */
export class Embedding extends Module {
  weight: Parameter;

  constructor(
    readonly numEmbeddings: number,
    readonly embeddingDim: number,
    readonly paddingIdx: number | null = null,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    this.weight = new Parameter(empty([numEmbeddings, embeddingDim], { dtype: options.dtype, device: options.device }));
    if (options.init ?? true) {
      normal_(this.weight, 0, 1, options.generator);
      if (paddingIdx !== null) zeros_(this.weight.select(0, paddingIdx));
    }
  }

  forward(ids: Tensor): Tensor {
    return embedding(ids, this.weight, this.paddingIdx);
  }
}

/** Root-mean-square normalisation over the trailing `normalizedShape` dims, weight initialised to ones. */
export class RMSNorm extends Module {
  weight: Parameter | null;
  readonly normalizedShape: number[];

  constructor(
    normalizedShape: number | readonly number[],
    readonly eps: number | null = null,
    elementwiseAffine = true,
    options: LayerOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, LAYER_KEYS);
    this.normalizedShape = typeof normalizedShape === 'number' ? [normalizedShape] : [...normalizedShape];
    this.weight = elementwiseAffine ? new Parameter(ones(this.normalizedShape, { dtype: options.dtype, device: options.device })) : null;
  }

  forward(x: Tensor): Tensor {
    return rmsNorm(x, this.normalizedShape, this.weight, this.eps);
  }
}
