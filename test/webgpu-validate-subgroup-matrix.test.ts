/**
 * Compiles the float16 subgroup matrix GEMM (gemm-subgroup-matrix.ts) on Dawn's null backend, which
 * needs no GPU and offers chromium-experimental-subgroup-matrix with shader-f16 (but lists no matrix
 * configurations, so runGemm never picks the kernel there): every layout (row-major / transposed
 * operands), bias and beta epilogue, for the shapes real adapters list (16x16x16, 16x8x16, 8x8x8) and
 * the plans the planner makes from them. Dawn compiles the WGSL and creates the pipeline, which
 * checks the extension's syntax, the matrix types and builtins, uniformity and Dawn's rule that the
 * workgroup's x size is a multiple of the device's largest subgroup size (128 on the null device).
 * Values are checked where an adapter has the feature: webgpu-subgroup-matrix.test.ts.
 */
import assert from 'node:assert/strict';
import { dawnSkipReason } from './helpers/dawn.js';
import test from 'node:test';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { GemmSpec } from '../src/kernels/webgpu/gemm-codegen.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const SM = await import('../src/kernels/webgpu/gemm-subgroup-matrix.js');

const skip = dawnSkipReason();

test('the subgroup matrix GEMM compiles on Dawn for every layout, epilogue and listed shape', { skip }, (t) => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const a = acc.bridge.adapter;
  if (!a.features.includes('chromium-experimental-subgroup-matrix') || !a.features.includes('shader-f16')) {
    t.skip(`the null device lacks chromium-experimental-subgroup-matrix or shader-f16 (features: ${a.features.join(', ')})`);
    return;
  }
  const sg = a.subgroupMaxSize ?? 0;
  assert.ok(sg > 0, 'the adapter reports its subgroup size');
  let n = 0;
  for (const [M, N, K] of [
    [16, 16, 16],
    [16, 8, 16],
    [8, 8, 8],
  ] as const) {
    const plan = SM.planSubgroupMatrix({ ...a, subgroupMinSize: sg, subgroupMatrixConfigs: [{ componentType: 'f16', resultComponentType: 'f32', M, N, K }] });
    assert.ok(!('reason' in plan), JSON.stringify(plan));
    for (const aMajor of ['k', 'm'] as const) {
      for (const bMajor of ['n', 'k'] as const) {
        for (const [bias, beta] of [[false, false], [true, false], [false, true]] as const) {
          const spec: GemmSpec = { a: 'f16', b: 'f16', c: 'f16', aMajor, bMajor, bias, beta };
          acc.kernel(SM.generateSubgroupMatrixGemm(spec, plan), `sm ${SM.smKey(spec, plan)}`);
          n++;
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 36);
});
