/** cat, stack, split, chunk, tril, triu against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { channelsLastStrides, contiguousStrides, preservedStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeTensor, rand, randomInts } from './helpers/make.js';
import { refCat, refSlice, refStack, refTri, size } from './helpers/indexing-ref.js';

const flat = (t: kiln.Tensor) => ({ values: t.toFlatArray(), shape: [...t.shape] });

test('cat along every dim of mixed layouts matches the reference, output contiguous', () => {
  const layouts: Layout[] = ['contiguous', 'transposed', 'strided'];
  let seed = 1;
  for (let dim = 0; dim < 3; dim++) {
    const shapes = [2, 3, 1].map((k) => [3, 4, 2].map((s, d) => (d === dim ? k : s)));
    const parts = shapes.map((s, i) => rand(s, seed++, layouts[i]!));
    const exp = refCat(parts.map(flat), dim);
    const out = kiln.cat(parts, dim);
    assertClose(out, exp.values, exp.shape);
    assert.deepEqual([...out.strides], contiguousStrides(exp.shape));
    assertClose(kiln.cat(parts, dim - 3), exp.values, exp.shape);
  }
  const one = rand([2, 3], 9, 'transposed');
  assertClose(kiln.cat([one]), one.toFlatArray(), [2, 3]);
  const withEmpty = [rand([2, 0], 1), rand([2, 3], 2, 'strided')];
  assertClose(kiln.cat(withEmpty, 1), refCat(withEmpty.map(flat), 1).values, [2, 3]);
});

test('cat promotes dtypes like PyTorch and skips legacy 1-d empty tensors', () => {
  const cases: [DType, DType, DType][] = [
    ['int32', 'float16', 'float16'],
    ['int32', 'int64', 'int64'],
    ['bool', 'uint8', 'uint8'],
    ['float16', 'bfloat16', 'float32'],
    ['bool', 'int32', 'int32'],
    ['bfloat16', 'bfloat16', 'bfloat16'],
  ];
  for (const [a, b, r] of cases) {
    const x = makeTensor(randomInts(6, 1, 0, 2), [2, 3], a, 'transposed');
    const y = makeTensor(randomInts(3, 2, 0, 2), [1, 3], b);
    const out = kiln.cat([x, y]);
    assert.equal(out.dtype, r, `cat(${a}, ${b})`);
    assertClose(out, refCat([flat(x), flat(y)], 0).values, [3, 3]);
  }
  const skipped = kiln.cat([makeTensor([], [0], 'float32'), makeTensor([1, 2, 3, 4], [2, 2], 'int32'), makeTensor([], [0], 'int32')], 1);
  assert.equal(skipped.dtype, 'float32');
  assertClose(skipped, [1, 2, 3, 4], [2, 2]);
  assertClose(kiln.cat([rand([0], 1), rand([0], 2)]), [], [0]);
  const v = kiln.cat([kiln.tensor([1, 2]), kiln.tensor([NaN, Infinity])]);
  assertClose(v, [1, 2, NaN, Infinity], [4]);
});

test('cat of all-channels_last inputs is channels_last; mixed layouts give contiguous', () => {
  const a = rand([2, 3, 4, 5], 1, 'channelsLast');
  const b = rand([2, 2, 4, 5], 2, 'channelsLast');
  const out = kiln.cat([a, b], 1);
  assert.deepEqual([...out.strides], channelsLastStrides([2, 5, 4, 5]));
  assertClose(out, refCat([flat(a), flat(b)], 1).values, [2, 5, 4, 5]);
  const c = rand([1, 3, 4, 5], 3, 'channelsLast');
  const out0 = kiln.cat([a, c], 0);
  assert.deepEqual([...out0.strides], channelsLastStrides([3, 3, 4, 5]));
  assertClose(out0, refCat([flat(a), flat(c)], 0).values, [3, 3, 4, 5]);
  const mixed = kiln.cat([a, rand([2, 3, 4, 5], 4)], 3);
  assert.deepEqual([...mixed.strides], contiguousStrides([2, 3, 4, 10]));
  assertClose(mixed, refCat([flat(a), flat(rand([2, 3, 4, 5], 4))], 3).values, [2, 3, 4, 10]);
});

test('cat errors: empty list, mismatched non-cat dims, rank mismatch, 0-d tensors, dim out of range', () => {
  assertThrowsWith(() => kiln.cat([]), 'cat', 'non-empty');
  assertThrowsWith(() => kiln.cat([rand([2, 3], 1), rand([4, 5], 2)], 1), 'cat', '[2, 3]', '[4, 5]', 'dim 0', 'dimension 1');
  assertThrowsWith(() => kiln.cat([rand([2, 3], 1), rand([2, 3, 1], 2)]), 'cat', '[2, 3]', '[2, 3, 1]', 'number of dimensions');
  assertThrowsWith(() => kiln.cat([rand([2], 1), kiln.tensor(1)]), 'cat', 'zero-dimensional', 'position 1');
  assertThrowsWith(() => kiln.cat([rand([2], 1)], 1), 'cat', 'dim 1');
});

test('stack along every dim matches the reference; promotion; errors', () => {
  const layouts: Layout[] = ['contiguous', 'transposed', 'strided'];
  const parts = layouts.map((l, i) => rand([3, 4], 10 + i, l));
  for (let dim = -3; dim < 3; dim++) {
    const d = dim < 0 ? dim + 3 : dim;
    const exp = refStack(parts.map((p) => p.toFlatArray()), [3, 4], d);
    const out = kiln.stack(parts, dim);
    assertClose(out, exp.values, exp.shape);
    assert.deepEqual([...out.strides], contiguousStrides(exp.shape));
  }
  const mix = kiln.stack([makeTensor([1, 2], [2], 'int32'), makeTensor([0.5, 1.5], [2], 'float16')], 1);
  assert.equal(mix.dtype, 'float16');
  assertClose(mix, [1, 0.5, 2, 1.5], [2, 2]);
  const cl = rand([1, 2, 2, 3], 3, 'channelsLast');
  assertClose(kiln.stack([cl, cl], 4), refStack([cl.toFlatArray(), cl.toFlatArray()], [1, 2, 2, 3], 4).values, [1, 2, 2, 3, 2]);
  assertClose(kiln.stack([kiln.tensor(1), kiln.tensor(2)]), [1, 2], [2]);
  assertThrowsWith(() => kiln.stack([rand([2, 3], 1), rand([3, 2], 2)]), 'stack', '[2, 3]', '[3, 2]', 'entry 1');
  assertThrowsWith(() => kiln.stack([]), 'stack', 'non-empty');
  assertThrowsWith(() => kiln.stack([rand([2, 3], 1)], 3), 'stack', 'dim 3');
});

function checkPieces(x: kiln.Tensor, pieces: kiln.Tensor[], dim: number, sizes: number[]): void {
  assert.deepEqual(pieces.map((p) => p.shape[dim]), sizes, 'piece sizes');
  const xv = x.toFlatArray();
  let start = 0;
  for (const [i, p] of pieces.entries()) {
    assert.equal(p.storage, x.storage, `piece ${i} shares storage`);
    assert.deepEqual([...p.strides], [...x.strides], `piece ${i} strides`);
    assert.equal(p.offset, x.offset + start * x.strides[dim]!, `piece ${i} offset`);
    const shape = [...x.shape];
    shape[dim] = sizes[i]!;
    assertClose(p, refSlice(xv, [...x.shape], dim, start, sizes[i]!), shape);
    start += sizes[i]!;
  }
}

test('split by size (uneven) and by sections gives views with exact strides and offsets', () => {
  for (const layout of ['contiguous', 'transposed', 'strided'] as Layout[]) {
    const x = rand([7, 6], 1, layout);
    checkPieces(x, kiln.split(x, 3), 0, [3, 3, 1]);
    checkPieces(x, x.split(4, -1), 1, [4, 2]);
    checkPieces(x, x.split(10), 0, [7]);
    checkPieces(x, kiln.split(x, [1, 0, 4, 2]), 0, [1, 0, 4, 2]);
    checkPieces(x, x.split([6], 1), 1, [6]);
  }
  const cl = rand([2, 5, 3, 4], 2, 'channelsLast');
  checkPieces(cl, cl.split(2, 1), 1, [2, 2, 1]);
  checkPieces(cl, cl.split([1, 2], 2), 2, [1, 2]);
  const e = rand([0, 3], 1);
  checkPieces(e, kiln.split(e, 0), 0, [0]);
  checkPieces(e, kiln.split(e, 2), 0, [0]);
});

test('chunk when the size is not divisible, and of an empty dim', () => {
  const x = rand([3, 7], 3, 'strided');
  checkPieces(x, kiln.chunk(x, 3, -1), 1, [3, 3, 1]);
  checkPieces(x, x.chunk(2, 1), 1, [4, 3]);
  checkPieces(x, x.chunk(5), 0, [1, 1, 1]);
  const y = rand([6, 2], 4, 'transposed');
  checkPieces(y, y.chunk(4), 0, [2, 2, 2]);
  checkPieces(y, y.chunk(6), 0, [1, 1, 1, 1, 1, 1]);
  const cl = rand([4, 3, 2, 2], 5, 'channelsLast');
  checkPieces(cl, cl.chunk(3, 0), 0, [2, 2]);
  const e = rand([2, 0], 1);
  checkPieces(e, e.chunk(3, 1), 1, [0, 0, 0]);
});

test('split pieces share storage: writing into a piece changes the parent (and the other way)', () => {
  for (const layout of ['contiguous', 'transposed', 'strided'] as Layout[]) {
    const x = rand([4, 5], 6, layout);
    const before = x.toFlatArray();
    const [, mid] = x.split([1, 3, 1], 1);
    mid!.copy_(kiln.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]));
    const after = x.toFlatArray();
    const expected = before.map((v, i) => {
      const [r, c] = [Math.floor(i / 5), i % 5];
      return c >= 1 && c <= 3 ? r * 3 + c : v;
    });
    assertClose(x, expected, [4, 5]);
    assert.notDeepEqual(after, before);
    const [, second] = x.chunk(2, 0);
    x.copy_(0);
    assertClose(second!, new Array<number>(10).fill(0), [2, 5]);
  }
  const h = makeTensor([1, 2, 3, 4], [4], 'float16', 'strided');
  const [, b] = h.split(2);
  b!.copy_(kiln.tensor([0.5, -0.25]));
  assert.deepEqual(h.toArray(), [1, 2, 0.5, -0.25]);
});

test('split / chunk errors: sizes not summing, zero split size, bad chunks, 0-d input', () => {
  const x = rand([5, 3], 1);
  assertThrowsWith(() => kiln.split(x, [2, 2]), 'split', '[2, 2]', 'sum to 4', 'size 5');
  assertThrowsWith(() => kiln.split(x, [2, 4], 1), 'split', 'sum to 6', 'dim 1', 'size 3');
  assertThrowsWith(() => kiln.split(x, 0), 'split', 'splitSize', 'size 5');
  assertThrowsWith(() => kiln.split(x, -1), 'split', 'splitSize', '-1');
  assertThrowsWith(() => kiln.split(x, [6, -1]), 'split', '-1');
  assertThrowsWith(() => kiln.chunk(x, 0), 'chunk', 'chunks', '0');
  assertThrowsWith(() => kiln.split(kiln.tensor(1), 1), 'split', '0-d');
  assertThrowsWith(() => kiln.chunk(x, 2, 2), 'chunk', 'dim 2');
});

test('tril / triu match the reference on batches, diagonals, layouts and dtypes', () => {
  const cases: [number[], Layout][] = [
    [[5, 4], 'contiguous'],
    [[4, 6], 'transposed'],
    [[2, 3, 4], 'strided'],
    [[2, 3, 4], 'transposed'],
    [[2, 3, 4, 5], 'channelsLast'],
    [[1, 1], 'contiguous'],
    [[0, 3], 'contiguous'],
  ];
  let seed = 40;
  for (const [xs, layout] of cases) {
    for (const dt of ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'bool'] as DType[]) {
      const vals = dt === 'bool' ? randomInts(size(xs), seed++, 0, 2) : dt.startsWith('int') ? randomInts(size(xs), seed++, -9, 9) : rand(xs, seed++).toFlatArray();
      const x = makeTensor(vals, xs, dt, layout);
      const xv = x.toFlatArray();
      for (const diagonal of [-2, -1, 0, 1, 3]) {
        const lo = kiln.tril(x, diagonal);
        const hi = x.triu(diagonal);
        assert.equal(lo.dtype, dt);
        assertClose(lo, refTri(xv, xs, diagonal, true), xs, { atol: 0, rtol: 0 });
        assertClose(hi, refTri(xv, xs, diagonal, false), xs, { atol: 0, rtol: 0 });
        assert.deepEqual([...lo.strides], preservedStrides(xs, xs, x.strides), 'tril keeps the layout');
        assert.deepEqual([...hi.strides], preservedStrides(xs, xs, x.strides), 'triu keeps the layout');
      }
    }
  }
  const nan = kiln.tensor([[NaN, NaN], [NaN, Infinity]]);
  assertClose(kiln.tril(nan), [NaN, 0, NaN, Infinity], [2, 2]);
  assertClose(kiln.triu(nan, 1), [0, NaN, 0, 0], [2, 2]);
  assert.deepEqual(x2().tril().toArray(), [[1, 0], [3, 4]]);
  assertThrowsWith(() => kiln.tril(rand([3], 1)), 'tril', '[3]', '2 dimensions');
  assertThrowsWith(() => kiln.triu(rand([2, 2], 1), 0.5), 'triu', 'diagonal', '0.5');
});

function x2(): kiln.Tensor {
  return makeTensor([1, 2, 3, 4], [2, 2], 'int64', 'transposed');
}
