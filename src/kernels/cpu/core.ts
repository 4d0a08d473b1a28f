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
