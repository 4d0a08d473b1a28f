import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { Generator, manualSeed } from '../src/tensor/random.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const { nn } = kiln;
const F64 = { dtype: 'float64' as const };

function t64(values: number[], shape: number[]): Tensor {
  return kiln.tensor(values, F64).reshape(shape);
}

function setValues(p: Tensor, values: number[]): void {
  kiln.noGrad(() => kiln.copy_(p, kiln.tensor(values, { dtype: p.dtype }).reshape([...p.shape])));
}

/** Naive float64 conv2d with explicit top/left padding and output size. */
function refConv(
  x: number[], xs: number[], w: number[], ws: number[], b: number[] | null,
  stride: number[], padTL: number[], dil: number[], groups: number, outHW: number[],
): number[] {
  const [n, c, h, wd] = xs as [number, number, number, number];
  const [oc, icg, kh, kw] = ws as [number, number, number, number];
  const [oh, ow] = outHW as [number, number];
  const ocg = oc / groups;
  const out: number[] = [];
  for (let ni = 0; ni < n; ni++)
    for (let o = 0; o < oc; o++) {
      const g = Math.floor(o / ocg);
      for (let i = 0; i < oh; i++)
        for (let j = 0; j < ow; j++) {
          let s = b ? b[o]! : 0;
          for (let ci = 0; ci < icg; ci++)
            for (let a = 0; a < kh; a++)
              for (let bb = 0; bb < kw; bb++) {
                const y = i * stride[0]! - padTL[0]! + a * dil[0]!;
                const xx = j * stride[1]! - padTL[1]! + bb * dil[1]!;
                if (y < 0 || y >= h || xx < 0 || xx >= wd) continue;
                s += x[((ni * c + g * icg + ci) * h + y) * wd + xx]! * w[((o * icg + ci) * kh + a) * kw + bb]!;
              }
          out.push(s);
        }
    }
  return out;
}

test('Conv2d forward vs a naive float64 conv: stride, padding, dilation, groups, bias, same', () => {
  const cases = [
    { cin: 3, cout: 4, k: [3, 3], stride: [2, 2], padding: [1, 1] as number[] | 'same', dil: [1, 1], groups: 1, bias: true, hw: [7, 6] },
    { cin: 4, cout: 6, k: [3, 2], stride: [1, 2], padding: [1, 2], dil: [2, 1], groups: 2, bias: false, hw: [8, 7] },
    { cin: 2, cout: 2, k: [3, 4], stride: [1, 1], padding: 'same' as const, dil: [1, 1], groups: 2, bias: true, hw: [5, 6] },
    { cin: 2, cout: 3, k: [2, 2], stride: [1, 1], padding: 'same' as const, dil: [2, 1], groups: 1, bias: true, hw: [4, 5] },
  ];
  cases.forEach((cs, ci) => {
    const conv = new nn.Conv2d(cs.cin, cs.cout, cs.k, { stride: cs.stride, padding: cs.padding, dilation: cs.dil, groups: cs.groups, bias: cs.bias, dtype: 'float64', generator: new Generator(ci + 1) });
    assert.deepEqual([...conv.weight.shape], [cs.cout, cs.cin / cs.groups, ...cs.k]);
    assert.equal(conv.bias === null, !cs.bias);
    const xs = [2, cs.cin, ...cs.hw];
    const xv = randomValues(xs.reduce((a, b) => a * b), 10 + ci);
    const y = conv.forward(t64(xv, xs));
    let padTL: number[];
    let outHW: number[];
    if (cs.padding === 'same') {
      // torch: total padding d*(k-1), the smaller half on the top/left.
      padTL = [0, 1].map((d) => Math.floor((cs.dil[d]! * (cs.k[d]! - 1)) / 2));
      outHW = cs.hw;
    } else {
      const pad = cs.padding;
      padTL = pad;
      outHW = [0, 1].map((d) => Math.floor((cs.hw[d]! + 2 * pad[d]! - cs.dil[d]! * (cs.k[d]! - 1) - 1) / cs.stride[d]!) + 1);
    }
    const ref = refConv(xv, xs, conv.weight.toFlatArray(), [...conv.weight.shape], conv.bias ? conv.bias.toFlatArray() : null, cs.stride, padTL, cs.dil, cs.groups, outHW);
    // The CPU conv kernel computes float64 in float32 precision (a kernel limitation), hence float32 tolerances.
    assertClose(y, ref, [2, cs.cout, ...outHW], { atol: 1e-5, rtol: 1e-5 });
  });
});

