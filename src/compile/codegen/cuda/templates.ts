/**
 * The pointwise expression table for CUDA C, one entry per entry of the JavaScript table
 * (lower/ops.ts) with the same semantics (PyTorch's) and the same null cases: where the JS
 * template declines an op/argument combination, so does this one, so a group the scheduler fused
 * for the CPU generator is expressible here too. A test checks that both tables have the same keys.
 * Operands are cast to the compute type of the dtype the JS template computes in (the output's,
 * or the promoted one for comparisons), so C's usual conversions never pick a different precision.
 * Helpers named kiln_* live in the prelude (prelude.ts).
 */
import type { DType } from '../../../tensor/dtype.js';
import { isFloating, resultType, type PromotionOperand } from '../../../tensor/dtype.js';
import { castValue } from '../../../tensor/typed.js';
import { cLit, computeType, mathFn, type CType } from './ctypes.js';

/** One positional argument as a template sees it (expr: an identifier of the value's compute type). */
export type CArg =
  | { readonly kind: 'value'; readonly expr: string; readonly dtype: DType; readonly shape: readonly number[] }
  | { readonly kind: 'const'; readonly value: unknown };

export interface CTemplateCtx {
  /** dtype of the node's output. */
  readonly out: DType;
  /**
   * Fast float math (default on; KILN_CUDA_FAST_MATH=0 turns it off): exp, sigmoid, silu and tanh
   * in float go through the prelude's kiln_fexp / kiln_ftanh (ex2.approx, as Triton's tl.exp that
   * torch.compile's kernels use) instead of libdevice's expf/tanhf, and sigmoid/silu divide by
   * 1 + e^-x through kiln_frcp (rcp.approx). Doubles are never affected.
   */
  readonly fast?: boolean;
  /**
   * Every value the kernel stores is bfloat16 (a pointwise kernel; body.ts): with fast math, tanh
   * (and GELU's tanh form) may use tanh.approx.f32, whose error rounds away in bfloat16 (prelude).
   * Not for float16 (an 11-bit significand, where 2^-11 is up to a whole ulp) or float32.
   */
  readonly bf16Results?: boolean;
}

type CTemplate = (args: readonly CArg[], ctx: CTemplateCtx) => string | null;

function promotionOperand(a: CArg): PromotionOperand | undefined {
  if (a.kind === 'value') return { dtype: a.dtype, shape: a.shape };
  if (typeof a.value === 'number' || typeof a.value === 'boolean') return a.value;
  return undefined;
}

function promoted(args: readonly CArg[]): DType {
  return resultType(args.map(promotionOperand).filter((x): x is PromotionOperand => x !== undefined));
}

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

function num(a: CArg | undefined): number | null {
  if (!a || a.kind !== 'const') return null;
  if (typeof a.value === 'number') return a.value;
  if (typeof a.value === 'boolean') return a.value ? 1 : 0;
  return null;
}

const isNone = (a: CArg | undefined): boolean => !a || (a.kind === 'const' && (a.value === null || a.value === undefined));

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

export const CUDA_TEMPLATES: ReadonlyMap<string, CTemplate> = new Map<string, CTemplate>([
  // --- arithmetic
  [
    'add',
    (args, ctx) => {
      if (ctx.out === 'bool') return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const alpha = num(args[2]);
      if (a === null || b === null || alpha === null) return null;
      return alpha === 1 ? `(${a} + ${b})` : `(${a} + ${cLit(alpha, computeType(ctx.out))} * ${b})`;
    },
  ],
  [
    'sub',
    (args, ctx) => {
      if (ctx.out === 'bool') return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const alpha = num(args[2]);
      if (a === null || b === null || alpha === null) return null;
      return alpha === 1 ? `(${a} - ${b})` : `(${a} - ${cLit(alpha, computeType(ctx.out))} * ${b})`;
    },
  ],
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

/**
 * The declaration of node output `v` from its expression: the value as its dtype holds it inside a
 * fused kernel, mirroring roundExpr in lower/ops.ts. Floating intermediates stay in their compute
 * type; explicit casts round to the target (to a half and back), integers wrap like their stores.
 * `fromFloating`: whether the expression's operands are floating (a float-to-int cast truncates).
 */
export function declareValue(v: string, expr: string, dtype: DType, isCast: boolean, fromFloating: boolean): string {
  const t = computeType(dtype);
  switch (dtype) {
    case 'float32':
    case 'float64':
      return `const ${t} ${v} = (${t})(${expr});`;
    case 'float16':
      return isCast ? `const float ${v} = kiln_h2f(kiln_f2h((float)(${expr})));` : `const float ${v} = (float)(${expr});`;
    case 'bfloat16':
      return isCast ? `const float ${v} = kiln_bf2f(kiln_f2bf((float)(${expr})));` : `const float ${v} = (float)(${expr});`;
    case 'int32':
      return isCast && fromFloating ? `const int ${v} = (int)kiln_f2ll(${expr});` : `const int ${v} = (int)(${expr});`;
    case 'int64':
      return isCast && fromFloating ? `const long long ${v} = kiln_f2ll(${expr});` : `const long long ${v} = (long long)(${expr});`;
    case 'uint8':
      return isCast && fromFloating ? `const int ${v} = (int)(kiln_f2ll(${expr}) & 255);` : `const int ${v} = (int)(${expr}) & 255;`;
    case 'bool':
      return isCast ? `const int ${v} = (${expr}) != 0 && (${expr}) == (${expr}) ? 1 : 0;` : `const int ${v} = (int)(${expr});`;
    default:
      return dtype satisfies never;
  }
}
