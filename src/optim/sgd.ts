/** torch.optim.SGD with momentum, dampening, Nesterov, weight decay and maximize. */
import { add, clone } from '../api/core.js';
import { keep } from '../tensor/scope.js';
import { mul } from '../api/pointwise.js';
import { Tensor } from '../tensor/tensor.js';
import { Optimizer, type ParamGroup, type ParamsInput } from './optimizer.js';

export interface SGDOptions {
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

/**
 * Per parameter, as torch: g = grad (negated when maximize) + weightDecay * p; with momentum
 * buf = g on the first step, else momentum * buf + (1 - dampening) g; g = nesterov ? g + momentum * buf
 * : buf; then p -= lr * g.
 */
export class SGD extends Optimizer<SGDOptions> {
  constructor(params: ParamsInput<SGDOptions>, options: Partial<SGDOptions> = {}) {
    super(
      params,
      {
        lr: options.lr ?? 1e-3,
        momentum: options.momentum ?? 0,
        dampening: options.dampening ?? 0,
        weightDecay: options.weightDecay ?? 0,
        nesterov: options.nesterov ?? false,
        maximize: options.maximize ?? false,
      },
      'SGD',
    );
  }

  protected override validate(g: ParamGroup<SGDOptions>): void {
    super.validate(g);
    if (!(g.momentum >= 0)) throw new Error(`SGD: invalid momentum value: ${g.momentum}`);
    if (!(g.weightDecay >= 0)) throw new Error(`SGD: invalid weightDecay value: ${g.weightDecay}`);
    if (g.nesterov && (g.momentum <= 0 || g.dampening !== 0)) {
      throw new Error(`SGD: Nesterov momentum requires a momentum and zero dampening (momentum ${g.momentum}, dampening ${g.dampening})`);
    }
  }

  protected update(g: ParamGroup<SGDOptions>): void {
    for (const p of g.params) {
      if (p.grad === null) continue;
      let d: Tensor = g.maximize ? p.grad.neg() : p.grad;
      if (g.weightDecay !== 0) d = add(d, p, g.weightDecay);
      if (g.momentum !== 0) {
        const s = this.stateOf(p);
        let buf = s.momentumBuffer;
        if (!(buf instanceof Tensor)) {
          buf = keep(clone(d));
          s.momentumBuffer = buf;
        } else {
          buf.mul_(g.momentum).add_(d, 1 - g.dampening);
        }
        d = g.nesterov ? add(d, mul(buf, g.momentum)) : buf;
      }
      p.add_(d, -g.lr);
    }
  }
}
