import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const { nn, optim } = kiln;
const TOL = { atol: 1e-13, rtol: 1e-12 };

function param(values: number[]): Tensor {
  return new nn.Parameter(kiln.tensor(values, { dtype: 'float64' }));
}
function setGrad(p: Tensor, g: number[]): void {
  p.grad = kiln.tensor(g, { dtype: 'float64' });
}

const P0 = [0.5, -1.25, 2, 0.1];
const GRADS = [0, 1, 2, 3, 4].map((s) => randomValues(4, 100 + s, -2, 2));

/** torch.optim.SGD's update, written out per element in float64. */
function refSgd(o: { lr: number; momentum?: number; dampening?: number; wd?: number; nesterov?: boolean; maximize?: boolean }, steps: number): number[][] {
  const p = [...P0];
  let buf: number[] | null = null;
  const out: number[][] = [];
  for (let s = 0; s < steps; s++) {
    const g = GRADS[s]!.map((v, i) => (o.maximize ? -v : v) + (o.wd ?? 0) * p[i]!);
    let d = g;
    if (o.momentum) {
      buf = buf === null ? [...g] : buf.map((b, i) => o.momentum! * b + (1 - (o.dampening ?? 0)) * g[i]!);
      d = o.nesterov ? g.map((v, i) => v + o.momentum! * buf![i]!) : buf;
    }
    for (let i = 0; i < 4; i++) p[i] = p[i]! - o.lr * d[i]!;
    out.push([...p]);
  }
  return out;
}

test('SGD vs hand-computed float64 updates over 5 steps: plain, momentum, dampening, nesterov, weight decay, maximize', () => {
  const configs = [
    { lr: 0.1 },
    { lr: 0.05, momentum: 0.9 },
    { lr: 0.05, momentum: 0.8, dampening: 0.3 },
    { lr: 0.02, momentum: 0.9, nesterov: true, wd: 0.01 },
    { lr: 0.1, wd: 0.5, maximize: true, momentum: 0.5 },
  ];
  for (const c of configs) {
    const p = param(P0);
    const opt = new optim.SGD([p], { lr: c.lr, momentum: c.momentum, dampening: c.dampening, weightDecay: c.wd, nesterov: c.nesterov, maximize: c.maximize });
    const ref = refSgd(c, 5);
    for (let s = 0; s < 5; s++) {
      setGrad(p, GRADS[s]!);
      opt.step();
      assertClose(p, ref[s]!, [4], TOL);
    }
  }
});

/** torch.optim.Adam / AdamW per element in float64. */
function refAdam(o: { lr: number; b1: number; b2: number; eps: number; wd: number; amsgrad: boolean; decoupled: boolean; maximize?: boolean }, steps: number): number[][] {
  const p = [...P0];
  const m = [0, 0, 0, 0];
  const v = [0, 0, 0, 0];
  const vmax = [0, 0, 0, 0];
  const out: number[][] = [];
  for (let t = 1; t <= steps; t++) {
    for (let i = 0; i < 4; i++) {
      let g = GRADS[t - 1]![i]! * (o.maximize ? -1 : 1);
      if (o.decoupled) p[i] = p[i]! * (1 - o.lr * o.wd);
      else g += o.wd * p[i]!;
      m[i] = o.b1 * m[i]! + (1 - o.b1) * g;
      v[i] = o.b2 * v[i]! + (1 - o.b2) * g * g;
      vmax[i] = Math.max(vmax[i]!, v[i]!);
      const mhat = m[i]! / (1 - o.b1 ** t);
      const vhat = (o.amsgrad ? vmax[i]! : v[i]!) / (1 - o.b2 ** t);
      p[i] = p[i]! - (o.lr * mhat) / (Math.sqrt(vhat) + o.eps);
    }
    out.push([...p]);
  }
  return out;
}

