/**
 * The library's forms before issue #20, selectable with KILN_WEBGPU_MATH=v1 so that a benchmark can
 * set them beside the current ones in one process (bench/webgpu-elementwise-math.ts): exp with
 * three early returns, round() and a float-to-int conversion (Tint clamps every conversion; NVIDIA
 * runs both on the conversion pipe at a quarter of the FMA rate); tanh with a branch on |x| < 0.55
 * that a warp of normal data straddles, so it ran the polynomial, the exp and the branch; sigmoid
 * with an early return. Same accuracy as the current forms (test/webgpu-math.test.ts holds both).
 * The names and signatures are the current ones: index.ts swaps the texts.
 */
const LOG2E = '0x1.715476p0f';
const LN2_HI = '0x1.62e4p-1f';
const LN2_LO = '0x1.7f7d1cp-20f';

export const V1_FORMS: Readonly<Record<string, string>> = {
  kiln_exp_hl: `// e^(hi + lo) for an argument carried in two parts (|lo| much below |hi|).
fn kiln_exp_hl(hi: f32, lo: f32) -> f32 {
  if (kiln_isnan(hi)) { return hi; }
  if (hi > 0x1.62e42ep6f) { return kiln_inf(); }
  if (hi < -0x1.9fe368p6f) { return 0.0f; }
  let n = round(hi * ${LOG2E});
  let r = ((hi - n * ${LN2_HI}) + lo) - n * ${LN2_LO};
  let p = r + r * r * kiln_expm1_poly(r);
  let k = i32(n);
  let k1 = k / 2;
  return (1.0f + p) * kiln_pow2i(k1) * kiln_pow2i(k - k1);
}`,
  kiln_exp: 'fn kiln_exp(x: f32) -> f32 { return kiln_exp_hl(x, 0.0f); }',
  kiln_tanh: `fn kiln_tanh(x: f32) -> f32 {
  if (kiln_isnan(x)) { return x; }
  let a = abs(x);
  var t = 1.0f;
  if (a < 0.55f) {
    let z = a * a;
    t = a + a * z * (-0x1.55554ap-2f + z * (0x1.110d26p-3f + z * (-0x1.b9287ap-5f + z * (0x1.593d06p-6f + z * -0x1.9b3046p-8f))));
  } else if (a < 9.1f) {
    t = 1.0f - 2.0f / (kiln_exp(2.0f * a) + 1.0f);
  }
  return select(t, -t, kiln_signbit(x));
}`,
  kiln_sigmoid: `fn kiln_sigmoid(x: f32) -> f32 {
  if (kiln_isnan(x)) { return x; }
  let e = kiln_exp(-abs(x));
  let r = 1.0f / (1.0f + e);
  return select(r, e * r, x < 0.0f);
}`,
};

/**
 * KILN_WEBGPU_MATH=fast, a diagnostic: WGSL's builtins where the library computes its own (exp,
 * tanh, the sigmoid's exp) and a plain division. WGSL bounds exp only to 3 + 2|x| ulp and tanh to
 * 1e-5 absolute, and leaves NaN, infinity and overflow open (SwiftShader gave exp(NaN) = inf): this
 * form is outside the library's bounds and exists only to measure what the exact math costs.
 */
export const FAST_FORMS: Readonly<Record<string, string>> = {
  kiln_exp_hl: 'fn kiln_exp_hl(hi: f32, lo: f32) -> f32 { return exp(hi + lo); }',
  kiln_exp: 'fn kiln_exp(x: f32) -> f32 { return exp(x); }',
  kiln_tanh: 'fn kiln_tanh(x: f32) -> f32 { return tanh(x); }',
  kiln_sigmoid: 'fn kiln_sigmoid(x: f32) -> f32 { return 1.0f / (1.0f + exp(-x)); }',
  kiln_div: 'fn kiln_div(a: f32, b: f32) -> f32 { return a / b; }',
};
