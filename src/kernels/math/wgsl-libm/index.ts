/**
 * Kiln's float32 math library in WGSL: every helper the WGSL math table (../wgsl.ts) calls, one
 * WGSL declaration per name, and the selection of those a kernel's source uses.
 *
 * Why Kiln computes its own elementary functions: WGSL gives them little accuracy (sin and cos
 * 2^-11 absolute on [-pi, pi] and nothing outside, exp 3 + 2|x| ulp, log 2^-21 absolute near 1,
 * atan2 4096 ulp, tanh 1e-5 absolute) and any value outside their domain (log of a negative
 * number, sqrt at 0), and an implementation may assume that NaN and infinity never occur. NVIDIA's
 * Vulkan driver gave the answers Kiln's tests expect; SwiftShader (Chromium's CPU Vulkan, which
 * Kiln's CI runs WebGPU on) gave log1p(-2) = 0, exp(NaN) = inf, sin(1) 1.5e-4 off. Kiln's functions
 * are a few ulp on every float32 input (test/webgpu-math.test.ts measures them against float64),
 * with torch's results at the edges (NaN, +-inf, +-0), on any implementation that rounds + - *
 * correctly, as WGSL requires. They rely on nothing else:
 * - no fused multiply-add (WGSL's fma may be unfused): products that must be exact are of
 *   operands split into 12-bit halves by bit masks, or of constants with few significant bits;
 * - no error-free two-sum: WGSL allows reassociation, and SwiftShader's compiler does it (it folds
 *   (x - ((1 + x) - 1)) to 0), so exact parts come from masks and integer arithmetic instead;
 * - NaN, infinity and signs are read from the bits (kiln_isnan, kiln_signbit), never from
 *   comparisons or from 0 * x, which a compiler that ignores signed zeros folds to 0;
 * - constants are hexadecimal float literals, exact in f32 (a decimal one is rounded either way);
 * - divisions keep the divisor within [2^-126, 2^126], where WGSL bounds their error (2.5 ulp);
 * - subnormals may be flushed to zero (WGSL allows it; SwiftShader does), which changes results
 *   only where inputs, results or intermediate factors are below 2^-126.
 * What remains assumed: a chain of subtractions such as Cody-Waite's r - k P1 - k P2 - ... is not
 * regrouped into r - k (P1 + P2 + ...), which no compiler Kiln's tests ran on did. The cost is a
 * few to a few tens of ALU operations per element, on kernels that are memory-bound on a GPU.
 */
import { ARITH } from './arith.js';
import { EXP_LOG } from './exp-log.js';
import { FAST_MATH_FORMS } from './fast.js';
import { IEEE_HELPERS } from './ieee.js';
import { SPECIAL } from './special.js';
import { TRIG } from './trig.js';
import { FAST_FORMS, V1_FORMS } from './v1.js';
import { V3_FORMS } from './v3.js';
import { getOption } from '../../../runtime/config.js';

/**
 * Every declaration of the library by name (functions, the reduction's struct and table), with the
 * compiled kernels' fast forms (fast.ts), which only a template under a fast context names.
 */
export const WGSL_LIBM: ReadonlyMap<string, string> = new Map(Object.entries({ ...IEEE_HELPERS, ...EXP_LOG, ...TRIG, ...SPECIAL, ...ARITH, ...FAST_MATH_FORMS }));

/**
 * The library's forms (KILN_WEBGPU_MATH): v2 the current, v1 the forms before issue #20, v3 exp and
 * tanh on WGSL's exp2 over a reduced range with spec-derived bounds (v3.ts), fast a diagnostic (v1.ts).
 */
export type WgslMathForm = 'v2' | 'v1' | 'v3' | 'fast';

/** The form kernels render with now (KILN_WEBGPU_MATH; read at every render, so a process can switch it). */
export const wgslMathForm = (): WgslMathForm => getOption('KILN_WEBGPU_MATH');

/**
 * What a kernel cache key adds for the math form: nothing for the default (keys stay as they were),
 * else '|m' and the form, so that pipelines rendered under different forms in one process differ.
 */
export const wgslMathKey = (): string => (wgslMathForm() === 'v2' ? '' : `|m${wgslMathForm()}`);

const LIBMS: Record<WgslMathForm, ReadonlyMap<string, string>> = {
  v2: WGSL_LIBM,
  v1: new Map([...WGSL_LIBM, ...Object.entries(V1_FORMS)]),
  v3: new Map([...WGSL_LIBM, ...Object.entries(V3_FORMS)]),
  fast: new Map([...WGSL_LIBM, ...Object.entries(FAST_FORMS)]),
};

/** The library's declarations in form `form`. */
export const wgslLibm = (form: WgslMathForm = wgslMathForm()): ReadonlyMap<string, string> => LIBMS[form];

const NAME = /\bkiln_[a-z0-9_]+\b/g;

/** The library's names that `code` mentions. */
function mentioned(code: string, lib: ReadonlyMap<string, string>): string[] {
  return [...new Set(code.match(NAME) ?? [])].filter((n) => lib.has(n));
}

/**
 * The declarations `code` uses, with everything they use in turn, in library order (WGSL lets
 * module-scope declarations refer to later ones). A kernel carries only these, so that shader
 * compilation does not pay for the whole library.
 */
export function wgslLibmFor(code: string, form: WgslMathForm = wgslMathForm()): string {
  const lib = wgslLibm(form);
  const need = new Set<string>();
  const stack = mentioned(code, lib);
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (need.has(n)) continue;
    need.add(n);
    stack.push(...mentioned(lib.get(n)!, lib));
  }
  return [...lib].filter(([n]) => need.has(n)).map(([, text]) => text).join('\n');
}
