import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { makeExpanded, rand, randomValues } from './helpers/make.js';

test('add broadcasts a strided row over a transposed matrix, against a float64 loop', () => {
  const a = rand([3, 4], 1, 'transposed');
  const bv = randomValues(4, 9);
  const b = makeExpanded(bv, [4], [3, 4]);
  const av = a.toFlatArray();
  const expected = av.map((x, i) => x + 2 * bv[i % 4]!);
  assertClose(kiln.add(a, b, 2), expected, [3, 4]);
  assertClose(a.add(3), av.map((x) => x + 3), [3, 4]);
});

test('add promotes int32 + float scalar to float32, int32 + int scalar stays int32', () => {
  const a = kiln.tensor([1, 2, 3], { dtype: 'int32' });
  assert.equal(a.add(0.5).dtype, 'float32');
  assert.deepEqual(a.add(0.5).toArray(), [1.5, 2.5, 3.5]);
  assert.equal(a.add(2).dtype, 'int32');
  assert.deepEqual(a.add(2).toArray(), [3, 4, 5]);
  const h = kiln.tensor([1, 2], { dtype: 'float16' });
  assert.equal(h.add(kiln.tensor(1.5)).dtype, 'float16', 'a zero-dim float32 tensor does not promote a float16 tensor');
  assert.equal(h.add(kiln.tensor([1.5, 1])).dtype, 'float32');
});

test('add_ writes in place and keeps the storage', () => {
  const a = kiln.tensor([[1, 2], [3, 4]]);
  const st = a.storage;
  const r = a.add_(kiln.tensor([10, 20]));
  assert.equal(r, a);
  assert.equal(a.storage, st);
  assert.deepEqual(a.toArray(), [[11, 22], [13, 24]]);
  assertThrowsWith(() => kiln.tensor([1, 2], { dtype: 'int32' }).add_(0.5), 'add_', "can't be cast", 'int32');
});

test('to converts dtypes with rounding and moves nothing when nothing changes', () => {
  const x = kiln.tensor([1.0009765625, -2.7, 70000, 1e-8]);
  assert.deepEqual(x.to('float16').toArray(), [1.0009765625, -2.69921875, Infinity, 0]);
  assert.deepEqual(x.to('bfloat16').toArray(), [1, -2.703125, 70144, 1.0011717677116394e-8]);
  assert.deepEqual(x.to('int64').toArray(), [1, -2, 70000, 0]);
  assert.deepEqual(x.to('bool').toArray(), [true, true, true, true]);
  assert.equal(x.to('float32'), x);
  assert.equal(x.to('cpu'), x);
});

test('tensor() infers shapes and rejects ragged input', () => {
  const t = kiln.tensor([[[1], [2]], [[3], [4]]]);
  assert.deepEqual([...t.shape], [2, 2, 1]);
  assert.deepEqual([...t.strides], [2, 1, 1]);
  assert.equal(kiln.tensor([true, false]).dtype, 'bool');
  assertThrowsWith(() => kiln.tensor([[1, 2], [3]]), 'tensor', 'ragged');
});

test('printing follows torch style', () => {
  assert.equal(kiln.tensor([[1, 2], [3, 4]]).toString(), 'tensor([[1., 2.],\n        [3., 4.]])');
  assert.equal(kiln.tensor([1.5, -2.25]).toString(), 'tensor([ 1.5000, -2.2500])');
  assert.equal(kiln.tensor([1, 2], { dtype: 'int32' }).toString(), 'tensor([1, 2], dtype=int32)');
  assert.equal(kiln.tensor([true, false]).toString(), 'tensor([ True, False])');
  assert.equal(kiln.tensor(3.5).toString(), 'tensor(3.5000)');
});

test('ops on different devices or disposed tensors fail with a clear error', () => {
  const a = kiln.tensor([1, 2]);
  a.dispose();
  assertThrowsWith(() => kiln.add(a, 1), 'add', 'disposed');
  assertThrowsWith(() => kiln.tensor([1]).to('cuda:99'), 'cuda');
  assertThrowsWith(() => kiln.add(kiln.tensor([1, 2, 3]), kiln.tensor([1, 2])), 'add', '[3] and [2]', 'broadcast');
});
