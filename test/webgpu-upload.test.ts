/**
 * copy_ of a cpu tensor into a webgpu tensor (kernels/webgpu/core.ts): a same-dtype, same-shape,
 * contiguous source into whole 4-byte words is one queued write into the destination's buffer (no
 * staging buffer, no dispatch); everything else (a partial word, a cast, a broadcast, a strided
 * destination) keeps the staged copy. Values against the source, the destination's other elements
 * untouched, and dispatch counts showing which path ran.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();
const flat = (t: kiln.Tensor): number[] => (t.toFlatArray() as (number | bigint)[]).map(Number);

test('copy_ from the cpu into webgpu views: direct writes and staged copies', { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as WebgpuAccelerator;
  const count = (f: () => void): number => {
    const d0 = acc.dispatchCount;
    f();
    return acc.dispatchCount - d0;
  };
  // int64 and int32 at word-aligned offsets (the decode runner's inputs): no dispatch.
  const long = kiln.tensor([1, 2, 3, 4, 5, 6], { dtype: 'int64', device: 'webgpu' });
  assert.equal(count(() => kiln.copy_(kiln.narrow(long, 0, 2, 3), kiln.tensor([-7, 2 ** 40, 9], { dtype: 'int64' }))), 0);
  assert.deepEqual(flat(long), [1, 2, -7, 2 ** 40, 9, 6]);
  const ints = kiln.tensor([[1, 2, 3], [4, 5, 6]], { dtype: 'int32', device: 'webgpu' });
  assert.equal(count(() => kiln.copy_(kiln.narrow(ints, 0, 1, 1), kiln.tensor([[-1, -2, -3]], { dtype: 'int32' }))), 0);
  assert.deepEqual(flat(ints), [1, 2, 3, -1, -2, -3]);
  // float16: an even number of elements at an even offset is whole words; an odd offset is staged.
  const half = kiln.tensor([0, 0, 0, 0, 0, 0], { dtype: 'float16', device: 'webgpu' });
  assert.equal(count(() => kiln.copy_(kiln.narrow(half, 0, 2, 2), kiln.tensor([1.5, -2], { dtype: 'float16' }))), 0);
  assert.ok(count(() => kiln.copy_(kiln.narrow(half, 0, 1, 1), kiln.tensor([3], { dtype: 'float16' }))) > 0);
  assert.deepEqual(flat(half), [0, 3, 1.5, -2, 0, 0]);
  // A cast, a broadcast and a strided destination: staged, still right.
  const f = kiln.zeros([2, 3], { dtype: 'float32', device: 'webgpu' });
  assert.ok(count(() => kiln.copy_(f, kiln.tensor([[1, 2, 3], [4, 5, 6]], { dtype: 'int32' }))) > 0);
  assert.deepEqual(flat(f), [1, 2, 3, 4, 5, 6]);
  kiln.copy_(f, kiln.tensor([7, 8, 9], { dtype: 'float32' }));
  assert.deepEqual(flat(f), [7, 8, 9, 7, 8, 9]);
  kiln.copy_(kiln.transpose(f, 0, 1), kiln.tensor([[1, 2], [3, 4], [5, 6]], { dtype: 'float32' }));
  assert.deepEqual(flat(f), [1, 3, 5, 2, 4, 6]);
});
