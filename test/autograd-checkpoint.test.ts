/**
 * kiln.checkpoint (gradient checkpointing): gradients through checkpointed segments equal the
 * plain ones exactly (same ops on the same values), for inputs and for parameters the segment
 * closes over, with dropout (the generator state is replayed), non-leaf tensors from outside,
 * several outputs, nesting, and inside kiln.compile. Memory is measured by bench/train-memory.ts,
 * not here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';

const F = kiln.nn.functional;

function leaf(shape: number[], scale = 0.5): Tensor {
  return kiln.randn(shape).mul(scale).requiresGrad_();
}

/** Runs loss().backward() from cleared grads; every leaf's .grad as numbers (null where none). */
function gradsOf(leaves: readonly Tensor[], loss: () => Tensor): (number[] | null)[] {
  for (const t of leaves) t.grad = null;
  loss().backward();
  return leaves.map((t) => (t.grad ? t.grad.toFlatArray() : null));
}

test('checkpointed MLP blocks: parameter and input gradients equal the plain ones exactly', () => {
  kiln.manualSeed(0);
  const x = leaf([4, 8], 1);
  const ws = [leaf([16, 8]), leaf([16, 16]), leaf([8, 16])];
  const bs = [leaf([16]), leaf([16]), leaf([8])];
  const block = (h: Tensor, i: number): Tensor => F.gelu(F.linear(h, ws[i]!, bs[i]!));
  const plain = (): Tensor => [0, 1, 2].reduce((h, i) => block(h, i), x).square().mean();
  const ckpt = (): Tensor => [0, 1, 2].reduce((h, i) => kiln.checkpoint((t: Tensor) => block(t, i), h), x).square().mean();
  const leaves = [x, ...ws, ...bs];
  assert.deepEqual(gradsOf(leaves, ckpt), gradsOf(leaves, plain));
  // Inputs that do not require grad: parameters still get theirs.
  const xd = x.detach();
  const plain2 = (): Tensor => [0, 1, 2].reduce((h, i) => block(h, i), xd).sum();
  const ckpt2 = (): Tensor => kiln.checkpoint((t: Tensor) => [0, 1, 2].reduce((h, i) => block(h, i), t), xd).sum();
  assert.deepEqual(gradsOf(leaves, ckpt2), gradsOf(leaves, plain2));
});

test('the forward saves nothing inside the segment and backward recomputes it once', () => {
  kiln.manualSeed(1);
  const x = leaf([3, 5], 1);
  const w = leaf([5, 5]);
  let calls = 0;
  const seg = (t: Tensor): Tensor => {
    calls++;
    return kiln.tanh(kiln.matmul(t, w)).exp();
  };
  const y = kiln.checkpoint(seg, x);
  assert.equal(calls, 1);
  assert.equal(y.requiresGrad, true);
  assert.equal(y.gradFn?.name, 'CheckpointBackward');
  y.sum().backward();
  assert.equal(calls, 2);
  assert.ok(x.grad && w.grad);
});

test('dropout inside a checkpoint: the recompute draws the same mask (generator state replayed)', () => {
  const run = (useCkpt: boolean): (number[] | null)[] => {
    kiln.manualSeed(7);
    const x = leaf([6, 10], 1);
    const w = leaf([10, 10]);
    const seg = (t: Tensor): Tensor => F.dropout(kiln.matmul(t, w), 0.5, true);
    const y = useCkpt ? kiln.checkpoint(seg, x) : seg(x);
    // Draws after the segment must not depend on whether it was checkpointed.
    const after = kiln.rand([6, 10]);
    y.mul(after).sum().backward();
    return [x.grad!.toFlatArray(), w.grad!.toFlatArray(), after.toFlatArray()];
  };
  assert.deepEqual(run(true), run(false));
});

test('non-leaf tensors from outside, several outputs, a parameter used inside and outside, nesting', () => {
  kiln.manualSeed(2);
  const a = leaf([4, 4], 1);
  const w = leaf([4, 4]);
  // `outside` is a non-leaf the segment closes over (made afresh per run: backward frees its graph).
  let outside = a;
  const seg = (t: Tensor): Tensor[] => {
    const h = kiln.matmul(t, w).add(outside);
    return [h.sin(), kiln.checkpoint((u: Tensor) => u.square().matmul(w), h)];
  };
  const plainSeg = (t: Tensor): Tensor[] => {
    const h = kiln.matmul(t, w).add(outside);
    return [h.sin(), h.square().matmul(w)];
  };
  const lossOf = (segment: (t: Tensor) => Tensor[]): Tensor => {
    outside = a.mul(2).add(1);
    const parts = segment(a);
    return parts[0]!.sum().add(parts[1]!.mul(0.3).sum()).add(kiln.matmul(a, w).mean());
  };
  const leaves = [a, w];
  const got = gradsOf(leaves, () => lossOf((t) => kiln.checkpoint(seg, t)));
  const want = gradsOf(leaves, () => lossOf(plainSeg));
  // w's three contributions are summed in another order than in the plain graph: equal to rounding.
  got.forEach((g, j) => g!.forEach((v, i) => assert.ok(Math.abs(v - want[j]![i]!) <= 1e-6 * (1 + Math.abs(v)), `grad ${j}[${i}]: ${v} vs ${want[j]![i]}`)));
});

test('under noGrad a checkpoint is a plain call; inside kiln.compile it traces and matches eager', () => {
  kiln.manualSeed(3);
  const x = leaf([2, 6], 1);
  const w = leaf([6, 6]);
  const seg = (t: Tensor): Tensor => kiln.relu(kiln.matmul(t, w)).add(t);
  const y = kiln.noGrad(() => kiln.checkpoint(seg, x));
  assert.equal(y.requiresGrad, false);
  const lossOf = (t: Tensor): Tensor => kiln.checkpoint(seg, t).square().sum();
  const f = kiln.compile(lossOf);
  const got = gradsOf([x, w], () => f(x));
  const want = gradsOf([x, w], () => lossOf(x));
  assert.equal(f.counters.fallbacks, 0);
  got.forEach((g, j) => g!.forEach((v, i) => assert.ok(Math.abs(v - want[j]![i]!) <= 1e-5 * (1 + Math.abs(v)), `grad ${j}[${i}]`)));
});