test('Conv2d default init: weight and bias U(-1/sqrt(fanIn), 1/sqrt(fanIn)), fanIn = inChannels/groups * kh * kw', () => {
  const conv = new nn.Conv2d(8, 64, [3, 5], { groups: 2, generator: new Generator(3) });
  const bound = 1 / Math.sqrt(4 * 15);
  const w = conv.weight.toFlatArray();
  assert.ok(w.every((v) => Math.abs(v) <= bound * (1 + 1e-6)), 'weights within the bound');
  assert.ok(Math.max(...w.map(Math.abs)) > 0.98 * bound, 'weights fill the range');
  const varw = w.reduce((a, v) => a + v * v, 0) / w.length;
  assert.ok(Math.abs(varw / (bound * bound / 3) - 1) < 0.1, `variance ${varw} vs bound^2/3`);
  const b = conv.bias!.toFlatArray();
  assert.ok(b.every((v) => Math.abs(v) <= bound * (1 + 1e-6)));
  assert.ok(Math.max(...b.map(Math.abs)) > 0.5 * bound);
});

test('Conv2d errors: channels not divisible by groups, same with stride, wrong input channels', () => {
  assertThrowsWith(() => new nn.Conv2d(3, 4, 3, { groups: 2 }), 'Conv2d', 'inChannels (3)', 'groups (2)');
  assertThrowsWith(() => new nn.Conv2d(4, 3, 3, { groups: 2 }), 'Conv2d', 'outChannels (3)');
  assertThrowsWith(() => new nn.Conv2d(4, 4, 3, { padding: 'same', stride: 2 }), 'Conv2d', 'same', 'stride');
  const conv = new nn.Conv2d(3, 4, 3);
  assertThrowsWith(() => conv.forward(kiln.zeros([1, 2, 5, 5])), 'conv2d');
});

function refLayerNorm(x: number[], rows: number, n: number, w: number[], b: number[], eps: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    const v = x.slice(r * n, r * n + n);
    const m = v.reduce((a, c) => a + c, 0) / n;
    const varr = v.reduce((a, c) => a + (c - m) ** 2, 0) / n;
    v.forEach((c, i) => out.push(((c - m) / Math.sqrt(varr + eps)) * w[i]! + b[i]!));
  }
  return out;
}

test('LayerNorm over two trailing dims vs float64 reference; defaults, no-affine and no-bias variants', () => {
  const ln = new nn.LayerNorm([3, 4], 1e-3, true, true, F64);
  assert.deepEqual([...ln.weight!.toFlatArray()], new Array(12).fill(1));
  assert.deepEqual([...ln.bias!.toFlatArray()], new Array(12).fill(0));
  const w = randomValues(12, 2);
  const b = randomValues(12, 3);
  setValues(ln.weight!, w);
  setValues(ln.bias!, b);
  const xv = randomValues(2 * 5 * 12, 4, -3, 5);
  assertClose(ln.forward(t64(xv, [2, 5, 3, 4])), refLayerNorm(xv, 10, 12, w, b, 1e-3), [2, 5, 3, 4], { atol: 1e-12, rtol: 1e-10 });
  const plain = new nn.LayerNorm(12, 1e-5, false, true, F64);
  assert.equal(plain.weight, null);
  assert.equal([...plain.parameters()].length, 0);
  assertClose(plain.forward(t64(xv, [10, 12])), refLayerNorm(xv, 10, 12, new Array(12).fill(1), new Array(12).fill(0), 1e-5), [10, 12], { atol: 1e-12, rtol: 1e-10 });
  const noBias = new nn.LayerNorm(12, 1e-5, true, false);
  assert.deepEqual([...noBias.namedParameters()].map(([n]) => n), ['weight']);
});

