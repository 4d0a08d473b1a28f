import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Generator } from '../src/tensor/random.js';

test('Generator: same seed, same stream; moments of uniform and normal', () => {
  const a = new Generator(42);
  const b = new Generator(42);
  for (let i = 0; i < 100; i++) assert.equal(a.nextUint32(), b.nextUint32());
  const g = new Generator(7);
  const n = 200000;
  let su = 0;
  let sn = 0;
  let sn2 = 0;
  for (let i = 0; i < n; i++) {
    const u = g.nextDouble();
    assert.ok(u >= 0 && u < 1);
    su += u;
    const z = g.nextNormal();
    sn += z;
    sn2 += z * z;
  }
  // Standard errors: uniform mean 0.5 +- 0.0007, normal mean 0 +- 0.0023, variance 1 +- 0.0032.
  assert.ok(Math.abs(su / n - 0.5) < 0.004);
  assert.ok(Math.abs(sn / n) < 0.012);
  assert.ok(Math.abs(sn2 / n - 1) < 0.015);
});
