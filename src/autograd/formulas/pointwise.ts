/**
 * Backward formulas for the pointwise ops (PyTorch's derivatives.yaml conventions).
 *
 * Unary formulas read the input (`save: ['self']`) or, where cheaper and as PyTorch does, the
 * output (`saveOutputs`). In-place variants see the pre-op value of self in `ctx.args[0]` and the
 * post-op value (self itself) in `ctx.outputs[0]`. Broadcast inputs get `sumToShape`.
 */
import * as P from '../../ops/defs/pointwise.js';
import { fullLike, zerosLike } from '../../api/creation.js';
import { add } from '../../api/core.js';
import {
  cos,
  div,
  eq,
  erf,
  exp,
  ge,
  gt,
  le,
  log,
  logicalAnd,
  logicalOr,
  lt,
  mul,
  neg,
  pow,
  sigmoid,
  sign,
  sin,
  sub,
  tanh,
  where,
} from '../../api/pointwise.js';
import { sum } from '../../api/reduction.js';
import type { ScalarValue } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import { defineBackward, type BackwardContext } from '../graph.js';
import { sumToShape } from '../utils.js';

type Operand = Tensor | ScalarValue;

const isTensor = (x: unknown): x is Tensor => x instanceof Tensor;

/** Gradient for argument `i` when it is a tensor that needs one, summed back to its shape. */
function gradFor(ctx: BackwardContext, i: number, make: (arg: Tensor) => Tensor): Tensor | null {
  const a = ctx.args[i];
  if (!isTensor(a) || !ctx.needsInputGrad(i)) return null;
  return sumToShape(make(a), a.shape);
}

/** 1 - t * t */
const oneMinusSq = (t: Tensor): Tensor => add(neg(mul(t, t)), 1);
/** 1 - t */
const oneMinus = (t: Tensor): Tensor => add(neg(t), 1);

// ---------------------------------------------------------------------------------------------
// Unary ops: formula(g, x, out)
// ---------------------------------------------------------------------------------------------

type UnaryGrad = (g: Tensor, x: Tensor, out: Tensor) => Tensor;

function unary(op: P.UnaryOp, fn: UnaryGrad, reads: 'self' | 'out' | 'none'): void {
  defineBackward(
    op,
    (ctx, [g]) => {
      if (!ctx.needsInputGrad(0)) return [null];
      return [fn(g!, ctx.args[0] as Tensor, ctx.outputs[0]!)];
    },
    reads === 'self' ? { save: ['self'] } : reads === 'out' ? { saveOutputs: true } : {},
  );
}

const LN2 = Math.LN2;
const LN10 = Math.LN10;
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

unary(P.neg, (g) => neg(g), 'none');
// abs'(x) = sign(x); abs'(0) = 0 as in PyTorch.
unary(P.abs, (g, x) => mul(g, sign(x)), 'self');
unary(P.exp, (g, _x, out) => mul(g, out), 'out');
unary(P.expm1, (g, _x, out) => mul(g, add(out, 1)), 'out');
unary(P.log, (g, x) => div(g, x), 'self');
unary(P.log2, (g, x) => div(g, mul(x, LN2)), 'self');
unary(P.log10, (g, x) => div(g, mul(x, LN10)), 'self');
unary(P.log1p, (g, x) => div(g, add(x, 1)), 'self');
// sqrt'(x) = 1 / (2 sqrt(x)): inf at 0, as in PyTorch.
unary(P.sqrt, (g, _x, out) => div(g, mul(out, 2)), 'out');
// rsqrt'(x) = -0.5 x^-1.5 = -0.5 out^3
unary(P.rsqrt, (g, _x, out) => mul(mul(g, pow(out, 3)), -0.5), 'out');
// reciprocal'(x) = -1 / x^2 = -out^2
unary(P.reciprocal, (g, _x, out) => neg(mul(g, mul(out, out))), 'out');
unary(P.square, (g, x) => mul(g, mul(x, 2)), 'self');
unary(P.sin, (g, x) => mul(g, cos(x)), 'self');
unary(P.cos, (g, x) => neg(mul(g, sin(x))), 'self');
// tan'(x) = 1 + tan(x)^2
unary(P.tan, (g, _x, out) => mul(g, add(mul(out, out), 1)), 'out');
unary(P.tanh, (g, _x, out) => mul(g, oneMinusSq(out)), 'out');
unary(P.sigmoid, (g, _x, out) => mul(g, mul(out, oneMinus(out))), 'out');
// erf'(x) = 2/sqrt(pi) exp(-x^2)
unary(P.erf, (g, x) => mul(g, mul(exp(neg(mul(x, x))), TWO_OVER_SQRT_PI)), 'self');
// relu: gradient where the output is > 0 (relu'(0) = 0), PyTorch's threshold_backward(g, out, 0).
unary(P.relu, (g, _x, out) => where(gt(out, 0), g, 0), 'out');
// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
unary(
  P.silu,
  (g, x) => {
    const s = sigmoid(x);
    return mul(g, mul(s, add(mul(x, oneMinus(s)), 1)));
  },
  'self',
);
// Step functions: zero gradient everywhere (PyTorch returns zeros, it does not fail).
for (const op of [P.sign, P.floor, P.ceil, P.round, P.trunc]) unary(op, (g) => zerosLike(g), 'none');