/** Per-channel batch mean and biased/unbiased variance of NCHW values. */
function channelStats(x: number[], shape: number[]): { mean: number[]; varB: number[]; varU: number[] } {
  const [n, c, h, w] = shape as [number, number, number, number];
  const mean: number[] = [];
  const varB: number[] = [];
  const varU: number[] = [];
  const m = n * h * w;
  for (let ci = 0; ci < c; ci++) {
    const vals: number[] = [];
    for (let ni = 0; ni < n; ni++) for (let i = 0; i < h * w; i++) vals.push(x[(ni * c + ci) * h * w + i]!);
    const mu = vals.reduce((a, b) => a + b, 0) / m;
    const ss = vals.reduce((a, b) => a + (b - mu) ** 2, 0);
    mean.push(mu);
    varB.push(ss / m);
    varU.push(ss / (m - 1));
  }
  return { mean, varB, varU };
}

function refBn(x: number[], shape: number[], mean: number[], varr: number[], w: number[], b: number[], eps: number): number[] {
  const [n, c, h, wd] = shape as [number, number, number, number];
  const out = new Array<number>(x.length);
  for (let ni = 0; ni < n; ni++)
    for (let ci = 0; ci < c; ci++)
      for (let i = 0; i < h * wd; i++) {
        const k = (ni * c + ci) * h * wd + i;
        out[k] = ((x[k]! - mean[ci]!) / Math.sqrt(varr[ci]! + eps)) * w[ci]! + b[ci]!;
      }
  return out;
}

test('BatchNorm2d: training uses batch stats and updates running stats (unbiased var) and numBatchesTracked; eval uses running stats', () => {
  const shape = [3, 2, 4, 5];
  const bn = new nn.BatchNorm2d(2, 1e-5, 0.2, true, true, F64);
  assert.deepEqual(Object.keys(bn.stateDict()), ['weight', 'bias', 'runningMean', 'runningVar', 'numBatchesTracked']);
  assert.deepEqual([...bn.parameters()].length, 2);
  assert.equal(bn.numBatchesTracked!.dtype, 'int64');
  const w = [1.5, -0.5];
  const b = [0.25, 2];
  setValues(bn.weight!, w);
  setValues(bn.bias!, b);
  let rm = [0, 0];
  let rv = [1, 1];
  for (let step = 0; step < 3; step++) {
    const xv = randomValues(120, 20 + step, -1 + step, 3 + 2 * step);
    const st = channelStats(xv, shape);
    const y = bn.forward(t64(xv, shape));
    assertClose(y, refBn(xv, shape, st.mean, st.varB, w, b, 1e-5), shape, { atol: 1e-10, rtol: 1e-10 });
    rm = rm.map((v, i) => 0.8 * v + 0.2 * st.mean[i]!);
    rv = rv.map((v, i) => 0.8 * v + 0.2 * st.varU[i]!);
    assertClose(bn.runningMean!, rm, [2], { atol: 1e-12, rtol: 1e-12 });
    assertClose(bn.runningVar!, rv, [2], { atol: 1e-12, rtol: 1e-12 });
    assert.equal(Number(bn.numBatchesTracked!.item()), step + 1);
  }
  bn.eval();
  const xv = randomValues(120, 40);
  const y = bn.forward(t64(xv, shape));
  assertClose(y, refBn(xv, shape, rm, rv, w, b, 1e-5), shape, { atol: 1e-10, rtol: 1e-10 });
  assertClose(bn.runningMean!, rm, [2], { atol: 1e-12, rtol: 1e-12 });
  assert.equal(Number(bn.numBatchesTracked!.item()), 3, 'eval does not count batches');
  bn.resetRunningStats();
  assert.deepEqual(bn.runningVar!.toFlatArray(), [1, 1]);
  assert.equal(Number(bn.numBatchesTracked!.item()), 0);
});

