/**
 * A tiny language-neutral expression language for pointwise math: operands, number literals and a
 * small set of primitives that every target language (JS, C, CUDA C, Wasm) renders through its own
 * table (js.ts, c.ts, cuda.ts, wasm.ts). An op whose math is a composition of primitives is written
 * once against these builders (composites.ts) and then exists in every language, eager and
 * compiled; a language that lacks a primitive declines the whole expression (the node then runs
 * as it would for any op that language has no form for).
 *
 * Semantics of the primitives (every language keeps them): arithmetic in the compute type of the
 * node; max/min propagate NaN (torch.maximum); comparisons and isinf give booleans, which only
 * `and`, `or` and the condition of `select` take. Expressions are trees whose leaves may be
 * shared (a DAG); text languages repeat a shared subexpression, Wasm computes it once.
 */

export type NumPrim = 'add' | 'sub' | 'mul' | 'div' | 'neg' | 'abs' | 'max' | 'min' | 'exp' | 'log' | 'log1p' | 'sqrt';
export type BoolPrim = 'eq' | 'lt' | 'isinf' | 'and' | 'or';

/** A numeric expression: an operand, a literal, a primitive over expressions, or a select. */
export type MathExpr =
  | { readonly k: 'arg'; readonly i: number }
  | { readonly k: 'num'; readonly v: number }
  | { readonly k: 'op'; readonly f: NumPrim; readonly xs: readonly MathExpr[] }
  | { readonly k: 'select'; readonly c: BoolExpr; readonly a: MathExpr; readonly b: MathExpr };

/** A boolean expression (a comparison, isinf, or a logical combination). */
export type BoolExpr =
  | { readonly k: 'cmp'; readonly f: 'eq' | 'lt'; readonly xs: readonly [MathExpr, MathExpr] }
  | { readonly k: 'isinf'; readonly x: MathExpr }
  | { readonly k: 'logic'; readonly f: 'and' | 'or'; readonly xs: readonly [BoolExpr, BoolExpr] };

type In = MathExpr | number;
const e = (x: In): MathExpr => (typeof x === 'number' ? { k: 'num', v: x } : x);
const op =
  (f: NumPrim) =>
  (...xs: In[]): MathExpr => ({ k: 'op', f, xs: xs.map(e) });

/** The builders composites are written with (numbers are literals). */
export const M = {
  arg: (i: number): MathExpr => ({ k: 'arg', i }),
  add: op('add') as (a: In, b: In) => MathExpr,
  sub: op('sub') as (a: In, b: In) => MathExpr,
  mul: op('mul') as (a: In, b: In) => MathExpr,
  div: op('div') as (a: In, b: In) => MathExpr,
  neg: op('neg') as (a: In) => MathExpr,
  abs: op('abs') as (a: In) => MathExpr,
  max: op('max') as (a: In, b: In) => MathExpr,
  min: op('min') as (a: In, b: In) => MathExpr,
  exp: op('exp') as (a: In) => MathExpr,
  log: op('log') as (a: In) => MathExpr,
  log1p: op('log1p') as (a: In) => MathExpr,
  sqrt: op('sqrt') as (a: In) => MathExpr,
  eq: (a: In, b: In): BoolExpr => ({ k: 'cmp', f: 'eq', xs: [e(a), e(b)] }),
  lt: (a: In, b: In): BoolExpr => ({ k: 'cmp', f: 'lt', xs: [e(a), e(b)] }),
  isinf: (a: In): BoolExpr => ({ k: 'isinf', x: e(a) }),
  and: (a: BoolExpr, b: BoolExpr): BoolExpr => ({ k: 'logic', f: 'and', xs: [a, b] }),
  or: (a: BoolExpr, b: BoolExpr): BoolExpr => ({ k: 'logic', f: 'or', xs: [a, b] }),
  select: (c: BoolExpr, a: In, b: In): MathExpr => ({ k: 'select', c, a: e(a), b: e(b) }),
};

/** How one language writes the primitives, over already rendered operand texts. */
export interface TextDialect {
  num(v: number): string;
  op(f: NumPrim, xs: readonly string[]): string | null;
  cmp(f: 'eq' | 'lt', a: string, b: string): string;
  isinf(x: string): string;
  logic(f: 'and' | 'or', a: string, b: string): string;
  select(c: string, a: string, b: string): string;
}

/** What a C-family language (JS, C, CUDA C) writes its own way; the rest of the dialect is shared. */
export interface CFamilyParts {
  num(v: number): string;
  /** The math functions: abs, max, min, exp, log, log1p, sqrt (infix arithmetic is shared). */
  call(f: Exclude<NumPrim, 'add' | 'sub' | 'mul' | 'div' | 'neg'>, a: string, b: string | undefined): string;
  /** The equality operator ('==' in C, '===' in JS). */
  readonly eq: string;
  isinf(x: string): string;
}

/** A dialect with C's infix arithmetic, comparisons, && / || and ?: (every text table's). */
export function cFamilyDialect(p: CFamilyParts): TextDialect {
  return {
    num: p.num,
    op(f, [a, b]) {
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
        default:
          return p.call(f, a!, b);
      }
    },
    cmp: (f, a, b) => `(${a} ${f === 'eq' ? p.eq : '<'} ${b})`,
    isinf: p.isinf,
    logic: (f, a, b) => `(${a} ${f === 'and' ? '&&' : '||'} ${b})`,
    select: (c, a, b) => `(${c} ? ${a} : ${b})`,
  };
}

/** Renders an expression as text, operands by position; null when the dialect lacks a primitive. */
export function renderText(x: MathExpr, args: readonly string[], d: TextDialect): string | null {
  const num = (y: MathExpr): string | null => {
    switch (y.k) {
      case 'arg':
        return args[y.i] ?? null;
      case 'num':
        return d.num(y.v);
      case 'op': {
        const xs = y.xs.map(num);
        return xs.every((s): s is string => s !== null) ? d.op(y.f, xs) : null;
      }
      case 'select': {
        const c = bool(y.c);
        const a = num(y.a);
        const b = num(y.b);
        return c === null || a === null || b === null ? null : d.select(c, a, b);
      }
      default:
        return y satisfies never;
    }
  };
  const bool = (y: BoolExpr): string | null => {
    switch (y.k) {
      case 'cmp': {
        const a = num(y.xs[0]);
        const b = num(y.xs[1]);
        return a === null || b === null ? null : d.cmp(y.f, a, b);
      }
      case 'isinf': {
        const a = num(y.x);
        return a === null ? null : d.isinf(a);
      }
      case 'logic': {
        const a = bool(y.xs[0]);
        const b = bool(y.xs[1]);
        return a === null || b === null ? null : d.logic(y.f, a, b);
      }
      default:
        return y satisfies never;
    }
  };
  return num(x);
}

/** Every primitive an expression uses (a language checks it has them all before emitting code). */
export function primitivesOf(x: MathExpr): Set<NumPrim | BoolPrim> {
  const out = new Set<NumPrim | BoolPrim>();
  const num = (y: MathExpr): void => {
    if (y.k === 'op') {
      out.add(y.f);
      y.xs.forEach(num);
    } else if (y.k === 'select') {
      bool(y.c);
      num(y.a);
      num(y.b);
    }
  };
  const bool = (y: BoolExpr): void => {
    if (y.k === 'cmp') {
      out.add(y.f);
      y.xs.forEach(num);
    } else if (y.k === 'isinf') {
      out.add('isinf');
      num(y.x);
    } else {
      out.add(y.f);
      y.xs.forEach(bool);
    }
  };
  num(x);
  return out;
}
