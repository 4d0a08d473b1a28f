/**
 * float32 exp, expm1, log, log2, log10 and log1p in WGSL, a few ulp on every input (WGSL grants
 * exp 3 + 2|x| ulp and log an absolute 2^-21 near 1, where relative error is unbounded: log1p and
 * expm1 built on them by Kahan's tricks were 10^6 ulp off near 0 on SwiftShader).
 *
 * exp: x = n ln2 + r with n ln2_hi exact (ln2_hi has 16 bits, |n| <= 150), then e^r = 1 + expm1(r)
 * from a minimax polynomial on [-ln2/2, ln2/2], scaled by 2^n in two halves (each a normal power
 * of two, so the product is rounded once also where it is subnormal). Branch-free since issue #20
 * (about 24 operations, none on the conversion pipe; the earlier form, three branches, round() and
 * a clamped float-to-int conversion, about 35, is wgsl-libm/v1.ts). log: x = 2^k (1 + f) with
 * 1 + f in [sqrt(1/2), sqrt(2)), log1p(f) = f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f)
 * (fdlibm's form: f is exact, the rest is a small correction), R a minimax polynomial. log1p adds
 * the part of x that 1 + x rounds off as c / (1 + x). Coefficients: scripts/wgsl-math-fit.py.
 */
const LOG2E = '0x1.715476p0f';
const LN2_HI = '0x1.62e4p-1f';
const LN2_LO = '0x1.7f7d1cp-20f';

export { LOG2E, LN2_HI, LN2_LO };

