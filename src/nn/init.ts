/**
 * Initialisers (torch.nn.init), in place under noGrad, drawing from a seeded Generator (the global
 * one by default). PyTorch's defaults: Linear/Conv weights kaiming_uniform(a = sqrt(5)), which is
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for biases; Embedding N(0, 1).
 */
import { add, copy_ } from '../api/core.js';
import { rand, randn } from '../api/creation.js';
import { mul } from '../api/pointwise.js';
import { noGrad } from '../autograd/index.js';
import { fmtShape } from '../tensor/layout.js';
import type { Generator } from '../tensor/random.js';
import type { Tensor } from '../tensor/tensor.js';

/** fan_in and fan_out as torch computes them: dims 1 and 0 times the receptive field. */
export function calculateFanInAndFanOut(t: Tensor): { fanIn: number; fanOut: number } {
  if (t.ndim < 2) throw new Error(`calculateFanInAndFanOut: needs a tensor with at least 2 dims, got ${fmtShape(t.shape)}`);
  const receptive = t.shape.slice(2).reduce((a, b) => a * b, 1);
  return { fanIn: t.shape[1]! * receptive, fanOut: t.shape[0]! * receptive };
}

export function uniform_(t: Tensor, low = 0, high = 1, generator?: Generator): Tensor {
  return noGrad(() => {
    const u = rand(t.shape, { dtype: t.dtype, device: t.device, generator });
    return copy_(t, add(mul(u, high - low), low));
  });
}

export function normal_(t: Tensor, mean = 0, std = 1, generator?: Generator): Tensor {
  return noGrad(() => {
    const z = randn(t.shape, { dtype: t.dtype, device: t.device, generator });
    return copy_(t, add(mul(z, std), mean));
  });
}

export function constant_(t: Tensor, value: number): Tensor {
  return noGrad(() => copy_(t, value));
}

export function zeros_(t: Tensor): Tensor {
  return constant_(t, 0);
}

export function ones_(t: Tensor): Tensor {
  return constant_(t, 1);
}

/** torch's gain for a nonlinearity (used by kaiming and xavier). */
export function calculateGain(nonlinearity: 'linear' | 'relu' | 'tanh' | 'sigmoid' | 'leaky_relu', param?: number): number {
  switch (nonlinearity) {
    case 'linear':
    case 'sigmoid':
      return 1;
    case 'tanh':
      return 5 / 3;
    case 'relu':
      return Math.SQRT2;
    case 'leaky_relu': {
      const slope = param ?? 0.01;
      return Math.sqrt(2 / (1 + slope * slope));
    }
    default:
      return nonlinearity satisfies never;
  }
}

export function kaimingUniform_(t: Tensor, a = 0, mode: 'fanIn' | 'fanOut' = 'fanIn', nonlinearity: 'relu' | 'leaky_relu' = 'leaky_relu', generator?: Generator): Tensor {
  const { fanIn, fanOut } = calculateFanInAndFanOut(t);
  const fan = mode === 'fanIn' ? fanIn : fanOut;
  const bound = fan === 0 ? 0 : (calculateGain(nonlinearity, a) * Math.sqrt(3)) / Math.sqrt(fan);
  return uniform_(t, -bound, bound, generator);
}

export function xavierUniform_(t: Tensor, gain = 1, generator?: Generator): Tensor {
  const { fanIn, fanOut } = calculateFanInAndFanOut(t);
  const bound = gain * Math.sqrt(6 / (fanIn + fanOut));
  return uniform_(t, -bound, bound, generator);
}
