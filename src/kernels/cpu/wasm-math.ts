/**
 * Vectorised float32 transcendental functions for generated WebAssembly kernels (f32x4, four lanes
 * at a time). Each emitter appends inline code to a function under construction: it reads a v128
 * local and returns the v128 local that holds the result (fresh scratch locals, so callers can
 * reuse the input). No branches: every lane takes the same path and special ranges are blended in
 * with masks, so inf / NaN / -0 / denormals come out as IEEE float32 (and Math.*) says.
 *
 * Accuracy (checked against Math.* in float64 by test/wasm-math.test.ts): exp about 1 ulp
 * (Cephes expf: Cody-Waite range reduction, degree-6 polynomial); tanh about 2 ulp (Cephes tanhf:
 * odd polynomial below 0.625, 1 - 2/(exp(2|x|)+1) above); log about 1 ulp (Cephes logf); erf about
 * 2.5 ulp: erf(x) = x P(x^2) for |x| < 1 and 1 - erfc(x) above, with erfc(t) = exp(-t^2 + h(1/t)) / t
 * (P and h fitted by least squares on Chebyshev nodes; without FMA the Horner rounding adds ~1 ulp).
 */
import { f32x4Const, type FnBuilder, get, i32c, i32x4Const, OP, set, V128 } from './wasm-asm.js';

type Bytes = readonly number[];

/** Horner: c[0]*x^n + ... + c[n] (coefficients highest first), leaving the result on the stack. */
function horner(f: FnBuilder, x: number, c: readonly number[]): void {
  f.emit(f32x4Const(c[0]!));
  for (let i = 1; i < c.length; i++) f.emit(get(x), OP.F32X4_MUL, f32x4Const(c[i]!), OP.F32X4_ADD);
}

function store(f: FnBuilder): number {
  const r = f.local(V128);
  f.emit(set(r));
  return r;
}

/** Pushes a v128 computed by `code`, stores it in a fresh local. */
function let_(f: FnBuilder, ...code: Bytes[]): number {
  f.emit(...code);
  return store(f);
}

const LOG2E = 1.4426950408889634;
// Cody-Waite split of ln 2: the high part has 9 significant bits, so n * LN2_HI is exact for |n| < 2^15.
const LN2_HI = 0.693359375;
const LN2_LO = -2.12194440e-4;
const EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
// exp(x) overflows float32 above ln(FLT_MAX) ~ 88.72 and is below half the smallest denormal under
// ln(2^-150) ~ -103.97; clamping there keeps n in [-150, 128] (the split scale below covers it).
const EXP_LO = -103.972077;
const EXP_HI = 89;

/** exp(x), lanewise. */
export function emitExp(f: FnBuilder, x: number): number {
  // xc = clamp(x) (min/max propagate NaN); n = nearest(xc * log2 e); r = xc - n ln2
  const xc = let_(f, get(x), f32x4Const(EXP_LO), OP.F32X4_MAX, f32x4Const(EXP_HI), OP.F32X4_MIN);
  const n = let_(f, get(xc), f32x4Const(LOG2E), OP.F32X4_MUL, OP.F32X4_NEAREST);
  const r = let_(f, get(xc), get(n), f32x4Const(LN2_HI), OP.F32X4_MUL, OP.F32X4_SUB, get(n), f32x4Const(LN2_LO), OP.F32X4_MUL, OP.F32X4_SUB);
  // p = poly(r) r^2 + r + 1
  horner(f, r, EXP_POLY);
  f.emit(get(r), get(r), OP.F32X4_MUL, OP.F32X4_MUL, get(r), OP.F32X4_ADD, f32x4Const(1), OP.F32X4_ADD);
  const p = store(f);
  // 2^n as two normal powers 2^(n>>1) * 2^(n - (n>>1)), so denormal results round once, at the end.
  const ni = let_(f, get(n), OP.I32X4_TRUNC_SAT_F32X4_S);
  const n1 = let_(f, get(ni), i32c(1), OP.I32X4_SHR_S);
  const pow = (e: number): Bytes => [...get(e), ...i32x4Const(127), ...OP.I32X4_ADD, ...i32c(23), ...OP.I32X4_SHL];
  f.emit(get(ni), get(n1), OP.I32X4_SUB);
  const n2 = store(f);
  f.emit(get(p), pow(n1), OP.F32X4_MUL, pow(n2), OP.F32X4_MUL);
  const res = store(f);
  // x < EXP_LO gives exactly 0 (the clamp alone could round up to the smallest denormal).
  f.emit(f32x4Const(0), get(res), get(x), f32x4Const(EXP_LO), OP.F32X4_LT, OP.V128_BITSELECT);
  return store(f);
}

const TANH_POLY = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1];
const SIGN = -0x80000000;

