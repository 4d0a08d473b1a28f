/** nn.Flatten, nn.Unflatten, nn.MaxPool2d and nn.AvgPool2d against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';
import { refAvgPool2d, refMaxPool2d } from './helpers/nn-ref.js';

const { nn } = kiln;
const F64 = { dtype: 'float64' as const };

test('nn.Flatten keeps the batch dim by default and takes startDim/endDim', () => {
  const v = randomValues(2 * 3 * 4 * 5, 1);
  const x = kiln.tensor(v, F64).reshape([2, 3, 4, 5]);
  assertClose(new nn.Flatten().forward(x), v, [2, 60]);
  assertClose(new nn.Flatten(0, 1).forward(x), v, [6, 4, 5]);
  assertClose(new nn.Flatten(-2).forward(x), v, [2, 3, 20]);
  assert.equal(new nn.Flatten().numParameters(), 0);
});

test('nn.Unflatten splits one dim; -1 is inferred; bad dims name the module', () => {
  const v = randomValues(2 * 12, 2);
  const x = kiln.tensor(v, F64).reshape([2, 12]);
  assertClose(new nn.Unflatten(1, [3, 4]).forward(x), v, [2, 3, 4]);
  assertClose(new nn.Unflatten(-1, [2, -1]).forward(x), v, [2, 2, 6]);
  assertThrowsWith(() => new nn.Unflatten(3, [2, 6]).forward(x), 'nn.Unflatten', 'dim 3', '[2, 12]');
  assertThrowsWith(() => new nn.Unflatten(1, []), 'nn.Unflatten', 'unflattenedSize');
});

test('nn.Sequential of Conv2d, MaxPool2d, Flatten and Linear runs and backpropagates', () => {
  const seq = new nn.Sequential(new nn.Conv2d(1, 2, 3, { padding: 1, dtype: 'float64' }), new nn.MaxPool2d(2), new nn.Flatten(), new nn.Linear(8, 3, true, F64));
  const x = kiln.tensor(randomValues(2 * 16, 3), F64).reshape([2, 1, 4, 4]);
  const y = seq.forward(x);
  assert.deepEqual(y.shape, [2, 3]);
  kiln.sum(y).backward();
  for (const p of seq.parameters()) assert.ok(p.grad, 'every parameter gets a gradient');
});

test('nn.MaxPool2d matches the float64 reference (stride, padding, dilation, ceilMode) and its indices', () => {
  const shape = [2, 3, 7, 6];
  const v = randomValues(shape.reduce((a, b) => a * b), 4);
  const x = kiln.tensor(v, F64).reshape(shape);
  const cases = [
    { k: 2, o: {}, p: { kernel: [2, 2], stride: [2, 2], padding: [0, 0] } },
    { k: [3, 2], o: { stride: [2, 1], padding: [1, 1] }, p: { kernel: [3, 2], stride: [2, 1], padding: [1, 1] } },
    { k: 2, o: { stride: 1, dilation: 2 }, p: { kernel: [2, 2], stride: [1, 1], padding: [0, 0], dilation: [2, 2] } },
    { k: 3, o: { stride: 2, ceilMode: true }, p: { kernel: [3, 3], stride: [2, 2], padding: [0, 0], ceilMode: true } },
  ] as const;
  for (const c of cases) {
    const m = new nn.MaxPool2d(c.k, c.o);
    const ref = refMaxPool2d(v, shape, c.p as Parameters<typeof refMaxPool2d>[2]);
    assertClose(m.forward(x), ref.values, ref.shape, { atol: 0, rtol: 0 });
    const { values, indices } = m.forwardWithIndices(x);
    assertClose(values, ref.values, ref.shape, { atol: 0, rtol: 0 });
    assert.deepEqual(indices.toFlatArray(), ref.indices);
  }
});

test('nn.AvgPool2d matches the float64 reference (countIncludePad, divisorOverride, ceilMode)', () => {
  const shape = [1, 2, 5, 6];
  const v = randomValues(shape.reduce((a, b) => a * b), 5);
  const x = kiln.tensor(v, F64).reshape(shape);
  const cases = [
    { k: 2, o: {}, p: { kernel: [2, 2], stride: [2, 2], padding: [0, 0] } },
    { k: 3, o: { stride: 2, padding: 1 }, p: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } },
    { k: 3, o: { stride: 2, padding: 1, countIncludePad: false }, p: { kernel: [3, 3], stride: [2, 2], padding: [1, 1], countIncludePad: false } },
    { k: [2, 3], o: { divisorOverride: 4 }, p: { kernel: [2, 3], stride: [2, 3], padding: [0, 0], divisorOverride: 4 } },
    { k: 2, o: { stride: 2, ceilMode: true }, p: { kernel: [2, 2], stride: [2, 2], padding: [0, 0], ceilMode: true } },
  ] as const;
  for (const c of cases) {
    const ref = refAvgPool2d(v, shape, c.p as Parameters<typeof refAvgPool2d>[2]);
    assertClose(new nn.AvgPool2d(c.k, c.o).forward(x), ref.values, ref.shape, { atol: 1e-12, rtol: 1e-12 });
  }
});

test('pool modules check their arguments at construction', () => {
  assertThrowsWith(() => new nn.MaxPool2d(0), 'nn.MaxPool2d', "'kernelSize'");
  assertThrowsWith(() => new nn.MaxPool2d(2, { stride: [1, 2, 3] }), 'nn.MaxPool2d', "'stride'");
  assertThrowsWith(() => new nn.AvgPool2d(2, { padding: -1 }), 'nn.AvgPool2d', "'padding'");
  assertThrowsWith(() => new nn.AvgPool2d(2, { divisorOverride: 0 }), 'nn.AvgPool2d', 'divisorOverride');
  assert.throws(() => new nn.MaxPool2d(2, { strdie: 1 } as never), /nn\.MaxPool2d: unknown option 'strdie'/);
});
