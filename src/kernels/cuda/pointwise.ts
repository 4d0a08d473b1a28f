/**
 * cuda kernels for the pointwise ops (src/ops/defs/pointwise.ts) and add/add_: each op is a C
 * expression for the generator, per compute type (float for fp32/fp16/bf16, double, int, long long).
 * Semantics follow the CPU kernels (NaN-propagating max/min/clamp/relu, Python-style floor division
 * and remainder, round half to even, C pow), so the two agree within rounding.
 *
 * Where an op's eager text is the compiler's, it comes from the shared CUDA math table
 * (kernels/math/cuda.ts, without fast math): the libm functions, rounding, atan2, maximum/minimum
 * and every composite op (kernels/math/composites.ts, registered here by name). The rest keep their
 * own text below, which differs from the fused kernels' only in form (parentheses, literal digits,
 * `fabsf` for `kiln_abs`, the eager prelude's helper names): changing it would change every
 * generated eager source (and its cache key) for no difference in the values computed.
 */
import * as P from '../../ops/defs/pointwise.js';
import { add, add_ } from '../../ops/defs/core.js';
import { promotedDtype } from '../../ops/meta-helpers.js';
import { getOp, registerKernel } from '../../ops/registry.js';
import type { ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating, toFloating } from '../../tensor/dtype.js';
import { contiguousStrides, fmtShape, shapeEquals } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { COMPOSITES } from '../math/composites.js';
import { CUDA_TEMPLATES, type CArg } from '../math/cuda.js';
import { computeType, type CType } from './codegen/ctypes.js';
import { allocOut } from './device.js';
import { runPointwise, type PwInput } from './pointwise-run.js';

const isFloatCt = (ct: CType): boolean => ct === 'float' || ct === 'double';
/** The C math function for a compute type: expf for float, exp for double. */
const mf = (name: string, ct: CType): string => (ct === 'float' ? `${name}f` : name);
/** A literal of the compute type (float literals carry the f suffix so math stays in fp32). */
const lit = (x: number, ct: CType): string => {
  if (ct !== 'float' && ct !== 'double') return String(Math.trunc(x));
  const text = Number.isInteger(x) ? `${x}.0` : String(x);
  return ct === 'float' ? `${text}f` : text;
};

type Expr1 = (ct: CType) => string;

/** The dtype the shared table keys a compute type's text on (it renders per compute type). */
const CT_DTYPE: Readonly<Record<CType, DType>> = { float: 'float32', double: 'float64', int: 'int32', 'long long': 'int64' };

/** Op `name` of the shared CUDA math table over operands a, b, c of compute type ct (no fast math: eager). */
function table(name: string, arity = 1): Expr1 {
  return (ct) => {
    const args: CArg[] = ['a', 'b', 'c'].slice(0, arity).map((expr) => ({ kind: 'value', expr, dtype: CT_DTYPE[ct], shape: [] }));
    const e = CUDA_TEMPLATES.get(name)?.(args, { out: CT_DTYPE[ct] });
    if (e === null || e === undefined) throw new Error(`cuda pointwise: the CUDA math table has no form of ${name} for compute type ${ct}`);
    return e;
  };
}

