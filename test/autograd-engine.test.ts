/**
 * The autograd engine, tested with the core ops' formulas and a test-only op, so it does not
 * depend on any op group's formulas.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { defineBackward } from '../src/autograd/graph.js';
import { defineOp, registerKernel } from '../src/ops/registry.js';
import { dispatch } from '../src/ops/dispatch.js';
import { mapUnary, mapBinary } from '../src/kernels/cpu/pointwise-loop.js';
import type { TensorMeta } from '../src/tensor/tensor.js';
import type { Tensor } from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';
import { makeTensor } from './helpers/make.js';

// A test op: cube(x) = x^3 with d/dx = 3x^2, reading the saved input.
const cubeOp = defineOp({
  name: 'testCube',
  args: [{ name: 'self', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (self: TensorMeta) => ({ shape: self.shape, strides: self.strides, dtype: self.dtype, device: self.device }),
});
registerKernel(cubeOp, 'cpu', (ctx, x) => mapUnary(ctx.out, x, (v) => v * v * v));
const timesOp = defineOp({
  name: 'testTimes',
  args: [
    { name: 'self', type: 'Tensor' },
    { name: 'other', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (a: TensorMeta, _b: TensorMeta) => ({ shape: a.shape, strides: a.strides, dtype: a.dtype, device: a.device }),
});
registerKernel(timesOp, 'cpu', (ctx, a, b) => mapBinary(ctx.out, a, b, (x, y) => x * y));
const cube = (x: Tensor): Tensor => dispatch(cubeOp, x);
const times = (a: Tensor, b: Tensor): Tensor => dispatch(timesOp, a, b);
defineBackward(cubeOp, (ctx, [g]) => [times(g!, times(times(ctx.args[0] as Tensor, ctx.args[0] as Tensor), kiln.tensor(3)))], { save: ['self'] });
defineBackward(timesOp, (ctx, [g]) => [times(g!, ctx.args[1] as Tensor), times(g!, ctx.args[0] as Tensor)], { save: ['self', 'other'] });

const sumAll = (t: Tensor): Tensor => kiln.add(t, 0); // stays a graph node; seeds pick elements

test('gradients accumulate over every use of a leaf, across backward calls', () => {
  const x = kiln.tensor([1, 2, 3]).requiresGrad_();
  const y = kiln.add(kiln.add(x, x), x, 2); // 4x
  y.backward(kiln.tensor([1, 1, 1]));
  assert.deepEqual(x.grad!.toArray(), [4, 4, 4]);
  const gradRef = x.grad!;
  kiln.add(x, 1).backward(kiln.tensor([1, 0, 2]));
  assert.deepEqual(x.grad!.toArray(), [5, 4, 6], 'a second backward adds to .grad');
  assert.equal(x.grad, gradRef, 'accumulation happens in place, like PyTorch');
});

test('saved inputs feed formulas; chain rule through a test op', () => {
  const x = kiln.tensor([1, -2, 0.5]).requiresGrad_();
  const y = cube(cube(x)); // x^9, d/dx = 9 x^8
  y.backward(kiln.tensor([1, 1, 1]));
  assert.deepEqual(x.grad!.toArray(), [9, 9 * 256, 9 * 0.5 ** 8]);
});

test('retainGraph: a second backward through released nodes is a clear error', () => {
  const x = kiln.tensor([2]).requiresGrad_();
  const y = cube(x);
  y.backward(kiln.tensor([1]), { retainGraph: true });
  y.backward(kiln.tensor([1]));
  assert.deepEqual(x.grad!.toArray(), [24]);
  assertThrowsWith(() => y.backward(kiln.tensor([1])), 'testCube', 'second time', 'retainGraph');
});

test('in-place changes to a saved tensor are caught at backward', () => {
  const x = kiln.tensor([1, 2]).requiresGrad_();
  const h = kiln.add(x, 1);
  const y = cube(h);
  kiln.add_(h, 1);
  assertThrowsWith(() => y.backward(kiln.tensor([1, 1])), 'testCube', 'modified by an in-place operation', 'version 1, expected 0');
});

test('in-place ops: leaves that require grad are rejected, non-leaves rebase their history', () => {
  const x = kiln.tensor([1, 2]).requiresGrad_();
  assertThrowsWith(() => x.add_(1), 'add_', 'leaf tensor', 'in-place');
  assert.deepEqual(x.toArray(), [1, 2], 'the rejected op wrote nothing');
  kiln.noGrad(() => x.add_(1));
  assert.deepEqual(x.toArray(), [2, 3], 'under noGrad the update is allowed');
  const h = cube(x); // 8, 27
  h.add_(x, 10); // h = x^3 + 10x
  assert.equal(h.gradFn?.name, 'add_');
  h.backward(kiln.tensor([1, 1]));
  assert.deepEqual(x.grad!.toArray(), [3 * 4 + 10, 3 * 9 + 10]);
});

test('noGrad, noGradScope, enableGrad, detach, requiresGrad rules', () => {
  const x = kiln.tensor([1, 2]).requiresGrad_();
  assert.equal(kiln.noGrad(() => kiln.add(x, 1)).requiresGrad, false);
  {
    using _ = kiln.noGradScope();
    assert.equal(kiln.add(x, 1).requiresGrad, false);
    assert.equal(kiln.enableGrad(() => kiln.add(x, 1)).requiresGrad, true);
  }
  assert.equal(kiln.add(x, 1).requiresGrad, true);
  const d = kiln.add(x, 1).detach();
  assert.equal(d.requiresGrad, false);
  assert.equal(d.isLeaf, true);
  assertThrowsWith(() => kiln.tensor([1, 2], { dtype: 'int64' }).requiresGrad_(), 'requiresGrad_', 'floating point', 'int64');
  assert.equal(kiln.add(kiln.tensor([1], { dtype: 'int32' }), 1).requiresGrad, false);
  assertThrowsWith(() => kiln.add(x, 1).backward(), 'backward', 'scalar outputs', '[2]');
  assertThrowsWith(() => kiln.tensor([1]).backward(), 'backward', 'does not require grad');
  assertThrowsWith(() => kiln.add(x, 1).backward(kiln.tensor([1, 2, 3])), 'backward', '[3]', '[2]');
});

test('retainGrad keeps the gradient of a non-leaf; ops without formulas fail at backward, not before', () => {
  const x = kiln.tensor([1, 2]).requiresGrad_();
  const h = cube(x).retainGrad();
  const y = times(h, kiln.tensor([2, 3]));
  y.backward(kiln.tensor([1, 1]));
  assert.deepEqual(h.grad!.toArray(), [2, 3]);
  assert.deepEqual(x.grad!.toArray(), [6, 36]);
});

test('broadcast gradients are summed back to the input shape (sumToShape)', () => {
  const a = makeTensor([1, 2, 3, 4, 5, 6], [2, 3], 'float64').requiresGrad_();
  const b = makeTensor([10, 20, 30], [3], 'float64').requiresGrad_();
  kiln.add(a, b, 2).backward(kiln.tensor([[1, 1, 1], [1, 2, 3]], { dtype: 'float64' }));
  assert.deepEqual(a.grad!.toArray(), [[1, 1, 1], [1, 2, 3]]);
  assert.deepEqual(b.grad!.toArray(), [4, 6, 8]);
});

test('scope disposes temporaries but keeps results, leaf grads and kept tensors', () => {
  const x = kiln.tensor([1, 2, 3]).requiresGrad_();
  const before = kiln.memoryStats().allocatedBytes;
  let inner: Tensor | undefined;
  const out = kiln.scope(() => {
    inner = kiln.add(x, 1);
    const kept = kiln.keep(kiln.add(x, 5));
    const y = kiln.add(inner, 2);
    y.backward(kiln.tensor([1, 1, 1]));
    return { y, list: [kept] };
  });
  assert.equal(inner!.isDisposed, true);
  assert.equal(out.y.isDisposed, false);
  assert.equal(out.list[0]!.isDisposed, false);
  assert.deepEqual(x.grad!.toArray(), [1, 1, 1], 'the leaf gradient survives the scope');
  out.y.dispose();
  out.list[0]!.dispose();
  x.grad!.dispose();
  x.grad = null;
  assert.equal(kiln.memoryStats().allocatedBytes, before);
  assertThrowsWith(() => kiln.scope(() => {
    kiln.add(x, 1);
    throw new Error('boom');
  }), 'boom');
});

test('gradcheck passes for correct formulas and reports a wrong one', () => {
  const x = makeTensor([0.3, -1.2, 2], [3], 'float64').requiresGrad_();
  assert.equal(kiln.gradcheck((t) => cube(t), [x]), true);
  const wrongOp = defineOp({
    name: 'testWrongGrad',
    args: [{ name: 'self', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    meta: (self: TensorMeta) => ({ shape: self.shape, strides: self.strides, dtype: self.dtype, device: self.device }),
  });
  registerKernel(wrongOp, 'cpu', (ctx, t) => mapUnary(ctx.out, t, (v) => v * v));
  defineBackward(wrongOp, (ctx, [g]) => [times(g!, ctx.args[0] as Tensor)]); // should be 2x
  assertThrowsWith(() => kiln.gradcheck((t) => dispatch(wrongOp, t), [x]), 'gradcheck', 'mismatch', 'input 0');
  assertThrowsWith(() => kiln.gradcheck((t) => cube(t), [kiln.tensor([1]).requiresGrad_()]), 'gradcheck', 'float64');
  void sumAll;
});
