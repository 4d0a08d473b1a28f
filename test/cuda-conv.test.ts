/**
 * The implicit-GEMM conv2d on cuda against a float64 reference computed here by naive loops over
 * the inputs' (dtype-rounded) values: NCHW and channels_last inputs, stride 1/2, padding,
 * dilation, bias, 3 and 64 input channels, odd spatial sizes, output channels that are not a
 * multiple of the tile; float32 on TF32 tensor cores (TF32 tolerance) and exact float32 (tight
 * tolerance, through kiln.backends.cuda.allowTf32Conv = false), float16 and bfloat16; the fused
 * epilogue (bias, per-channel scale and shift, ReLU); the fallback paths (groups > 1, float64)
 * and the backward pass. Errors are measured against sum_k |x||w| (the conditioning of each output),
 * so one tolerance fits any K. Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { convImpl, runIgemm } from '../src/kernels/cuda/conv-igemm.js';
import { IGEMM_TILES, type IgemmTileName, simtTile } from '../src/kernels/cuda/conv-igemm-source.js';
import { makeTensor, randomValues } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

interface Geometry {
  n: number;
  c: number;
  h: number;
  w: number;
  o: number;
  k: [number, number];
  stride: [number, number];
  pad: [number, number];
  dil: [number, number];
}

/**
 * Relative tolerances against sum |x w| (the accumulation) and against |y| (output rounding).
 * Exact f32: K products accumulated in f32 stay within about K * 2^-24 of the magnitude; the
 * bound used (2e-5) is what a TF32 kernel (operands rounded to 10-bit mantissas, ~1e-3) cannot meet.
 */
const TOL: Record<string, { mag: number; rel: number }> = {
  exact: { mag: 2e-5, rel: 1e-6 },
  tf32: { mag: 2e-3, rel: 1e-6 },
  float16: { mag: 1e-3, rel: 1e-3 },
  bfloat16: { mag: 8e-3, rel: 8e-3 },
};

/** Float64 conv2d of flat NCHW values, with |x||w| sums; epilogue applied to the value only. */
function reference(x: number[], w: number[], bias: number[] | null, g: Geometry): { y: number[]; mag: number[]; oh: number; ow: number } {
  const [kh, kw] = g.k;
  const oh = Math.floor((g.h + 2 * g.pad[0] - g.dil[0] * (kh - 1) - 1) / g.stride[0]) + 1;
  const ow = Math.floor((g.w + 2 * g.pad[1] - g.dil[1] * (kw - 1) - 1) / g.stride[1]) + 1;
  const y = new Array<number>(g.n * g.o * oh * ow).fill(0);
  const mag = new Array<number>(y.length).fill(0);
  for (let n = 0; n < g.n; n++)
    for (let o = 0; o < g.o; o++)
      for (let i = 0; i < oh; i++)
        for (let j = 0; j < ow; j++) {
          let s = bias ? bias[o]! : 0;
          let m = bias ? Math.abs(bias[o]!) : 0;
          for (let c = 0; c < g.c; c++)
            for (let a = 0; a < kh; a++) {
              const ih = i * g.stride[0] - g.pad[0] + a * g.dil[0];
              if (ih < 0 || ih >= g.h) continue;
              for (let b = 0; b < kw; b++) {
                const iw = j * g.stride[1] - g.pad[1] + b * g.dil[1];
                if (iw < 0 || iw >= g.w) continue;
                const p = x[((n * g.c + c) * g.h + ih) * g.w + iw]! * w[((o * g.c + c) * kh + a) * kw + b]!;
                s += p;
                m += Math.abs(p);
              }
            }
          const idx = ((n * g.o + o) * oh + i) * ow + j;
          y[idx] = s;
          mag[idx] = m;
        }
  return { y, mag, oh, ow };
}

