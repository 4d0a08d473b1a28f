/**
 * Kernels for the view ops. `viewKernel` is device-agnostic (it only builds a Tensor over the
 * input's storage from the meta result), so other accelerators register the same function.
 * `reshapeKernel` copies on the CPU when meta says the strides don't allow a view.
 */
import {
  asStrided,
  diagonal,
  expand,
  flatten,
  movedim,
  narrow,
  permute,
  reshape,
  type ReshapeMeta,
  select,
  slice,
  squeeze,
  t,
  transpose,
  unflatten,
  unsqueeze,
  view,
  type ViewMeta,
} from '../../ops/defs/views.js';
import { registerKernel } from '../../ops/registry.js';
import type { KernelContext } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './numeric.js';
import { copyInto } from './pointwise-loop.js';

/** Builds the view described by meta over `self`'s storage (any device). */
export function viewKernel(ctx: KernelContext<ViewMeta>, self: Tensor): Tensor {
  const m = ctx.out;
  return new Tensor(self.storage, self.dtype, m.shape, m.strides, m.offset);
}

/** reshape/flatten on the CPU: a view when meta says so, else a contiguous copy in row-major order. */
export function reshapeKernel(ctx: KernelContext<ReshapeMeta>, self: Tensor): Tensor {
  if (!ctx.out.copies) return viewKernel(ctx, self);
  const out = allocOut(ctx.out);
  // The output is contiguous, so its storage read with the input's shape is the same row-major data.
  const staging = new Tensor(out.storage, out.dtype, self.shape);
  copyInto(staging, self);
  staging.dispose();
  return out;
}

registerKernel(view, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(unflatten, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(permute, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(transpose, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(t, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(movedim, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(expand, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(slice, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(narrow, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(select, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(squeeze, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(unsqueeze, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(diagonal, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(asStrided, 'cpu', (ctx, self) => viewKernel(ctx, self));
registerKernel(reshape, 'cpu', (ctx, self) => reshapeKernel(ctx, self));
registerKernel(flatten, 'cpu', (ctx, self) => reshapeKernel(ctx, self));
