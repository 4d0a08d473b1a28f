/** Public functions and Tensor methods for the pointwise ops. */
import type { Tensor } from '../tensor/tensor.js';
import { dispatch } from '../ops/dispatch.js';
import * as P from '../ops/defs/pointwise.js';
import type { ScalarValue } from '../ops/schema.js';
import { tensor } from './data.js';
import { installMethods } from './install.js';

export type { GeluApproximate } from '../ops/defs/pointwise.js';
export type DivRoundingMode = 'trunc' | 'floor';

// Unary ---------------------------------------------------------------------------------------

export const neg = (self: Tensor): Tensor => dispatch(P.neg, self);
export const abs = (self: Tensor): Tensor => dispatch(P.abs, self);
/** Sign of each element (-1, 0, 1); NaN gives 0, as in PyTorch. Bool stays bool. */
export const sign = (self: Tensor): Tensor => dispatch(P.sign, self);
export const exp = (self: Tensor): Tensor => dispatch(P.exp, self);
export const expm1 = (self: Tensor): Tensor => dispatch(P.expm1, self);
export const log = (self: Tensor): Tensor => dispatch(P.log, self);
export const log2 = (self: Tensor): Tensor => dispatch(P.log2, self);
export const log10 = (self: Tensor): Tensor => dispatch(P.log10, self);
export const log1p = (self: Tensor): Tensor => dispatch(P.log1p, self);
export const sqrt = (self: Tensor): Tensor => dispatch(P.sqrt, self);
export const rsqrt = (self: Tensor): Tensor => dispatch(P.rsqrt, self);
export const reciprocal = (self: Tensor): Tensor => dispatch(P.reciprocal, self);
/** x * x; keeps integer dtypes, bool gives int64 (as torch.square = pow(x, 2)). */
export const square = (self: Tensor): Tensor => dispatch(P.square, self);
export const sin = (self: Tensor): Tensor => dispatch(P.sin, self);
export const cos = (self: Tensor): Tensor => dispatch(P.cos, self);
export const tan = (self: Tensor): Tensor => dispatch(P.tan, self);
export const tanh = (self: Tensor): Tensor => dispatch(P.tanh, self);
export const sigmoid = (self: Tensor): Tensor => dispatch(P.sigmoid, self);
export const erf = (self: Tensor): Tensor => dispatch(P.erf, self);
export const relu = (self: Tensor): Tensor => dispatch(P.relu, self);
export const silu = (self: Tensor): Tensor => dispatch(P.silu, self);
/** Rounds down; integer tensors are returned as copies. */
export const floor = (self: Tensor): Tensor => dispatch(P.floor, self);
export const ceil = (self: Tensor): Tensor => dispatch(P.ceil, self);
/** Rounds half to even, like torch.round. */
export const round = (self: Tensor): Tensor => dispatch(P.round, self);
export const trunc = (self: Tensor): Tensor => dispatch(P.trunc, self);
export const isnan = (self: Tensor): Tensor => dispatch(P.isnan, self);
export const isinf = (self: Tensor): Tensor => dispatch(P.isinf, self);
export const isfinite = (self: Tensor): Tensor => dispatch(P.isfinite, self);
export const logicalNot = (self: Tensor): Tensor => dispatch(P.logicalNot, self);

/** GELU: x * Phi(x) with the exact erf form (`'none'`) or the tanh approximation (`'tanh'`). */
export function gelu(self: Tensor, approximate: P.GeluApproximate = 'none'): Tensor {
  return dispatch(P.gelu, self, approximate);
}

/** (1/beta) * log(1 + exp(beta * x)), and x itself where beta * x > threshold. */
export function softplus(self: Tensor, beta = 1, threshold = 20): Tensor {
  return dispatch(P.softplus, self, beta, threshold);
}

export const relu_ = (self: Tensor): Tensor => dispatch(P.relu_, self);
export const neg_ = (self: Tensor): Tensor => dispatch(P.neg_, self);
export const exp_ = (self: Tensor): Tensor => dispatch(P.exp_, self);
export const sigmoid_ = (self: Tensor): Tensor => dispatch(P.sigmoid_, self);
export const tanh_ = (self: Tensor): Tensor => dispatch(P.tanh_, self);

// Binary --------------------------------------------------------------------------------------

/** self - alpha * other. */
export function sub(self: Tensor, other: Tensor | ScalarValue, alpha: ScalarValue = 1): Tensor {
  return dispatch(P.sub, self, other, alpha);
}
export function sub_(self: Tensor, other: Tensor | ScalarValue, alpha: ScalarValue = 1): Tensor {
  return dispatch(P.sub_, self, other, alpha);
}
export function mul(self: Tensor, other: Tensor | ScalarValue): Tensor {
  return dispatch(P.mul, self, other);
}
export function mul_(self: Tensor, other: Tensor | ScalarValue): Tensor {
  return dispatch(P.mul_, self, other);
}
/**
 * Division. Without a rounding mode it is true division (integer inputs give float32); 'trunc'
 * rounds toward zero and 'floor' toward -inf (Python's //), keeping integer dtypes; integer
 * division by zero then throws.
 */
