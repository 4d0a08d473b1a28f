/**
 * The WGSL helpers the WGSL math table (wgsl.ts) calls, prepended to every kernel that renders
 * through it. WGSL lacks what C's libm has (expm1, log1p, erf, NaN-aware max/min, infinity and NaN
 * literals), and the spec lets implementations assume NaN and infinity away, so NaN and infinity
 * tests look at the bits instead of comparing values, and non-finite constants are built at run
 * time (a constant expression that overflows is a shader-creation error).
 */
export const WGSL_PRELUDE = `
fn kiln_inf() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }
fn kiln_nan() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
fn kiln_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn kiln_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn kiln_isfinite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
fn kiln_fmax(a: f32, b: f32) -> f32 { if (kiln_isnan(a)) { return a; } if (kiln_isnan(b)) { return b; } return max(a, b); }
fn kiln_fmin(a: f32, b: f32) -> f32 { if (kiln_isnan(a)) { return a; } if (kiln_isnan(b)) { return b; } return min(a, b); }
// Kahan's forms: exact near 0, where exp(x) - 1 and log(1 + x) cancel.
fn kiln_expm1(x: f32) -> f32 {
  let u = exp(x);
  if (u == 1.0) { return x; }
  let um1 = u - 1.0;
  if (um1 == -1.0) { return -1.0; }
  if (kiln_isinf(u)) { return u; }
  return um1 * x / log(u);
}
fn kiln_log1p(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (kiln_isinf(u)) { return u; }
  return log(u) * x / (u - 1.0);
}
fn kiln_log10(x: f32) -> f32 { return log2(x) * 0.30102999566398120; }
// Vulkan drivers may compute tanh as a ratio of exponentials that overflows to NaN.
fn kiln_tanh(x: f32) -> f32 { if (abs(x) > 15.0) { return select(-1.0, 1.0, x > 0.0); } return tanh(x); }
// erf: Taylor series below 0.5 (relative error < 1e-7), Abramowitz-Stegun 7.1.26 above (|error| < 1.5e-7).
fn kiln_erf(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.5) {
    let z = x * x;
    return x * 1.1283791670955126 * (1.0 + z * (-0.3333333333333333 + z * (0.1 + z * (-0.023809523809523808 + z * 0.004629629629629629))));
  }
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  let r = 1.0 - p * exp(-a * a);
  if (kiln_isnan(x)) { return x; }
  return select(-r, r, x >= 0.0);
}
// C's pow: a negative base needs an integral exponent (its parity gives the sign).
fn kiln_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0 || a == 1.0) { return 1.0; }
  if (kiln_isnan(a) || kiln_isnan(b)) { return kiln_nan(); }
  if (a == 0.0) { return select(0.0, kiln_inf(), b < 0.0); }
  let r = exp2(b * log2(abs(a)));
  if (a > 0.0) { return r; }
  if (floor(b) != b) { return kiln_nan(); }
  let odd = abs(b) < 16777216.0 && (b * 0.5 - floor(b * 0.5)) != 0.0;
  return select(r, -r, odd);
}
fn kiln_ipow(a: i32, b: i32) -> i32 {
  if (b < 0) { return select(select(0, 1, a == 1), select(1, -1, (b & 1) != 0), a == -1); }
  var r = 1;
  var base = a;
  var e = b;
  loop { if (e == 0) { break; } if ((e & 1) != 0) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}
// Python-style remainder and floor division (the sign of the divisor), as torch.
fn kiln_fremainder(a: f32, b: f32) -> f32 {
  var r = a % b;
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) { r = r + b; }
  return r;
}
fn kiln_iremainder(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) { r = r + b; }
  return r;
}
fn kiln_fdivfloor(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return a / b; }
  let m = a % b;
  var d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
  if (d == 0.0) { return 0.0 * (a / b); }
  var f = floor(d);
  if (d - f > 0.5) { f = f + 1.0; }
  return f;
}
fn kiln_idivfloor(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var q = a / b;
  if ((a % b) != 0 && ((a < 0) != (b < 0))) { q = q - 1; }
  return q;
}
fn kiln_lerp(a: f32, b: f32, w: f32) -> f32 { return select(b - (b - a) * (1.0 - w), a + w * (b - a), abs(w) < 0.5); }
`;
