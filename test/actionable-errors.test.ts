/**
 * Errors a user can act on (issue #18 item 6): compiled softmax over an empty dim behaves like
 * eager instead of failing inside its decomposition with an internal op's name (amax), and an
 * allocation beyond the JS engine's typed-array limit names the op, the size and the limit
 * instead of V8's bare "Invalid typed array length". (Results a compiled function cannot return
 * are tested in compile-semantics.test.ts.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';

test('compiled softmax / logSoftmax / layerNorm over an empty dim return what eager returns', () => {
  const x = kiln.zeros([2, 0]);
  for (const backend of ['kiln', 'eager']) {
    const f = kiln.compile((t: Tensor) => ({ s: kiln.softmax(t, -1), l: kiln.logSoftmax(t, -1) }), { backend });
    const y = kiln.noGrad(() => f(x));
    assert.deepEqual(y.s.shape, [2, 0], backend);
    assert.deepEqual(y.l.shape, [2, 0], backend);
    assert.deepEqual(y.s.shape, kiln.softmax(x, -1).shape);
  }
  // Along a non-empty dim of an empty tensor too.
  const z = kiln.zeros([0, 3]);
  assert.deepEqual(kiln.compile((t: Tensor) => kiln.softmax(t, -1))(z).shape, [0, 3]);
});

test('a reduction the user calls on an empty dim still names that op', () => {
  const x = kiln.zeros([2, 0]);
  assert.throws(() => kiln.compile((t: Tensor) => kiln.amax(t, -1))(x), /amax: cannot reduce over dimension 1 of size 0/);
});

test('an op whose output exceeds the typed-array limit names the op, the size and the limit', () => {
  // 2^17 x (2^15 + 1) uint8 elements: just over the 2^32 elements a cpu typed array can hold.
  const a = kiln.zeros([2 ** 17, 1], { dtype: 'uint8' });
  const b = kiln.zeros([1, 2 ** 15 + 1], { dtype: 'uint8' });
  assert.throws(
    () => kiln.add(a, b),
    (e: unknown) => {
      assert.ok(e instanceof RangeError);
      // The first wording where the engine's limit is known up front, the second where it is not.
      assert.match(e.message, /^add: (cannot allocate 4295098368 elements of uint8 \(1 bytes each, 4295098368 bytes\): the cpu limit is \d+ elements per tensor|the JS engine refused an allocation while computing the output \[131072, 32769\] uint8)/);
      return true;
    },
  );
});
