/**
 * The WGSL pointwise math table: one entry per entry of the CUDA C table (cuda.ts), same keys and
 * PyTorch semantics, rendering one element of an op from its operands' WGSL expressions. The
 * webgpu eager kernels render their one-node programs through it (kernels/webgpu/pointwise.ts), and
 * a WGSL compile target will render fused nodes through the same entries.
 *
 * Compute types: f32 for float32, float16 and bfloat16 (the 16-bit types are stored as 16 bits and
 * computed in f32, as the other tables do), i32 for int32, uint8 and bool (0/1). WGSL has no 64-bit
 * types: float64 and int64 operands or outputs make every entry decline (null). Unlike the CUDA
 * table, integer remainder, floor division and pow have forms here, since this table is also the
 * eager path's only text; where CUDA declines for fusion, declining less changes nothing.
 *
 * WGSL converts nothing implicitly, so every operand is cast to the entry's compute type
 * (`operand`), literals carry their type's suffix, and a bool-valued result is `select(0i, 1i, c)`.
 * Helpers named kiln_* are Kiln's WGSL math library (wgsl-libm/): its own float32 sin, exp, log,
 * ... (WGSL's builtins are too inexact and undefined outside their domains) and explicit results at
 * NaN, infinity and the domain edges, so a kernel computes the same on every WebGPU implementation.
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { castValue } from '../../tensor/typed.js';
import { isNone, num, promoted, type MathArg } from './args.js';
import { COMPOSITES, type Composite } from './composites.js';
import { renderText, type NumPrim, type TextDialect } from './expr.js';
import { fastNames, type WgslFastMath } from './wgsl-libm/fast.js';

export type WgslType = 'f32' | 'i32';

/** The WGSL type a dtype computes in, or null for the 64-bit types WGSL lacks. */
export function wgslComputeType(dt: DType): WgslType | null {
  switch (dt) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
      return 'f32';
    case 'int32':
    case 'uint8':
    case 'bool':
      return 'i32';
    case 'float64':
    case 'int64':
      return null;
    default:
      return dt satisfies never;
  }
}

export interface WgslTemplateCtx {
  /** dtype of the node's output. */
  readonly out: DType;
  /**
   * Fast float math (wgsl-libm/fast.ts; compiled kernels under KILN_WEBGPU_FAST_MATH, never eager
   * ones): exp, sigmoid, silu and tanh on WGSL's exp2 in this form instead of the library's exact
   * forms. Composites keep their text, as in the CUDA table.
   */
  readonly fast?: WgslFastMath;
  /**
   * The argument is NaN only where the kernel restores NaN at its stores (compiled pointwise
   * kernels, kernels/webgpu/fused/nan-hoist.ts): the fast exp, sigmoid and tanh and relu may skip
   * their NaN checks. Their results are unchanged at every other argument.
   */
  readonly nanFree?: boolean;
}

export type WgslTemplate = (args: readonly MathArg[], ctx: WgslTemplateCtx) => string | null;

/** A literal of WGSL type t (an f32 value is first rounded to the dtype it stands for). */
export function wgslLit(v: number, t: WgslType): string {
  if (t === 'i32') {
    const i = Math.trunc(v) | 0;
    if (i === -2147483648) return '(-2147483647i - 1i)';
    return i < 0 ? `(${i}i)` : `${i}i`;
  }
  if (Number.isNaN(v)) return 'kiln_nan()';
  if (v === Infinity) return 'kiln_inf()';
  if (v === -Infinity) return '(-kiln_inf())';
  if (Object.is(v, -0)) return '(-0.0f)';
  const x = Math.fround(v);
  if (!Number.isFinite(x)) return x > 0 ? 'kiln_inf()' : '(-kiln_inf())';
  const s = String(x);
  const text = /[.e]/.test(s) ? `${s}f` : `${s}.0f`;
  return x < 0 ? `(${text})` : text;
}

