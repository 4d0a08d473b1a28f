/**
 * cuda kernels for copies, casts, views, joins and factories. Copies and casts are the generated
 * pointwise kernel with the identity expression (computed in the wider of the two dtypes, so no
 * value is rounded twice). Views share the device-independent view kernels. Factories fill on the
 * device; the seeded random and range factories run the CPU kernel and upload, so a seed gives the
 * same numbers on every device.
 */
import { clone, contiguous, copy_, toDtype } from '../../ops/defs/core.js';
import * as C from '../../ops/defs/creation.js';
import { cat, catSkipped, maskedFill, maskedFill_, stack, tril, triu } from '../../ops/defs/indexing.js';
import { registerKernel, type Op } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import { promoteTypes } from '../../tensor/dtype.js';
import { contiguousStrides, normalizeDim } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { registerDeviceViews, registerViaHost, toDeviceKernel } from '../cpu/core.js';
import { allocOut } from './device.js';
import { runPointwise } from './pointwise-run.js';
import { triMask } from './masks.js';

/** dst[...] = src (broadcast, cast), on dst's device. */
/**
 * `t` itself when it is contiguous in `dtype`, else a contiguous copy in `dtype` on t's device (the
 * staging copy kernels take for operands they address as dense row-major memory).
 */
export function contiguousAs(t: Tensor, dtype: Tensor['dtype'] = t.dtype): Tensor {
  if (t.dtype === dtype && t.isContiguous()) return t;
  return copyTensor(allocOut({ shape: t.shape, strides: contiguousStrides(t.shape), dtype, device: t.device }), t);
}

export function copyTensor(dst: Tensor, src: Tensor | ScalarValue): Tensor {
  if (typeof src !== 'object') return runPointwise('fill', 's0', dst, [], [Number(src)], dst.dtype);
  let from = src;
  if (src.device.type !== 'cuda' || src.device.index !== dst.device.index) {
    if (src.device.type === 'cpu' && src.ndim === 0) return runPointwise('fill', 'a', dst, [src], [], dst.dtype);
    from = toDeviceKernel({ op: 'copy_', out: { shape: src.shape, strides: contiguousStrides(src.shape), dtype: src.dtype, device: dst.device } }, src);
  }
  // Another view of dst's storage is read while dst is written: stage it first.
  if (from.storage === dst.storage && (from.offset !== dst.offset || !from.strides.every((s, i) => s === dst.strides[i]))) {
    const staged = allocOut({ shape: from.shape, strides: contiguousStrides(from.shape), dtype: from.dtype, device: dst.device });
    runPointwise('copy', 'a', staged, [from], [], from.dtype);
    from = staged;
  }
  return runPointwise('copy', 'a', dst, [from], [], promoteTypes(from.dtype, dst.dtype));
}

registerKernel(copy_, 'cuda', (_ctx, self, src) => copyTensor(self, src));
registerKernel(clone, 'cuda', (ctx, self) => copyTensor(allocOut(ctx.out), self));
registerKernel(contiguous, 'cuda', (ctx, self, memoryFormat = 'contiguous') => (self.isContiguous(memoryFormat) ? self : copyTensor(allocOut(ctx.out), self)));
registerKernel(toDtype, 'cuda', (ctx, self) => copyTensor(allocOut(ctx.out), self));

// ------------------------------------------------------------------------------------------------
// Views
// ------------------------------------------------------------------------------------------------

registerDeviceViews('cuda', allocOut, copyTensor);

// ------------------------------------------------------------------------------------------------
// cat, stack, maskedFill
// ------------------------------------------------------------------------------------------------

registerKernel(cat, 'cuda', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  const kept = tensors.filter((t) => !catSkipped(t));
  if (kept.length === 0 || out.numel() === 0) return out;
  const d = normalizeDim('cat', dim as number, kept[0]!.ndim);
  let start = 0;
  for (const t of kept) {
    const n = t.shape[d]!;
    if (n === 0) continue;
    const view = new Tensor(out.storage, out.dtype, t.shape, out.strides, out.offset + start * out.strides[d]!);
    copyTensor(view, t);
    view.dispose();
    start += n;
  }
  return out;
});

