/**
 * The conv -> eval BatchNorm [-> ReLU] fold (src/compile/passes/conv-bn.ts) and its op,
 * conv2dBatchNorm, on the cpu: the op against a float64 reference computed here by naive loops
 * (the native and Wasm kernels, which fold the BatchNorm, and the JS path's unfused reference ops), the pass's matching rules on traced
 * graphs (what folds, what must not), and compiled-vs-eager parity of a conv stack in eval mode,
 * including statistics changed in place after compiling and a train-mode BatchNorm (not folded).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { foldConvBatchNorm } from '../src/compile/passes/index.js';
import type { Graph } from '../src/compile/ir.js';
import { setCpuPath } from '../src/kernels/cpu/native/path.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, randomValues } from './helpers/make.js';
import { refConv2d } from './helpers/nn-ref.js';

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

/** Float64 conv2d (NCHW flat values, the shared refConv2d) -> eval BatchNorm -> optional ReLU. */
function reference(x: number[], w: number[], b: number[] | null, bn: { mean: number[]; vr: number[]; g: number[] | null; beta: number[] | null; eps: number }, cs: Case, relu: boolean): number[] {
  const conv = refConv2d(x, [cs.n, cs.c, cs.h, cs.w], w, [cs.o, cs.c, cs.k, cs.k], b, [cs.stride, cs.stride], [cs.pad, cs.pad, cs.pad, cs.pad], [1, 1], 1);
  const plane = conv.shape[2]! * conv.shape[3]!;
  return conv.values.map((s, idx) => {
    const o = Math.floor(idx / plane) % cs.o;
    const z = ((s - bn.mean[o]!) / Math.sqrt(bn.vr[o]! + bn.eps)) * (bn.g ? bn.g[o]! : 1) + (bn.beta ? bn.beta[o]! : 0);
    return relu ? Math.max(z, 0) : z;
  });
}

function vec(n: number, seed: number, lo: number, hi: number): Tensor {
  return makeTensor(randomValues(n, seed, lo, hi), [n], 'float32');
}

function assertClose(label: string, got: readonly number[], want: readonly number[], tol: number): void {
  assert.equal(got.length, want.length, `${label}: length`);
  const scale = Math.max(1, ...want.map(Math.abs));
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= tol * scale, `${label}: element ${i}: ${v} vs reference ${want[i]}`));
}

const CASES: { label: string; cs: Case; relu: boolean; affine: boolean; bias: boolean; layout: 'channelsLast' | 'contiguous' }[] = [
  { label: 'stem 7x7 s2 channels_last, bias, relu', cs: { n: 2, c: 3, h: 13, w: 11, o: 16, k: 7, stride: 2, pad: 3 }, relu: true, affine: true, bias: true, layout: 'channelsLast' },
  { label: 'body 3x3 channels_last, no bias, relu', cs: { n: 1, c: 16, h: 7, w: 9, o: 20, k: 3, stride: 1, pad: 1 }, relu: true, affine: true, bias: false, layout: 'channelsLast' },
  { label: 'NCHW, no affine, no relu', cs: { n: 2, c: 4, h: 6, w: 5, o: 6, k: 3, stride: 1, pad: 0 }, relu: false, affine: false, bias: true, layout: 'contiguous' },
  // Short K runs (3 x 2 channels): the Wasm conv's patch-rows path rather than its direct one.
  { label: 'narrow 3x3 channels_last, bias, relu', cs: { n: 2, c: 2, h: 6, w: 7, o: 5, k: 3, stride: 1, pad: 1 }, relu: true, affine: true, bias: true, layout: 'channelsLast' },
];

