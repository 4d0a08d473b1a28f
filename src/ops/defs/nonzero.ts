/**
 * nonzero (torch.nonzero): the int64 [n, ndim] indices of the nonzero elements in row-major order.
 * Its output shape depends on the values, so it is tagged dataDependent: kiln.compile breaks the
 * graph before it and runs it eagerly. The meta function therefore counts the nonzeros of the real
 * tensor dispatch hands it (it is never called on a traced tensor). Devices without a kernel copy
 * the input to the host, run the cpu kernel and copy the indices back (the count must reach the
 * host anyway to size the output).
 */
import { Device } from '../../runtime/device.js';
import { contiguousStrides, numel } from '../../tensor/layout.js';
import { Tensor, type TensorMeta } from '../../tensor/tensor.js';
import { dispatch } from '../dispatch.js';
import { checkTensor } from '../meta-helpers.js';
import { defineOp, getOp, setDecomposition, type Op } from '../registry.js';
import type { OutMeta } from '../schema.js';

/** The number of nonzero elements (NaN counts as nonzero, as in torch). */
export function countNonzero(self: Tensor): number {
  let n = 0;
  for (const v of self.toFlatArray()) if (v !== 0) n++;
  return n;
}

export const nonzero = defineOp({
  name: 'nonzero',
  args: [{ name: 'self', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['dataDependent'],
  method: true,
  meta(self: TensorMeta): OutMeta {
    checkTensor('nonzero', 'self', self);
    if (!(self instanceof Tensor)) {
      throw new Error(`nonzero: the output shape depends on the input's values, so it has no meta for a tensor without data (${self.shape.length}-d ${self.dtype})`);
    }
    const shape = [numel(self.shape) === 0 ? 0 : countNonzero(self), self.shape.length];
    return { shape, strides: contiguousStrides(shape), dtype: 'int64', device: self.device };
  },
});

// Host fallback for accelerators without a kernel.
setDecomposition(nonzero, (self) => {
  const host = new Device('cpu');
  const toDev = getOp('toDevice') as Op<[TensorMeta, Device], OutMeta>;
  const r = dispatch(nonzero, dispatch(toDev, self, host));
  return dispatch(toDev, r, self.device);
});