export function div(self: Tensor, other: Tensor | ScalarValue, roundingMode?: DivRoundingMode | null): Tensor {
  return dispatch(P.div, self, other, roundingMode ?? null);
}
export function div_(self: Tensor, other: Tensor | ScalarValue, roundingMode?: DivRoundingMode | null): Tensor {
  return dispatch(P.div_, self, other, roundingMode ?? null);
}

function isTensorArg(x: unknown): x is Tensor {
  return typeof x === 'object' && x !== null;
}

/** Python-style remainder (the result has the sign of the divisor); either side may be a scalar. */
export function remainder(self: Tensor | ScalarValue, other: Tensor | ScalarValue): Tensor {
  if (isTensorArg(self)) return dispatch(P.remainder, self, other);
  if (!isTensorArg(other)) throw new TypeError(`remainder: at least one of 'self' (${String(self)}) and 'other' (${String(other)}) must be a Tensor`);
  return dispatch(P.remainderScalar, self, other);
}

/** base ** exponent: tensor^tensor, tensor^scalar or scalar^tensor. */
export function pow(base: Tensor | ScalarValue, exponent: Tensor | ScalarValue): Tensor {
  if (isTensorArg(base)) return dispatch(P.pow, base, exponent);
  if (!isTensorArg(exponent)) throw new TypeError(`pow: at least one of 'self' (${String(base)}) and 'exponent' (${String(exponent)}) must be a Tensor`);
  return dispatch(P.powScalar, base, exponent);
}

/** Elementwise maximum; NaN in either input gives NaN. */
export const maximum = (self: Tensor, other: Tensor): Tensor => dispatch(P.maximum, self, other);
/** Elementwise minimum; NaN in either input gives NaN. */
export const minimum = (self: Tensor, other: Tensor): Tensor => dispatch(P.minimum, self, other);
export const atan2 = (self: Tensor, other: Tensor): Tensor => dispatch(P.atan2, self, other);
/** log(exp(self) + exp(other)) without overflow; integer inputs give float32. */
export const logaddexp = (self: Tensor, other: Tensor): Tensor => dispatch(P.logaddexp, self, other);
/** sqrt(self^2 + other^2) without overflow; inf if either is infinite (even with a NaN); integer inputs give float32. */
export const hypot = (self: Tensor, other: Tensor): Tensor => dispatch(P.hypot, self, other);

export const eq = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.eq, self, other);
export const ne = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.ne, self, other);
export const lt = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.lt, self, other);
export const le = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.le, self, other);
export const gt = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.gt, self, other);
export const ge = (self: Tensor, other: Tensor | ScalarValue): Tensor => dispatch(P.ge, self, other);

export const logicalAnd = (self: Tensor, other: Tensor): Tensor => dispatch(P.logicalAnd, self, other);
export const logicalOr = (self: Tensor, other: Tensor): Tensor => dispatch(P.logicalOr, self, other);
export const logicalXor = (self: Tensor, other: Tensor): Tensor => dispatch(P.logicalXor, self, other);

// clamp, where, lerp, fill_, zero_ --------------------------------------------------------------

export type ClampBound = Tensor | ScalarValue | null | undefined;

/** A scalar bound as a zero-dim tensor of its default dtype (same promotion as the scalar). */
function boundTensor(b: ClampBound, self: Tensor): Tensor | null {
  if (b === null || b === undefined) return null;
  if (isTensorArg(b)) return b;
  const dtype = typeof b === 'boolean' ? 'bool' : Number.isInteger(b) ? 'int64' : 'float32';
  return tensor(b, { dtype, device: self.device });
}

function clampArgs(self: Tensor, min: ClampBound, max: ClampBound): { tensors: boolean; lo: ClampBound; hi: ClampBound } {
  const tensors = isTensorArg(min) || isTensorArg(max);
  if (!tensors) return { tensors, lo: min ?? null, hi: max ?? null };
  return { tensors, lo: boundTensor(min, self), hi: boundTensor(max, self) };
}

/** Clamps into [min, max]; either bound (scalar or tensor) may be omitted, not both. */
export function clamp(self: Tensor, min?: ClampBound, max?: ClampBound): Tensor {
  const a = clampArgs(self, min, max);
  if (a.tensors) return dispatch(P.clampTensor, self, a.lo as Tensor | null, a.hi as Tensor | null);
  return dispatch(P.clamp, self, a.lo as ScalarValue | null, a.hi as ScalarValue | null);
}
export function clamp_(self: Tensor, min?: ClampBound, max?: ClampBound): Tensor {
  const a = clampArgs(self, min, max);
  if (a.tensors) return dispatch(P.clampTensor_, self, a.lo as Tensor | null, a.hi as Tensor | null);
  return dispatch(P.clamp_, self, a.lo as ScalarValue | null, a.hi as ScalarValue | null);
}

