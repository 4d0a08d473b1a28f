/**
 * The pointwise expression table: for each registered pointwise op (and casts), a template that
 * turns argument expressions into one JavaScript expression computing the element in float64 (JS
 * numbers), with PyTorch's semantics. Arguments are always local identifiers or literals, so a
 * template may repeat them. `H` is the helper object passed to every kernel (erf, cpow, half
 * rounding...). A template returns null when the op/arguments combination is not fusible (the node
 * then runs as an extern call through the dispatcher).
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating, resultType, type PromotionOperand } from '../../tensor/dtype.js';
import { castValue } from '../../tensor/typed.js';

/** One positional argument as the template sees it. */
export type TArg =
  | { readonly kind: 'value'; readonly expr: string; readonly dtype: DType; readonly shape: readonly number[] }
  | { readonly kind: 'const'; readonly value: unknown };

export interface TemplateCtx {
  /** dtype of the node's output. */
  readonly out: DType;
}

type Template = (args: readonly TArg[], ctx: TemplateCtx) => string | null;

/** A JS literal for a number (handles -0, NaN, infinities). */
export function lit(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (Object.is(x, -0)) return '-0';
  const s = String(x);
  return x < 0 ? `(${s})` : s;
}

function promotionOperand(a: TArg): PromotionOperand | undefined {
  if (a.kind === 'value') return { dtype: a.dtype, shape: a.shape };
  if (typeof a.value === 'number' || typeof a.value === 'boolean') return a.value;
  return undefined;
}

/** The promoted dtype of the operands (as TensorIterator's common dtype). */
function promoted(args: readonly TArg[]): DType {
  return resultType(args.map(promotionOperand).filter((x): x is PromotionOperand => x !== undefined));
}

/**
 * Expression of an operand in compute dtype `dt`: scalar constants are rounded to a floating
 * compute dtype as the eager kernels do (prep in src/kernels/cpu/pointwise.ts).
 */
function operand(a: TArg | undefined, dt: DType): string | null {
  if (!a) return null;
  if (a.kind === 'value') return a.expr;
  const v = a.value;
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (typeof v !== 'number') return null;
  return lit(isFloating(dt) ? castValue(v, dt) : v);
}

function num(a: TArg | undefined): number | null {
  if (!a || a.kind !== 'const') return null;
  if (typeof a.value === 'number') return a.value;
  if (typeof a.value === 'boolean') return a.value ? 1 : 0;
  return null;
}

const isNone = (a: TArg | undefined): boolean => !a || (a.kind === 'const' && (a.value === null || a.value === undefined));

const wraps32 = (d: DType): boolean => d === 'int32' || d === 'uint8';

function unary(f: (x: string) => string, opts: { floatOnly?: boolean } = {}): Template {
  return (args, ctx) => {
    const x = operand(args[0], ctx.out);
    if (x === null || args[0]!.kind !== 'value') return null;
    if (opts.floatOnly && !isFloating(ctx.out)) return null;
    if (ctx.out === 'bool' && !opts.floatOnly) return null;
    return f(x);
  };
}

function binary(f: (a: string, b: string, ctx: TemplateCtx) => string | null, computeIn: 'out' | 'promoted' = 'out'): Template {
  return (args, ctx) => {
    const dt = computeIn === 'out' ? ctx.out : promoted(args.slice(0, 2));
    const a = operand(args[0], dt);
    const b = operand(args[1], dt);
    if (a === null || b === null) return null;
    return f(a, b, ctx);
  };
}

const SQRT1_2 = lit(Math.SQRT1_2);
const SQRT_2_OVER_PI = lit(Math.sqrt(2 / Math.PI));

