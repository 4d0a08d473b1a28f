/** Attaches functional ops to Tensor.prototype as methods (`x.add(y)` calls `add(x, y)`). */
import { Tensor } from '../tensor/tensor.js';

type Fn = (self: Tensor, ...rest: never[]) => unknown;

export function installMethods(fns: Record<string, Fn>): void {
  const proto = Tensor.prototype as unknown as Record<string, unknown>;
  for (const [name, fn] of Object.entries(fns)) {
    if (Object.prototype.hasOwnProperty.call(proto, name)) throw new Error(`installMethods: Tensor.${name} is already defined`);
    proto[name] = function (this: Tensor, ...rest: never[]) {
      return fn(this, ...rest);
    };
  }
}
