/** Matrix products (matmul, mm, bmm, dot, linear, addmm) against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, rand, randomInts, randomValues } from './helpers/make.js';
import { refMatmul, refTranspose } from './helpers/linalg-ref.js';
import { gemmBackend, setGemmBackend } from '../src/kernels/cpu/gemm.js';

/** Checks kiln.matmul(a, b) against the reference computed from the inputs' logical values. */
function checkMatmul(a: Tensor, b: Tensor, tol = {}): Tensor {
  const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
  const out = kiln.matmul(a, b);
  assertClose(out, r.values, r.shape, tol);
  return out;
}

/** A float32 tolerance scaled for sums over k terms of magnitude <= 4. */
function sumTol(k: number): { atol: number; rtol: number } {
  return { atol: 1e-6 * Math.max(k, 1) * 4, rtol: 1e-5 };
}

test('matmul 2-d x 2-d over every layout pair, odd sizes', () => {
  const layouts: Layout[] = ['contiguous', 'transposed', 'strided'];
  let seed = 1;
  for (const la of layouts) {
    for (const lb of layouts) {
      for (const [m, k, n] of [[1, 1, 1], [3, 5, 7], [9, 13, 6], [17, 4, 33]] as const) {
        const out = checkMatmul(rand([m, k], seed++, la), rand([k, n], seed++, lb), sumTol(k));
        assert.deepEqual([...out.strides], [n, 1], 'matmul output is contiguous');
      }
    }
  }
});

/** Products whose sizes cross every block boundary of the packed GEMM (KC = 128, MC = 128, NC = 256) and tile edge. */
function blockEdgeChecks(): void {
  checkMatmul(rand([70, 300], 1), rand([300, 37], 2, 'transposed'), sumTol(300));
  checkMatmul(rand([131, 258], 3, 'transposed'), rand([258, 9], 4, 'strided'), sumTol(258));
  checkMatmul(rand([3, 5], 5), rand([5, 1030], 6), sumTol(5));
  checkMatmul(rand([130, 20], 7, 'strided'), rand([20, 261], 8), sumTol(20));
  checkMatmul(rand([2, 7, 129], 9), rand([129, 6], 10, 'strided'), sumTol(129));
}

test('matmul crosses every block and tile edge of the packed GEMM, on both macro-kernels', () => {
  blockEdgeChecks();
  setGemmBackend('js');
  try {
    assert.equal(gemmBackend(), 'js');
    blockEdgeChecks();
    // integer exactness on the JS kernel too
    const a = makeTensor(randomInts(9 * 140, 11, -3_000_000, 3_000_000), [9, 140], 'int64', 'transposed');
    const b = makeTensor(randomInts(140 * 5, 12, -3_000_000, 3_000_000), [140, 5], 'int64');
    const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
    assertClose(kiln.matmul(a, b), r.values, r.shape, { atol: 0, rtol: 0 });
  } finally {
    setGemmBackend('wasm');
  }
});

test('matmul 1-d cases: dot, vector-matrix, matrix-vector, batched', () => {
  const v = rand([5], 1, 'strided');
  const out = checkMatmul(v, rand([5], 2));
  assert.deepEqual([...out.shape], []);
  checkMatmul(rand([5], 3), rand([5, 3], 4, 'transposed'));
  checkMatmul(rand([4, 5], 5, 'transposed'), rand([5], 6, 'strided'));
  checkMatmul(rand([5], 7), rand([2, 5, 3], 8, 'strided'));
  checkMatmul(rand([2, 3, 5], 9, 'transposed'), rand([5], 10));
  checkMatmul(rand([5], 7), rand([2, 5, 1], 8));
});