export const TEMPLATES: ReadonlyMap<string, Template> = new Map<string, Template>([
  // --- arithmetic
  [
    'add',
    (args, ctx) => {
      if (ctx.out === 'bool') return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const alpha = num(args[2]);
      if (a === null || b === null || alpha === null) return null;
      return alpha === 1 ? `(${a} + ${b})` : `(${a} + ${lit(alpha)} * ${b})`;
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
      return alpha === 1 ? `(${a} - ${b})` : `(${a} - ${lit(alpha)} * ${b})`;
    },
  ],
  ['mul', binary((a, b, ctx) => (ctx.out === 'bool' ? null : !isFloating(ctx.out) && wraps32(ctx.out) ? `Math.imul(${a}, ${b})` : `(${a} * ${b})`))],
  [
    'div',
    (args, ctx) => {
      const mode = args[2];
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      if (isNone(mode)) return `(${a} / ${b})`;
      // Integer division by zero raises in eager mode: leave those to the dispatcher.
      if (!isFloating(ctx.out)) return null;
      if (mode!.kind === 'const' && mode!.value === 'trunc') return `Math.trunc(${a} / ${b})`;
      if (mode!.kind === 'const' && mode!.value === 'floor') return `H.divFloorFloat(${a}, ${b})`;
      return null;
    },
  ],
  ['remainder', binary((a, b, ctx) => (isFloating(ctx.out) ? `H.remainderFloat(${a}, ${b})` : null))],
  [
    'pow',
    (args, ctx) => {
      if (!isFloating(ctx.out)) return null;
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      if (a === null || b === null) return null;
      if (num(args[1]) === 2) return `(${a} * ${a})`;
      return `H.cpow(${a}, ${b})`;
    },
  ],
  ['powScalar', binary((a, b, ctx) => (isFloating(ctx.out) ? `H.cpow(${a}, ${b})` : null))],
  ['maximum', binary((a, b, ctx) => (ctx.out === 'bool' ? null : `Math.max(${a}, ${b})`))],
  ['minimum', binary((a, b, ctx) => (ctx.out === 'bool' ? null : `Math.min(${a}, ${b})`))],
  ['atan2', binary((a, b) => `Math.atan2(${a}, ${b})`)],
  // --- unary
  ['neg', unary((x) => `(-${x})`)],
  ['abs', unary((x) => `Math.abs(${x})`)],
  ['sign', unary((x) => `(${x} > 0 ? 1 : ${x} < 0 ? -1 : 0)`)],
  ['exp', unary((x) => `Math.exp(${x})`, { floatOnly: true })],
  ['expm1', unary((x) => `Math.expm1(${x})`, { floatOnly: true })],
  ['log', unary((x) => `Math.log(${x})`, { floatOnly: true })],
  ['log2', unary((x) => `Math.log2(${x})`, { floatOnly: true })],
  ['log10', unary((x) => `Math.log10(${x})`, { floatOnly: true })],
  ['log1p', unary((x) => `Math.log1p(${x})`, { floatOnly: true })],
  ['sqrt', unary((x) => `Math.sqrt(${x})`, { floatOnly: true })],
  ['rsqrt', unary((x) => `(1 / Math.sqrt(${x}))`, { floatOnly: true })],
  ['reciprocal', unary((x) => `(1 / ${x})`, { floatOnly: true })],
  ['sin', unary((x) => `Math.sin(${x})`, { floatOnly: true })],
  ['cos', unary((x) => `Math.cos(${x})`, { floatOnly: true })],
  ['tan', unary((x) => `Math.tan(${x})`, { floatOnly: true })],
  ['tanh', unary((x) => `Math.tanh(${x})`, { floatOnly: true })],
  ['sigmoid', unary((x) => `(1 / (1 + Math.exp(-${x})))`, { floatOnly: true })],
  ['erf', unary((x) => `H.erf(${x})`, { floatOnly: true })],
  ['relu', unary((x) => `(${x} > 0 || ${x} !== ${x} ? ${x} : 0)`)],
  ['silu', unary((x) => `(${x} / (1 + Math.exp(-${x})))`, { floatOnly: true })],
  ['floor', unary((x) => `Math.floor(${x})`)],
  ['ceil', unary((x) => `Math.ceil(${x})`)],
  ['round', unary((x) => `H.roundHalfEven(${x})`)],
  ['trunc', unary((x) => `Math.trunc(${x})`)],
  ['square', (args, ctx) => (args[0]?.kind !== 'value' ? null : wraps32(ctx.out) ? `Math.imul(${args[0].expr}, ${args[0].expr})` : `(${args[0].expr} * ${args[0].expr})`)],
  ['isnan', (args) => (args[0]?.kind === 'value' ? `(${args[0].expr} !== ${args[0].expr} ? 1 : 0)` : null)],
  ['isinf', (args) => (args[0]?.kind === 'value' ? `(${args[0].expr} === Infinity || ${args[0].expr} === -Infinity ? 1 : 0)` : null)],
  ['isfinite', (args) => (args[0]?.kind === 'value' ? `(Number.isFinite(${args[0].expr}) ? 1 : 0)` : null)],
  ['logicalNot', (args) => (args[0]?.kind === 'value' ? `(${args[0].expr} === 0 ? 1 : 0)` : null)],
  [
    'gelu',
    (args, ctx) => {
      const x = args[0]?.kind === 'value' ? args[0].expr : null;
      if (x === null || !isFloating(ctx.out)) return null;
      const approx = args[1]?.kind === 'const' ? args[1].value : 'none';
      if (approx === 'tanh') return `(0.5 * ${x} * (1 + Math.tanh(${SQRT_2_OVER_PI} * (${x} + 0.044715 * ${x} * ${x} * ${x}))))`;
      return `(${x} * 0.5 * (1 + H.erf(${x} * ${SQRT1_2})))`;
    },
  ],
  [
    'softplus',
    (args, ctx) => {
      const x = args[0]?.kind === 'value' ? args[0].expr : null;
      const beta = num(args[1]);
      const threshold = num(args[2]);
      if (x === null || beta === null || threshold === null || !isFloating(ctx.out)) return null;
      return `(${x} * ${lit(beta)} > ${lit(threshold)} ? ${x} : Math.log1p(Math.exp(${x} * ${lit(beta)})) / ${lit(beta)})`;
    },
  ],
  // --- comparisons and logical ops (bool out, 0/1)
  ...(
    [
      ['eq', '==='],
      ['ne', '!=='],
      ['lt', '<'],
      ['le', '<='],
      ['gt', '>'],
      ['ge', '>='],
    ] as const
  ).map(([name, op]): [string, Template] => [name, binary((a, b) => `(${a} ${op} ${b} ? 1 : 0)`, 'promoted')]),
  ['logicalAnd', binary((a, b) => `(${a} !== 0 && ${b} !== 0 ? 1 : 0)`, 'promoted')],
  ['logicalOr', binary((a, b) => `(${a} !== 0 || ${b} !== 0 ? 1 : 0)`, 'promoted')],
  ['logicalXor', binary((a, b) => `((${a} !== 0) !== (${b} !== 0) ? 1 : 0)`, 'promoted')],
  // --- clamp, where, lerp
  [
    'clamp',
    (args, ctx) => {
      if (args[0]?.kind !== 'value' || ctx.out === 'bool') return null;
      const x = args[0].expr;
      const lo = isNone(args[1]) ? '-Infinity' : operand(args[1], ctx.out);
      const hi = isNone(args[2]) ? 'Infinity' : operand(args[2], ctx.out);
      if (lo === null || hi === null) return null;
      return `Math.min(Math.max(${x}, ${lo}), ${hi})`;
    },
  ],
  [
    'clampTensor',
    (args, ctx) => {
      if (args[0]?.kind !== 'value' || ctx.out === 'bool') return null;
      const lo = isNone(args[1]) ? '-Infinity' : operand(args[1], ctx.out);
      const hi = isNone(args[2]) ? 'Infinity' : operand(args[2], ctx.out);
      if (lo === null || hi === null) return null;
      return `Math.min(Math.max(${args[0].expr}, ${lo}), ${hi})`;
    },
  ],
  [
    'where',
    (args, ctx) => {
      if (args[0]?.kind !== 'value') return null;
      const a = operand(args[1], ctx.out);
      const b = operand(args[2], ctx.out);
      if (a === null || b === null) return null;
      return `(${args[0].expr} !== 0 ? ${a} : ${b})`;
    },
  ],
  [
    'lerp',
    (args, ctx) => {
      const a = operand(args[0], ctx.out);
      const b = operand(args[1], ctx.out);
      const w = operand(args[2], ctx.out);
      if (a === null || b === null || w === null) return null;
      return `H.lerp(${a}, ${b}, ${w})`;
    },
  ],
  // --- copies and casts: the value itself; the cast's rounding is applied by roundExpr
  ['toDtype', (args) => (args[0]?.kind === 'value' ? args[0].expr : null)],
  ['clone', (args) => (args[0]?.kind === 'value' ? args[0].expr : null)],
]);

