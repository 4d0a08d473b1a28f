/**
 * Issue #20, the math side: compiled elementwise-4096 on webgpu with each form of the WGSL math
 * library (KILN_WEBGPU_MATH, wgsl-libm/index.ts) side by side in one process:
 *   - v1:   the forms before issue #20 (exp with three early returns, round() and a clamped
 *           float-to-int conversion; tanh branching on |x| < 0.55, which a warp of normal data
 *           straddles, so it ran both sides);
 *   - v2:   the current forms (branch-free exp, n from the bits of x log2 e + 1.5 2^23, no
 *           conversion; tanh computing both sides and selecting), bit-identical to v1 on SwiftShader;
 *   - v3:   exp and tanh on WGSL's builtin exp2 over [-0.5, 0.5] after a Cody-Waite reduction, with
 *           bounds derived from WGSL's accuracy table (wgsl-libm/v3.ts), and branch-free float16
 *           store rounding (the same bits as v2's): opt-in until this A/B;
 *   - fast: a diagnostic, WGSL's builtin exp/tanh, plain division and pack2x16float stores (outside
 *           the library's bounds): what the kernel runs at when the exact math costs nothing;
 *   - FORM+exp2, FORM+reduced: the library's form FORM with the compiled kernels' fast float math
 *           (KILN_WEBGPU_FAST_MATH, wgsl-libm/fast.ts: exp, sigmoid, silu and tanh on WGSL's exp2,
 *           with the spec-derived bounds of test/webgpu-fast-math.test.ts). A plain FORM runs with
 *           the fast math off, so it measures the library as before.
 * Rows per dtype: the copy (copyBufferToBuffer, the reference), x.clone() (the vectorised one-node
 * copy kernel: its float16 stores round with kiln_f16_bits, branch-free under v3, pack2x16float under fast), and the
 * compiled call under each form. Each figure is device time (kiln.Event) of `--calls` calls queued
 * back to back divided by the calls, median of `--reps` batches alternating variant by variant;
 * GB/s counts bytes read + written. Each compiled form's output is checked against float64: the
 * largest absolute error against the workload in float64 (`max abs`), and the largest deviation, in
 * ulps of the dtype at max(|y|, 1), from the workload computed as the kernel does (float32 operations, each
 * rounded) with exact sigmoid, tanh and exp (`dev ulp@1`): the math library's share of the error.
 *
 *   node dist/bench/webgpu-elementwise-math.js [--n 4096] [--dtypes float32,float16]
 *        [--forms v1,v2,v3,fast,v2+exp2,v2+reduced] [--steps 1,2,4] [--calls 20] [--reps 15] [--dump DIR] [--json out.json]
 *
 * --steps: KILN_WEBGPU_VEC_STEPS values (vectors an invocation loads before computing; default 1),
 * each a clone and a compiled variant of every form (`x<steps>` in the variant's name).
 */