test('AdamW and Adam vs hand-computed float64 updates over 5 steps, with and without amsgrad', () => {
  // Gradients shrink at step 3 so that amsgrad's running max actually differs from v.
  const saved = GRADS.map((g) => [...g]);
  GRADS[3] = GRADS[3]!.map((g) => g * 0.01);
  try {
    for (const decoupled of [true, false]) {
      for (const amsgrad of [false, true]) {
        for (const [lr, wd, b1, b2, eps, maximize] of [
          [1e-2, 1e-2, 0.9, 0.999, 1e-8, false],
          [0.05, 0.1, 0.8, 0.9, 1e-3, true],
        ] as const) {
          const p = param(P0);
          const opts = { lr, weightDecay: wd, betas: [b1, b2] as [number, number], eps, amsgrad, maximize };
          const opt = decoupled ? new optim.AdamW([p], opts) : new optim.Adam([p], opts);
          const ref = refAdam({ lr, b1, b2, eps, wd, amsgrad, decoupled, maximize }, 5);
          for (let s = 0; s < 5; s++) {
            setGrad(p, GRADS[s]!);
            opt.step();
            assertClose(p, ref[s]!, [4], TOL);
          }
          assert.equal(opt.state.get(p)!.step, 5);
        }
      }
    }
    // With amsgrad the trajectory differs from plain AdamW (the test above is not vacuous).
    const a = refAdam({ lr: 0.05, b1: 0.8, b2: 0.9, eps: 1e-3, wd: 0.1, amsgrad: true, decoupled: true }, 5)[4]!;
    const b = refAdam({ lr: 0.05, b1: 0.8, b2: 0.9, eps: 1e-3, wd: 0.1, amsgrad: false, decoupled: true }, 5)[4]!;
    assert.ok(a.some((v, i) => Math.abs(v - b[i]!) > 1e-6));
  } finally {
    saved.forEach((g, i) => (GRADS[i] = g));
  }
  // Defaults are torch's: AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weightDecay 1e-2; Adam weightDecay 0.
  const d = new optim.AdamW([param([1])]).paramGroups[0]!;
  assert.deepEqual([d.lr, d.betas, d.eps, d.weightDecay, d.amsgrad], [1e-3, [0.9, 0.999], 1e-8, 1e-2, false]);
  assert.equal(new optim.Adam([param([1])]).paramGroups[0]!.weightDecay, 0);
});

test('updates are in place on the module parameters; params without grad are skipped; per-group options', () => {
  const lin = new nn.Linear(3, 2, true, { dtype: 'float64' });
  const w = lin.weight;
  const before = w.toFlatArray();
  const b0 = lin.bias!.toFlatArray();
  const opt = new optim.SGD([{ params: [lin.weight], lr: 0.5 }, { params: [lin.bias!] }], { lr: 0.1 });
  assert.deepEqual(opt.paramGroups.map((g) => g.lr), [0.5, 0.1]);
  w.grad = kiln.onesLike(w);
  opt.step();
  assert.equal(lin.weight, w, 'same Parameter object');
  assert.ok(lin.weight instanceof nn.Parameter && lin.weight.requiresGrad);
  assertClose(lin.weight, before.map((v) => v - 0.5), [2, 3], TOL);
  assert.deepEqual(lin.bias!.toFlatArray(), b0, 'bias had no grad');
  lin.bias!.grad = kiln.onesLike(lin.bias!);
  opt.step();
  assertClose(lin.bias!, b0.map((v) => v - 0.1), [2], TOL);
  opt.zeroGrad(false);
  assert.deepEqual(w.grad!.toFlatArray(), [0, 0, 0, 0, 0, 0]);
  opt.zeroGrad();
  assert.equal(w.grad, null);
  assert.equal(lin.bias!.grad, null);
});

test('optimizer stateDict / loadStateDict resumes the same trajectory; mismatch errors', () => {
  const p1 = param(P0);
  const opt1 = new optim.AdamW([p1], { lr: 0.05, amsgrad: true });
  for (let s = 0; s < 2; s++) {
    setGrad(p1, GRADS[s]!);
    opt1.step();
  }
  const sd = opt1.stateDict();
  assert.deepEqual(sd.paramGroups[0]!.params, [0]);
  assert.equal(sd.state[0]!.step, 2);
  const p2 = param(p1.toFlatArray());
  const opt2 = new optim.AdamW([p2], { lr: 0.9 });
  opt2.loadStateDict(sd);
  assert.equal(opt2.paramGroups[0]!.lr, 0.05);
  assert.equal(opt2.paramGroups[0]!.amsgrad, true);
  for (let s = 2; s < 5; s++) {
    setGrad(p1, GRADS[s]!);
    setGrad(p2, GRADS[s]!);
    opt1.step();
    opt2.step();
  }
  assert.deepEqual(p2.toFlatArray(), p1.toFlatArray());
  assert.notEqual(opt2.state.get(p2)!.expAvg, opt1.state.get(p1)!.expAvg, 'state is copied');
  const two = new optim.AdamW([{ params: [param([1])] }, { params: [param([2])] }]);
  assertThrowsWith(() => two.loadStateDict(sd), 'AdamW.loadStateDict', '1 parameter groups', 'has 2');
  const wide = new optim.AdamW([param([1]), param([2])]);
  assertThrowsWith(() => wide.loadStateDict(sd), 'AdamW.loadStateDict', 'group 0', '1 parameters', '2 in the optimizer');
});

