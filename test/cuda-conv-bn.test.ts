/**
 * conv2dBatchNorm on cuda (the implicit-GEMM conv whose weight prep kernel derives the BatchNorm
 * scale/shift, applied with the ReLU in the GEMM epilogue) against a float64 reference computed
 * here by naive loops over the (dtype-rounded) inputs: stem and body shapes, channels_last and
 * NCHW, with and without conv bias / BatchNorm affine / ReLU, TF32, exact f32 and bf16; the
 * unfused fallback (BatchNorm tensors of another dtype); and kiln.compile on cuda (CUDA graphs):
 * the conv stack folds, equals eager, and follows statistics written in place after compiling.
 * Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { DType } from '../src/tensor/dtype.js';
import { makeTensor, randomValues } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const F = kiln.nn.functional;

interface Case {
  n: number;
  c: number;
  h: number;
  w: number;
  o: number;
  k: number;
  stride: number;
  pad: number;
}

/** Float64 conv -> eval BatchNorm -> ReLU of flat NCHW values, and sum |x w| + |b| per output (conditioning). */
function reference(x: number[], w: number[], b: number[] | null, bn: number[][], eps: number, cs: Case, relu: boolean): { y: number[]; mag: number[] } {
  const [mean, vr, g, beta] = bn as [number[], number[], number[], number[]];
  const oh = Math.floor((cs.h + 2 * cs.pad - cs.k) / cs.stride) + 1;
  const ow = Math.floor((cs.w + 2 * cs.pad - cs.k) / cs.stride) + 1;
  const y: number[] = [];
  const mag: number[] = [];
  for (let n = 0; n < cs.n; n++)
    for (let o = 0; o < cs.o; o++)
      for (let i = 0; i < oh; i++)
        for (let j = 0; j < ow; j++) {
          let s = b ? b[o]! : 0;
          let m = b ? Math.abs(b[o]!) : 0;
          for (let c = 0; c < cs.c; c++)
            for (let u = 0; u < cs.k; u++)
              for (let v = 0; v < cs.k; v++) {
                const yi = i * cs.stride - cs.pad + u;
                const xj = j * cs.stride - cs.pad + v;
                if (yi < 0 || xj < 0 || yi >= cs.h || xj >= cs.w) continue;
                const p = x[((n * cs.c + c) * cs.h + yi) * cs.w + xj]! * w[((o * cs.c + c) * cs.k + u) * cs.k + v]!;
                s += p;
                m += Math.abs(p);
              }
          const sc = g[o]! / Math.sqrt(vr[o]! + eps);
          const z = (s - mean[o]!) * sc + beta[o]!;
          y.push(relu ? Math.max(z, 0) : z);
          mag.push((m + Math.abs(mean[o]!)) * Math.abs(sc) + Math.abs(beta[o]!));
        }
  return { y, mag };
}

type Mode = 'tf32' | 'exact' | 'bfloat16';
/** As cuda-conv.test.ts: relative to the conditioning (accumulation) and to |y| (output rounding). */
const TOL: Record<Mode, { mag: number; rel: number }> = { exact: { mag: 2e-5, rel: 1e-6 }, tf32: { mag: 2e-3, rel: 1e-6 }, bfloat16: { mag: 8e-3, rel: 8e-3 } };

function withTf32<T>(on: boolean, f: () => T): T {
  const saved = kiln.backends.cuda.allowTf32Conv;
  kiln.backends.cuda.allowTf32Conv = on;
  try {
    return f();
  } finally {
    kiln.backends.cuda.allowTf32Conv = saved;
  }
}

const CASES: { label: string; cs: Case; layout: 'channelsLast' | 'contiguous'; bias: boolean; affine: boolean; relu: boolean }[] = [
  { label: 'stem 7x7 s2 nhwc, bias, relu', cs: { n: 2, c: 3, h: 23, w: 21, o: 64, k: 7, stride: 2, pad: 3 }, layout: 'channelsLast', bias: true, affine: true, relu: true },
  { label: 'body 3x3 nhwc, no bias, relu', cs: { n: 2, c: 64, h: 9, w: 7, o: 64, k: 3, stride: 1, pad: 1 }, layout: 'channelsLast', bias: false, affine: true, relu: true },
  { label: 'Cout 70 nchw, bias, no affine, no relu', cs: { n: 1, c: 5, h: 11, w: 13, o: 70, k: 3, stride: 1, pad: 1 }, layout: 'contiguous', bias: true, affine: false, relu: false },
];