export const EXP_LOG: Readonly<Record<string, string>> = {
  kiln_expm1_poly: `// (expm1(r) - r) / r^2 on [-ln2/2, ln2/2]
fn kiln_expm1_poly(r: f32) -> f32 {
  return 0x1.fffffep-2f + r * (0x1.5554aep-3f + r * (0x1.555676p-5f + r * (0x1.122886p-7f + r * 0x1.6bebdcp-10f)));
}`,
  kiln_ldexp1p: `// (1 + p) 2^k for k in [-150, 128], in two power-of-two factors (each a normal float) so that a
// subnormal result is rounded once and k = 128 overflows to infinity.
fn kiln_ldexp1p(p: f32, k: i32) -> f32 {
  let k1 = k >> 1u;
  return (1.0f + p) * bitcast<f32>((k1 + 127) << 23u) * bitcast<f32>((k - k1 + 127) << 23u);
}`,
  kiln_exp_hl: `// e^(hi + lo) for an argument carried in two parts (|lo| much below |hi|). Branch-free: hi is
// clamped to [-104, 89] (e^-104 rounds to 0, e^89 overflows: both come out of the scaling) and NaN
// selected at the end. n = round(hi log2 e) from the bits of hi log2 e + 1.5 2^23 (rounded to an
// integer by the add, read back through a mask, which no compiler can fold the way it may fold
// (y + c) - c), not round() and a float-to-int conversion (16 per clock per SM on NVIDIA, a quarter
// of the FMA rate; Tint adds a clamp to every conversion).
fn kiln_exp_hl(hi: f32, lo: f32) -> f32 {
  let c = clamp(hi, -104.0f, 89.0f);
  let b = bitcast<i32>(c * ${LOG2E} + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  let r = ((c - n * ${LN2_HI}) + lo) - n * ${LN2_LO};
  let y = kiln_ldexp1p(r + r * r * kiln_expm1_poly(r), b - 0x4b400000);
  return select(y, hi, kiln_isnan(hi));
}`,
  kiln_exp: `// kiln_exp_hl without the low part (an added 0 is not an identity in IEEE arithmetic: -0 + 0 = 0).
fn kiln_exp(x: f32) -> f32 {
  let c = clamp(x, -104.0f, 89.0f);
  let b = bitcast<i32>(c * ${LOG2E} + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  let r = (c - n * ${LN2_HI}) - n * ${LN2_LO};
  let y = kiln_ldexp1p(r + r * r * kiln_expm1_poly(r), b - 0x4b400000);
  return select(y, x, kiln_isnan(x));
}`,
  kiln_expm1: `// e^x - 1 = 2^n (1 + p) - 1 with p = expm1(r), summed so that one rounding dominates:
// 2^n (p + (1 - 2^-n)) above, 2^n p + (2^n - 1) below (both constants exact for |n| <= 24).
fn kiln_expm1(x: f32) -> f32 {
  if (kiln_isnan(x) || x == 0.0f) { return x; }
  if (x > 0x1.62e42ep6f) { return kiln_inf(); }
  if (x < -17.5f) { return -1.0f; }
  let n = round(x * ${LOG2E});
  let r = (x - n * ${LN2_HI}) - n * ${LN2_LO};
  let p = r + r * r * kiln_expm1_poly(r);
  let k = i32(n);
  if (k == 0) { return p; }
  if (k < 0) { return kiln_pow2i(k) * p + (kiln_pow2i(k) - 1.0f); }
  let t = p + (1.0f - kiln_pow2i(-min(k, 25)));
  let k1 = k / 2;
  return t * kiln_pow2i(k1) * kiln_pow2i(k - k1);
}`,
  kiln_log1p_tail: `// t with log1p(f) = f + t, for f in [sqrt(1/2) - 1, sqrt(2) - 1].
fn kiln_log1p_tail(f: f32) -> f32 {
  let s = f / (2.0f + f);
  let z = s * s;
  let hfsq = 0.5f * f * f;
  return s * (hfsq + z * (0x1.55557ap-1f + z * (0x1.995e92p-2f + z * 0x1.31e7ecp-2f))) - hfsq;
}`,
  kiln_log_parts: `// x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), for finite x > 0 (subnormal included):
// returns (k, f, t) with log1p(f) = f + t.
fn kiln_log_parts(x: f32) -> vec3<f32> {
  var b = bitcast<u32>(x);
  var k = i32(b >> 23u) - 127;
  if (k == -127) {
    b = bitcast<u32>(x * 0x1p23f);
    k = i32(b >> 23u) - 150;
  }
  var mb = (b & 0x007fffffu) | 0x3f800000u;
  if (mb > 0x3fb504f3u) {
    mb = mb - 0x00800000u;
    k = k + 1;
  }
  let f = bitcast<f32>(mb) - 1.0f;
  return vec3<f32>(f32(k), f, kiln_log1p_tail(f));
}`,
  kiln_log_special: `// log outside (0, inf): NaN below 0 and for NaN, -inf at +-0, inf at inf.
fn kiln_log_special(x: f32) -> f32 {
  if (kiln_isnan(x) || x < 0.0f) { return kiln_nan(); }
  if (x == 0.0f) { return -kiln_inf(); }
  return x;
}`,
  kiln_log: `fn kiln_log(x: f32) -> f32 {
  if (kiln_isnan(x) || x <= 0.0f || kiln_isinf(x)) { return kiln_log_special(x); }
  let p = kiln_log_parts(x);
  return p.x * ${LN2_HI} + (p.y + (p.z + p.x * ${LN2_LO}));
}`,
  kiln_log2: `fn kiln_log2(x: f32) -> f32 {
  if (kiln_isnan(x) || x <= 0.0f || kiln_isinf(x)) { return kiln_log_special(x); }
  let p = kiln_log_parts(x);
  return p.x + (p.y + p.z) * ${LOG2E};
}`,
  kiln_log10: `fn kiln_log10(x: f32) -> f32 {
  if (kiln_isnan(x) || x <= 0.0f || kiln_isinf(x)) { return kiln_log_special(x); }
  let p = kiln_log_parts(x);
  return p.x * 0x1.3442p-2f + ((p.y + p.z) * 0x1.bcb7b2p-2f + p.x * -0x1.95ec1p-19f);
}`,
  kiln_log1p: `// log(1 + x) as log1p(f) with f = x itself where 1 + x is in [sqrt(1/2), sqrt(2)); elsewhere
// log(u) + c / u with u = 1 + xh exact, xh = x with the bits below u's ulp cleared and c = x - xh
// (masks, not a two-sum: an implementation that reassociates, as SwiftShader's does, folds
// (x - ((1 + x) - 1)) to 0).
fn kiln_log1p(x: f32) -> f32 {
  if (kiln_isnan(x) || x <= -1.0f || kiln_isinf(x)) { return kiln_log_special(1.0f + x); }
  if (x > -0x1.2bec34p-2f && x < 0x1.a8279ap-2f) {
    if (x == 0.0f) { return x; }
    return x + kiln_log1p_tail(x);
  }
  let u0 = 1.0f + x;
  let sh = min(u32(max(i32(bitcast<u32>(u0) >> 23u) - i32((bitcast<u32>(x) & 0x7fffffffu) >> 23u), 0)), 31u);
  let xh = bitcast<f32>(bitcast<u32>(x) & (0xffffffffu << sh));
  let c = x - xh;
  let u = 1.0f + xh;
  let p = kiln_log_parts(u);
  return p.x * ${LN2_HI} + (p.y + (p.z + (p.x * ${LN2_LO} + select(c / u, 0.0f, u > 0x1p24f))));
}`,
};
