/**
 * Compiles the decode-step kernels of issue #20 on Dawn's null backend, which needs no GPU and
 * offers shader-f16 (SwiftShader, where the value tests run, has no f16): the split argmax /
 * argmin (argreduce-split.ts) for every storage kind, and the paged decode attention
 * (paged-attention-source.ts) for every storage kind, with and without the split scratch and the
 * 16-byte key loads, and the
 * gated GEMV of llm.linearSiluAndMul (gemv-codegen.ts) for every kind, row block and bias. Dawn
 * compiles the WGSL and creates the pipeline (types, uniformity of the barriers, workgroup memory).
 * llm.qkNormRotaryCache's kernel binds nine buffers, more than the null device's eight: its WGSL
 * is compiled as a shader module on a Dawn null device of this process (types and uniformity; no
 * pipeline, so no binding limit).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import { dawnSkipReason } from './helpers/dawn.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { StorageKind } from '../src/kernels/webgpu/storage.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const A = await import('../src/kernels/webgpu/argreduce-split.js');
const P = await import('../src/kernels/webgpu/paged-attention-source.js');
const { withPrelude } = await import('../src/kernels/math/wgsl-prelude.js');
const G = await import('../src/kernels/webgpu/gemv-codegen.js');

test('the split argmax / argmin kernels compile on Dawn for every storage kind', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  assert.ok(acc.hasFeature('shader-f16'), 'the null device offers shader-f16');
  let n = 0;
  for (const x of ['f32', 'f16', 'f16p', 'bf16p', 'i32', 'u8p'] as StorageKind[]) {
    for (const kind of ['argmax', 'argmin'] as const) {
      acc.kernel(withPrelude(A.splitArgPartSource(kind, x)), `kiln.${kind}.split.part.${x}`);
      acc.kernel(withPrelude(A.splitArgFinalSource(kind, x)), `kiln.${kind}.split.final.${x}`);
      n += 2;
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 24);
});

test('the paged decode attention kernels compile on Dawn for every storage kind', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  let n = 0;
  for (const x of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const [d, hg] of [[128, 2], [64, 1], [256, 4]] as const) {
      for (const partial of [false, true]) {
        for (const vecK of [false, true]) {
          acc.kernel(withPrelude(P.pagedSplitSource({ x, table: 'int32', lens: 'int32', d, hg, vecK }, partial)), `kiln.paged.${partial ? 'split' : 'decode'}.${x}.${d}.${hg}${vecK ? '.vk' : ''}`);
          n++;
        }
      }
    }
    for (const lens of ['int32', 'int64'] as const) {
      acc.kernel(withPrelude(P.pagedCombineSource(x, 128, lens)), `kiln.paged.combine.${x}.${lens}`);
      n++;
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 56);
});

test('the gated GEMV (llm.linearSiluAndMul) compiles on Dawn for every storage kind, row block and bias', { skip: dawnSkipReason() }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  let n = 0;
  for (const kind of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const mr of [1, 2, 4, 8] as const) {
      for (const bias of [false, true]) {
        const spec = { kind, mr, bias, beta: false, gated: true };
        acc.kernel(G.generateGemv(spec), `kiln.gemm (${G.gemvKey(spec)})`);
        n++;
      }
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 32);
});

test("llm.qkNormRotaryCache's kernel compiles as a shader module on Dawn for every storage kind, style, head dim, slot dtype and form (loop; registers with and without subgroups)", { skip: dawnSkipReason() }, async () => {
  const R = await import('../src/kernels/webgpu/llm-rotary.js');
  const { dawnToggles } = await import('../src/runtime/webgpu/dawn-options.js');
  const dawn = (await import('webgpu')) as unknown as { create(o: string[]): GPU };
  const gpu = dawn.create(['backend=null', ...dawnToggles()]);
  const adapter = (await gpu.requestAdapter())!;
  const device = await adapter.requestDevice({ requiredFeatures: ['shader-f16', 'subgroups'] as GPUFeatureName[] });
  const forms = [
    { registers: false, subgroups: false },
    { registers: true, subgroups: true },
    { registers: true, subgroups: false },
  ];
  const errors: string[] = [];
  let n = 0;
  for (const x of ['f32', 'f16', 'f16p', 'bf16p'] as StorageKind[]) {
    for (const isNeox of [true, false]) {
      for (const d of [64, 128]) {
        for (const slots of ['int32', 'int64'] as const) {
          for (const form of forms) {
            const code = R.qkNormRotaryCacheSourceForTest(x, d, isNeox, slots, form);
            const info = await device.createShaderModule({ code }).getCompilationInfo();
            for (const m of info.messages) if (m.type === 'error') errors.push(`${x} ${isNeox} ${d} ${slots} ${JSON.stringify(form)}: line ${m.lineNum}: ${m.message}`);
            n++;
          }
        }
      }
    }
  }
  device.destroy();
  assert.deepEqual(errors, []);
  assert.equal(n, 96);
});
