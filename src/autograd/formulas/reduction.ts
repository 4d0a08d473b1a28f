/**
 * Backward formulas for the reduction group: reductions, softmax/logSoftmax, scans and sorting.
 *
 * Conventions follow PyTorch (tools/autograd/derivatives.yaml and FunctionsManual.cpp):
 * - amax/amin and the full max()/min() split the gradient evenly among tied extrema;
 *   max(dim)/min(dim) send it to the returned index only.
 * - prod uses exclusive prefix/suffix products (no division by the input), so inputs with zeros
 *   get exact gradients.
 * - cumprod is exact with zeros: before the first zero of a slice it divides by the (nonzero)
 *   input, at the first zero it uses the product of the others, after it the gradient is 0 —
 *   PyTorch's cumprod_backward scheme.
 * - std's gradient is 0 where std is 0 (PyTorch masks the division by zero).
 * - any/all/argmax/argmin/argsort have integer or bool outputs and need no formula.
 */
import * as red from '../../ops/defs/reduction.js';
import { reductionDims } from '../../ops/defs/reduction.js';
import { arange, ones, zeros } from '../../api/creation.js';
import { indexSelect, scatter, cat } from '../../api/indexing.js';
import { div, eq, exp, isnan, mul, sub, where } from '../../api/pointwise.js';
import { cumprod, cumsum, sum } from '../../api/reduction.js';
import { expand, narrow, permute, reshape } from '../../api/views.js';
import { normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';

type DimArg = number | readonly number[] | null;

/** The keepdim shape of a reduction of `shape` over `dims`. */
function keptShape(shape: readonly number[], dims: readonly number[]): number[] {
  return shape.map((s, i) => (dims.includes(i) ? 1 : s));
}

/** `t` (a reduction's output, or its gradient) reshaped to the keepdim shape. */
function keep(t: Tensor, inShape: readonly number[], dims: readonly number[]): Tensor {
  return reshape(t, keptShape(inShape, dims));
}

/** `t` restored to the input's shape: keepdim shape, then broadcast over the reduced dims. */
function restore(t: Tensor, inShape: readonly number[], dims: readonly number[]): Tensor {
  return expand(keep(t, inShape, dims), [...inShape]);
}

function numelOf(shape: readonly number[], dims: readonly number[]): number {
  return dims.reduce((n, d) => n * shape[d]!, 1);
}

/** Reverses `t` along dim `d` (an index_select with descending positions). */
function flip(t: Tensor, d: number): Tensor {
  const n = t.shape[d]!;
  if (n <= 1) return t;
  return indexSelect(t, d, arange(n - 1, -1, -1, { device: t.device }));
}

/** sum_{j >= i} t_j along dim `d`. */
function reverseCumsum(t: Tensor, d: number): Tensor {
  return flip(cumsum(flip(t, d), d), d);
}

defineBackward(red.sum, (ctx, [g]) => {
  const [self, dim] = ctx.args as [Tensor, DimArg];
  if (!ctx.needsInputGrad(0)) return [null];
  return [restore(g!, self.shape, reductionDims('sum', self, dim))];
});

defineBackward(red.mean, (ctx, [g]) => {
  const [self, dim] = ctx.args as [Tensor, DimArg];
  if (!ctx.needsInputGrad(0)) return [null];
  const dims = reductionDims('mean', self, dim);
  return [div(restore(g!, self.shape, dims), numelOf(self.shape, dims))];
});

/**
 * prod: d out / d x_i = product of the other elements of the reduced group, computed as exclusive
 * prefix products times exclusive suffix products over the flattened reduced dims.
 */
defineBackward(
  red.prod,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, DimArg];
    if (!ctx.needsInputGrad(0)) return [null];
    const dims = reductionDims('prod', self, dim);
    if (self.ndim === 0) return [reshape(g!, [])];
    const kept = self.shape.map((_, i) => i).filter((i) => !dims.includes(i));
    const perm = [...kept, ...dims];
    const m = numelOf(self.shape, kept);
    const k = numelOf(self.shape, dims);
    if (m * k === 0) return [zeros([...self.shape], { dtype: self.dtype, device: self.device })];
    const x = reshape(permute(self, perm), [m, k]);
    const one = ones([m, 1], { dtype: x.dtype, device: x.device });
    const exclusive = (t: Tensor): Tensor => cat([one, narrow(cumprod(t, 1), 1, 0, k - 1)], 1);
    const others = mul(exclusive(x), flip(exclusive(flip(x, 1)), 1));
    const gx = mul(others, reshape(g!, [m, 1]));
    const inv = new Array<number>(perm.length);
    perm.forEach((p, i) => (inv[p] = i));
    return [permute(reshape(gx, perm.map((p) => self.shape[p]!)), inv)];
  },
  { save: ['self'] },
);