const unaryExprs: [P.UnaryOp, Expr1][] = [
  [P.neg, () => '-a'],
  [P.abs, (ct) => (isFloatCt(ct) ? `${mf('fabs', ct)}(a)` : '(a < 0 ? -a : a)')],
  [P.sign, () => 'kiln_sign(a)'],
  [P.exp, table('exp')],
  [P.expm1, table('expm1')],
  [P.log, table('log')],
  [P.log2, table('log2')],
  [P.log10, table('log10')],
  [P.log1p, table('log1p')],
  [P.sqrt, table('sqrt')],
  [P.rsqrt, (ct) => `${lit(1, ct)} / ${mf('sqrt', ct)}(a)`],
  [P.reciprocal, (ct) => `${lit(1, ct)} / a`],
  [P.sin, table('sin')],
  [P.cos, table('cos')],
  [P.tan, table('tan')],
  [P.tanh, table('tanh')],
  [P.sigmoid, (ct) => `${lit(1, ct)} / (${lit(1, ct)} + ${mf('exp', ct)}(-a))`],
  [P.erf, table('erf')],
  [P.relu, (ct) => `((a > ${lit(0, ct)} || a != a) ? a : ${lit(0, ct)})`],
  [P.silu, (ct) => `a / (${lit(1, ct)} + ${mf('exp', ct)}(-a))`],
  [P.floor, table('floor')],
  [P.ceil, table('ceil')],
  [P.round, table('round')],
  [P.trunc, table('trunc')],
  [P.square, () => 'a * a'],
  [P.isnan, (ct) => (isFloatCt(ct) ? '(a != a)' : '0')],
  [P.isinf, (ct) => (isFloatCt(ct) ? `(a == (${ct})KILN_INF || a == -(${ct})KILN_INF)` : '0')],
  [P.isfinite, (ct) => (isFloatCt(ct) ? `(a == a && a != (${ct})KILN_INF && a != -(${ct})KILN_INF)` : '1')],
  [P.logicalNot, () => '(a == 0)'],
];

/** The dtype a unary op computes in: its output's, except bool-valued tests, which read the input's. */
function unaryCompute(self: Tensor, outDtype: DType): DType {
  return outDtype === 'bool' ? self.dtype : outDtype;
}

/** Memoises an expression per compute type, so the hot path passes one interned string. */
function perCt(expr: Expr1): Expr1 {
  const memo = new Map<CType, string>();
  return (ct) => {
    let e = memo.get(ct);
    if (e === undefined) memo.set(ct, (e = expr(ct)));
    return e;
  };
}

for (const [op, raw] of unaryExprs) {
  const expr = perCt(raw);
  registerKernel(op, 'cuda', (ctx, self) => {
    const compute = unaryCompute(self, ctx.out.dtype);
    return runPointwise(op.name, expr(computeType(compute)), allocOut(ctx.out), [self], [], compute);
  });
}

const inplaceUnary: [P.UnaryOp, P.UnaryOp][] = [
  [P.relu_, P.relu],
  [P.neg_, P.neg],
  [P.exp_, P.exp],
  [P.sigmoid_, P.sigmoid],
  [P.tanh_, P.tanh],
];
for (const [op, base] of inplaceUnary) {
  const expr = perCt(unaryExprs.find(([o]) => o === base)![1]);
  registerKernel(op, 'cuda', (_ctx, self) => runPointwise(op.name, expr(computeType(self.dtype)), self, [self], [], self.dtype));
}

function geluExpr(approximate: unknown, ct: CType): string {
  return approximate === 'tanh'
    ? `${lit(0.5, ct)} * a * (${lit(1, ct)} + ${mf('tanh', ct)}(${lit(Math.sqrt(2 / Math.PI), ct)} * (a + ${lit(0.044715, ct)} * a * a * a)))`
    : `a * ${lit(0.5, ct)} * (${lit(1, ct)} + ${mf('erf', ct)}(a * ${lit(Math.SQRT1_2, ct)}))`;
}

registerKernel(P.gelu, 'cuda', (ctx, self, approximate) =>
  runPointwise('gelu', geluExpr(approximate, computeType(ctx.out.dtype)), allocOut(ctx.out), [self], [], ctx.out.dtype),
);

const softplusExpr = (ct: CType): string => `(a * s0 > s1) ? a : ${mf('log1p', ct)}(${mf('exp', ct)}(a * s0)) / s0`;
const lerpExpr = (ct: CType): string => `(${mf('fabs', ct)}(c) < ${lit(0.5, ct)} ? a + c * (b - a) : b - (b - a) * (${lit(1, ct)} - c))`;

registerKernel(P.softplus, 'cuda', (ctx, self, beta, threshold) =>
  runPointwise('softplus', softplusExpr(computeType(ctx.out.dtype)), allocOut(ctx.out), [self], [Number(beta), Number(threshold)], ctx.out.dtype),
);

// ---------------------------------------------------------------------------------------------
// Binary
// ---------------------------------------------------------------------------------------------