test('BatchNorm2d: momentum null is a cumulative average; affine false; trackRunningStats false uses batch stats in eval', () => {
  const shape = [2, 3, 2, 2];
  const bn = new nn.BatchNorm2d(3, 1e-5, null, false, true, F64);
  assert.equal([...bn.parameters()].length, 0);
  const xs = [randomValues(24, 50), randomValues(24, 51, 0, 4), randomValues(24, 52, -5, 1)];
  xs.forEach((xv) => bn.forward(t64(xv, shape)));
  const stats = xs.map((xv) => channelStats(xv, shape));
  assertClose(bn.runningMean!, [0, 1, 2].map((c) => (stats[0]!.mean[c]! + stats[1]!.mean[c]! + stats[2]!.mean[c]!) / 3), [3], { atol: 1e-12, rtol: 1e-12 });
  assertClose(bn.runningVar!, [0, 1, 2].map((c) => (stats[0]!.varU[c]! + stats[1]!.varU[c]! + stats[2]!.varU[c]!) / 3), [3], { atol: 1e-12, rtol: 1e-12 });

  const free = new nn.BatchNorm2d(3, 1e-5, 0.1, true, false, F64);
  assert.equal(free.runningMean, null);
  assert.deepEqual(Object.keys(free.stateDict()), ['weight', 'bias']);
  free.eval();
  const st = stats[1]!;
  assertClose(free.forward(t64(xs[1]!, shape)), refBn(xs[1]!, shape, st.mean, st.varB, [1, 1, 1], [0, 0, 0], 1e-5), shape, { atol: 1e-10, rtol: 1e-10 });
});

test('BatchNorm errors: wrong rank and wrong channel count', () => {
  const bn = new nn.BatchNorm2d(3);
  assertThrowsWith(() => bn.forward(kiln.zeros([2, 3, 4])), 'BatchNorm2d', '4D', '[2, 3, 4]');
  assertThrowsWith(() => bn.forward(kiln.zeros([2, 4, 3, 3])), 'BatchNorm2d', '3 channels', '[2, 4, 3, 3]');
  const bn1 = new nn.BatchNorm1d(4, 1e-5, 0.1, true, true, F64);
  const xv = randomValues(20, 60);
  const y = bn1.forward(t64(xv, [5, 4]));
  const ref: number[] = [];
  const means = [0, 1, 2, 3].map((c) => [0, 1, 2, 3, 4].reduce((a, r) => a + xv[r * 4 + c]!, 0) / 5);
  const vars = [0, 1, 2, 3].map((c) => [0, 1, 2, 3, 4].reduce((a, r) => a + (xv[r * 4 + c]! - means[c]!) ** 2, 0) / 5);
  for (let r = 0; r < 5; r++) for (let c = 0; c < 4; c++) ref.push((xv[r * 4 + c]! - means[c]!) / Math.sqrt(vars[c]! + 1e-5));
  assertClose(y, ref, [5, 4], { atol: 1e-10, rtol: 1e-10 });
});

