import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';

const F = kiln.nn.functional;
const TOL = { atol: 1e-12, rtol: 1e-10 };

function t64(values: number[], shape: number[]): Tensor {
  return kiln.tensor(values, { dtype: 'float64' }).reshape(shape);
}
function ints(values: number[], shape: number[] = [values.length]): Tensor {
  return kiln.tensor(values, { dtype: 'int64' }).reshape(shape);
}

/** log-softmax of each row, computed in float64 with the max subtracted. */
function logSoftmaxRow(row: number[]): number[] {
  const m = Math.max(...row);
  const lse = m + Math.log(row.reduce((a, v) => a + Math.exp(v - m), 0));
  return row.map((v) => v - lse);
}

/** Rows [M, C] of an [N, C, ...] tensor, in the order of the target's elements. */
function rowsOf(x: number[], shape: number[]): number[][] {
  const [n, c] = shape as [number, number];
  const inner = shape.slice(2).reduce((a, b) => a * b, 1);
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) for (let k = 0; k < inner; k++) rows.push(Array.from({ length: c }, (_, j) => x[(i * c + j) * inner + k]!));
  return rows;
}

/** torch's cross entropy with class weights, ignore index and label smoothing. */
function refCrossEntropy(x: number[], shape: number[], target: number[], o: { w?: number[]; ignore?: number; s?: number; red: 'mean' | 'sum' | 'none' }): number[] {
  const c = shape[1]!;
  const w = o.w ?? new Array<number>(c).fill(1);
  const s = o.s ?? 0;
  const ignore = o.ignore ?? -100;
  const pairs: { nll: number; smooth: number }[] = [];
  let wsum = 0;
  rowsOf(x, shape).forEach((row, i) => {
    const t = target[i]!;
    if (t === ignore) {
      pairs.push({ nll: 0, smooth: 0 });
      return;
    }
    const lp = logSoftmaxRow(row);
    wsum += w[t]!;
    pairs.push({ nll: -w[t]! * lp[t]!, smooth: -lp.reduce((a, v, j) => a + w[j]! * v, 0) });
  });
  if (o.red === 'none') return pairs.map((p) => (1 - s) * p.nll + (s / c) * p.smooth);
  const nllSum = pairs.reduce((a, p) => a + p.nll, 0);
  const smSum = pairs.reduce((a, p) => a + p.smooth, 0);
  if (o.red === 'sum') return [(1 - s) * nllSum + (s / c) * smSum];
  return [(1 - s) * (nllSum / wsum) + (s / c) * (smSum / wsum)];
}

test('crossEntropy [N, C] vs float64 reference: reductions, ignoreIndex, class weights, label smoothing', () => {
  const shape = [6, 4];
  const x = randomValues(24, 1, -4, 4);
  const target = [0, 3, -100, 2, 1, 3];
  const w = [0.5, 2, 1, 1.5];
  for (const red of ['mean', 'sum', 'none'] as const) {
    for (const s of [0, 0.1, 0.35]) {
      for (const useW of [false, true]) {
        const got = F.crossEntropy(t64(x, shape), ints(target), { reduction: red, labelSmoothing: s, weight: useW ? t64(w, [4]) : null });
        const ref = refCrossEntropy(x, shape, target, { red, s, w: useW ? w : undefined });
        assertClose(got, ref, red === 'none' ? [6] : [], TOL);
      }
    }
  }
  // A custom ignoreIndex; -100 is then an ordinary (invalid) value.
  const t2 = [1, 1, 3, 2, 0, 0];
  assertClose(F.crossEntropy(t64(x, shape), ints(t2), { ignoreIndex: 1 }), refCrossEntropy(x, shape, t2, { red: 'mean', ignore: 1 }), [], TOL);
  // float32 input works with float32 tolerance.
  assertClose(F.crossEntropy(kiln.tensor(x).reshape(shape), ints(target)), refCrossEntropy(x, shape, target, { red: 'mean' }), [], { atol: 1e-5, rtol: 1e-5 });
  // Every target ignored: the mean is 0/0 = NaN, as in torch.
  assert.ok(Number.isNaN(Number(F.crossEntropy(t64(x, shape), ints(new Array(6).fill(-100))).item())));
});