/** `x` of WGSL type `from` as the compute type of `dt` (a bool result is 0/1 of x != 0). */
function cast(x: string, from: DType, dt: DType): string | null {
  const ft = wgslComputeType(from);
  const t = wgslComputeType(dt);
  if (ft === null || t === null) return null;
  if (dt === 'bool' && from !== 'bool') return `select(0i, 1i, ${x} != ${wgslLit(0, ft)})`;
  return ft === t ? x : `${t}(${x})`;
}

/** An operand in the compute type of `dt`; constants are rounded to `dt` first (as the eager CUDA kernels do). */
function operand(a: MathArg | undefined, dt: DType): string | null {
  if (!a) return null;
  const t = wgslComputeType(dt);
  if (t === null) return null;
  if (a.kind === 'value') return cast(a.expr, a.dtype, dt);
  const v = a.value;
  if (typeof v === 'boolean') return wgslLit(v ? 1 : 0, t);
  if (typeof v !== 'number') return null;
  if (dt === 'bool') return wgslLit(v !== 0 ? 1 : 0, t);
  return wgslLit(isFloating(dt) ? castValue(v, dt) : v, t);
}

const boolOf = (c: string): string => `select(0i, 1i, ${c})`;
const isF = (dt: DType): boolean => wgslComputeType(dt) === 'f32';

function unary(f: (x: string, t: WgslType, dt: DType) => string | null, opts: { floatOnly?: boolean } = {}): WgslTemplate {
  return (args, ctx) => {
    if (args[0]?.kind !== 'value') return null;
    const x = operand(args[0], ctx.out);
    if (x === null) return null;
    if (opts.floatOnly && !isFloating(ctx.out)) return null;
    if (ctx.out === 'bool' && !opts.floatOnly) return null;
    return f(x, wgslComputeType(ctx.out)!, ctx.out);
  };
}

function binary(f: (a: string, b: string, dt: DType) => string | null, computeIn: 'out' | 'promoted' = 'out'): WgslTemplate {
  return (args, ctx) => {
    const dt = computeIn === 'out' ? ctx.out : promoted(args.slice(0, 2));
    const a = operand(args[0], dt);
    const b = operand(args[1], dt);
    if (a === null || b === null || wgslComputeType(ctx.out) === null) return null;
    return f(a, b, dt);
  };
}

/** The primitives of expr.ts in WGSL (f32 only: composites have floating outputs). */
const DIALECT: TextDialect = {
  num: (v) => wgslLit(v, 'f32'),
  op(f: NumPrim, [a, b]) {
    switch (f) {
      case 'add':
        return `(${a} + ${b})`;
      case 'sub':
        return `(${a} - ${b})`;
      case 'mul':
        return `(${a} * ${b})`;
      case 'div':
        return `(${a} / ${b})`;
      case 'neg':
        return `(-${a})`;
      case 'abs':
        return `abs(${a})`;
      case 'exp':
        return `kiln_exp(${a})`;
      case 'log':
        return `kiln_log(${a})`;
      case 'sqrt':
        return `kiln_sqrt(${a})`;
      case 'log1p':
        return `kiln_log1p(${a})`;
      case 'max':
        return `kiln_fmax(${a}, ${b})`;
      case 'min':
        return `kiln_fmin(${a}, ${b})`;
      default:
        return f satisfies never;
    }
  },
  cmp: (f, a, b) => `(${a} ${f === 'eq' ? '==' : '<'} ${b})`,
  isinf: (x) => `kiln_isinf(${x})`,
  logic: (f, a, b) => `(${a} ${f === 'and' ? '&&' : '||'} ${b})`,
  // WGSL's select takes (false value, true value, condition).
  select: (c, a, b) => `select(${b}, ${a}, ${c})`,
};

