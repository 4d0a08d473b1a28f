/** Backward formulas for the core ops (the pattern other groups follow). */
import * as core from '../../ops/defs/core.js';
import { mul } from '../../api/pointwise.js';
import { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';
import { sumToShape } from '../utils.js';

// add(self, other, alpha): d/dself = g, d/dother = alpha * g, each summed back over broadcast dims.
defineBackward(core.add, (ctx, [g]) => {
  const [self, other, alpha] = ctx.args as [Tensor, Tensor | number, number];
  return [
    ctx.needsInputGrad(0) ? sumToShape(g!, self.shape) : null,
    other instanceof Tensor && ctx.needsInputGrad(1) ? sumToShape(Number(alpha) === 1 ? g! : mul(g!, Number(alpha)), other.shape) : null,
  ];
});
defineBackward(core.add_, (ctx, [g]) => {
  const [self, other, alpha] = ctx.args as [Tensor, Tensor | number, number];
  return [
    ctx.needsInputGrad(0) ? sumToShape(g!, self.shape) : null,
    other instanceof Tensor && ctx.needsInputGrad(1) ? sumToShape(Number(alpha) === 1 ? g! : mul(g!, Number(alpha)), other.shape) : null,
  ];
});
// copy_ overwrites self: no gradient flows to self's old value; src receives g summed to its shape.
defineBackward(core.copy_, (ctx, [g]) => {
  const src = ctx.args[1];
  return [null, src instanceof Tensor && ctx.needsInputGrad(1) ? sumToShape(g!, src.shape) : null];
});
defineBackward(core.clone, (_ctx, [g]) => [g]);
defineBackward(core.contiguous, (_ctx, [g]) => [g]);
// Casts and device moves: the engine converts gradients back to the input's dtype and the
// formula moves them back to the input's device.
defineBackward(core.toDtype, (_ctx, [g]) => [g]);
defineBackward(core.toDevice, (ctx, [g]) => [g!.to((ctx.args[0] as Tensor).device)]);
