/**
 * KILN_WEBGPU_REDUCE_REGISTERS (fused/render.ts residentLoads / residentPass): 'workgroup'
 * reductions whose row fits in the registers of one workgroup (at most 8 elements per invocation
 * by default) load it once and compute every pass from registers. A different summation order than
 * another form is legitimate, so the values are checked against float64 references on the host,
 * within a tolerance derived from the dtype (its rounding unit at the store, plus float32
 * accumulation over the row), never against another form's bits. Covered: row lengths from 1 to
 * 4099 (1 and 3 run one row per invocation; 2049 and past fall back at 256 invocations), odd
 * lengths, 1 and 3 rows, float32 / float16 / bfloat16, with and without subgroups (an adapter that
 * has them is also run with the feature hidden), the option on and off; ops: sum, amax, argmax
 * with ties, softmax (two levels), llm.rmsNorm, layerNorm, the compiled residual add + RMSNorm (two
 * full-size outputs). The sources are checked to be the register form where the row fits and the
 * loop where it does not. Skips without a real adapter (the null backend computes nothing;
 * webgpu-validate.test.ts compiles the same kernels there).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { getOption, setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpu } from '../src/kernels/webgpu/device.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const dev = 'webgpu';
type FDT = 'float32' | 'float16' | 'bfloat16';

/** The dtype's unit roundoff (half an ulp at 1). */
const UNIT: Record<FDT, number> = { float32: 2 ** -24, float16: 2 ** -11, bfloat16: 2 ** -8 };

/**
 * Allowed |got - want| for a result of magnitude `scale` (the sum of the magnitudes that made it,
 * for a sum; the value's own for a norm): the output's rounding twice (once where the kernel rounds
 * an intermediate to the dtype, as a compiled add stores its sum), and float32 accumulation error
 * over a row of n (a loose n * 2^-24 bound; kernels accumulate in f32 whatever the dtype).
 */
const tolerance = (dt: FDT, n: number, scale: number): number => (4 * UNIT[dt] + (n + 8) * 2 ** -24) * (scale + 1e-3);

const f64 = (t: Tensor): number[] => t.to('cpu').to('float64').toFlatArray() as number[];

/** Inputs rounded to dt, on webgpu, and their float64 values. */
function input(shape: number[], dt: FDT, scale = 1): { t: Tensor; v: number[] } {
  const t = kiln.mul(kiln.randn(shape), scale).to(dt).to(dev);
  return { t, v: f64(t) };
}

function rowsOf(v: number[], n: number): number[][] {
  return Array.from({ length: v.length / n }, (_, r) => v.slice(r * n, r * n + n));
}

function assertClose(got: number[], want: number[], scale: number[], dt: FDT, n: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const tol = tolerance(dt, n, scale[i]!);
    if (!(Math.abs(got[i]! - want[i]!) <= tol)) assert.fail(`${what}: element ${i} got ${got[i]} want ${want[i]} (|diff| ${Math.abs(got[i]! - want[i]!)} > tolerance ${tol})`);
  }
}

/** Float64 references of one row. */
const ref = {
  sum: (x: number[]) => ({ v: x.reduce((a, b) => a + b, 0), s: x.reduce((a, b) => a + Math.abs(b), 0) }),
  rms: (x: number[], w: number[], eps: number) => {
    const r = 1 / Math.sqrt(x.reduce((a, b) => a + b * b, 0) / x.length + eps);
    return { v: x.map((xi, i) => xi * r * w[i]!), s: x.map((xi, i) => Math.abs(xi * r * w[i]!)) };
  },
  layer: (x: number[], w: number[], eps: number) => {
    const m = x.reduce((a, b) => a + b, 0) / x.length;
    const vr = x.reduce((a, b) => a + (b - m) * (b - m), 0) / x.length;
    const r = 1 / Math.sqrt(vr + eps);
    // The scale: the centred value's magnitude before the subtraction's cancellation.
    return { v: x.map((xi, i) => (xi - m) * r * w[i]!), s: x.map((xi, i) => (Math.abs(xi) + Math.abs(m)) * r * Math.abs(w[i]!)) };
  },
  softmax: (x: number[]) => {
    const mx = Math.max(...x);
    const e = x.map((xi) => Math.exp(xi - mx));
    const z = e.reduce((a, b) => a + b, 0);
    return { v: e.map((ei) => ei / z), s: e.map((ei) => ei / z) };
  },
};

