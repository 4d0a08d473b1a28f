/**
 * The cases of test/webgpu-math.test.ts: for each pointwise op of the WGSL math library, float64
 * references (JavaScript's Math, erf64 of the cpu kernels, a continued fraction for erfc), input
 * ranges (linear, logarithmic, and the hard cases: the float nearest a multiple of pi/2, the
 * Payne-Hanek range, bases near 1 with large exponents) and the largest error in float32 ulp the
 * library is held to. The bounds are what the functions measure on SwiftShader plus about half an
 * ulp (wgsl-libm/*.ts give the designs; pow's grows with |b| where the base's log2 carries a
 * rounded correction, see arith.ts).
 */
import { erf64 } from '../src/kernels/cpu/pointwise-math.js';

/** erfc(a) for a >= 0 in float64: 1 - erf64 below 2.5 (erfc >= 4e-4 there), else its continued fraction. */
export function erfc64(a: number): number {
  if (a < 2.5) return 1 - erf64(a);
  let cf = 0;
  for (let k = 120; k >= 1; k--) cf = k / 2 / (a + cf);
  return Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + cf);
}

/** x Phi(x) with Phi(x) = erfc(-x / sqrt2) / 2, accurate in the left tail too. */
const gelu64 = (x: number): number => (x >= 0 ? 0.5 * x * (1 + erf64(x / Math.SQRT2)) : 0.5 * x * erfc64(-x / Math.SQRT2));
const sigmoid64 = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));
const geluTanh64 = (x: number): number => x * sigmoid64(2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x));

/** n float32 inputs from lo to hi, evenly or (log) geometrically spaced (lo, hi of one sign). */
export function spaced(lo: number, hi: number, n: number, log = false): number[] {
  return Array.from({ length: n }, (_, i) => {
    const t = i / (n - 1);
    return Math.fround(log ? Math.sign(lo) * Math.exp(Math.log(Math.abs(lo)) + t * (Math.log(Math.abs(hi)) - Math.log(Math.abs(lo)))) : lo + t * (hi - lo));
  });
}

/** n float32 pseudo-random values in [lo, hi) (a fixed linear congruential sequence). */
export function uniform(lo: number, hi: number, n: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return Math.fround(lo + ((hi - lo) * s) / 2147483648);
  });
}

export interface UnaryCase {
  readonly op: string;
  readonly ref: (x: number) => number;
  readonly inputs: readonly number[];
  readonly maxUlp: number;
  readonly label: string;
}

export interface BinaryCase {
  readonly op: string;
  readonly ref: (a: number, b: number) => number;
  readonly a: readonly number[];
  readonly b: readonly number[];
  readonly maxUlp: number;
  readonly label: string;
}

const N = 20001;
/** Floats nearest multiples of pi/2 (252.898... is the nearest of all below 2^17: |r| = 2^-27.8). */
const NEAR_PIO2 = [252.8982043, 505.7964086, 4.71238898, 52516.4326979, 1011.5928172, 105032.8653958].flatMap((x) => [x, -x].map(Math.fround));

function unary(op: string, ref: (x: number) => number, maxUlp: number, ranges: readonly (readonly [number, number, boolean?])[], extra: readonly number[] = []): UnaryCase[] {
  return ranges.map(([lo, hi, log]) => ({ op, ref, maxUlp, label: `${op} on [${lo}, ${hi}]${log ? ' (log-spaced)' : ''}`, inputs: [...spaced(lo, hi, N, log), ...extra] }));
}