test('matmul broadcasts batch dims ([2,1,3,4] @ [5,4,6] -> [2,5,3,6]) and reads expanded/strided batches', () => {
  const out = checkMatmul(rand([2, 1, 3, 4], 1), rand([5, 4, 6], 2), sumTol(4));
  assert.deepEqual([...out.shape], [2, 5, 3, 6]);
  checkMatmul(rand([2, 1, 3, 4], 3, 'transposed'), rand([5, 4, 6], 4, 'strided'), sumTol(4));
  // a batch that is an expanded (stride-0) view, on either side
  checkMatmul(makeExpanded(randomValues(12, 5), [3, 4], [6, 3, 4]), rand([6, 4, 2], 6));
  checkMatmul(rand([6, 3, 4], 7, 'strided'), makeExpanded(randomValues(8, 8), [1, 4, 2], [6, 4, 2]));
  // 3-d @ 2-d: the shared right operand folds batches into rows (contiguous) or loops (transposed)
  checkMatmul(rand([4, 3, 5], 9), rand([5, 7], 10, 'transposed'), sumTol(5));
  checkMatmul(rand([4, 3, 5], 11, 'transposed'), rand([5, 7], 12), sumTol(5));
  checkMatmul(rand([2, 3, 3, 5], 13, 'strided'), rand([5, 2], 14), sumTol(5));
  checkMatmul(rand([1, 5], 15), rand([3, 5, 2], 16, 'transposed'));
});

test('matmul with empty dims: k = 0 gives zeros, m = 0 and batch 0 give empty outputs', () => {
  const z = kiln.matmul(rand([3, 0], 1), rand([0, 4], 2));
  assertClose(z, new Array<number>(12).fill(0), [3, 4]);
  assertClose(kiln.matmul(rand([0, 5], 1), rand([5, 4], 2)), [], [0, 4]);
  assertClose(kiln.matmul(rand([3, 5], 1), rand([5, 0], 2)), [], [3, 0]);
  assertClose(kiln.matmul(rand([0, 3, 5], 1), rand([5, 2], 2)), [], [0, 3, 2]);
  assertClose(kiln.matmul(rand([0], 1), rand([0], 2)), [0], []);
  assertClose(kiln.linear(rand([2, 0], 1), rand([3, 0], 2), kiln.tensor([1, 2, 3])), [1, 2, 3, 1, 2, 3], [2, 3]);
});

test('matmul propagates NaN and infinity', () => {
  const a = makeTensor([1, NaN, 0, 2, Infinity, 1], [2, 3]);
  const b = makeTensor([1, 0, 1, 1, 1, 1], [3, 2]);
  assertClose(kiln.matmul(a, b), [NaN, NaN, Infinity, Infinity], [2, 2]);
});

test('matmul in float16 and bfloat16 stays within half-precision tolerance of float64', () => {
  for (const dtype of ['float16', 'bfloat16'] as DType[]) {
    for (const [la, lb] of [['contiguous', 'transposed'], ['strided', 'contiguous']] as [Layout, Layout][]) {
      const a = rand([5, 8], 1, la, dtype, -1, 1);
      const b = rand([2, 8, 6], 2, lb, dtype, -1, 1);
      const out = checkMatmul(a, b, { atol: tolFor(dtype).atol * 4, rtol: tolFor(dtype).rtol });
      assert.equal(out.dtype, dtype);
    }
  }
});

test('integer matmul is exact (int32, int64, uint8 wrap-around)', () => {
  const a = makeTensor(randomInts(6 * 40, 1, -1000, 1000), [6, 40], 'int32', 'transposed');
  const b = makeTensor(randomInts(40 * 5, 2, -1000, 1000), [40, 5], 'int32');
  const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
  const out = kiln.matmul(a, b);
  assert.equal(out.dtype, 'int32');
  assertClose(out, r.values, r.shape, { atol: 0, rtol: 0 });
  // int64 products beyond float32's exact range (2^24) but within 2^53
  const c = makeTensor(randomInts(3 * 300, 3, -3_000_000, 3_000_000), [3, 300], 'int64', 'strided');
  const d = makeTensor(randomInts(300 * 4, 4, -3_000_000, 3_000_000), [300, 4], 'int64', 'transposed');
  const r2 = refMatmul(c.toFlatArray(), c.shape, d.toFlatArray(), d.shape);
  const out2 = kiln.mm(c, d);
  assert.equal(out2.dtype, 'int64');
  assertClose(out2, r2.values, r2.shape, { atol: 0, rtol: 0 });
  const u = kiln.matmul(kiln.tensor([[200, 100]], { dtype: 'uint8' }), kiln.tensor([[2], [1]], { dtype: 'uint8' }));
  assert.deepEqual(u.toArray(), [[(400 + 100) % 256]]);
});

