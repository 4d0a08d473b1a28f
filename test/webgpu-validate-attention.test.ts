/**
 * Compiles every variant of the webgpu flash attention (prefill, decode, split decode, combine:
 * each storage kind, head dims 32..256, no / bool / additive mask), of the paged decode attention
 * (split and direct, each storage kind and index dtype, head dims 32..512, head groups 1..8; the
 * fused split + combine with 2..4 sub-splits where its workgroup memory fits) and of
 * the topk radix select (each input and value kind) on Dawn's null backend, which needs no GPU: a WGSL or pipeline error
 * (workgroup memory over 16 KiB, a barrier in non-uniform control flow) fails here, where CI has no
 * adapter. webgpu-attention.test.ts, webgpu-paged.test.ts and webgpu-topk.test.ts check their values on a real adapter.
 * Also the float16 prefill on subgroup matrices, row tiles and key split, on the real matrices
 * (the null device offers them): plans of 128 invocations (its subgroups may be 128 wide), within
 * 16 KiB; the key split's Qwen3 plans, over it, must fail on the workgroup memory alone, of the
 * size matrixPrefillBytes says; and the one-pass form's plans (flash-attention-matrix-online.ts).
 * webgpu-attention-matrix.test.ts checks their values emulated.
 */
import assert from 'node:assert/strict';
import { dawnSkipReason } from './helpers/dawn.js';
import test from 'node:test';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { StorageKind } from '../src/kernels/webgpu/storage.js';

// Before Kiln reads its options: this process's webgpu device is Dawn's null backend.
process.env.KILN_WEBGPU_BACKEND = 'null';
const kiln = await import('../src/index.js');
const S = await import('../src/kernels/webgpu/flash-attention-source.js');
const P = await import('../src/kernels/webgpu/paged-attention-source.js');
const { selectSource } = await import('../src/kernels/webgpu/topk-select.js');
const { withPrelude } = await import('../src/kernels/math/wgsl-prelude.js');
const M = await import('../src/kernels/webgpu/flash-attention-matrix.js');
const { matrixSplitPrefillSource } = await import('../src/kernels/webgpu/flash-attention-matrix-split.js');
const O = await import('../src/kernels/webgpu/flash-attention-matrix-online.js');

const skip = dawnSkipReason();

test('every flash attention, paged attention and topk select kernel compiles on Dawn', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const f16 = acc.hasFeature('shader-f16');
  const floats: StorageKind[] = ['f32', 'f16p', 'bf16p', ...(f16 ? (['f16'] as const) : [])];
  let n = 0;
  const compile = (src: string, label: string): void => {
    acc.kernel(withPrelude(src), label);
    n++;
  };
  for (const x of floats) {
    for (const [e, ev] of [
      [32, 200],
      [64, 64],
      [128, 128],
      [256, 256],
    ] as const) {
      for (const mask of [null, 'boolp', x] as const) {
        const k = { x, mask, maskBool: mask === 'boolp', e, ev };
        compile(S.prefillSource(k, S.prefillBlock(e, ev)), `prefill ${x} ${e}`);
        compile(S.decodeSource(k, false), `decode ${x} ${e}`);
        compile(S.decodeSource(k, true), `split ${x} ${e}`);
      }
      compile(S.combineSource(x, ev), `combine ${x} ${ev}`);
    }
  }
  for (const x of floats) {
    for (const [d, hg] of [
      [32, 8],
      [80, 3],
      [128, 8],
      [256, 8],
      [512, 4],
      [64, 1],
    ] as const) {
      for (const index of ['int32', 'int64'] as const) {
        const k = { x, table: index, lens: index, d, hg };
        compile(P.pagedSplitSource(k, false), `paged ${x} ${d} ${hg} ${index}`);
        compile(P.pagedSplitSource(k, true), `paged split ${x} ${d} ${hg} ${index}`);
        // Unrolled loads (KILN_WEBGPU_PAGED_UNROLL, the default): vector keys where rows are whole words.
        const ve = P.pagedVecElems(x);
        const ku = { ...k, unroll: true, vecK: ve > 0 && d % ve === 0 };
        compile(P.pagedSplitSource(ku, false), `paged unrolled ${x} ${d} ${hg} ${index}`);
        compile(P.pagedSplitSource(ku, true), `paged unrolled split ${x} ${d} ${hg} ${index}`);
        if (P.pagedVecV(x, d)) {
          const kv = { ...k, vecK: true, vecV: true };
          compile(P.pagedSplitSourceV(kv, false), `paged vec ${x} ${d} ${hg} ${index}`);
          compile(P.pagedSplitSourceV(kv, true), `paged vec split ${x} ${d} ${hg} ${index}`);
          compile(P.pagedSplitSourceV({ ...kv, unroll: true }, true), `paged vec unrolled split ${x} ${d} ${hg} ${index}`);
        }
        // The fused split + combine (KILN_WEBGPU_PAGED_FUSED) with every sub-split count whose workgroup fits the null backend's limits (256 invocations, 16 KiB).
        for (let splits = 2; splits <= 4; splits++) {
          if (P.pagedFusedWorkgroupBytes(splits, hg, d) > 16384) continue;
          for (const kf of [k, ku]) compile(P.pagedFusedSource(kf, splits), `paged fused ${x} ${d} ${hg} ${index} s${splits}${kf === ku ? ' unrolled' : ''}`);
        }
      }
    }
    for (const d of [32, 80, 128, 512]) for (const lens of ['int32', 'int64'] as const) for (const unroll of [false, true]) compile(P.pagedCombineSource(x, d, lens, unroll), `paged combine ${x} ${d} ${lens}${unroll ? ' unrolled' : ''}`);
  }
  for (const x of [...floats, 'i32', 'u8p'] as const) compile(selectSource(x, x), `select ${x}`);
  kiln.synchronize('webgpu');
  assert.ok(n > 100, `compiled ${n}`);
});

