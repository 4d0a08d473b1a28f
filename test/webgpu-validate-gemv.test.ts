/**
 * Compiles the skinny webgpu GEMM (gemv-codegen.ts) on Dawn's null backend, which needs no GPU and
 * offers shader-f16: every storage kind (f32, float16 native and packed, bfloat16 packed), row block
 * (1, 2, 4, 8) and epilogue (bias, beta); and its norm-prologue variant (gemv-norm.ts, the kernel
 * of llm.addRmsNormLinear). Dawn compiles the WGSL and creates the pipeline (types, uniformity of
 * the barriers, workgroup memory). Values: webgpu-gemv.test.ts and webgpu-add-rms-norm-linear.test.ts,
 * on a real adapter.
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
const N = await import('../src/kernels/webgpu/gemv-norm.js');

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

test('the norm-prologue GEMV (llm.addRmsNormLinear) compiles on Dawn for every storage kind, row block, epilogue, residual or none, subgroups or the tree, weight prefetch or not, and K of fewer / more words than invocations', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const limit = acc.bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384;
  assert.ok(acc.hasFeature('subgroups'), 'the null device offers subgroups');
  let n = 0;
  let skipped = 0;
  for (const kind of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const mr of [1, 2, 4, 8] as const) {
      for (const kv of [128, 33, 257]) {
        for (const [bias, gated, residual, subgroups, prefetch] of [[false, false, true, true, true], [true, true, true, false, true], [true, false, false, true, false], [false, true, false, false, false], [false, true, true, true, true]] as const) {
          // The host runs only variants whose workgroup memory fits (llm-add-rms-norm-linear.ts).
          if (N.gemvNormWorkgroupBytes(mr, kv, gated, G.GEMV_THREADS) > limit) {
            skipped++;
            continue;
          }
          const spec: GemvSpec = { kind, mr, bias, beta: false, gated, norm: { kv, residual, subgroups, prefetch } };
          acc.kernel(G.generateGemv(spec), `kiln.gemm (${G.gemvKey(spec)})`);
          n++;
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(n >= 100 && skipped > 0, `${n} compiled, ${skipped} over the workgroup memory`);
});

test('the GEMV with its K-following unroll (gemvUnroll) and team sums through subgroupAdd compiles on Dawn: plain, gated and norm-prologue, every row block', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const limit = acc.bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384;
  // The unroll follows K: 4 words a lane at K 1024 (float16), 12 at 3072, capped at 16 (8 gated).
  assert.deepEqual([1024, 2048, 3072, 8192].map((k) => G.gemvUnroll('f16', k, false, 0)), [4, 8, 12, 16]);
  assert.deepEqual([1024, 3072].map((k) => G.gemvUnroll('f16', k, true, 0)), [4, 8]);
  assert.equal(G.gemvUnroll('f32', 3072, false, 0), 16);
  assert.equal(G.gemvUnroll('f16', 3072, false, 4), 4);
  let n = 0;
  for (const kind of ['f32', 'f16', 'bf16p'] as StorageKind[]) {
    for (const mr of [1, 2, 8] as const) {
      for (const unroll of [8, 12, 16]) {
        for (const teamSubgroup of [true, false]) {
          for (const v of [{}, { gated: true }, { bias: true, beta: true }, { gated: true, norm: { kv: 128, residual: true, subgroups: true, prefetch: true } }] as const) {
            const gated = 'gated' in v;
            if ('norm' in v && N.gemvNormWorkgroupBytes(mr, 128, gated, G.GEMV_THREADS) > limit) continue;
            const spec: GemvSpec = { kind, mr, bias: false, beta: false, ...v, unroll: gated ? Math.min(unroll, 8) : unroll, teamSubgroup };
            const key = G.gemvKey(spec);
            assert.ok(key.includes(`u${spec.unroll}`) && key.includes(',tsg') === teamSubgroup, key);
            acc.kernel(G.generateGemv(spec), `kiln.gemm (${key})`);
            n++;
          }
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(n >= 100, `${n} compiled`);
});

test('the GEMV with 4 columns a workgroup (gemvCols) compiles on Dawn: plain, gated and norm-prologue, every row block, team sums both ways', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const limit = acc.bridge.adapter.limits.maxComputeWorkgroupStorageSize ?? 16384;
  assert.deepEqual([1024, 2048, 3072].map((n) => G.gemvCols(n, 2048)), [4, 4, 8]);
  assert.equal(G.gemvCols(1024, 0), 8, 'off by default');
  assert.equal(G.gemvThreads({ cols: 4 }), 128);
  let n = 0;
  for (const kind of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const mr of [1, 2, 4, 8] as const) {
      for (const teamSubgroup of [false, true]) {
        for (const v of [{}, { bias: true, beta: true }, { gated: true, bias: true }, { gated: true, norm: { kv: 257, residual: true, subgroups: true, prefetch: true } }, { norm: { kv: 33, residual: false, subgroups: false, prefetch: false } }] as const) {
          const gated = 'gated' in v;
          const norm = 'norm' in v ? v.norm : undefined;
          if (norm && N.gemvNormWorkgroupBytes(mr, norm.kv, gated, G.gemvThreads({ cols: 4 })) > limit) continue;
          const spec: GemvSpec = { kind, mr, bias: false, beta: false, ...v, cols: 4, teamSubgroup };
          const key = G.gemvKey(spec);
          assert.ok(key.endsWith(',c4'), key);
          acc.kernel(G.generateGemv(spec), `kiln.gemm (${key})`);
          n++;
        }
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.ok(n >= 120, `${n} compiled`);
});