function assertClose(label: string, got: number[], want: number[], mag: number[], tol: { mag: number; rel: number }): number {
  assert.equal(got.length, want.length, `${label}: length`);
  let worst = 0;
  for (let i = 0; i < got.length; i++) {
    const err = Math.abs(got[i]! - want[i]!);
    const bound = tol.mag * mag[i]! + tol.rel * Math.abs(want[i]!) + 1e-30;
    worst = Math.max(worst, err / (mag[i]! + 1e-30));
    if (!(err <= bound)) assert.fail(`${label}: element ${i}: got ${got[i]}, want ${want[i]} (|err| ${err.toExponential(2)} > ${bound.toExponential(2)}, sum|xw| ${mag[i]!.toExponential(2)})`);
  }
  return worst;
}

type Mode = 'exact' | 'tf32' | 'float16' | 'bfloat16';
const MODES: Mode[] = ['tf32', 'exact', 'float16', 'bfloat16'];
const dtypeOf = (m: Mode): DType => (m === 'exact' || m === 'tf32' ? 'float32' : m);

function withTf32<T>(on: boolean, f: () => T): T {
  const saved = kiln.backends.cuda.allowTf32Conv;
  kiln.backends.cuda.allowTf32Conv = on;
  try {
    return f();
  } finally {
    kiln.backends.cuda.allowTf32Conv = saved;
  }
}

interface Inputs {
  x: Tensor;
  w: Tensor;
  b: Tensor | null;
  xv: number[];
  wv: number[];
  bv: number[] | null;
}

function inputs(g: Geometry, dtype: DType, layout: 'nchw' | 'nhwc', withBias: boolean, seed: number): Inputs {
  const xs = [g.n, g.c, g.h, g.w];
  const ws = [g.o, g.c, g.k[0], g.k[1]];
  const scale = 1 / Math.sqrt(g.c * g.k[0] * g.k[1]);
  let x = makeTensor(randomValues(xs.reduce((a, b) => a * b), seed, -1, 1), xs, dtype).to('cuda');
  let w = makeTensor(randomValues(ws.reduce((a, b) => a * b), seed + 1, -scale, scale), ws, dtype).to('cuda');
  if (layout === 'nhwc') {
    x = kiln.contiguous(x, 'channelsLast');
    w = kiln.contiguous(w, 'channelsLast');
    assert.equal(x.strides[1], 1, 'channels_last input has channel stride 1');
  }
  const b = withBias ? makeTensor(randomValues(g.o, seed + 2, -0.5, 0.5), [g.o], dtype).to('cuda') : null;
  return { x, w, b, xv: x.toFlatArray(), wv: w.toFlatArray(), bv: b ? b.toFlatArray() : null };
}

function run(mode: Mode, f: () => Tensor): Tensor {
  return withTf32(mode !== 'exact', f);
}

const CASES: { label: string; g: Geometry; layout: 'nchw' | 'nhwc'; bias: boolean }[] = [
  // The conv-stack stem: 3 channels, 7x7, stride 2, padding 3 (K = 147, padded in the loader), odd size.
  { label: 'stem Cin 3 7x7 s2 p3 nhwc', g: { n: 2, c: 3, h: 23, w: 23, o: 64, k: [7, 7], stride: [2, 2], pad: [3, 3], dil: [1, 1] }, layout: 'nhwc', bias: true },
  // The conv-stack body: 64 channels, 3x3, padding 1 (vector loader), partial last tile.
  { label: 'body Cin 64 3x3 p1 nhwc', g: { n: 2, c: 64, h: 9, w: 7, o: 64, k: [3, 3], stride: [1, 1], pad: [1, 1], dil: [1, 1] }, layout: 'nhwc', bias: false },
  // NCHW with 64 channels: copied to channels_last, then the vector loader.
  { label: 'Cin 64 3x3 s2 nchw', g: { n: 1, c: 64, h: 11, w: 9, o: 32, k: [3, 3], stride: [2, 2], pad: [1, 1], dil: [1, 1] }, layout: 'nchw', bias: true },
  // NCHW, odd channels and Cout 70 (two column tiles, odd tail), dilation 2, asymmetric stride/padding.
  { label: 'Cin 5 Cout 70 dilated nchw', g: { n: 2, c: 5, h: 13, w: 11, o: 70, k: [3, 2], stride: [2, 1], pad: [2, 1], dil: [2, 2] }, layout: 'nchw', bias: true },
];