for (const path of ['native', 'wasm', 'js'] as const) {
  for (const { label, cs, relu, affine, bias, layout } of CASES) {
    test(`conv2dBatchNorm (${path} path) ${label} matches a float64 reference`, () => {
      setCpuPath(path);
      try {
        const xs = [cs.n, cs.c, cs.h, cs.w];
        const xv = randomValues(xs.reduce((a, b) => a * b), 1, -1, 1);
        const wv = randomValues(cs.o * cs.c * cs.k * cs.k, 2, -0.3, 0.3);
        const bv = bias ? randomValues(cs.o, 3, -0.5, 0.5) : null;
        const mean = randomValues(cs.o, 4, -0.3, 0.3);
        const vr = randomValues(cs.o, 5, 0.2, 2);
        const g = affine ? randomValues(cs.o, 6, 0.5, 1.5) : null;
        const beta = affine ? randomValues(cs.o, 7, -0.5, 0.5) : null;
        const x = kiln.contiguous(makeTensor(xv, xs, 'float32'), layout);
        const w = makeTensor(wv, [cs.o, cs.c, cs.k, cs.k], 'float32');
        const t = (v: number[] | null): Tensor | null => (v ? makeTensor(v, [cs.o], 'float32') : null);
        const y = F.conv2dBatchNorm(x, w, t(bv), { runningMean: t(mean)!, runningVar: t(vr)!, weight: t(g), bias: t(beta), eps: 1e-3 }, { stride: cs.stride, padding: cs.pad, relu });
        const want = reference(xv, wv, bv, { mean, vr, g, beta, eps: 1e-3 }, cs, relu);
        assertClose(label, y.toFlatArray(), want, 1e-5);
        if (layout === 'channelsLast') assert.equal(y.strides[1], 1, 'channels_last in, channels_last out (as conv2d)');
      } finally {
        setCpuPath(undefined);
      }
    });
  }
}

test('conv2dBatchNorm: a BatchNorm tensor of the wrong size is a clear error', () => {
  const x = kiln.randn([1, 3, 5, 5]);
  const w = kiln.randn([4, 3, 3, 3]);
  assert.throws(() => F.conv2dBatchNorm(x, w, null, { runningMean: kiln.zeros([3]), runningVar: kiln.ones([4]) }), /conv2dBatchNorm: 'runningMean' .*\[3\].* should have shape \[4\]/);
});

class Block extends kiln.nn.Module {
  conv1: kiln.nn.Conv2d;
  bn1: kiln.nn.BatchNorm2d;
  conv2: kiln.nn.Conv2d;
  bn2: kiln.nn.BatchNorm2d;
  constructor(cin: number, ch: number, seed: number) {
    super();
    const generator = new kiln.Generator(seed);
    this.conv1 = new kiln.nn.Conv2d(cin, ch, 7, { stride: 2, padding: 3, generator });
    this.bn1 = new kiln.nn.BatchNorm2d(ch);
    this.conv2 = new kiln.nn.Conv2d(ch, ch, 3, { padding: 1, bias: false, generator });
    this.bn2 = new kiln.nn.BatchNorm2d(ch);
    kiln.noGrad(() => {
      for (const [k, bn] of [this.bn1, this.bn2].entries()) {
        bn.runningMean!.copy_(vec(ch, 10 + k, -0.3, 0.3));
        bn.runningVar!.copy_(vec(ch, 20 + k, 0.5, 1.5));
        bn.weight!.copy_(vec(ch, 30 + k, 0.5, 1.5));
        bn.bias!.copy_(vec(ch, 40 + k, -0.3, 0.3));
      }
    });
  }
  forward(x: Tensor): Tensor {
    const y = kiln.relu(this.bn1.forward(this.conv1.forward(x)));
    // The second BatchNorm is not followed by a ReLU: it folds without one.
    return this.bn2.forward(this.conv2.forward(y));
  }
}

function ops(g: Graph): string[] {
  return g.nodes.map((n) => n.op);
}

