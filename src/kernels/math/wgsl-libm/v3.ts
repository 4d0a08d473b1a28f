/**
 * KILN_WEBGPU_MATH=v3 (issue #20): exp and tanh on WGSL's builtin exp2, taken only where WGSL's own
 * accuracy table bounds it tightly, so the bounds below follow from the spec rather than from one
 * implementation's measurements; and float16 stores rounded by branch-free integer code with the
 * bits of v2's (storage.ts, F16_BITS_V3). Selectable, not the default, until an H200 A/B
 * (bench/webgpu-elementwise-math.ts) and the H200 run of test/webgpu-math.test.ts.
 *
 * Units: rho = 2^-24. An error of k ulp is a relative error of at most 2k rho; a relative error of
 * d rho is less than d ulp (ulp(y) > |y| 2^-24 for normal y).
 *
 * exp(x): clamp x to [-104, 89] (e^-104 rounds to 0, e^89 overflows, as in v2); n = round(x log2 e)
 * from the bits of x log2 e + 1.5 2^23 (v2's trick: no round(), no float-to-int conversion); Cody-Waite
 * r = (x - n ln2_hi) - n ln2_lo, the first product exact (ln2_hi has 16 significant bits, |n| <= 150);
 * e = exp2(t), t = r log2 e; the result e 2^n, scaled by two power-of-two factors built from bits
 * (exact; each a normal float, so a subnormal result is rounded once and n = 128 overflows to
 * infinity); NaN selected at the end. Bound:
 *   - |t| <= 0.5 + 2^-19 (n may be off by one ulp's worth where x log2 e + 1.5 2^23 is not fused), so
 *     WGSL's 3 + 2|t| ulp for exp2 is 4.0001 ulp;
 *   - the argument's errors move 2^t relatively by (ln2 times) their absolute size: r's one rounding
 *     (|r| < 0.35: 2^-26, 0.25 rho), t's rounding (|t| <= 0.5 + 2^-19: at most 2^-25 log2 units, 0.35
 *     rho), log2 e's rounding to float32 (|t| 2^-24 log2 units, 0.35 rho), ln2_hi + ln2_lo's (|n| 2^-44,
 *     nothing): 0.95 rho, under 0.95 ulp;
 *   - the scaling is exact where the result is normal (ulps of e 2^n are ulps of e); below 2^-126 it
 *     rounds once more, or flushes to 0 as WGSL allows.
 *   So 4.95 ulp; the tests hold 5.5 (the exp2 bound is stated at 2^t's own binade: near a power of two
 *   an ulp on the other side is half or double).
 *
 * tanh(x), a = |x|: below 0.55 v2's odd minimax polynomial (no exp2: only +, * on a polynomial, as
 * measured for v2 and in the JS mirror); from 0.55 t = 1 - u, u = 2 / (E + 1), E = e^2a by the exp
 * above (2a <= 18.2: one power-of-two factor); 1 beyond 9.1. u = 2 / (E + 1) <= 0.5 <= t < 1, so
 * ulp(t) = 2^-24 and t's error is u's absolute error plus half an ulp: u (E's relative error,
 * at most 4.95 ulp(E) / E <= 9.9 rho, times E / (E + 1)) + u rho (E + 1's rounding) + 2.5 ulp(u) (the
 * division: WGSL's 2.5 ulp for |y| in [2^-126, 2^126]; E + 1 is in [4, 8e7]). Largest where E is just
 * above 4 (a = 0.69: u = 0.4, ulp(u) = 2^-25): 0.4 x 9.9 x 0.8 + 0.4 + 1.25 + 0.5 = 5.3 ulp; at a = 0.55
 * (E = 3.0 in [2, 4): E's relative error 6.6 rho) 4.7; beyond, u and its share fall with e^-2a. The
 * tests hold tanh to 6 ulp.
 * Both sides are computed and one selected (no divergent branch), as in v2.
 *
 * sigmoid is v2's text (r = 1 / (1 + e), e = e^-|x|, times e for x < 0) on this exp. x >= 0: an error
 * de of e moves r by r^2 de <= (e / (1 + e)^2) 9.9 rho <= 2.5 rho, 1 + e's rounding 1 rho, the
 * division (r in [0.5, 1)) 2.5 ulp: r within 6 ulp. x < 0: y = e r = e / (1 + e), relative errors e's
 * 9.9 rho (times 1 / (1 + e) <= 1), 1 + e's 1, the division's 5, the product's 1: 17 rho, under 17 ulp.
 * The tests hold sigmoid to 18 ulp, silu (one more product) to 19, GELU's tanh form (x sigmoid(2u)) to
 * its v2 bound plus 15.
 *
 * What the tests hold (test/webgpu-math.test.ts, on SwiftShader in CI and on the H200's Dawn/Vulkan
 * with the same assertions) are these spec-derived bounds, which a conforming implementation cannot
 * exceed and a wrong form (a constant, a shift, a select) does, and every edge (NaN, +-inf, +-0,
 * overflow, underflow) equal to the cpu's. Measured on SwiftShader (whose exp2 is about 3 ulp on
 * [-0.5, 0.5]): exp 3.06 ulp (v2: 0.93), tanh 1.60 (1.06), sigmoid 4.81 (2.40), silu 4.78 (2.85), so
 * v3 is LESS accurate than v2 there, though inside its bounds: a speed/accuracy trade for the H200
 * A/B to judge, not a replacement.
 *
 * Everything else in the library (expm1, erf's and GELU's e^(hi + lo), pow) keeps v2's polynomial
 * forms: their bounds were measured with them, and the elementwise workload does not use them.
 */
