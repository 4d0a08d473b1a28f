/**
 * Tensor conversion methods torch users reach for first: `.float()`, `.half()`, `.double()`,
 * `.bfloat16()` (casts through `to`, returning the tensor itself when the dtype already matches,
 * as torch) and `.tolist()` (nested JS arrays; numbers, or booleans for bool tensors).
 */
import type { Tensor } from '../tensor/tensor.js';
import { to } from './core.js';
import { installMethods } from './install.js';

type Nested = number | boolean | Nested[];

declare module '../tensor/tensor.js' {
  interface Tensor {
    float(): Tensor;
    half(): Tensor;
    double(): Tensor;
    bfloat16(): Tensor;
    tolist(): Nested;
  }
}

installMethods({
  float: (self: Tensor) => to(self, 'float32'),
  half: (self: Tensor) => to(self, 'float16'),
  double: (self: Tensor) => to(self, 'float64'),
  bfloat16: (self: Tensor) => to(self, 'bfloat16'),
  tolist: (self: Tensor) => self.toArray() as Nested,
});