test('optimizer argument errors', () => {
  assertThrowsWith(() => new optim.SGD([], { lr: 0.1 }), 'SGD', 'empty parameter list');
  assertThrowsWith(() => new optim.SGD([param([1])], { lr: -1 }), 'SGD', 'learning rate', '-1');
  assertThrowsWith(() => new optim.SGD([param([1])], { lr: 0.1, nesterov: true }), 'SGD', 'Nesterov');
  assertThrowsWith(() => new optim.SGD([param([1])], { lr: 0.1, momentum: -0.5 }), 'SGD', 'momentum', '-0.5');
  assertThrowsWith(() => new optim.AdamW([param([1])], { betas: [1, 0.9] }), 'AdamW', 'beta', 'index 0', '1');
  assertThrowsWith(() => new optim.AdamW([param([1])], { eps: -1 }), 'AdamW', 'epsilon');
  const p = param([1]);
  assertThrowsWith(() => new optim.SGD([{ params: [p] }, { params: [p] }], { lr: 0.1 }), 'SGD', 'more than one parameter group');
  const q = kiln.add(p, 1);
  assert.notEqual(q.gradFn, null);
  assertThrowsWith(() => new optim.SGD([q], { lr: 0.1 }), 'SGD', 'non-leaf', '[1]');
});

function makeOpt(lrs: number[]): InstanceType<typeof optim.SGD> {
  return new optim.SGD(lrs.map((lr) => ({ params: [param([1])], lr })), { lr: 1 });
}

function collect(s: { step(): void; getLastLr(): number[] }, n: number): number[][] {
  const out = [s.getLastLr()];
  for (let i = 1; i < n; i++) {
    s.step();
    out.push(s.getLastLr());
  }
  return out;
}

function assertSeq(got: number[][], want: number[][]): void {
  assert.equal(got.length, want.length);
  got.forEach((g, i) => g.forEach((v, j) => assert.ok(Math.abs(v - want[i]![j]!) < 1e-12, `step ${i} group ${j}: ${v} vs ${want[i]![j]}`)));
}

test('CosineAnnealingLR, LinearLR, StepLR, LambdaLR: lr sequences vs closed forms, written into the groups', () => {
  const opt = makeOpt([0.1, 0.02]);
  const cos = new optim.CosineAnnealingLR(opt, 10, 0.001);
  const want = Array.from({ length: 25 }, (_, t) => [0.1, 0.02].map((b) => 0.001 + ((b - 0.001) * (1 + Math.cos((Math.PI * t) / 10))) / 2));
  assertSeq(collect(cos, 25), want);
  assert.equal(opt.paramGroups[1]!.lr, cos.getLastLr()[1]);
  assert.equal(opt.paramGroups[0]!.initialLr, 0.1);

  const lin = new optim.LinearLR(makeOpt([0.3]), 0.25, 1, 4);
  assertSeq(collect(lin, 7), [0.25, 0.4375, 0.625, 0.8125, 1, 1, 1].map((f) => [0.3 * f]));
  const st = new optim.StepLR(makeOpt([1]), 3, 0.5);
  assertSeq(collect(st, 8), [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25].map((v) => [v]));
  const lam = new optim.LambdaLR(makeOpt([2, 4]), [(t) => 1 / (t + 1), (t) => 0.9 ** t]);
  assertSeq(collect(lam, 4), [0, 1, 2, 3].map((t) => [2 / (t + 1), 4 * 0.9 ** t]));
});