const asScalar = (x: unknown): ScalarValue | null => (x === null || x === undefined ? null : (x as ScalarValue));
type Operand = Tensor | ScalarValue;

/**
 * In-place ops read `x` while writing `self`: another view of self's storage (x.sub_(x.t())) is
 * copied first, since threads would read elements other threads already wrote. The identical view is
 * safe (each element is read and written by one thread).
 */
function unalias(self: Tensor, x: Operand): Operand {
  if (typeof x !== 'object' || x.storage !== self.storage) return x;
  if (x.offset === self.offset && shapeEquals(x.shape, self.shape) && x.strides.every((s, i) => s === self.strides[i])) return x;
  const copy = allocOut({ shape: x.shape, strides: contiguousStrides(x.shape), dtype: x.dtype, device: x.device });
  return runPointwise('copy', 'a', copy, [x], [], x.dtype);
}

// The alpha = 1 forms, built once: an eager add is host-bound, and these were rebuilt per call.
const NO_PARAMS: readonly number[] = Object.freeze([]);
const BOOL_ADD = { expr: '((a != 0) || (b != 0))', params: NO_PARAMS };
const PLAIN = { '+': { expr: 'a + b', params: NO_PARAMS }, '-': { expr: 'a - b', params: NO_PARAMS } } as const;

function addExpr(alpha: unknown, sign: '+' | '-', outDtype: DType): { expr: string; params: readonly number[] } {
  if (outDtype === 'bool') return BOOL_ADD;
  const a = Number(alpha);
  return a === 1 ? PLAIN[sign] : { expr: `a ${sign} s0 * b`, params: [a] };
}

registerKernel(add, 'cuda', (ctx, self, other, alpha) => {
  const { expr, params } = addExpr(alpha, '+', ctx.out.dtype);
  return runPointwise('add', expr, allocOut(ctx.out), [self, other], params, ctx.out.dtype);
});
registerKernel(add_, 'cuda', (_ctx, self, other, alpha) => {
  const dt = promotedDtype([self, other]);
  const { expr, params } = addExpr(alpha, '+', self.dtype);
  return runPointwise('add_', expr, self, [self, unalias(self, other)], params, dt);
});
registerKernel(P.sub, 'cuda', (ctx, self, other, alpha) => {
  const { expr, params } = addExpr(alpha, '-', ctx.out.dtype);
  return runPointwise('sub', expr, allocOut(ctx.out), [self, other], params, ctx.out.dtype);
});
registerKernel(P.sub_, 'cuda', (_ctx, self, other, alpha) => {
  const { expr, params } = addExpr(alpha, '-', self.dtype);
  return runPointwise('sub_', expr, self, [self, unalias(self, other)], params, promotedDtype([self, other]));
});
registerKernel(P.mul, 'cuda', (ctx, self, other) => runPointwise('mul', 'a * b', allocOut(ctx.out), [self, other], [], ctx.out.dtype));
registerKernel(P.mul_, 'cuda', (_ctx, self, other) => runPointwise('mul_', 'a * b', self, [self, unalias(self, other)], [], promotedDtype([self, other])));

type RoundingMode = 'trunc' | 'floor' | null;

/** Integer division by zero raises (as PyTorch does) before anything is written; reading the divisor costs a sync. */
function checkNoZeroDivisor(op: string, divisor: Operand, compute: DType): void {
  if (isFloating(compute)) return;
  const values = typeof divisor === 'object' ? divisor.toFlatArray() : [Number(divisor)];
  if (values.includes(0)) {
    const d = typeof divisor === 'object' ? `${fmtShape(divisor.shape)} ${divisor.dtype} tensor` : `scalar ${String(divisor)}`;
    throw new RangeError(`${op}: ZeroDivisionError: integer division by zero (divisor 'other' ${d} contains 0)`);
  }
}

function divExpr(mode: RoundingMode, ct: CType): string {
  if (mode === null) return 'a / b';
  if (mode === 'trunc') return isFloatCt(ct) ? `${mf('trunc', ct)}(a / b)` : 'a / b';
  return isFloatCt(ct) ? 'kiln_fdivfloor(a, b)' : 'kiln_idivfloor(a, b)';
}