test('mm, bmm and dot, as functions and Tensor methods', () => {
  const a = rand([3, 4], 1, 'transposed');
  const b = rand([4, 2], 2, 'strided');
  const r = refMatmul(a.toFlatArray(), a.shape, b.toFlatArray(), b.shape);
  assertClose(kiln.mm(a, b), r.values, r.shape);
  assertClose(a.mm(b), r.values, r.shape);
  assertClose(a.matmul(b), r.values, r.shape);
  const x = rand([3, 2, 5], 3, 'strided');
  const y = rand([3, 5, 4], 4, 'transposed');
  const rb = refMatmul(x.toFlatArray(), x.shape, y.toFlatArray(), y.shape);
  assertClose(kiln.bmm(x, y), rb.values, rb.shape);
  assertClose(x.bmm(y), rb.values, rb.shape);
  const u = rand([6], 5, 'strided');
  const v = rand([6], 6);
  const uv = u.toFlatArray().reduce((s, e, i) => s + e * v.toFlatArray()[i]!, 0);
  assertClose(kiln.dot(u, v), [uv], []);
  assertClose(u.dot(v), [uv], []);
  const iu = kiln.tensor([1, 2, 3], { dtype: 'int64' });
  assert.deepEqual(iu.dot(iu).toArray(), 14);
  assert.equal(iu.dot(iu).dtype, 'int64');
});

test('linear: x @ weight^T + bias over leading dims, with a transposed weight', () => {
  const x = rand([2, 3, 4], 1, 'strided');
  const wv = randomValues(5 * 4, 2);
  const w = makeTensor(wv, [5, 4], 'float32', 'transposed');
  const bv = randomValues(5, 3);
  const bias = makeTensor(bv, [5], 'float32', 'strided');
  const r = refMatmul(x.toFlatArray(), x.shape, refTranspose(w.toFlatArray(), 5, 4), [4, 5]);
  const expected = r.values.map((v, i) => v + bias.toFlatArray()[i % 5]!);
  const out = kiln.linear(x, w, bias);
  assertClose(out, expected, [2, 3, 5]);
  assert.deepEqual([...out.strides], [15, 5, 1]);
  assertClose(kiln.linear(x, w), r.values, [2, 3, 5]);
  assertClose(kiln.linear(x, w, null), r.values, [2, 3, 5]);
  // 1-d input, 1-d weight, broadcast [1]-shaped bias
  const x1 = rand([4], 4);
  const r1 = refMatmul(x1.toFlatArray(), [4], refTranspose(w.toFlatArray(), 5, 4), [4, 5]);
  assertClose(kiln.linear(x1, w), r1.values, [5]);
  const w1 = rand([4], 5);
  const xv = x.toFlatArray();
  const w1v = w1.toFlatArray();
  const dotv = Array.from({ length: 6 }, (_, row) => {
    let s = 0.5;
    for (let p = 0; p < 4; p++) s += xv[row * 4 + p]! * w1v[p]!;
    return s;
  });
  assertClose(kiln.linear(x, w1, kiln.tensor([0.5])), dotv, [2, 3]);
  // half precision linear
  const xh = rand([3, 8], 6, 'contiguous', 'bfloat16', -1, 1);
  const wh = rand([4, 8], 7, 'transposed', 'bfloat16', -1, 1);
  const bh = rand([4], 8, 'contiguous', 'bfloat16', -1, 1);
  const rh = refMatmul(xh.toFlatArray(), xh.shape, refTranspose(wh.toFlatArray(), 4, 8), [8, 4]);
  assertClose(kiln.linear(xh, wh, bh), rh.values.map((v, i) => v + bh.toFlatArray()[i % 4]!), [3, 4], { atol: 0.05, rtol: 0.02 });
});

