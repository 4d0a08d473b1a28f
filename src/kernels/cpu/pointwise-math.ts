/**
 * Scalar math for the pointwise CPU kernels, in float64 (results are rounded once when stored).
 * Functions here follow C/PyTorch semantics where they differ from JavaScript's Math
 * (pow(1, NaN) = 1, round half to even, Python-style floor division and remainder).
 */

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

/**
 * erf(x) from the everywhere-positive series
 *   erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_{n>=0} (2x^2)^n * x / (1*3*...*(2n+1)),
 * which has no cancellation, so the relative error stays near 1e-15 on |x| < 6; beyond that erf
 * is +-1 to double precision (erfc(6) ~ 2e-17).
 */
/**
 * erf to ~1e-7 relative error (float32 needs 6e-8 half-ulp; results are stored in float32 or
 * narrower). Near zero, where 1 - erfc would cancel, the Maclaurin series (alternating, 10 terms
 * reach 1e-12 for |x| < 0.5); elsewhere erf = 1 - erfc with the Chebyshev-fitted erfc of Press et
 * al. (Numerical Recipes, fractional error < 1.2e-7). About 20 flops instead of a long series.
 */
export function erf(x: number): number {
  if (x !== x) return x;
  const ax = Math.abs(x);
  if (ax < 0.5) {
    if (ax === 0) return x; // keeps -0
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 12; n++) {
      term *= -x2 / n;
      sum += term / (2 * n + 1);
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  if (ax >= 6) return x > 0 ? 1 : -1;
  const t = 1 / (1 + 0.5 * ax);
  const erfc =
    t *
    Math.exp(
      -ax * ax -
        1.26551223 +
        t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  const r = 1 - erfc;
  return x < 0 ? -r : r;
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

const SQRT1_2 = Math.SQRT1_2;
const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

export function geluErf(x: number): number {
  return x * 0.5 * (1 + erf(x * SQRT1_2));
}

export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

/** torch.sign: NaN gives 0, as PyTorch's CPU kernel does ((0 < x) - (x < 0)). */
export function sign(x: number): number {
  return x > 0 ? 1 : x < 0 ? -1 : 0;
}

/** Round half to even (std::nearbyint under the default rounding mode), keeping the sign of zero. */
export function roundHalfEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.floor(x);
  const d = x - f;
  let r: number;
  if (d > 0.5) r = f + 1;
  else if (d < 0.5) r = f;
  else r = f % 2 === 0 ? f : f + 1;
  return r === 0 && (x < 0 || Object.is(x, -0)) ? -0 : r;
}

/** C's pow: pow(1, y) = 1 and pow(-1, +-inf) = 1, where JavaScript gives NaN. */
export function cpow(x: number, y: number): number {
  if (x === 1 || y === 0) return 1;
  if (x === -1 && (y === Infinity || y === -Infinity)) return 1;
  return Math.pow(x, y);
}

/**
 * Integer power with PyTorch's rules for negative exponents (1 -> 1, -1 -> +-1, else 0), by
 * repeated squaring. `wrap32` multiplies with Math.imul (exact low 32 bits, right for int32 and
 * uint8 results); otherwise multiplication is in float64 (int64, exact to 2^53).
 */
export function ipow(a: number, b: number, wrap32: boolean): number {
  if (b < 0) {
    if (a === 1) return 1;
    if (a === -1) return Math.abs(b) % 2 === 1 ? -1 : 1;
    return 0;
  }
  let r = 1;
  let base = a;
  let e = b;
  if (wrap32) {
    base |= 0;
    while (e > 0) {
      if (e % 2 === 1) r = Math.imul(r, base);
      base = Math.imul(base, base);
      e = Math.floor(e / 2);
    }
    return r;
  }
  while (e > 0) {
    if (e % 2 === 1) r *= base;
    base *= base;
    e = Math.floor(e / 2);
  }
  return r;
}

/** PyTorch's div_floor for floating types: floor division computed through fmod, as Python does. */
export function divFloorFloat(a: number, b: number): number {
  if (b === 0) return a / b;
  const mod = a % b;
  let div = (a - mod) / b;
  if (mod !== 0 && b < 0 !== mod < 0) div -= 1;
  if (div === 0) return Math.sign(a / b) < 0 || Object.is(a / b, -0) ? -0 : 0;
  let fl = Math.floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}

/** Python-style remainder (the sign of the divisor) for floats: fmod, then shift by b. */
export function remainderFloat(a: number, b: number): number {
  let m = a % b;
  if (m !== 0 && b < 0 !== m < 0) m += b;
  return m;
}

/** Python-style remainder for integers (b != 0 checked by the caller). */
export function remainderInt(a: number, b: number): number {
  let m = a % b;
  if (m !== 0 && b < 0 !== m < 0) m += b;
  return m === 0 ? 0 : m;
}

/** lerp as PyTorch computes it: from the nearer end point for accuracy. */
export function lerp(s: number, e: number, w: number): number {
  const d = e - s;
  return Math.abs(w) < 0.5 ? s + w * d : e - d * (1 - w);
}
