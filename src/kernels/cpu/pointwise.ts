/**
 * CPU kernels for the pointwise ops (src/ops/defs/pointwise.ts). Composite ops
 * (kernels/math/composites.ts) are registered by name, each running the JavaScript text the
 * compiler fuses (kernels/math/js.ts) as its element function.
 */
import * as P from '../../ops/defs/pointwise.js';
import { promotedDtype } from '../../ops/meta-helpers.js';
import { getOp, registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating, toFloating } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, shapeEquals } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { castValue } from '../../tensor/typed.js';
import { allocOut, denseValues } from './numeric.js';
import { copyInto, mapBinary, mapBinaryInto, mapTernary, mapUnary, mapUnaryInto } from './pointwise-loop.js';
import * as M from './pointwise-math.js';
import { COMPOSITES } from '../math/composites.js';
import { compositeFn } from '../math/js.js';
import { nativeElementwise, nativeUnary, nativeUnaryInPlace } from './native/ops.js';
import { nativeMul, nativeSilu } from './native/rows.js';
import type { NativeUnary } from './native/ops-c.js';

type Operand = Tensor | ScalarValue;
type Fn1 = (x: number) => number;
type Fn2 = (x: number, y: number) => number;

/**
 * Brings an operand to the dtype the op computes in, as PyTorch's TensorIterator casts inputs to
 * the common dtype: scalars (and zero-dim tensors of another dtype) are rounded to a floating
 * compute dtype, e.g. 0.1 becomes float16(0.1) in a float16 op. Dimensioned tensors are read as is.
 */
function prep(x: Operand, dtype: DType): Operand {
  if (typeof x === 'object') {
    if (x.ndim !== 0 || x.dtype === dtype || !isFloating(dtype)) return x;
    return castValue(x.toFlatArray()[0]!, dtype);
  }
  if (isFloating(dtype)) return castValue(Number(x), dtype);
  return Number(x);
}

const wraps32 = (d: DType): boolean => d === 'int32' || d === 'uint8';

/**
 * In-place ops read `x` while writing `self`. When x is another view of self's storage (x.sub_(x.t()),
 * x.mul_(x[0])), reading it during the write would see updated values, so it is copied first.
 * Exactly the same view is safe: each element is read before it is written.
 */
