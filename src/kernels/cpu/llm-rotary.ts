/**
 * CPU kernel of llm.applyRotaryEmb: out = x cos + rot(x) sin with cos/sin broadcast to x (read
 * through broadcast strides, never materialised by an op). Arithmetic in JS doubles, rounded once
 * on store, as the other library CPU kernels do.
 */
import { applyRotaryEmb } from '../../ops/defs/llm-rotary.js';
import type { OutMeta } from '../../ops/schema.js';
import { broadcastStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { registerCpu } from './llm.js';
import { nativeRope } from './native/rows.js';
import { computeArrayFor, denseValues, fromDense, gatherStrided, readable } from './numeric.js';

/** Dense row-major values of `t` broadcast to `shape`. */
function broadcastValues(t: Tensor, shape: readonly number[]): ArrayLike<number> {
  const r = readable(t);
  const out = computeArrayFor(t.dtype, numel(shape));
  gatherStrided({ data: r.data, offset: r.offset, shape, strides: broadcastStrides(t.shape, t.strides, shape) }, out);
  return out;
}

registerCpu(applyRotaryEmb.name, (ctx, input, cosIn, sinIn, isNeox) => {
  const x = input as Tensor;
  const native = isNeox ? nativeRope(ctx.out as OutMeta, x, cosIn as Tensor, sinIn as Tensor) : null;
  if (native) return native;
  const xv = denseValues(x);
  const cos = broadcastValues(cosIn as Tensor, x.shape);
  const sin = broadcastValues(sinIn as Tensor, x.shape);
  const d = x.shape[x.ndim - 1]!;
  const h = d / 2;
  const out = new Float64Array(xv.length);
  for (let base = 0; base < xv.length; base += d) {
    for (let i = 0; i < d; i++) {
      // rot(x)[i]: neox [-x2, x1]; gpt-j (-x[2j+1], x[2j]).
      const r = isNeox ? (i < h ? -xv[base + i + h]! : xv[base + i - h]!) : i % 2 === 0 ? -xv[base + i + 1]! : xv[base + i - 1]!;
      out[base + i] = xv[base + i]! * cos[base + i]! + r * sin[base + i]!;
    }
  }
  return fromDense(ctx.out as OutMeta, out);
});
