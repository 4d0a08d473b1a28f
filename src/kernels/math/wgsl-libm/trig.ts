/**
 * float32 sin, cos, tan and atan2 in WGSL, a few ulp over the whole float range. WGSL grants sin
 * and cos only an absolute 2^-11 on [-pi, pi] and nothing outside (SwiftShader: 1.5e-4 off at 1,
 * 0.04 at 1e5, sin(3.4e38) = 1), tan inherits sin / cos, atan2 4096 ulp and nothing at y = 0.
 *
 * Argument reduction, |x| = (4j + q) pi/2 + r with |r| <= ~pi/4:
 * - |x| < 2^17 (rotary angles of 128k positions are below it): Cody-Waite, k = round(|x| 2/pi),
 *   r = |x| - k P1 - k P2 - ... - k P7 with P1..P6 7-bit pieces of pi/2, so that k Pi is exact
 *   for k < 2^17 without relying on a fused multiply-add (WGSL's fma may be unfused), and P7 the
 *   rest; 78 bits of pi/2 keep r relative-accurate at the float nearest a multiple of pi/2 in this
 *   range (|r| = 2^-27.8 at x = 252.898). Measured in float32 emulation: <= 3 ulp.
 * - above: Payne-Hanek in 32-bit integers: the 96 bits of 2/pi that matter for |x| = m 2^e
 *   (24-bit m) from a table of 224 bits, m times them modulo 4 in 16-bit partial products, the
 *   quadrant from the top two bits and r from the next 64 (normalised, then times pi/2).
 *   Reduction error <= 1.7 ulp of r.
 * Then minimax polynomials on [0, 0.8] (sin, cos: fdlibm's (1 - w) - z/2 split; tan, with
 * -1/tan(r) in odd quadrants), computed for |x| and given x's sign. atan2: atan of the ratio of
 * the smaller to the larger magnitude (in [0, 1], operands scaled into the range where WGSL bounds
 * a division), reduced once more by (t - 1) / (t + 1) above tan(pi/8), then moved to its quadrant
 * by the magnitudes and the sign bits (so atan2(+-0, -0) = +-pi, as C). Coefficients:
 * scripts/wgsl-math-fit.py.
 */

/** pi/2 in pieces, as `- k * P` steps of the Cody-Waite reduction. */
const PIO2_PIECES = ['0x1.94p0f', '-0x1.ep-8f', '-0x1.2cp-18f', '0x1.1p-26f', '0x1.0cp-34f', '-0x1.74p-43f', '0x1.1a6264p-54f'];

