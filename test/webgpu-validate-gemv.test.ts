/**
 * Compiles the skinny webgpu GEMM (gemv-codegen.ts) on Dawn's null backend, which needs no GPU and
 * offers shader-f16: every storage kind (f32, float16 native and packed, bfloat16 packed), row block
 * (1, 2, 4, 8) and epilogue (bias, beta). Dawn compiles the WGSL and creates the pipeline (types,
 * uniformity of the barriers, workgroup memory). Values: webgpu-gemv.test.ts, on a real adapter.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { dawnSkipReason } from './helpers/dawn.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { StorageKind } from '../src/kernels/webgpu/storage.js';
import type { GemvSpec } from '../src/kernels/webgpu/gemv-codegen.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const G = await import('../src/kernels/webgpu/gemv-codegen.js');

test('the skinny GEMM compiles on Dawn for every storage kind, row block and epilogue', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const kinds: StorageKind[] = ['f32', 'f16p', 'bf16p', ...(acc.hasFeature('shader-f16') ? (['f16'] as const) : [])];
  assert.ok(kinds.includes('f16'), 'the null device offers shader-f16');
  let n = 0;
  for (const kind of kinds) {
    for (const mr of [1, 2, 4, 8] as const) {
      for (const [bias, beta] of [[false, false], [true, false], [false, true], [true, true]] as const) {
        const spec: GemvSpec = { kind, mr, bias, beta };
        acc.kernel(G.generateGemv(spec), `kiln.gemm (${G.gemvKey(spec)})`);
        n++;
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 64);
});