export const UNARY_CASES: readonly UnaryCase[] = [
  ...unary('sin', Math.sin, 3, [[-4, 4], [-1e5, 1e5], [1e-6, 0.1, true], [1.31072e5, 3e38, true]], NEAR_PIO2),
  ...unary('cos', Math.cos, 3, [[-4, 4], [-1e5, 1e5], [1.31072e5, 3e38, true]], NEAR_PIO2),
  ...unary('tan', Math.tan, 4, [[-1.6, 1.6], [-1e5, 1e5], [1.31072e5, 3e38, true]], NEAR_PIO2),
  ...unary('exp', Math.exp, 1.5, [[-87, 88.7], [-1, 1]]),
  ...unary('expm1', Math.expm1, 2, [[-17, 88], [-1, 1], [1e-7, 1e-2, true], [-1e-2, -1e-7, true]]),
  ...unary('log', Math.log, 1.5, [[1e-37, 3e38, true], [0.5, 2]]),
  ...unary('log2', Math.log2, 2, [[1e-37, 3e38, true], [0.5, 2]]),
  ...unary('log10', Math.log10, 2.5, [[1e-37, 3e38, true], [0.5, 2]]),
  ...unary('log1p', Math.log1p, 2, [[-0.999, 1], [1e-7, 1e-2, true], [-1e-2, -1e-7, true], [0.4, 3e38, true]]),
  ...unary('sqrt', Math.sqrt, 1, [[1e-37, 3e38, true]]),
  ...unary('rsqrt', (x) => 1 / Math.sqrt(x), 2, [[1e-37, 3e38, true]]),
  ...unary('reciprocal', (x) => 1 / x, 2.5, [[1e-37, 3e38, true], [-3e38, -1e-37, true]]),
  ...unary('tanh', Math.tanh, 2, [[-10, 10], [1e-6, 0.1, true]]),
  ...unary('sigmoid', sigmoid64, 3, [[-87, 100], [-20, 20]]),
  ...unary('silu', (x) => x * sigmoid64(x), 3.5, [[-87, 100], [-20, 20]]),
  ...unary('erf', erf64, 3, [[-4, 4], [-0.9, 0.9], [1e-6, 0.1, true]]),
  // Below -12.9, gelu's factor Phi(x) is subnormal: an implementation may flush it.
  ...unary('gelu', gelu64, 5, [[-12.5, 6], [-1, 1]]),
];

/** 2u of GELU's tanh form, u = sqrt(2/pi) (x + 0.044715 x^3). */
const twoU = (x: number): number => 2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x);

/**
 * GELU's tanh form, x sigmoid(2u). The float32 rounding of 2u (up to about 2.5 ulp: four rounded
 * operations) moves e^(2u) by |2u| times that: the bound grows by 3 ulp per unit of |2u| (x = -3:
 * 2u = -6.3; x = -9.5: -76). Below
 * about -9.9 sigmoid(2u) is subnormal (flushable), as Phi is for the erf form below -12.9.
 */
export const GELU_TANH_CASE = { op: 'gelu', approximate: 'tanh', ref: geluTanh64, maxUlp: (x: number) => 4 + 3 * Math.abs(twoU(x)), label: 'gelu (tanh) on [-9.8, 10]', inputs: spaced(-9.8, 10, N) } as const;

export const BINARY_CASES: readonly BinaryCase[] = [
  { op: 'pow', ref: Math.pow, maxUlp: 4, label: 'pow, base [0.01, 100], exponent [-20, 20]', a: uniform(0.01, 100, N, 7), b: uniform(-20, 20, N, 13) },
  { op: 'pow', ref: Math.pow, maxUlp: 4, label: 'pow, base [1e-30, 1e30], exponent [-4, 4]', a: spaced(1e-30, 1e30, N, true), b: uniform(-4, 4, N, 13) },
  { op: 'pow', ref: Math.pow, maxUlp: 4, label: 'pow, base [0.999, 1.001], exponent [-5e4, 5e4]', a: uniform(0.999, 1.001, N, 7), b: uniform(-5e4, 5e4, N, 13) },
  // Bases near sqrt2 with exponents in the hundreds put results near the ends of the float range,
  // where the rounded correction of log2|a| (about |b| f^2 2^-25) shows: tens of ulp.
  { op: 'pow', ref: Math.pow, maxUlp: 64, label: 'pow, base [0.7, 1.4], exponent [-250, 250]', a: uniform(0.7, 1.4, N, 7), b: uniform(-250, 250, N, 13) },
  { op: 'atan2', ref: Math.atan2, maxUlp: 3, label: 'atan2 on [-10, 10]^2', a: uniform(-10, 10, N, 7), b: uniform(-10, 10, N, 13) },
  { op: 'atan2', ref: Math.atan2, maxUlp: 3, label: 'atan2, y [-1e30, 1e30], x [-1, 1]', a: uniform(-1e30, 1e30, N, 7), b: uniform(-1, 1, N, 13) },
  { op: 'div', ref: (a, b) => a / b, maxUlp: 2.5, label: 'div with divisors beyond 2^126', a: uniform(-1e38, 1e38, N, 7), b: uniform(-3e38, 3e38, N, 13) },
];

