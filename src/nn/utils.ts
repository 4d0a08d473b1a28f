/** torch.nn.utils: gradient clipping, in place on the parameters' .grad under noGrad. */
import { add } from '../api/core.js';
import { fullLike, zeros } from '../api/creation.js';
import { abs, clamp, div, isfinite, mul, mul_, pow, sqrt } from '../api/pointwise.js';
import { all, amax, sum } from '../api/reduction.js';
import { stack } from '../api/indexing.js';
import { noGrad } from '../autograd/index.js';
import { Tensor } from '../tensor/tensor.js';

function gradsOf(parameters: Iterable<Tensor> | Tensor): Tensor[] {
  const list = parameters instanceof Tensor ? [parameters] : [...parameters];
  return list.map((p) => p.grad).filter((g): g is Tensor => g !== null);
}

/**
 * Scales the gradients so that their joint normType-norm (over all of them, as if concatenated)
 * is at most maxNorm: each grad is multiplied by min(1, maxNorm / (total + 1e-6)). Returns the
 * total norm before clipping as a 0-dim float32 tensor. normType may be Infinity (max |g|).
 */
export function clipGradNorm_(parameters: Iterable<Tensor> | Tensor, maxNorm: number, normType = 2, errorIfNonfinite = false): Tensor {
  if (!(normType > 0)) throw new Error(`clipGradNorm_: normType must be positive (or Infinity), got ${normType}`);
  if (!(maxNorm >= 0)) throw new Error(`clipGradNorm_: maxNorm must be non-negative, got ${maxNorm}`);
  const grads = gradsOf(parameters);
  return noGrad(() => {
    if (grads.length === 0) return zeros([]);
    let total: Tensor;
    if (normType === Infinity) {
      total = amax(stack(grads.map((g) => amax(abs(g)).to('float32'))));
    } else if (normType === 2) {
      total = sqrt(sum(stack(grads.map((g) => sum(mul(g, g)).to('float32')))));
    } else {
      total = pow(sum(stack(grads.map((g) => sum(pow(abs(g), normType)).to('float32')))), 1 / normType);
    }
    if (errorIfNonfinite && !all(isfinite(total)).item()) {
      throw new Error(`clipGradNorm_: the total norm of order ${normType} for gradients from 'parameters' is non-finite (${String(total.item())}), so it cannot be clipped`);
    }
    const coef = clamp(div(fullLike(total, maxNorm), add(total, 1e-6)), null, 1);
    for (const g of grads) mul_(g, coef.to(g.dtype));
    return total;
  });
}

/** Clamps every gradient element into [-clipValue, clipValue], in place. */
export function clipGradValue_(parameters: Iterable<Tensor> | Tensor, clipValue: number): void {
  if (!(clipValue >= 0)) throw new Error(`clipGradValue_: clipValue must be non-negative, got ${clipValue}`);
  const grads = gradsOf(parameters);
  noGrad(() => {
    for (const g of grads) g.clamp_(-clipValue, clipValue);
  });
}
