/**
 * The compiled webgpu kernels' fast float math (KILN_WEBGPU_FAST_MATH, wgsl-libm/fast.ts): exp,
 * sigmoid, silu and tanh of a kernel kiln.compile fuses, in each form (exp2, reduced), against
 * float64 over a sweep of magnitudes and signs, with the bounds that follow from WGSL's accuracy
 * table (fast.ts's header): in float32 ulp, exp 3 + 4.2|x| (exp2) or 4 + 1.32|x| (reduced), sigmoid
 * that plus 4 below 0 and 6 above, silu one more, tanh 10; float16 and bfloat16 results within one
 * ulp of the float64 value. At NaN, +-inf and +-0 every form gives what the cpu gives (torch's
 * results, signed zeros included). Results below 1e-30 may come back as zero (a flush, as WGSL
 * allows). Also, without an adapter: the table renders the fast names only under a fast context,
 * and with the option off a compiled kernel computes exp and tanh as the eager one does.
 *
 * Needs an adapter that computes for the numeric tests: SwiftShader in CI, Dawn/Vulkan on the GPU.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { WGSL_TEMPLATES } from '../src/kernels/math/wgsl.js';
import { fastNames, type WgslFastMath } from '../src/kernels/math/wgsl-libm/fast.js';
import { setOption } from '../src/runtime/config.js';
import { castValue } from '../src/tensor/typed.js';
import type { WgslProgram } from '../src/compile/codegen/wgsl/program.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const FORMS: readonly WgslFastMath[] = ['exp2', 'reduced'];
/**
 * Below this a result may come back as zero: subnormals may be flushed (WGSL allows it; SwiftShader
 * does), also where a product with one is normal (silu(-88.8) = -88.8 x 2.7e-39), as in the CUDA
 * fast math test.
 */
const TINY = 1e-30;

/** One float32 ulp at |v| (that of the smallest normal below it). */
function ulp32(v: number): number {
  const a = Math.max(Math.abs(Math.fround(v)), 2 ** -126);
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}
/** One ulp of float16 / bfloat16 at |v|. */
function ulp16(v: number, dt: DType): number {
  const [mant, minExp] = dt === 'float16' ? [10, -14] : [7, -126];
  return 2 ** (Math.max(Math.floor(Math.log2(Math.abs(v))), minExp) - mant);
}

const sigmoid64 = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));
/** Bound of e^x in float32 ulp, per form. */
const expUlp = (m: WgslFastMath, x: number): number => (m === 'exp2' ? 3 + 4.2 * Math.abs(x) : 4 + 1.32 * Math.abs(x));
const sigmoidUlp = (m: WgslFastMath, x: number): number => (x < 0 ? expUlp(m, x) + 4 : 6);

interface Case {
  readonly name: 'exp' | 'sigmoid' | 'silu' | 'tanh';
  readonly fn: (x: Tensor) => Tensor;
  readonly ref: (x: number) => number;
  readonly ulp: (m: WgslFastMath, x: number) => number;
}
const CASES: readonly Case[] = [
  { name: 'exp', fn: (x) => kiln.exp(x), ref: Math.exp, ulp: expUlp },
  { name: 'sigmoid', fn: (x) => kiln.sigmoid(x), ref: sigmoid64, ulp: sigmoidUlp },
  { name: 'silu', fn: (x) => kiln.nn.functional.silu(x), ref: (x) => x * sigmoid64(x), ulp: (m, x) => sigmoidUlp(m, x) + 1 },
  { name: 'tanh', fn: (x) => kiln.tanh(x), ref: Math.tanh, ulp: () => 10 },
];

/** A sweep of magnitudes (sinh of a uniform grid: dense near 0, out to 2000) and both signs, around each form's switches. */
function inputs(): number[] {
  const xs = [1e-30, 1e-8, 1e-4, 0.5499, 0.55, 0.5501, 1, 2.5, 9, 9.1, 15, 20, 40, 80, 87, 87.5, 88, 88.5, 88.7, 88.8, 89, 100, 103, 104, 1e4];
  for (let i = 0; i < 400; i++) xs.push(Math.sinh((i - 200) / 24));
  return [...xs, ...xs.map((x) => -x)].map(Math.fround);
}
const EDGES = [Number.NaN, Infinity, -Infinity, 0, -0];

/**
 * fn compiled under fast form m (a fresh compile, so the program is rendered under m) and run on x;
 * the values, and the WGSL of the program's kernels (to see which forms it names).
 */
function compiledUnder(m: WgslFastMath | 'off', name: string, fn: (x: Tensor) => Tensor, x: Tensor): { values: number[]; wgsl: string } {
  setOption('KILN_WEBGPU_FAST_MATH', m);
  try {
    const f = kiln.compile(fn, { name });
    const values = kiln.noGrad(() => f(x.to('webgpu'))).to('cpu').toFlatArray() as number[];
    const program = f.programs().inference[0] as WgslProgram | undefined;
    return { values, wgsl: (program?.seed().sources ?? []).map((s) => s.source).join('\n') };
  } finally {
    setOption('KILN_WEBGPU_FAST_MATH', undefined);
  }
}
/** Whether a kernel source names form m's functions (or, for off, any fast function). */
const namesFast = (wgsl: string, m: WgslFastMath | 'off'): boolean => (m === 'off' ? /kiln_f(exp|sigmoid|tanh)/.test(wgsl) : Object.values(fastNames(m)).some((n) => new RegExp(`\\b${n}\\(`).test(wgsl)));

