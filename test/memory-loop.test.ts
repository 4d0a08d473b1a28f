/**
 * A long eager training loop must not grow memory: 10,000 steps of a small model (forward, loss,
 * backward, optimizer step) inside kiln.scope, with allocator statistics compared between an early
 * step and the last one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';

test('10,000 eager training steps keep allocator stats flat', () => {
  kiln.manualSeed(7);
  const model = new kiln.nn.Sequential(new kiln.nn.Linear(8, 16), new kiln.nn.ReLU(), new kiln.nn.Linear(16, 1));
  const opt = new kiln.optim.SGD([...model.parameters()], { lr: 0.01, momentum: 0.9 });
  const x = kiln.randn([4, 8]);
  const y = kiln.randn([4, 1]);
  const step = (): number =>
    kiln.scope(() => {
      opt.zeroGrad();
      const loss = kiln.nn.functional.mseLoss(model.forward(x), y);
      loss.backward();
      opt.step();
      return loss.item() as number;
    });
  let first = 0;
  for (let i = 0; i < 100; i++) first = step();
  const early = kiln.memoryStats();
  let last = first;
  for (let i = 100; i < 10000; i++) last = step();
  const late = kiln.memoryStats();
  assert.equal(late.allocatedBytes, early.allocatedBytes, 'live bytes unchanged');
  assert.equal(late.activeAllocations, early.activeAllocations, 'live allocations unchanged');
  assert.equal(late.reservedBytes, early.reservedBytes, 'no new memory reserved from the system');
  assert.ok(late.cacheHits - early.cacheHits > 9900 * 10, 'steps are served from the allocator cache');
  assert.ok(last < first, `the loop really trained (loss ${first} -> ${last})`);
});
