/**
 * WGSL helpers for the arithmetic that C and Python define and WGSL does not: C's pow (torch.pow,
 * with C99's special cases: (-0)^-1 = -inf, (-1)^inf = 1, a negative base needs an integral
 * exponent), integer pow, C's exact fmod and through it Python's remainder and floor division
 * (the sign of the divisor), and torch's two-sided lerp.
 *
 * pow is 2^y, y = b log2|a|, with log2|a| = k + a1 + a2 from the log library (exp-log.ts): k the
 * exponent, a1 = hi12(f) log2(e)_hi exact, a2 the small rest. y is summed from exact products (b
 * and a1 split into 12-bit halves, so each product has at most 24 bits) and b a2, each split into
 * its integer part and its fraction: 2^y = 2^n e^(r ln2) with n the sum of the integer parts and r
 * that of the fractions, so y's size costs no accuracy (WGSL's pow, exp2(b log2(a)), loses |y| ulp
 * to the rounding of y, and SwiftShader's log2 near 1 is 2^-21 absolute: pow(1.0001, 1000) was
 * 2500 ulp off) and no error-free two-sum is needed (a reassociating compiler folds those away).
 */
const LOG2E = '0x1.715476p0f';

export const ARITH: Readonly<Record<string, string>> = {
  kiln_hi12: `// x with its low 12 significand bits cleared: x = hi12(x) + (x - hi12(x)), both of 12 bits.
fn kiln_hi12(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) & 0xfffff000u); }`,
  kiln_pow_acc: `// (integer parts, fractions) of a sum of exact terms, plus the term t.
fn kiln_pow_acc(acc: vec2<f32>, t: f32) -> vec2<f32> {
  let i = round(t);
  return vec2<f32>(acc.x + i, acc.y + (t - i));
}`,
  kiln_pow_core: `// |a|^b for finite a != 0 and finite b.
fn kiln_pow_core(aa: f32, b: f32) -> f32 {
  let p = kiln_log_parts(aa);
  let fh = kiln_hi12(p.y);
  let a1 = fh * 0x1.714p0f;
  let a2 = (p.y - fh) * 0x1.714p0f + (p.y * 0x1.47652cp-12f + p.z * ${LOG2E});
  let y0 = b * (p.x + (a1 + a2));
  if (y0 > 129.0f) { return kiln_inf(); }
  if (y0 < -152.0f) { return 0.0f; }
  let a1h = kiln_hi12(a1);
  let a1l = a1 - a1h;
  let bh = kiln_hi12(b);
  let bl = b - bh;
  var acc = kiln_pow_acc(vec2<f32>(0.0f, 0.0f), bh * p.x);
  acc = kiln_pow_acc(acc, bl * p.x);
  acc = kiln_pow_acc(acc, bh * a1h);
  acc = kiln_pow_acc(acc, bh * a1l);
  acc = kiln_pow_acc(acc, bl * a1h);
  acc = kiln_pow_acc(acc, bl * a1l);
  acc = kiln_pow_acc(acc, b * a2);
  let m = round(acc.y);
  let r = (acc.y - m) * 0x1.62e43p-1f;
  let k = i32(acc.x + m);
  let k1 = k / 2;
  return (1.0f + (r + r * r * kiln_expm1_poly(r))) * kiln_pow2i(k1) * kiln_pow2i(k - k1);
}`,
  kiln_pow: `fn kiln_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0f || a == 1.0f) { return 1.0f; }
  if (kiln_isnan(a) || kiln_isnan(b)) { return kiln_nan(); }
  let aa = abs(a);
  if (kiln_isinf(b)) {
    if (aa == 1.0f) { return 1.0f; }
    return select(0.0f, kiln_inf(), (aa > 1.0f) == (b > 0.0f));
  }
  let integral = floor(b) == b;
  let odd = integral && abs(b) < 0x1p24f && (b * 0.5f - floor(b * 0.5f)) != 0.0f;
  let negate = odd && kiln_signbit(a);
  if (aa == 0.0f || kiln_isinf(aa)) {
    let r = select(0.0f, kiln_inf(), (aa == 0.0f) == (b < 0.0f));
    return select(r, -r, negate);
  }
  if (a < 0.0f && !integral) { return kiln_nan(); }
  let r = kiln_pow_core(aa, b);
  return select(r, -r, negate);
}`,
  kiln_ipow: `fn kiln_ipow(a: i32, b: i32) -> i32 {
  if (b < 0) { return select(select(0, 1, a == 1), select(1, -1, (b & 1) != 0), a == -1); }
  var r = 1;
  var base = a;
  var e = b;
  loop { if (e == 0) { break; } if ((e & 1) != 0) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}`,
  kiln_fmod_q: `// C's fmod, exact as C's (WGSL's % is only as exact as x - y * trunc(x / y)), with the magnitude of
// the truncated quotient where it is below 2^24 (else -1): the long division of the integer
// significands (|a| = ma 2^xa, |b| = mb 2^xb, subnormals included), 8 bits a step (r < mb <= 2^24,
// so r << 8 fits a u32): 35 steps at most, for 3e38 mod 1e-45.
fn kiln_fmod_q(a: f32, b: f32) -> vec2<f32> {
  let ua = bitcast<u32>(a) & 0x7fffffffu;
  let ub = bitcast<u32>(b) & 0x7fffffffu;
  if (kiln_isnan(a) || kiln_isnan(b) || kiln_isinf(a) || ub == 0u) { return vec2<f32>(kiln_nan(), -1.0f); }
  if (ua < ub) { return vec2<f32>(a, 0.0f); }
  let ea = ua >> 23u;
  let eb = ub >> 23u;
  let ma = select((ua & 0x007fffffu) | 0x00800000u, ua, ea == 0u);
  let mb = select((ub & 0x007fffffu) | 0x00800000u, ub, eb == 0u);
  let xb = select(i32(eb) - 150, -149, eb == 0u);
  var d = select(i32(ea) - 150, -149, ea == 0u) - xb;
  var q = ma / mb;
  var r = ma % mb;
  loop {
    if (d <= 0) { break; }
    let s = u32(min(d, 8));
    let t = r << s;
    q = select((q << s) | (t / mb), 0x01000000u, q >= (0x01000000u >> s));
    r = t % mb;
    d = d - i32(s);
  }
  let k1 = xb / 2;
  let m = f32(r) * kiln_pow2i(k1) * kiln_pow2i(xb - k1);
  return vec2<f32>(select(m, -m, kiln_signbit(a)), select(f32(q), -1.0f, q >= 0x01000000u));
}`,
  kiln_fmod: 'fn kiln_fmod(a: f32, b: f32) -> f32 { return kiln_fmod_q(a, b).x; }',
  kiln_fremainder: `// Python-style remainder and floor division (the sign of the divisor), as torch: through fmod.
fn kiln_fremainder(a: f32, b: f32) -> f32 {
  var r = kiln_fmod(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) { r = r + b; }
  return r;
}`,
  kiln_iremainder: `fn kiln_iremainder(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) { r = r + b; }
  return r;
}`,
  kiln_fdivfloor: `// torch's floor division: the truncated quotient minus 1 where the remainder's sign differs from
// b's, exact below 2^24 (the long division's quotient); above, (a - fmod) / b rounded (a - fmod is
// rounded to float32 first: within an ulp). A zero quotient takes its sign from the bits (0 * (a / b)
// may lose it to a compiler that ignores signed zeros).
fn kiln_fdivfloor(a: f32, b: f32) -> f32 {
  if ((bitcast<u32>(b) & 0x7fffffffu) == 0u) { return kiln_div(a, b); }
  let fq = kiln_fmod_q(a, b);
  let m = fq.x;
  let adjust = m != 0.0f && ((b < 0.0f) != (m < 0.0f));
  var d: f32;
  if (fq.y >= 0.0f) {
    d = select(fq.y, -fq.y, kiln_signbit(a) != kiln_signbit(b)) - select(0.0f, 1.0f, adjust);
  } else {
    d = kiln_div(a - m, b) - select(0.0f, 1.0f, adjust);
  }
  if (d == 0.0f) { return bitcast<f32>((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u); }
  var f = floor(d);
  if (d - f > 0.5f) { f = f + 1.0f; }
  return f;
}`,
  kiln_idivfloor: `fn kiln_idivfloor(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var q = a / b;
  if ((a % b) != 0 && ((a < 0) != (b < 0))) { q = q - 1; }
  return q;
}`,
  kiln_lerp: 'fn kiln_lerp(a: f32, b: f32, w: f32) -> f32 { return select(b - (b - a) * (1.0f - w), a + w * (b - a), abs(w) < 0.5f); }',
};
