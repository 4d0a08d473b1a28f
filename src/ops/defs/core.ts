/** Core ops every other group relies on: copies, casts, device moves, contiguity, and add. */
import { Device } from '../../runtime/device.js';
import type { DType } from '../../tensor/dtype.js';
import { canCast, isFloating } from '../../tensor/dtype.js';
import { broadcastShapes, fmtShape, type MemoryFormat, preservedStrides, shapeEquals, stridesFor } from '../../tensor/layout.js';
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe, pointwiseMeta } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta, ScalarValue } from '../schema.js';

export const copy_ = defineOp({
  name: 'copy_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'src', type: 'Tensor|Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['inplace', 'crossDevice'],
  method: true,
  meta(self: TensorMeta, src: TensorMeta | ScalarValue): OutMeta {
    if (typeof src === 'object') {
      const b = broadcastShapes('copy_', self.shape, src.shape);
      if (!shapeEquals(b, self.shape)) {
        throw new Error(`copy_: source ${describe(src)} cannot be broadcast to destination ${describe(self)}`);
      }
    }
    return self;
  },
});

/** Layout for a copy that preserves the source's memory format. */
function copyLayout(x: TensorMeta, memoryFormat: MemoryFormat): number[] {
  if (memoryFormat === 'preserve') return preservedStrides(x.shape, x.shape, x.strides);
  return stridesFor(x.shape, memoryFormat);
}

export const clone = defineOp({
  name: 'clone',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'memoryFormat', type: 'str?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  method: true,
  meta(self: TensorMeta, memoryFormat: MemoryFormat = 'preserve'): OutMeta {
    return { shape: self.shape, strides: copyLayout(self, memoryFormat), dtype: self.dtype, device: self.device };
  },
});

export const contiguous = defineOp({
  name: 'contiguous',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'memoryFormat', type: 'str?' },
  ],
  // Returns `self` itself when it already has the requested layout (as torch does).
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  method: true,
  meta(self: TensorMeta & { offset?: number }, memoryFormat: Exclude<MemoryFormat, 'preserve'> = 'contiguous'): OutMeta {
    if (memoryFormat !== 'contiguous' && memoryFormat !== 'channelsLast') {
      throw new Error(`contiguous: memoryFormat must be 'contiguous' or 'channelsLast', got '${String(memoryFormat)}'`);
    }
    if (memoryFormat === 'channelsLast' && self.shape.length !== 4) {
      throw new Error(`contiguous: channelsLast needs a 4-d tensor, got ${describe(self)}`);
    }
    return { shape: self.shape, strides: stridesFor(self.shape, memoryFormat), dtype: self.dtype, device: self.device };
  },
});

export const toDtype = defineOp({
  name: 'toDtype',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'dtype', type: 'dtype?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  publicName: 'to',
  meta(self: TensorMeta, dtype: DType): OutMeta {
    return { shape: self.shape, strides: preservedStrides(self.shape, self.shape, self.strides), dtype, device: self.device };
  },
});

export const toDevice = defineOp({
  name: 'toDevice',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'device', type: 'device?' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['crossDevice'],
  publicName: 'to',
  meta(self: TensorMeta, device: Device): OutMeta {
    return { shape: self.shape, strides: preservedStrides(self.shape, self.shape, self.strides), dtype: self.dtype, device };
  },
});

export const add = defineOp({
  name: 'add',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'alpha', type: 'Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  tags: ['pointwise'],
  method: true,
  meta(self: TensorMeta, other: TensorMeta | ScalarValue, alpha: ScalarValue): OutMeta {
    const out = pointwiseMeta('add', [self, other]);
    if (out.dtype === 'bool' && alpha !== 1 && alpha !== true) throw new Error(`add: alpha must be 1 or true for bool tensors, got ${alpha}`);
    if (typeof alpha === 'number' && !Number.isInteger(alpha) && !isFloating(out.dtype)) {
      throw new TypeError(`add: alpha ${alpha} is not an integer, but the result dtype is ${out.dtype} (operands ${typeof other === 'object' ? describe(other) : other} and ${describe(self)})`);
    }
    return out;
  },
});

/** Validates an in-place result: the promoted dtype must be castable into self, shapes must not grow. */
export function checkInplace(op: string, self: TensorMeta, result: OutMeta): OutMeta {
  if (!shapeEquals(result.shape, self.shape)) {
    throw new Error(`${op}: output with shape ${fmtShape(self.shape)} doesn't match the broadcast shape ${fmtShape(result.shape)}`);
  }
  if (!canCast(result.dtype, self.dtype)) {
    throw new TypeError(`${op}: result type ${result.dtype} can't be cast to the desired output type ${self.dtype}`);
  }
  return self;
}

export const add_ = defineOp({
  name: 'add_',
  args: [
    { name: 'self', type: 'Tensor', mutated: true },
    { name: 'other', type: 'Tensor|Scalar' },
    { name: 'alpha', type: 'Scalar' },
  ],
  outputs: [{ name: 'out', type: 'Tensor', aliasOf: 'self' }],
  tags: ['pointwise', 'inplace'],
  method: true,
  meta(self: TensorMeta, other: TensorMeta | ScalarValue, alpha: ScalarValue): OutMeta {
    return checkInplace('add_', self, add.meta(self, other, alpha));
  },
});

export { Device };
