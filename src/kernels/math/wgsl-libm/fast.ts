/**
 * Fast float math of the compiled webgpu kernels (KILN_WEBGPU_FAST_MATH; issue #20), the WGSL
 * counterpart of the CUDA generator's kiln_fexp / kiln_ftanh / kiln_frcp (kernels/cuda/fused/prelude.ts):
 * exp, sigmoid, silu and tanh of kiln.compile's fused kernels on WGSL's builtin exp2, without the
 * library's own exp (v2: a polynomial, about 24 operations; v3: a Cody-Waite reduction and two
 * scale factors). The eager kernels never use these (their contract is the library's few-ulp bounds);
 * a compiled kernel may, as torch.compile's Triton kernels (tl.exp on ex2.approx) and Kiln's own CUDA
 * kernels do. Where the library spends its operations is the reason: elementwise-4096 (sigmoid, tanh
 * and exp per element) was compute-bound on the H100 at 73-66% of copy bandwidth with v3 / v2, against
 * 98% with the builtins.
 *
 * What stays as in the library, whatever the implementation:
 * - NaN in gives NaN out, +-inf and +-0 the results torch gives (selected from the bits at the end,
 *   as SwiftShader's exp(NaN) is inf); overflow gives inf and underflow 0 (exp2's argument is clamped
 *   to [-127, 128], so no implementation sees an argument outside what it must round);
 * - every division has its divisor in [1, 2^27], where WGSL bounds division to 2.5 ulp;
 * - tanh below |x| = 0.55 is v2's odd polynomial (no exp2, no cancellation), as in v3.
 *
 * Two forms of 2^t (KILN_WEBGPU_FAST_MATH):
 * - exp2:    exp2(t) itself. WGSL bounds exp2 to 3 + 2|t| ulp, so with t = x log2 e rounded (|t| 1.32
 *            rho relative) e^x is within 3 + 4.2|x| ulp by the spec; NVIDIA's MUFU.EX2 is about 2
 *            ulp at every t, so there 2 + 1.3|x|, CUDA's __expf class.
 * - reduced: t = n + f, n = round(t) from the bits of t + 1.5 2^23 (v2's trick), f = t - n exact,
 *            2^f by exp2 (|f| <= 0.5: 4 ulp by the spec), times 2^(n - 1) (bits) times 2: 4 + 1.32|x|
 *            ulp by the spec on any implementation, for six operations more; results below 2^-125.5
 *            come out as 0 (n - 1 = -127 has no normal power of two), which a flush allows.
 * Bounds the tests hold (test/webgpu-fast-math.test.ts, on SwiftShader in CI and on the GPU): these,
 * with sigmoid (x < 0: e^x's bound plus 4 ulp; x >= 0: 6 ulp), silu (one product more) and tanh
 * (10 ulp: below 0.55 the polynomial, above 1 - 2 / (E + 1) with E = e^2a, where E's error reaches t
 * scaled by u = 2 / (E + 1) <= 0.5).
 */
import { LOG2E } from './exp-log.js';

/** The form of 2^t in the compiled kernels' fast math, or off (the library's exact forms). */
export type WgslFastMath = 'exp2' | 'reduced';

/** 2 log2 e, exact in float32 (LOG2E doubled). */
const TWO_LOG2E = '0x1.715476p1f';

/**
 * The library's names for fast form `m` (each form its own names, so one library holds both).
 * `unchecked`: the forms without their NaN check (`_nn`), for arguments whose NaN the kernel
 * restores at its stores instead (kernels/webgpu/fused/nan-hoist.ts); they equal the checked forms
 * bit for bit at every other argument.
 */
export function fastNames(m: WgslFastMath, unchecked = false): { exp: string; sigmoid: string; tanh: string; pow2: string } {
  const s = m === 'exp2' ? '' : '_r';
  const u = unchecked ? '_nn' : '';
  return { exp: `kiln_fexp${s}${u}`, sigmoid: `kiln_fsigmoid${s}${u}`, tanh: `kiln_ftanh${s}${u}`, pow2: `kiln_fpow2${s}` };
}

/** 2^t for t in [-127, 128] (clamped by the caller), in form m, declared as `name`. */
function pow2Core(m: WgslFastMath, name: string): string {
  if (m === 'exp2') return `fn ${name}(t: f32) -> f32 { return exp2(t); }`;
  return `// 2^t = 2^f 2^(n - 1) 2, n = round(t) from the bits of t + 1.5 2^23, f = t - n exact (|f| <= 0.5).
fn ${name}(t: f32) -> f32 {
  let b = bitcast<i32>(t + 0x1.8p23f);
  let n = bitcast<f32>((b & 0x7fffff) | 0x4b000000) - 0x1.8p23f;
  return exp2(t - n) * bitcast<f32>(max(b - 0x4b400000 + 126, 0) << 23u) * 2.0f;
}`;
}

/** Form m's exp, sigmoid and tanh, checked (NaN in gives that NaN out) or unchecked (`_nn`: no check). */
function forms(m: WgslFastMath, unchecked: boolean): Record<string, string> {
  const n = fastNames(m, unchecked);
  const p = n.pow2;
  // The checked forms return x where it is NaN: the clamp, max and min before exp2 would turn it into a number.
  const ret = (v: string): string => (unchecked ? v : `select(${v}, x, kiln_isnan(x))`);
  return {
    ...(unchecked ? {} : { [p]: pow2Core(m, p) }),
    [n.exp]: `fn ${n.exp}(x: f32) -> f32 {
  return ${ret(`${p}(clamp(x * ${LOG2E}, -127.0f, 128.0f))`)};
}`,
    [n.sigmoid]: `// e = e^-|x| in (0, 1], r = 1 / (1 + e); e r for x < 0 (no cancellation, divisor in [1, 2]).
fn ${n.sigmoid}(x: f32) -> f32 {
  let e = ${p}(max(abs(x) * -${LOG2E}, -127.0f));
  let r = 1.0f / (1.0f + e);
  return ${ret('select(r, e * r, x < 0.0f)')};
}`,
    [n.tanh]: `// v2's polynomial below 0.55, 1 - 2 / (e^2a + 1) above (2a log2 e <= 26.3); both computed, one selected.
fn ${n.tanh}(x: f32) -> f32 {
  let a = min(abs(x), 9.1f);
  let z = a * a;
  let tp = a + a * z * kiln_tanh_poly(z);
  let t = select(1.0f - 2.0f / (${p}(a * ${TWO_LOG2E}) + 1.0f), tp, a < 0.55f);
  let s = bitcast<f32>(bitcast<u32>(t) | (bitcast<u32>(x) & 0x80000000u));
  return ${ret('s')};
}`,
  };
}

/** Every fast form's declarations by name (both forms; a kernel carries the ones it names). */
export const FAST_MATH_FORMS: Readonly<Record<string, string>> = { ...forms('exp2', false), ...forms('reduced', false), ...forms('exp2', true), ...forms('reduced', true) };