/** Gradient split evenly among the elements equal to the (restored) result. */
function evenlyDistributed(self: Tensor, out: Tensor, g: Tensor, dims: readonly number[]): Tensor {
  const o = restore(out, self.shape, dims);
  const mask = eq(self, o);
  const count = sum(mask, dims, true);
  return where(mask, div(restore(g, self.shape, dims), count), 0);
}

for (const op of [red.amax, red.amin]) {
  defineBackward(
    op,
    (ctx, [g]) => {
      const [self, dim] = ctx.args as [Tensor, DimArg];
      if (!ctx.needsInputGrad(0)) return [null];
      return [evenlyDistributed(self, ctx.outputs[0]!, g!, reductionDims(op.name, self, dim))];
    },
    { save: ['self'], saveOutputs: true },
  );
}

// Full max()/min(): ties share the gradient evenly (PyTorch's evenly_distribute_backward); a NaN
// result sends it to the NaN elements.
for (const op of [red.max, red.min]) {
  defineBackward(
    op,
    (ctx, [g]) => {
      const [self] = ctx.args as [Tensor];
      if (!ctx.needsInputGrad(0)) return [null];
      const out = ctx.outputs[0]!;
      const dims = self.shape.map((_, i) => i);
      if (!Number.isNaN(out.item() as number)) return [evenlyDistributed(self, out, g!, dims)];
      const mask = isnan(self);
      return [where(mask, div(restore(g!, self.shape, dims), sum(mask)), 0)];
    },
    { save: ['self'], saveOutputs: true },
  );
}

/** Scatters `g` (a reduction output's gradient) into zeros of `self`'s shape at `indices` along `dim`. */
function valueSelectingBackward(self: Tensor, g: Tensor, indices: Tensor, dim: number, keepdim: boolean): Tensor {
  if (self.ndim === 0) return reshape(g, []);
  const d = normalizeDim('backward', dim, self.ndim);
  const shape = keepdim ? [...g.shape] : keptShape(self.shape, [d]);
  const z = zeros([...self.shape], { dtype: g.dtype, device: g.device });
  return scatter(z, d, reshape(indices, shape), reshape(g, shape));
}

// max(dim)/min(dim): the gradient goes to the returned index (which one of tied maxima PyTorch
// returns is the kernel's choice; the gradient follows it).
for (const op of [red.maxDim, red.minDim]) {
  defineBackward(
    op,
    (ctx, [g]) => {
      const [self, dim, keepdim] = ctx.args as [Tensor, number, boolean];
      if (!ctx.needsInputGrad(0)) return [null];
      return [valueSelectingBackward(self, g!, ctx.outputs[1]!, dim, keepdim)];
    },
    { saveOutputs: true },
  );
}

/** d var / dx = 2 (x - mean) / (N - correction). */
function varBackward(self: Tensor, g: Tensor, dims: readonly number[], correction: number): Tensor {
  const n = numelOf(self.shape, dims);
  const centered = sub(self, div(restore(sum(self, dims, true), self.shape, dims), n));
  return mul(restore(g, self.shape, dims), mul(centered, 2 / Math.max(0, n - correction)));
}

defineBackward(
  red.var_,
  (ctx, [g]) => {
    const [self, dim, correction] = ctx.args as [Tensor, DimArg, number];
    if (!ctx.needsInputGrad(0)) return [null];
    return [varBackward(self, g!, reductionDims('var', self, dim), correction)];
  },
  { save: ['self'] },
);

// std = sqrt(var): d std = d var / (2 std); 0 where std is 0, as PyTorch's std_backward.
defineBackward(
  red.std,
  (ctx, [g]) => {
    const [self, dim, correction] = ctx.args as [Tensor, DimArg, number];
    if (!ctx.needsInputGrad(0)) return [null];
    const out = ctx.outputs[0]!;
    const gVar = where(eq(out, 0), 0, div(g!, mul(out, 2)));
    return [varBackward(self, gVar, reductionDims('std', self, dim), correction)];
  },
  { save: ['self'], saveOutputs: true },
);