test('activations: ReLU, GELU (exact and tanh), SiLU, Tanh, Sigmoid vs float64 formulas', () => {
  const xv = [-6, -2.5, -1, -0.1, 0, 0.3, 1, 2, 7];
  const x = t64(xv, [9]);
  const erf = (z: number): number => {
    // Abramowitz-Stegun 7.1.26 is too coarse; integrate the series instead.
    let s = 0;
    let term = z;
    for (let n = 0; n < 200; n++) {
      s += term / (2 * n + 1);
      term *= (-z * z) / (n + 1);
    }
    return (2 / Math.sqrt(Math.PI)) * s;
  };
  assertClose(new nn.ReLU().forward(x), xv.map((v) => Math.max(v, 0)), [9]);
  assertClose(new nn.GELU().forward(x), xv.map((v) => 0.5 * v * (1 + erf(v / Math.SQRT2))), [9], { atol: 1e-7, rtol: 1e-7 });
  const k = Math.sqrt(2 / Math.PI);
  assertClose(new nn.GELU('tanh').forward(x), xv.map((v) => 0.5 * v * (1 + Math.tanh(k * (v + 0.044715 * v ** 3)))), [9], { atol: 1e-12, rtol: 1e-12 });
  assertClose(new nn.SiLU().forward(x), xv.map((v) => v / (1 + Math.exp(-v))), [9], { atol: 1e-12, rtol: 1e-12 });
  assertClose(new nn.Tanh().forward(x), xv.map(Math.tanh), [9], { atol: 1e-12, rtol: 1e-12 });
  assertClose(new nn.Sigmoid().forward(x), xv.map((v) => 1 / (1 + Math.exp(-v))), [9], { atol: 1e-12, rtol: 1e-12 });
  assertThrowsWith(() => new nn.GELU('fast' as 'tanh'), 'GELU', 'fast');
});

test('Dropout respects training: identity in eval, masked and scaled by 1/(1-p) in training', () => {
  const x = kiln.ones([200, 50], F64);
  const d = new nn.Dropout(0.25, new Generator(5));
  const y = d.forward(x).toFlatArray();
  const zeros = y.filter((v) => v === 0).length;
  // The dropout kernel's scale is a float32 1/(1-p), even for float64 input.
  assert.ok(y.every((v) => v === 0 || Math.abs(v - 1 / 0.75) < 1e-6), 'kept values scaled by 1/(1-p)');
  assert.ok(Math.abs(zeros / y.length - 0.25) < 0.03, `dropped fraction ${zeros / y.length}`);
  const model = new nn.Sequential(new nn.Linear(50, 50, true, F64), d);
  model.eval();
  assert.equal(d.training, false);
  assert.deepEqual(d.forward(x).toFlatArray(), x.toFlatArray());
  assertThrowsWith(() => new nn.Dropout(1.5), 'Dropout', '1.5');
});

class Block extends nn.Module {
  norm = new nn.BatchNorm2d(2);
  layers = new nn.ModuleList([new nn.Linear(3, 4), new nn.Linear(4, 4, false)]);
  head = new nn.Sequential(new nn.Linear(4, 2), new nn.ReLU(), new nn.Sequential(new nn.Linear(2, 1)));
}

test('registration and names: nested Sequential / ModuleList give layers.0.weight, head.2.0.bias, buffers included', () => {
  const m = new Block();
  assert.deepEqual(
    [...m.namedParameters()].map(([n]) => n),
    ['norm.weight', 'norm.bias', 'layers.0.weight', 'layers.0.bias', 'layers.1.weight', 'head.0.weight', 'head.0.bias', 'head.2.0.weight', 'head.2.0.bias'],
  );
  assert.deepEqual([...m.namedBuffers()].map(([n]) => n), ['norm.runningMean', 'norm.runningVar', 'norm.numBatchesTracked']);
  assert.deepEqual(
    [...m.namedModules()].map(([n]) => n),
    ['', 'norm', 'layers', 'layers.0', 'layers.1', 'head', 'head.0', 'head.1', 'head.2', 'head.2.0'],
  );
  assert.equal(m.numParameters(), 2 + 2 + 12 + 4 + 16 + 8 + 2 + 2 + 1);
  // ModuleList: indexable, iterable, append, at(-1), length.
  assert.equal(m.layers.length, 2);
  assert.ok(m.layers[0] instanceof nn.Linear);
  assert.equal([...m.layers].length, 2);
  m.layers.append(new nn.Linear(4, 3));
  assert.equal(m.layers.length, 3);
  assert.equal(m.layers.at(-1), m.layers[2]);
  assert.ok([...m.namedParameters()].some(([n]) => n === 'layers.2.bias'));
  assertThrowsWith(() => m.layers.at(3), 'ModuleList', 'index 3', '3 modules');
  assertThrowsWith(() => new nn.ModuleList([new nn.ReLU(), 5 as unknown as kiln.nn.Module]), 'ModuleList', 'item 1');
  assertThrowsWith(() => new nn.Sequential(new nn.ReLU(), new nn.ModuleList()), 'Sequential', 'item 1', 'no forward');
});

