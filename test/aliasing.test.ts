/**
 * Aliasing rules for ops that write a tensor argument (issue #18 item 1). The expected values are
 * PyTorch's documented behaviour written out by hand: a read input that partially overlaps the
 * written tensor is read as if copied first (so x.add_(x.T) is x + x.T of the original values), and
 * a written tensor whose elements overlap each other (expand) is an error asking for clone().
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { overlapInputCopies } from '../src/ops/dispatch.js';
import { internalOverlap } from '../src/ops/memory-overlap.js';
import { assertThrowsWith } from './helpers/assert.js';

const INTERNAL = 'more than one element of the written-to tensor refers to a single memory location';

function grid(): Tensor {
  // [[0,1,2],[3,4,5],[6,7,8]]
  return kiln.arange(9, { dtype: 'float32' }).view(3, 3);
}

test('x.add_(x.t()) reads the original values: x + x.T', () => {
  const x = grid();
  x.add_(x.t());
  assert.deepEqual(x.toArray(), [
    [0, 4, 8],
    [4, 8, 12],
    [8, 12, 16],
  ]);
});

test('mul_ and copy_ with a transposed view of the destination', () => {
  const x = grid();
  x.mul_(x.t());
  // Elementwise x * x.T of the original grid.
  assert.deepEqual(x.toArray(), [
    [0, 3, 12],
    [3, 16, 35],
    [12, 35, 64],
  ]);
  const y = grid();
  y.copy_(y.t());
  assert.deepEqual(y.toArray(), [
    [0, 3, 6],
    [1, 4, 7],
    [2, 5, 8],
  ]);
});

test('shifted slices of one base: add_ and copy_ read the values from before the write', () => {
  const base = kiln.tensor([1, 2, 3, 4, 5, 6], { dtype: 'float32' });
  base.narrow(0, 1, 4).add_(base.narrow(0, 0, 4));
  // base[1:5] += base[0:4] with the old values: [2+1, 3+2, 4+3, 5+4].
  assert.deepEqual(base.toArray(), [1, 3, 5, 7, 9, 6]);
  const b2 = kiln.tensor([1, 2, 3, 4, 5, 6], { dtype: 'float32' });
  b2.narrow(0, 1, 4).copy_(b2.narrow(0, 0, 4));
  // A write-order copy would smear 1 along the row; torch gives a shift by one.
  assert.deepEqual(b2.toArray(), [1, 1, 2, 3, 4, 6]);
});

test('an op with two tensor inputs, both overlapping the destination (clamp_ with tensor bounds)', () => {
  const x = grid();
  x.clamp_(x.t(), x.t());
  // clamp(x, min=x.T, max=x.T) is x.T (torch: min = max gives that bound).
  assert.deepEqual(x.toArray(), [
    [0, 3, 6],
    [1, 4, 7],
    [2, 5, 8],
  ]);
});

test('the identical view is not copied: x.add_(x) doubles', () => {
  const x = kiln.tensor([1, 2, 3], { dtype: 'float32' });
  const before = overlapInputCopies();
  x.add_(x);
  assert.deepEqual(x.toArray(), [2, 4, 6]);
  const v = x.view(3);
  x.mul_(v); // another object, same offset, shape and strides
  assert.deepEqual(x.toArray(), [4, 16, 36]);
  assert.equal(overlapInputCopies(), before);
});

test('disjoint views of one storage are not copied (row slices, interleaved column slices)', () => {
  const base = kiln.arange(8, { dtype: 'float32' }).view(2, 4);
  const before = overlapInputCopies();
  base.narrow(0, 0, 1).add_(base.narrow(0, 1, 1));
  assert.deepEqual(base.toArray(), [
    [4, 6, 8, 10],
    [4, 5, 6, 7],
  ]);
  const cols = kiln.arange(8, { dtype: 'float32' }).view(4, 2);
  cols.narrow(1, 0, 1).add_(cols.narrow(1, 1, 1));
  assert.deepEqual(cols.toArray(), [
    [1, 1],
    [5, 3],
    [9, 5],
    [13, 7],
  ]);
  assert.equal(overlapInputCopies(), before);
  // The counter does move for a real partial overlap, so the assertions above can fail.
  const x = grid();
  x.add_(x.t());
  assert.equal(overlapInputCopies(), before + 1);
});

test('writing through expand is an error naming the op, argument, shape and strides; the base is untouched', () => {
  const base = kiln.ones([1]);
  assertThrowsWith(() => base.expand(4).add_(1), 'add_', INTERNAL, "'self'", 'shape [4]', 'strides [0]', 'Please clone() the tensor');
  assert.deepEqual(base.toArray(), [1]);
  assertThrowsWith(() => base.expand(4).copy_(kiln.zeros([4])), 'copy_', INTERNAL);
  assertThrowsWith(() => kiln.zeros([3, 1]).expand(3, 2).mul_(2), 'mul_', INTERNAL, 'shape [3, 2]', 'strides [1, 0]');
  // The advised fix works.
  const c = base.expand(4).clone().add_(1);
  assert.deepEqual(c.toArray(), [2, 2, 2, 2]);
  // A size-1 dim with stride 0 has no second index: allowed, as in torch.
  const one = kiln.zeros([1]).expand(1);
  one.add_(1);
  assert.deepEqual(one.toArray(), [1]);
});

test('writing through an overlapping asStrided view is an error; a non-overlapping one is fine', () => {
  const x = kiln.zeros([4]);
  // Element (i, j) is storage i + j: (0, 1) and (1, 0) share one element.
  assertThrowsWith(() => x.asStrided([3, 2], [1, 1]).add_(1), 'add_', INTERNAL, 'strides [1, 1]');
  const y = kiln.zeros([6]);
  y.asStrided([2, 2], [3, 1]).add_(1); // elements 0, 1, 3, 4
  assert.deepEqual(y.toArray(), [1, 1, 0, 1, 1, 0]);
});

test('internalOverlap follows PyTorch: stride 0 is yes, dense is no, gapped and transposed layouts decided', () => {
  assert.equal(internalOverlap([4], [0]), 'yes');
  assert.equal(internalOverlap([1], [0]), 'no');
  assert.equal(internalOverlap([3, 3], [3, 1]), 'no');
  assert.equal(internalOverlap([3, 3], [1, 3]), 'no');
  assert.equal(internalOverlap([2, 2], [4, 1]), 'no');
  assert.equal(internalOverlap([3, 2], [1, 1]), 'yes');
  assert.equal(internalOverlap([2, 3], [2, 1]), 'yes'); // (0, 2) and (1, 0) are both element 2
  assert.equal(internalOverlap([0, 5], [0, 0]), 'no');
  // Too large to decide by visiting: allowed (torch's TOO_HARD).
  assert.equal(internalOverlap([300, 300], [2, 3]), 'tooHard');
});

test('autograd through an in-place op with a partially overlapping input on a non-leaf tensor', () => {
  const a = kiln.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8], { dtype: 'float64' }).view(3, 3).requiresGrad_();
  const y = a.mul(1);
  y.add_(y.t());
  const w = kiln.arange(9, { dtype: 'float64' }).view(3, 3);
  y.mul(w).sum().backward();
  // loss = sum(w * (a + a.T)), so dloss/da = w + w.T.
  assert.deepEqual(a.grad!.toArray(), [
    [0, 4, 8],
    [4, 8, 12],
    [8, 12, 16],
  ]);
  assert.deepEqual(y.toArray(), [
    [0, 4, 8],
    [4, 8, 12],
    [8, 12, 16],
  ]);
});

test('compile: tracing raises the same internal-overlap error; partial overlap matches eager', () => {
  const bad = kiln.compile((t: Tensor) => t.mul(1).expand(4).add_(1), { backend: 'eager' });
  assertThrowsWith(() => bad(kiln.ones([1])), 'add_', INTERNAL);
  const f = kiln.compile(
    (t: Tensor) => {
      const u = t.clone();
      u.add_(u.t());
      return u;
    },
    { backend: 'eager' },
  );
  const out = f(grid()) as Tensor;
  assert.deepEqual(out.toArray(), [
    [0, 4, 8],
    [4, 8, 12],
    [8, 12, 16],
  ]);
});

test('compile, default backend: in-place ops are captured as new values, so partial overlap reads pre-write values', () => {
  // The captured graph is functional (u.add_(u.t()) becomes add(u, transpose(u)) with u rebound to
  // the result), so compiled code needs no input copy; a mutated graph input is written back.
  const f = kiln.compile((t: Tensor) => {
    const u = t.mul(1);
    u.add_(u.t());
    return u;
  });
  const expected = [
    [0, 4, 8],
    [4, 8, 12],
    [8, 12, 16],
  ];
  assert.deepEqual((f(grid()) as Tensor).toArray(), expected);
  const g = kiln.compile((t: Tensor) => t.add_(t.t()));
  const x = grid();
  g(x);
  assert.deepEqual(x.toArray(), expected);
});
