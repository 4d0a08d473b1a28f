/** CPU kernels for the core ops: copy, clone, contiguous, casts, device moves, add. */
import { copy_, clone, contiguous, toDtype, toDevice, add, add_ } from '../../ops/defs/core.js';
import { nativeElementwise } from './native/ops.js';
import { registerKernel, type Op } from '../../ops/registry.js';
import { itemSize } from '../../tensor/dtype.js';
import { Tensor, storageSpan } from '../../tensor/tensor.js';
import { acceleratorFor } from '../../runtime/registry.js';
import { CPU, DEVICE_TYPES, type DeviceType } from '../../runtime/device.js';
import { dispatch } from '../../ops/dispatch.js';
import type { KernelContext, OutMeta } from '../../ops/schema.js';
import { allocOut } from './numeric.js';
import { copyInto, mapBinary, mapBinaryInto } from './pointwise-loop.js';
import * as V from '../../ops/defs/views.js';
import { chunk, split, splitWithSizes } from '../../ops/defs/indexing.js';
import { splitViewKernel } from './indexing.js';
import { viewKernel } from './views.js';

registerKernel(copy_, 'cpu', (_ctx, self, src) => {
  if (typeof src === 'object' && !src.device.equals(self.device)) {
    throw new Error(`copy_: cross-device copy from ${src.device.toString()} into ${self.device.toString()} goes through .to(device)`);
  }
  copyInto(self, src);
  return self;
});

registerKernel(clone, 'cpu', (ctx, self) => {
  const out = allocOut(ctx.out);
  copyInto(out, self);
  return out;
});

registerKernel(contiguous, 'cpu', (ctx, self, memoryFormat = 'contiguous') => {
  if (self.isContiguous(memoryFormat)) return self;
  const out = allocOut(ctx.out);
  copyInto(out, self);
  return out;
});

registerKernel(toDtype, 'cpu', (ctx, self) => {
  const out = allocOut(ctx.out);
  copyInto(out, self);
  return out;
});

/**
 * Device moves, shared by every accelerator: the source is laid out exactly as the output will be
 * (meta's dense strides; a clone on the source device when it is not already), then that span
 * moves as one block of bytes through the host.
 */
export function toDeviceKernel(ctx: KernelContext<OutMeta>, self: Tensor): Tensor {
  const meta = ctx.out;
  const dense = self.strides.every((s, i) => s === meta.strides[i] || self.shape[i] === 1);
  const staged = dense ? self : dispatch(clone, self, 'preserve');
  const out = allocOut(meta);
  const size = itemSize(self.dtype);
  const nbytes = storageSpan(meta.shape, meta.strides) * size;
  const host = new Uint8Array(nbytes);
  if (nbytes > 0) {
    acceleratorFor(staged.device).accelerator.copyDeviceToHost(host, staged.storage.buffer, staged.offset * size);
    acceleratorFor(out.device).accelerator.copyHostToDevice(out.storage.buffer, 0, host);
  }
  if (staged !== self) staged.dispose();
  return out;
}

/**
 * Registers, for every op in `ops`, a `device` kernel that runs the op's CPU kernel into a host
 * tensor of the output's layout and uploads it: the random and index-generating factories, which
 * an accelerator gets the same numbers for as the cpu (one generator stream) at the cost of a copy.
 */
export function registerViaHost(device: DeviceType, ops: readonly Op<readonly never[], OutMeta>[]): void {
  for (const op of ops) {
    registerKernel(op, device, ((ctx: KernelContext<OutMeta>, ...args: unknown[]) => {
      const cpuKernel = op.kernels.get('cpu') as unknown as (c: KernelContext<OutMeta>, ...a: unknown[]) => Tensor;
      const host = cpuKernel({ op: ctx.op, out: { ...ctx.out, device: CPU } }, ...args);
      const out = toDeviceKernel({ op: ctx.op, out: ctx.out }, host);
      host.dispose();
      return out;
    }) as never);
  }
}
for (const device of DEVICE_TYPES) registerKernel(toDevice, device, toDeviceKernel);

/**
 * Registers an accelerator's view ops: the views proper (no data moves), reshape/flatten (a view,
 * or a copy into a fresh contiguous output through `copy` when the layout needs one) and the
 * split family. The same on every device but for how it allocates and copies.
 */
export function registerDeviceViews(device: DeviceType, alloc: (meta: OutMeta) => Tensor, copy: (dst: Tensor, src: Tensor) => void): void {
  const views = [V.view, V.unflatten, V.permute, V.transpose, V.t, V.movedim, V.expand, V.slice, V.narrow, V.select, V.squeeze, V.unsqueeze, V.diagonal, V.asStrided];
  for (const op of views) registerKernel(op as Op<readonly never[], V.ViewMeta>, device, (ctx: KernelContext<V.ViewMeta>, self: Tensor) => viewKernel(ctx, self));
  const reshapeKernel = (ctx: KernelContext<V.ReshapeMeta>, self: Tensor): Tensor => {
    if (!ctx.out.copies) return viewKernel(ctx, self);
    const out = alloc(ctx.out);
    // The output is contiguous: its storage read with the input's shape is the same row-major data.
    const staging = new Tensor(out.storage, out.dtype, self.shape);
    copy(staging, self);
    staging.dispose();
    return out;
  };
  registerKernel(V.reshape, device, (ctx, self) => reshapeKernel(ctx, self));
  registerKernel(V.flatten, device, (ctx, self) => reshapeKernel(ctx, self));
  registerKernel(split, device, splitViewKernel);
  registerKernel(splitWithSizes, device, splitViewKernel);
  registerKernel(chunk, device, splitViewKernel);
}

registerKernel(add, 'cpu', (ctx, self, other, alpha) => {
  if (ctx.out.dtype === 'bool') return mapBinary(ctx.out, self, other, (x, y) => (x || y ? 1 : 0));
  const a = Number(alpha);
  if (a === 1) return nativeElementwise(ctx.out, 'add', self, other) ?? mapBinary(ctx.out, self, other, (x, y) => x + y);
  return mapBinary(ctx.out, self, other, (x, y) => x + a * y);
});

registerKernel(add_, 'cpu', (_ctx, self, other, alpha) => {
  const a = Number(alpha);
  mapBinaryInto(self, self, other, (x, y) => x + a * y);
  return self;
});