for (const cs of CASES) {
  test(`conv2d ${cs.label}: tf32, exact f32, f16, bf16 match a float64 reference`, { skip }, () => {
    for (const mode of MODES) {
      const dtype = dtypeOf(mode);
      const inp = inputs(cs.g, dtype, cs.layout, cs.bias, 11);
      const ref = reference(inp.xv, inp.wv, inp.bv, cs.g);
      const y = run(mode, () => kiln.nn.functional.conv2d(inp.x, inp.w, inp.b, cs.g.stride, cs.g.pad, cs.g.dil));
      assert.deepEqual([...y.shape], [cs.g.n, cs.g.o, ref.oh, ref.ow], `${cs.label} ${mode}: shape`);
      if (cs.layout === 'nhwc') assert.equal(y.strides[1], 1, `${cs.label} ${mode}: channels_last in, channels_last out`);
      assertClose(`${cs.label} ${mode}`, y.toFlatArray(), ref.y, ref.mag, TOL[mode]!);
    }
  });
}

test('conv2d every block tile (tf32, bf16; exact f32 on the SIMT tiles) on the stem and body shapes', { skip }, () => {
  const tiles = Object.keys(IGEMM_TILES) as IgemmTileName[];
  try {
    for (const tile of tiles) {
      convImpl.tile = tile;
      for (const cs of CASES.slice(0, 2)) {
        for (const mode of (simtTile(tile) && tile !== 'm128w32' ? ['tf32', 'bfloat16', 'exact'] : ['tf32', 'bfloat16']) as Mode[]) {
          const inp = inputs(cs.g, dtypeOf(mode), cs.layout, cs.bias, 13);
          const ref = reference(inp.xv, inp.wv, inp.bv, cs.g);
          const y = run(mode, () => kiln.nn.functional.conv2d(inp.x, inp.w, inp.b, cs.g.stride, cs.g.pad, cs.g.dil));
          assertClose(`${cs.label} ${mode} ${tile}`, y.toFlatArray(), ref.y, ref.mag, TOL[mode]!);
        }
      }
    }
  } finally {
    convImpl.tile = null;
  }
});

test("conv2d NCHW input copied to channels_last first (nchw: 'copy') matches the reference", { skip }, () => {
  const cs = CASES[2]!;
  for (const mode of ['tf32', 'bfloat16'] as Mode[]) {
    const dtype = dtypeOf(mode);
    const inp = inputs(cs.g, dtype, 'nchw', true, 17);
    const ref = reference(inp.xv, inp.wv, inp.bv, cs.g);
    const out = kiln.empty([cs.g.n, cs.g.o, ref.oh, ref.ow], { dtype, device: 'cuda' });
    const p = cs.g.pad;
    run(mode, () => runIgemm({ input: inp.x, weight: inp.w, bias: inp.b, out, stride: cs.g.stride, padding: [p[0], p[0], p[1], p[1]], dilation: cs.g.dil, groups: 1, nchw: 'copy' }));
    assertClose(`nchw copy ${mode}`, out.toFlatArray(), ref.y, ref.mag, TOL[mode]!);
  }
});

test('conv2d float32: the TF32 switch changes the math (TF32 differs from exact f32; exact meets the tight bound)', { skip }, () => {
  const g = CASES[1]!.g;
  const inp = inputs(g, 'float32', 'nhwc', false, 5);
  const ref = reference(inp.xv, inp.wv, null, g);
  const exact = run('exact', () => kiln.nn.functional.conv2d(inp.x, inp.w, null, 1, 1)).toFlatArray();
  const tf32 = run('tf32', () => kiln.nn.functional.conv2d(inp.x, inp.w, null, 1, 1)).toFlatArray();
  assertClose('exact', exact, ref.y, ref.mag, TOL.exact!);
  // TF32 rounds the operands to 10 mantissa bits: over 576 products some output must move.
  assert.ok(tf32.some((v, i) => v !== exact[i]), 'tf32 and exact results are identical: the switch did nothing');
  const worst = assertClose('tf32', tf32, ref.y, ref.mag, TOL.tf32!);
  assert.ok(worst > TOL.exact!.mag / 100, `tf32 error ${worst} is implausibly small for TF32 operands`);
});