/** Runs f with the kernel sources captured. */
function withSources<T>(f: () => T): { value: T; sources: string[] } {
  const acc = webgpu();
  const orig = acc.kernel.bind(acc);
  const sources: string[] = [];
  acc.kernel = (source: string, label: string) => {
    sources.push(source);
    return orig(source, label);
  };
  try {
    return { value: f(), sources };
  } finally {
    acc.kernel = orig;
  }
}

/** Runs f with the adapter's `subgroups` feature hidden (the renderer's tree reductions). */
function withoutSubgroups<T>(f: () => T): T {
  const acc = webgpu();
  const orig = acc.hasFeature.bind(acc);
  acc.hasFeature = (name: string) => name !== 'subgroups' && orig(name);
  try {
    return f();
  } finally {
    acc.hasFeature = orig;
  }
}

const hasSubgroups = skip === false && webgpu().hasFeature('subgroups');
const LENGTHS = [1, 3, 33, 255, 257, 1000, 1024, 1531, 2048, 2049, 2500, 4099];

/** Checks every op over [rows, n] in dt against float64. */
function checkShape(rows: number, n: number, dt: FDT): void {
  const what = `[${rows}, ${n}] ${dt} registers=${getOption('KILN_WEBGPU_REDUCE_REGISTERS')}`;
  const x = input([rows, n], dt);
  const w = input([n], dt);
  const xr = rowsOf(x.v, n);
  kiln.noGrad(() => {
    const s = xr.map(ref.sum);
    assertClose(f64(kiln.sum(x.t, 1)), s.map((r) => r.v), s.map((r) => r.s), dt, n, `sum ${what}`);
    assert.deepEqual(f64(kiln.amax(x.t, 1)), xr.map((r) => Math.max(...r)), `amax ${what}`);
    // Ties: values rounded to halves repeat; the first index among equals wins.
    const xt = input([rows, n], dt, 2);
    const tied = kiln.round(xt.t);
    const tv = rowsOf(f64(tied), n);
    assert.deepEqual(f64(kiln.argmax(tied, 1).to('int32')), tv.map((r) => r.indexOf(Math.max(...r))), `argmax ${what}`);
    const sm = xr.map(ref.softmax);
    assertClose(f64(kiln.softmax(x.t, 1)), sm.flatMap((r) => r.v), sm.flatMap((r) => r.s), dt, n, `softmax ${what}`);
    const rm = xr.map((r) => ref.rms(r, w.v, 1e-6));
    assertClose(f64(kiln.llm.rmsNorm(x.t, w.t, 1e-6)), rm.flatMap((r) => r.v), rm.flatMap((r) => r.s), dt, n, `llm.rmsNorm ${what}`);
    const ln = xr.map((r) => ref.layer(r, w.v, 1e-5));
    assertClose(f64(kiln.nn.functional.layerNorm(x.t, [n], w.t, null, 1e-5)), ln.flatMap((r) => r.v), ln.flatMap((r) => r.s), dt, n, `layerNorm ${what}`);
  });
}

test('register-resident workgroup reductions match float64 (lengths, dtypes, option on and off)', { skip }, () => {
  kiln.manualSeed(31);
  for (const registers of [8, 0]) {
    setOption('KILN_WEBGPU_REDUCE_REGISTERS', registers);
    try {
      for (const dt of ['float32', 'float16', 'bfloat16'] as const) {
        for (const n of registers === 8 ? LENGTHS : [3, 1000, 2500]) for (const rows of n > 1024 ? [3] : [1, 3]) checkShape(rows, n, dt);
      }
    } finally {
      setOption('KILN_WEBGPU_REDUCE_REGISTERS', undefined);
    }
  }
});