/**
 * remainder and floor division with quotients up to 1e14: exact on the cpu (fmod), and in WGSL
 * through kiln_fmod (WGSL's % is only as exact as x - y * trunc(x / y)). Magnitudes: a up to 5e11,
 * b from 5e-3 to 50, either sign.
 */
export const FMOD_PAIRS: { readonly a: readonly number[]; readonly b: readonly number[] } = (() => {
  const u = uniform(0, 1, 4 * N, 5);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < N; i++) {
    a.push(Math.fround((u[4 * i]! - 0.5) * 10 ** (u[4 * i + 1]! * 12)));
    b.push(Math.fround((u[4 * i + 2]! - 0.5) * 10 ** (u[4 * i + 3]! * 4 - 2)));
  }
  return { a, b };
})();

/** Inputs at the edges: NaN, infinities, signed zeros, domain boundaries, overflow thresholds. */
export const EDGES: readonly number[] = [NaN, Infinity, -Infinity, 0, -0, -1, 1, -2, 2, -0.5, 0.5, 88.72283, 88.72284, -87.3, -103.9, 3.4e38, -3.4e38, 1e-30, -1e-30, 1.31072e5];

/** Pairs at the edges of pow and atan2 (C99 F.9.4.4 and F.9.1.4, as torch). */
export const EDGE_PAIRS: Readonly<Record<string, readonly (readonly [number, number])[]>> = {
  pow: [[0, -1], [-0, -1], [0, -2], [-0, -2], [-0, 3], [-0, 2], [-8, 1 / 3], [-2, 3], [-2, 2], [-2, 0.5], [2, Infinity], [0.5, Infinity], [2, -Infinity], [0.5, -Infinity], [-1, Infinity], [-1, -Infinity], [1, NaN], [NaN, 0], [Infinity, -1], [Infinity, 2], [-Infinity, 3], [-Infinity, 2], [-Infinity, -3], [-Infinity, -2], [0, 0], [2, 128], [2, 127], [10, 38.5], [10, -45], [NaN, 1]],
  atan2: [[0, 0], [-0, 0], [0, -0], [-0, -0], [0, -1], [-0, -1], [0, 1], [-0, 1], [1, 0], [-1, -0], [Infinity, Infinity], [-Infinity, Infinity], [Infinity, -Infinity], [-Infinity, -Infinity], [1, Infinity], [-1, Infinity], [1, -Infinity], [-1, -Infinity], [Infinity, 1], [NaN, 1], [1, NaN], [1e-38, 1e38], [1e38, 1e-38], [3e38, 3e38]],
  div: [[1, 0], [-1, 0], [1, -0], [0, 0], [NaN, 1], [1, Infinity], [-1, Infinity], [Infinity, Infinity], [Infinity, 2], [1e38, 1e38], [3e38, -2e38], [5, 1e38]],
  remainder: [[1, 0], [-1, 0], [0, 0], [Infinity, 2], [-Infinity, 2], [2, Infinity], [-2, Infinity], [2, -Infinity], [NaN, 2], [2, NaN], [-0, 2], [-4, 2], [4, -2], [7.5, -2], [-7.5, 2], [3e38, 1e-3], [1e-3, 3e38]],
};