function composite(c: Composite): WgslTemplate {
  return (args, ctx) => {
    if (!isFloating(ctx.out) || !isF(ctx.out) || args.length < c.arity) return null;
    const xs: string[] = [];
    for (let i = 0; i < c.arity; i++) {
      const x = operand(args[i], ctx.out);
      if (x === null) return null;
      xs.push(x);
    }
    return renderText(c.body, xs, DIALECT);
  };
}

/** A float-only call of a WGSL builtin or prelude helper. */
const fn1 = (name: string): WgslTemplate => unary((x) => `${name}(${x})`, { floatOnly: true });
/** The function computing `kind`: the library's exact `name`, or under ctx.fast the fast form's. */
const fastName = (kind: 'exp' | 'sigmoid' | 'tanh', name: string, ctx: WgslTemplateCtx): string => (ctx.fast ? fastNames(ctx.fast, ctx.nanFree === true)[kind] : name);
/** exp / sigmoid / tanh through fastName. */
const fastOr = (kind: 'exp' | 'sigmoid' | 'tanh', name: string): WgslTemplate => (args, ctx) => fn1(fastName(kind, name, ctx))(args, ctx);
/** floor/ceil/round/trunc: identity on integers. WGSL's round rounds half to even, as torch. */
const rounding = (name: string): WgslTemplate => unary((x, t) => (t === 'f32' ? `${name}(${x})` : x));
const maxOf = (a: string, b: string, dt: DType): string => (isF(dt) ? `kiln_fmax(${a}, ${b})` : `max(${a}, ${b})`);
const minOf = (a: string, b: string, dt: DType): string => (isF(dt) ? `kiln_fmin(${a}, ${b})` : `min(${a}, ${b})`);

/** sign of a number (NaN gives 0, as the CUDA table). */
const signTemplate: WgslTemplate = unary((x, t) => `select(select(${wgslLit(0, t)}, ${wgslLit(-1, t)}, ${x} < ${wgslLit(0, t)}), ${wgslLit(1, t)}, ${x} > ${wgslLit(0, t)})`);

/** add / sub: a constant alpha scales the second operand; bool add is logical or (torch). */
const addSub =
  (sign: '+' | '-'): WgslTemplate =>
  (args, ctx) => {
    const alpha = num(args[2] ?? { kind: 'const', value: 1 });
    if (ctx.out === 'bool') {
      const a = operand(args[0], 'bool');
      const b = operand(args[1], 'bool');
      return sign === '+' && a !== null && b !== null ? boolOf(`${a} != 0i || ${b} != 0i`) : null;
    }
    const a = operand(args[0], ctx.out);
    const b = operand(args[1], ctx.out);
    if (a === null || b === null || alpha === null) return null;
    return alpha === 1 ? `(${a} ${sign} ${b})` : `(${a} ${sign} ${wgslLit(alpha, wgslComputeType(ctx.out)!)} * ${b})`;
  };