registerKernel(stack, 'cuda', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  if (out.numel() === 0) return out;
  const d = normalizeDim('stack', dim as number, tensors[0]!.ndim + 1);
  const strides = out.strides.filter((_, k) => k !== d);
  tensors.forEach((t, i) => {
    const view = new Tensor(out.storage, out.dtype, t.shape, strides, out.offset + i * out.strides[d]!);
    copyTensor(view, t);
    view.dispose();
  });
  return out;
});

function maskedFillRun(out: Tensor, self: Tensor, mask: Tensor, value: Tensor | ScalarValue): Tensor {
  if (typeof value === 'object') return runPointwise('maskedFill', '((b != 0) ? c : a)', out, [self, mask, value], [], out.dtype);
  return runPointwise('maskedFill', '((b != 0) ? s0 : a)', out, [self, mask], [Number(value)], out.dtype);
}
registerKernel(maskedFill, 'cuda', (ctx, self, mask, value) => maskedFillRun(allocOut(ctx.out), self, mask, value));
registerKernel(maskedFill_, 'cuda', (_ctx, self, mask, value) => maskedFillRun(self, self, mask, value));

/** tril/triu: the element where a cached triangular mask of the last two dims holds, else 0. */
function triKernel(meta: OutMeta, self: Tensor, diagonal: number, lower: boolean): Tensor {
  const out = allocOut(meta);
  const r = self.shape[self.ndim - 2]!;
  const c = self.shape[self.ndim - 1]!;
  if (out.numel() === 0) return out;
  const m = triMask(r, c, diagonal, lower, self.device);
  const view = new Tensor(m.storage, 'bool', self.shape, self.shape.map((_, d) => (d === self.ndim - 2 ? c : d === self.ndim - 1 ? 1 : 0)), m.offset);
  runPointwise(lower ? 'tril' : 'triu', '((b != 0) ? a : 0)', out, [self, view], [], self.dtype);
  view.dispose();
  return out;
}
registerKernel(tril, 'cuda', (ctx, self, diagonal) => triKernel(ctx.out, self, diagonal as number, true));
registerKernel(triu, 'cuda', (ctx, self, diagonal) => triKernel(ctx.out, self, diagonal as number, false));

// ------------------------------------------------------------------------------------------------
// Factories
// ------------------------------------------------------------------------------------------------

function filled(meta: OutMeta, value: ScalarValue): Tensor {
  const out = allocOut(meta, Number(value) === 0 && !Object.is(Number(value), -0));
  if (Number(value) === 0 && !Object.is(Number(value), -0)) return out;
  return runPointwise('fill', 's0', out, [], [Number(value)], out.dtype);
}

registerKernel(C.empty, 'cuda', (ctx) => allocOut(ctx.out));
registerKernel(C.emptyLike, 'cuda', (ctx) => allocOut(ctx.out));
registerKernel(C.zeros, 'cuda', (ctx) => allocOut(ctx.out, true));
registerKernel(C.zerosLike, 'cuda', (ctx) => allocOut(ctx.out, true));
registerKernel(C.ones, 'cuda', (ctx) => filled(ctx.out, 1));
registerKernel(C.onesLike, 'cuda', (ctx) => filled(ctx.out, 1));
registerKernel(C.full, 'cuda', (ctx, _size, fillValue) => filled(ctx.out, fillValue as ScalarValue));
registerKernel(C.fullLike, 'cuda', (ctx, _self, fillValue) => filled(ctx.out, fillValue as ScalarValue));

registerViaHost('cuda', [C.rand, C.randn, C.randint, C.arange, C.linspace, C.eye, C.randLike, C.randnLike] as unknown as Op<readonly never[], OutMeta>[]);
