/**
 * The CUDA C pointwise math table, one entry per entry of the JavaScript table (js.ts) with the same
 * semantics (PyTorch's) and the same null cases: where the JS template declines an op/argument
 * combination, so does this one, so a group the scheduler fused for the CPU generator is
 * expressible here too (test/compile-cuda-codegen.test.ts checks both tables have the same keys).
 * The compiler's CUDA code generator renders every fused node through it
 * (kernels/cuda/fused/body.ts); the eager cuda kernels render their one-node programs through it
 * where their text is the same (kernels/cuda/pointwise.ts: libm calls, rounding, composites).
 * Operands are cast to the compute type of the dtype the JS template computes in (the output's,
 * or the promoted one for comparisons), so C's usual conversions never pick a different precision.
 * Helpers named kiln_* live in the preludes (kernels/cuda/fused/prelude.ts for fused kernels,
 * kernels/cuda/codegen/ctypes.ts for eager ones); composites use only kiln_max / kiln_min, which
 * both define with the same semantics, and libm.
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { castValue } from '../../tensor/typed.js';
import { cLit, computeType, mathFn, type CType } from '../cuda/codegen/ctypes.js';
import { isNone, num, promoted, type MathArg } from './args.js';
import { COMPOSITES, type Composite } from './composites.js';
import { cFamilyDialect, renderText, type TextDialect } from './expr.js';

/** One positional argument as a template sees it (expr: an identifier of the value's compute type). */
export type CArg = MathArg;

export interface CTemplateCtx {
  /** dtype of the node's output. */
  readonly out: DType;
  /**
   * Fast float math (the compiler's default; KILN_CUDA_FAST_MATH=0 turns it off; eager kernels never
   * use it): exp, sigmoid, silu and tanh in float go through the prelude's kiln_fexp / kiln_ftanh
   * (ex2.approx, as Triton's tl.exp that torch.compile's kernels use) instead of libdevice's
   * expf/tanhf, and sigmoid/silu divide by 1 + e^-x through kiln_frcp (rcp.approx). Doubles are
   * never affected, nor are composites (their text is the same eager and compiled).
   */
  readonly fast?: boolean;
  /**
   * Every value the kernel stores is bfloat16 (a pointwise kernel; body.ts): with fast math, tanh
   * (and GELU's tanh form) may use tanh.approx.f32, whose error rounds away in bfloat16 (prelude).
   * Not for float16 (an 11-bit significand, where 2^-11 is up to a whole ulp) or float32.
   */
  readonly bf16Results?: boolean;
}

export type CTemplate = (args: readonly CArg[], ctx: CTemplateCtx) => string | null;

/** An operand in compute dtype `dt`: values are cast when their compute type differs; constants are rounded to `dt` first (as the eager kernels do). */
function operand(a: CArg | undefined, dt: DType): string | null {
  if (!a) return null;
  const t = computeType(dt);
  if (a.kind === 'value') return computeType(a.dtype) === t ? a.expr : `((${t})${a.expr})`;
  const v = a.value;
  if (typeof v === 'boolean') return cLit(v ? 1 : 0, t);
  if (typeof v !== 'number') return null;
  return cLit(isFloating(dt) ? castValue(v, dt) : v, t);
}

function unary(f: (x: string, t: CType, dt: DType, ctx: CTemplateCtx) => string, opts: { floatOnly?: boolean } = {}): CTemplate {
  return (args, ctx) => {
    const x = operand(args[0], ctx.out);
    if (x === null || args[0]!.kind !== 'value') return null;
    if (opts.floatOnly && !isFloating(ctx.out)) return null;
    if (ctx.out === 'bool' && !opts.floatOnly) return null;
    return f(x, computeType(ctx.out), ctx.out, ctx);
  };
}

function binary(f: (a: string, b: string, ctx: CTemplateCtx, t: CType) => string | null, computeIn: 'out' | 'promoted' = 'out'): CTemplate {
  return (args, ctx) => {
    const dt = computeIn === 'out' ? ctx.out : promoted(args.slice(0, 2));
    const a = operand(args[0], dt);
    const b = operand(args[1], dt);
    if (a === null || b === null) return null;
    return f(a, b, ctx, computeType(dt));
  };
}