const asMode = (x: unknown): RoundingMode => (x === null || x === undefined ? null : (x as 'trunc' | 'floor'));

registerKernel(P.div, 'cuda', (ctx, self, other, roundingMode) => {
  const mode = asMode(roundingMode);
  const dt = ctx.out.dtype;
  if (mode !== null) checkNoZeroDivisor('div', other, dt);
  return runPointwise('div', divExpr(mode, computeType(dt)), allocOut(ctx.out), [self, other], [], dt);
});
registerKernel(P.div_, 'cuda', (_ctx, self, other, roundingMode) => {
  const mode = asMode(roundingMode);
  const promoted = promotedDtype([self, other]);
  const dt = mode === null ? toFloating(promoted) : promoted;
  if (mode !== null) checkNoZeroDivisor('div_', other, dt);
  return runPointwise('div_', divExpr(mode, computeType(dt)), self, [self, unalias(self, other)], [], dt);
});

function remainderKernel(out: Tensor, self: PwInput, other: PwInput): Tensor {
  const dt = out.dtype;
  checkNoZeroDivisor('remainder', other as Operand, dt);
  return runPointwise('remainder', isFloating(dt) ? 'kiln_frem(a, b)' : 'kiln_irem(a, b)', out, [self, other], [], dt);
}
registerKernel(P.remainder, 'cuda', (ctx, self, other) => remainderKernel(allocOut(ctx.out), self, other));
registerKernel(P.remainderScalar, 'cuda', (ctx, self, other) => remainderKernel(allocOut(ctx.out), self, other));

function powKernel(out: Tensor, self: PwInput, exponent: PwInput): Tensor {
  const dt = out.dtype;
  const ct = computeType(dt);
  if (isFloating(dt)) {
    const expr = exponent === 2 ? 'a * a' : `${mf('pow', ct)}(a, b)`;
    return runPointwise('pow', expr, out, [self, exponent], [], dt);
  }
  return runPointwise('pow', 'kiln_ipow(a, b)', out, [self, exponent], [], dt);
}
registerKernel(P.pow, 'cuda', (ctx, self, exponent) => powKernel(allocOut(ctx.out), self, exponent));
registerKernel(P.powScalar, 'cuda', (ctx, self, exponent) => powKernel(allocOut(ctx.out), self, exponent));

const maximumExpr = perCt(table('maximum', 2));
const minimumExpr = perCt(table('minimum', 2));
const atan2Expr = perCt(table('atan2', 2));
registerKernel(P.maximum, 'cuda', (ctx, self, other) =>
  runPointwise('maximum', maximumExpr(computeType(ctx.out.dtype)), allocOut(ctx.out), [self, other], [], ctx.out.dtype),
);
registerKernel(P.minimum, 'cuda', (ctx, self, other) =>
  runPointwise('minimum', minimumExpr(computeType(ctx.out.dtype)), allocOut(ctx.out), [self, other], [], ctx.out.dtype),
);
registerKernel(P.atan2, 'cuda', (ctx, self, other) => runPointwise('atan2', atan2Expr(computeType(ctx.out.dtype)), allocOut(ctx.out), [self, other], [], ctx.out.dtype));

// Composite ops (kernels/math/composites.ts): one kernel each over its tensor operands, in the
// floating output's compute type, with the text the compiler fuses.
for (const [name, c] of COMPOSITES) {
  const expr = perCt(table(name, c.arity));
  registerKernel(getOp(name), 'cuda', (ctx, ...args: unknown[]) =>
    runPointwise(name, expr(computeType(ctx.out.dtype)), allocOut(ctx.out), args.slice(0, c.arity) as PwInput[], [], ctx.out.dtype),
  );
}