import fs from 'node:fs';
import path from 'node:path';
import * as kiln from '../src/index.js';
import { deviceMsPerCall } from './webgpu-device-ms.js';
import { elementwiseForward } from '../src/bench/workloads.js';
import type { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import type { WgslFastMath } from '../src/kernels/math/wgsl-libm/fast.js';
import type { WgslMathForm } from '../src/kernels/math/wgsl-libm/index.js';
import { setOption } from '../src/runtime/config.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { DType } from '../src/tensor/dtype.js';
import { itemSize } from '../src/tensor/dtype.js';
import { castValue } from '../src/tensor/typed.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const n = Number(flag('--n') ?? 4096);
const dtypes = (flag('--dtypes') ?? 'float32,float16').split(',') as DType[];
/** A variant's math: the library's form, and the compiled kernels' fast math ('off' for a plain form). */
interface MathVariant {
  readonly name: string;
  readonly form: WgslMathForm;
  readonly fast: WgslFastMath | 'off';
}
const forms = (flag('--forms') ?? 'v1,v2,v3,fast,v2+exp2,v2+reduced').split(',').map((name): MathVariant => {
  const [form, fast] = name.split('+') as [WgslMathForm, (WgslFastMath | undefined)?];
  return { name, form, fast: fast ?? 'off' };
});
const stepsList = (flag('--steps') ?? '1').split(',').map(Number);
const calls = Number(flag('--calls') ?? 20);
const reps = Number(flag('--reps') ?? 15);
const dump = flag('--dump');
const jsonOut = flag('--json');

const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;

/**
 * fn run with math variant `v` and `steps` vectors per invocation step (KILN_WEBGPU_VEC_STEPS);
 * pipelines are memoised per form, fast math and steps, so each call must see its own.
 */
function withForm<T>(v: MathVariant, fn: () => T, steps = 1): T {
  setOption('KILN_WEBGPU_MATH', v.form);
  setOption('KILN_WEBGPU_FAST_MATH', v.fast);
  setOption('KILN_WEBGPU_VEC_STEPS', steps);
  try {
    return fn();
  } finally {
    setOption('KILN_WEBGPU_MATH', undefined);
    setOption('KILN_WEBGPU_FAST_MATH', undefined);
    setOption('KILN_WEBGPU_VEC_STEPS', undefined);
  }
}
const V2: MathVariant = { name: 'v2', form: 'v2', fast: 'off' };
/** A variant's name: `steps` shown where it is not 1. */
const named = (base: string, steps: number): string => (steps === 1 ? base : `${base} x${steps}`);

const deviceMs = (fns: (() => void)[]): number[] => deviceMsPerCall(fns, reps, calls);

const sigmoid64 = (v: number): number => (v >= 0 ? 1 / (1 + Math.exp(-v)) : Math.exp(v) / (1 + Math.exp(v)));
/** elementwiseForward in float64. */
const ref64 = (v: number): number => {
  const y = Math.max(v * 1.5 + 0.5, 0) * sigmoid64(v) + Math.tanh(v * 0.5) - Math.exp(-v * v) * 0.1;
  return y * 2 - 1;
};
/**
 * elementwiseForward as the kernel computes it (float32 operations, each rounded; the constant 0.1
 * rounded to the dtype first, as the compiled graph does; the result rounded to the dtype) with
 * sigmoid, tanh and exp exact (float64, rounded once): its difference from the kernel's output is
 * what the math library's errors contribute, apart from the rounding of the chain itself.
 */
function chain(v: number, dt: DType): number {
  const f = Math.fround;
  const v3 = Math.max(f(f(v * 1.5) + 0.5), 0);
  const v8 = f(f(v3 * f(sigmoid64(v))) + f(Math.tanh(f(v * 0.5))));
  const v13 = f(v8 - f(f(Math.exp(-f(v * v))) * f(castValue(0.1, dt))));
  return castValue(f(f(v13 * 2) - 1), dt);
}
/** One ulp in `dt` of max(|v|, 1): the unit of the deviation from `chain` (its terms are of order 1 or more). */
function ulpAtLeastOne(v: number, dt: DType): number {
  const mant = dt === 'float16' ? 10 : dt === 'bfloat16' ? 7 : 23;
  return 2 ** (Math.floor(Math.log2(Math.max(Math.abs(v), 1))) - mant);
}

interface Row {
  dtype: DType;
  variant: string;
  ms: number;
  gbs: number;
  of_copy: number;
  /** Largest |output - chain(x)| in ulps of the dtype at max(|chain(x)|, 1) (the library's share of the error). */
  dev_ulp1?: number;
  /** Largest |output - ref64(x)|. */
  max_abs?: number;
}
const rows: Row[] = [];
const props = acc.properties(0);
console.log(JSON.stringify({ device: props.name, backend: props.backend, features: acc.bridge.adapter.features, n, calls, reps, forms: forms.map((v) => v.name) }));

for (const dtype of dtypes) {
  const x = kiln.randn([n, n]).to(dtype).to('webgpu');
  const xs = x.to('cpu').toFlatArray() as number[];
  const bytes = 2 * x.numel() * itemSize(dtype);
  const dst = kiln.empty([n, n], { dtype, device: 'webgpu' });
  const accuracy = new Map<string, { dev_ulp1: number; max_abs: number }>();
  const variants: [string, () => void][] = [['copy (copyBufferToBuffer)', () => acc.copyDeviceToDevice(dst.storage.buffer, 0, x.storage.buffer, 0, x.numel() * itemSize(dtype))]];
  // The clone differs between forms only in float16's store rounding (fast: pack2x16float).
  const storeForms = [...new Set(forms.map((v) => v.form))].filter((f) => f !== 'v2');
  for (const form of dtype === 'float16' ? storeForms : []) variants.push([`clone (${form})`, () => void withForm({ name: form, form, fast: 'off' }, () => x.clone())]);
  for (const steps of stepsList) variants.push([named('clone', steps), () => void withForm(V2, () => x.clone(), steps)]);
  for (const form of forms) for (const steps of stepsList) {
    const variant = named(`compiled ${form.name}`, steps);
    const f = kiln.compile(elementwiseForward, { name: `ew-math-${form.name}-${dtype}-x${steps}` });
    // First call under the form: renders and compiles its kernel; then its error against float64.
    const out = withForm(form, () => kiln.noGrad(() => f(x)), steps);
    const got = out.to('cpu').toFlatArray() as number[];
    let dev = 0;
    let maxAbs = 0;
    for (let i = 0; i < got.length; i++) {
      maxAbs = Math.max(maxAbs, Math.abs(got[i]! - ref64(xs[i]!)));
      const c = chain(xs[i]!, dtype);
      dev = Math.max(dev, Math.abs(got[i]! - c) / ulpAtLeastOne(c, dtype));
    }
    out.dispose();
    const a = { dev_ulp1: Number(dev.toFixed(2)), max_abs: Number(maxAbs.toExponential(3)) };
    accuracy.set(variant, a);
    console.log(JSON.stringify({ dtype, form: form.name, steps, check: 'compiled output vs float64', ...a }));
    variants.push([variant, () => void withForm(form, () => kiln.noGrad(() => f(x)), steps)]);
    if (dump !== undefined) {
      const program = f.programs().inference[0] as WgslProgram | undefined;
      fs.mkdirSync(dump, { recursive: true });
      for (const s of program?.seed().sources ?? []) fs.writeFileSync(path.join(dump, `${dtype}-${form.name}-x${steps}${/\|v\d/.test(s.memo) ? '-vec' : '-scalar'}.wgsl`), `// ${s.memo}\n${s.source}\n`);
    }
  }
  const ms = deviceMs(variants.map((v) => v[1]));
  const copyMs = ms[0]!;
  variants.forEach(([variant], k) => {
    const row: Row = { dtype, variant, ms: Number(ms[k]!.toFixed(4)), gbs: Number((bytes / ms[k]! / 1e6).toFixed(1)), of_copy: Number((copyMs / ms[k]!).toFixed(3)), ...accuracy.get(variant) };
    rows.push(row);
    console.log(JSON.stringify(row));
  });
  x.dispose();
  dst.dispose();
}

console.log('');
console.log(`${'dtype'.padEnd(9)} ${'variant'.padEnd(32)} ${'ms'.padStart(8)} ${'GB/s'.padStart(8)} ${'of copy'.padStart(8)} ${'dev ulp'.padStart(9)} ${'max abs'.padStart(10)}`);
for (const r of rows) {
  console.log(
    `${r.dtype.padEnd(9)} ${r.variant.padEnd(32)} ${r.ms.toFixed(4).padStart(8)} ${r.gbs.toFixed(1).padStart(8)} ${`${(100 * r.of_copy).toFixed(1)}%`.padStart(8)} ${(r.dev_ulp1 === undefined ? '' : r.dev_ulp1.toFixed(2)).padStart(9)} ${(r.max_abs === undefined ? '' : r.max_abs.toExponential(2)).padStart(10)}`,
  );
}
if (jsonOut) fs.writeFileSync(jsonOut, `${JSON.stringify({ device: props.name, n, calls, reps, forms: forms.map((v) => v.name), steps: stepsList, rows }, null, 1)}\n`);
process.exit(0);
