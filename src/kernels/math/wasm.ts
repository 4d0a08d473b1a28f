/**
 * The WebAssembly SIMD (f32x4) pointwise math table: for each op with a float32-lane form, an
 * emitter that computes one node's four lanes into a fresh v128 local from its operands' locals
 * (or splat constants). The compiler's Wasm kernels (compile/codegen/wasm: pointwise groups and
 * GEMM epilogues) emit every node through it; exp / log / tanh / sigmoid / erf / GELU are the
 * vectorised polynomials of kernels/cpu/wasm-math.ts. An op, argument combination or composite
 * primitive without an f32x4 form gives null (log1p has none: log(1 + x) would lose the small
 * values it exists for), and the whole group stays JavaScript, as for any op the table lacks.
 */
import type { DType } from '../../tensor/dtype.js';
import { castValue } from '../../tensor/typed.js';
import { f32x4Const, type FnBuilder, get, OP, set, V128 } from '../cpu/wasm-asm.js';
import { emitErf, emitExp, emitGeluErf, emitGeluTanh, emitLog, emitSigmoid, emitTanh } from '../cpu/wasm-math.js';
import { COMPOSITES, type Composite } from './composites.js';
import { primitivesOf, type BoolExpr, type BoolPrim, type MathExpr, type NumPrim } from './expr.js';

/** A node argument as the table sees it (structurally the compiler's IRArg). */
export type WasmRawArg = { readonly kind: string; readonly value?: unknown };

/** A node's arguments, by position, for an emitter. */
export interface WasmOperands {
  /** The raw argument i (constants: alpha, a rounding mode, absent bounds). */
  raw(i: number): WasmRawArg | undefined;
  /** Pushes argument i's value (its v128 local, or a splat constant rounded to `out`); false when not representable. */
  push(i: number): boolean;
  /** The v128 local holding argument i, or null (a constant, or no such value). */
  local(i: number): number | null;
  /** dtype of the node's output. */
  readonly out: DType;
}

/** Emits one node into a fresh local and returns it; null when it has no f32x4 form. */
export type WasmEntry = (f: FnBuilder, o: WasmOperands) => number | null;

const isNone = (a: WasmRawArg | undefined): boolean => !a || (a.kind === 'const' && (a.value === null || a.value === undefined));
const constNum = (a: WasmRawArg | undefined): number | null => (a?.kind === 'const' && typeof a.value === 'number' ? a.value : null);

/** Stores the value on top of the stack into a fresh v128 local. */
function fin(f: FnBuilder): number {
  const r = f.local(V128);
  f.emit(set(r));
  return r;
}

/** A binary lane op over arguments 0 and 1. */
const binary =
  (op: readonly number[]): WasmEntry =>
  (f, o) =>
    o.push(0) && o.push(1) ? (f.emit(op), fin(f)) : null;

/** A unary entry over argument 0's local. */
const unary =
  (emit: (f: FnBuilder, x: number, o: WasmOperands) => number | null): WasmEntry =>
  (f, o) => {
    const x = o.local(0);
    return x === null ? null : emit(f, x, o);
  };

/** A unary lane op sequence applied to argument 0. */
const lanes = (...ops: (readonly number[])[]): WasmEntry =>
  unary((f, x) => {
    f.emit(get(x), ...ops);
    return fin(f);
  });

const addSub =
  (op: readonly number[]): WasmEntry =>
  (f, o) => {
    const alpha = constNum(o.raw(2));
    if (alpha === null || !o.push(0) || !o.push(1)) return null;
    if (alpha !== 1) f.emit(f32x4Const(castValue(alpha, o.out)), OP.F32X4_MUL);
    f.emit(op);
    return fin(f);
  };

const clamp: WasmEntry = (f, o) => {
  const x = o.local(0);
  if (x === null) return null;
  f.emit(get(x));
  if (!isNone(o.raw(1))) {
    if (!o.push(1)) return null;
    f.emit(OP.F32X4_MAX);
  }
  if (!isNone(o.raw(2))) {
    if (!o.push(2)) return null;
    f.emit(OP.F32X4_MIN);
  }
  return fin(f);
};

/** Primitives of expr.ts with an f32x4 form. */
const LANE_OPS: Partial<Record<NumPrim, readonly number[]>> = {
  add: OP.F32X4_ADD,
  sub: OP.F32X4_SUB,
  mul: OP.F32X4_MUL,
  div: OP.F32X4_DIV,
  neg: OP.F32X4_NEG,
  abs: OP.F32X4_ABS,
  max: OP.F32X4_MAX,
  min: OP.F32X4_MIN,
  sqrt: OP.F32X4_SQRT,
};
const POLY: Partial<Record<NumPrim, (f: FnBuilder, x: number) => number>> = { exp: emitExp, log: emitLog };
const BOOL_PRIMS: ReadonlySet<BoolPrim> = new Set<BoolPrim>(['eq', 'lt', 'isinf', 'and', 'or']);
const hasPrim = (p: NumPrim | BoolPrim): boolean => p in LANE_OPS || p in POLY || BOOL_PRIMS.has(p as BoolPrim);

