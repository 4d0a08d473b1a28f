/**
 * Backward formulas for flip, roll and repeat. flip and roll are permutations of the elements, so
 * the gradient is permuted back (flip again; roll by the negated shifts). repeat copies each
 * element once per tile: the gradient, viewed as [r0, s0, r1, s1, ...], is summed over the
 * repeat dims.
 */
import * as S from '../../ops/defs/shape-extra.js';
import { sum } from '../../api/reduction.js';
import { reshape } from '../../api/views.js';
import { flip, roll } from '../../api/shape-extra.js';
import type { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';

defineBackward(S.flip, (ctx, [g]) => {
  const [, dims] = ctx.args as [Tensor, number[]];
  return [ctx.needsInputGrad(0) ? flip(g!, dims) : null];
});

defineBackward(S.roll, (ctx, [g]) => {
  const [, shifts, dims] = ctx.args as [Tensor, number[], number[] | null];
  return [ctx.needsInputGrad(0) ? roll(g!, shifts.map((s) => -s), dims) : null];
});

defineBackward(S.repeat, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, repeats] = ctx.args as [Tensor, number[]];
  const lead = repeats.length - self.ndim;
  const inShape = repeats.map((_, i) => (i < lead ? 1 : self.shape[i - lead]!));
  const split = repeats.flatMap((r, i) => [r, inShape[i]!]);
  const repeatDims = repeats.map((_, i) => 2 * i);
  const summed = repeats.length === 0 ? g! : sum(reshape(g!, split), repeatDims);
  return [reshape(summed, [...self.shape])];
});