const comparisons: [typeof P.eq, string][] = [
  [P.eq, '=='],
  [P.ne, '!='],
  [P.lt, '<'],
  [P.le, '<='],
  [P.gt, '>'],
  [P.ge, '>='],
];
for (const [op, cmp] of comparisons) {
  // Compared in the promoted dtype: float16(x) == 0.1 compares against float16(0.1).
  registerKernel(op, 'cuda', (ctx, self, other) => runPointwise(op.name, `(a ${cmp} b)`, allocOut(ctx.out), [self, other], [], promotedDtype([self, other])));
}

const logical: [typeof P.logicalAnd, string][] = [
  [P.logicalAnd, '((a != 0) && (b != 0))'],
  [P.logicalOr, '((a != 0) || (b != 0))'],
  [P.logicalXor, '((a != 0) != (b != 0))'],
];
for (const [op, expr] of logical) {
  registerKernel(op, 'cuda', (ctx, self, other) => runPointwise(op.name, expr, allocOut(ctx.out), [self, other], [], promotedDtype([self, other])));
}

// ---------------------------------------------------------------------------------------------
// clamp, where, lerp, fill_, zero_
// ---------------------------------------------------------------------------------------------

/** clamp's expression with the bounds present; a missing bound is simply not applied. */
function clampExpr(lo: string | null, hi: string | null): string {
  let e = 'a';
  if (lo !== null) e = `kiln_max(${e}, ${lo})`;
  if (hi !== null) e = `kiln_min(${e}, ${hi})`;
  return e;
}

function scalarClamp(name: string, out: Tensor, self: Tensor, min: unknown, max: unknown, dt: DType): Tensor {
  const lo = asScalar(min);
  const hi = asScalar(max);
  const params: number[] = [];
  if (lo !== null) params.push(Number(lo));
  if (hi !== null) params.push(Number(hi));
  const expr = clampExpr(lo !== null ? 's0' : null, hi !== null ? (lo !== null ? 's1' : 's0') : null);
  // Bounds are rounded to the compute dtype like any scalar operand (the CPU kernel's prep).
  return runPointwise(name, expr, out, [self], params.map((p) => (isFloating(dt) ? p : Math.trunc(p))), dt);
}

registerKernel(P.clamp, 'cuda', (ctx, self, min, max) => scalarClamp('clamp', allocOut(ctx.out), self, min, max, ctx.out.dtype));
registerKernel(P.clamp_, 'cuda', (_ctx, self, min, max) => {
  const dt = promotedDtype([self, ...[asScalar(min), asScalar(max)].filter((b): b is ScalarValue => b !== null)]);
  return scalarClamp('clamp_', self, self, min, max, dt);
});

function tensorClamp(name: string, out: Tensor, self: Tensor, min: Tensor | null | undefined, max: Tensor | null | undefined, dt: DType): Tensor {
  const inputs: PwInput[] = [self];
  let lo: string | null = null;
  let hi: string | null = null;
  if (min) {
    inputs.push(min);
    lo = 'b';
  }
  if (max) {
    inputs.push(max);
    hi = min ? 'c' : 'b';
  }
  return runPointwise(name, clampExpr(lo, hi), out, inputs, [], dt);
}
registerKernel(P.clampTensor, 'cuda', (ctx, self, min, max) => tensorClamp('clampTensor', allocOut(ctx.out), self, min, max, ctx.out.dtype));
registerKernel(P.clampTensor_, 'cuda', (_ctx, self, min, max) => {
  const dt = promotedDtype([self, ...[min, max].filter((b): b is Tensor => b !== null && b !== undefined)]);
  return tensorClamp('clampTensor_', self, self, min ? (unalias(self, min) as Tensor) : min, max ? (unalias(self, max) as Tensor) : max, dt);
});

registerKernel(P.where, 'cuda', (ctx, condition, self, other) =>
  runPointwise('where', '((a != 0) ? b : c)', allocOut(ctx.out), [condition, self, other], [], ctx.out.dtype),
);

registerKernel(P.lerp, 'cuda', (ctx, self, end, weight) =>
  runPointwise('lerp', lerpExpr(computeType(ctx.out.dtype)), allocOut(ctx.out), [self, end, weight], [], ctx.out.dtype),
);

