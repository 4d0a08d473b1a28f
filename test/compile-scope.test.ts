/**
 * Compiled calls inside kiln.scope: tracing creates fake tensors, which must neither be disposed
 * by the scope nor free the shared fake storage (a regression: the second trace failed with
 * "use after dispose"). Memory stays flat across compiled calls in scopes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

test('compiling and retracing inside scopes works and keeps memory flat', () => {
  const f = (x: kiln.Tensor) => kiln.softmax(kiln.add(x, 1), -1);
  const cf = kiln.compile(f, { dynamic: false });
  kiln.noGrad(() => {
    for (const n of [3, 4, 5, 3]) {
      const d = kiln.scope(() => {
        const x = kiln.randn([2, n]);
        return kiln.amax(kiln.abs(kiln.sub(cf(x), f(x)))).item() as number;
      });
      assert.ok(d <= 1e-6, `n=${n}: max |compiled - eager| ${d}`);
    }
    const x = kiln.randn([2, 5]);
    const before = kiln.memoryStats().allocatedBytes;
    for (let i = 0; i < 50; i++) kiln.scope(() => void cf(x));
    assert.equal(kiln.memoryStats().allocatedBytes, before);
  });
  assert.ok(cf.counters.traces >= 3);
});