test('the pass folds conv -> eval BatchNorm -> ReLU and conv -> BatchNorm; train mode is left alone', () => {
  const m = new Block(3, 8, 1);
  const x = kiln.contiguous(kiln.randn([1, 3, 12, 12], { generator: new kiln.Generator(2) }), 'channelsLast');
  m.eval();
  const g = kiln.noGrad(() => trace((t: Tensor) => m.forward(t), [x]).graph);
  const r = foldConvBatchNorm(g);
  assert.equal(r.folds, 2);
  assert.deepEqual(ops(r.graph).filter((o) => o === 'conv2dBatchNorm' || o === 'conv2d' || o === 'batchNorm' || o === 'relu'), ['conv2dBatchNorm', 'conv2dBatchNorm']);
  const relus = r.graph.nodes.filter((n) => n.op === 'conv2dBatchNorm').map((n) => n.args[12]);
  assert.deepEqual(relus, [{ kind: 'const', value: true }, { kind: 'const', value: false }]);
  m.train();
  const gt = kiln.noGrad(() => trace((t: Tensor) => m.forward(t), [x]).graph);
  assert.equal(foldConvBatchNorm(gt).folds, 0, 'train-mode BatchNorm (batch statistics) is not folded');
  m.eval();
});

test('the pass leaves the chain alone when the conv output is also used elsewhere', () => {
  const w = kiln.randn([4, 3, 3, 3]);
  const [rm, rv] = [kiln.zeros([4]), kiln.ones([4])];
  const fn = (x: Tensor): Tensor => {
    const y = F.conv2d(x, w, null, 1, 1);
    return kiln.add(kiln.relu(F.batchNorm(y, rm, rv, null, null, false, 0.1, 1e-5)), y);
  };
  const g = kiln.noGrad(() => trace(fn, [kiln.randn([1, 3, 6, 6])]).graph);
  assert.equal(foldConvBatchNorm(g).folds, 0);
});

test('kiln.compile (cpu): a conv stack in eval mode folds, equals eager, and follows in-place changes of the statistics', () => {
  const m = new Block(3, 16, 3);
  m.eval();
  const x = kiln.contiguous(kiln.randn([2, 3, 20, 18], { generator: new kiln.Generator(4) }), 'channelsLast');
  const cf = kiln.compile((t: Tensor) => m.forward(t));
  const check = (label: string): void => {
    const eager = kiln.noGrad(() => m.forward(x)).toFlatArray();
    const got = kiln.noGrad(() => cf(x) as Tensor).toFlatArray();
    assertClose(label, got, eager, 1e-5);
  };
  check('first call');
  const program = cf.programs().inference[0]!.describe();
  assert.match(program, /conv2dBatchNorm/, 'the compiled program calls the fused op');
  assert.doesNotMatch(program, /batchNorm\(/, 'no separate batchNorm step remains');
  // Statistics and affine parameters written in place after compiling: the next call sees them.
  kiln.noGrad(() => {
    m.bn1.runningMean!.copy_(vec(16, 50, -1, 1));
    m.bn2.runningVar!.copy_(vec(16, 51, 2, 3));
    m.bn2.weight!.mul_(-1);
  });
  check('after in-place statistics changes');
  // Train-mode calls between inference calls update the running statistics.
  m.train();
  kiln.noGrad(() => m.forward(x));
  m.eval();
  check('after a train-mode forward');
});

test('kiln.compile (cpu): a train-mode BatchNorm is not folded and matches eager (batch statistics, running-stat updates)', () => {
  const make = (): Block => {
    const m = new Block(3, 8, 5);
    m.train();
    return m;
  };
  const me = make();
  const mc = make();
  const x = kiln.randn([2, 3, 10, 10], { generator: new kiln.Generator(6) });
  const cf = kiln.compile((t: Tensor) => mc.forward(t));
  const eager = kiln.noGrad(() => me.forward(x)).toFlatArray();
  const got = kiln.noGrad(() => cf(x) as Tensor).toFlatArray();
  assertClose('train-mode output', got, eager, 1e-4);
  assertClose('running mean after one step', mc.bn1.runningMean!.toFlatArray(), me.bn1.runningMean!.toFlatArray(), 1e-5);
  assert.doesNotMatch(cf.programs().inference[0]!.describe(), /conv2dBatchNorm/);
});