// In-place unary ops: all formulas read the result (self after the op), as PyTorch's do.
unary(P.relu_, (g, _x, out) => where(gt(out, 0), g, 0), 'out');
unary(P.neg_, (g) => neg(g), 'none');
unary(P.exp_, (g, _x, out) => mul(g, out), 'out');
unary(P.sigmoid_, (g, _x, out) => mul(g, mul(out, oneMinus(out))), 'out');
unary(P.tanh_, (g, _x, out) => mul(g, oneMinusSq(out)), 'out');

const SQRT1_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
const GELU_BETA = Math.sqrt(2 / Math.PI);
const GELU_KAPPA = 0.044715;

defineBackward(
  P.gelu,
  (ctx, [g]) => {
    if (!ctx.needsInputGrad(0)) return [null];
    const [x, approximate] = ctx.args as [Tensor, P.GeluApproximate];
    if (approximate === 'tanh') {
      // PyTorch's GeluBackward (tanh): 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2),
      // t = tanh(beta (x + kappa x^3)).
      const x2 = mul(x, x);
      const inner = mul(add(x, mul(mul(x2, x), GELU_KAPPA)), GELU_BETA);
      const t = tanh(inner);
      const left = mul(add(t, 1), 0.5);
      const right = mul(mul(mul(x, 0.5), oneMinusSq(t)), mul(add(mul(x2, 3 * GELU_KAPPA), 1), GELU_BETA));
      return [mul(g!, add(left, right))];
    }
    // d/dx x Phi(x) = Phi(x) + x phi(x)
    const cdf = mul(add(erf(mul(x, SQRT1_2)), 1), 0.5);
    const pdf = mul(exp(mul(mul(x, x), -0.5)), INV_SQRT_2PI);
    return [mul(g!, add(cdf, mul(x, pdf)))];
  },
  { save: ['self'] },
);

// softplus: g * sigmoid(beta x), and g where beta x > threshold (the linear region).
defineBackward(
  P.softplus,
  (ctx, [g]) => {
    if (!ctx.needsInputGrad(0)) return [null];
    const [x, beta, threshold] = ctx.args as [Tensor, number, number];
    const bx = mul(x, beta);
    return [where(gt(bx, threshold), g!, mul(g!, sigmoid(bx)))];
  },
  { save: ['self'] },
);

// ---------------------------------------------------------------------------------------------
// Binary arithmetic
// ---------------------------------------------------------------------------------------------

// sub(self, other, alpha) = self - alpha * other
function subBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const alpha = Number(ctx.args[2]);
  return [gradFor(ctx, 0, () => g), gradFor(ctx, 1, () => mul(g, -alpha))];
}
defineBackward(P.sub, (ctx, [g]) => subBackward(ctx, g!));
defineBackward(P.sub_, (ctx, [g]) => subBackward(ctx, g!));

function mulBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const [self, other] = ctx.args as [Tensor, Operand];
  return [gradFor(ctx, 0, () => mul(g, other)), gradFor(ctx, 1, () => mul(g, self))];
}
defineBackward(P.mul, (ctx, [g]) => mulBackward(ctx, g!), { save: ['self', 'other'] });
defineBackward(P.mul_, (ctx, [g]) => mulBackward(ctx, g!), { save: ['self', 'other'] });

// True division: d/dself = g / other, d/dother = -g self / other^2. With a rounding mode the
// result is piecewise constant: zero gradients, as in PyTorch.
function divBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const [self, other, roundingMode] = ctx.args as [Tensor, Operand, P.RoundingMode];
  if (roundingMode !== null && roundingMode !== undefined) {
    return [gradFor(ctx, 0, (a) => zerosLike(a, { dtype: g.dtype })), gradFor(ctx, 1, (a) => zerosLike(a, { dtype: g.dtype }))];
  }
  return [gradFor(ctx, 0, () => div(g, other)), gradFor(ctx, 1, (o) => neg(div(mul(g, self), mul(o, o))))];
}
defineBackward(P.div, (ctx, [g]) => divBackward(ctx, g!), { save: ['self', 'other'] });
defineBackward(P.div_, (ctx, [g]) => divBackward(ctx, g!), { save: ['self', 'other'] });