/** The primitives of expr.ts in CUDA C for float or double `t` (libm, and the preludes' NaN-propagating max/min). */
function cudaDialect(t: CType): TextDialect {
  return cFamilyDialect({
    num: (v) => cLit(v, t),
    call(f, a, b) {
      if (f === 'max' || f === 'min') return `kiln_${f}(${a}, ${b})`;
      return `${mathFn(f === 'abs' ? 'fabs' : f, t)}(${a})`;
    },
    eq: '==',
    isinf: (x) => `(${mathFn('fabs', t)}(${x}) == ${cLit(Infinity, t)})`,
  });
}
const DIALECTS: Readonly<Record<'float' | 'double', TextDialect>> = { float: cudaDialect('float'), double: cudaDialect('double') };

/** A composite's template: a floating output, its operands in that dtype's compute type, the body in CUDA C. */
function composite(c: Composite): CTemplate {
  return (args, ctx) => {
    if (!isFloating(ctx.out) || args.length < c.arity) return null;
    const xs: string[] = [];
    for (let i = 0; i < c.arity; i++) {
      const x = operand(args[i], ctx.out);
      if (x === null) return null;
      xs.push(x);
    }
    return renderText(c.body, xs, DIALECTS[computeType(ctx.out) as 'float' | 'double']);
  };
}

/** Fast float math applies (float compute under ctx.fast; doubles never). */
const fastFloat = (t: CType, ctx: CTemplateCtx): boolean => ctx.fast === true && t === 'float';
/** exp / tanh in compute type t: the fast prelude versions for float under ctx.fast. */
const expFn = (t: CType, ctx: CTemplateCtx): string => (fastFloat(t, ctx) ? 'kiln_fexp' : mathFn('exp', t));
const tanhFn = (t: CType, ctx: CTemplateCtx): string => (fastFloat(t, ctx) ? (ctx.bf16Results === true ? 'kiln_tanh_approx' : 'kiln_ftanh') : mathFn('tanh', t));

/** A float-only libm call. */
const fn1 = (name: string): CTemplate => unary((x, t) => `${mathFn(name, t)}(${x})`, { floatOnly: true });
/** floor/ceil/round/trunc: identity on integers (as Math.floor is on the JS side). */
const rounding = (name: string): CTemplate => unary((x, t) => (t === 'float' || t === 'double' ? `${mathFn(name, t)}(${x})` : x));

const one = (t: CType): string => cLit(1, t);

/** add / sub: a constant alpha scales the second operand (alpha 1 leaves it out). */
const addSub =
  (sign: '+' | '-'): CTemplate =>
  (args, ctx) => {
    if (ctx.out === 'bool') return null;
    const a = operand(args[0], ctx.out);
    const b = operand(args[1], ctx.out);
    const alpha = num(args[2]);
    if (a === null || b === null || alpha === null) return null;
    return alpha === 1 ? `(${a} ${sign} ${b})` : `(${a} ${sign} ${cLit(alpha, computeType(ctx.out))} * ${b})`;
  };

