/**
 * The JavaScript pointwise math table: for each pointwise op (and casts), a template that turns
 * argument expressions into one JavaScript expression computing the element in float64 (JS
 * numbers), with PyTorch's semantics. The compiler inlines these into its JS kernels
 * (compile/codegen/js/emit.ts; lower/lower.ts asks them whether a node is fusible), and the eager
 * CPU kernels of composite ops run them as element functions (compositeFn). Arguments are local
 * identifiers or literals, so a template may repeat them. `H` is the helper object of the compiled
 * kernels (erf, cpow, half rounding...: compile/codegen/js/compile.ts). A template returns null
 * when the op/arguments combination is not fusible (the node then runs as an extern call through
 * the dispatcher).
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { castValue } from '../../tensor/typed.js';
import { isNone, num, promoted, type MathArg } from './args.js';
import { COMPOSITES, type Composite } from './composites.js';
import { cFamilyDialect, renderText, type BoolExpr, type MathExpr, type TextDialect } from './expr.js';

/** One positional argument as the template sees it. */
export type TArg = MathArg;

export interface TemplateCtx {
  /** dtype of the node's output. */
  readonly out: DType;
}

export type Template = (args: readonly TArg[], ctx: TemplateCtx) => string | null;

/** A JS literal for a number (handles -0, NaN, infinities). */
export function lit(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (Object.is(x, -0)) return '-0';
  const s = String(x);
  return x < 0 ? `(${s})` : s;
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

/** The primitives of expr.ts in JavaScript (float64 numbers; Math.max/min propagate NaN). */
const JS_DIALECT: TextDialect = cFamilyDialect({
  num: lit,
  call: (f, a, b) => (f === 'max' || f === 'min' ? `Math.${f}(${a}, ${b})` : `Math.${f}(${a})`),
  eq: '===',
  isinf: (x) => `(Math.abs(${x}) === Infinity)`,
});

/** A composite's template: a floating output, its operands in that dtype, the body in JavaScript. */
function composite(c: Composite): Template {
  return (args, ctx) => {
    if (!isFloating(ctx.out) || args.length < c.arity) return null;
    const xs: string[] = [];
    for (let i = 0; i < c.arity; i++) {
      const x = operand(args[i], ctx.out);
      if (x === null) return null;
      xs.push(x);
    }
    return renderText(c.body, xs, JS_DIALECT);
  };
}

const SQRT1_2 = lit(Math.SQRT1_2);
const SQRT_2_OVER_PI = lit(Math.sqrt(2 / Math.PI));

/** add / sub: a constant alpha scales the second operand (alpha 1 leaves it out). */
const addSub =
  (sign: '+' | '-'): Template =>
  (args, ctx) => {
    if (ctx.out === 'bool') return null;
    const a = operand(args[0], ctx.out);
    const b = operand(args[1], ctx.out);
    const alpha = num(args[2]);
    if (a === null || b === null || alpha === null) return null;
    return alpha === 1 ? `(${a} ${sign} ${b})` : `(${a} ${sign} ${lit(alpha)} * ${b})`;
  };

export const JS_TEMPLATES: ReadonlyMap<string, Template> = new Map<string, Template>([
  // --- arithmetic
  ['add', addSub('+')],
  ['sub', addSub('-')],
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
  // float64 results use the double-precision erf; the float32-accurate one is faster.
  ['erf', (args, ctx) => unary((x) => `H.${ctx.out === 'float64' ? 'erf64' : 'erf'}(${x})`, { floatOnly: true })(args, ctx)],
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
      return `(${x} * 0.5 * (1 + H.${ctx.out === 'float64' ? 'erf64' : 'erf'}(${x} * ${SQRT1_2})))`;
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
  // --- ops defined once as compositions of primitives (composites.ts)
  ...[...COMPOSITES].map(([name, c]): [string, Template] => [name, composite(c)]),
]);

type ElementFn = (...xs: number[]) => number;

/** A composite evaluated by walking its expression: the element function where code generation is not allowed. */
function interpreted(c: Composite): ElementFn {
  const num = (y: MathExpr, xs: readonly number[]): number => {
    switch (y.k) {
      case 'arg':
        return xs[y.i]!;
      case 'num':
        return y.v;
      case 'select':
        return bool(y.c, xs) ? num(y.a, xs) : num(y.b, xs);
      case 'op': {
        const [a, b] = y.xs.map((z) => num(z, xs)) as [number, number];
        switch (y.f) {
          case 'add':
            return a + b;
          case 'sub':
            return a - b;
          case 'mul':
            return a * b;
          case 'div':
            return a / b;
          case 'neg':
            return -a;
          case 'max':
            return Math.max(a, b);
          case 'min':
            return Math.min(a, b);
          default:
            return Math[y.f](a);
        }
      }
      default:
        return y satisfies never;
    }
  };
  const bool = (y: BoolExpr, xs: readonly number[]): boolean => {
    if (y.k === 'cmp') return y.f === 'eq' ? num(y.xs[0], xs) === num(y.xs[1], xs) : num(y.xs[0], xs) < num(y.xs[1], xs);
    if (y.k === 'isinf') return Math.abs(num(y.x, xs)) === Infinity;
    return y.f === 'and' ? bool(y.xs[0], xs) && bool(y.xs[1], xs) : bool(y.xs[0], xs) || bool(y.xs[1], xs);
  };
  return (...xs) => num(c.body, xs);
}

const elementFns = new Map<string, ElementFn>();

/**
 * The eager CPU element function of composite `name` (float64 in, float64 out): the same JavaScript
 * text the compiler inlines, as one function (a distinct literal per op, so the CPU loops stay
 * monomorphic); an interpreter of the expression where new Function is not allowed.
 */
export function compositeFn(name: string): ElementFn {
  let fn = elementFns.get(name);
  if (fn) return fn;
  const c = COMPOSITES.get(name);
  if (!c) throw new Error(`compositeFn: '${name}' is not a composite pointwise op`);
  const params = ['a', 'b', 'c', 'd'].slice(0, c.arity);
  try {
    fn = new Function(`"use strict"; return (${params.join(', ')}) => ${renderText(c.body, params, JS_DIALECT)!};`)() as ElementFn;
  } catch {
    fn = interpreted(c);
  }
  elementFns.set(name, fn);
  return fn;
}
