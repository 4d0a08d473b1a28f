/** torch.optim.Adam and AdamW (single-tensor form), with amsgrad and maximize. */
import { zerosLike } from '../api/creation.js';
import { keep } from '../tensor/scope.js';
import { add, copy_ } from '../api/core.js';
import { div, maximum, mul, sqrt } from '../api/pointwise.js';
import { Tensor } from '../tensor/tensor.js';
import { Optimizer, type ParamGroup, type ParamsInput } from './optimizer.js';

export interface AdamOptions {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

abstract class AdamBase extends Optimizer<AdamOptions> {
  protected abstract readonly decoupled: boolean;

  protected override validate(g: ParamGroup<AdamOptions>): void {
    super.validate(g);
    const [b1, b2] = g.betas;
    if (!(b1 >= 0 && b1 < 1)) throw new Error(`${this.name}: invalid beta parameter at index 0: ${b1}`);
    if (!(b2 >= 0 && b2 < 1)) throw new Error(`${this.name}: invalid beta parameter at index 1: ${b2}`);
    if (!(g.eps >= 0)) throw new Error(`${this.name}: invalid epsilon value: ${g.eps}`);
    if (!(g.weightDecay >= 0)) throw new Error(`${this.name}: invalid weightDecay value: ${g.weightDecay}`);
  }

  /**
   * step += 1; AdamW: p *= 1 - lr * wd (Adam: g += wd * p); m = b1 m + (1 - b1) g;
   * v = b2 v + (1 - b2) g^2; (amsgrad: vmax = max(vmax, v), used for v);
   * p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps).
   */
  protected update(g: ParamGroup<AdamOptions>): void {
    const [b1, b2] = g.betas;
    for (const p of g.params) {
      if (p.grad === null) continue;
      let grad: Tensor = g.maximize ? p.grad.neg() : p.grad;
      const s = this.stateOf(p);
      if (s.step === undefined) {
        s.step = 0;
        s.expAvg = keep(zerosLike(p));
        s.expAvgSq = keep(zerosLike(p));
        if (g.amsgrad) s.maxExpAvgSq = keep(zerosLike(p));
      }
      const step = (s.step as number) + 1;
      s.step = step;
      const m = s.expAvg as Tensor;
      const v = s.expAvgSq as Tensor;
      if (g.weightDecay !== 0) {
        if (this.decoupled) p.mul_(1 - g.lr * g.weightDecay);
        else grad = add(grad, p, g.weightDecay);
      }
      m.mul_(b1).add_(grad, 1 - b1);
      v.mul_(b2).add_(mul(grad, grad), 1 - b2);
      const bc1 = 1 - b1 ** step;
      const bc2Sqrt = Math.sqrt(1 - b2 ** step);
      let second = v;
      if (g.amsgrad) {
        let vmax = s.maxExpAvgSq;
        if (!(vmax instanceof Tensor)) {
          vmax = keep(zerosLike(p));
          s.maxExpAvgSq = vmax;
        }
        copy_(vmax, maximum(vmax, v));
        second = vmax;
      }
      const denom = add(div(sqrt(second), bc2Sqrt), g.eps);
      p.add_(div(m, denom), -g.lr / bc1);
    }
  }
}

function defaults(options: Partial<AdamOptions>, weightDecay: number): AdamOptions {
  return {
    lr: options.lr ?? 1e-3,
    betas: options.betas ?? [0.9, 0.999],
    eps: options.eps ?? 1e-8,
    weightDecay: options.weightDecay ?? weightDecay,
    amsgrad: options.amsgrad ?? false,
    maximize: options.maximize ?? false,
  };
}

/** torch.optim.Adam: L2 weight decay added to the gradient (default 0). */
export class Adam extends AdamBase {
  protected readonly decoupled = false;

  constructor(params: ParamsInput<AdamOptions>, options: Partial<AdamOptions> = {}) {
    super(params, defaults(options, 0), 'Adam');
  }
}

/** torch.optim.AdamW: decoupled weight decay p *= 1 - lr * weightDecay (default 1e-2). */
export class AdamW extends AdamBase {
  protected readonly decoupled = true;

  constructor(params: ParamsInput<AdamOptions>, options: Partial<AdamOptions> = {}) {
    super(params, defaults(options, 1e-2), 'AdamW');
  }
}
