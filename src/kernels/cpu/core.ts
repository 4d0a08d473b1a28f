/** CPU kernels for the core ops: copy, clone, contiguous, casts, device moves, add. */
import { copy_, clone, contiguous, toDtype, toDevice, add, add_ } from '../../ops/defs/core.js';
import { registerKernel } from '../../ops/registry.js';
import { itemSize } from '../../tensor/dtype.js';
import { Tensor, storageSpan } from '../../tensor/tensor.js';
import { acceleratorFor } from '../../runtime/registry.js';
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
 * Device moves: the source is first laid out on its own device exactly as the output will be
 * (meta's strides, dense), then that span moves as one block of bytes through the host.
 */
registerKernel(toDevice, 'cpu', (ctx, self) => {
  const meta = ctx.out;
  const staged = Tensor.empty(meta.shape, self.dtype, self.device, meta.strides);
  copyInto(staged, self);
  const out = allocOut(meta);
  const nbytes = storageSpan(meta.shape, meta.strides) * itemSize(self.dtype);
  const host = new Uint8Array(nbytes);
  acceleratorFor(staged.device).accelerator.copyDeviceToHost(host, staged.storage.buffer, 0);
  acceleratorFor(out.device).accelerator.copyHostToDevice(out.storage.buffer, 0, host);
  staged.dispose();
  return out;
});

registerKernel(add, 'cpu', (ctx, self, other, alpha) => {
  if (ctx.out.dtype === 'bool') return mapBinary(ctx.out, self, other, (x, y) => (x || y ? 1 : 0));
  const a = Number(alpha);
  if (a === 1) return mapBinary(ctx.out, self, other, (x, y) => x + y);
  return mapBinary(ctx.out, self, other, (x, y) => x + a * y);
});

registerKernel(add_, 'cpu', (_ctx, self, other, alpha) => {
  const a = Number(alpha);
  mapBinaryInto(self, self, other, (x, y) => x + a * y);
  return self;
});