export const WGSL_TEMPLATES: ReadonlyMap<string, WgslTemplate> = new Map<string, WgslTemplate>([
  // --- arithmetic
  ['add', addSub('+')],
  ['sub', addSub('-')],
  ['mul', binary((a, b, dt) => (dt === 'bool' ? boolOf(`${a} != 0i && ${b} != 0i`) : `(${a} * ${b})`))],
  [
    'div',
    (args, ctx) => {
      const mode = args[2];
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      const f = isF(ctx.out);
      if (isNone(mode)) return f ? `kiln_div(${a}, ${b})` : `(${a} / ${b})`;
      if (mode!.kind === 'const' && mode!.value === 'trunc') return f ? `trunc(kiln_div(${a}, ${b}))` : `(${a} / ${b})`;
      if (mode!.kind === 'const' && mode!.value === 'floor') return f ? `kiln_fdivfloor(${a}, ${b})` : `kiln_idivfloor(${a}, ${b})`;
      return null;
    },
  ],
  ['remainder', binary((a, b, dt) => (dt === 'bool' ? null : isF(dt) ? `kiln_fremainder(${a}, ${b})` : `kiln_iremainder(${a}, ${b})`))],
  [
    'pow',
    (args, ctx) => {
      if (ctx.out === 'bool') return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      if (num(args[1]) === 2) return `(${a} * ${a})`;
      return isF(ctx.out) ? `kiln_pow(${a}, ${b})` : `kiln_ipow(${a}, ${b})`;
    },
  ],
  ['powScalar', binary((a, b, dt) => (dt === 'bool' ? null : isF(dt) ? `kiln_pow(${a}, ${b})` : `kiln_ipow(${a}, ${b})`))],
  ['maximum', binary((a, b, dt) => (dt === 'bool' ? boolOf(`${a} != 0i || ${b} != 0i`) : maxOf(a, b, dt)))],
  ['minimum', binary((a, b, dt) => (dt === 'bool' ? boolOf(`${a} != 0i && ${b} != 0i`) : minOf(a, b, dt)))],
  ['atan2', (args, ctx) => (isFloating(ctx.out) ? binary((a, b) => `kiln_atan2(${a}, ${b})`)(args, ctx) : null)],
  // --- unary
  ['neg', unary((x) => `(-${x})`)],
  ['abs', unary((x) => `abs(${x})`)],
  ['sign', (args, ctx) => (ctx.out === 'bool' ? (args[0]?.kind === 'value' ? operand(args[0], 'bool') : null) : signTemplate(args, ctx))],
  ['exp', fastOr('exp', 'kiln_exp')],
  ['expm1', fn1('kiln_expm1')],
  ['log', fn1('kiln_log')],
  ['log2', fn1('kiln_log2')],
  ['log10', fn1('kiln_log10')],
  ['log1p', fn1('kiln_log1p')],
  ['sqrt', fn1('kiln_sqrt')],
  ['rsqrt', fn1('kiln_rsqrt')],
  ['reciprocal', unary((x) => `kiln_div(1.0f, ${x})`, { floatOnly: true })],
  ['sin', fn1('kiln_sin')],
  ['cos', fn1('kiln_cos')],
  ['tan', fn1('kiln_tan')],
  ['tanh', fastOr('tanh', 'kiln_tanh')],
  ['sigmoid', fastOr('sigmoid', 'kiln_sigmoid')],
  ['erf', fn1('kiln_erf')],
  [
    'relu',
    (args, ctx) => unary((x, t) => (t !== 'f32' ? `max(${x}, 0i)` : ctx.nanFree === true ? `select(0.0f, ${x}, ${x} > 0.0f)` : `select(0.0f, ${x}, ${x} > 0.0f || kiln_isnan(${x}))`))(args, ctx),
  ],
  // x times the sigmoid: a NaN x is NaN out through the product, so the fast sigmoid needs no check.
  ['silu', (args, ctx) => unary((x) => `(${x} * ${fastName('sigmoid', 'kiln_sigmoid', { ...ctx, nanFree: true })}(${x}))`, { floatOnly: true })(args, ctx)],
  ['floor', rounding('floor')],
  ['ceil', rounding('ceil')],
  ['round', rounding('round')],
  ['trunc', rounding('trunc')],
  ['square', unary((x) => `(${x} * ${x})`)],
  ['isnan', (args) => (args[0]?.kind === 'value' ? (isF(args[0].dtype) ? boolOf(`kiln_isnan(${args[0].expr})`) : '0i') : null)],
  ['isinf', (args) => (args[0]?.kind === 'value' ? (isF(args[0].dtype) ? boolOf(`kiln_isinf(${args[0].expr})`) : '0i') : null)],
  ['isfinite', (args) => (args[0]?.kind === 'value' ? (isF(args[0].dtype) ? boolOf(`kiln_isfinite(${args[0].expr})`) : '1i') : null)],
  ['logicalNot', (args) => (args[0]?.kind === 'value' && wgslComputeType(args[0].dtype) !== null ? boolOf(`${args[0].expr} == ${wgslLit(0, wgslComputeType(args[0].dtype)!)}`) : null)],
  [
    'gelu',
    (args, ctx) => {
      if (args[0]?.kind !== 'value' || !isFloating(ctx.out)) return null;
      const x = operand(args[0], ctx.out);
      if (x === null) return null;
      const approx = args[1]?.kind === 'const' ? args[1].value : 'none';
      return approx === 'tanh' ? `kiln_gelu_tanh(${x})` : `kiln_gelu(${x})`;
    },
  ],
  [
    'softplus',
    (args, ctx) => {
      const beta = num(args[1]);
      const threshold = num(args[2]);
      if (args[0]?.kind !== 'value' || beta === null || threshold === null || !isFloating(ctx.out)) return null;
      const x = operand(args[0], ctx.out);
      if (x === null) return null;
      const b = wgslLit(beta, 'f32');
      return `select(kiln_log1p(kiln_exp(${x} * ${b})) / ${b}, ${x}, ${x} * ${b} > ${wgslLit(threshold, 'f32')})`;
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
  ).map(([name, op]): [string, WgslTemplate] => [name, binary((a, b) => boolOf(`${a} ${op} ${b}`), 'promoted')]),
  ...(
    [
      ['logicalAnd', '&&'],
      ['logicalOr', '||'],
      ['logicalXor', '!='],
    ] as const
  ).map(([name, op]): [string, WgslTemplate] => [
    name,
    (args) => {
      const t = promoted(args.slice(0, 2));
      const tt = wgslComputeType(t);
      const a = operand(args[0], t);
      const b = operand(args[1], t);
      if (a === null || b === null || tt === null) return null;
      return boolOf(`(${a} != ${wgslLit(0, tt)}) ${op} (${b} != ${wgslLit(0, tt)})`);
    },
  ]),
  // --- clamp, where, lerp
  ['clamp', clampTemplate],
  ['clampTensor', clampTemplate],
  [
    'where',
    (args, ctx) => {
      if (args[0]?.kind !== 'value') return null;
      const ct = wgslComputeType(args[0].dtype);
      const a = operand(args[1], ctx.out);
      const b = operand(args[2], ctx.out);
      if (a === null || b === null || ct === null) return null;
      return `select(${b}, ${a}, ${args[0].expr} != ${wgslLit(0, ct)})`;
    },
  ],
  [
    'lerp',
    (args, ctx) => {
      if (!isF(ctx.out)) return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const w = operand(args[2], ctx.out);
      if (a === null || b === null || w === null) return null;
      return `kiln_lerp(${a}, ${b}, ${w})`;
    },
  ],
  // --- copies and casts: the value in the output's compute type (the store rounds to storage)
  ['toDtype', (args, ctx) => (args[0]?.kind === 'value' ? operand(args[0], ctx.out) : null)],
  ['clone', (args, ctx) => (args[0]?.kind === 'value' ? operand(args[0], ctx.out) : null)],
  // --- ops defined once as compositions of primitives (composites.ts)
  ...[...COMPOSITES].map(([name, c]): [string, WgslTemplate] => [name, composite(c)]),
]);

/** clamp / clampTensor: a missing bound is left out; NaN in x propagates (kiln_fmax/fmin). */
function clampTemplate(args: readonly MathArg[], ctx: WgslTemplateCtx): string | null {
  if (args[0]?.kind !== 'value' || ctx.out === 'bool') return null;
  let e = operand(args[0], ctx.out);
  if (e === null) return null;
  if (!isNone(args[1])) {
    const lo = operand(args[1], ctx.out);
    if (lo === null) return null;
    e = maxOf(e, lo, ctx.out);
  }
  if (!isNone(args[2])) {
    const hi = operand(args[2], ctx.out);
    if (hi === null) return null;
    e = minOf(e, hi, ctx.out);
  }
  return e;
}