export const CUDA_TEMPLATES: ReadonlyMap<string, CTemplate> = new Map<string, CTemplate>([
  // --- arithmetic
  ['add', addSub('+')],
  ['sub', addSub('-')],
  ['mul', binary((a, b, ctx) => (ctx.out === 'bool' ? null : `(${a} * ${b})`))],
  [
    'div',
    (args, ctx) => {
      const mode = args[2];
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      const t = computeType(ctx.out);
      // True division of integers: the JS side divides doubles; here the operands are in the float output's type already.
      if (isNone(mode)) return `(${a} / ${b})`;
      if (!isFloating(ctx.out)) return null;
      if (mode!.kind === 'const' && mode!.value === 'trunc') return `${mathFn('trunc', t)}(${a} / ${b})`;
      if (mode!.kind === 'const' && mode!.value === 'floor') return `kiln_divfloor(${a}, ${b})`;
      return null;
    },
  ],
  ['remainder', binary((a, b, ctx) => (isFloating(ctx.out) ? `kiln_remainder(${a}, ${b})` : null))],
  [
    'pow',
    (args, ctx) => {
      if (!isFloating(ctx.out)) return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      if (num(args[1]) === 2) return `(${a} * ${a})`;
      return `kiln_cpow(${a}, ${b})`;
    },
  ],
  ['powScalar', binary((a, b, ctx) => (isFloating(ctx.out) ? `kiln_cpow(${a}, ${b})` : null))],
  ['maximum', binary((a, b, ctx) => (ctx.out === 'bool' ? null : `kiln_max(${a}, ${b})`))],
  ['minimum', binary((a, b, ctx) => (ctx.out === 'bool' ? null : `kiln_min(${a}, ${b})`))],
  ['atan2', binary((a, b, _ctx, t) => (t === 'float' || t === 'double' ? `${mathFn('atan2', t)}(${a}, ${b})` : `${mathFn('atan2', 'double')}((double)${a}, (double)${b})`))],
  // --- unary
  ['neg', unary((x) => `(-${x})`)],
  ['abs', unary((x) => `kiln_abs(${x})`)],
  ['sign', unary((x, t) => `(${x} > ${cLit(0, t)} ? ${one(t)} : ${x} < ${cLit(0, t)} ? ${cLit(-1, t)} : ${cLit(0, t)})`)],
  ['exp', unary((x, t, _dt, ctx) => `${expFn(t, ctx)}(${x})`, { floatOnly: true })],
  ['expm1', fn1('expm1')],
  ['log', fn1('log')],
  ['log2', fn1('log2')],
  ['log10', fn1('log10')],
  ['log1p', fn1('log1p')],
  ['sqrt', fn1('sqrt')],
  ['rsqrt', fn1('rsqrt')],
  ['reciprocal', unary((x, t) => `(${one(t)} / ${x})`, { floatOnly: true })],
  ['sin', fn1('sin')],
  ['cos', fn1('cos')],
  ['tan', fn1('tan')],
  ['tanh', unary((x, t, _dt, ctx) => `${tanhFn(t, ctx)}(${x})`, { floatOnly: true })],
  ['sigmoid', unary((x, t, _dt, ctx) => (fastFloat(t, ctx) ? `kiln_frcp(1.0f + kiln_fexp(-${x}))` : `(${one(t)} / (${one(t)} + ${expFn(t, ctx)}(-${x})))`), { floatOnly: true })],
  ['erf', fn1('erf')],
  ['relu', unary((x, t) => `(${x} > ${cLit(0, t)} || ${x} != ${x} ? ${x} : ${cLit(0, t)})`)],
  ['silu', unary((x, t, _dt, ctx) => (fastFloat(t, ctx) ? `(${x} * kiln_frcp(1.0f + kiln_fexp(-${x})))` : `(${x} / (${one(t)} + ${expFn(t, ctx)}(-${x})))`), { floatOnly: true })],
  ['floor', rounding('floor')],
  ['ceil', rounding('ceil')],
  // rint rounds half to even under the default rounding mode, like roundHalfEven.
  ['round', rounding('rint')],
  ['trunc', rounding('trunc')],
  ['square', (args, ctx) => (args[0]?.kind === 'value' ? `(${operand(args[0], ctx.out)!} * ${operand(args[0], ctx.out)!})` : null)],
  ['isnan', (args) => (args[0]?.kind === 'value' ? `(${args[0].expr} != ${args[0].expr} ? 1 : 0)` : null)],
  ['isinf', (args) => (args[0]?.kind === 'value' ? (isFloating(args[0].dtype) ? `(kiln_isinf(${args[0].expr}) ? 1 : 0)` : '0') : null)],
  ['isfinite', (args) => (args[0]?.kind === 'value' ? (isFloating(args[0].dtype) ? `(kiln_isfinite(${args[0].expr}) ? 1 : 0)` : '1') : null)],
  ['logicalNot', (args) => (args[0]?.kind === 'value' ? `(${args[0].expr} == 0 ? 1 : 0)` : null)],
  [
    'gelu',
    (args, ctx) => {
      if (args[0]?.kind !== 'value' || !isFloating(ctx.out)) return null;
      const x = operand(args[0], ctx.out)!;
      const t = computeType(ctx.out);
      const approx = args[1]?.kind === 'const' ? args[1].value : 'none';
      const L = (v: number): string => cLit(v, t);
      if (approx === 'tanh') return `(${L(0.5)} * ${x} * (${L(1)} + ${tanhFn(t, ctx)}(${L(Math.sqrt(2 / Math.PI))} * (${x} + ${L(0.044715)} * ${x} * ${x} * ${x}))))`;
      return `(${x} * ${L(0.5)} * (${L(1)} + ${mathFn('erf', t)}(${x} * ${L(Math.SQRT1_2)})))`;
    },
  ],
  [
    'softplus',
    (args, ctx) => {
      const beta = num(args[1]);
      const threshold = num(args[2]);
      if (args[0]?.kind !== 'value' || beta === null || threshold === null || !isFloating(ctx.out)) return null;
      const x = operand(args[0], ctx.out)!;
      const t = computeType(ctx.out);
      const b = cLit(beta, t);
      return `(${x} * ${b} > ${cLit(threshold, t)} ? ${x} : ${mathFn('log1p', t)}(${mathFn('exp', t)}(${x} * ${b})) / ${b})`;
    },
  ],
  // --- comparisons and logical ops (bool out, 0/1), compared in the promoted type
  ...(
    [
      ['eq', '=='],
      ['ne', '!='],
      ['lt', '<'],
      ['le', '<='],
      ['gt', '>'],
      ['ge', '>='],
    ] as const
  ).map(([name, op]): [string, CTemplate] => [name, binary((a, b) => `(${a} ${op} ${b} ? 1 : 0)`, 'promoted')]),
  ['logicalAnd', binary((a, b) => `(${a} != 0 && ${b} != 0 ? 1 : 0)`, 'promoted')],
  ['logicalOr', binary((a, b) => `(${a} != 0 || ${b} != 0 ? 1 : 0)`, 'promoted')],
  ['logicalXor', binary((a, b) => `((${a} != 0) != (${b} != 0) ? 1 : 0)`, 'promoted')],
  // --- clamp, where, lerp
  ['clamp', clampTemplate],
  ['clampTensor', clampTemplate],
  [
    'where',
    (args, ctx) => {
      if (args[0]?.kind !== 'value') return null;
      const a = operand(args[1], ctx.out);
      const b = operand(args[2], ctx.out);
      if (a === null || b === null) return null;
      return `(${args[0].expr} != 0 ? ${a} : ${b})`;
    },
  ],
  [
    'lerp',
    (args, ctx) => {
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const w = operand(args[2], ctx.out);
      if (a === null || b === null || w === null) return null;
      return `kiln_lerp(${a}, ${b}, ${w})`;
    },
  ],
  // --- copies and casts: the value itself; the conversion is applied by roundStatement
  ['toDtype', (args) => (args[0]?.kind === 'value' ? args[0].expr : null)],
  ['clone', (args) => (args[0]?.kind === 'value' ? args[0].expr : null)],
  // --- ops defined once as compositions of primitives (composites.ts)
  ...[...COMPOSITES].map(([name, c]): [string, CTemplate] => [name, composite(c)]),
]);

/** clamp / clampTensor: a missing bound is left out (no infinity literal for integer outputs). */
function clampTemplate(args: readonly CArg[], ctx: CTemplateCtx): string | null {
  if (args[0]?.kind !== 'value' || ctx.out === 'bool') return null;
  let e = operand(args[0], ctx.out)!;
  if (!isNone(args[1])) {
    const lo = operand(args[1], ctx.out);
    if (lo === null) return null;
    e = `kiln_max(${e}, ${lo})`;
  }
  if (!isNone(args[2])) {
    const hi = operand(args[2], ctx.out);
    if (hi === null) return null;
    e = `kiln_min(${e}, ${hi})`;
  }
  return e;
}
