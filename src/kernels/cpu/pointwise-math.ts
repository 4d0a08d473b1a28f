/**
 * Scalar math for the pointwise CPU kernels, in float64 (results are rounded once when stored).
 * Functions here follow C/PyTorch semantics where they differ from JavaScript's Math
 * (pow(1, NaN) = 1, round half to even, Python-style floor division and remainder).
 */

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

/**
 * erf to double precision, for float64 results (the float32-accurate `erf` below lost about 1e-7
 * relative: a silent precision loss in float64 erf and gelu). |x| < 2.5: the everywhere-positive
 * series erf(x) = 2/sqrt(pi) exp(-x^2) sum_n x^(2n+1) 2^n / (1*3*...*(2n+1)), which has no
 * cancellation (relative error ~1e-16, at most ~45 terms); 2.5 <= |x| < 6: erf = 1 - erfc with
 * erfc from its continued fraction (modified Lentz; erfc(2.5) ~ 4e-4, so the subtraction keeps
 * full precision); beyond 6 erf is +-1 to double precision (erfc(6) ~ 2e-17).
 */
export function erf64(x: number): number {
  if (x !== x) return x;
  const ax = Math.abs(x);
  if (ax === 0) return x; // keeps -0
  if (ax >= 6) return x > 0 ? 1 : -1;
  if (ax < 2.5) {
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 200; n++) {
      term *= (2 * x2) / (2 * n + 1);
      sum += term;
      if (Math.abs(term) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
  }
  // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + ...))))), via the
  // equivalent fraction 2a/(2a^2 + 1 - 1*2/(2a^2 + 5 - 3*4/(2a^2 + 9 - ...))) evaluated by Lentz.
  const a = ax;
  const tiny = 1e-300;
  let f = tiny;
  let C = f;
  let D = 0;
  for (let n = 0; n < 300; n++) {
    const an = n === 0 ? 2 * a : -(2 * n - 1) * (2 * n);
    const bn = 2 * a * a + 1 + 4 * n;
    D = bn + an * D;
    D = D === 0 ? 1 / tiny : 1 / D;
    C = bn + an / C;
    if (C === 0) C = tiny;
    const delta = C * D;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  const erfc = (Math.exp(-a * a) / Math.sqrt(Math.PI)) * f;
  const r = 1 - erfc;
  return x < 0 ? -r : r;
}

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

/** gelu with the double-precision erf (float64 results). */
export function geluErf64(x: number): number {
  return x * 0.5 * (1 + erf64(x * SQRT1_2));
}

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