// logsumexp: g * exp(x - out).
defineBackward(
  red.logsumexp,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, DimArg];
    if (!ctx.needsInputGrad(0)) return [null];
    const dims = reductionDims('logsumexp', self, dim);
    return [mul(restore(g!, self.shape, dims), exp(sub(self, restore(ctx.outputs[0]!, self.shape, dims))))];
  },
  { save: ['self'], saveOutputs: true },
);

// softmax: y * (g - sum(g * y)); logSoftmax: g - exp(y) * sum(g). Both read only the output.
defineBackward(
  red.softmax,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, number];
    if (!ctx.needsInputGrad(0)) return [null];
    const y = ctx.outputs[0]!;
    if (self.ndim === 0) return [mul(g!, 0)];
    const gy = mul(g!, y);
    return [sub(gy, mul(y, sum(gy, dim, true)))];
  },
  { saveOutputs: true },
);

defineBackward(
  red.logSoftmax,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, number];
    if (!ctx.needsInputGrad(0)) return [null];
    const y = ctx.outputs[0]!;
    if (self.ndim === 0) return [mul(g!, 0)];
    return [sub(g!, mul(exp(y), sum(g!, dim, true)))];
  },
  { saveOutputs: true },
);

defineBackward(red.cumsum, (ctx, [g]) => {
  const [self, dim] = ctx.args as [Tensor, number];
  if (!ctx.needsInputGrad(0)) return [null];
  if (self.ndim === 0) return [g];
  return [reverseCumsum(g!, normalizeDim('cumsum', dim, self.ndim))];
});

/**
 * cumprod: grad_i = sum_{j >= i} g_j * prod_{k <= j, k != i} x_k. Per slice along `dim`, with z
 * the first zero: for i < z it is reverseCumsum(g * out)_i / x_i (x_i is nonzero there); at i = z
 * it is reverseCumsum(g * cumprod(x with x_z := 1))_z; for i > z every term holds x_z = 0.
 */
defineBackward(
  red.cumprod,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, number];
    if (!ctx.needsInputGrad(0)) return [null];
    if (self.ndim === 0) return [g];
    const d = normalizeDim('cumprod', dim, self.ndim);
    const out = ctx.outputs[0]!;
    const isZero = eq(self, 0);
    // Counted in int32 (a slice's zeros fit), which every device computes; int64 has no webgpu arithmetic.
    const zerosSeen = cumsum(isZero, d, 'int32');
    const beforeZero = eq(zerosSeen, 0);
    const firstZero = eq(where(isZero, zerosSeen, 0), 1);
    const safeX = where(beforeZero, self, 1);
    const gBefore = div(reverseCumsum(mul(g!, out), d), safeX);
    const gAtZero = reverseCumsum(mul(g!, cumprod(where(firstZero, 1, self), d)), d);
    return [where(beforeZero, gBefore, where(firstZero, gAtZero, 0))];
  },
  { save: ['self'], saveOutputs: true },
);

/** sort/topk values: the gradient scattered back through the returned indices. */
function indicesBackward(self: Tensor, g: Tensor, indices: Tensor, dim: number): Tensor {
  if (self.ndim === 0) return reshape(g, []);
  const d = normalizeDim('backward', dim, self.ndim);
  const z = zeros([...self.shape], { dtype: g.dtype, device: g.device });
  return scatter(z, d, indices, g);
}

defineBackward(
  red.sort,
  (ctx, [g]) => {
    const [self, dim] = ctx.args as [Tensor, number];
    if (!ctx.needsInputGrad(0)) return [null];
    return [indicesBackward(self, g!, ctx.outputs[1]!, dim)];
  },
  { saveOutputs: true },
);

defineBackward(
  red.topk,
  (ctx, [g]) => {
    const [self, , dim] = ctx.args as [Tensor, number, number];
    if (!ctx.needsInputGrad(0)) return [null];
    return [indicesBackward(self, g!, ctx.outputs[1]!, dim)];
  },
  { saveOutputs: true },
);