registerKernel(P.fill_, 'cuda', (_ctx, self, value) => {
  if (typeof value === 'object') return runPointwise('fill_', 'a', self, [value], [], self.dtype);
  return runPointwise('fill_', 's0', self, [], [Number(value)], self.dtype);
});

registerKernel(P.zero_, 'cuda', (_ctx, self) => runPointwise('zero_', '0', self, [], [], self.dtype));

// ---------------------------------------------------------------------------------------------
// Catalog: every expression the kernels above generate, per compute type, for the CPU-side
// generator tests and scripts/cuda-nvcc-check.mjs (which compiles them all with nvcc).
// ---------------------------------------------------------------------------------------------

export interface ExprEntry {
  op: string;
  expr: string;
  arity: number;
  nParams: number;
  compute: DType;
}

const FLOAT_ONLY = new Set(['exp', 'expm1', 'log', 'log2', 'log10', 'log1p', 'sqrt', 'rsqrt', 'reciprocal', 'sin', 'cos', 'tan', 'tanh', 'sigmoid', 'erf', 'silu']);
const CT_DTYPES: readonly DType[] = ['float32', 'float64', 'int32', 'int64'];

export function expressionCatalog(): ExprEntry[] {
  const out: ExprEntry[] = [];
  for (const compute of CT_DTYPES) {
    const ct = computeType(compute);
    const f = isFloatCt(ct);
    for (const [op, e] of unaryExprs) {
      // Ops with the 'float' dtype rule never compute in an integer type.
      if (!f && FLOAT_ONLY.has(op.name)) continue;
      out.push({ op: op.name, expr: e(ct), arity: 1, nParams: 0, compute });
    }
    out.push({ op: 'add', expr: addExpr(2, '+', compute).expr, arity: 2, nParams: 1, compute });
    out.push({ op: 'add_bool', expr: addExpr(1, '+', 'bool').expr, arity: 2, nParams: 0, compute });
    out.push({ op: 'mul', expr: 'a * b', arity: 2, nParams: 0, compute });
    for (const mode of [null, 'trunc', 'floor'] as RoundingMode[]) out.push({ op: `div_${mode}`, expr: divExpr(mode, ct), arity: 2, nParams: 0, compute });
    out.push({ op: 'remainder', expr: f ? 'kiln_frem(a, b)' : 'kiln_irem(a, b)', arity: 2, nParams: 0, compute });
    out.push({ op: 'pow', expr: f ? `${mf('pow', ct)}(a, b)` : 'kiln_ipow(a, b)', arity: 2, nParams: 0, compute });
    out.push({ op: 'maximum', expr: maximumExpr(ct), arity: 2, nParams: 0, compute });
    for (const [op, cmp] of comparisons) out.push({ op: op.name, expr: `(a ${cmp} b)`, arity: 2, nParams: 0, compute });
    for (const [op, expr] of logical) out.push({ op: op.name, expr, arity: 2, nParams: 0, compute });
    out.push({ op: 'clamp', expr: clampExpr('s0', 's1'), arity: 1, nParams: 2, compute });
    out.push({ op: 'clampTensor', expr: clampExpr('b', 'c'), arity: 3, nParams: 0, compute });
    out.push({ op: 'where', expr: '((a != 0) ? b : c)', arity: 3, nParams: 0, compute });
    out.push({ op: 'fill', expr: 's0', arity: 0, nParams: 1, compute });
    if (f) {
      out.push({ op: 'atan2', expr: atan2Expr(ct), arity: 2, nParams: 0, compute });
      out.push({ op: 'lerp', expr: lerpExpr(ct), arity: 3, nParams: 0, compute });
      out.push({ op: 'softplus', expr: softplusExpr(ct), arity: 1, nParams: 2, compute });
      out.push({ op: 'gelu', expr: geluExpr('none', ct), arity: 1, nParams: 0, compute });
      out.push({ op: 'geluTanh', expr: geluExpr('tanh', ct), arity: 1, nParams: 0, compute });
      for (const [name, c] of COMPOSITES) out.push({ op: name, expr: table(name, c.arity)(ct), arity: c.arity, nParams: 0, compute });
    }
  }
  return out;
}
