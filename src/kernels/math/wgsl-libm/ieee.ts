/**
 * WGSL helpers for what WGSL leaves open in plain arithmetic (wgsl-libm/index.ts says why each
 * matters): NaN and infinity built and tested through bits, NaN-propagating max/min, and sqrt,
 * inverseSqrt and division with their results at the edges of the domain made explicit (WGSL
 * bounds the error of x / y only for |y| in [2^-126, 2^126], of sqrt only through 1 / inverseSqrt,
 * and an implementation may return any value outside a builtin's domain).
 */
export const IEEE_HELPERS: Readonly<Record<string, string>> = {
  kiln_inf: 'fn kiln_inf() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }',
  kiln_nan: 'fn kiln_nan() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }',
  kiln_isnan: 'fn kiln_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }',
  kiln_isinf: 'fn kiln_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }',
  kiln_isfinite: 'fn kiln_isfinite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }',
  kiln_signbit: 'fn kiln_signbit(x: f32) -> bool { return bitcast<u32>(x) >= 0x80000000u; }',
  kiln_fmax: 'fn kiln_fmax(a: f32, b: f32) -> f32 { if (kiln_isnan(a)) { return a; } if (kiln_isnan(b)) { return b; } return max(a, b); }',
  kiln_fmin: 'fn kiln_fmin(a: f32, b: f32) -> f32 { if (kiln_isnan(a)) { return a; } if (kiln_isnan(b)) { return b; } return min(a, b); }',
  // 2^n for n in [-126, 127], from its bits (exact, and no library call).
  kiln_pow2i: 'fn kiln_pow2i(n: i32) -> f32 { return bitcast<f32>(u32(n + 127) << 23u); }',
  kiln_sqrt: `// sqrt(-0) = -0 and sqrt(inf) = inf as IEEE says; WGSL's sqrt is 1 / inverseSqrt(x), open at 0 and inf.
fn kiln_sqrt(x: f32) -> f32 {
  if (kiln_isnan(x) || x < 0.0f) { return kiln_nan(); }
  if (x == 0.0f || kiln_isinf(x)) { return x; }
  return sqrt(x);
}`,
  kiln_rsqrt: `// 1 / sqrt(x): +-inf at +-0 (torch), 0 at inf, NaN below 0; inverseSqrt (2 ulp) in between.
fn kiln_rsqrt(x: f32) -> f32 {
  if (kiln_isnan(x) || x < 0.0f) { return kiln_nan(); }
  if (x == 0.0f) { return select(kiln_inf(), -kiln_inf(), kiln_signbit(x)); }
  if (kiln_isinf(x)) { return 0.0f; }
  return inverseSqrt(x);
}`,
  kiln_div: `// a / b with IEEE results where WGSL bounds nothing: a zero or infinite divisor, and |b| outside
// [2^-126, 2^126], where both operands are scaled by a power of two first (an implementation that
// computes a * (1 / b) would give 1e38 / 1e38 = 0).
fn kiln_div(a: f32, b: f32) -> f32 {
  let ab = abs(b);
  if (ab >= 0x1p-126f && ab <= 0x1p126f) { return a / b; }
  if (kiln_isnan(a) || kiln_isnan(b)) { return kiln_nan(); }
  let sign = (bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u;
  if (ab == 0.0f) {
    if (a == 0.0f) { return kiln_nan(); }
    return bitcast<f32>(sign | 0x7f800000u);
  }
  if (kiln_isinf(b)) {
    if (kiln_isinf(a)) { return kiln_nan(); }
    return bitcast<f32>(sign);
  }
  let s = select(0.25f, 0x1p24f, ab < 1.0f);
  return (a * s) / (b * s);
}`,
};
