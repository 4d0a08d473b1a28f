/**
 * Compiles the staged float16 subgroup matrix GEMM (gemm-subgroup-matrix-staged.ts) on Dawn's null
 * backend (no GPU; it offers chromium-experimental-subgroup-matrix with shader-f16): every operand
 * layout (row-major / transposed A and B: four tile layouts and row_major / col_major matrix loads),
 * the bias and beta epilogues, the split-K partial sums (planner's plan and its 64 x 64 form), for
 * the matrix shapes real adapters list and subgroups of 32 (NVIDIA);
 * and the planner's tiles (whole words per invocation, within the workgroup-memory limit); the
 * KILN_WEBGPU_SM_PLAN parser and plan checks; and the experimental plans (2 x 4 / 4 x 2 / 4 x 4
 * subgroups, 4 x 8 matrices per subgroup, K steps of 16 to 64, stages 0 and 2, workgroup bands) in
 * every layout and epilogue, also as the emulation that webgpu-sm-emulated.test.ts runs. Plans over
 * the null device's limits (16 KiB of workgroup memory, 256 invocations) are validated as WGSL and
 * must fail pipeline creation on that limit alone. Values are checked on a GPU with the feature
 * (webgpu-subgroup-matrix.test.ts, scripts/device/wggemm-sweep.sh) and, emulated, on SwiftShader.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { dawnSkipReason } from './helpers/dawn.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { GemmSpec } from '../src/kernels/webgpu/gemm-codegen.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const SM = await import('../src/kernels/webgpu/gemm-subgroup-matrix.js');
const ST = await import('../src/kernels/webgpu/gemm-subgroup-matrix-staged.js');

test('the staged planner takes 4 x 4 matrices per subgroup (128 x 128 tiles) where they fit, smaller where not', () => {
  const base = { m: 16, n: 16, k: 16, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 };
  const p = ST.planStaged(base, { maxInvocations: 1024, maxWorkgroupBytes: 32768 });
  assert.deepEqual(p, { ...base, tm: 4, tn: 4, ks: 2, stages: 1, group: 1, refill: 'halves' });
  assert.equal(ST.stagedTileM(p!), 128);
  assert.equal(ST.stagedTileN(p!), 128);
  assert.ok(ST.stagedWorkgroupBytes(p!) <= 32768);
  // 16 KiB: the same tiles with K steps of 16.
  const small = ST.planStaged(base, { maxInvocations: 1024, maxWorkgroupBytes: 16384 });
  assert.deepEqual(small, { ...base, tm: 4, tn: 4, ks: 1, stages: 1, group: 1, refill: 'halves' });
  assert.ok(ST.stagedWorkgroupBytes(small!) <= 16384);
  const smaller = ST.planStaged(base, { maxInvocations: 1024, maxWorkgroupBytes: 12288 });
  assert.ok(smaller !== null && ST.stagedWorkgroupBytes(smaller) <= 12288 && smaller.tm * smaller.tn < 16);
  assert.equal(ST.planStaged(base, { maxInvocations: 64, maxWorkgroupBytes: 32768 }), null);
});

const words = (p: import('../src/kernels/webgpu/gemm-subgroup-matrix-staged.js').StagedPlan) => ({ ...p, refill: 'words' as const });

test('the word refill declares its tiles as one untyped buffer with word and float16 views (and the halves form, the emulation and stages 0 none)', () => {
  const base = { m: 16, n: 16, k: 16, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 };
  const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor: 'k', bMajor: 'n', bias: false, beta: false };
  const w = ST.parseStagedPlan('2,2,4,4,2,refill=words', base);
  const src = ST.generateStagedGemm(spec, w);
  assert.match(src, /var<workgroup> Ts: buffer<\d+>;/);
  assert.match(src, /bufferView<array<vec4<u32>>>\(&Ts, 0\)/);
  assert.match(src, /Aw\[[^\]]+\] = pa0;/);
  assert.doesNotMatch(src, /kiln_put_a|var<workgroup> As/);
  assert.match(ST.stagedKey(spec, w), /\.rw,/);
  for (const [p, opts] of [[{ ...w, refill: 'halves' as const }, {}], [ST.parseStagedPlan('2,2,4,4,2,stages=0,refill=words', base), {}]] as const) {
    const s = ST.generateStagedGemm(spec, p, opts);
    assert.doesNotMatch(s, /buffer<|bufferView/);
    assert.doesNotMatch(ST.stagedKey(spec, p, opts), /\.rw/);
  }
  const emu = ST.parseStagedPlan('2,2,4,4,2,refill=words', { ...base, m: 8, n: 8, k: 8, sg: 4 });
  const espec: GemmSpec = { ...spec, a: 'f16p', b: 'f16p', c: 'f16p' };
  assert.doesNotMatch(ST.generateStagedGemm(espec, emu, { emulate: true }), /buffer<|bufferView/);
});

test('the staged subgroup matrix GEMM compiles on Dawn for every layout, epilogue and listed shape', { skip: dawnSkipReason() }, (t) => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const a = acc.bridge.adapter;
  if (!a.features.includes('chromium-experimental-subgroup-matrix') || !a.features.includes('shader-f16')) {
    t.skip(`the null device lacks chromium-experimental-subgroup-matrix or shader-f16 (features: ${a.features.join(', ')})`);
    return;
  }
  const limits = { maxInvocations: a.limits.maxComputeInvocationsPerWorkgroup ?? 256, maxWorkgroupBytes: a.limits.maxComputeWorkgroupStorageSize ?? 16384 };
  let n = 0;
  // Subgroups of 32 (NVIDIA): 128 invocations, within the null device's 256 (its own size, 128, needs 512).
  for (const sg of [32]) {
    for (const [M, N, K] of [
      [16, 16, 16],
      [16, 8, 16],
      [8, 8, 8],
    ] as const) {
      const base = SM.planSubgroupMatrix({ ...a, subgroupMinSize: sg, subgroupMaxSize: sg, subgroupMatrixConfigs: [{ componentType: 'f16', resultComponentType: 'f32', M, N, K }] });
      assert.ok(!('reason' in base), JSON.stringify(base));
      const plan = ST.planStaged(base, limits);
      assert.ok(plan !== null, `a staged plan for ${M}x${N}x${K}, subgroup ${sg}`);
      for (const aMajor of ['k', 'm'] as const) {
        for (const bMajor of ['n', 'k'] as const) {
          // (The ReLU epilogue is conv2dBatchNorm's, with the BatchNorm's shift as the bias.)
          // Both refills (16-byte words through an untyped buffer's views, or 8 float16 each).
          for (const fill of [plan, words(plan)]) {
            for (const [bias, beta, relu] of [[false, false, false], [true, false, false], [false, true, false], [true, false, true]] as const) {
              const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias, beta, relu };
              acc.kernel(ST.generateStagedGemm(spec, fill), `kiln.gemm (${ST.stagedKey(spec, fill)})`);
              n++;
            }
            // llm.linearGelu's epilogue, both forms (the math library's gelu functions appended).
            for (const gelu of ['none', 'tanh'] as const) {
              const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias: true, beta: false, gelu };
              acc.kernel(ST.generateStagedGemm(spec, fill), `kiln.gemm (${ST.stagedKey(spec, fill)})`);
              n++;
            }
            // A conv input read in place (GemmSpec.aConv: row-major A words through im2col addresses), with conv2dBatchNorm's epilogue.
            if (aMajor === 'k' && bMajor === 'k') {
              const conv: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias: true, beta: false, relu: true, aConv: true };
              acc.kernel(ST.generateStagedGemm(conv, fill), `kiln.gemm (${ST.stagedKey(conv, fill)})`);
              // (kh, kw, c) stepped by carries from one K step to the next (KILN_WEBGPU_CONV_CARRY).
              const carry: GemmSpec = { ...conv, aConvCarry: true };
              acc.kernel(ST.generateStagedGemm(carry, fill), `kiln.gemm (${ST.stagedKey(carry, fill)})`);
              n += 2;
            }
            // Split K: raw f32 sums per K slice, on the planner's plan and its 64 x 64 form (small products, linalg.ts).
            for (const p of [fill, { ...fill, tm: 2, tn: 2 }]) {
              const part: GemmSpec = { a: 'f16', b: 'f16', c: 'f32', aMajor, bMajor, bias: false, beta: false, partial: true };
              acc.kernel(ST.generateStagedGemm(part, p), `kiln.gemm (${ST.stagedKey(part, p)})`);
              n++;
            }
          }
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(n >= 184);
});

test('KILN_WEBGPU_SM_PLAN strings parse to plans, and bad ones fail naming the variable and the field', () => {
  const base = { m: 16, n: 16, k: 16, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 };
  assert.deepEqual(ST.parseStagedPlan('2,4,4,4,1', base), { ...base, sgm: 2, sgn: 4, tm: 4, tn: 4, ks: 1, stages: 1, group: 1, refill: 'halves' });
  assert.deepEqual(ST.parseStagedPlan(' 4, 2, 8, 4, 2, stages=2, group=8', base), { ...base, sgm: 4, sgn: 2, tm: 8, tn: 4, ks: 2, stages: 2, group: 8, refill: 'halves' });
  assert.deepEqual(ST.parseStagedPlan('2,2,4,4,1,group=4,stages=0', base), { ...base, sgm: 2, sgn: 2, tm: 4, tn: 4, ks: 1, stages: 0, group: 4, refill: 'halves' });
  assert.deepEqual(ST.parseStagedPlan('2,2,4,4,2,refill=words', base), { ...base, sgm: 2, sgn: 2, tm: 4, tn: 4, ks: 2, stages: 1, group: 1, refill: 'words' });
  // The caller's default (KILN_WEBGPU_SM_REFILL) where the string names none, the string's where it does.
  assert.equal(ST.parseStagedPlan('2,2,4,4,2', base, 'words').refill, 'words');
  assert.equal(ST.parseStagedPlan('2,2,4,4,2,refill=halves', base, 'words').refill, 'halves');
  const bad: [string, RegExp][] = [
    ['2,2,4,4', /4 fields/],
    ['2,2,4,x,1', /tn must be an integer, got "x"/],
    ['2,2,0,4,1', /tm must be in 1\.\.16, got 0/],
    ['2,2,4,4,1,stages=3', /stages must be in 0\.\.2, got 3/],
    ['2,2,4,4,1,db', /unknown field "db"/],
    ['2,2,4,4,1,group=2,group=4', /group given twice/],
    ['2,2,4,4,1,refill=bytes', /refill must be one of halves, words, got "bytes"/],
  ];
  for (const [text, why] of bad) {
    assert.throws(() => ST.parseStagedPlan(text, base), (e: Error) => e instanceof RangeError && e.message.startsWith(`KILN_WEBGPU_SM_PLAN="${text}"`) && why.test(e.message) && e.message.includes('sgm,sgn,tm,tn,ks'), text);
  }
});

test('stagedPlanProblem says why a plan does not fit: invocations, workgroup memory, uneven words', () => {
  const base = { m: 16, n: 16, k: 16, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 };
  const big = { maxInvocations: 1024, maxWorkgroupBytes: 49152 };
  const plan = (t: string) => ST.parseStagedPlan(t, base);
  assert.equal(ST.stagedPlanProblem(plan('2,2,4,4,2'), big), null);
  // Two buffers of 128 x 32 tiles: 2 * 20480 + 4096 bytes.
  assert.equal(ST.stagedWorkgroupBytes(plan('2,2,4,4,2,stages=2')), 45056);
  assert.equal(ST.stagedPlanProblem(plan('2,2,4,4,2,stages=2'), big), null);
  assert.match(ST.stagedPlanProblem(plan('2,2,4,4,2,stages=2'), { ...big, maxWorkgroupBytes: 32768 }) ?? '', /45056 bytes of workgroup memory, over the device's 32768/);
  // Stages 0 keeps only the epilogue scratch.
  assert.equal(ST.stagedWorkgroupBytes(plan('2,2,4,4,2,stages=0')), 4096);
  assert.match(ST.stagedPlanProblem(plan('4,4,2,2,2'), { ...big, maxInvocations: 256 }) ?? '', /4 x 4 subgroups of 32 invocations make 512, over the device's 256/);
  // 2 x 2 subgroups of 1 x 1 matrices: 32 x 32 tiles, 32 x 16 / 8 = 64 words of A per K step over 128 invocations.
  assert.match(ST.stagedPlanProblem(plan('2,2,1,1,1'), big) ?? '', /64 \+ 64 tile words per K step do not split evenly over 128 invocations/);
  // ... which stages 0 does not load as words.
  assert.equal(ST.stagedPlanProblem(plan('2,2,1,1,1,stages=0'), big), null);
});

/** The experimental plans (scripts/device/wggemm-sweep.mjs runs these and more on an H200). */
const EXPERIMENTS = [
  '2,2,4,4,2,stages=2',
  '2,2,4,4,1,stages=2,group=8',
  '2,4,4,4,1',
  '4,2,4,4,2,stages=2',
  '4,4,2,2,2',
  '2,2,4,8,1',
  '2,2,8,4,4',
  '2,2,4,4,2,group=8',
  '2,2,4,4,1,stages=0',
  '2,4,2,4,2,stages=0,group=4',
  '2,2,4,4,2,refill=words',
  '2,2,4,4,2,stages=2,refill=words',
];