test('addmm: beta * input + alpha * (mat1 @ mat2), broadcast input, beta = 0 ignores NaN input', () => {
  const m1 = rand([3, 4], 1, 'transposed');
  const m2 = rand([4, 5], 2, 'strided');
  const r = refMatmul(m1.toFlatArray(), m1.shape, m2.toFlatArray(), m2.shape);
  const inpV = randomValues(5, 3);
  const inp = makeExpanded(inpV, [5], [3, 5]);
  assertClose(kiln.addmm(inp, m1, m2, 0.5, 2), r.values.map((v, i) => 0.5 * inpV[i % 5]! + 2 * v), [3, 5]);
  assertClose(kiln.addmm(inp, m1, m2), r.values.map((v, i) => inpV[i % 5]! + v), [3, 5]);
  const full = rand([3, 5], 4, 'transposed');
  assertClose(full.addmm(m1, m2, -1, 1), r.values.map((v, i) => -full.toFlatArray()[i]! + v), [3, 5]);
  const nan = makeTensor(new Array<number>(15).fill(NaN), [3, 5]);
  assertClose(kiln.addmm(nan, m1, m2, 0, 3), r.values.map((v) => 3 * v), [3, 5]);
  // int addmm stays exact
  const i1 = kiln.tensor([[1, 2], [3, 4]], { dtype: 'int64' });
  assert.deepEqual(kiln.addmm(kiln.tensor([10, 20], { dtype: 'int64' }), i1, i1, 2, 3).toArray(), [[20 + 21, 40 + 30], [20 + 45, 40 + 66]]);
  // k = 0: only beta * input remains
  assertClose(kiln.addmm(full, rand([3, 0], 1), rand([0, 5], 2), 2, 1), full.toFlatArray().map((v) => 2 * v), [3, 5]);
});

test('matmul of mixed dtypes with nothing to multiply follows torch: batched operands give the second dtype', () => {
  // torch 2.11 (fuzz cases 967, 1375): both operands 3-d or more run bmm, whose result takes the
  // second operand's dtype and is returned (zeros) before any dtype check when it is empty or
  // contracts over 0. float64 [1, 3, 0] @ bfloat16 [1, 0, 1] is bfloat16 [1, 3, 1] zeros;
  // float32 [4, 1, 0, 1] @ float16 [4, 1, 1, 2] is float16 [4, 1, 0, 2].
  for (const f of [(x: Tensor, y: Tensor) => kiln.matmul(x, y), kiln.compile((x: Tensor, y: Tensor) => kiln.matmul(x, y))]) {
    const z = f(kiln.zeros([1, 3, 0], { dtype: 'float64' }), kiln.zeros([1, 0, 1], { dtype: 'bfloat16' }));
    assert.equal(z.dtype, 'bfloat16');
    assert.deepEqual(z.shape, [1, 3, 1]);
    assert.deepEqual(z.toFlatArray(), [0, 0, 0]);
    const e = f(kiln.ones([4, 1, 0, 1]), kiln.ones([4, 1, 1, 2], { dtype: 'float16' }));
    assert.equal(e.dtype, 'float16');
    assert.deepEqual(e.shape, [4, 1, 0, 2]);
  }
  // Lower ranks fold to mm / dot, which check dtypes even when empty (fuzz cases 875, 1256, 2416).
  assertThrowsWith(() => kiln.matmul(kiln.zeros([1, 0], { dtype: 'int64' }), kiln.zeros([0, 2], { dtype: 'float16' })), 'matmul', 'int64', 'float16', 'same dtype');
  assertThrowsWith(() => kiln.matmul(kiln.zeros([5, 1, 0], { dtype: 'int32' }), kiln.zeros([0, 1], { dtype: 'int64' })), 'matmul', 'same dtype');
  // A non-empty batched product still needs one dtype (torch: expected scalar type Float but found BFloat16, case 662).
  assertThrowsWith(() => kiln.matmul(kiln.ones([1, 4, 4]), kiln.ones([1, 4, 2], { dtype: 'bfloat16' })), 'matmul', 'same dtype');
});