/** Ops whose result is a conversion (a cast rounds to its target dtype like a store would). */
export const CAST_OPS: ReadonlySet<string> = new Set(['toDtype', 'clone']);

/**
 * Rounds an expression's value the way the node's output dtype holds it inside a fused kernel.
 * Floating intermediates stay in the JS double they were computed in (at least float32's opmath,
 * as Inductor keeps them in registers); only explicit casts round (to float32 or a half) and the
 * store into the output array rounds to its dtype. Rounding every intermediate with Math.fround
 * cost about a third of the elementwise workload's kernel time (103 vs 67 ms per 1M elements) for
 * results that are, if anything, more accurate. Integer results wrap as their stores do.
 * `v` must be an identifier (it may be repeated).
 */
export function roundExpr(v: string, dtype: DType, isCast: boolean): string {
  switch (dtype) {
    case 'float32':
      return isCast ? `Math.fround(${v})` : v;
    case 'float16':
      return isCast ? `H.f16(${v})` : v;
    case 'bfloat16':
      return isCast ? `H.bf16(${v})` : v;
    case 'float64':
      return v;
    case 'int32':
      return `(${v} | 0)`;
    case 'uint8':
      return `(${v} & 255)`;
    case 'int64':
      return isCast ? `(Number.isFinite(${v}) ? Math.trunc(${v}) : 0)` : v;
    case 'bool':
      return isCast ? `(${v} !== 0 && ${v} === ${v} ? 1 : 0)` : v;
    default:
      return dtype satisfies never;
  }
}
