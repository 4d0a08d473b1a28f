/**
 * The float16 conv2d route through an explicit im2col and the staged subgroup matrix GEMM
 * (conv-im2col.ts), computed for real on SwiftShader: linalg.ts's emulateSubgroupMatrix makes the
 * staged kernel run written without subgroup matrices (8 x 8 x 8 matrices, subgroups of 8, plan
 * "2,2,2,2,2" as webgpu-sm-emulated.test.ts uses), so the weight packing, the input gather (zero
 * padding, stride, dilation, K padded to a 16-byte word) and the GEMM with its bias are checked
 * against float64 convolutions of the same rounded values. The pipeline keys show the GEMM ran
 * (the implicit GEMM compiles none). Each case runs twice: A gathered first, and (KILN_WEBGPU_CONV_IMPLICIT,
 * where the input's channels are whole 16-byte words) A's words read in place through im2col
 * addresses by the GEMM (GemmSpec.aConv). conv2dBatchNorm's fused form of the same route (conv-bn.ts:
 * BatchNorm folded into the packed weight and the GEMM's bias, ReLU in the epilogue) is checked
 * against a float64 conv followed by the BatchNorm and ReLU written out with tensor ops.
 * Needs an adapter that computes; skips on the null backend.
 * On a GPU with subgroup matrices the route runs unemulated (webgpu-subgroup-matrix.test.ts).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import { emulateSubgroupMatrix, gemmPipelineKeys } from '../src/kernels/webgpu/linalg.js';
import { setOption } from '../src/runtime/config.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { closeF16, randnF16, webgpuSkipReason } from './helpers/webgpu.js';
import { CONV_BN_CASES, convBnInputs, convBnReference, convBnWebgpu } from './helpers/conv-bn.js';

// The emulation runs on packed float16 only (no shader-f16): a GPU with shader-f16 runs the real kernels instead.
const skip = webgpuSkipReason() || (kiln.getAccelerator('webgpu').properties(0).features as readonly string[]).includes('shader-f16') ? 'the emulated kernels need a device without shader-f16 (real subgroup matrices: webgpu-subgroup-matrix.test.ts)' : false;

interface Case {
  label: string;
  x: number[];
  w: number[];
  bias: boolean;
  stride: [number, number];
  padding: [number, number];
  dilation: [number, number];
  weightChannelsLast?: boolean;
}

const CASES: Case[] = [
  // K = 27 (padded to 32), stride 2: the conv-stack's first layer in small.
  { label: 'C3 3x3 stride 2 pad 1, bias', x: [2, 3, 11, 13], w: [16, 3, 3, 3], bias: true, stride: [2, 2], padding: [1, 1], dilation: [1, 1] },
  { label: 'C3 7x7 stride 2 pad 3 (the stem: words span taps and kernel rows), bias', x: [1, 3, 12, 10], w: [8, 3, 7, 7], bias: true, stride: [2, 2], padding: [3, 3], dilation: [1, 1] },
  { label: 'C16 3x3 dilation 2 pad 2, no bias', x: [1, 16, 9, 9], w: [8, 16, 3, 3], bias: false, stride: [1, 1], padding: [2, 2], dilation: [2, 2] },
  { label: 'C8 1x3 asymmetric, channels_last weight, bias', x: [3, 8, 6, 10], w: [24, 8, 1, 3], bias: true, stride: [1, 2], padding: [0, 1], dilation: [1, 1], weightChannelsLast: true },
  // C 8 under the K step (16 here): each step carries c through two taps, and kw into kh.
  { label: 'C8 5x5 stride 2 pad 2, bias', x: [1, 8, 9, 11], w: [8, 8, 5, 5], bias: true, stride: [2, 2], padding: [2, 2], dilation: [1, 1] },
];

test('float16 conv2d through im2col and the (emulated) staged GEMM matches float64', { skip }, () => {
  kiln.manualSeed(21);
  const before = new Set(gemmPipelineKeys());
  emulateSubgroupMatrix({ m: 8, n: 8, k: 8, sg: 8 });
  setOption('KILN_WEBGPU_SM_PLAN', '2,2,2,2,2');
  try {
    // Explicit im2col, and (where the input's channels are whole words: C16, C8) A read in place,
    // its (kh, kw, c) divided out per word or stepped by carries (KILN_WEBGPU_CONV_CARRY).
    const runs = [...CASES.map((k) => ({ ...k, implicit: false, carry: false })), ...CASES.map((k) => ({ ...k, implicit: true, carry: false })), ...CASES.map((k) => ({ ...k, implicit: true, carry: true }))];
    for (const c of runs) {
      setOption('KILN_WEBGPU_CONV_IMPLICIT', c.implicit);
      setOption('KILN_WEBGPU_CONV_CARRY', c.carry);
      const x = randnF16(c.x);
      const w = randnF16(c.w);
      const b = c.bias ? randnF16([c.w[0]!]) : null;
      const want = kiln.nn.functional.conv2d(x.to('float64'), w.to('float64'), b ? b.to('float64') : null, c.stride, c.padding, c.dilation);
      const xg = x.to('webgpu').contiguous('channelsLast');
      let wg: Tensor = w.to('webgpu');
      if (c.weightChannelsLast) wg = wg.contiguous('channelsLast');
      const got = kiln.nn.functional.conv2d(xg, wg, b ? b.to('webgpu') : null, c.stride, c.padding, c.dilation);
      assert.deepEqual([...got.shape], [...want.shape], c.label);
      closeF16(got, want, `${c.label}${c.implicit ? ` (implicit${c.carry ? ', carries' : ''})` : ''}`);
    }
  } finally {
    setOption('KILN_WEBGPU_CONV_IMPLICIT', undefined);
    setOption('KILN_WEBGPU_CONV_CARRY', undefined);
    setOption('KILN_WEBGPU_SM_PLAN', undefined);
    emulateSubgroupMatrix(null);
  }
  const keys = gemmPipelineKeys().filter((k) => !before.has(k));
  assert.ok(keys.includes('smstaged8x8x8.sg8.2x2.2x2.2.emu,kk,bias,,conv'), `the staged GEMM read a conv input in place (compiled: ${keys.join(' ')})`);
  assert.ok(keys.includes('smstaged8x8x8.sg8.2x2.2x2.2.emu,kk,bias,,convc'), `the staged GEMM read a conv input in place with carries (compiled: ${keys.join(' ')})`);
  assert.ok(keys.includes('smstaged8x8x8.sg8.2x2.2x2.2.emu,kk,bias,'), `the staged GEMM ran with the bias (compiled: ${keys.join(' ')})`);
  assert.ok(keys.includes('smstaged8x8x8.sg8.2x2.2x2.2.emu,kk,,'), `the staged GEMM ran without a bias (compiled: ${keys.join(' ')})`);
});

test('float16 conv2dBatchNorm folded into the im2col route (emulated staged GEMM) matches float64', { skip }, () => {
  kiln.manualSeed(22);
  const before = new Set(gemmPipelineKeys());
  emulateSubgroupMatrix({ m: 8, n: 8, k: 8, sg: 8 });
  setOption('KILN_WEBGPU_SM_PLAN', '2,2,2,2,2');
  try {
    for (const c of CONV_BN_CASES) {
      const inputs = convBnInputs(c);
      const want = convBnReference(c, inputs);
      const got = convBnWebgpu(c, inputs);
      assert.deepEqual([...got.shape], [...want.shape], c.label);
      closeF16(got, want, c.label);
      if (c.relu) assert.ok((got.to('cpu').toFlatArray() as number[]).every((v) => v >= 0), `${c.label}: the ReLU ran`);
    }
  } finally {
    setOption('KILN_WEBGPU_SM_PLAN', undefined);
    emulateSubgroupMatrix(null);
  }
  // The fold always gives the GEMM a bias (the BatchNorm's shift), and the ReLU is its epilogue's
  // (the first test built the pipeline without the ReLU already).
  const keys = gemmPipelineKeys().filter((k) => !before.has(k));
  assert.ok(keys.includes('smstaged8x8x8.sg8.2x2.2x2.2.emu,kk,bias,,relu'), `the staged GEMM ran with the shift and the ReLU (compiled: ${keys.join(' ')})`);
});
