/**
 * Cross-device behaviour without a GPU: a host-memory test double registered as `webgpu` lets the
 * dispatcher's device checks and `.to(device)` run for real on any machine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { CpuAccelerator } from '../src/runtime/cpu/cpu-accelerator.js';
import type { Accelerator } from '../src/runtime/accelerator.js';
import { assertThrowsWith } from './helpers/assert.js';

class HostBackedDevice extends CpuAccelerator {
  override readonly type = 'cpu' as const;
}
const fake = new HostBackedDevice() as unknown as Accelerator;
(fake as { type: string }).type = 'webgpu';
kiln.registerAccelerator('webgpu', { probe: () => ({ available: true, reason: 'test double' }), load: () => fake });

test('tensors move between devices with .to and keep their values and layout', () => {
  const x = kiln.tensor([[1, 2, 3], [4, 5, 6]]);
  const g = x.to('webgpu:0');
  assert.equal(g.device.toString(), 'webgpu:0');
  const back = g.to('cpu');
  assert.deepEqual(back.toArray(), [[1, 2, 3], [4, 5, 6]]);
  const t = new kiln.Tensor(x.storage, 'float32', [3, 2], [1, 3], 0);
  const moved = t.to('webgpu');
  assert.deepEqual([...moved.strides], [1, 3], 'a transposed tensor stays transposed across devices');
  assert.deepEqual(moved.to('cpu').toArray(), [[1, 4], [2, 5], [3, 6]]);
  assert.equal(kiln.tensor([1], { device: 'webgpu' }).device.toString(), 'webgpu:0');
});

test('mixing devices in one op is an error naming the op, the arguments and the devices', () => {
  const a = kiln.tensor([1, 2]);
  const b = kiln.tensor([1, 2], { device: 'webgpu' });
  assertThrowsWith(() => kiln.add(a, b), 'add', "'self' is on cpu", "'other'", 'webgpu:0');
  assertThrowsWith(() => kiln.add(b, a), 'add', "'self' is on webgpu:0", "'other'");
  // copy_ across devices is allowed, as in PyTorch.
  const dst = kiln.tensor([0, 0]);
  dst.copy_(b);
  assert.deepEqual(dst.toArray(), [1, 2]);
  assertThrowsWith(() => kiln.tensor([1]).to('webgpu:3'), 'webgpu:3', 'does not exist');
});