function unalias(self: Tensor, x: Operand): Operand {
  if (typeof x !== 'object' || x.storage !== self.storage) return x;
  if (x.offset === self.offset && shapeEquals(x.shape, self.shape) && x.strides.every((st, i) => st === self.strides[i])) return x;
  const copy = allocOut({ shape: x.shape, strides: contiguousStrides(x.shape), dtype: x.dtype, device: x.device });
  copyInto(copy, x);
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------------------------

const unaryFns: [P.UnaryOp, Fn1][] = [
  [P.neg, (x) => -x],
  [P.abs, Math.abs],
  [P.sign, M.sign],
  [P.exp, Math.exp],
  [P.expm1, Math.expm1],
  [P.log, Math.log],
  [P.log2, Math.log2],
  [P.log10, Math.log10],
  [P.log1p, Math.log1p],
  [P.sqrt, Math.sqrt],
  [P.rsqrt, (x) => 1 / Math.sqrt(x)],
  [P.reciprocal, (x) => 1 / x],
  [P.sin, Math.sin],
  [P.cos, Math.cos],
  [P.tan, Math.tan],
  [P.tanh, Math.tanh],
  [P.sigmoid, M.sigmoid],
  [P.erf, M.erf],
  [P.relu, (x) => (x > 0 || x !== x ? x : 0)],
  [P.silu, M.silu],
  [P.floor, Math.floor],
  [P.ceil, Math.ceil],
  [P.round, M.roundHalfEven],
  [P.trunc, Math.trunc],
  [P.isnan, (x) => (x !== x ? 1 : 0)],
  [P.isinf, (x) => (x === Infinity || x === -Infinity ? 1 : 0)],
  [P.isfinite, (x) => (Number.isFinite(x) ? 1 : 0)],
  [P.logicalNot, (x) => (x === 0 ? 1 : 0)],
];

/**
 * Unary ops with a native float32 kernel (native/ops-c.ts) on the native CPU path. exp, tanh,
 * sigmoid, silu and gelu there are the vectorised float32 algorithms of the compiled kernels
 * (within a few ulp of the correctly rounded value, like PyTorch's vectorised CPU kernels); the
 * rest are exact.
 */
const nativeUnaryOf = new Map<P.UnaryOp, NativeUnary>([
  [P.relu, 'relu'],
  [P.sigmoid, 'sigmoid'],
  [P.tanh, 'tanh'],
  [P.exp, 'exp'],
  [P.silu, 'silu'],
  [P.neg, 'neg'],
  [P.abs, 'abs'],
  [P.sqrt, 'sqrt'],
]);

/** Functions whose float32-accurate form would lose precision in a float64 result. */
const float64Of = new Map<P.UnaryOp, (x: number) => number>([[P.erf, M.erf64]]);

for (const [op, f] of unaryFns) {
  const nat = nativeUnaryOf.get(op);
  const f64 = float64Of.get(op);
  const pick = (ctx: { out: OutMeta }): ((x: number) => number) => (f64 && ctx.out.dtype === 'float64' ? f64 : f);
  // silu: bfloat16 (and float32 the ops kernel does not take) through the native row kernel.
  const rowSilu = op === P.silu ? nativeSilu : (): null => null;
  if (nat) registerKernel(op, 'cpu', (ctx, self) => nativeUnary(ctx.out, self, nat) ?? rowSilu(ctx.out, self) ?? mapUnary(ctx.out, self, pick(ctx)));
  else registerKernel(op, 'cpu', (ctx, self) => mapUnary(ctx.out, self, pick(ctx)));
}

registerKernel(
  P.square,
  'cpu',
  (ctx, self) => nativeUnary(ctx.out, self, 'square') ?? mapUnary(ctx.out, self, wraps32(ctx.out.dtype) ? (x) => Math.imul(x, x) : (x) => x * x),
);

registerKernel(
  P.gelu,
  'cpu',
  (ctx, self, approximate) =>
    nativeUnary(ctx.out, self, approximate === 'tanh' ? 'geluTanh' : 'gelu') ?? mapUnary(ctx.out, self, approximate === 'tanh' ? M.geluTanh : ctx.out.dtype === 'float64' ? M.geluErf64 : M.geluErf),
);

registerKernel(P.softplus, 'cpu', (ctx, self, betaArg, thresholdArg) => {
  const beta = Number(betaArg);
  const threshold = Number(thresholdArg);
  return mapUnary(ctx.out, self, (x) => (x * beta > threshold ? x : Math.log1p(Math.exp(x * beta)) / beta));
});

const inplaceUnary: [P.UnaryOp, Fn1][] = [
  [P.relu_, (x) => (x > 0 || x !== x ? x : 0)],
  [P.neg_, (x) => -x],
  [P.exp_, Math.exp],
  [P.sigmoid_, M.sigmoid],
  [P.tanh_, Math.tanh],
];

const nativeInplace = new Map<P.UnaryOp, NativeUnary>([[P.relu_, 'relu']]);

for (const [op, f] of inplaceUnary) {
  const nat = nativeInplace.get(op);
  registerKernel(op, 'cpu', (_ctx, self) => {
    if (!(nat && nativeUnaryInPlace(self, nat))) mapUnaryInto(self, self, f);
    return self;
  });
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic
// ---------------------------------------------------------------------------------------------

// Kernel argument types widen scalars to Tensor | ScalarValue (schema.ts Realize); the meta
// function has already checked them, so they are narrowed here.
const asScalar = (x: unknown): ScalarValue | null => (x === null || x === undefined ? null : (x as ScalarValue));
const asMode = (x: unknown): P.RoundingMode => (x === null || x === undefined ? null : (x as 'trunc' | 'floor'));

function subFn(alpha: unknown): Fn2 {
  const a = Number(alpha);
  return a === 1 ? (x, y) => x - y : (x, y) => x - a * y;
}

registerKernel(P.sub, 'cpu', (ctx, self, other, alpha) => {
  const dt = ctx.out.dtype;
  if (Number(alpha) === 1) {
    const r = nativeElementwise(ctx.out, 'sub', prep(self, dt), prep(other, dt));
    if (r) return r;
  }
  return mapBinary(ctx.out, prep(self, dt), prep(other, dt), subFn(alpha));
});

registerKernel(P.sub_, 'cpu', (_ctx, self, other, alpha) => {
  const dt = promotedDtype([self, other]);
  mapBinaryInto(self, self, prep(unalias(self, other), dt), subFn(alpha));
  return self;
});

/** `dest` is the dtype stored into: int32/uint8 products keep their exact low 32 bits with imul. */
function mulFn(compute: DType, dest: DType): Fn2 {
  return !isFloating(compute) && wraps32(dest) ? Math.imul : (x, y) => x * y;
}

registerKernel(P.mul, 'cpu', (ctx, self, other) => {
  const dt = ctx.out.dtype;
  // Same-shape bfloat16 products keep the row kernel (rows.ts); the broadcasting kernel takes the rest.
  const broadcasting = (): Tensor | null => nativeElementwise(ctx.out, 'mul', prep(self, dt), prep(other, dt));
  const r = dt === 'bfloat16' ? (nativeMul(ctx.out, self, other) ?? broadcasting()) : (broadcasting() ?? nativeMul(ctx.out, self, other));
  if (r) return r;
  return mapBinary(ctx.out, prep(self, dt), prep(other, dt), mulFn(dt, dt));
});

registerKernel(P.mul_, 'cpu', (_ctx, self, other) => {
  const dt = promotedDtype([self, other]);
  mapBinaryInto(self, self, prep(unalias(self, other), dt), mulFn(dt, self.dtype));
  return self;
});

/** Integer division/remainder by zero: PyTorch raises ZeroDivisionError; so do we, before writing. */
function checkNoZeroDivisor(op: string, what: string, divisor: Operand, compute: DType, self: Operand): void {
  if (isFloating(compute)) return;
  const hasZero = typeof divisor === 'object' ? denseValues(divisor).includes(0) : Number(divisor) === 0;
  if (hasZero) {
    const d = typeof divisor === 'object' ? `${fmtShape(divisor.shape)} ${divisor.dtype} tensor` : `scalar ${String(divisor)}`;
    const s = typeof self === 'object' ? `${fmtShape(self.shape)} ${self.dtype}` : `scalar ${String(self)}`;
    throw new RangeError(`${op}: ZeroDivisionError: integer ${what} by zero (divisor 'other' ${d} contains 0, 'self' ${s})`);
  }
}

function divFn(op: string, self: Operand, other: Operand, roundingMode: P.RoundingMode, compute: DType): Fn2 {
  if (roundingMode === null || roundingMode === undefined) return (x, y) => x / y;
  checkNoZeroDivisor(op, `division (roundingMode '${roundingMode}')`, other, compute, self);
  if (roundingMode === 'trunc') return (x, y) => Math.trunc(x / y);
  return isFloating(compute) ? M.divFloorFloat : (x, y) => Math.floor(x / y);
}

function divCompute(self: Operand, other: Operand, roundingMode: P.RoundingMode): DType {
  const dt = promotedDtype([self, other]);
  return roundingMode === null || roundingMode === undefined ? toFloating(dt) : dt;
}

registerKernel(P.div, 'cpu', (ctx, self, other, roundingMode) => {
  const dt = ctx.out.dtype;
  if (roundingMode === null || roundingMode === undefined) {
    const r = nativeElementwise(ctx.out, 'div', prep(self, dt), prep(other, dt));
    if (r) return r;
  }
  const f = divFn('div', self, other, asMode(roundingMode), dt);
  return mapBinary(ctx.out, prep(self, dt), prep(other, dt), f);
});

registerKernel(P.div_, 'cpu', (_ctx, self, other, roundingMode) => {
  const dt = divCompute(self, other, asMode(roundingMode));
  const f = divFn('div_', self, other, asMode(roundingMode), dt);
  mapBinaryInto(self, self, prep(unalias(self, other), dt), f);
  return self;
});

function remainderKernel(meta: OutMeta, self: Operand, other: Operand): Tensor {
  const dt = meta.dtype;
  checkNoZeroDivisor('remainder', 'remainder', other, dt, self);
  return mapBinary(meta, prep(self, dt), prep(other, dt), isFloating(dt) ? M.remainderFloat : M.remainderInt);
}

registerKernel(P.remainder, 'cpu', (ctx, self, other) => remainderKernel(ctx.out, self, other));
registerKernel(P.remainderScalar, 'cpu', (ctx, self, other) => remainderKernel(ctx.out, self, other));

function powKernel(meta: OutMeta, self: Operand, exponent: Operand): Tensor {
  const dt = meta.dtype;
  const base = prep(self, dt);
  const e = prep(exponent, dt);
  if (isFloating(dt)) {
    if (e === 2) return mapBinary(meta, base, e, (x) => x * x);
    return mapBinary(meta, base, e, M.cpow);
  }
  const w = wraps32(dt);
  return mapBinary(meta, base, e, (x, y) => M.ipow(x, y, w));
}

registerKernel(P.pow, 'cpu', (ctx, self, exponent) => powKernel(ctx.out, self, exponent));
registerKernel(P.powScalar, 'cpu', (ctx, self, exponent) => powKernel(ctx.out, self, exponent));

// Composite ops: operands brought to the (floating) output dtype like any binary op's, computed in
// float64 and rounded once on store. The native path has none of them; it is not asked.
for (const [name, c] of COMPOSITES) {
  let f: ((...xs: number[]) => number) | undefined;
  registerKernel(getOp(name), 'cpu', (ctx, ...args: unknown[]) => {
    f ??= compositeFn(name); // built at first use, not when Kiln loads
    const dt = ctx.out.dtype;
    const xs = args.slice(0, c.arity).map((x) => prep(x as Operand, dt));
    if (c.arity === 1) return mapUnary(ctx.out, xs[0]!, f);
    if (c.arity === 2) return mapBinary(ctx.out, xs[0]!, xs[1]!, f);
    if (c.arity === 3) return mapTernary(ctx.out, xs[0]!, xs[1]!, xs[2]!, f);
    throw new Error(`${name}: composite pointwise ops take 1 to 3 operands, got ${c.arity}`);
  });
}

registerKernel(P.maximum, 'cpu', (ctx, self, other) => mapBinary(ctx.out, prep(self, ctx.out.dtype), prep(other, ctx.out.dtype), Math.max));
registerKernel(P.minimum, 'cpu', (ctx, self, other) => mapBinary(ctx.out, prep(self, ctx.out.dtype), prep(other, ctx.out.dtype), Math.min));
registerKernel(P.atan2, 'cpu', (ctx, self, other) => mapBinary(ctx.out, prep(self, ctx.out.dtype), prep(other, ctx.out.dtype), Math.atan2));

// ---------------------------------------------------------------------------------------------
// Comparisons and logical ops (bool outputs)
// ---------------------------------------------------------------------------------------------

const comparisons: [typeof P.eq, Fn2][] = [
  [P.eq, (x, y) => (x === y ? 1 : 0)],
  [P.ne, (x, y) => (x !== y ? 1 : 0)],
  [P.lt, (x, y) => (x < y ? 1 : 0)],
  [P.le, (x, y) => (x <= y ? 1 : 0)],
  [P.gt, (x, y) => (x > y ? 1 : 0)],
  [P.ge, (x, y) => (x >= y ? 1 : 0)],
];

for (const [op, f] of comparisons) {
  registerKernel(op, 'cpu', (ctx, self, other) => {
    // Compared in the promoted dtype: float16(x) == 0.1 compares against float16(0.1).
    const dt = promotedDtype([self, other]);
    return mapBinary(ctx.out, prep(self, dt), prep(other, dt), f);
  });
}

const logical: [typeof P.logicalAnd, Fn2][] = [
  [P.logicalAnd, (x, y) => (x !== 0 && y !== 0 ? 1 : 0)],
  [P.logicalOr, (x, y) => (x !== 0 || y !== 0 ? 1 : 0)],
  [P.logicalXor, (x, y) => ((x !== 0) !== (y !== 0) ? 1 : 0)],
];

for (const [op, f] of logical) registerKernel(op, 'cpu', (ctx, self, other) => mapBinary(ctx.out, self, other, f));

// ---------------------------------------------------------------------------------------------
// clamp, where, lerp, fill_, zero_
// ---------------------------------------------------------------------------------------------

const clampFn = (x: number, lo: number, hi: number): number => Math.min(Math.max(x, lo), hi);

function scalarBound(x: ScalarValue | null | undefined, dt: DType, dflt: number): number {
  return x === null || x === undefined ? dflt : (prep(x, dt) as number);
}

registerKernel(P.clamp, 'cpu', (ctx, self, min, max) => {
  const dt = ctx.out.dtype;
  const lo = scalarBound(asScalar(min), dt, -Infinity);
  const hi = scalarBound(asScalar(max), dt, Infinity);
  return mapUnary(ctx.out, self, (x) => Math.min(Math.max(x, lo), hi));
});

registerKernel(P.clamp_, 'cpu', (_ctx, self, min, max) => {
  const dt = promotedDtype([self, ...[asScalar(min), asScalar(max)].filter((b): b is ScalarValue => b !== null)]);
  const lo = scalarBound(asScalar(min), dt, -Infinity);
  const hi = scalarBound(asScalar(max), dt, Infinity);
  mapUnaryInto(self, self, (x) => Math.min(Math.max(x, lo), hi));
  return self;
});

function tensorBound(x: Tensor | null | undefined, dt: DType, dflt: number): Operand {
  return x === null || x === undefined ? dflt : prep(x, dt);
}

registerKernel(P.clampTensor, 'cpu', (ctx, self, min, max) => {
  const dt = ctx.out.dtype;
  return mapTernary(ctx.out, self, tensorBound(min, dt, -Infinity), tensorBound(max, dt, Infinity), clampFn);
});

registerKernel(P.clampTensor_, 'cpu', (_ctx, self, min, max) => {
  const dt = promotedDtype([self, ...[min, max].filter((b): b is Tensor => b !== null && b !== undefined)]);
  const lo = tensorBound(min, dt, -Infinity);
  const hi = tensorBound(max, dt, Infinity);
  // mapTernary allocates: compute into a dense temporary of self's dtype, then copy back.
  const tmp = mapTernary({ shape: self.shape, strides: contiguousStrides(self.shape), dtype: self.dtype, device: self.device }, self, lo, hi, clampFn);
  copyInto(self, tmp);
  tmp.dispose();
  return self;
});

registerKernel(P.where, 'cpu', (ctx, condition, self, other) => {
  const dt = ctx.out.dtype;
  return mapTernary(ctx.out, condition, prep(self, dt), prep(other, dt), (c, x, y) => (c !== 0 ? x : y));
});

registerKernel(P.lerp, 'cpu', (ctx, self, end, weight) => mapTernary(ctx.out, self, end, prep(weight, ctx.out.dtype), M.lerp));

registerKernel(P.fill_, 'cpu', (_ctx, self, value) => {
  copyInto(self, prep(value, self.dtype));
  return self;
});

registerKernel(P.zero_, 'cpu', (_ctx, self) => {
  copyInto(self, 0);
  return self;
});
