/**
 * Float64 references for the pointwise tests, written independently of the kernels: naive
 * broadcasting by index arithmetic, and special functions from their textbook series.
 */
import type { DType } from '../../src/tensor/dtype.js';
import { castValue } from '../../src/tensor/typed.js';

/**
 * erf in float64 to ~1e-15: the alternating Maclaurin series
 * erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) for |x| < 2.5, and 1 - erfc(x) from the
 * Laplace continued fraction erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
 * beyond.
 */
export function erfRef(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return -erfRef(-x);
  if (x === Infinity) return 1;
  if (x < 2.5) {
    let sum = 0;
    let power = x; // x^(2n+1)
    let fact = 1; // n!
    for (let n = 0; n < 100; n++) {
      if (n > 0) {
        power *= x * x;
        fact *= n;
      }
      const term = power / (fact * (2 * n + 1));
      sum += n % 2 === 0 ? term : -term;
      if (term < 1e-18) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  let k = x;
  for (let n = 400; n >= 1; n--) k = x + n / 2 / k;
  return 1 - Math.exp(-x * x) / Math.sqrt(Math.PI) / k;
}

/** erfc(u) for u >= 2.5 by the Laplace continued fraction (no 1 - erf cancellation). */
function erfcLarge(u: number): number {
  let k = u;
  for (let n = 400; n >= 1; n--) k = u + n / 2 / k;
  return Math.exp(-u * u) / Math.sqrt(Math.PI) / k;
}

/** gelu(v) = v * Phi(v), through erfc in the far negative tail where 1 + erf(v / sqrt 2) cancels. */
export function geluRef(v: number): number {
  const u = -v / Math.SQRT2;
  if (u === Infinity) return NaN; // -inf * 0, as torch
  if (u >= 2.5) return 0.5 * v * erfcLarge(u);
  return 0.5 * v * (1 + erfRef(v / Math.SQRT2));
}

/** Round half to even, via the parity of the nearest integers (no floor/fraction tricks). */
export function roundRef(x: number): number {
  if (!Number.isFinite(x)) return x;
  const lo = Math.floor(x);
  const hi = Math.ceil(x);
  if (x - lo < hi - x) return lo;
  if (hi - x < x - lo) return hi;
  return lo / 2 === Math.floor(lo / 2) ? lo : hi;
}

export function sigmoidRef(x: number): number {
  // The e^x / (1 + e^x) form for x < 0 (a different route from 1 / (1 + e^-x)).
  if (x < 0) {
    const e = Math.exp(x);
    return e / (1 + e);
  }
  return 1 / (1 + Math.exp(-x));
}

/** Python's floor division and modulo on exact integers (both args integral, b != 0). */
export function floorDivInt(a: number, b: number): number {
  let q = Math.trunc(a / b);
  if (q * b !== a && a < 0 !== b < 0) q -= 1;
  return q + 0; // no -0 for integers
}
export function pyModInt(a: number, b: number): number {
  return a - b * floorDivInt(a, b);
}

/** Python's float modulo: a - b * floor(a / b), with the sign of b. */
export function pyModFloat(a: number, b: number): number {
  if (b === 0 || !Number.isFinite(a)) return NaN;
  if (!Number.isFinite(b)) return a === 0 || a < 0 === b < 0 ? a : b;
  const r = a - b * Math.floor(a / b);
  return r;
}

export function numelOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Row-major values of `values` (of shape `shape`) broadcast to `target`, by index arithmetic. */
export function broadcastTo(values: readonly number[], shape: readonly number[], target: readonly number[]): number[] {
  const n = numelOf(target);
  const out = new Array<number>(n);
  const off = target.length - shape.length;
  for (let i = 0; i < n; i++) {
    let rem = i;
    let src = 0;
    let mult = 1;
    const idx = new Array<number>(target.length);
    for (let d = target.length - 1; d >= 0; d--) {
      idx[d] = rem % target[d]!;
      rem = Math.floor(rem / target[d]!);
    }
    for (let d = shape.length - 1; d >= 0; d--) {
      const j = shape[d] === 1 ? 0 : idx[d + off]!;
      src += j * mult;
      mult *= shape[d]!;
    }
    out[i] = values[src]!;
  }
  return out;
}

/** Broadcast shape by the NumPy rule (the reference's own, not the library's). */
export function broadcastShapeRef(...shapes: (readonly number[])[]): number[] {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    let size = 1;
    for (const s of shapes) {
      const d = s[s.length - rank + i] ?? 1;
      if (d !== 1) size = d;
    }
    out.push(size);
  }
  return out;
}

/** Elementwise reference over broadcast operands (arrays with shapes, or plain numbers). */
export function mapRef(operands: readonly ({ values: readonly number[]; shape: readonly number[] } | number)[], f: (...xs: number[]) => number): { values: number[]; shape: number[] } {
  const shapes = operands.filter((o): o is { values: readonly number[]; shape: readonly number[] } => typeof o !== 'number').map((o) => o.shape);
  const shape = broadcastShapeRef(...shapes);
  const n = numelOf(shape);
  const cols = operands.map((o) => (typeof o === 'number' ? new Array<number>(n).fill(o) : broadcastTo(o.values, o.shape, shape)));
  const values = Array.from({ length: n }, (_, i) => f(...cols.map((c) => c[i]!)));
  return { values, shape };
}

/** Values as a dtype stores them. */
export function stored(values: readonly number[], dtype: DType): number[] {
  return values.map((v) => castValue(v, dtype));
}
