/**
 * One test per class of user mistake across op groups: each error names the op, the argument and
 * the offending shapes, dtypes, devices or values, and never produces a silent wrong answer.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

const f = (shape: number[]) => kiln.zeros(shape);
const i64 = (v: kiln.TensorData) => kiln.tensor(v, { dtype: 'int64' });

test('shape mismatches name the op and both shapes', () => {
  assertThrowsWith(() => kiln.mul(f([2, 3]), f([4, 3])), 'mul', '[2, 3]', '[4, 3]');
  assertThrowsWith(() => kiln.matmul(f([2, 3]), f([4, 5])), 'matmul', '[2, 3]', '[4, 5]');
  assertThrowsWith(() => kiln.linear(f([2, 3]), f([4, 5])), 'linear', '[4, 5]');
  assertThrowsWith(() => kiln.cat([f([2, 3]), f([2, 4])], 0), 'cat', '[2, 3]', '[2, 4]');
  assertThrowsWith(() => kiln.view(f([2, 3]), [4, 2]), 'view', '[4, 2]');
  assertThrowsWith(() => kiln.layerNorm(f([2, 3]), [4]), 'layerNorm', '[2, 3]');
  assertThrowsWith(() => kiln.conv2d(f([1, 3, 8, 8]), f([4, 2, 3, 3])), 'conv2d', '[1, 3, 8, 8]', '[4, 2, 3, 3]');
});

test('dtype mistakes name the op, the argument and the dtype', () => {
  assertThrowsWith(() => kiln.matmul(f([2, 2]), kiln.zeros([2, 2], { dtype: 'float16' })), 'matmul', 'float32', 'float16');
  assertThrowsWith(() => kiln.where(f([2]), f([2]), f([2])), 'where', 'condition', 'float32');
  assertThrowsWith(() => kiln.gather(f([2, 2]), 0, f([2, 2])), 'gather', 'float32');
  assertThrowsWith(() => kiln.mean(i64([1, 2])), 'mean', 'int64');
  assertThrowsWith(() => kiln.softmax(i64([1, 2]), 0), 'softmax', 'int64');
  assertThrowsWith(() => kiln.tensor([1, 2], { dtype: 'int32' }).mul_(0.5), 'mul_', 'int32');
});

test('out-of-range dims name the op, the dim and the rank', () => {
  assertThrowsWith(() => kiln.sum(f([2, 3]), 2), 'sum', '2', 'rank 2');
  assertThrowsWith(() => kiln.softmax(f([2, 3]), -3), 'softmax', '-3');
  assertThrowsWith(() => kiln.transpose(f([2, 3]), 0, 5), 'transpose', '5');
  assertThrowsWith(() => kiln.cat([f([2]), f([2])], 1), 'cat', '1');
  assertThrowsWith(() => f([2, 3]).size(4), 'size', '4');
});

test('out-of-range indices name the op, the index, the dim and its size', () => {
  assertThrowsWith(() => kiln.indexSelect(f([3, 2]), 0, i64([0, 3])), 'indexSelect', '3', 'size 3');
  assertThrowsWith(() => kiln.embedding(i64([5]), f([4, 2])), 'embedding', '5');
  assertThrowsWith(() => kiln.gather(f([2, 2]), 1, i64([[0, 2], [1, 1]])), 'gather', '2');
  assertThrowsWith(() => kiln.select(f([2, 3]), 1, 3), 'select', '3');
  assertThrowsWith(() => kiln.indexPut(f([3]), [i64([-4])], 1), 'indexPut', '-4');
  assertThrowsWith(() => kiln.topk(f([3]), 4), 'topk', '4');
});

test('device mistakes and unavailable accelerators are explained', () => {
  assertThrowsWith(() => kiln.zeros([2], { device: 'cuda:99' }), 'cuda'); // no machine has 100 GPUs; without cuda it is 'not available'
  assertThrowsWith(() => kiln.Device.from('gpu'), "'gpu'");
  assertThrowsWith(() => kiln.tensor([1]).to('cpu:2'), 'cpu:2', 'does not exist');
});

test('bad arguments of the wrong kind are caught, not coerced', () => {
  assertThrowsWith(() => kiln.zeros([2, -1]), 'zeros', '-1');
  assertThrowsWith(() => kiln.arange(0, 10, 0), 'arange', 'step');
  assertThrowsWith(() => kiln.dropout(f([2]), 1.5), 'dropout', '1.5');
  assertThrowsWith(() => kiln.maxPool2d(f([1, 1, 4, 4]), 2, 2, 3), 'maxPool2d', 'pad');
  assert.throws(() => kiln.tensor([[1, 2], [3]]), /ragged/);
});

test('a tensor dropped without dispose() is reclaimed by the FinalizationRegistry backstop', () => {
  const script = fileURLToPath(new URL('./helpers/finalizer-child.js', import.meta.url));
  const r = spawnSync(process.execPath, ['--expose-gc', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { before, during, after, mixed } = JSON.parse(r.stdout) as { before: number; during: number; after: number; mixed: number };
  assert.ok(during >= before + 4 * 1024 * 1024, 'the tensors were allocated');
  assert.equal(after, before, 'every collected tensor released its storage in the allocator stats');
  assert.equal(mixed, before, 'disposed, dropped and re-pointed tensors of one long job each released their storage once');
});