// remainder(a, b) = a - floor(a / b) b: d/da = g, d/db = -g floor(a / b).
function remainderBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const self = ctx.args[0] as Operand;
  const floorQuot = (o: Tensor): Tensor => div(isTensor(self) ? self : fullLike(o, self, { dtype: g.dtype }), o, 'floor');
  return [gradFor(ctx, 0, () => g), gradFor(ctx, 1, (o) => neg(mul(g, floorQuot(o))))];
}
defineBackward(P.remainder, (ctx, [g]) => remainderBackward(ctx, g!), { save: ['self', 'other'] });
defineBackward(P.remainderScalar, (ctx, [g]) => remainderBackward(ctx, g!), { save: ['self', 'other'] });

// pow(base, exponent):
//   d/dbase = g exponent base^(exponent - 1), 0 where exponent == 0;
//   d/dexponent = g out log(base), 0 where base == 0 and exponent >= 0 (PyTorch's convention).
function powBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const [base, exponent] = ctx.args as [Operand, Operand];
  const out = ctx.outputs[0]!;
  const dBase = (b: Tensor): Tensor => {
    if (!isTensor(exponent)) {
      const e = Number(exponent);
      return e === 0 ? zerosLike(g) : mul(g, mul(pow(b, e - 1), e));
    }
    return where(eq(exponent, 0), 0, mul(g, mul(pow(b, sub(exponent, 1)), exponent)));
  };
  const dExponent = (e: Tensor): Tensor => {
    if (!isTensor(base)) {
      const b = Number(base);
      const d = mul(g, mul(out, Math.log(b)));
      return b === 0 ? where(ge(e, 0), 0, d) : d;
    }
    const d = mul(g, mul(out, log(base)));
    return where(logicalAnd(eq(base, 0), ge(e, 0)), 0, d);
  };
  return [gradFor(ctx, 0, dBase), gradFor(ctx, 1, dExponent)];
}
defineBackward(P.pow, (ctx, [g]) => powBackward(ctx, g!), { save: ['self', 'exponent'], saveOutputs: true });
defineBackward(P.powScalar, (ctx, [g]) => powBackward(ctx, g!), { save: ['self', 'exponent'], saveOutputs: true });

// maximum/minimum: the selected input gets g; ties split it half/half (PyTorch).
function extremumBackward(ctx: BackwardContext, g: Tensor, isMax: boolean): (Tensor | null)[] {
  const [self, other] = ctx.args as [Tensor, Tensor];
  const half = (): Tensor => where(eq(self, other), mul(g, 0.5), g);
  const selfLoses = (): Tensor => (isMax ? lt(self, other) : gt(self, other));
  const otherLoses = (): Tensor => (isMax ? gt(self, other) : lt(self, other));
  return [gradFor(ctx, 0, () => where(selfLoses(), 0, half())), gradFor(ctx, 1, () => where(otherLoses(), 0, half()))];
}
defineBackward(P.maximum, (ctx, [g]) => extremumBackward(ctx, g!, true), { save: ['self', 'other'] });
defineBackward(P.minimum, (ctx, [g]) => extremumBackward(ctx, g!, false), { save: ['self', 'other'] });

// atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2).
defineBackward(
  P.atan2,
  (ctx, [g]) => {
    const [self, other] = ctx.args as [Tensor, Tensor];
    const scaled = (): Tensor => div(g!, add(mul(self, self), mul(other, other)));
    return [gradFor(ctx, 0, () => mul(scaled(), other)), gradFor(ctx, 1, () => neg(mul(scaled(), self)))];
  },
  { save: ['self', 'other'] },
);

// logaddexp(a, b): d/da = exp(a - out), d/db = exp(b - out) (the softmax weights of a and b).
defineBackward(
  P.logaddexp,
  (ctx, [g]) => {
    const [self, other] = ctx.args as [Tensor, Tensor];
    const out = ctx.outputs[0]!;
    return [gradFor(ctx, 0, () => mul(g!, exp(sub(self, out)))), gradFor(ctx, 1, () => mul(g!, exp(sub(other, out))))];
  },
  { save: ['self', 'other'], saveOutputs: true },
);

