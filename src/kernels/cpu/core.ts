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
 * Device moves copy the bytes of the source's span (so any strides survive) through the host:
 * source accelerator -> host -> destination accelerator. A dense source goes as one block.
 */
registerKernel(toDevice, 'cpu', (ctx, self) => {
  const target = ctx.out.device;
  const src = self.isContiguous() ? self : (contiguousCopy(self));
  const size = itemSize(self.dtype);
  const span = storageSpan(src.shape, src.strides);
  const host = new Uint8Array(span * size);
  acceleratorFor(src.device).accelerator.copyDeviceToHost(host, src.storage.buffer, src.offset * size);
  const out = Tensor.empty(self.shape, self.dtype, target);
  acceleratorFor(target).accelerator.copyHostToDevice(out.storage.buffer, 0, host);
  if (src !== self) src.dispose();
  return out;
});

function contiguousCopy(t: Tensor): Tensor {
  const out = Tensor.empty(t.shape, t.dtype, t.device);
  copyInto(out, t);
  return out;
}

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
