/**
 * Pointwise ops defined once, as compositions of the primitives of expr.ts. Every language table
 * (js.ts, c.ts, cuda.ts, wasm.ts) renders these through its primitive entries, and the eager
 * kernels (kernels/cpu/pointwise.ts, kernels/cuda/pointwise.ts) and the compiler's code generators
 * pick every entry up by name, so a new op of this kind is its op definition (ops/defs), its public
 * function (api), its backward formula (autograd/formulas) and one entry here.
 *
 * Composites are floating-point ops: the op's meta gives a floating output (integer inputs promote
 * to float32, as torch's float ops do) and the body is computed in that output's compute type
 * (float for the 16-bit floats). Tables decline other outputs. Ops that need a tuned text per
 * language (fast-math CUDA, vectorised C/Wasm polynomials) keep their own entries in the tables.
 */
import { M, type MathExpr } from './expr.js';

export interface Composite {
  /** Number of tensor operands (args 0..arity-1 of the op). */
  readonly arity: number;
  /** The value over the operands M.arg(0..arity-1). */
  readonly body: MathExpr;
}

const a = M.arg(0);
const b = M.arg(1);

/**
 * logaddexp(a, b) = log(e^a + e^b) = max(a, b) + log1p(e^-|a - b|). Equal operands give a + ln 2,
 * which also covers both -inf (-inf, where a - b would be NaN) and both +inf, as torch does; a NaN
 * operand gives NaN.
 */
const logaddexp = M.select(M.eq(a, b), M.add(a, Math.LN2), M.add(M.max(a, b), M.log1p(M.exp(M.neg(M.abs(M.sub(a, b)))))));

/**
 * hypot(a, b) = sqrt(a^2 + b^2) without overflow or underflow in the squares: m sqrt(1 + (n/m)^2)
 * with m = max(|a|, |b|), n = min(|a|, |b|). An infinite operand gives inf even when the other is
 * NaN (C's hypot, torch.hypot); both zero gives 0 (where n/m is NaN); otherwise NaN propagates.
 */
const big = M.max(M.abs(a), M.abs(b));
const ratio = M.div(M.min(M.abs(a), M.abs(b)), big);
const hypot = M.select(M.or(M.isinf(a), M.isinf(b)), Infinity, M.select(M.eq(big, 0), 0, M.mul(big, M.sqrt(M.add(M.mul(ratio, ratio), 1)))));

export const COMPOSITES: ReadonlyMap<string, Composite> = new Map<string, Composite>([
  ['logaddexp', { arity: 2, body: logaddexp }],
  ['hypot', { arity: 2, body: hypot }],
]);