test('Sequential.forward chains the children in order', () => {
  manualSeed(9);
  const a = new nn.Linear(3, 5, true, F64);
  const b = new nn.Linear(5, 2, true, F64);
  const seq = new nn.Sequential(a, new nn.Tanh(), b);
  const xv = randomValues(12, 70);
  const x = t64(xv, [4, 3]);
  const W1 = a.weight.toFlatArray();
  const B1 = a.bias!.toFlatArray();
  const W2 = b.weight.toFlatArray();
  const B2 = b.bias!.toFlatArray();
  const ref: number[] = [];
  for (let r = 0; r < 4; r++) {
    const h = [0, 1, 2, 3, 4].map((o) => Math.tanh(B1[o]! + [0, 1, 2].reduce((s, i) => s + W1[o * 3 + i]! * xv[r * 3 + i]!, 0)));
    for (let o = 0; o < 2; o++) ref.push(B2[o]! + h.reduce((s, v, i) => s + W2[o * 5 + i]! * v, 0));
  }
  assertClose(seq.forward(x), ref, [4, 2], { atol: 1e-12, rtol: 1e-12 });
  assert.equal(seq.length, 3);
  assert.equal(seq[1] instanceof nn.Tanh, true);
});

test('stateDict round trip into a fresh model reproduces its outputs; loadStateDict strict errors', () => {
  manualSeed(1);
  const a = new Block();
  a.norm.forward(kiln.randn([4, 2, 3, 3]));
  manualSeed(2);
  const b = new Block();
  const sd = a.stateDict();
  assert.deepEqual(Object.keys(sd), [
    'norm.weight', 'norm.bias', 'norm.runningMean', 'norm.runningVar', 'norm.numBatchesTracked',
    'layers.0.weight', 'layers.0.bias', 'layers.1.weight', 'head.0.weight', 'head.0.bias', 'head.2.0.weight', 'head.2.0.bias',
  ]);
  const res = b.loadStateDict(sd);
  assert.deepEqual(res, { missingKeys: [], unexpectedKeys: [] });
  for (const [k, v] of Object.entries(b.stateDict())) assert.deepEqual(v.toFlatArray(), sd[k]!.toFlatArray(), k);
  const x = kiln.randn([3, 3]);
  const run = (m: Block): number[] => m.head.forward(m.layers[1]!.forward(m.layers[0]!.forward(x))).toFlatArray();
  assert.deepEqual(run(b), run(a));
  // Loaded values are copies, not aliases.
  kiln.noGrad(() => a.head[0] && kiln.fill_((a.head[0] as InstanceType<typeof nn.Linear>).weight, 0));
  assert.notDeepEqual(b.stateDict()['head.0.weight']!.toFlatArray(), a.stateDict()['head.0.weight']!.toFlatArray());

  const missing = { ...sd };
  delete missing['layers.1.weight'];
  assertThrowsWith(() => b.loadStateDict(missing), 'loadStateDict', 'missing keys', 'layers.1.weight');
  assertThrowsWith(() => b.loadStateDict({ ...sd, 'extra.weight': kiln.zeros([1]) }), 'loadStateDict', 'unexpected keys', 'extra.weight');
  assertThrowsWith(() => b.loadStateDict({ ...sd, 'head.0.weight': kiln.zeros([3, 4]) }), 'loadStateDict', 'head.0.weight', '[3, 4]', '[2, 4]');
  const loose = b.loadStateDict({ ...missing, 'extra.weight': kiln.zeros([1]) }, { strict: false });
  assert.deepEqual(loose, { missingKeys: ['layers.1.weight'], unexpectedKeys: ['extra.weight'] });
});

