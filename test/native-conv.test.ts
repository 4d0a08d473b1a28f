/**
 * The native conv2d's direct implicit GEMM (kernels/cpu/native/conv-c.ts: A read from the image
 * through per-pixel descriptors, border pixels through gathered patches) against the float64
 * refConv2d, on 1 and 2 threads: merged kernel-row runs (dense channels_last pixels) and per-tap
 * runs (groups, a channel slice, dilation along W), K deeper than one KC slab with runs crossing
 * the slab boundary, every pixel in the padding, few pixel blocks (the column split), partial
 * tiles and slivers, an offset view, NCHW and strided input and output (the NHWC copy and the
 * scattered tiles), and conv2dBatchNorm's folded epilogue. Each case asserts which path ran (the
 * direct path's call counter); a K too deep for the gathered patches takes the packed path.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { nativeGemm, probeToolchain, setCpuPath, setNativeThreads } from '../src/kernels/cpu/native/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand, randomValues } from './helpers/make.js';
import { refConv2d } from './helpers/nn-ref.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

function withNative<T>(threads: number, fn: () => T): T {
  setCpuPath('native');
  setNativeThreads(threads);
  try {
    return fn();
  } finally {
    setNativeThreads(undefined);
    setCpuPath(undefined);
  }
}

/** |got - want| <= atol + rtol * |want| element-wise. */
function near(got: readonly number[], want: readonly number[], atol: number, rtol: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i]!)) {
      assert.ok(Number.isNaN(got[i]!), `${what}[${i}]: got ${got[i]}, expected NaN`);
      continue;
    }
    if (!(Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!))) assert.fail(`${what}[${i}]: got ${got[i]}, expected ${want[i]}`);
  }
}

interface Case {
  label: string;
  x: [number, number, number, number];
  w: [number, number, number, number];
  stride: [number, number];
  pad: [number, number, number, number];
  dil: [number, number];
  groups: number;
  /** Direct path expected (channels in unit stride). */
  direct: boolean;
  layout?: 'channelsLast' | 'contiguous' | 'strided';
}