test('crossEntropy on [N, C, H, W] logits with [N, H, W] targets, unbatched [C], and probability targets', () => {
  const shape = [2, 3, 2, 2];
  const x = randomValues(24, 2, -3, 3);
  const target = [0, 2, 1, -100, 2, 2, 0, 1];
  const got = F.crossEntropy(t64(x, shape), ints(target, [2, 2, 2]), { labelSmoothing: 0.2 });
  assertClose(got, refCrossEntropy(x, shape, target, { red: 'mean', s: 0.2 }), [], TOL);
  const none = F.crossEntropy(t64(x, shape), ints(target, [2, 2, 2]), { reduction: 'none' });
  assertClose(none, refCrossEntropy(x, shape, target, { red: 'none' }), [2, 2, 2], TOL);

  const row = [0.5, -1, 2, 0.25];
  assertClose(F.crossEntropy(t64(row, [4]), ints([2], [])), [-logSoftmaxRow(row)[2]!], [], TOL);

  const probs = [0.1, 0.6, 0.3, 1, 0, 0];
  const logits = [1, 2, 0.5, -1, 0, 3];
  const ref = [0, 1].map((i) => -logSoftmaxRow(logits.slice(3 * i, 3 * i + 3)).reduce((a, v, j) => a + probs[3 * i + j]! * v, 0));
  assertClose(F.crossEntropy(t64(logits, [2, 3]), t64(probs, [2, 3])), [(ref[0]! + ref[1]!) / 2], [], TOL);
  const sm = 0.3;
  const refS = [0, 1].map((i) => -logSoftmaxRow(logits.slice(3 * i, 3 * i + 3)).reduce((a, v, j) => a + (probs[3 * i + j]! * (1 - sm) + sm / 3) * v, 0));
  assertClose(F.crossEntropy(t64(logits, [2, 3]), t64(probs, [2, 3]), { labelSmoothing: sm, reduction: 'sum' }), [refS[0]! + refS[1]!], [], TOL);
});

test('nllLoss on log-probabilities with weights and ignoreIndex', () => {
  const target = [4, 0, -100, 2, 2];
  const w = [1, 2, 3, 4, 5];
  let num = 0;
  let den = 0;
  const lp5 = randomValues(25, 4, -5, 0);
  const none5: number[] = [];
  target.forEach((t, i) => {
    if (t === -100) {
      none5.push(0);
      return;
    }
    none5.push(-w[t]! * lp5[i * 5 + t]!);
    num += -w[t]! * lp5[i * 5 + t]!;
    den += w[t]!;
  });
  const x = t64(lp5, [5, 5]);
  assertClose(F.nllLoss(x, ints(target), { weight: t64(w, [5]) }), [num / den], [], TOL);
  assertClose(F.nllLoss(x, ints(target), { weight: t64(w, [5]), reduction: 'none' }), none5, [5], TOL);
  assertClose(F.nllLoss(x, ints(target), { weight: t64(w, [5]), reduction: 'sum' }), [num], [], TOL);
});

test('crossEntropy / nllLoss errors name the function and the shapes', () => {
  const x = kiln.zeros([4, 3]);
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, 2])), 'crossEntropy', "'target' [3] int64", '[4, 3] float32', 'expected target shape [4]');
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, 3, 2])), 'crossEntropy', 'target class 3', '3 classes');
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, -1, 2])), 'crossEntropy', 'target class -1');
  assertThrowsWith(() => F.crossEntropy(x, kiln.zeros([4])), 'crossEntropy', "probability 'target' [4] float32", '[4, 3]');
  assertThrowsWith(() => F.crossEntropy(x, kiln.tensor([true, false, true, true])), 'crossEntropy', 'integer class indices', 'bool');
  assertThrowsWith(() => F.crossEntropy(ints([1, 2, 3, 4], [2, 2]), ints([0, 1])), 'crossEntropy', "'input' must be a floating point", 'int64');
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, 2, 2]), { labelSmoothing: 1.5 }), 'crossEntropy', 'labelSmoothing', '1.5');
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, 2, 2]), { reduction: 'avg' as 'mean' }), 'crossEntropy', "'avg'");
  assertThrowsWith(() => F.crossEntropy(x, ints([0, 1, 2, 2]), { weight: kiln.ones([4]) }), 'crossEntropy', "'weight'", '3 class weights', '[4] float32');
  assertThrowsWith(() => F.nllLoss(x, ints([0, 1, 2, 7])), 'nllLoss', 'target class 7');
});