test("to('float64') casts parameters and floating buffers (not the int64 counter); train/eval propagate", () => {
  const m = new Block();
  m.to('float64');
  for (const [n, p] of m.namedParameters()) {
    assert.equal(p.dtype, 'float64', n);
    assert.ok(p instanceof nn.Parameter && p.requiresGrad, n);
  }
  assert.equal(m.norm.runningMean!.dtype, 'float64');
  assert.equal(m.norm.numBatchesTracked!.dtype, 'int64');
  assert.equal(m.head.forward(kiln.ones([2, 4], F64)).dtype, 'float64');
  m.eval();
  assert.ok([...m.modules()].every((x) => !x.training));
  m.train();
  assert.ok([...m.modules()].every((x) => x.training));
  m.head.train(false);
  assert.equal(m.training, true);
  assert.equal((m.head[2] as kiln.nn.Module).training, false);
});

test('init statistics: Linear weight and bias within exactly ±1/sqrt(in); Embedding N(0, 1), padding row zero', () => {
  const lin = new nn.Linear(400, 300, true, { generator: new Generator(11) });
  const bound = 1 / Math.sqrt(400);
  const w = lin.weight.toFlatArray();
  assert.ok(w.every((v) => Math.abs(v) <= bound * (1 + 1e-7)), 'within bound');
  assert.ok(Math.max(...w) > 0.999 * bound && Math.min(...w) < -0.999 * bound, 'reaches both ends');
  const mw = w.reduce((a, v) => a + v, 0) / w.length;
  const vw = w.reduce((a, v) => a + (v - mw) ** 2, 0) / w.length;
  assert.ok(Math.abs(mw) < 0.02 * bound, `mean ${mw}`);
  assert.ok(Math.abs(vw / (bound * bound / 3) - 1) < 0.02, `variance ${vw}`);
  assert.ok(lin.bias!.toFlatArray().every((v) => Math.abs(v) <= bound * (1 + 1e-7)));
  const emb = new nn.Embedding(1000, 64, 3, { generator: new Generator(12) });
  const e = emb.weight.toFlatArray();
  const me = e.reduce((a, v) => a + v, 0) / e.length;
  const se = Math.sqrt(e.reduce((a, v) => a + (v - me) ** 2, 0) / e.length);
  assert.ok(Math.abs(me) < 0.02, `mean ${me}`);
  assert.ok(Math.abs(se - 1) < 0.02, `std ${se}`);
  assert.deepEqual(e.slice(3 * 64, 4 * 64), new Array(64).fill(0));
});

test('nn.functional re-exports the functional ops', () => {
  const F = nn.functional;
  assert.equal(F.relu, kiln.relu);
  assert.equal(F.conv2d, kiln.conv2d);
  assert.equal(F.layerNorm, kiln.layerNorm);
  assert.equal(F.scaledDotProductAttention, kiln.scaledDotProductAttention);
  assert.equal(F.logSoftmax, kiln.logSoftmax);
  for (const name of ['linear', 'rmsNorm', 'groupNorm', 'batchNorm', 'embedding', 'dropout', 'gelu', 'silu', 'softmax', 'maxPool2d', 'avgPool2d', 'softplus', 'sigmoid', 'tanh']) {
    assert.equal(typeof (F as unknown as Record<string, unknown>)[name], 'function', name);
  }
  const x = t64([-3, -0.5, 0, 2], [4]);
  assertClose(F.leakyRelu(x, 0.1), [-0.3, -0.05, 0, 2], [4], { atol: 1e-12, rtol: 1e-12 });
  assertClose(F.logsigmoid(x), [-3, -0.5, 0, 2].map((v) => -Math.log1p(Math.exp(-v))), [4], { atol: 1e-12, rtol: 1e-12 });
  assertClose(F.hardtanh(x), [-1, -0.5, 0, 1], [4]);
  const oh = F.oneHot(kiln.tensor([2, 0, 1], { dtype: 'int64' }), 4);
  assert.equal(oh.dtype, 'int64');
  assert.deepEqual(oh.toFlatArray(), [0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0]);
  assertThrowsWith(() => F.oneHot(kiln.tensor([5], { dtype: 'int64' }), 3), 'oneHot', '5');
  const v = t64([3, 4, 0, 0, 1, 0], [2, 3]);
  assertClose(F.normalize(v, 2, 1), [0.6, 0.8, 0, 0, 1, 0], [2, 3], { atol: 1e-12, rtol: 1e-12 });
});

