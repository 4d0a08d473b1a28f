/**
 * int64 add and sub on webgpu (kernels/webgpu/int64.ts: two int32 programs over the words, with a
 * carry or borrow), against BigInt arithmetic modulo 2^64 written here: carries and borrows across
 * the 32-bit boundary, wrap-around at +-2^63, scalars (times alpha), broadcast and int32 operands,
 * in place; BatchNorm's numBatchesTracked counter in a training forward (what failed before:
 * `train-step --device webgpu`). Needs an adapter that computes (SwiftShader in CI).
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { storageArray } from '../src/tensor/typed.js';
import { webgpuSkipReason } from './helpers/webgpu.js';

const skip = webgpuSkipReason();

const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);
const A = [0n, 1n, -1n, 0xffffffffn, 0x100000000n, -0x100000000n, 0x7fffffffn, -0x80000000n, 2n ** 40n - 3n, -(2n ** 40n) + 7n, MAX, MIN, MAX - 5n, 123456789012345n];
const B = [0n, -1n, 1n, 1n, -1n, 0xffffffffn, 1n, -1n, 0xfffffffdn, -0xffffffffn, 1n, -1n, 10n, -987654321098765n];

/** The exact int64 elements of t (its words, not through a float64). */
function exact(t: Tensor): bigint[] {
  const c = t.to('cpu').contiguous();
  return [...(storageArray('int64', c.storage.cpuArrayBuffer()) as BigInt64Array).subarray(c.offset, c.offset + c.numel())];
}

const wrap = (x: bigint): bigint => BigInt.asIntN(64, x);
const i64 = (xs: readonly bigint[]): Tensor => kiln.tensor(xs as unknown as number[], { dtype: 'int64' }).to('webgpu');

test('int64 add / sub of same-shape tensors: exact modulo 2^64 (carries, borrows, wrap at 2^63)', { skip }, () => {
  const a = i64(A);
  const b = i64(B);
  assert.deepEqual(exact(kiln.add(a, b)), A.map((x, k) => wrap(x + B[k]!)));
  assert.deepEqual(exact(kiln.sub(a, b)), A.map((x, k) => wrap(x - B[k]!)));
  assert.deepEqual(exact(kiln.sub(b, a)), A.map((x, k) => wrap(B[k]! - x)));
  assert.deepEqual(exact(kiln.add(a, a)), A.map((x) => wrap(2n * x)));
  assert.deepEqual(exact(kiln.add(a, b, -1)), A.map((x, k) => wrap(x - B[k]!)));
});

test('int64 add / sub with scalars times alpha, broadcasts, int32 and bool operands', { skip }, () => {
  const a = i64(A);
  for (const [s, alpha] of [[1, 1], [-1, 1], [4294967295, 1], [-4294967296, 1], [5, 3], [7, -2], [2 ** 52, 4]] as const) {
    assert.deepEqual(exact(kiln.add(a, s, alpha)), A.map((x) => wrap(x + BigInt(s) * BigInt(alpha))), `add ${s} alpha ${alpha}`);
    assert.deepEqual(exact(kiln.sub(a, s, alpha)), A.map((x) => wrap(x - BigInt(s) * BigInt(alpha))), `sub ${s} alpha ${alpha}`);
  }
  // A cpu scalar tensor is a scalar.
  assert.deepEqual(exact(kiln.add(a, kiln.tensor(0xffffffff, { dtype: 'int64' }))), A.map((x) => wrap(x + 0xffffffffn)));
  // [2, 7] + [7] and [2, 7] - [2, 1].
  const m = i64(A).reshape([2, 7]);
  const row = i64(B.slice(0, 7));
  const col = i64([0xffffffffn, -3n]).reshape([2, 1]);
  assert.deepEqual(exact(kiln.add(m, row)), A.map((x, k) => wrap(x + B[k % 7]!)));
  assert.deepEqual(exact(kiln.sub(m, col)), A.map((x, k) => wrap(x - [0xffffffffn, -3n][Math.floor(k / 7)]!)));
  // int32 and bool operands promote to int64 (sign-extended).
  const i32 = kiln.tensor([1, -2, 3, -4, 5, 6, 7, -8, 9, 10, 11, -12, 13, 14], { dtype: 'int32' }).to('webgpu');
  assert.deepEqual(exact(kiln.add(a, i32)), A.map((x, k) => wrap(x + BigInt([1, -2, 3, -4, 5, 6, 7, -8, 9, 10, 11, -12, 13, 14][k]!))));
  assert.deepEqual(exact(kiln.sub(i32, a)), A.map((x, k) => wrap(BigInt([1, -2, 3, -4, 5, 6, 7, -8, 9, 10, 11, -12, 13, 14][k]!) - x)));
  const bools = kiln.tensor(A.map((_, k) => k % 3 === 0), { dtype: 'bool' }).to('webgpu');
  assert.deepEqual(exact(kiln.add(a, bools)), A.map((x, k) => wrap(x + (k % 3 === 0 ? 1n : 0n))));
});

test('int64 add_ / sub_ in place (a 0-d counter, a strided view), and the alpha a tensor cannot take', { skip }, () => {
  const counter = kiln.zeros([], { dtype: 'int64', device: 'webgpu' });
  for (let k = 0; k < 3; k++) counter.add_(1);
  assert.deepEqual(exact(counter), [3n]);
  const a = i64(A);
  a.add_(i64(B));
  assert.deepEqual(exact(a), A.map((x, k) => wrap(x + B[k]!)));
  a.sub_(i64(B));
  assert.deepEqual(exact(a), A);
  a.sub_(0xffffffff, 2);
  assert.deepEqual(exact(a), A.map((x) => wrap(x - 2n * 0xffffffffn)));
  // Every other element of a [14] buffer, in place.
  const v = i64(A);
  v.view([7, 2]).select(1, 1).add_(0x100000001);
  assert.deepEqual(exact(v), A.map((x, k) => (k % 2 === 1 ? wrap(x + 0x100000001n) : x)));
  assert.throws(() => kiln.add(i64(A), i64(B), 2), /add: an int64 tensor plus alpha \(2\) \* a tensor runs on webgpu with alpha 1 or -1 only.*\[14\] int64 and \[14\] int64/);
});

test('BatchNorm in training counts its batches on webgpu (numBatchesTracked is int64)', { skip }, () => {
  const bn = new kiln.nn.BatchNorm2d(3).to('webgpu');
  const x = kiln.randn([2, 3, 4, 4]).to('webgpu');
  for (let k = 0; k < 2; k++) bn.forward(x).dispose();
  assert.deepEqual(exact(bn.numBatchesTracked!), [2n]);
  // momentum null: a cumulative average, whose factor reads the counter.
  const cum = new kiln.nn.BatchNorm2d(3, 1e-5, null).to('webgpu');
  cum.forward(x).dispose();
  assert.deepEqual(exact(cum.numBatchesTracked!), [1n]);
});
