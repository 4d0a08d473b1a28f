/**
 * Compiles the staged float16 subgroup matrix GEMM (gemm-subgroup-matrix-staged.ts) on Dawn's null
 * backend (no GPU; it offers chromium-experimental-subgroup-matrix with shader-f16): every operand
 * layout (row-major / transposed A and B: four tile layouts and row_major / col_major matrix loads),
 * the bias and beta epilogues, for the matrix shapes real adapters list and subgroups of 32 (NVIDIA);
 * and the planner's tiles (whole words per invocation, within the workgroup-memory limit). Values are checked on a GPU with the feature: webgpu-subgroup-matrix.test.ts
 * with KILN_WEBGPU_SM_KERNEL=staged.
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
  assert.deepEqual(p, { ...base, tm: 4, tn: 4, ks: 2 });
  assert.equal(ST.stagedTileM(p!), 128);
  assert.equal(ST.stagedTileN(p!), 128);
  assert.ok(ST.stagedWorkgroupBytes(p!) <= 32768);
  // 16 KiB: the same tiles with K steps of 16.
  const small = ST.planStaged(base, { maxInvocations: 1024, maxWorkgroupBytes: 16384 });
  assert.deepEqual(small, { ...base, tm: 4, tn: 4, ks: 1 });
  assert.ok(ST.stagedWorkgroupBytes(small!) <= 16384);
  const smaller = ST.planStaged(base, { maxInvocations: 1024, maxWorkgroupBytes: 12288 });
  assert.ok(smaller !== null && ST.stagedWorkgroupBytes(smaller) <= 12288 && smaller.tm * smaller.tn < 16);
  assert.equal(ST.planStaged(base, { maxInvocations: 64, maxWorkgroupBytes: 32768 }), null);
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
          for (const [bias, beta] of [[false, false], [true, false], [false, true]] as const) {
            const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias, beta };
            acc.kernel(ST.generateStagedGemm(spec, plan), `kiln.gemm (${ST.stagedKey(spec, plan)})`);
            n++;
          }
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(n >= 36);
});
