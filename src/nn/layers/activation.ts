/** Activation and dropout modules (torch.nn.ReLU, GELU, SiLU, Tanh, Sigmoid, Dropout, Identity). */
import { dropout } from '../../api/nn.js';
import { gelu, relu, sigmoid, silu, tanh } from '../../api/pointwise.js';
import type { GeluApproximate } from '../../ops/defs/pointwise.js';
import type { Generator } from '../../tensor/random.js';
import type { Tensor } from '../../tensor/tensor.js';
import { Module } from '../module.js';

export class ReLU extends Module {
  forward(x: Tensor): Tensor {
    return relu(x);
  }
}

/** GELU; approximate 'tanh' uses the tanh approximation, 'none' the exact erf form. */
export class GELU extends Module {
  constructor(readonly approximate: GeluApproximate = 'none') {
    super();
    if (approximate !== 'none' && approximate !== 'tanh') throw new Error(`GELU: approximate must be 'none' or 'tanh', got '${String(approximate)}'`);
  }

  forward(x: Tensor): Tensor {
    return gelu(x, this.approximate);
  }
}

export class SiLU extends Module {
  forward(x: Tensor): Tensor {
    return silu(x);
  }
}

export class Tanh extends Module {
  forward(x: Tensor): Tensor {
    return tanh(x);
  }
}

export class Sigmoid extends Module {
  forward(x: Tensor): Tensor {
    return sigmoid(x);
  }
}

export class Identity extends Module {
  forward(x: Tensor): Tensor {
    return x;
  }
}

/**
 * Zeroes each element with probability p and scales the rest by 1/(1-p) while training; the
 * identity in eval mode. `generator` fixes the masks (the global generator by default).
 */
export class Dropout extends Module {
  constructor(
    readonly p = 0.5,
    readonly generator: Generator | null = null,
  ) {
    super();
    if (!(p >= 0 && p <= 1)) throw new Error(`Dropout: probability has to be between 0 and 1, but got ${p}`);
  }

  forward(x: Tensor): Tensor {
    if (!this.training || this.p === 0) return x;
    return dropout(x, this.p, true, this.generator);
  }
}