/** The null device where it offers subgroup matrices and float16, else null (the test skipped). */
function matrixDevice(t: { skip(message: string): void }): WebgpuAccelerator | null {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const a = acc.bridge.adapter;
  if (!a.features.includes('chromium-experimental-subgroup-matrix') || !a.features.includes('shader-f16')) {
    t.skip(`the null device lacks chromium-experimental-subgroup-matrix or shader-f16 (features: ${a.features.join(', ')})`);
    return null;
  }
  return acc;
}

test('the float16 attention prefill on subgroup matrices (row tiles, key split) compiles on Dawn', { skip }, (t) => {
  const acc = matrixDevice(t);
  if (acc === null) return;
  let n = 0;
  // [t, sg, sgs, bk, e, ev, split]: 16 x 16 matrices (NVIDIA) and 8 x 8; a row over 2 and 8 invocations; Ev != E.
  const plans: [number, number, number, number, number, number, boolean][] = [
    [16, 32, 4, 16, 16, 16, false],
    [16, 32, 4, 16, 16, 16, true],
    [8, 32, 4, 8, 64, 64, true],
    [8, 32, 4, 8, 64, 32, true],
    [8, 64, 2, 8, 64, 64, true],
  ];
  for (const [tt, sg, sgs, bk, e, ev, split] of plans) {
    for (const mask of [null, 'boolp', 'f16'] as const) {
      const k = { x: 'f16' as const, mask, maskBool: mask === 'boolp', e, ev };
      const plan = { t: tt, sg, sgs, bk, split };
      assert.ok(M.matrixPrefillBytes(plan, e, ev, 2) <= 16384, JSON.stringify(plan));
      acc.kernel(withPrelude((split ? matrixSplitPrefillSource : M.matrixPrefillSource)(k, plan)), `attn matrix ${JSON.stringify(plan)} ${e} ${ev} ${mask}`);
      n++;
    }
  }
  kiln.synchronize('webgpu');
  // The 128-token Qwen3-0.6B prefill's split plan (4 subgroups of 16-key blocks: 47360 bytes) fails on the memory alone.
  const plan = M.matrixPrefillPlan(16, 32, 16, 128, 128, 128, 49152, 1024, { split: 'auto' })!;
  assert.deepEqual(plan, { t: 16, sg: 32, sgs: 4, bk: 16, split: true });
  const bytes = M.matrixPrefillBytes(plan, 128, 128, 2);
  assert.throws(
    () => acc.kernel(withPrelude(matrixSplitPrefillSource({ x: 'f16', mask: null, maskBool: false, e: 128, ev: 128 }, plan)), 'attn matrix split qwen3'),
    (err: Error) => new RegExp(`does not compile:\\nThe total use of workgroup storage \\(${bytes} bytes\\) is larger than the maximum allowed \\(16384 bytes\\)\\.\\n - While initializing \\[ComputePipeline [^\\n]*\\]$`).test(err.message),
  );
  n++;
  assert.equal(n, 16);
});

test('the one-pass float16 attention prefill on subgroup matrices (KILN_WEBGPU_ATTN_MATRIX_FORM=online) compiles on Dawn', { skip }, (t) => {
  const acc = matrixDevice(t);
  if (acc === null) return;
  let n = 0;
  // [t, sg, sgs, bk, e, ev]: 128 invocations a workgroup; a row over 4, 8 and 8 invocations (shuffles across 2 or 3 masks); Ev != E.
  const plans: [number, number, number, number, number, number][] = [
    [8, 32, 4, 8, 16, 16],
    [8, 32, 4, 8, 32, 32],
    [8, 64, 2, 8, 32, 16],
    [16, 128, 1, 16, 32, 32],
  ];
  for (const [tt, sg, sgs, bk, e, ev] of plans) {
    for (const mask of [null, 'boolp', 'f16'] as const) {
      const k = { x: 'f16' as const, mask, maskBool: mask === 'boolp', e, ev };
      const plan = { t: tt, sg, sgs, bk, split: false };
      assert.ok(O.matrixOnlineBytes(plan, e, ev, 2) <= 16384, JSON.stringify(plan));
      acc.kernel(withPrelude(O.matrixOnlinePrefillSource(k, plan)), `attn matrix online ${JSON.stringify(plan)} ${e} ${ev} ${mask}`);
      n++;
    }
  }
  kiln.synchronize('webgpu');
  assert.equal(n, 12);
});
