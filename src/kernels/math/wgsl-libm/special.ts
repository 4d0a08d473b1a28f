/**
 * float32 tanh, sigmoid, erf and the two GELUs in WGSL, a few ulp, with NaN propagated by test
 * (WGSL's tanh is only 1e-5 absolute: tanh(1e-30) was 0 on SwiftShader, and exp(NaN) was inf).
 *
 * - tanh: an odd minimax polynomial below 0.55, 1 - 2 / (e^2|x| + 1) above (no cancellation
 *   there: tanh >= 0.5), 1 beyond 9.1; both computed and one selected, no branch (issue #20; the
 *   branching form is wgsl-libm/v1.ts).
 * - sigmoid: 1 / (1 + e^-|x|), times e^-|x| for x < 0, so the divisor stays in [1, 2] (1 / (1 + e^-x)
 *   divides by up to 3e38, beyond the range where WGSL bounds a division) and small values keep
 *   their relative accuracy.
 * - erf: x P(x^2) below 0.875, 1 - erfc above; erfc(a) = e^-a^2 Q(t) / (a + 2.5) with
 *   t = (a - 2.5) / (a + 2.5), Q a minimax polynomial on [0.875, 10.1] (scaled by a + 2.5 it varies
 *   little, so Horner's rule cancels little; the reciprocal gets a Newton step) and a^2 carried in
 *   two parts (a splits into 12-bit halves), since e^-a^2 would amplify the rounding of a^2 by a^2
 *   (100 ulp at a = 10).
 * - gelu (erf form): x Phi(x), Phi(x) = erfc(-x/sqrt2) / 2, so that the left tail keeps its
 *   relative accuracy where 1 + erf(x/sqrt2) cancels (torch's formula: 0 for x < -5.9); the tanh
 *   form: 1 + tanh(u) = 2 sigmoid(2u), so x sigmoid(2u), which does not cancel either.
 * Coefficients: scripts/wgsl-math-fit.py.
 */
import { LN2_HI, LN2_LO, LOG2E } from './exp-log.js';

export const SPECIAL: Readonly<Record<string, string>> = {
  kiln_tanh_poly: `// (tanh(a) - a) / a^3 on [0, 0.55] as a polynomial in z = a^2.
fn kiln_tanh_poly(z: f32) -> f32 {
  return -0x1.55554ap-2f + z * (0x1.110d26p-3f + z * (-0x1.b9287ap-5f + z * (0x1.593d06p-6f + z * -0x1.9b3046p-8f)));
}`,
  kiln_tanh: `// Both forms computed and one selected: a branch on |x| < 0.55 made a warp of normal data
// (which straddles it) run both anyway, plus the branch. e^(2a) for 2a in [0, 18.2] needs one
// power-of-two factor (n in [0, 27]); n from the bits of 2a log2 e + 1.5 2^23 as in kiln_exp_hl.
fn kiln_tanh(x: f32) -> f32 {
  let a = min(abs(x), 9.1f);
  let z = a * a;
  let tp = a + a * z * kiln_tanh_poly(z);
  let c = 2.0f * a;
  let b = bitcast<i32>(c * ${LOG2E} + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  let r = (c - n * ${LN2_HI}) - n * ${LN2_LO};
  let e = (1.0f + (r + r * r * kiln_expm1_poly(r))) * bitcast<f32>((b - 0x4b400000 + 127) << 23u);
  let t = select(1.0f - 2.0f / (e + 1.0f), tp, a < 0.55f);
  let s = bitcast<f32>(bitcast<u32>(t) | (bitcast<u32>(x) & 0x80000000u));
  return select(s, x, kiln_isnan(x));
}`,
  kiln_sigmoid: `fn kiln_sigmoid(x: f32) -> f32 {
  let e = kiln_exp(-abs(x));
  let r = 1.0f / (1.0f + e);
  return select(select(r, e * r, x < 0.0f), x, kiln_isnan(x));
}`,
  kiln_sq_hl: `// x^2 as hi + lo: hi the exact square of x's top 12 bits, lo the rest (rounded, small).
fn kiln_sq_hl(x: f32) -> vec2<f32> {
  let h = bitcast<f32>(bitcast<u32>(x) & 0xfffff000u);
  let l = x - h;
  return vec2<f32>(h * h, l * (h + x));
}`,
  kiln_erf_poly: `// erf(y) / y on [0, 0.875] as a polynomial in z = y^2.
fn kiln_erf_poly(z: f32) -> f32 {
  return 0x1.20dd76p0f + z * (-0x1.812744p-2f + z * (0x1.ce2e84p-4f + z * (-0x1.b819a6p-6f + z * (0x1.553abap-8f + z * (-0x1.ae7f92p-11f + z * 0x1.6bdf5p-14f)))));
}`,
  kiln_erfc_tail: `// erfc(a) for a >= 0.875, given a^2 = sq.x + sq.y: e^-a^2 P(t) / (a + 2.5).
fn kiln_erfc_tail(a: f32, sq: vec2<f32>) -> f32 {
  if (a > 10.1f) { return 0.0f; }
  let d = a + 2.5f;
  let r0 = 1.0f / d;
  let r = r0 + r0 * (1.0f - d * r0);
  let t = (a - 2.5f) * r;
  let p = 0x1.0dd508p0f + t * (-0x1.9bfb54p-1f + t * (0x1.d0cee2p-2f + t * (-0x1.5eb8a6p-3f + t * (0x1.d0a52ep-6f + t * (0x1.12ccfcp-7f + t * (-0x1.3a985ep-8f + t * (-0x1.a9cdap-12f + t * 0x1.48df7p-11f)))))));
  return kiln_exp_hl(-sq.x, -sq.y) * (p * r);
}`,
  kiln_erf: `fn kiln_erf(x: f32) -> f32 {
  if (kiln_isnan(x)) { return x; }
  let a = abs(x);
  var r = 1.0f;
  if (a < 0.875f) {
    r = a * kiln_erf_poly(a * a);
  } else if (a < 3.92f) {
    r = 1.0f - kiln_erfc_tail(a, kiln_sq_hl(a));
  }
  return select(r, -r, kiln_signbit(x));
}`,
  kiln_gelu: `// x Phi(x), Phi(x) = erfc(-y) / 2 with y = x / sqrt2 (y^2 = x^2 / 2 exactly from x's split square).
fn kiln_gelu(x: f32) -> f32 {
  if (kiln_isnan(x)) { return x; }
  let y = x * 0x1.6a09e6p-1f;
  let a = abs(y);
  var phi: f32;
  if (a < 0.875f) {
    phi = 0.5f + 0.5f * (y * kiln_erf_poly(y * y));
  } else {
    let e = 0.5f * kiln_erfc_tail(a, 0.5f * kiln_sq_hl(x));
    phi = select(1.0f - e, e, y < 0.0f);
  }
  return x * phi;
}`,
  kiln_gelu_tanh: `// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
fn kiln_gelu_tanh(x: f32) -> f32 {
  return x * kiln_sigmoid(x * (0x1.988454p0f + 0x1.2444f2p-4f * x * x));
}`,
};
