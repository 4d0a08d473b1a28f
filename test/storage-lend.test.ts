// Storage.borrow / detach (used by CUDA graph replays to lend results over static buffers), on cpu.
import assert from 'node:assert/strict';
import test from 'node:test';
import { CPU } from '../src/runtime/device.js';
import { Storage } from '../src/tensor/storage.js';
import { Tensor } from '../src/tensor/tensor.js';

test('a lent storage reads the owner buffer, frees nothing, and detach gives it a copy of its own', () => {
  const owner = Tensor.empty([4], 'float32', CPU);
  const ownerView = new Float32Array(owner.storage.cpuArrayBuffer());
  ownerView.set([1, 2, 3, 4]);
  const lent = Storage.borrow(CPU, owner.storage.buffer);
  const t = new Tensor(lent, 'float32', [4]);
  assert.equal(lent.isLent, true);
  assert.deepEqual(t.toArray(), [1, 2, 3, 4]);
  lent.detach((dst) => new Uint8Array(dst.handle as ArrayBuffer).set(new Uint8Array(owner.storage.cpuArrayBuffer(), 0, 16)));
  assert.equal(lent.isLent, false);
  ownerView.set([9, 9, 9, 9]); // the owner overwrites its buffer (the next replay)
  assert.deepEqual(t.toArray(), [1, 2, 3, 4], 'the detached result kept its values');
  t.dispose();
  assert.equal(owner.storage.isFreed, false);
  assert.deepEqual(owner.toArray(), [9, 9, 9, 9]);
  owner.dispose();
});

test('disposing a lent storage before detach leaves the owner buffer alone; detach is then a no-op', () => {
  const owner = Tensor.empty([2], 'float32', CPU);
  const lent = Storage.borrow(CPU, owner.storage.buffer);
  new Tensor(lent, 'float32', [2]).dispose();
  assert.equal(lent.isFreed, true);
  let copied = false;
  lent.detach(() => (copied = true));
  assert.equal(copied, false);
  assert.equal(owner.storage.isFreed, false);
  owner.dispose();
});
