/**
 * The staged subgroup matrix GEMM's plans (gemm-subgroup-matrix-staged.ts: KILN_WEBGPU_SM_PLAN's
 * tiles, stages 0 / 1 / 2, workgroup bands) computed for real where no GPU has subgroup matrices:
 * linalg.ts's emulateSubgroupMatrix makes float16 products run the kernel written with each matrix
 * a private array (8 x 8 x 8 matrices, "subgroups" of 8 invocations), with the real kernel's
 * indexing, barriers and buffer switches, through runGemm's own eligibility, metadata and grid.
 * Values are compared with float64 matmul in every operand layout, with the bias and beta epilogues
 * and a batch, and split K (partial sums and the combine); the pipeline keys show which plan ran. Needs a webgpu adapter that computes
 * (SwiftShader here: each kernel takes seconds to compile, hence few plans and layouts, and at
 * most two words per invocation per operand: SwiftShader's compile time explodes past that); skips
 * on the null backend and where the device has shader-f16. The real matrices run in webgpu-subgroup-matrix.test.ts and scripts/device/wggemm-sweep.sh
 * on a GPU with the feature.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { emulateSubgroupMatrix, gemmPipelineKeys } from '../src/kernels/webgpu/linalg.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import { closeF16, randnF16, webgpuSkipReason } from './helpers/webgpu.js';

// The emulation reads float16 as packed words (storage 'f16p'); a device with shader-f16 stores
// float16 natively, and its real subgroup-matrix kernels are webgpu-subgroup-matrix.test.ts's.
const skip = webgpuSkipReason() || ((kiln.getAccelerator('webgpu') as WebgpuAccelerator).hasFeature('shader-f16') ? 'the emulation is of packed float16 (no shader-f16); this device has shader-f16' : false);

const close = closeF16;
const h = randnF16;
const wide = (x: Tensor): Tensor => x.to('float64');
const onGpu = (x: Tensor, transposed: boolean): Tensor => (transposed ? x.t().contiguous().to('webgpu').t() : x.to('webgpu'));

/** Runs `body` with plan `text` on the emulated kernel; returns the staged pipeline keys it compiled. */
function withPlan(text: string, body: () => void): string[] {
  const before = new Set(gemmPipelineKeys());
  emulateSubgroupMatrix({ m: 8, n: 8, k: 8, sg: 8 });
  setOption('KILN_WEBGPU_SM_PLAN', text);
  try {
    body();
  } finally {
    setOption('KILN_WEBGPU_SM_PLAN', undefined);
    emulateSubgroupMatrix(null);
  }
  return gemmPipelineKeys().filter((k) => !before.has(k) && k.startsWith('smstaged'));
}

/** matmul in the four operand layouts (row-major / transposed A and B) against float64. */
function layouts(M: number, N: number, K: number, which: readonly (readonly [boolean, boolean])[]): void {
  const a = h([M, K]);
  const b = h([K, N]);
  const want = kiln.matmul(wide(a), wide(b));
  for (const [ta, tb] of which) close(kiln.matmul(onGpu(a, ta), onGpu(b, tb)), want, `mm ${M}x${N}x${K}${ta ? ' A^T' : ''}${tb ? ' B^T' : ''}`);
}
const ALL = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
] as const;

test('emulated staged plans: stages 1 and 2 match float64 in every layout, with bias and beta, on partial tiles', { skip }, () => {
  kiln.manualSeed(11);
  for (const text of ['2,2,2,2,2', '2,2,2,2,2,stages=2']) {
    const two = text.includes('stages=2');
    const keys = withPlan(text, () => {
      // Multiples of 8 that leave partial 32 x 32 tiles and K steps of 16.
      layouts(136, 200, 88, two ? [ALL[0], ALL[3]] : ALL);
      const x = h([40, 56]);
      const w = h([24, 56]);
      const bias = h([24]);
      close(kiln.nn.functional.linear(x.to('webgpu'), w.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(x), wide(w), wide(bias)), `${text} linear`);
      if (two) return;
      const a = h([48, 40]);
      const b = h([40, 32]);
      const c = h([48, 32]);
      close(kiln.addmm(c.to('webgpu'), a.to('webgpu'), b.to('webgpu'), 0.5, 2), kiln.addmm(wide(c), wide(a), wide(b), 0.5, 2), `${text} addmm`);
    });
    const prefix = `smstaged8x8x8.sg8.2x2.2x2.2${two ? '.s2' : ''}.emu,`;
    for (const layout of two ? ['kn', 'mk', 'kk'] : ['kn', 'mn', 'kk', 'mk']) assert.ok(keys.some((k) => k.startsWith(`${prefix}${layout},`)), `${text}: layout ${layout} ran (compiled: ${keys.join(' ')})`);
    assert.ok(keys.some((k) => k.startsWith(prefix) && k.endsWith(',bias,')), `${text}: the bias epilogue ran (compiled: ${keys.join(' ')})`);
    if (!two) assert.ok(keys.some((k) => k.startsWith(prefix) && k.endsWith(',beta')), `${text}: the beta epilogue ran (compiled: ${keys.join(' ')})`);
  }
});