import { LN2_HI, LN2_LO, LOG2E } from './exp-log.js';

export const V3_FORMS: Readonly<Record<string, string>> = {
  kiln_exp2_scale: `// m 2^k for k in [-150, 128] in two power-of-two factors (each a normal float, built from bits), so
// that a subnormal result is rounded once and k = 128 overflows to infinity.
fn kiln_exp2_scale(m: f32, k: i32) -> f32 {
  let k1 = k >> 1u;
  return m * bitcast<f32>((k1 + 127) << 23u) * bitcast<f32>((k - k1 + 127) << 23u);
}`,
  kiln_exp: `// e^x = exp2(r log2 e) 2^n, |r log2 e| <= 0.5 + 2^-19, where WGSL bounds exp2 to 3 + 2|t| ulp (v3.ts).
fn kiln_exp(x: f32) -> f32 {
  let c = clamp(x, -104.0f, 89.0f);
  let b = bitcast<i32>(c * ${LOG2E} + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  let r = (c - n * ${LN2_HI}) - n * ${LN2_LO};
  let y = kiln_exp2_scale(exp2(r * ${LOG2E}), b - 0x4b400000);
  return select(y, x, kiln_isnan(x));
}`,
  kiln_tanh: `// v2's polynomial below 0.55, 1 - 2 / (e^2a + 1) above with e^2a on exp2 as kiln_exp (2a <= 18.2,
// n in [0, 27]: one power-of-two factor); both computed, one selected.
fn kiln_tanh(x: f32) -> f32 {
  let a = min(abs(x), 9.1f);
  let z = a * a;
  let tp = a + a * z * kiln_tanh_poly(z);
  let c = 2.0f * a;
  let b = bitcast<i32>(c * ${LOG2E} + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  let r = (c - n * ${LN2_HI}) - n * ${LN2_LO};
  let e = exp2(r * ${LOG2E}) * bitcast<f32>((b - 0x4b400000 + 127) << 23u);
  let t = select(1.0f - 2.0f / (e + 1.0f), tp, a < 0.55f);
  let s = bitcast<f32>(bitcast<u32>(t) | (bitcast<u32>(x) & 0x80000000u));
  return select(s, x, kiln_isnan(x));
}`,
};