for (const { label, cs, layout, bias, affine, relu } of CASES) {
  test(`conv2dBatchNorm on cuda ${label}: tf32, exact f32, bf16 match a float64 reference`, { skip }, () => {
    for (const mode of ['tf32', 'exact', 'bfloat16'] as Mode[]) {
      const dtype: DType = mode === 'bfloat16' ? 'bfloat16' : 'float32';
      const xs = [cs.n, cs.c, cs.h, cs.w];
      const sc = 1 / Math.sqrt(cs.c * cs.k * cs.k);
      const x = kiln.contiguous(makeTensor(randomValues(xs.reduce((a, b) => a * b), 1, -1, 1), xs, dtype).to('cuda'), layout);
      const w = makeTensor(randomValues(cs.o * cs.c * cs.k * cs.k, 2, -sc, sc), [cs.o, cs.c, cs.k, cs.k], dtype).to('cuda');
      const b = bias ? makeTensor(randomValues(cs.o, 3, -0.5, 0.5), [cs.o], dtype).to('cuda') : null;
      const stats = [randomValues(cs.o, 4, -0.3, 0.3), randomValues(cs.o, 5, 0.3, 2), randomValues(cs.o, 6, 0.5, 1.5), randomValues(cs.o, 7, -0.5, 0.5)];
      const st = stats.map((v) => makeTensor(v, [cs.o], dtype).to('cuda'));
      const bnT = { runningMean: st[0]!, runningVar: st[1]!, weight: affine ? st[2]! : null, bias: affine ? st[3]! : null, eps: 1e-3 };
      const y = withTf32(mode !== 'exact', () => F.conv2dBatchNorm(x, w, b, bnT, { stride: cs.stride, padding: cs.pad, relu }));
      const rounded = st.map((t) => t.toFlatArray());
      if (!affine) {
        rounded[2] = new Array<number>(cs.o).fill(1);
        rounded[3] = new Array<number>(cs.o).fill(0);
      }
      const ref = reference(x.contiguous().toFlatArray(), w.toFlatArray(), b ? b.toFlatArray() : null, rounded, 1e-3, cs, relu);
      if (layout === 'channelsLast') assert.equal(y.strides[1], 1, 'channels_last out');
      const got = y.toFlatArray();
      const tol = TOL[mode];
      got.forEach((v, i) => {
        const err = Math.abs(v - ref.y[i]!);
        assert.ok(err <= tol.mag * ref.mag[i]! + tol.rel * Math.abs(ref.y[i]!) + 1e-30, `${label} ${mode} element ${i}: ${v} vs reference ${ref.y[i]} (|x w| sum ${ref.mag[i]})`);
      });
    }
  });
}

test('conv2dBatchNorm on cuda: BatchNorm tensors of mixed dtypes take the unfused path and still match eager ops', { skip }, () => {
  const x = kiln.contiguous(kiln.randn([1, 8, 6, 6], { dtype: 'float32' }).to('cuda'), 'channelsLast');
  const w = kiln.randn([8, 8, 3, 3]).to('cuda');
  const rm = kiln.randn([8]).to('cuda');
  const rv = kiln.add(kiln.rand([8]), 0.5).to('bfloat16').to('cuda');
  const y = withTf32(false, () => F.conv2dBatchNorm(x, w, null, { runningMean: rm, runningVar: rv }, { padding: 1, relu: true }));
  const want = withTf32(false, () => kiln.relu(F.batchNorm(F.conv2d(x, w, null, 1, 1), rm, rv, null, null, false, 0.1, 1e-5)));
  const a = y.toFlatArray();
  const e = want.toFlatArray();
  a.forEach((v, i) => assert.ok(Math.abs(v - e[i]!) <= 1e-5 * (1 + Math.abs(e[i]!)), `element ${i}: ${v} vs ${e[i]}`));
});

class Stack extends kiln.nn.Module {
  conv1: kiln.nn.Conv2d;
  bn1: kiln.nn.BatchNorm2d;
  conv2: kiln.nn.Conv2d;
  bn2: kiln.nn.BatchNorm2d;
  constructor(ch: number) {
    super();
    const generator = new kiln.Generator(7);
    this.conv1 = new kiln.nn.Conv2d(3, ch, 7, { stride: 2, padding: 3, generator });
    this.bn1 = new kiln.nn.BatchNorm2d(ch);
    this.conv2 = new kiln.nn.Conv2d(ch, ch, 3, { padding: 1, generator });
    this.bn2 = new kiln.nn.BatchNorm2d(ch);
    kiln.noGrad(() => {
      for (const bn of [this.bn1, this.bn2]) {
        bn.runningMean!.copy_(kiln.mul(kiln.randn([ch], { generator }), 0.1));
        bn.runningVar!.copy_(kiln.add(kiln.rand([ch], { generator }), 0.5));
        bn.weight!.copy_(kiln.add(kiln.rand([ch], { generator }), 0.5));
        bn.bias!.copy_(kiln.mul(kiln.randn([ch], { generator }), 0.1));
      }
    });
  }
  forward(x: Tensor): Tensor {
    const y = kiln.relu(this.bn1.forward(this.conv1.forward(x)));
    return kiln.relu(this.bn2.forward(this.conv2.forward(y)));
  }
}

for (const dtype of ['float32', 'bfloat16'] as const) {
  test(`kiln.compile on cuda (${dtype}, reduce-overhead): the conv stack folds, equals eager, and follows in-place statistics changes`, { skip }, () => {
    const m = new Stack(32).to('cuda').to(dtype);
    m.eval();
    const x = kiln.contiguous(kiln.randn([2, 3, 30, 30], { generator: new kiln.Generator(8) }).to(dtype).to('cuda'), 'channelsLast');
    const cf = kiln.compile((t: Tensor) => m.forward(t), { mode: 'reduce-overhead' });
    const tol = dtype === 'bfloat16' ? 3e-2 : 2e-5;
    const check = (label: string): void => {
      const e = kiln.noGrad(() => m.forward(x)).toFlatArray();
      // Twice: the first call may record, the second replays.
      for (let r = 0; r < 2; r++) {
        const got = kiln.noGrad(() => cf(x) as Tensor).toFlatArray();
        const scale = Math.max(1, ...e.map(Math.abs));
        got.forEach((v, i) => assert.ok(Math.abs(v - e[i]!) <= tol * scale, `${dtype} ${label} call ${r}: element ${i}: compiled ${v} vs eager ${e[i]}`));
      }
    };
    check('first calls');
    assert.match(cf.programs().inference[0]!.describe(), /conv2dBatchNorm/, 'the program runs the fused op');
    kiln.noGrad(() => {
      m.bn1.runningMean!.copy_(kiln.mul(kiln.randn([32]), 0.5).to(dtype).to('cuda'));
      m.bn2.weight!.mul_(-1);
    });
    check('after in-place changes');
  });
}