test('emulated staged plans: stages 0 (matrices straight from the operands) on whole tiles', { skip }, () => {
  kiln.manualSeed(12);
  // 32 x 32 tiles, K steps of 8. (Partial tiles run the planner's plan, whose emulation is too big
  // for SwiftShader to compile in reasonable time; the device sweep covers that fallback.)
  const keys = withPlan('2,2,2,2,1,stages=0', () => layouts(64, 96, 48, ALL));
  for (const layout of ['kn', 'mn', 'kk', 'mk']) assert.ok(keys.some((k) => k.startsWith(`smstaged8x8x8.sg8.2x2.2x2.1.s0.emu,${layout},`)), `layout ${layout} ran on stages 0 (compiled: ${keys.join(' ')})`);
});

test('emulated staged plans: workgroup bands, 2 x 4 subgroups and a batch', { skip }, () => {
  kiln.manualSeed(13);
  const keys = withPlan('2,4,1,1,4,group=3', () => {
    // 16 x 32 tiles: 9 tile rows (bands of 3, the last of 3) x 7 columns; then 3 rows of 3 tiles in a batch of 3.
    layouts(136, 200, 88, [ALL[0]]);
    layouts(120, 72, 64, [ALL[0]]);
    const ba = h([3, 40, 48]);
    const bb = h([3, 48, 72]);
    close(kiln.bmm(ba.to('webgpu'), bb.to('webgpu')), kiln.bmm(wide(ba), wide(bb)), 'bmm 3x40x72x48');
  });
  assert.ok(keys.some((k) => k.startsWith('smstaged8x8x8.sg8.2x4.1x1.4.g3.emu,kn,')), `the banded 2 x 4 plan ran (compiled: ${keys.join(' ')})`);
});

test('emulated staged plans: split K (partial f32 sums per K slice, combined with bias and beta) matches float64', { skip }, () => {
  kiln.manualSeed(14);
  for (const text of ['2,2,2,2,2', '2,2,2,2,2,stages=2']) {
    const two = text.includes('stages=2');
    const keys = withPlan(text, () => {
      // 32 x 32 tiles, K steps of 16: 2 tiles and K 264 make 2 slices of 144 and 120 (linalg.ts planSplitK).
      const x = h([40, 264]);
      const w = h([24, 264]);
      const bias = h([24]);
      close(kiln.nn.functional.linear(x.to('webgpu'), w.to('webgpu'), bias.to('webgpu')), kiln.nn.functional.linear(wide(x), wide(w), wide(bias)), `${text} linear split K`);
      if (two) return;
      const a = h([48, 392]);
      const b = h([392, 32]);
      const c = h([48, 32]);
      close(kiln.addmm(c.to('webgpu'), a.to('webgpu'), b.to('webgpu'), 0.5, 2), kiln.addmm(wide(c), wide(a), wide(b), 0.5, 2), `${text} addmm split K`);
    });
    const prefix = `smstaged8x8x8.sg8.2x2.2x2.2${two ? '.s2' : ''}.emu,`;
    assert.ok(keys.some((k) => k === `${prefix}kk,,,partial`), `${text}: the split linear ran as partial sums (compiled: ${keys.join(' ')})`);
    if (!two) assert.ok(keys.some((k) => k === `${prefix}kn,,,partial`), `${text}: the split addmm ran as partial sums (compiled: ${keys.join(' ')})`);
  }
});