test('register-resident reductions without subgroups (workgroup-memory trees) match float64', { skip }, () => {
  kiln.manualSeed(32);
  withoutSubgroups(() => {
    for (const dt of ['float32', 'float16'] as const) for (const n of [1, 257, 1024, 2048, 2500]) checkShape(n > 1024 ? 1 : 3, n, dt);
  });
});

test('rows that fit render the register form; longer rows the loop', { skip }, () => {
  kiln.manualSeed(33);
  const fits = (n: number): string[] =>
    withSources(() => {
      // Pipelines are memoised by structure (eps is part of it): an eps of its own renders afresh.
      const x = kiln.randn([1, n], { device: dev });
      kiln.noGrad(() => kiln.llm.rmsNorm(x, kiln.ones([n], { device: dev }), 1e-6 + n * 1e-9).to('cpu'));
    }).sources;
  const src1024 = fits(1024);
  assert.ok(src1024.some((s) => /var x\d+_3: f32;/.test(s) && !/var x\d+_4: f32;/.test(s)), 'a [1, 1024] row: 4 registers per input per invocation');
  assert.ok(
    src1024.every((s) => !/for \(var j = lid;/.test(s)),
    'no strided loop over the row',
  );
  const src2500 = fits(2500);
  assert.ok(src2500.some((s) => /for \(var j = lid; j < N; j = j \+ 256u\)/.test(s)), 'a 2500 row (over 8 x 256): the strided loop');
  assert.ok(src2500.every((s) => !/var x\d+_0: f32;/.test(s)), 'no registers for a 2500 row');
});

test('compiled residual add + RMSNorm (two full-size outputs) in registers matches float64', { skip }, () => {
  kiln.manualSeed(34);
  const rendered: string[] = [];
  for (const dt of ['float16', 'float32', 'bfloat16'] as const) {
    for (const n of [1024, 1000, 3000]) {
      for (const sub of hasSubgroups ? [true, false] : [false]) {
        const run = (): void => {
          const x = input([1, n], dt);
          const r = input([1, n], dt);
          const w = input([n], dt);
          // A fresh function per case: the options are part of the program's kernels' keys.
          const f = kiln.compile((p: Tensor, q: Tensor, g: Tensor) => {
            const s = kiln.add(p, q);
            return [kiln.nn.functional.rmsNorm(s, [n], g, 1e-6), s];
          });
          const { value, sources } = withSources(() => kiln.noGrad(() => (f(x.t, r.t, w.t) as Tensor[]).map(f64)));
          const [normed, sum] = value;
          const s = x.v.map((xi, i) => xi + r.v[i]!);
          const what = `add + rmsNorm [1, ${n}] ${dt}${sub ? '' : ' (no subgroups)'}`;
          assertClose(sum!, s, s.map((v, i) => Math.abs(x.v[i]!) + Math.abs(r.v[i]!) + Math.abs(v)), dt, n, `${what}: the sum`);
          const want = ref.rms(s, w.v, 1e-6);
          // The sum is rounded to dt before (eager) or after (compiled) the norm: one more rounding of its inputs.
          assertClose(normed!, want.v, want.s, dt, n, `${what}: the norm`);
          // Pipelines are memoised by structure: the first case of a structure renders it.
          rendered.push(...sources);
        };
        if (sub) run();
        else withoutSubgroups(run);
      }
    }
  }
  // Two full-size outputs (the sum and the norm) stored from registers, where a structure was rendered here.
  if (rendered.length > 0) assert.ok(rendered.some((s) => /var x\d+_3: f32;/.test(s) && /if \(jv < N\) \{ b1\[/.test(s)), 'the compiled add + rmsNorm rendered in registers');
});