/** A composite's emitter: every primitive must have a lane form (checked before emitting anything). */
function composite(c: Composite): WasmEntry {
  const supported = [...primitivesOf(c.body)].every(hasPrim);
  return (f, o) => {
    if (!supported) return null;
    // Shared subexpressions are computed once (one local per expression node).
    const memo = new Map<MathExpr | BoolExpr, number>();
    const num = (y: MathExpr): number | null => {
      const hit = memo.get(y);
      if (hit !== undefined) return hit;
      let r: number | null;
      switch (y.k) {
        case 'arg':
          r = o.local(y.i) ?? (o.push(y.i) ? fin(f) : null);
          break;
        case 'num':
          f.emit(f32x4Const(y.v));
          r = fin(f);
          break;
        case 'op': {
          const xs = y.xs.map(num);
          if (!xs.every((x): x is number => x !== null)) return null;
          const poly = POLY[y.f];
          if (poly) r = poly(f, xs[0]!);
          else {
            f.emit(...xs.map((x) => get(x)), LANE_OPS[y.f]!);
            r = fin(f);
          }
          break;
        }
        case 'select': {
          const [a, b, m] = [num(y.a), num(y.b), bool(y.c)];
          if (a === null || b === null || m === null) return null;
          f.emit(get(a), get(b), get(m), OP.V128_BITSELECT);
          r = fin(f);
          break;
        }
        default:
          return y satisfies never;
      }
      if (r !== null) memo.set(y, r);
      return r;
    };
    const bool = (y: BoolExpr): number | null => {
      const hit = memo.get(y);
      if (hit !== undefined) return hit;
      if (y.k === 'cmp' || y.k === 'logic') {
        const xs = y.k === 'cmp' ? y.xs.map(num) : y.xs.map(bool);
        if (!xs.every((x): x is number => x !== null)) return null;
        const op = y.f === 'eq' ? OP.F32X4_EQ : y.f === 'lt' ? OP.F32X4_LT : y.f === 'and' ? OP.V128_AND : OP.V128_OR;
        f.emit(get(xs[0]!), get(xs[1]!), op);
      } else {
        const x = num(y.x);
        if (x === null) return null;
        f.emit(get(x), OP.F32X4_ABS, f32x4Const(Infinity), OP.F32X4_EQ);
      }
      const r = fin(f);
      memo.set(y, r);
      return r;
    };
    return num(c.body);
  };
}

export const WASM_TEMPLATES: ReadonlyMap<string, WasmEntry> = new Map<string, WasmEntry>([
  // --- binary and clamp
  ['add', addSub(OP.F32X4_ADD)],
  ['sub', addSub(OP.F32X4_SUB)],
  ['mul', binary(OP.F32X4_MUL)],
  ['div', (f, o) => (isNone(o.raw(2)) ? binary(OP.F32X4_DIV)(f, o) : null)],
  ['maximum', binary(OP.F32X4_MAX)],
  ['minimum', binary(OP.F32X4_MIN)],
  [
    'pow',
    (f, o) => {
      const x = o.local(0);
      if (constNum(o.raw(1)) !== 2 || x === null) return null;
      f.emit(get(x), get(x), OP.F32X4_MUL);
      return fin(f);
    },
  ],
  ['clamp', clamp],
  ['clampTensor', clamp],
  // --- unary
  ['neg', lanes(OP.F32X4_NEG)],
  ['abs', lanes(OP.F32X4_ABS)],
  [
    'square',
    unary((f, x) => {
      f.emit(get(x), get(x), OP.F32X4_MUL);
      return fin(f);
    }),
  ],
  ['sqrt', lanes(OP.F32X4_SQRT)],
  [
    'rsqrt',
    unary((f, x) => {
      f.emit(f32x4Const(1), get(x), OP.F32X4_SQRT, OP.F32X4_DIV);
      return fin(f);
    }),
  ],
  [
    'reciprocal',
    unary((f, x) => {
      f.emit(f32x4Const(1), get(x), OP.F32X4_DIV);
      return fin(f);
    }),
  ],
  [
    'relu',
    // x where x > 0 or x is NaN, else 0 (as the JS template: NaN propagates).
    unary((f, x) => {
      f.emit(get(x), f32x4Const(0), get(x), f32x4Const(0), OP.F32X4_GT, get(x), get(x), OP.F32X4_NE, OP.V128_OR, OP.V128_BITSELECT);
      return fin(f);
    }),
  ],
  // Identity in float32 lanes; casts into a half dtype are excluded by the group check (codegen/wasm).
  ['toDtype', unary((_f, x) => x)],
  ['clone', unary((_f, x) => x)],
  ['exp', unary(emitExp)],
  ['log', unary(emitLog)],
  ['tanh', unary(emitTanh)],
  ['sigmoid', unary(emitSigmoid)],
  ['erf', unary(emitErf)],
  [
    'silu',
    unary((f, x) => {
      const s = emitSigmoid(f, x);
      f.emit(get(x), get(s), OP.F32X4_MUL);
      return fin(f);
    }),
  ],
  [
    'gelu',
    unary((f, x, o) => {
      const a1 = o.raw(1);
      const approx = a1?.kind === 'const' ? a1.value : 'none';
      if (approx === 'tanh') return emitGeluTanh(f, x);
      return approx === 'none' || approx === undefined || approx === null ? emitGeluErf(f, x) : null;
    }),
  ],
  // --- ops defined once as compositions of primitives (composites.ts)
  ...[...COMPOSITES].map(([name, c]): [string, WasmEntry] => [name, composite(c)]),
]);