export const TRIG: Readonly<Record<string, string>> = {
  kiln_reduced: 'struct kiln_reduced { r: f32, q: u32 }',
  kiln_two_over_pi: `// 2/pi after 8 zero bits (the window of |x| = m 2^e starts 7 bits before the point for e = -6).
const kiln_two_over_pi = array<u32, 8>(0x00a2f983u, 0x6e4e4415u, 0x29fc2757u, 0xd1f534ddu, 0xc0db6295u, 0x993c4390u, 0x41fe5163u, 0u);`,
  kiln_mul64: `// The 64-bit product of two u32 as (low word, high word), from 16-bit halves.
fn kiln_mul64(a: u32, b: u32) -> vec2<u32> {
  let al = a & 0xffffu;
  let ah = a >> 16u;
  let bl = b & 0xffffu;
  let bh = b >> 16u;
  let ll = al * bl;
  let lh = al * bh;
  let hl = ah * bl;
  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return vec2<u32>((ll & 0xffffu) | (mid << 16u), ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
}`,
  kiln_window32: `// 32 bits of the 2/pi table from bit sh of word w (a shift by 32 is a shift by 0 in WGSL).
fn kiln_window32(w: u32, sh: u32) -> u32 {
  let t = kiln_two_over_pi;
  return (t[w] << sh) | select(t[w + 1u] >> (32u - sh), 0u, sh == 0u);
}`,
  kiln_reduce_pio2_large: `// Payne-Hanek for finite a >= 2^17.
fn kiln_reduce_pio2_large(a: f32) -> kiln_reduced {
  let b = bitcast<u32>(a);
  let m = (b & 0x007fffffu) | 0x00800000u;
  let g = (b >> 23u) - 144u;
  let w = g >> 5u;
  let sh = g & 31u;
  let p0 = kiln_mul64(m, kiln_window32(w + 2u, sh));
  let p1 = kiln_mul64(m, kiln_window32(w + 1u, sh));
  let r1 = p0.y + p1.x;
  let r2 = p1.y + m * kiln_window32(w, sh) + select(0u, 1u, r1 < p1.x);
  var q = r2 >> 30u;
  var fh = (r2 << 2u) | (r1 >> 30u);
  var fl = (r1 << 2u) | (p0.x >> 30u);
  let neg = fh >= 0x80000000u;
  if (neg) {
    q = q + 1u;
    fl = ~fl + 1u;
    fh = ~fh + select(0u, 1u, fl == 0u);
  }
  let lz = countLeadingZeros(fh);
  let top = (fh << lz) | select(fl >> (32u - lz), 0u, lz == 0u);
  let v = (f32(top >> 8u) + f32(top & 255u) * 0x1p-8f) * kiln_pow2i(-24 - i32(lz));
  let r = v * 0x1.921fb6p0f;
  return kiln_reduced(select(r, -r, neg), q & 3u);
}`,
  kiln_reduce_pio2: `// a = (4j + q) pi/2 + r for finite a >= 0.
fn kiln_reduce_pio2(a: f32) -> kiln_reduced {
  if (a >= 0x1p17f) { return kiln_reduce_pio2_large(a); }
  let k = round(a * 0x1.45f306p-1f);
  var r = a;
${PIO2_PIECES.map((p) => `  r = r - k * ${p};`).join('\n')}
  return kiln_reduced(r, u32(k) & 3u);
}`,
  kiln_sin_poly: `fn kiln_sin_poly(r: f32) -> f32 {
  let z = r * r;
  return r + r * z * (-0x1.555544p-3f + z * (0x1.11067ap-7f + z * -0x1.99024ep-13f));
}`,
  kiln_cos_poly: `fn kiln_cos_poly(r: f32) -> f32 {
  let z = r * r;
  let hz = 0.5f * z;
  let w = 1.0f - hz;
  return w + (((1.0f - w) - hz) + z * z * (0x1.555548p-5f + z * (-0x1.6c0b62p-10f + z * 0x1.99afa6p-16f)));
}`,
  kiln_tan_poly: `fn kiln_tan_poly(r: f32) -> f32 {
  let z = r * r;
  return r + r * z * (0x1.5554bcp-2f + z * (0x1.1134f4p-3f + z * (0x1.b49b9ep-5f + z * (0x1.96f672p-6f + z * (0x1.42f35ap-9f + z * 0x1.404128p-7f)))));
}`,
  kiln_sin: `fn kiln_sin(x: f32) -> f32 {
  if (!kiln_isfinite(x)) { return kiln_nan(); }
  let t = kiln_reduce_pio2(abs(x));
  var v = select(kiln_sin_poly(t.r), kiln_cos_poly(t.r), (t.q & 1u) != 0u);
  v = select(v, -v, (t.q & 2u) != 0u);
  return select(v, -v, kiln_signbit(x));
}`,
  kiln_cos: `fn kiln_cos(x: f32) -> f32 {
  if (!kiln_isfinite(x)) { return kiln_nan(); }
  let t = kiln_reduce_pio2(abs(x));
  let q = t.q + 1u;
  let v = select(kiln_sin_poly(t.r), kiln_cos_poly(t.r), (q & 1u) != 0u);
  return select(v, -v, (q & 2u) != 0u);
}`,
  kiln_tan: `fn kiln_tan(x: f32) -> f32 {
  if (!kiln_isfinite(x)) { return kiln_nan(); }
  let t = kiln_reduce_pio2(abs(x));
  let p = kiln_tan_poly(t.r);
  let v = select(p, -1.0f / p, (t.q & 1u) != 0u);
  return select(v, -v, kiln_signbit(x));
}`,
  kiln_atan01: `// atan(t) for t in [0, 1].
fn kiln_atan01(t: f32) -> f32 {
  let big = t > 0x1.a8279ap-2f;
  let u = select(t, (t - 1.0f) / (t + 1.0f), big);
  let z = u * u;
  let p = u + u * z * (-0x1.55554ap-2f + z * (0x1.999188p-3f + z * (-0x1.23b3f8p-3f + z * (0x1.b1d9fep-4f + z * -0x1.f18cd6p-5f))));
  return select(p, 0x1.921fb6p-1f + (p + -0x1.777a5cp-26f), big);
}`,
  kiln_atan2: `fn kiln_atan2(y: f32, x: f32) -> f32 {
  if (kiln_isnan(x) || kiln_isnan(y)) { return kiln_nan(); }
  var ax = abs(x);
  var ay = abs(y);
  if (kiln_isinf(ax) || kiln_isinf(ay)) {
    ax = select(0.0f, 1.0f, kiln_isinf(ax));
    ay = select(0.0f, 1.0f, kiln_isinf(ay));
  }
  let mx = max(ax, ay);
  let s = select(select(1.0f, 0x1p24f, mx < 0x1p-100f), 0.25f, mx > 0x1p126f);
  let t = select((min(ax, ay) * s) / (mx * s), 0.0f, mx == 0.0f);
  var th = kiln_atan01(t);
  if (ay > ax) { th = 0x1.921fb6p0f - th + -0x1.777a5cp-25f; }
  if (kiln_signbit(x)) { th = 0x1.921fb6p1f - th + -0x1.777a5cp-24f; }
  return select(th, -th, kiln_signbit(y));
}`,
};