test('fast math: the table names the fast forms only under a fast context', () => {
  const x = [{ kind: 'value' as const, expr: 'v0', dtype: 'float32' as const, shape: [4] }];
  for (const op of ['exp', 'sigmoid', 'tanh', 'silu']) {
    const exact = WGSL_TEMPLATES.get(op)!(x, { out: 'float32' })!;
    assert.ok(!/kiln_f(exp|sigmoid|tanh)/.test(exact), `${op} exact: ${exact}`);
    for (const m of FORMS) {
      const fast = WGSL_TEMPLATES.get(op)!(x, { out: 'float32', fast: m })!;
      const n = fastNames(m);
      assert.ok(fast.includes(op === 'silu' ? n.sigmoid : n[op as 'exp' | 'sigmoid' | 'tanh']), `${op} ${m}: ${fast}`);
    }
  }
  // Composites keep the library's text (GELU's tanh form reads no fast name).
  const gelu = WGSL_TEMPLATES.get('gelu')!([...x, { kind: 'const', value: 'tanh' }], { out: 'float32', fast: 'exp2' });
  assert.ok(gelu !== null && !/kiln_f(exp|sigmoid|tanh)/.test(gelu), String(gelu));
});

for (const m of FORMS) {
  test(`fast math (${m}): compiled exp, sigmoid, silu and tanh in float32 within the spec's bounds of float64`, { skip }, () => {
    const xs = inputs();
    const failures: string[] = [];
    for (const c of CASES) {
      const r = compiledUnder(m, `fast-${m}-${c.name}`, c.fn, kiln.tensor(xs));
      assert.ok(namesFast(r.wgsl, m), `${c.name}: the compiled kernel does not use the ${m} form`);
      const got = r.values;
      let worst = 0;
      let at = -1;
      xs.forEach((x, i) => {
        const want = c.ref(x);
        const w32 = Math.fround(want);
        if (!Number.isFinite(w32)) {
          if (!Object.is(got[i], w32)) failures.push(`${c.name}(${x}) = ${got[i]}, want ${w32}`);
          return;
        }
        if (Math.abs(want) < TINY && got[i] === 0) return;
        const e = Math.abs(got[i]! - want) / ulp32(want) / c.ulp(m, x);
        if (e > worst) [worst, at] = [e, i];
      });
      if (worst > 1) failures.push(`${c.name}(${xs[at]}) = ${got[at]}, want ${c.ref(xs[at]!)}: ${(worst * c.ulp(m, xs[at]!)).toFixed(2)} ulp > ${c.ulp(m, xs[at]!).toFixed(1)}`);
    }
    assert.deepEqual(failures, []);
  });

  test(`fast math (${m}): compiled float16 and bfloat16 results within one ulp of float64`, { skip }, () => {
    const xs = inputs().filter((x) => Math.abs(x) <= 200);
    const failures: string[] = [];
    for (const dtype of ['float16', 'bfloat16'] as const) {
      for (const c of CASES) {
        const x = kiln.tensor(xs).to(dtype);
        const xin = x.toFlatArray() as number[];
        const got = compiledUnder(m, `fast-${m}-${c.name}-${dtype}`, c.fn, x).values;
        xin.forEach((v, i) => {
          const want = c.ref(v);
          const rounded = castValue(want, dtype);
          if (!Number.isFinite(rounded)) {
            if (!Object.is(got[i], rounded)) failures.push(`${dtype} ${c.name}(${v}) = ${got[i]}, want ${rounded}`);
            return;
          }
          if (Math.abs(want) < TINY && got[i] === 0) return;
          if (want === 0 ? got[i] !== 0 : Math.abs(got[i]! - want) > ulp16(want, dtype)) failures.push(`${dtype} ${c.name}(${v}) = ${got[i]}, want ${want}`);
        });
      }
    }
    assert.deepEqual(failures.slice(0, 10), []);
  });

  test(`fast math (${m}): at NaN, +-inf and +-0 the compiled kernels give what the cpu gives`, { skip }, () => {
    const failures: string[] = [];
    const show = (v: number): string => (Object.is(v, -0) ? '-0' : String(v));
    for (const c of CASES) {
      const got = compiledUnder(m, `fast-${m}-${c.name}-edges`, c.fn, kiln.tensor(EDGES)).values;
      const want = c.fn(kiln.tensor(EDGES)).toFlatArray() as number[];
      EDGES.forEach((x, i) => {
        if (!Object.is(got[i], want[i])) failures.push(`${c.name}(${show(x)}) = ${show(got[i]!)}, cpu ${show(want[i]!)}`);
      });
    }
    assert.deepEqual(failures, []);
  });
}

test('fast math: off, the compiled kernels compute with the library, as the eager ones always do', { skip }, () => {
  const xs = inputs();
  for (const c of CASES) {
    const eager = c.fn(kiln.tensor(xs).to('webgpu')).to('cpu').toFlatArray() as number[];
    const off = compiledUnder('off', `fast-off-${c.name}`, c.fn, kiln.tensor(xs));
    assert.ok(!namesFast(off.wgsl, 'off'), `${c.name}: a fast form with KILN_WEBGPU_FAST_MATH=off`);
    // float32 sigmoid and silu reach the renderer decomposed (ops/decompositions.ts: 1 / (1 + e^-x)),
    // so only exp and tanh are the eager kernel's own text.
    if (c.name === 'exp' || c.name === 'tanh') assert.deepEqual(off.values, eager, c.name);
  }
});
