/**
 * The float16 subgroup matrix GEMM (gemm-subgroup-matrix.ts): the planner's choices from adapter
 * reports (runs everywhere), and values of float16 matmul / linear / addmm against a float64
 * reference where the device has chromium-experimental-subgroup-matrix (an NVIDIA GPU through Dawn's
 * Vulkan backend with the toggles of dawn-options.ts); elsewhere (SwiftShader has no subgroup
 * matrices) the value test skips and says why. Shapes are ragged (not multiples of any tile), with
 * transposed operands, a batch and the bias / beta epilogues. The staged kernel
 * (KILN_WEBGPU_SM_KERNEL=staged, gemm-subgroup-matrix-staged.ts) runs the same checks in all four
 * operand layouts on sizes that are multiples of 8 (its 16-byte words) but not of its tiles.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { pickConfig, planSubgroupMatrix, smWorkgroupBytes } from '../src/kernels/webgpu/gemm-subgroup-matrix.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { setOption } from '../src/runtime/config.js';
import { closeF16, randnF16, webgpuSkipReason } from './helpers/webgpu.js';

const NVIDIA_LIKE = {
  features: ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix'],
  limits: { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024, maxComputeWorkgroupStorageSize: 49152 },
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  subgroupMatrixConfigs: [
    { componentType: 'f16', resultComponentType: 'f16', M: 16, N: 16, K: 16 },
    { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 8, K: 16 },
    { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 },
    { componentType: 'u8', resultComponentType: 'u32', M: 16, N: 16, K: 32 },
  ],
};

test('the subgroup matrix planner picks f16 x f16 -> f32 tiles that fit, or says why not', () => {
  assert.deepEqual(pickConfig(NVIDIA_LIKE.subgroupMatrixConfigs), { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 });
  const p = planSubgroupMatrix(NVIDIA_LIKE);
  assert.ok(!('reason' in p));
  assert.deepEqual(p, { m: 16, n: 16, k: 16, sg: 32, sgm: 2, sgn: 2, tm: 2, tn: 4, ks: 2 });
  assert.ok(smWorkgroupBytes(p) <= 16384);
  const small = planSubgroupMatrix({ ...NVIDIA_LIKE, limits: { ...NVIDIA_LIKE.limits, maxComputeWorkgroupStorageSize: 12288 } });
  assert.ok(!('reason' in small) && smWorkgroupBytes(small) <= 12288);
  const why = (r: ReturnType<typeof planSubgroupMatrix>): string => ('reason' in r ? r.reason : 'planned');
  assert.match(why(planSubgroupMatrix({ ...NVIDIA_LIKE, features: ['shader-f16'] })), /no chromium-experimental-subgroup-matrix/);
  assert.match(why(planSubgroupMatrix({ ...NVIDIA_LIKE, subgroupMatrixConfigs: [] })), /no float16 x float16 -> float32/);
  assert.match(why(planSubgroupMatrix({ ...NVIDIA_LIKE, subgroupMinSize: 8 })), /not fixed/);
});

test('float16 matmul, linear and addmm on subgroup matrices (v1) match float64', { skip: webgpuSkipReason() }, async (t) => {
  const { subgroupMatrixPlan } = await import('../src/kernels/webgpu/linalg.js');
  const plan = subgroupMatrixPlan();
  if ('reason' in plan) {
    t.skip(`this device has no usable subgroup matrices: ${plan.reason}`);
    return;
  }
  // The first kernel; staged (the default) has its own test below.
  setOption('KILN_WEBGPU_SM_KERNEL', 'v1');
  t.after(() => setOption('KILN_WEBGPU_SM_KERNEL', undefined));
  kiln.manualSeed(3);
  const close = closeF16;
  const h = randnF16;
  const wide = (x: Tensor): Tensor => x.to('float64');
  for (const [M, N, K] of [
    [1, 1, 1],
    [37, 53, 71],
    [130, 200, 96],
  ]) {
    const a = h([M, K]);
    const b = h([K, N]);
    close(kiln.matmul(a.to('webgpu'), b.to('webgpu')), kiln.matmul(wide(a), wide(b)), `mm ${M}x${N}x${K}`);
    close(kiln.matmul(a.t().contiguous().to('webgpu').t(), b.to('webgpu')), kiln.matmul(wide(a), wide(b)), `mm A^T ${M}x${N}x${K}`);
    const wgt = h([N, K]);
    const bias = h([N]);
    close(kiln.nn.functional.linear(a.to('webgpu'), wgt.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(a), wide(wgt), wide(bias)), `linear ${M}x${N}x${K}`);
    const c = h([M, N]);
    close(kiln.addmm(c.to('webgpu'), a.to('webgpu'), b.to('webgpu'), 0.5, 2), kiln.addmm(wide(c), wide(a), wide(b), 0.5, 2), `addmm ${M}x${N}x${K}`);
  }
  const ba = h([3, 33, 40]);
  const bb = h([3, 40, 17]);
  close(kiln.bmm(ba.to('webgpu'), bb.to('webgpu')), kiln.bmm(wide(ba), wide(bb)), 'bmm 3x33x17x40');
});

test('float16 products on the staged subgroup matrix GEMM (KILN_WEBGPU_SM_KERNEL=staged) match float64 in every operand layout, with either tile refill', { skip: webgpuSkipReason() }, async (t) => {
  const { gemmPipelineKeys, subgroupMatrixPlan } = await import('../src/kernels/webgpu/linalg.js');
  const { setOption } = await import('../src/runtime/config.js');
  const plan = subgroupMatrixPlan();
  if ('reason' in plan) {
    t.skip(`this device has no usable subgroup matrices: ${plan.reason}`);
    return;
  }
  setOption('KILN_WEBGPU_SM_KERNEL', 'staged');
  try {
    // KILN_WEBGPU_SM_REFILL: 8 float16 stores a word, or one store through an untyped buffer's word view.
    for (const refill of ['halves', 'words'] as const) {
      setOption('KILN_WEBGPU_SM_REFILL', refill);
      kiln.manualSeed(5);
      const close = (got: Tensor, want: Tensor, label: string): void => {
        const g = got.to('cpu').to('float64').toFlatArray() as number[];
        const w = want.toFlatArray() as number[];
        assert.equal(g.length, w.length, label);
        for (let i = 0; i < w.length; i++) assert.ok(Math.abs(g[i]! - w[i]!) <= 2e-2 + 4e-3 * Math.abs(w[i]!), `${label}: element ${i} got ${g[i]}, want ${w[i]}`);
      };
      const h = (shape: number[]): Tensor => kiln.randn(shape).to('float16');
      const wide = (x: Tensor): Tensor => x.to('float64');
      // Multiples of 8 (the staged kernel's words) that leave partial 128 x 128 tiles and K steps.
      for (const [M, N, K] of [
        [16, 8, 8],
        [136, 200, 88],
        [264, 136, 520],
      ]) {
        const a = h([M, K]);
        const b = h([K, N]);
        const want = kiln.matmul(wide(a), wide(b));
        close(kiln.matmul(a.to('webgpu'), b.to('webgpu')), want, `mm ${M}x${N}x${K}`);
        close(kiln.matmul(a.t().contiguous().to('webgpu').t(), b.to('webgpu')), want, `mm A^T ${M}x${N}x${K}`);
        close(kiln.matmul(a.to('webgpu'), b.t().contiguous().to('webgpu').t()), want, `mm B^T ${M}x${N}x${K}`);
        close(kiln.matmul(a.t().contiguous().to('webgpu').t(), b.t().contiguous().to('webgpu').t()), want, `mm A^T B^T ${M}x${N}x${K}`);
        const wgt = h([N, K]);
        const bias = h([N]);
        close(kiln.nn.functional.linear(a.to('webgpu'), wgt.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(a), wide(wgt), wide(bias)), `linear ${M}x${N}x${K}`);
        const c = h([M, N]);
        close(kiln.addmm(c.to('webgpu'), a.to('webgpu'), b.to('webgpu'), 0.5, 2), kiln.addmm(wide(c), wide(a), wide(b), 0.5, 2), `addmm ${M}x${N}x${K}`);
      }
      const ba = h([3, 40, 48]);
      const bb = h([3, 48, 24]);
      close(kiln.bmm(ba.to('webgpu'), bb.to('webgpu')), kiln.bmm(wide(ba), wide(bb)), 'bmm 3x40x24x48');
      const keys = gemmPipelineKeys().filter((k) => k.startsWith('smstaged') && k.includes('.rw,') === (refill === 'words'));
      for (const layout of ['kn', 'mn', 'kk', 'mk']) assert.ok(keys.some((k) => k.includes(`,${layout},`)), `the staged kernel (${refill}) ran with layout ${layout} (compiled: ${keys.join(' ')})`);
      assert.ok(keys.some((k) => k.endsWith(',bias,')) && keys.some((k) => k.endsWith(',beta')), `the staged epilogues (${refill}) ran (compiled: ${keys.join(' ')})`);
    }
  } finally {
    setOption('KILN_WEBGPU_SM_KERNEL', undefined);
    setOption('KILN_WEBGPU_SM_REFILL', undefined);
  }
});

test('float16 small products (64x64 tiles, split K), float16 conv2d and conv2dBatchNorm through im2col on the staged GEMM match float64', { skip: webgpuSkipReason() }, async (t) => {
  const { gemmPipelineKeys, subgroupMatrixPlan } = await import('../src/kernels/webgpu/linalg.js');
  const plan = subgroupMatrixPlan();
  if ('reason' in plan) {
    t.skip(`this device has no usable subgroup matrices: ${plan.reason}`);
    return;
  }
  kiln.manualSeed(6);
  const { closeF16, randnF16 } = await import('./helpers/webgpu.js');
  const wide = (x: Tensor): Tensor => x.to('float64');
  // A 128-token prefill's down projection (8 K slices), the 64-row MLP, a 64-column product.
  for (const [M, N, K] of [
    [128, 1024, 3072],
    [64, 512, 512],
    [520, 64, 264],
  ] as const) {
    const x = randnF16([M, K]);
    const w = randnF16([N, K]);
    const bias = randnF16([N]);
    closeF16(kiln.nn.functional.linear(x.to('webgpu'), w.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(x), wide(w), wide(bias)), `linear ${M}x${N}x${K}`);
  }
  // The conv-stack's layers, small: 7x7 stride 2 over 3 channels (K 147, padded to 152), 3x3 over 64.
  for (const [C, k, s, p] of [
    [3, 7, 2, 3],
    [64, 3, 1, 1],
  ] as const) {
    const x = randnF16([2, C, 20, 18]);
    const w = randnF16([64, C, k, k]);
    const b = randnF16([64]);
    const want = kiln.nn.functional.conv2d(wide(x), wide(w), wide(b), s, p);
    closeF16(kiln.nn.functional.conv2d(x.to('webgpu').contiguous('channelsLast'), w.to('webgpu'), b.to('webgpu'), s, p), want, `conv2d C${C} ${k}x${k} s${s}`);
  }
  // conv2dBatchNorm folded into the same route (conv-bn.ts), ReLU in the GEMM's epilogue.
  const { CONV_BN_CASES, convBnInputs, convBnReference, convBnWebgpu } = await import('./helpers/conv-bn.js');
  for (const c of CONV_BN_CASES) {
    const inputs = convBnInputs(c);
    closeF16(convBnWebgpu(c, inputs), convBnReference(c, inputs), `conv2dBatchNorm ${c.label}`);
  }
  // Every GEMM pipeline of the process: the test before this one may already have built the same
  // 64x64-tile kernels (its small products split K too), so keys new to this test can be none.
  const keys = gemmPipelineKeys();
  assert.ok(keys.some((k) => k.startsWith('smstaged') && k.includes('.2x2.') && k.endsWith(',partial')), `split K ran on 64x64 tiles (compiled: ${keys.join(' ')})`);
  assert.ok(keys.some((k) => k.startsWith('combine,f16,bias')), `the combine added the bias (compiled: ${keys.join(' ')})`);
  assert.ok(keys.some((k) => k.startsWith('smstaged') && k.includes('x2.') && k.endsWith(',kk,bias,')), `a 64x64-tile product ran with the bias epilogue (compiled: ${keys.join(' ')})`);
  assert.ok(keys.some((k) => k.startsWith('smstaged') && k.endsWith(',kk,bias,,relu')), `a conv2dBatchNorm ran with the ReLU epilogue (compiled: ${keys.join(' ')})`);
  // The word refill (KILN_WEBGPU_SM_REFILL=words) on the split-K partial sums and the conv input gathered in place.
  const { setOption } = await import('../src/runtime/config.js');
  setOption('KILN_WEBGPU_SM_REFILL', 'words');
  try {
    const x = randnF16([64, 512]);
    const w = randnF16([512, 512]);
    const bias = randnF16([512]);
    closeF16(kiln.nn.functional.linear(x.to('webgpu'), w.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(x), wide(w), wide(bias)), 'linear 64x512x512, word refill');
    const cx = randnF16([2, 64, 20, 18]);
    const cw = randnF16([64, 64, 3, 3]);
    const cb = randnF16([64]);
    closeF16(kiln.nn.functional.conv2d(cx.to('webgpu').contiguous('channelsLast'), cw.to('webgpu'), cb.to('webgpu'), 1, 1), kiln.nn.functional.conv2d(wide(cx), wide(cw), wide(cb), 1, 1), 'conv2d C64 3x3, word refill');
    const rw = gemmPipelineKeys().filter((k) => k.startsWith('smstaged') && k.includes('.rw,'));
    assert.ok(rw.some((k) => k.endsWith(',partial')), `split K ran with the word refill (compiled: ${rw.join(' ')})`);
    assert.ok(rw.some((k) => /,convc?$/.test(k)), `the in-place conv gather ran with the word refill (compiled: ${rw.join(' ')})`);
  } finally {
    setOption('KILN_WEBGPU_SM_REFILL', undefined);
  }
});
