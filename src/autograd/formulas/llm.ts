/**
 * Backward formulas of the LLM library ops that have one: rmsNorm (input and weight), siluAndMul
 * and geluAndMul. Halves are differentiated in float32 and cast back (as the forward computes).
 *
 *   rmsNorm:    y = x r w, r = (mean(x^2) + eps)^-1/2:
 *               dx = r (g w) - x r^3 mean(g w x),   dw = sum_rows(g x r)
 *   act-and-mul: y = act(a) b:  da = g b act'(a),  db = g act(a)
 *               silu'(a) = s (1 + a (1 - s)), s = sigmoid(a)
 *               gelu'(a) = Phi(a) + a phi(a)  (erf);  tanh form: 0.5 (1 + t) + 0.5 a (1 - t^2) k (1 + 3c a^2)
 *   applyRotaryEmb: y = x cos + rot(x) sin, rot linear with rot^T = -rot (both layouts):
 *               dx = g cos - rot(g sin),  dcos = sum_to_shape(g x),  dsin = sum_to_shape(g rot(x))
 */
import * as D from '../../ops/defs/llm.js';
import { applyRotaryEmb } from '../../ops/defs/llm-rotary.js';
import { rotateLast } from '../../api/rotate.js';
import { sumToShape } from '../utils.js';
import { cat } from '../../api/indexing.js';
import { add } from '../../api/core.js';
import { erf, exp, mul, neg, rsqrt, sigmoid, sub, tanh } from '../../api/pointwise.js';
import { mean, sum } from '../../api/reduction.js';
import { narrow } from '../../api/views.js';
import type { Tensor } from '../../tensor/tensor.js';
import { backwardKernel } from '../../ops/library/backward-kernels.js';
import { defineBackward } from '../graph.js';

function up(t: Tensor): Tensor {
  return t.dtype === 'float16' || t.dtype === 'bfloat16' ? t.to('float32') : t;
}

defineBackward(
  D.rmsNorm,
  (ctx, [g]) => {
    const [xIn, wIn, eps] = ctx.args as [Tensor, Tensor, number];
    // A device's backward kernel when its library registered one (cuda); else the composition.
    const kernel = backwardKernel(D.rmsNorm.name, xIn.device.type);
    if (kernel) return kernel([g!], ctx.args, [ctx.needsInputGrad(0), ctx.needsInputGrad(1), false]);
    const x = up(xIn);
    const w = up(wIn);
    const g32 = up(g!);
    const r = rsqrt(add(mean(mul(x, x), [-1], true), eps));
    let gx: Tensor | null = null;
    let gw: Tensor | null = null;
    if (ctx.needsInputGrad(0)) {
      const gwv = mul(g32, w);
      const m = mean(mul(gwv, x), [-1], true);
      gx = sub(mul(gwv, r), mul(mul(x, mul(mul(r, r), r)), m)).to(xIn.dtype);
    }
    if (ctx.needsInputGrad(1)) {
      const lead = Array.from({ length: x.ndim - 1 }, (_, i) => i);
      const t = mul(g32, mul(x, r));
      gw = (lead.length > 0 ? sum(t, lead) : t).to(wIn.dtype);
    }
    return [gx, gw, null];
  },
  { save: ['input', 'weight'] },
);

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

/** act(a) and act'(a) for the gated activations. */
function actAndGrad(a: Tensor, kind: 'silu' | D.GeluApproximate): [Tensor, Tensor] {
  if (kind === 'silu') {
    const s = sigmoid(a);
    return [mul(a, s), mul(s, add(mul(a, add(neg(s), 1)), 1))];
  }
  if (kind === 'tanh') {
    const inner = mul(add(a, mul(mul(mul(a, a), a), 0.044715)), SQRT_2_OVER_PI);
    const t = tanh(inner);
    const act = mul(mul(a, 0.5), add(t, 1));
    const dInner = mul(add(mul(mul(a, a), 3 * 0.044715), 1), SQRT_2_OVER_PI);
    const grad = add(mul(add(t, 1), 0.5), mul(mul(mul(a, 0.5), add(neg(mul(t, t)), 1)), dInner));
    return [act, grad];
  }
  const cdf = mul(add(erf(mul(a, Math.SQRT1_2)), 1), 0.5);
  const pdf = mul(exp(mul(mul(a, a), -0.5)), INV_SQRT_2PI);
  return [mul(a, cdf), add(cdf, mul(a, pdf))];
}

function gatedBackward(input: Tensor, g: Tensor, kind: 'silu' | D.GeluApproximate): Tensor {
  const x = up(input);
  const d = x.shape[x.ndim - 1]! / 2;
  const a = narrow(x, -1, 0, d);
  const b = narrow(x, -1, d, d);
  const g32 = up(g);
  const [act, grad] = actAndGrad(a, kind);
  return cat([mul(mul(g32, b), grad), mul(g32, act)], -1).to(input.dtype);
}

defineBackward(
  applyRotaryEmb,
  (ctx, [g]) => {
    const [xIn, cosIn, sinIn, isNeox] = ctx.args as [Tensor, Tensor, Tensor, boolean];
    const g32 = up(g!);
    const x = up(xIn);
    const gx = ctx.needsInputGrad(0) ? sub(mul(g32, up(cosIn)), rotateLast(mul(g32, up(sinIn)), isNeox)).to(xIn.dtype) : null;
    const gc = ctx.needsInputGrad(1) ? sumToShape(mul(g32, x), cosIn.shape).to(cosIn.dtype) : null;
    const gs = ctx.needsInputGrad(2) ? sumToShape(mul(g32, rotateLast(x, isNeox)), sinIn.shape).to(sinIn.dtype) : null;
    return [gx, gc, gs, null];
  },
  { save: ['input', 'cos', 'sin'] },
);

defineBackward(
  D.siluAndMul,
  (ctx, [g]) => backwardKernel(D.siluAndMul.name, (ctx.args[0] as Tensor).device.type)?.([g!], ctx.args, [true]) ?? [gatedBackward(ctx.args[0] as Tensor, g!, 'silu')],
  { save: ['input'] },
);
defineBackward(
  D.geluAndMul,
  (ctx, [g]) =>
    backwardKernel(D.geluAndMul.name, (ctx.args[0] as Tensor).device.type)?.([g!], ctx.args, [true, false]) ?? [gatedBackward(ctx.args[0] as Tensor, g!, ctx.args[1] as D.GeluApproximate), null],
  { save: ['input'] },
);