const CASES: Case[] = [
  // conv-stack's stem shape, smaller: 7x7 s2 p3 on 3 channels (merged 21-float runs, border patches).
  { label: 'stem 7x7 s2', x: [2, 3, 22, 19], w: [20, 3, 7, 7], stride: [2, 2], pad: [3, 3, 3, 3], dil: [1, 1], groups: 1, direct: true },
  // 3x3 body: 64 * 9 = 576 > KC 512, the slab boundary falls between two kernel rows.
  { label: 'body 3x3, K 576', x: [2, 64, 9, 8], w: [24, 64, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, direct: true },
  // K 640 = 4 runs of 160: the slab boundary (512) falls inside a run.
  { label: 'K 640, asymmetric padding', x: [1, 40, 7, 6], w: [18, 40, 4, 4], stride: [1, 1], pad: [1, 2, 2, 1], dil: [1, 1], groups: 1, direct: true },
  // Groups on channels_last: a group's pixels are not dense (stride 8, 4 channels), per-tap runs.
  { label: 'groups 2 (per-tap runs)', x: [1, 8, 9, 9], w: [6, 4, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 2, direct: true },
  // Dilation along W: per-tap runs; along H only: merged runs with a kernel-row stride of 2 rows.
  { label: 'dilation 2x2', x: [1, 5, 10, 12], w: [7, 5, 3, 3], stride: [1, 1], pad: [2, 2, 2, 2], dil: [2, 2], groups: 1, direct: true },
  { label: 'dilation 3x1, stride 1x2', x: [2, 6, 13, 11], w: [9, 6, 3, 2], stride: [1, 2], pad: [2, 0, 1, 1], dil: [3, 1], groups: 1, direct: true },
  // Padding wider than the image reach: windows entirely in the padding give zero patches.
  { label: 'padding 4 around a 3x3 image', x: [1, 3, 3, 3], w: [5, 3, 2, 2], stride: [1, 1], pad: [4, 4, 4, 4], dil: [1, 1], groups: 1, direct: true },
  // Dilation 2 along W with wide right padding: windows starting at or just past the image's right
  // edge (W - 1 - iw0 in (-dilation, 0): no tap inside).
  { label: 'dilation 1x2, right padding 6', x: [1, 2, 5, 4], w: [3, 2, 3, 3], stride: [1, 1], pad: [0, 0, 1, 6], dil: [1, 2], groups: 1, direct: true },
  // One pixel block, so the columns are split into items (O 64: 4 slivers).
  { label: 'few pixel blocks (column split)', x: [1, 16, 12, 12], w: [64, 16, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, direct: true },
  // Many pixel blocks, O 40 (a partial sliver), M 1800 (a partial tile).
  { label: 'many pixel blocks, partial sliver', x: [2, 24, 30, 30], w: [40, 24, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 1, direct: true },
  { label: '1x1 stride 2', x: [2, 12, 9, 7], w: [10, 12, 1, 1], stride: [2, 2], pad: [0, 0, 0, 0], dil: [1, 1], groups: 1, direct: true },
  // NCHW in and out: a dense NHWC copy of the input, tiles scattered into NCHW planes.
  { label: 'NCHW', x: [2, 5, 11, 9], w: [8, 5, 3, 3], stride: [2, 1], pad: [1, 1, 0, 2], dil: [1, 1], groups: 1, direct: true, layout: 'contiguous' },
  { label: 'NCHW, groups 3, O 36 (partial sliver)', x: [1, 6, 17, 16], w: [36, 2, 3, 3], stride: [1, 1], pad: [1, 1, 1, 1], dil: [1, 1], groups: 3, direct: true, layout: 'contiguous' },
  // Every stride doubled, offset 3: the copy reads strided channels and pixels.
  { label: 'strided input', x: [2, 4, 8, 7], w: [5, 4, 2, 3], stride: [1, 1], pad: [0, 1, 1, 0], dil: [1, 1], groups: 1, direct: true, layout: 'strided' },
  // K 49000: the gathered patches would pass CONV_PATCH_MAX, so the packed implicit GEMM runs
  // (into a channels_last scratch, then the copy to NCHW).
  { label: 'K 49000 (packed path)', x: [1, 1000, 16, 16], w: [3, 1000, 7, 7], stride: [1, 1], pad: [3, 3, 3, 3], dil: [1, 1], groups: 1, direct: false, layout: 'contiguous' },
];

for (const threads of [1, 2]) {
  test(`native conv2d direct path vs float64 reference, ${threads} thread(s)`, { skip }, () => {
    withNative(threads, () => {
      CASES.forEach((c, i) => {
        const x = rand(c.x, 100 + i, c.layout ?? 'channelsLast');
        const w = rand(c.w, 200 + i, 'contiguous', 'float32', -0.5, 0.5);
        const b = rand([c.w[0]], 300 + i);
        const before = nativeGemm().convDirectCalls();
        const y = kiln.conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
        assert.equal(nativeGemm().convDirectCalls() - before, c.direct ? c.groups : 0, `${c.label}: direct-path calls`);
        const ref = refConv2d(x.toFlatArray(), c.x, w.toFlatArray(), c.w, b.toFlatArray(), c.stride, c.pad, c.dil, c.groups);
        assert.deepEqual([...y.shape], ref.shape, `${c.label}: shape`);
        near(y.toFlatArray(), ref.values, 1e-4, 1e-5, c.label);
      });
    });
  });
}

test('native conv2d direct path: channel slice and offset views of a channels_last tensor', { skip }, () => {
  withNative(2, () => {
    // base [2, 10, 12, 12] channels_last; x = channels 3..9, rows 1.. : pixel stride 10 != 7 channels.
    const base = rand([2, 10, 12, 12], 400, 'channelsLast');
    const x = kiln.narrow(kiln.narrow(base, 1, 3, 7), 2, 1, 11);
    const w = rand([16, 7, 3, 3], 401, 'contiguous', 'float32', -0.5, 0.5);
    const before = nativeGemm().convDirectCalls();
    const y = kiln.conv2d(x, w, null, 1, 1);
    assert.equal(nativeGemm().convDirectCalls() - before, 1, 'direct-path calls');
    const xs = [...x.shape] as [number, number, number, number];
    const ref = refConv2d(x.toFlatArray(), xs, w.toFlatArray(), [16, 7, 3, 3], null, [1, 1], [1, 1, 1, 1], [1, 1], 1);
    near(y.toFlatArray(), ref.values, 1e-4, 1e-5, 'sliced view');
  });
});

test('native conv2dBatchNorm on the direct path: folded scale, shift and ReLU, 2 threads', { skip }, () => {
  const [n, c, h, wd, o] = [2, 16, 14, 13, 24];
  const x = rand([n, c, h, wd], 500, 'channelsLast');
  const w = rand([o, c, 3, 3], 501, 'contiguous', 'float32', -0.5, 0.5);
  const b = rand([o], 502);
  const vec = (seed: number, lo: number, hi: number): Tensor => makeTensor(randomValues(o, seed, lo, hi), [o], 'float32');
  const bn = { runningMean: vec(503, -0.5, 0.5), runningVar: vec(504, 0.5, 1.5), weight: vec(505, 0.5, 1.5), bias: vec(506, -0.5, 0.5), eps: 1e-5 };
  const reference = (): number[] => {
    const conv = refConv2d(x.toFlatArray(), [n, c, h, wd], w.toFlatArray(), [o, c, 3, 3], b.toFlatArray(), [2, 2], [1, 1, 1, 1], [1, 1], 1);
    const [mean, vr, g, beta] = [bn.runningMean, bn.runningVar, bn.weight, bn.bias].map((t) => t.toFlatArray());
    const plane = conv.shape[2]! * conv.shape[3]!;
    return conv.values.map((s, idx) => {
      const oo = Math.floor(idx / plane) % o;
      return Math.max(0, ((s - mean![oo]!) / Math.sqrt(vr![oo]! + bn.eps)) * g![oo]! + beta![oo]!);
    });
  };
  withNative(2, () => {
    const run = (): number[] => kiln.nn.functional.conv2dBatchNorm(x, w, b, bn, { stride: 2, padding: 1, relu: true }).toFlatArray();
    const before = nativeGemm().convDirectCalls();
    near(run(), reference(), 1e-4, 1e-5, 'conv2dBatchNorm');
    assert.equal(nativeGemm().convDirectCalls() - before, 1, 'direct-path calls');
    // The folded weight and shift are cached; in-place changes to the conv bias and the
    // statistics must reach the next call.
    kiln.noGrad(() => b.add_(0.75));
    near(run(), reference(), 1e-4, 1e-5, 'conv2dBatchNorm after an in-place conv bias update');
    kiln.noGrad(() => bn.runningMean.mul_(-2));
    near(run(), reference(), 1e-4, 1e-5, 'conv2dBatchNorm after an in-place running mean update');
    // A NaN input pixel: the fused ReLU keeps NaN (as relu does), in full and partial tiles.
    kiln.noGrad(() => x.narrow(2, 5, 1).narrow(3, 4, 1).fill_(Number.NaN));
    const got = run();
    assert.ok(got.some((v) => Number.isNaN(v)), 'NaN reaches the output');
    near(got, reference(), 1e-4, 1e-5, 'conv2dBatchNorm with a NaN input pixel');
  });
});