test('the experimental staged plans compile on Dawn in every layout and epilogue (over the null limits: WGSL validated, pipeline refused on the limit only)', { skip: dawnSkipReason() }, (t) => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const a = acc.bridge.adapter;
  if (!a.features.includes('chromium-experimental-subgroup-matrix') || !a.features.includes('shader-f16')) {
    t.skip(`the null device lacks chromium-experimental-subgroup-matrix or shader-f16 (features: ${a.features.join(', ')})`);
    return;
  }
  const limits = { maxInvocations: a.limits.maxComputeInvocationsPerWorkgroup ?? 256, maxWorkgroupBytes: a.limits.maxComputeWorkgroupStorageSize ?? 16384 };
  let full = 0;
  let wgslOnly = 0;
  const compile = (source: string, label: string, fits: boolean): void => {
    try {
      // (stagedWorkgroupBytes is an upper bound over the layouts: a plan over it may still compile.)
      acc.kernel(source, label);
      full++;
    } catch (e) {
      const msg = (e as Error).message;
      assert.ok(!fits, `${label}: ${msg}`);
      // Only the limit: the shader module itself was valid WGSL.
      assert.match(msg, /does not compile:\n(The total use of workgroup storage \(\d+ bytes\) is larger than the maximum allowed \(16384 bytes\)|Entry-point uses workgroup_size\(\d+, 1, 1\) that exceeds the maximum allowed \(256, 256, 64\))\.\n - While initializing \[ComputePipeline [^\n]*\]$/, label);
      wgslOnly++;
    }
  };
  for (const [m, n, k] of [
    [16, 16, 16],
    [8, 8, 8],
  ] as const) {
    const base = { m, n, k, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 };
    for (const text of EXPERIMENTS) {
      const plan = ST.parseStagedPlan(text, base);
      // Emulated kernels run on SwiftShader with 8 x 8 x 8 matrices and subgroups of 4 (webgpu-sm-emulated.test.ts).
      const emu = ST.parseStagedPlan(text, { ...base, m: 8, n: 8, k: 8, sg: 4 });
      for (const aMajor of ['k', 'm'] as const) {
        for (const bMajor of ['n', 'k'] as const) {
          for (const [bias, beta] of [[false, false], [true, true]] as const) {
            const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias, beta };
            compile(ST.generateStagedGemm(spec, plan), `kiln.gemm (${ST.stagedKey(spec, plan)})`, ST.stagedPlanProblem(plan, limits) === null);
            if (bias && plan.stages !== 0) {
              const part: GemmSpec = { ...spec, c: 'f32', bias: false, beta: false, partial: true };
              compile(ST.generateStagedGemm(part, plan), `kiln.gemm (${ST.stagedKey(part, plan)})`, ST.stagedPlanProblem(plan, limits) === null);
            }
            if (m === 8 && bias) {
              const espec: GemmSpec = { ...spec, a: 'f16p', b: 'f16p', c: 'f16p' };
              compile(ST.generateStagedGemm(espec, emu, { emulate: true }), `kiln.gemm (${ST.stagedKey(espec, emu, { emulate: true })})`, ST.stagedPlanProblem(emu, limits, { emulate: true }) === null);
            }
          }
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(full >= 40 && wgslOnly >= 40, `${full} compiled, ${wgslOnly} validated as WGSL only`);
});