/** -[pw t log σ(x) + (1 - t) log σ(-x)] with log σ written piecewise (independent of the kernel form). */
function logSigmoid(x: number): number {
  return x >= 0 ? -Math.log1p(Math.exp(-x)) : x - Math.log1p(Math.exp(x));
}

test('binaryCrossEntropyWithLogits: stable at large |x|, posWeight, weight, reductions', () => {
  const xs = [-1000, -100, -30, -2, -0.5, 0, 0.5, 3, 40, 100, 1000];
  const ts = [0, 1, 0.3, 1, 0, 0.5, 1, 0, 1, 0, 0.7];
  const ref = xs.map((x, i) => -(ts[i]! * logSigmoid(x) + (1 - ts[i]!) * logSigmoid(-x)));
  const got = F.binaryCrossEntropyWithLogits(t64(xs, [11]), t64(ts, [11]), { reduction: 'none' });
  assertClose(got, ref, [11], TOL);
  assert.ok(got.toFlatArray().every(Number.isFinite));
  assertClose(F.binaryCrossEntropyWithLogits(t64(xs, [11]), t64(ts, [11])), [ref.reduce((a, b) => a + b) / 11], [], TOL);
  // float32 at large |x|: still finite and exact-ish.
  const g32 = F.binaryCrossEntropyWithLogits(kiln.tensor(xs), kiln.tensor(ts), { reduction: 'none' });
  assertClose(g32, ref, [11], { atol: 1e-5, rtol: 1e-5 });

  const x2 = randomValues(6, 5, -4, 4);
  const t2 = [1, 0, 1, 1, 0, 0.25];
  const pw = [2, 0.5, 3];
  const w = [1, 2, 0.5, 1, 1, 3];
  const ref2 = x2.map((x, i) => -w[i]! * (pw[i % 3]! * t2[i]! * logSigmoid(x) + (1 - t2[i]!) * logSigmoid(-x)));
  const got2 = F.binaryCrossEntropyWithLogits(t64(x2, [2, 3]), t64(t2, [2, 3]), { posWeight: t64(pw, [3]), weight: t64(w, [2, 3]), reduction: 'sum' });
  assertClose(got2, [ref2.reduce((a, b) => a + b)], [], TOL);
  assertThrowsWith(() => F.binaryCrossEntropyWithLogits(kiln.zeros([2, 3]), kiln.zeros([3, 2])), 'binaryCrossEntropyWithLogits', '[2, 3]', '[3, 2]');
});

test('binaryCrossEntropy on probabilities clamps log at -100', () => {
  const p = [0, 0.2, 0.5, 0.9, 1];
  const t = [0, 1, 0.5, 0, 1];
  const lg = (v: number): number => Math.max(Math.log(v), -100);
  const ref = p.map((v, i) => -(t[i]! * lg(v) + (1 - t[i]!) * lg(1 - v)));
  assertClose(F.binaryCrossEntropy(t64(p, [5]), t64(t, [5]), { reduction: 'none' }), ref, [5], TOL);
  const p2 = [0, 1];
  assertClose(F.binaryCrossEntropy(t64(p2, [2]), t64([1, 0], [2]), { reduction: 'sum' }), [200], [], TOL);
});