test('conv2d unbatched [C, H, W] input', { skip }, () => {
  const g: Geometry = { n: 1, c: 8, h: 6, w: 5, o: 4, k: [3, 3], stride: [1, 1], pad: [1, 1], dil: [1, 1] };
  for (const mode of ['exact', 'bfloat16'] as Mode[]) {
    const inp = inputs(g, dtypeOf(mode), 'nchw', true, 3);
    const x3 = kiln.reshape(inp.x, [8, 6, 5]);
    const y = run(mode, () => kiln.nn.functional.conv2d(x3, inp.w, inp.b, 1, 1));
    assert.deepEqual([...y.shape], [4, 6, 5]);
    const ref = reference(inp.xv, inp.wv, inp.bv, g);
    assertClose(`unbatched ${mode}`, y.toFlatArray(), ref.y, ref.mag, TOL[mode]!);
  }
});

test('conv2d fused epilogue: (conv + bias) * scale[c] + shift[c], then ReLU', { skip }, () => {
  const g: Geometry = { n: 2, c: 16, h: 7, w: 9, o: 24, k: [3, 3], stride: [1, 1], pad: [1, 1], dil: [1, 1] };
  for (const mode of MODES) {
    const dtype = dtypeOf(mode);
    const inp = inputs(g, dtype, 'nhwc', true, 21);
    const sv = randomValues(g.o, 31, -2, 2);
    const hv = randomValues(g.o, 32, -0.3, 0.3);
    const scale = makeTensor(sv, [g.o], 'float32').to('cuda');
    const shift = makeTensor(hv, [g.o], 'float32').to('cuda');
    const ref = reference(inp.xv, inp.wv, inp.bv, g);
    const oh = ref.oh;
    const ow = ref.ow;
    const out = kiln.contiguous(kiln.empty([g.n, g.o, oh, ow], { dtype, device: 'cuda' }), 'channelsLast');
    run(mode, () => runIgemm({ input: inp.x, weight: inp.w, bias: inp.b, out, stride: [1, 1], padding: [1, 1, 1, 1], dilation: [1, 1], groups: 1, scale, shift, relu: true }));
    const per = oh * ow;
    const want = ref.y.map((v, i) => Math.max(0, v * sv[Math.floor(i / per) % g.o]! + hv[Math.floor(i / per) % g.o]!));
    const mag = ref.mag.map((m, i) => m * Math.abs(sv[Math.floor(i / per) % g.o]!) + 1e-3 * Math.abs(hv[Math.floor(i / per) % g.o]!));
    assertClose(`fused ${mode}`, out.toFlatArray(), want, mag, TOL[mode]!);
  }
});

test('conv2d fallbacks: groups > 1 and float64 still match the reference', { skip }, () => {
  const g: Geometry = { n: 1, c: 4, h: 6, w: 6, o: 4, k: [3, 3], stride: [1, 1], pad: [1, 1], dil: [1, 1] };
  const inp = inputs(g, 'float64', 'nchw', true, 9);
  const ref = reference(inp.xv, inp.wv, inp.bv, g);
  assertClose('float64', kiln.nn.functional.conv2d(inp.x, inp.w, inp.b, 1, 1).toFlatArray(), ref.y, ref.mag, { mag: 1e-6, rel: 0 });
  // groups = 2: each half of the output sees half of the input channels.
  const x = makeTensor(randomValues(4 * 36, 4, -1, 1), [1, 4, 6, 6]).to('cuda');
  const w = makeTensor(randomValues(4 * 2 * 9, 5, -0.3, 0.3), [4, 2, 3, 3]).to('cuda');
  const y = withTf32(false, () => kiln.nn.functional.conv2d(x, w, null, 1, 1, 1, 2)).toFlatArray();
  const xv = x.toFlatArray();
  const wv = w.toFlatArray();
  for (let grp = 0; grp < 2; grp++) {
    const gg: Geometry = { ...g, c: 2, o: 2 };
    const r = reference(xv.slice(grp * 72, grp * 72 + 72), wv.slice(grp * 36, grp * 36 + 36), null, gg);
    assertClose(`groups=2 half ${grp}`, y.slice(grp * 72, grp * 72 + 72), r.y, r.mag, TOL.exact!);
  }
});

