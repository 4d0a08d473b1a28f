/**
 * The CUDA templates evaluated numerically: each CUDA C expression is translated to JavaScript
 * (literals, casts, libm calls, the prelude's kiln_* helpers written out from their C) and
 * evaluated on sample values next to the JS template (lower/ops.ts), whose results the compiler's
 * parity tests check against eager Kiln. Catches wrong constants, operand order, casts and
 * semantics in the CUDA table without a GPU.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEMPLATES, type TArg } from '../src/compile/lower/ops.js';
import { CUDA_TEMPLATES, type CArg } from '../src/compile/codegen/cuda/templates.js';
import { HELPERS } from '../src/compile/codegen/js/compile.js';
import { erf } from '../src/kernels/cpu/pointwise-math.js';
import type { DType } from '../src/tensor/dtype.js';

/** The prelude's helpers, transcribed from their C (prelude.ts) in double precision. */
const K = {
  max: (a: number, b: number) => (a > b || a !== a ? a : b),
  min: (a: number, b: number) => (a < b || a !== a ? a : b),
  abs: Math.abs,
  isinf: (x: number) => Math.abs(x) === Infinity,
  isfinite: (x: number) => Number.isFinite(x),
  cpow: (x: number, y: number) => (x === 1 || y === 0 ? 1 : x === -1 && Math.abs(y) === Infinity ? 1 : Math.pow(x, y)),
  remainder: (a: number, b: number) => {
    let m = a % b;
    if (m !== 0 && b < 0 !== m < 0) m += b;
    return m;
  },
  divfloor: (a: number, b: number) => {
    if (b === 0) return a / b;
    const mod = a % b;
    let div = (a - mod) / b;
    if (mod !== 0 && b < 0 !== mod < 0) div -= 1;
    if (div === 0) return Math.sign(a / b) < 0 || Object.is(a / b, -0) ? -0 : 0;
    let fl = Math.floor(div);
    if (div - fl > 0.5) fl += 1;
    return fl;
  },
  lerp: (s: number, e: number, w: number) => (w < 0.5 && w > -0.5 ? s + w * (e - s) : e - (e - s) * (1 - w)),
};
const MATH: Record<string, (...x: number[]) => number> = {
  exp: Math.exp,
  expm1: Math.expm1,
  log: Math.log,
  log2: Math.log2,
  log10: Math.log10,
  log1p: Math.log1p,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  tanh: Math.tanh,
  erf,
  floor: Math.floor,
  ceil: Math.ceil,
  trunc: Math.trunc,
  rint: HELPERS.roundHalfEven,
  atan2: Math.atan2,
  fabs: Math.abs,
};
const CASTS: Record<string, (x: number) => number> = {
  float: Math.fround,
  double: (x) => x,
  int: (x) => Math.trunc(x) | 0,
  'long long': Math.trunc,
};

/** CUDA C expression (template output) -> JavaScript. */
function toJs(c: string): string {
  return c
    .replace(/__int_as_float\(0x7fc00000\)/g, 'NaN')
    .replace(/__int_as_float\(0x7f800000\)/g, 'Infinity')
    .replace(/__int_as_float\(0xff800000\)/g, '(-Infinity)')
    .replace(/__longlong_as_double\(0x7ff8000000000000LL\)/g, 'NaN')
    .replace(/__longlong_as_double\(0x7ff0000000000000LL\)/g, 'Infinity')
    .replace(/__longlong_as_double\(\(long long\)0xfff0000000000000ULL\)/g, '(-Infinity)')
    .replace(/(\d+\.\d*(?:e[+-]?\d+)?)f\b/g, '$1')
    .replace(/(\d+)LL\b/g, '$1')
    .replace(/\(\((float|double|int|long long)\)(\w+)\)/g, (_, t: string, v: string) => `CAST['${t}'](${v})`)
    .replace(/\bkiln_(\w+)\(/g, 'K.$1(')
    .replace(/\b(exp|expm1|log|log2|log10|log1p|sqrt|rsqrt|sin|cos|tan|tanh|erf|floor|ceil|trunc|rint|atan2|fabs)f?\(/g, "MATH['$1'](")
    .replace(/([^=!<>])==([^=])/g, '$1===$2')
    .replace(/!=([^=])/g, '!==$1');
}

function evalC(expr: string, env: Record<string, number>): number {
  const f = new Function('K', 'MATH', 'CAST', ...Object.keys(env), `return (${toJs(expr)});`) as (...a: unknown[]) => number | boolean;
  const r = f(K, MATH, CASTS, ...Object.values(env));
  return typeof r === 'boolean' ? (r ? 1 : 0) : r;
}

function evalJs(expr: string, env: Record<string, number>): number {
  const f = new Function('H', ...Object.keys(env), `return (${expr});`) as (...a: unknown[]) => number;
  return f(HELPERS, ...Object.values(env));
}

const SAMPLES = [-2.5, -1, -0.5, 0, 0.3, 1, 2, 7.25];

test('CUDA templates compute what the JS templates compute', () => {
  let compared = 0;
  const checked = new Set<string>();
  for (const [op, js] of TEMPLATES) {
    const cu = CUDA_TEMPLATES.get(op)!;
    for (const out of ['float32', 'float64'] as DType[]) {
      const patterns: TArg[][] = [
        [{ kind: 'value', expr: 'x', dtype: out, shape: [2] }],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'value', expr: 'y', dtype: out, shape: [2] },
        ],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'const', value: 0.75 },
        ],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'value', expr: 'y', dtype: out, shape: [2] },
          { kind: 'const', value: 2 },
        ],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'const', value: -1 },
          { kind: 'const', value: 1.5 },
        ],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'value', expr: 'y', dtype: out, shape: [2] },
          { kind: 'const', value: 'floor' },
        ],
        [
          { kind: 'value', expr: 'x', dtype: out, shape: [2] },
          { kind: 'const', value: 'tanh' },
        ],
      ];
      for (const args of patterns) {
        const j = js(args, { out });
        const c = cu(args as CArg[], { out });
        if (j === null || c === null) continue;
        checked.add(op);
        for (const x of SAMPLES) {
          for (const y of SAMPLES) {
            const want = evalJs(j, { x, y });
            const got = evalC(c, { x, y });
            const ctx: string = `${op}(${args.map((a) => (a.kind === 'value' ? a.expr : JSON.stringify(a.value))).join(', ')}) ${out} at x=${x}, y=${y}: CUDA ${c} -> ${got}, JS ${j} -> ${want}`;
            if (Number.isNaN(want)) assert.ok(Number.isNaN(got), ctx);
            else if (!Number.isFinite(want)) assert.equal(got, want, ctx);
            else assert.ok(Math.abs(got - want) <= 1e-6 * Math.max(1, Math.abs(want)), ctx);
            compared++;
          }
        }
      }
    }
  }
  // Every floating op of the table was exercised by some pattern.
  const missing = [...TEMPLATES.keys()].filter((op) => !checked.has(op));
  assert.deepEqual(missing, [], `unexercised: ${missing.join(', ')}`);
  assert.ok(compared > 3000, `${compared} comparisons`);
});