/** condition ? self : other, elementwise with broadcasting; `condition` must be a bool tensor. */
export function where(condition: Tensor, self: Tensor | ScalarValue, other: Tensor | ScalarValue): Tensor {
  return dispatch(P.where, condition, self, other);
}

/** self + weight * (end - self). */
export function lerp(self: Tensor, end: Tensor, weight: Tensor | number): Tensor {
  return dispatch(P.lerp, self, end, weight);
}

/** Fills self with a scalar or the value of a zero-dim tensor (cast to self's dtype). */
export function fill_(self: Tensor, value: Tensor | ScalarValue): Tensor {
  return dispatch(P.fill_, self, value);
}
export function zero_(self: Tensor): Tensor {
  return dispatch(P.zero_, self);
}

declare module '../tensor/tensor.js' {
  interface Tensor {
    neg(): Tensor;
    abs(): Tensor;
    sign(): Tensor;
    exp(): Tensor;
    expm1(): Tensor;
    log(): Tensor;
    log2(): Tensor;
    log10(): Tensor;
    log1p(): Tensor;
    sqrt(): Tensor;
    rsqrt(): Tensor;
    reciprocal(): Tensor;
    square(): Tensor;
    sin(): Tensor;
    cos(): Tensor;
    tan(): Tensor;
    tanh(): Tensor;
    sigmoid(): Tensor;
    erf(): Tensor;
    relu(): Tensor;
    gelu(approximate?: P.GeluApproximate): Tensor;
    silu(): Tensor;
    softplus(beta?: number, threshold?: number): Tensor;
    floor(): Tensor;
    ceil(): Tensor;
    round(): Tensor;
    trunc(): Tensor;
    isnan(): Tensor;
    isinf(): Tensor;
    isfinite(): Tensor;
    logicalNot(): Tensor;
    relu_(): Tensor;
    neg_(): Tensor;
    exp_(): Tensor;
    sigmoid_(): Tensor;
    tanh_(): Tensor;
    sub(other: Tensor | ScalarValue, alpha?: ScalarValue): Tensor;
    sub_(other: Tensor | ScalarValue, alpha?: ScalarValue): Tensor;
    mul(other: Tensor | ScalarValue): Tensor;
    mul_(other: Tensor | ScalarValue): Tensor;
    div(other: Tensor | ScalarValue, roundingMode?: DivRoundingMode | null): Tensor;
    div_(other: Tensor | ScalarValue, roundingMode?: DivRoundingMode | null): Tensor;
    remainder(other: Tensor | ScalarValue): Tensor;
    pow(exponent: Tensor | ScalarValue): Tensor;
    maximum(other: Tensor): Tensor;
    minimum(other: Tensor): Tensor;
    atan2(other: Tensor): Tensor;
    logaddexp(other: Tensor): Tensor;
    hypot(other: Tensor): Tensor;
    eq(other: Tensor | ScalarValue): Tensor;
    ne(other: Tensor | ScalarValue): Tensor;
    lt(other: Tensor | ScalarValue): Tensor;
    le(other: Tensor | ScalarValue): Tensor;
    gt(other: Tensor | ScalarValue): Tensor;
    ge(other: Tensor | ScalarValue): Tensor;
    logicalAnd(other: Tensor): Tensor;
    logicalOr(other: Tensor): Tensor;
    logicalXor(other: Tensor): Tensor;
    clamp(min?: ClampBound, max?: ClampBound): Tensor;
    clamp_(min?: ClampBound, max?: ClampBound): Tensor;
    lerp(end: Tensor, weight: Tensor | number): Tensor;
    fill_(value: Tensor | ScalarValue): Tensor;
    zero_(): Tensor;
  }
}

installMethods({
  neg,
  abs,
  sign,
  exp,
  expm1,
  log,
  log2,
  log10,
  log1p,
  sqrt,
  rsqrt,
  reciprocal,
  square,
  sin,
  cos,
  tan,
  tanh,
  sigmoid,
  erf,
  relu,
  gelu,
  silu,
  softplus,
  floor,
  ceil,
  round,
  trunc,
  isnan,
  isinf,
  isfinite,
  logicalNot,
  relu_,
  neg_,
  exp_,
  sigmoid_,
  tanh_,
  sub,
  sub_,
  mul,
  mul_,
  div,
  div_,
  remainder,
  pow,
  maximum,
  minimum,
  atan2,
  logaddexp,
  hypot,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logicalAnd,
  logicalOr,
  logicalXor,
  clamp,
  clamp_,
  lerp,
  fill_,
  zero_,
});
