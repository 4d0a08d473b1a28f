/**
 * The C pointwise math table of the native CPU path: for each op with a float32 C form, the C
 * expression of one element from its operands' C expressions. The compiler's native kernels
 * (compile/codegen/c: pointwise groups, row kernels, GEMM epilogues) render every node through it;
 * values are float32 only (those generators take float32 groups alone). The transcendental helpers
 * (k_exp, k_tanh, k_sigmoid, k_erf, k_gelu: branch-free, vectorisable) and k_max / k_min / k_lo /
 * k_hi / k_relu are the C of kernels/cpu/native/c-math.ts, shared with the eager native kernels.
 * An op or argument combination without a C form gives null: the group keeps its Wasm/JS kernel.
 */
import { COMPOSITES, type Composite } from './composites.js';
import { cFamilyDialect, renderText, type TextDialect } from './expr.js';

/** A node argument as the table sees it (structurally the compiler's IRArg: value, const or list). */
export type CRawArg = { readonly kind: string; readonly value?: unknown };

/**
 * An entry: the node's raw arguments (for constants: alpha, a rounding mode, absent bounds) and
 * each argument's C expression (null where it has none: lists, strings, absent optionals).
 */
export type CEntry = (raw: readonly CRawArg[], xs: readonly (string | null)[]) => string | null;

/** A float32 C literal (9 significant digits round-trip; math.h macros for the non-finite). */
export const num = (v: number): string => {
  const x = Math.fround(v);
  if (Number.isNaN(x)) return 'NAN';
  if (x === Infinity) return 'INFINITY';
  if (x === -Infinity) return '(-INFINITY)';
  if (Object.is(x, -0)) return '(-0.0f)';
  return `${x.toPrecision(9)}f`;
};

const isNone = (a: CRawArg | undefined): boolean => !a || (a.kind === 'const' && (a.value === null || a.value === undefined));

/** A unary entry: defined when the operand has a C expression. */
const unary =
  (f: (x: string, raw: readonly CRawArg[]) => string | null): CEntry =>
  (raw, [x]) =>
    x === null || x === undefined ? null : f(x, raw);

/** A binary entry over two operands with C expressions. */
const binary =
  (f: (x: string, y: string, raw: readonly CRawArg[]) => string | null): CEntry =>
  (raw, [x, y]) =>
    x === null || x === undefined || y === null || y === undefined ? null : f(x, y, raw);

/** add / sub: a constant alpha scales the second operand. */
const addSub =
  (sign: '+' | '-'): CEntry =>
  (raw, [x, y]) => {
    const a2 = raw[2];
    if (x === null || x === undefined || y === null || y === undefined || a2?.kind !== 'const' || typeof a2.value !== 'number') return null;
    const rhs = a2.value === 1 ? y : `(${num(a2.value)} * ${y})`;
    return `(${x} ${sign} ${rhs})`;
  };

/** clamp / clampTensor: each present bound applied as k_lo / k_hi (NaN in x propagates). */
const clamp: CEntry = (raw, xs) => {
  const x = xs[0];
  if (x === null || x === undefined) return null;
  let e = x;
  if (!isNone(raw[1])) {
    const lo = xs[1];
    if (lo === null || lo === undefined) return null;
    e = `k_lo(${e}, ${lo})`;
  }
  if (!isNone(raw[2])) {
    const hi = xs[2];
    if (hi === null || hi === undefined) return null;
    e = `k_hi(${e}, ${hi})`;
  }
  return e;
};

/** The primitives of expr.ts in float32 C (c-math.ts's k_exp and NaN-propagating k_max / k_min, libm otherwise). */
const C_DIALECT: TextDialect = cFamilyDialect({
  num,
  call(f, a, b) {
    switch (f) {
      case 'abs':
        return `fabsf(${a})`;
      case 'max':
      case 'min':
        return `k_${f}(${a}, ${b})`;
      case 'exp':
        return `k_exp(${a})`;
      default:
        return `${f}f(${a})`;
    }
  },
  eq: '==',
  isinf: (x) => `(fabsf(${x}) == INFINITY)`,
});

/** A composite's entry: every operand has a C expression; the body in float32 C. */
function composite(c: Composite): CEntry {
  return (_raw, xs) => {
    const ops = xs.slice(0, c.arity);
    if (ops.length < c.arity || !ops.every((x): x is string => x !== null && x !== undefined)) return null;
    return renderText(c.body, ops, C_DIALECT);
  };
}

export const C_TEMPLATES: ReadonlyMap<string, CEntry> = new Map<string, CEntry>([
  // --- binary and clamp
  ['add', addSub('+')],
  ['sub', addSub('-')],
  ['mul', binary((x, y) => `(${x} * ${y})`)],
  ['div', binary((x, y, raw) => (isNone(raw[2]) ? `(${x} / ${y})` : null))],
  ['maximum', binary((x, y) => `k_max(${x}, ${y})`)],
  ['minimum', binary((x, y) => `k_min(${x}, ${y})`)],
  ['pow', unary((x, raw) => (raw[1]?.kind === 'const' && raw[1].value === 2 ? `(${x} * ${x})` : null))],
  ['clamp', clamp],
  ['clampTensor', clamp],
  // --- unary
  ['neg', unary((x) => `(-${x})`)],
  ['abs', unary((x) => `fabsf(${x})`)],
  ['square', unary((x) => `(${x} * ${x})`)],
  ['sqrt', unary((x) => `sqrtf(${x})`)],
  ['rsqrt', unary((x) => `(1.0f / sqrtf(${x}))`)],
  ['reciprocal', unary((x) => `(1.0f / ${x})`)],
  ['relu', unary((x) => `k_relu(${x})`)],
  ['toDtype', unary((x) => x)],
  ['clone', unary((x) => x)],
  ['exp', unary((x) => `k_exp(${x})`)],
  ['log', unary((x) => `logf(${x})`)],
  ['tanh', unary((x) => `k_tanh(${x})`)],
  ['sigmoid', unary((x) => `k_sigmoid(${x})`)],
  ['erf', unary((x) => `k_erf(${x})`)],
  ['silu', unary((x) => `(${x} * k_sigmoid(${x}))`)],
  [
    'gelu',
    unary((x, raw) => {
      const approx = raw[1]?.kind === 'const' ? raw[1].value : 'none';
      if (approx === 'tanh') return `k_gelu_tanh(${x})`;
      return approx === 'none' || approx === undefined || approx === null ? `k_gelu(${x})` : null;
    }),
  ],
  // --- ops defined once as compositions of primitives (composites.ts)
  ...[...COMPOSITES].map(([name, c]): [string, CEntry] => [name, composite(c)]),
]);

/** The C expression of op `op` over its arguments, or null when it has no float32 C form here. */
export function cExpr(op: string, raw: readonly CRawArg[], xs: readonly (string | null)[]): string | null {
  return C_TEMPLATES.get(op)?.(raw, xs) ?? null;
}
