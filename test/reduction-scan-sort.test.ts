/** softmax/logSoftmax, cumsum/cumprod, sort/argsort/topk against float64 references. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType, Tensor } from '../src/index.js';
import { castValue } from '../src/tensor/typed.js';
import { contiguousStrides, preservedStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, randomInts, randomValues } from './helpers/make.js';
import { refAlong, refCumprod, refCumsum, refLogSoftmax, refSoftmax, refSortOrder } from './helpers/reduction-ref.js';

const CONFIGS: { layout: Layout; shape: number[]; dims: number[] }[] = [
  { layout: 'contiguous', shape: [3, 4, 5], dims: [0, 1, -1] },
  { layout: 'transposed', shape: [3, 4, 5], dims: [0, 2, -2] },
  { layout: 'strided', shape: [3, 4, 5], dims: [1, -1] },
  { layout: 'channelsLast', shape: [2, 3, 4, 5], dims: [1, 3, 0] },
  { layout: 'contiguous', shape: [4, 1], dims: [1, 0] },
];

function input(dtype: DType, shape: number[], layout: Layout, seed: number, lo = -3, hi = 3): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const vals = dtype === 'bool' ? randomInts(n, seed, 0, 2) : dtype === 'float32' || dtype === 'float16' || dtype === 'bfloat16' ? randomValues(n, seed, lo, hi) : randomInts(n, seed, Math.max(lo, dtype === 'uint8' ? 0 : lo), hi);
  return makeTensor(vals, shape, dtype, layout);
}

function assertPreserved(out: Tensor, x: Tensor, where: string): void {
  assert.deepEqual([...out.strides], preservedStrides(x.shape, x.shape, x.strides), `${where}: output keeps the input's layout`);
}

test('softmax/logSoftmax match references on every layout and dim, with contiguous outputs (as torch); halves stay halves', () => {
  let seed = 1;
  for (const dtype of ['float32', 'float16', 'bfloat16'] as DType[]) {
    for (const cfg of CONFIGS) {
      const x = input(dtype, cfg.shape, cfg.layout, seed++);
      const xv = x.toFlatArray();
      for (const dim of cfg.dims) {
        const where = `${dtype} ${cfg.layout} dim=${dim}`;
        const s = kiln.softmax(x, dim);
        const ls = x.logSoftmax(dim);
        assert.equal(s.dtype, dtype, where);
        assert.equal(ls.dtype, dtype, where);
        assert.deepEqual([...s.strides], contiguousStrides(x.shape), `${where}: softmax output is contiguous`);
        assert.deepEqual([...ls.strides], contiguousStrides(x.shape), `${where}: logSoftmax output is contiguous`);
        const rs = refAlong(xv, cfg.shape, dim, refSoftmax);
        const rl = refAlong(xv, cfg.shape, dim, refLogSoftmax);
        assertClose(s, rs.values, rs.shape);
        assertClose(ls, rl.values, rl.shape);
      }
    }
  }
  const cl = input('float32', [2, 3, 4, 5], 'channelsLast', 9);
  assert.ok(kiln.softmax(cl, 1).isContiguous());
  assert.ok(kiln.cumsum(cl, 1).isContiguous('channelsLast'));
  assert.ok(kiln.sort(cl, 1).values.isContiguous('channelsLast'));
});

test('softmax is stable for large inputs, handles -inf entries, NaN rows, broadcast and 0-d inputs', () => {
  const x = kiln.tensor([
    [1000, 1001, 999],
    [-Infinity, 0, -Infinity],
    [1, NaN, 2],
  ]);
  const s = kiln.softmax(x, 1);
  assertClose(s, [...refSoftmax([0, 1, -1]), 0, 1, 0, NaN, NaN, NaN], [3, 3]);
  const ls = kiln.logSoftmax(x, 1);
  assertClose(ls, [...refLogSoftmax([0, 1, -1]), -Infinity, 0, -Infinity, NaN, NaN, NaN], [3, 3]);
  const allNegInf = kiln.softmax(kiln.tensor([-Infinity, -Infinity]), 0);
  assertClose(allNegInf, [NaN, NaN], [2], {}); // as PyTorch: 0/0
  const v = [0.5, -1, 2];
  const b = makeExpanded(v, [3], [2, 3]);
  assertClose(kiln.softmax(b, 1), [...refSoftmax(v), ...refSoftmax(v)], [2, 3]);
  assertClose(kiln.softmax(b, 0), [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [2, 3]);
  assert.deepEqual([...kiln.softmax(b, 0).strides], [3, 1]);
  assertClose(kiln.softmax(kiln.tensor(3), 0), [1], []);
  assertClose(kiln.logSoftmax(kiln.tensor(3), -1), [0], []);
  assertClose(kiln.softmax(makeTensor([], [0, 4]), 1), [], [0, 4]);
});

test('softmax with dtype: int input computes in the given float dtype; without dtype it is an error', () => {
  const i = kiln.tensor([[1, 2, 3]], { dtype: 'int64' });
  const s = kiln.softmax(i, 1, 'float32');
  assert.equal(s.dtype, 'float32');
  assertClose(s, refSoftmax([1, 2, 3]), [1, 3]);
  const h = kiln.tensor([0.1, 0.2, 0.3], { dtype: 'float16' });
  const s32 = kiln.logSoftmax(h, 0, 'float32');
  assert.equal(s32.dtype, 'float32');
  assertClose(s32, refLogSoftmax(h.toFlatArray()), [3]);
  assertThrowsWith(() => kiln.softmax(i, 1), 'softmax', 'int64');
  assertThrowsWith(() => kiln.logSoftmax(kiln.tensor([true]), 0), 'logSoftmax', 'bool');
  assertThrowsWith(() => kiln.softmax(i, 1, 'int32'), 'softmax', 'int32');
  assertThrowsWith(() => kiln.softmax(kiln.tensor([1, 2]), 1), 'softmax', 'dim 1', 'out of range');
  assertThrowsWith(() => kiln.logSoftmax(kiln.tensor([[1, 2]]), -3), 'logSoftmax', '-3', 'out of range');
});

test('softmax over [1024, 1024] float32 takes well under 100 ms (or near a bare exp loop on a loaded machine)', () => {
  const n = 1024;
  const vals = randomValues(n * n, 5);
  const x = makeTensor(vals, [n, n]);
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    kiln.softmax(x, 1).dispose();
    best = Math.min(best, performance.now() - t0);
  }
  if (best < 100) return;
  // A busy machine (other jobs sharing the cores) slows everything: compare with the floor, one
  // exp and one store per element in a bare loop, timed the same way.
  const src = Float32Array.from(vals);
  const dst = new Float32Array(n * n);
  let floor = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < src.length; i++) dst[i] = Math.exp(src[i]!);
    floor = Math.min(floor, performance.now() - t0);
  }
  assert.ok(best < 4 * floor, `softmax took ${best.toFixed(1)} ms; a bare exp loop takes ${floor.toFixed(1)} ms`);
});

test('cumsum/cumprod match references on every layout and dim, keep the layout, and promote ints to int64', () => {
  let seed = 50;
  for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    for (const cfg of CONFIGS) {
      const isFloat = dtype === 'float32' || dtype === 'float16' || dtype === 'bfloat16';
      const x = input(dtype, cfg.shape, cfg.layout, seed++, isFloat ? -3 : -4, isFloat ? 3 : 4);
      const xp = isFloat ? input(dtype, cfg.shape, cfg.layout, seed++, 0.5, 1.5) : x;
      const xv = x.toFlatArray();
      const xpv = xp.toFlatArray();
      const outDtype = isFloat ? dtype : 'int64';
      for (const dim of cfg.dims) {
        const where = `${dtype} ${cfg.layout} dim=${dim}`;
        const cs = kiln.cumsum(x, dim);
        const cp = xp.cumprod(dim);
        assert.equal(cs.dtype, outDtype, where);
        assert.equal(cp.dtype, outDtype, where);
        assertPreserved(cs, x, where);
        assertPreserved(cp, xp, where);
        const rs = refAlong(xv, cfg.shape, dim, refCumsum);
        const rp = refAlong(xpv, cfg.shape, dim, refCumprod);
        // Halves round each partial result, so compare with a tolerance that grows with the line.
        const tol = dtype === 'float16' ? { atol: 1e-2, rtol: 4e-3 } : dtype === 'bfloat16' ? { atol: 6e-2, rtol: 2e-2 } : {};
        assertClose(cs, rs.values.map((v) => castValue(v, outDtype)), rs.shape, tol);
        assertClose(cp, rp.values.map((v) => castValue(v, outDtype)), rp.shape, tol);
      }
    }
  }
  const b = makeExpanded([1, 2, 3], [3], [2, 3]);
  assertClose(kiln.cumsum(b, 0), [1, 2, 3, 2, 4, 6], [2, 3]);
  assert.deepEqual([...kiln.cumsum(b, 0).strides], contiguousStrides([2, 3]));
  const i32 = kiln.tensor([2 ** 30, 2 ** 30, 2 ** 30], { dtype: 'int32' });
  assert.deepEqual(kiln.cumsum(i32, 0).toArray(), [2 ** 30, 2 ** 31, 3 * 2 ** 30], 'int64 accumulation does not wrap');
  const f = kiln.cumsum(i32, 0, 'float32');
  assert.equal(f.dtype, 'float32');
  assertClose(kiln.cumsum(kiln.tensor([1, NaN, 2]), 0), [1, NaN, NaN], [3]);
  assertClose(kiln.cumsum(kiln.tensor(4), 0), [4], []);
  assertClose(kiln.cumprod(makeTensor([], [2, 0]), 1), [], [2, 0]);
  assertThrowsWith(() => kiln.cumsum(kiln.tensor([1, 2]), 2), 'cumsum', 'dim 2', 'out of range');
  assertThrowsWith(() => kiln.cumprod(kiln.tensor([[1, 2]]), -3), 'cumprod', '-3', 'out of range');
});

test('sort/argsort match a stable reference sort on every layout, dim and dtype, both directions', () => {
  let seed = 200;
  for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    for (const cfg of CONFIGS) {
      // Few distinct values, so ties are common and stability is visible.
      const x = input(dtype, cfg.shape, cfg.layout, seed++, 0, 4);
      const xv = dtype === 'bool' || dtype.startsWith('int') || dtype === 'uint8' ? x.toFlatArray() : x.toFlatArray().map((v) => Math.round(v));
      const xt = makeTensor(xv, cfg.shape, dtype, cfg.layout);
      for (const dim of cfg.dims) {
        for (const descending of [false, true]) {
          const where = `${dtype} ${cfg.layout} dim=${dim} descending=${descending}`;
          const { values, indices } = kiln.sort(xt, dim, descending, true);
          assert.equal(values.dtype, dtype, where);
          assert.equal(indices.dtype, 'int64', where);
          assertPreserved(values, xt, where);
          assertPreserved(indices, xt, where);
          const ri = refAlong(xv, cfg.shape, dim, (l) => refSortOrder(l, descending));
          const rv = refAlong(xv, cfg.shape, dim, (l) => refSortOrder(l, descending).map((j) => l[j]!));
          assertClose(values, rv.values, rv.shape);
          assertClose(indices, ri.values, ri.shape);
          assertClose(xt.argsort(dim, descending, true), ri.values, ri.shape);
        }
      }
    }
  }
});

test('sort: NaN sorts above everything, ties keep their order, default dim is -1', () => {
  const x = kiln.tensor([[3, NaN, -Infinity, 1, Infinity, NaN, 1]]);
  const a = kiln.sort(x);
  assertClose(a.values, [-Infinity, 1, 1, 3, Infinity, NaN, NaN], [1, 7]);
  assert.deepEqual(a.indices.toArray(), [[2, 3, 6, 0, 4, 1, 5]]);
  const d = x.sort(-1, true, true);
  assertClose(d.values, [NaN, NaN, Infinity, 3, 1, 1, -Infinity], [1, 7]);
  assert.deepEqual(d.indices.toArray(), [[1, 5, 4, 0, 3, 6, 2]]);
  assert.deepEqual(kiln.argsort(x, 1, true).toArray(), [[1, 5, 4, 0, 3, 6, 2]]);
  const ties = kiln.tensor([2, 1, 2, 1, 2], { dtype: 'int32' });
  assert.deepEqual(kiln.sort(ties, 0, false, true).indices.toArray(), [1, 3, 0, 2, 4]);
  assert.deepEqual(kiln.sort(ties, 0, true, true).indices.toArray(), [0, 2, 4, 1, 3]);
  const s0 = kiln.sort(kiln.tensor(5));
  assert.deepEqual([s0.values.item(), s0.indices.item()], [5, 0]);
  const e = kiln.sort(makeTensor([], [3, 0]), 1);
  assert.deepEqual([...e.values.shape], [3, 0]);
  const b = kiln.sort(makeExpanded([3, 1, 2], [3], [2, 3]), 1);
  assert.deepEqual(b.values.toArray(), [[1, 2, 3], [1, 2, 3]]);
  assert.deepEqual(b.indices.toArray(), [[1, 2, 0], [1, 2, 0]]);
  assertThrowsWith(() => kiln.sort(kiln.tensor([1, 2]), 1), 'sort', 'dim 1', 'out of range');
  assertThrowsWith(() => kiln.argsort(kiln.tensor([[1, 2]]), -3), 'argsort', '-3', 'out of range');
});

test('topk matches a reference on every layout and dim, for k = 0..size, largest and smallest', () => {
  let seed = 400;
  for (const dtype of ['float32', 'float16', 'int32', 'int64'] as DType[]) {
    for (const cfg of CONFIGS) {
      const x = input(dtype, cfg.shape, cfg.layout, seed++, -3, 3);
      const xv = x.toFlatArray();
      for (const dim of cfg.dims) {
        const size = cfg.shape[dim < 0 ? dim + cfg.shape.length : dim]!;
        for (const k of [0, 1, Math.min(2, size), size]) {
          for (const largest of [true, false]) {
            const where = `${dtype} ${cfg.layout} dim=${dim} k=${k} largest=${largest}`;
            const { values, indices } = kiln.topk(x, k, dim, largest);
            const ri = refAlong(xv, cfg.shape, dim, (l) => refSortOrder(l, largest).slice(0, k));
            const rv = refAlong(xv, cfg.shape, dim, (l) => refSortOrder(l, largest).slice(0, k).map((j) => l[j]!));
            assert.deepEqual([...values.strides], contiguousStrides(rv.shape), `${where}: contiguous values`);
            assert.deepEqual([...indices.strides], contiguousStrides(rv.shape), `${where}: contiguous indices`);
            assert.equal(indices.dtype, 'int64');
            assertClose(values, rv.values, rv.shape);
            assertClose(indices, ri.values, ri.shape);
          }
        }
      }
    }
  }
});

test('topk on long lines (partial selection) matches the reference, with ties and NaN', () => {
  let seed = 700;
  for (const dtype of ['float32', 'int64', 'bfloat16'] as DType[]) {
    for (const layout of ['contiguous', 'transposed', 'strided'] as Layout[]) {
      const shape = [3, 70];
      // Few distinct values (many ties), a NaN and infinities in float lines.
      const vals = randomInts(210, seed++, -4, 4);
      if (dtype !== 'int64') {
        vals[5] = NaN;
        vals[100] = Infinity;
        vals[150] = -Infinity;
        vals[151] = NaN;
      }
      const x = makeTensor(vals, shape, dtype, layout);
      for (const k of [1, 3, 4]) {
        for (const largest of [true, false]) {
          const { values, indices } = kiln.topk(x, k, 1, largest);
          const ri = refAlong(vals, shape, 1, (l) => refSortOrder(l, largest).slice(0, k));
          const rv = refAlong(vals, shape, 1, (l) => refSortOrder(l, largest).slice(0, k).map((j) => l[j]!));
          assertClose(values, rv.values, rv.shape);
          assertClose(indices, ri.values, ri.shape);
        }
      }
      const xt = makeTensor(vals, [70, 3], dtype, layout);
      const t0 = kiln.topk(xt, 2, 0, true);
      const r0 = refAlong(vals, [70, 3], 0, (l) => refSortOrder(l, true).slice(0, 2));
      assertClose(t0.indices, r0.values, r0.shape);
    }
  }
});

test('sort of negative floats, -0 and +0 (equal, stable) and long lines with many ties', () => {
  const z = kiln.sort(kiln.tensor([0, -0, 0, -1.5, -0.25]), 0, false, true);
  assert.deepEqual(z.indices.toArray(), [3, 4, 0, 1, 2]);
  const zd = kiln.sort(kiln.tensor([0, -0, 0, -1.5, -0.25]), 0, true, true);
  assert.deepEqual(zd.indices.toArray(), [0, 1, 2, 4, 3]);
  const vals = randomInts(600, 3, -3, 3).map((v, i) => (i % 7 === 0 ? v + 0.5 : v));
  for (const dtype of ['float32', 'int64'] as DType[]) {
    const v = dtype === 'int64' ? vals.map(Math.floor) : vals;
    const x = makeTensor(v, [2, 300], dtype, 'transposed');
    for (const descending of [false, true]) {
      const s = kiln.sort(x, 1, descending, true);
      const ri = refAlong(v, [2, 300], 1, (l) => refSortOrder(l, descending));
      assertClose(s.indices, ri.values, ri.shape);
    }
  }
});

test('topk: NaN counts as largest, ties take the first index, k out of range is a clear error', () => {
  const x = kiln.tensor([1, NaN, 5, 5, -2]);
  const t = kiln.topk(x, 3);
  assertClose(t.values, [NaN, 5, 5], [3]);
  assert.deepEqual(t.indices.toArray(), [1, 2, 3]);
  const s = x.topk(2, 0, false);
  assertClose(s.values, [-2, 1], [2]);
  assert.deepEqual(s.indices.toArray(), [4, 0]);
  const z = kiln.topk(x, 0);
  assert.deepEqual([...z.values.shape], [0]);
  assert.deepEqual([...kiln.topk(kiln.tensor(2), 1).values.shape], []);
  assertThrowsWith(() => kiln.topk(kiln.tensor([[1, 2, 3, 4]]), 5), 'topk', 'k 5', 'size 4');
  assertThrowsWith(() => kiln.topk(kiln.tensor([1, 2]), -1), 'topk', '-1');
  assertThrowsWith(() => kiln.topk(kiln.tensor([[1, 2]]), 1, 2), 'topk', 'dim 2', 'out of range');
  assertThrowsWith(() => kiln.topk(kiln.tensor([true, false]), 1), 'topk', 'bool');
});
