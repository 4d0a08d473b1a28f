import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

test('Module.to swaps parameter data in place: optimizers and tied weights keep working', () => {
  kiln.manualSeed(3);
  const lin = new kiln.nn.Linear(3, 2);
  const w = lin.weight;
  const opt = new kiln.optim.SGD([...lin.parameters()], { lr: 0.5 });
  lin.to('float64');
  assert.equal(lin.weight, w, 'the same Parameter object');
  assert.equal(w.dtype, 'float64');
  assert.equal(w.requiresGrad, true);
  const before = w.toFlatArray();
  const y = lin.forward(kiln.ones([1, 3], { dtype: 'float64' }));
  kiln.sum(y).backward();
  opt.step();
  const after = w.toFlatArray();
  after.forEach((v, i) => assert.ok(Math.abs(v - (before[i]! - 0.5)) < 1e-12, 'SGD updated the moved parameter'));
});
