import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

test('index lists with nulls dispatch: x[:, idx] = v and x[idx0, :, idx2] += v', () => {
  const x = kiln.zeros([2, 3, 4]);
  const idx = kiln.tensor([2, 0], { dtype: 'int64' });
  const y = kiln.indexPut(x, [null, idx], kiln.tensor(1.5));
  const want = [...Array(24)].map((_, i) => {
    const j = Math.floor(i / 4) % 3;
    return j === 2 || j === 0 ? 1.5 : 0;
  });
  assert.deepEqual(y.toFlatArray(), want);
  const i0 = kiln.tensor([1, 1], { dtype: 'int64' });
  const i2 = kiln.tensor([3, -1], { dtype: 'int64' });
  // Non-adjacent advanced indices: the broadcast index dim [2] comes first, then the slice dim [3].
  const v = kiln.tensor([[1, 2, 3], [10, 20, 30]]);
  const z = kiln.indexPut(kiln.zeros([2, 3, 4]), [i0, null, i2], v, true);
  const expect = new Array<number>(24).fill(0);
  for (let b = 0; b < 2; b++) for (let j = 0; j < 3; j++) expect[1 * 12 + j * 4 + 3] += [[1, 2, 3], [10, 20, 30]][b]![j]!;
  assert.deepEqual(z.toFlatArray(), expect);
  const dead = kiln.tensor([0], { dtype: 'int64' });
  dead.dispose();
  assertThrowsWith(() => kiln.indexPut(x, [null, dead], 1), 'indexPut', 'disposed');
});

test('an op with only a decomposition runs through it on any device', async () => {
  const { defineOp, setDecomposition } = await import('../src/ops/registry.js');
  const { dispatch } = await import('../src/ops/dispatch.js');
  type M = import('../src/tensor/tensor.js').TensorMeta;
  const op = defineOp({
    name: 'testAddTwice',
    args: [{ name: 'self', type: 'Tensor' }],
    outputs: [{ name: 'out', type: 'Tensor' }],
    meta: (self: M) => ({ shape: self.shape, strides: self.strides, dtype: self.dtype, device: self.device }),
  });
  setDecomposition(op, (self) => kiln.add(self, self));
  assert.deepEqual(dispatch(op, kiln.tensor([1, 2])).toArray(), [2, 4]);
  assert.equal(op.kernels.size, 0);
});
