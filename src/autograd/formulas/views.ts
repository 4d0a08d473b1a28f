/**
 * Backward formulas for the view ops. None reads tensor values (only shapes and strides), so none
 * saves anything. Shape-only views reshape the gradient back; views that pick out elements (slice,
 * narrow, select, diagonal, asStrided) scatter it into zeros through the same view.
 */
import * as V from '../../ops/defs/views.js';
import { copy_ } from '../../api/core.js';
import { zeros } from '../../api/creation.js';
import { asStrided, diagonal, movedim, narrow, permute, reshape, select, slice, t, transpose } from '../../api/views.js';
import { fmtShape, normalizeDim, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';
import { sumToShape } from '../utils.js';

/** The input's shape, with the gradient reshaped to it (view, reshape, flatten, squeeze, ...). */
function reshapeBack(op: { name: string; args: readonly { name: string }[]; backward?: unknown }): void {
  defineBackward(op, (ctx, [g]) => [ctx.needsInputGrad(0) ? reshape(g!, [...(ctx.args[0] as Tensor).shape]) : null]);
}

/** Zeros shaped like `self` (in g's dtype and device) with g written through `pick`'s view of them. */
function scatterInto(self: Tensor, g: Tensor, pick: (buf: Tensor) => Tensor): Tensor {
  const buf = zeros([...self.shape], { dtype: g.dtype, device: g.device });
  copy_(pick(buf), g);
  return buf;
}

// Both reshape cases (view and copy) and flatten/unflatten only regroup elements in logical order.
reshapeBack(V.view);
reshapeBack(V.reshape);
reshapeBack(V.flatten);
reshapeBack(V.unflatten);
reshapeBack(V.squeeze);
reshapeBack(V.unsqueeze);

defineBackward(V.permute, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, dims] = ctx.args as [Tensor, number[]];
  const inverse = new Array<number>(dims.length);
  dims.forEach((d, i) => (inverse[normalizeDim('permute', d, self.ndim)] = i));
  return [permute(g!, inverse)];
});

defineBackward(V.transpose, (ctx, [g]) => {
  const [, dim0, dim1] = ctx.args as [Tensor, number, number];
  return [ctx.needsInputGrad(0) ? transpose(g!, dim0, dim1) : null];
});

defineBackward(V.t, (ctx, [g]) => [ctx.needsInputGrad(0) ? t(g!) : null]);

defineBackward(V.movedim, (ctx, [g]) => {
  const [, source, destination] = ctx.args as [Tensor, number[], number[]];
  return [ctx.needsInputGrad(0) ? movedim(g!, destination, source) : null];
});

// expand: every copy of an element contributes; sum over the expanded (and new leading) dims.
defineBackward(V.expand, (ctx, [g]) => [ctx.needsInputGrad(0) ? sumToShape(g!, (ctx.args[0] as Tensor).shape) : null]);

defineBackward(V.slice, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, dim, start, end, step] = ctx.args as [Tensor, number, number | null, number | null, number];
  return [scatterInto(self, g!, (b) => slice(b, dim, start, end, step))];
});

defineBackward(V.narrow, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, dim, start, length] = ctx.args as [Tensor, number, number, number];
  return [scatterInto(self, g!, (b) => narrow(b, dim, start, length))];
});

defineBackward(V.select, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, dim, index] = ctx.args as [Tensor, number, number];
  return [scatterInto(self, g!, (b) => select(b, dim, index))];
});

defineBackward(V.diagonal, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, offset, dim1, dim2] = ctx.args as [Tensor, number, number, number];
  return [scatterInto(self, g!, (b) => diagonal(b, offset, dim1, dim2))];
});

/** Storage offsets of every element of a geometry overlap (some location is reached twice)? */
function overlaps(shape: readonly number[], strides: readonly number[]): boolean {
  const dims = shape.map((s, i) => ({ s, st: strides[i]! })).filter((d) => d.s > 1);
  if (numel(shape) <= 1) return false;
  if (dims.some((d) => d.st === 0)) return true;
  // Sufficient condition: sorted by stride, each stride clears the span of the smaller dims.
  dims.sort((a, b) => a.st - b.st);
  let span = 0;
  let nested = true;
  for (const d of dims) {
    if (d.st <= span) {
      nested = false;
      break;
    }
    span += (d.s - 1) * d.st;
  }
  if (nested) return false;
  // Otherwise enumerate the offsets (interleaved but possibly disjoint geometries).
  const n = numel(shape);
  if (n > 1 << 22) return true;
  const seen = new Set<number>();
  const idx = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let d = 0; d < shape.length; d++) off += idx[d]! * strides[d]!;
    if (seen.has(off)) return true;
    seen.add(off);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d]! < shape[d]!) break;
      idx[d] = 0;
    }
  }
  return false;
}

function lastOffset(offset: number, shape: readonly number[], strides: readonly number[]): number {
  let last = offset;
  for (let i = 0; i < shape.length; i++) last += (shape[i]! - 1) * strides[i]!;
  return last;
}

// asStrided: the gradient is scattered into a zero buffer standing in for the storage, through the
// output's geometry, and read back through the input's. Supported when neither geometry maps two
// elements to one storage location (then every location has at most one reader on each side).
defineBackward(V.asStrided, (ctx, [g]) => {
  if (!ctx.needsInputGrad(0)) return [null];
  const [self, size, stride, storageOffset] = ctx.args as [Tensor, number[], number[], number | null];
  const off = storageOffset ?? self.offset;
  for (const [what, sh, st] of [
    ['output', size, stride],
    ['input', self.shape, self.strides],
  ] as const) {
    if (overlaps(sh, st)) {
      throw new Error(
        `asStrided backward: the ${what} geometry (size ${fmtShape(sh)}, stride ${fmtShape(st)}) has elements that overlap in memory; ` +
          'only non-overlapping asStrided is differentiable (clone the input or use other view ops)',
      );
    }
  }
  if (numel(self.shape) === 0) return [zeros([...self.shape], { dtype: g!.dtype, device: g!.device })];
  const empty = numel(size) === 0;
  const lo = empty ? self.offset : Math.min(self.offset, off);
  const hi = Math.max(lastOffset(self.offset, self.shape, self.strides), empty ? 0 : lastOffset(off, size, stride));
  const buf = zeros([hi - lo + 1], { dtype: g!.dtype, device: g!.device });
  if (!empty) copy_(asStrided(buf, size, stride, off - lo), g!);
  return [asStrided(buf, self.shape, self.strides, self.offset - lo)];
});