/** tanh(x), lanewise. */
export function emitTanh(f: FnBuilder, x: number): number {
  const a = let_(f, get(x), OP.F32X4_ABS);
  // small |x|: x + x^3 P(x^2)
  const z = let_(f, get(x), get(x), OP.F32X4_MUL);
  horner(f, z, TANH_POLY);
  f.emit(get(z), OP.F32X4_MUL, get(x), OP.F32X4_MUL, get(x), OP.F32X4_ADD);
  const small = store(f);
  // large |x|: copysign(1 - 2 / (exp(2|x|) + 1), x)
  const twoA = let_(f, get(a), get(a), OP.F32X4_ADD);
  const e = emitExp(f, twoA);
  f.emit(f32x4Const(1), f32x4Const(2), get(e), f32x4Const(1), OP.F32X4_ADD, OP.F32X4_DIV, OP.F32X4_SUB);
  f.emit(get(x), i32x4Const(SIGN), OP.V128_AND, OP.V128_OR);
  const large = store(f);
  f.emit(get(small), get(large), get(a), f32x4Const(0.625), OP.F32X4_LT, OP.V128_BITSELECT);
  return copySign(f, x);
}

/** The value on the stack with the sign of x (odd functions: keeps tanh(-0) = -0). */
function copySign(f: FnBuilder, x: number): number {
  f.emit(i32x4Const(0x7fffffff), OP.V128_AND, get(x), i32x4Const(SIGN), OP.V128_AND, OP.V128_OR);
  return store(f);
}

/**
 * 1 / (1 + exp(-x)), lanewise, as e / (1 + e) with e = exp(-|x|) for x < 0: exp(-x) would
 * overflow float32 for x < -88.7 while the result is still a (denormal) float32.
 */
export function emitSigmoid(f: FnBuilder, x: number): number {
  const na = let_(f, get(x), OP.F32X4_ABS, OP.F32X4_NEG);
  const e = emitExp(f, na);
  const d = let_(f, f32x4Const(1), get(e), OP.F32X4_ADD);
  f.emit(get(e), get(d), OP.F32X4_DIV, f32x4Const(1), get(d), OP.F32X4_DIV, get(x), f32x4Const(0), OP.F32X4_LT, OP.V128_BITSELECT);
  return store(f);
}

// erf(u) = u P(u^2) on |u| < 1 (fitted: relative error of P 1e-9 in float64).
const ERF_P = [7.847259257687256e-5, -8.008189033716917e-4, 5.188099108636379e-3, -2.6853691786527634e-2, 1.128358244895935e-1, -3.761262595653534e-1, 1.1283791065216064];
// h(v) = log(erfc(1/v) / v) + 1/v^2 on v in [1/10.5, 1] (fitted: absolute error ~1e-8).
const ERFC_H = [
  0.1135115996003151, -0.619635283946991, 1.4461660385131836, -1.8275877237319946, 1.2091847658157349, -0.11036787182092667, -0.4878135919570923,
  -7.153732585720718e-4, -0.5723479390144348,
];
// erfc(t) underflows float32 denormals past t ~ 10.05; the fit covers t <= 10.5.
const ERFC_T_MAX = 10.5;

/** u P(u^2): erf for |u| < 1. */
function erfSmall(f: FnBuilder, u: number): number {
  const s = let_(f, get(u), get(u), OP.F32X4_MUL);
  horner(f, s, ERF_P);
  f.emit(get(u), OP.F32X4_MUL);
  return store(f);
}

/** erfc(t) for t >= 1 (t = |u|; NaN propagates). */
function erfcLarge(f: FnBuilder, a: number): number {
  const t = let_(f, get(a), f32x4Const(1), OP.F32X4_MAX, f32x4Const(ERFC_T_MAX), OP.F32X4_MIN);
  const v = let_(f, f32x4Const(1), get(t), OP.F32X4_DIV);
  horner(f, v, ERFC_H);
  f.emit(get(t), get(t), OP.F32X4_MUL, OP.F32X4_SUB);
  const arg = store(f);
  const e = emitExp(f, arg);
  f.emit(get(e), get(v), OP.F32X4_MUL);
  return store(f);
}

/** erf(x), lanewise. */
export function emitErf(f: FnBuilder, x: number): number {
  const a = let_(f, get(x), OP.F32X4_ABS);
  const small = erfSmall(f, x);
  const c = erfcLarge(f, a);
  f.emit(f32x4Const(1), get(c), OP.F32X4_SUB, get(x), i32x4Const(SIGN), OP.V128_AND, OP.V128_OR);
  const large = store(f);
  f.emit(get(small), get(large), get(a), f32x4Const(1), OP.F32X4_LT, OP.V128_BITSELECT);
  return copySign(f, x);
}