test('product errors name the op, the operands and the offending shapes or dtypes', () => {
  assertThrowsWith(() => kiln.matmul(rand([2, 3], 1), rand([4, 5], 2)), 'matmul', '[2, 3]', '[4, 5]', 'cannot be multiplied');
  assertThrowsWith(() => kiln.matmul(rand([3], 1), rand([4], 2)), 'matmul', '[3]', '[4]');
  assertThrowsWith(() => kiln.matmul(rand([2, 3, 4], 1), rand([3, 4, 5], 2)), 'matmul', '[2]', '[3]', 'broadcast');
  assertThrowsWith(() => kiln.matmul(kiln.tensor(2), rand([3], 2)), 'matmul', "'self' [] float32", 'at least 1 dim');
  assertThrowsWith(() => kiln.matmul(rand([2, 3], 1), rand([3, 2], 2, 'contiguous', 'float16')), 'matmul', 'float32', 'float16', 'same dtype');
  assertThrowsWith(() => kiln.matmul(rand([2, 3], 1, 'contiguous', 'int32'), rand([3, 2], 2, 'contiguous', 'int64')), 'matmul', 'int32', 'int64');
  assertThrowsWith(() => kiln.matmul(kiln.tensor([[true]]), kiln.tensor([[false]])), 'matmul', 'bool');
  assertThrowsWith(() => kiln.mm(rand([2, 3, 4], 1), rand([4, 2], 2)), 'mm', "'self'", '[2, 3, 4]', '2-d');
  assertThrowsWith(() => kiln.mm(rand([2, 3], 1), rand([4, 2], 2)), 'mm', '[2, 3]', '[4, 2]');
  assertThrowsWith(() => kiln.bmm(rand([3, 4], 1), rand([2, 4, 5], 2)), 'bmm', "'self'", '[3, 4]', '3-d');
  assertThrowsWith(() => kiln.bmm(rand([2, 3, 4], 1), rand([2, 4], 2)), 'bmm', "'mat2'", '[2, 4]', '3-d');
  assertThrowsWith(() => kiln.bmm(rand([2, 3, 4], 1), rand([3, 4, 5], 2)), 'bmm', '[2, 3, 4]', '[3, 4, 5]', 'batches');
  assertThrowsWith(() => kiln.bmm(rand([2, 3, 4], 1), rand([2, 5, 5], 2)), 'bmm', '[2, 3, 4]', '[2, 5, 5]', 'cannot be multiplied');
  assertThrowsWith(() => kiln.dot(rand([3], 1), rand([4], 2)), 'dot', '[3]', '[4]');
  assertThrowsWith(() => kiln.dot(rand([3, 1], 1), rand([3], 2)), 'dot', "'self'", '[3, 1]');
  assertThrowsWith(() => kiln.linear(rand([2, 3], 1), rand([5, 4], 2)), 'linear', '[2, 3]', '[5, 4]');
  assertThrowsWith(() => kiln.linear(rand([2, 4], 1), rand([5, 4], 2), rand([4], 3)), 'linear', "'bias' [4]", '[2, 5]');
  assertThrowsWith(() => kiln.linear(rand([2, 4], 1), rand([5, 4], 2), rand([5], 3, 'contiguous', 'float16')), 'linear', 'float16', 'float32');
  assertThrowsWith(() => kiln.linear(rand([2, 4], 1), rand([1, 5, 4], 2)), 'linear', "'weight'", '[1, 5, 4]');
  assertThrowsWith(() => kiln.addmm(rand([4, 5], 1), rand([3, 4], 2), rand([4, 5], 3)), 'addmm', "'self' [4, 5]", '[3, 5]');
  assertThrowsWith(() => kiln.addmm(rand([3, 5], 1, 'contiguous', 'int32'), rand([3, 4], 2, 'contiguous', 'int32'), rand([4, 5], 3, 'contiguous', 'int32'), 0.5), 'addmm', 'beta', '0.5', 'int32');
  assertThrowsWith(() => kiln.addmm(rand([3, 5], 1), rand([3, 4], 2), rand([4, 5], 3, 'contiguous', 'bfloat16')), 'addmm', 'float32', 'bfloat16');
});
