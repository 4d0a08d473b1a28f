/**
 * Autograd: installs the recording hooks, registers the backward formulas, and adds the Tensor
 * methods `backward`, `detach`, `requiresGrad_`, `retainGrad` and the `isLeaf` getter.
 */
import { installMethods } from '../api/install.js';
import { isFloating } from '../tensor/dtype.js';
import { fmtShape } from '../tensor/layout.js';
import { Tensor } from '../tensor/tensor.js';
import { runBackward, type BackwardRunOptions } from './engine.js';
import { installAutograd, Node } from './graph.js';
import './formulas/index.js';

export { noGrad, enableGrad, noGradScope, isGradEnabled, setGradEnabled } from './grad-mode.js';
export { attachFunctionNode, defineBackward, hasBackward, type BackwardContext, type BackwardFormula, type BackwardOptions } from './graph.js';
export { inferenceMode, inferenceModeScope, isInferenceModeEnabled } from './inference-mode.js';
export { gradcheck, type GradcheckOptions } from './gradcheck.js';
export { sumToShape } from './utils.js';
export { checkpoint, type CheckpointOutput } from './checkpoint.js';

installAutograd();

/** Computes gradients of `tensors` (seeded with `gradTensors`, ones for scalars) into the leaves' .grad. */
export function backward(tensors: Tensor | readonly Tensor[], gradTensors?: Tensor | readonly (Tensor | null)[] | null, options: BackwardRunOptions = {}): void {
  const roots = tensors instanceof Tensor ? [tensors] : [...tensors];
  const seeds = gradTensors === undefined || gradTensors === null ? [] : gradTensors instanceof Tensor ? [gradTensors] : [...gradTensors];
  runBackward(roots, seeds, options);
}

function requiresGrad_(self: Tensor, on = true): Tensor {
  if (on && !isFloating(self.dtype)) {
    throw new Error(`requiresGrad_: only floating point tensors can require gradients, got ${self.dtype} ${fmtShape(self.shape)}`);
  }
  if (!on && self.gradFn !== null) throw new Error('requiresGrad_: cannot turn off requiresGrad on a non-leaf tensor; use detach()');
  self.requiresGrad = on;
  return self;
}

/** A tensor sharing storage with `self` but cut from the graph (torch.Tensor.detach). */
function detach(self: Tensor): Tensor {
  return new Tensor(self.storage, self.dtype, self.shape, self.strides, self.offset);
}

function retainGrad(self: Tensor): Tensor {
  if (!self.requiresGrad) throw new Error(`retainGrad: the tensor ${fmtShape(self.shape)} does not require grad`);
  const fn = self.gradFn;
  if (fn instanceof Node) fn.retained.set(Math.max(0, fn.outputs.indexOf(self)), self);
  return self;
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    /** Gradient of this tensor with respect to graph leaves, accumulated into their .grad. */
    backward(gradient?: Tensor | null, options?: BackwardRunOptions): void;
    detach(): Tensor;
    requiresGrad_(requiresGrad?: boolean): Tensor;
    retainGrad(): Tensor;
    readonly isLeaf: boolean;
  }
}

installMethods({
  backward: (self: Tensor, gradient?: Tensor | null, options?: BackwardRunOptions) => backward(self, gradient ?? null, options ?? {}),
  detach,
  requiresGrad_,
  retainGrad,
});
Object.defineProperty(Tensor.prototype, 'isLeaf', {
  get(this: Tensor) {
    return this.gradFn === null;
  },
});