/**
 * 0.5 x (1 + erf(x / sqrt 2)). For x / sqrt 2 <= -1 the factor 1 + erf is computed as erfc(|u|)
 * directly, so the negative tail keeps its relative accuracy instead of cancelling against 1.
 */
export function emitGeluErf(f: FnBuilder, x: number): number {
  const u = let_(f, get(x), f32x4Const(Math.SQRT1_2), OP.F32X4_MUL);
  const a = let_(f, get(u), OP.F32X4_ABS);
  const small = erfSmall(f, u);
  const c = erfcLarge(f, a);
  // factor = |u| < 1 ? 1 + u P : (u > 0 ? 2 - erfc : erfc)
  f.emit(f32x4Const(2), get(c), OP.F32X4_SUB, get(c), get(u), f32x4Const(0), OP.F32X4_GT, OP.V128_BITSELECT);
  const large = store(f);
  // (0.5 x) factor: halving first keeps gelu(3e38) finite (factor is up to 2).
  f.emit(get(x), f32x4Const(0.5), OP.F32X4_MUL);
  f.emit(f32x4Const(1), get(small), OP.F32X4_ADD, get(large), get(a), f32x4Const(1), OP.F32X4_LT, OP.V128_BITSELECT, OP.F32X4_MUL);
  return store(f);
}

/** 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
export function emitGeluTanh(f: FnBuilder, x: number): number {
  const inner = let_(f, get(x), get(x), OP.F32X4_MUL, get(x), OP.F32X4_MUL, f32x4Const(0.044715), OP.F32X4_MUL, get(x), OP.F32X4_ADD, f32x4Const(Math.sqrt(2 / Math.PI)), OP.F32X4_MUL);
  const t = emitTanh(f, inner);
  f.emit(get(x), f32x4Const(0.5), OP.F32X4_MUL, f32x4Const(1), get(t), OP.F32X4_ADD, OP.F32X4_MUL);
  return store(f);
}

const LOG_POLY = [7.0376836292e-2, -1.151461031e-1, 1.167699874e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1];

/** log(x), lanewise (x < 0 or NaN: NaN; 0: -inf; inf: inf; denormals scaled first). */
export function emitLog(f: FnBuilder, x: number): number {
  // Denormals: scale by 2^23 (exact) and remember to subtract 23 from the exponent.
  const tiny = let_(f, get(x), f32x4Const(1.1754943508222875e-38), OP.F32X4_LT);
  const xs = let_(f, get(x), f32x4Const(8388608), OP.F32X4_MUL, get(x), get(tiny), OP.V128_BITSELECT);
  // e = exponent - 126, m in [0.5, 1)
  const e0 = let_(f, get(xs), i32c(23), OP.I32X4_SHR_U, i32x4Const(126), OP.I32X4_SUB, i32x4Const(23), get(tiny), OP.V128_AND, OP.I32X4_SUB);
  const m0 = let_(f, get(xs), i32x4Const(0x007fffff), OP.V128_AND, i32x4Const(0x3f000000), OP.V128_OR);
  // m < sqrt(1/2): e -= 1, m = 2m - 1; else m = m - 1
  const lo = let_(f, get(m0), f32x4Const(Math.SQRT1_2), OP.F32X4_LT);
  const e = let_(f, get(e0), get(lo), OP.I32X4_ADD, OP.F32X4_CONVERT_I32X4_S);
  const m = let_(f, get(m0), get(m0), OP.F32X4_ADD, get(m0), get(lo), OP.V128_BITSELECT, f32x4Const(1), OP.F32X4_SUB);
  const z = let_(f, get(m), get(m), OP.F32X4_MUL);
  horner(f, m, LOG_POLY);
  f.emit(get(m), OP.F32X4_MUL, get(z), OP.F32X4_MUL);
  f.emit(get(e), f32x4Const(LN2_LO), OP.F32X4_MUL, OP.F32X4_ADD, get(z), f32x4Const(0.5), OP.F32X4_MUL, OP.F32X4_SUB, get(m), OP.F32X4_ADD);
  f.emit(get(e), f32x4Const(LN2_HI), OP.F32X4_MUL, OP.F32X4_ADD);
  const y = store(f);
  // Specials: x == 0 -> -inf (also -0, as Math.log); x == inf -> inf; x < 0 or NaN -> NaN.
  f.emit(f32x4Const(-Infinity), get(y), get(x), f32x4Const(0), OP.F32X4_EQ, OP.V128_BITSELECT);
  f.emit(get(x), get(x), f32x4Const(Infinity), OP.F32X4_NE, OP.V128_BITSELECT);
  f.emit(f32x4Const(NaN), get(x), f32x4Const(0), OP.F32X4_GE, OP.V128_BITSELECT);
  return store(f);
}