test('conv2d backward on cuda matches the cpu gradients', { skip }, () => {
  const xs = [2, 8, 7, 7];
  const ws = [6, 8, 3, 3];
  const xv = randomValues(2 * 8 * 49, 41, -1, 1);
  const wv = randomValues(6 * 8 * 9, 42, -0.3, 0.3);
  const grads = (device: 'cpu' | 'cuda'): number[][] => {
    const x = makeTensor(xv, xs).to(device).requiresGrad_();
    const w = makeTensor(wv, ws).to(device).requiresGrad_();
    // Forward and backward both in full float32: the backward's GEMMs follow the same TF32 flag
    // (on by default for convolutions, as cudnn.allow_tf32 in PyTorch), and TF32's 10-bit
    // mantissa would miss this test's 1e-4 tolerance.
    withTf32(false, () => {
      const y = kiln.nn.functional.conv2d(x, w, null, 2, 1);
      kiln.sum(kiln.mul(y, y)).backward();
    });
    return [x.grad!.toFlatArray(), w.grad!.toFlatArray()];
  };
  const [gc, gg] = [grads('cpu'), grads('cuda')];
  for (let i = 0; i < 2; i++) {
    const scale = Math.max(...gc[i]!.map(Math.abs));
    gg[i]!.forEach((v, j) => assert.ok(Math.abs(v - gc[i]![j]!) <= 1e-4 * scale, `grad ${i} element ${j}: cuda ${v} vs cpu ${gc[i]![j]}`));
  }
});

test('kiln.compile on cuda: conv2d -> batchNorm(eval) -> ReLU (f32 and bf16, reduce-overhead) equals eager', { skip }, () => {
  const g: Geometry = { n: 2, c: 3, h: 17, w: 17, o: 16, k: [7, 7], stride: [2, 2], pad: [3, 3], dil: [1, 1] };
  for (const mode of ['tf32', 'bfloat16'] as Mode[]) {
    const dtype = dtypeOf(mode);
    const inp = inputs(g, dtype, 'nhwc', true, 51);
    const vec = (seed: number, lo: number, hi: number): Tensor => makeTensor(randomValues(g.o, seed, lo, hi), [g.o], dtype).to('cuda');
    const [rm, rv, bw, bb] = [vec(52, -0.2, 0.2), vec(53, 0.5, 1.5), vec(54, 0.5, 1.5), vec(55, -0.2, 0.2)];
    const fn = (x: Tensor): Tensor => kiln.relu(kiln.nn.functional.batchNorm(kiln.nn.functional.conv2d(x, inp.w, inp.b, 2, 3), rm, rv, bw, bb, false, 0.1, 1e-5));
    const eager = run(mode, () => kiln.noGrad(() => fn(inp.x)));
    const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
    const got = run(mode, () => kiln.noGrad(() => cf(inp.x) as Tensor));
    const e = eager.toFlatArray();
    const scale = Math.max(...e.map(Math.abs));
    const tol = mode === 'bfloat16' ? 2e-2 : 1e-5;
    got.toFlatArray().forEach((v, i) => assert.ok(Math.abs(v - e[i]!) <= tol * scale, `${mode} element ${i}: compiled ${v} vs eager ${e[i]}`));
  }
});