// hypot(a, b): d/da = a / out, d/db = b / out.
defineBackward(
  P.hypot,
  (ctx, [g]) => {
    const [self, other] = ctx.args as [Tensor, Tensor];
    const scaled = (): Tensor => div(g!, ctx.outputs[0]!);
    return [gradFor(ctx, 0, () => mul(scaled(), self)), gradFor(ctx, 1, () => mul(scaled(), other))];
  },
  { save: ['self', 'other'], saveOutputs: true },
);

// ---------------------------------------------------------------------------------------------
// clamp, where, lerp
// ---------------------------------------------------------------------------------------------

const given = <T>(x: T | null | undefined): x is T => x !== null && x !== undefined;

// Gradient passes where min <= x <= max (PyTorch's clamp_backward).
function clampBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const [self, min, max] = ctx.args as [Tensor, ScalarValue | null, ScalarValue | null];
  return [
    gradFor(ctx, 0, () => {
      let pass: Tensor | null = given(min) ? ge(self, min) : null;
      if (given(max)) pass = pass ? logicalAnd(pass, le(self, max)) : le(self, max);
      return where(pass!, g, 0);
    }),
  ];
}
defineBackward(P.clamp, (ctx, [g]) => clampBackward(ctx, g!), { save: ['self'] });
defineBackward(P.clamp_, (ctx, [g]) => clampBackward(ctx, g!), { save: ['self'] });

// Tensor bounds (PyTorch's clamp_backward_min_max): self gets g where min <= x <= max; min gets g
// where x < min (and min < max); max gets g where x > max or max < min (max wins when they cross).
function clampTensorBackward(ctx: BackwardContext, g: Tensor): (Tensor | null)[] {
  const [self, min, max] = ctx.args as [Tensor, Tensor | null, Tensor | null];
  if (given(min) && given(max)) {
    return [
      gradFor(ctx, 0, () => where(logicalAnd(ge(self, min), le(self, max)), g, 0)),
      gradFor(ctx, 1, () => where(logicalAnd(lt(self, min), lt(min, max)), g, 0)),
      gradFor(ctx, 2, () => where(logicalOr(gt(self, max), lt(max, min)), g, 0)),
    ];
  }
  if (given(min)) return [gradFor(ctx, 0, () => where(ge(self, min), g, 0)), gradFor(ctx, 1, () => where(lt(self, min), g, 0)), null];
  return [gradFor(ctx, 0, () => where(le(self, max!), g, 0)), null, gradFor(ctx, 2, () => where(gt(self, max!), g, 0))];
}
defineBackward(P.clampTensor, (ctx, [g]) => clampTensorBackward(ctx, g!), { save: ['self', 'min', 'max'] });
defineBackward(P.clampTensor_, (ctx, [g]) => clampTensorBackward(ctx, g!), { save: ['self', 'min', 'max'] });

// where(cond, a, b): a gets g where cond, b elsewhere; the condition gets none.
defineBackward(
  P.where,
  (ctx, [g]) => {
    const cond = ctx.args[0] as Tensor;
    return [null, gradFor(ctx, 1, () => where(cond, g!, 0)), gradFor(ctx, 2, () => where(cond, 0, g!))];
  },
  { save: ['condition'] },
);

// lerp(a, b, w) = a + w (b - a): d/da = g (1 - w), d/db = g w, d/dw = g (b - a).
defineBackward(
  P.lerp,
  (ctx, [g]) => {
    const [self, end, weight] = ctx.args as [Tensor, Tensor, Tensor | number];
    return [
      gradFor(ctx, 0, () => mul(g!, isTensor(weight) ? oneMinus(weight) : 1 - weight)),
      gradFor(ctx, 1, () => mul(g!, weight)),
      gradFor(ctx, 2, () => mul(g!, sub(end, self))),
    ];
  },
  { save: ['self', 'end', 'weight'] },
);

// ---------------------------------------------------------------------------------------------
// fill_, zero_
// ---------------------------------------------------------------------------------------------

// The old value of self is overwritten: it gets a zero gradient (PyTorch's zeros_like(grad)). A
// 0-dim tensor value was broadcast to every element: it gets the sum of g.
defineBackward(P.fill_, (ctx, [g]) => {
  const value = ctx.args[1];
  const dValue = isTensor(value) && ctx.needsInputGrad(1) ? sum(g!).to(value.device) : null;
  return [ctx.needsInputGrad(0) ? zerosLike(g!) : null, dValue];
});
defineBackward(P.zero_, (ctx, [g]) => [ctx.needsInputGrad(0) ? zerosLike(g!) : null]);
