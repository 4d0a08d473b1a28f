/** kiln.inferenceMode / inferenceModeScope: no recording, outputs that do not require grad. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

const F64 = { dtype: 'float64' as const };

test('inferenceMode records nothing and detaches outputs, through arrays and plain objects', () => {
  const lin = new kiln.nn.Linear(3, 2, true, F64);
  const x = kiln.ones([4, 3], F64);
  assert.equal(kiln.isInferenceModeEnabled(), false);
  const out = kiln.inferenceMode(() => {
    assert.equal(kiln.isInferenceModeEnabled(), true);
    assert.equal(kiln.isGradEnabled(), false);
    const y = lin.forward(x);
    // noGrad would hand lin.weight back still requiring grad; inference mode must not.
    return { y, pair: [y.mul(2), lin.weight], n: 3 };
  });
  assert.equal(kiln.isInferenceModeEnabled(), false);
  assert.equal(kiln.isGradEnabled(), true);
  assert.equal(out.y.requiresGrad, false);
  assert.equal(out.y.gradFn, null);
  assert.equal(out.pair[0]!.requiresGrad, false);
  assert.equal(out.pair[1]!.requiresGrad, false, 'a returned parameter is detached');
  assert.equal(lin.weight.requiresGrad, true, 'the parameter itself is untouched');
  assert.equal(out.n, 3);
  // The detached parameter shares its storage: no copy was made.
  assert.equal(out.pair[1]!.storage, lin.weight.storage);
  // Values equal the ordinary forward's.
  assert.deepEqual(out.y.toFlatArray(), lin.forward(x).toFlatArray());
});

test('inferenceMode restores grad mode after a throw and refuses async functions', () => {
  assert.throws(() => kiln.inferenceMode(() => { throw new Error('boom'); }), /boom/);
  assert.equal(kiln.isGradEnabled(), true);
  assert.equal(kiln.isInferenceModeEnabled(), false);
  assert.throws(() => kiln.inferenceMode(async () => 1), /inferenceMode: fn returned a Promise/);
  assert.equal(kiln.isGradEnabled(), true);
});

test('inferenceModeScope turns recording off until the block ends', () => {
  const w = kiln.ones([2], F64).requiresGrad_();
  {
    using _ = kiln.inferenceModeScope();
    assert.equal(kiln.isInferenceModeEnabled(), true);
    const y = w.mul(3);
    assert.equal(y.requiresGrad, false);
  }
  assert.equal(kiln.isInferenceModeEnabled(), false);
  assert.equal(w.mul(3).requiresGrad, true);
});
