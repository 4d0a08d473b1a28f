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
import { setOption } from '../src/runtime/config.js';
import { webgpu } from '../src/kernels/webgpu/device.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { checkAddRmsNorm, checkShape } from './helpers/reduce-reference.js';

const skip = webgpuSkipReason();
const dev = 'webgpu';
const hasSubgroups = skip === false && webgpu().hasFeature('subgroups');
const LENGTHS = [1, 3, 33, 255, 257, 1000, 1024, 1531, 2048, 2049, 2500, 4099];

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
        const what = `add + rmsNorm [1, ${n}] ${dt}${sub ? '' : ' (no subgroups)'}`;
        // Pipelines are memoised by structure: the first case of a structure renders it.
        const run = (): void => void rendered.push(...withSources(() => checkAddRmsNorm(n, dt, what)).sources);
        if (sub) run();
        else withoutSubgroups(run);
      }
    }
  }
  // Two full-size outputs (the sum and the norm) stored from registers, where a structure was rendered here.
  if (rendered.length > 0) assert.ok(rendered.some((s) => /var x\d+_3: f32;/.test(s) && /if \(jv < N\) \{ b1\[/.test(s)), 'the compiled add + rmsNorm rendered in registers');
});