test('GroupNorm module vs float64 reference; channel/group mismatch error', () => {
  const gn = new nn.GroupNorm(2, 4, 1e-5, true, F64);
  const w = [1, 2, -1, 0.5];
  const b = [0, 1, 2, 3];
  setValues(gn.weight!, w);
  setValues(gn.bias!, b);
  const xv = randomValues(2 * 4 * 3, 80);
  const ref: number[] = [];
  for (let n = 0; n < 2; n++)
    for (let g = 0; g < 2; g++) {
      const vals = xv.slice(n * 12 + g * 6, n * 12 + g * 6 + 6);
      const m = vals.reduce((a, v) => a + v, 0) / 6;
      const vr = vals.reduce((a, v) => a + (v - m) ** 2, 0) / 6;
      vals.forEach((v, i) => {
        const c = g * 2 + Math.floor(i / 3);
        ref.push(((v - m) / Math.sqrt(vr + 1e-5)) * w[c]! + b[c]!);
      });
    }
  assertClose(gn.forward(t64(xv, [2, 4, 3])), ref, [2, 4, 3], { atol: 1e-10, rtol: 1e-10 });
  assertThrowsWith(() => new nn.GroupNorm(3, 4), 'GroupNorm', 'numChannels (4)', 'numGroups (3)');
});

test('a conv net (Conv2d, BatchNorm2d, GELU, LayerNorm, Linear) backpropagates into every parameter; SGD step with a closure', () => {
  manualSeed(4);
  const net = new nn.Sequential(
    new nn.Conv2d(2, 4, 3, { padding: 1, dtype: 'float64' }),
    new nn.BatchNorm2d(4, 1e-5, 0.1, true, true, F64),
    new nn.GELU('tanh'),
    new nn.Conv2d(4, 2, 2, { stride: 2, dtype: 'float64' }),
  );
  const head = new nn.Sequential(new nn.LayerNorm(8, 1e-5, true, true, F64), new nn.Linear(8, 3, true, F64));
  const x = t64(randomValues(2 * 2 * 4 * 4, 30), [2, 2, 4, 4]);
  const target = kiln.tensor([2, 0], { dtype: 'int64' });
  const params = [...net.parameters(), ...head.parameters()];
  const before = params.map((p) => p.toFlatArray());
  const opt = new kiln.optim.SGD(params, { lr: 0.1 });
  const loss = opt.step(() => {
    opt.zeroGrad();
    const l = nn.functional.crossEntropy(head.forward(net.forward(x).flatten(1)), target);
    l.backward();
    return l;
  });
  assert.ok(loss !== undefined && Number.isFinite(Number(loss.item())));
  for (const [name, p] of [...net.namedParameters('net'), ...head.namedParameters('head')]) {
    assert.ok(p.grad !== null, `${name} has a grad`);
    assert.deepEqual([...p.grad.shape], [...p.shape], name);
  }
  params.forEach((p, i) => assertClose(p, before[i]!.map((v, j) => v - 0.1 * p.grad!.toFlatArray()[j]!), [...p.shape], { atol: 1e-12, rtol: 1e-12 }));
  assert.equal(Number((net[1] as InstanceType<typeof nn.BatchNorm2d>).numBatchesTracked!.item()), 1);
});