test('mseLoss, l1Loss, huberLoss vs float64 references; shape and dtype errors', () => {
  const a = randomValues(12, 6, -3, 3);
  const b = randomValues(12, 7, -3, 3);
  const A = t64(a, [3, 4]);
  const B = t64(b, [3, 4]);
  const sq = a.map((v, i) => (v - b[i]!) ** 2);
  const ab = a.map((v, i) => Math.abs(v - b[i]!));
  assertClose(F.mseLoss(A, B), [sq.reduce((x, y) => x + y) / 12], [], TOL);
  assertClose(F.mseLoss(A, B, 'sum'), [sq.reduce((x, y) => x + y)], [], TOL);
  assertClose(F.mseLoss(A, B, 'none'), sq, [3, 4], TOL);
  assertClose(F.l1Loss(A, B), [ab.reduce((x, y) => x + y) / 12], [], TOL);
  assertClose(F.l1Loss(A, B, 'none'), ab, [3, 4], TOL);
  const hub = ab.map((d) => (d < 1.5 ? 0.5 * d * d : 1.5 * (d - 0.75)));
  assertClose(F.huberLoss(A, B, 'none', 1.5), hub, [3, 4], TOL);
  assertThrowsWith(() => F.mseLoss(kiln.zeros([3, 4]), kiln.zeros([4, 3])), 'mseLoss', "'input' [3, 4] float32", "'target' [4, 3] float32");
  assertThrowsWith(() => F.l1Loss(ints([1, 2]), ints([1, 2])), 'l1Loss', 'floating point', 'int64');
  assertThrowsWith(() => F.mseLoss(A, B, 'total' as 'sum'), 'mseLoss', "'total'");
});

test('losses backpropagate: crossEntropy (ignoreIndex, labelSmoothing) gradient vs the analytic softmax - target, gradchecks', () => {
  const shape = [5, 4];
  const xv = randomValues(20, 90, -3, 3);
  const target = [1, -100, 3, 0, 3];
  const s = 0.2;
  const x = t64(xv, shape).requiresGrad_();
  F.crossEntropy(x, ints(target), { labelSmoothing: s }).backward();
  const kept = target.filter((t) => t !== -100).length;
  const ref: number[] = [];
  for (let i = 0; i < 5; i++) {
    const row = xv.slice(i * 4, i * 4 + 4);
    const p = logSoftmaxRow(row).map(Math.exp);
    for (let j = 0; j < 4; j++) ref.push(target[i] === -100 ? 0 : (p[j]! - ((1 - s) * (j === target[i] ? 1 : 0) + s / 4)) / kept);
  }
  assertClose(x.grad!, ref, shape, { atol: 1e-12, rtol: 1e-10 });

  const w = t64([0.5, 2, 1, 1.5], [4]);
  kiln.gradcheck((a) => F.crossEntropy(a, ints(target), { weight: w, labelSmoothing: 0.1 }), [t64(xv, shape).requiresGrad_()]);
  kiln.gradcheck((a) => F.crossEntropy(a, ints([0, 2, 1, -100, 2, 2, 0, 1], [2, 2, 2]), { reduction: 'sum' }), [t64(randomValues(24, 91), [2, 3, 2, 2]).requiresGrad_()]);
  const bx = t64([-50, -2, 0.3, 4, 60], [5]).requiresGrad_();
  const bt = [0, 1, 0.5, 1, 0];
  F.binaryCrossEntropyWithLogits(bx, t64(bt, [5])).backward();
  assertClose(bx.grad!, [-50, -2, 0.3, 4, 60].map((v, i) => (1 / (1 + Math.exp(-v)) - bt[i]!) / 5), [5], { atol: 1e-12, rtol: 1e-10 });
  kiln.gradcheck((a, b) => F.mseLoss(a, b), [t64(randomValues(6, 92), [2, 3]).requiresGrad_(), t64(randomValues(6, 93), [2, 3]).requiresGrad_()]);
  kiln.gradcheck((a) => F.l1Loss(a, t64(randomValues(6, 94), [2, 3])), [t64(randomValues(6, 95), [2, 3]).requiresGrad_()]);
});