test('linearWarmup and warmupCosine (LLM schedule) vs closed forms; scheduler state dict', () => {
  const w = optim.linearWarmup(makeOpt([0.01]), 4, 0.2);
  assertSeq(collect(w, 7), [0.2, 0.4, 0.6, 0.8, 1, 1, 1].map((f) => [0.01 * f]));
  const opt = makeOpt([1e-3, 5e-4]);
  const wc = optim.warmupCosine(opt, { warmupSteps: 5, totalSteps: 25, minLrRatio: 0.1 });
  const want = Array.from({ length: 30 }, (_, t) =>
    [1e-3, 5e-4].map((b) => {
      if (t < 5) return (b * t) / 5;
      const p = Math.min(1, (t - 5) / 20);
      return 0.1 * b + 0.5 * (b - 0.1 * b) * (1 + Math.cos(Math.PI * p));
    }),
  );
  const got = collect(wc, 30);
  assertSeq(got, want);
  assert.equal(got[5]![0], 1e-3, 'peak lr right after warmup');
  assert.ok(Math.abs(got[29]![1]! - 5e-5) < 1e-15, 'stays at minLr after totalSteps');
  // Absolute minLr and a non-zero start factor.
  const wc2 = new optim.WarmupCosineLR(makeOpt([1]), { warmupSteps: 2, totalSteps: 4, minLr: 0.2, startFactor: 0.5 });
  assertSeq(collect(wc2, 5), [[0.5], [0.75], [1], [0.6], [0.2]]);
  // State dict: a fresh scheduler picks up at the saved step.
  const sd = wc.stateDict();
  assert.equal(sd.lastEpoch, 29);
  const opt3 = makeOpt([1e-3, 5e-4]);
  const wc3 = optim.warmupCosine(opt3, { warmupSteps: 5, totalSteps: 25, minLrRatio: 0.1 });
  wc3.loadStateDict({ lastEpoch: 7, baseLrs: sd.baseLrs });
  assertSeq([wc3.getLastLr()], [want[7]!]);
  assertThrowsWith(() => optim.warmupCosine(makeOpt([1]), { warmupSteps: 5, totalSteps: 5 }), 'WarmupCosineLR', 'totalSteps (5)', 'warmupSteps (5)');
  assertThrowsWith(() => new optim.CosineAnnealingLR(makeOpt([1]), 0), 'CosineAnnealingLR', 'tMax');
  assertThrowsWith(() => new optim.LinearLR(makeOpt([1]), 0), 'LinearLR', 'startFactor');
  assertThrowsWith(() => new optim.CosineAnnealingLR(makeOpt([1]), 5, 0, 3), 'CosineAnnealingLR', 'initialLr', 'paramGroups[0]');
});

test('clipGradNorm_: total norm (2, 1, inf) over all grads vs float64, scaling to maxNorm, untouched below it', () => {
  const ga = [3, -4, 1, 2, 0.5, -1];
  const gb = [2, -2, 7];
  const norm = (p: number): number =>
    p === Infinity ? Math.max(...[...ga, ...gb].map(Math.abs)) : [...ga, ...gb].reduce((s, v) => s + Math.abs(v) ** p, 0) ** (1 / p);
  for (const p of [2, 1, 3, Infinity]) {
    const A = new nn.Parameter(kiln.zeros([2, 3], { dtype: 'float64' }));
    const B = param([0, 0, 0]);
    const C = param([0]);
    A.grad = kiln.tensor(ga, { dtype: 'float64' }).reshape([2, 3]);
    setGrad(B, gb);
    const total = optim.clipGradNorm_([A, B, C], 2.5, p);
    const n = norm(p);
    assert.ok(Math.abs(Number(total.item()) - n) < 1e-5 * n, `norm ${p}: ${String(total.item())} vs ${n}`);
    const coef = Math.min(1, 2.5 / (n + 1e-6));
    assertClose(A.grad, ga.map((v) => v * coef), [2, 3], { atol: 1e-6, rtol: 1e-6 });
    assertClose(B.grad!, gb.map((v) => v * coef), [3], { atol: 1e-6, rtol: 1e-6 });
    assert.equal(C.grad, null);
  }
  const small = param([0, 0]);
  setGrad(small, [0.3, 0.4]);
  const t = nn.clipGradNorm_(small, 1);
  assert.ok(Math.abs(Number(t.item()) - 0.5) < 1e-6);
  assertClose(small.grad!, [0.3, 0.4], [2], { atol: 1e-6, rtol: 1e-6 });
  const bad = param([0, 0]);
  setGrad(bad, [Infinity, 1]);
  assertThrowsWith(() => nn.clipGradNorm_([bad], 1, 2, true), 'clipGradNorm_', 'non-finite');
  assertThrowsWith(() => nn.clipGradNorm_([bad], 1, 0), 'clipGradNorm_', 'normType');
});

test('clipGradValue_ clamps every gradient element', () => {
  const a = param([0, 0, 0, 0]);
  setGrad(a, [-3, -0.5, 0.2, 9]);
  nn.clipGradValue_([a], 1);
  assert.deepEqual(a.grad!.toFlatArray(), [-1, -0.5, 0.2, 1]);
  assertThrowsWith(() => nn.clipGradValue_([a], -1), 'clipGradValue_', '-1');
});
