/** Reductions against float64 references: layouts, dims, keepdim, dtypes, NaN, ties, empties, errors. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType, Tensor } from '../src/index.js';
import { castValue } from '../src/tensor/typed.js';
import { isContiguousStrides } from '../src/tensor/layout.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, randomInts, randomValues } from './helpers/make.js';
import {
  refArgExt,
  refLogsumexp,
  refMax,
  refMean,
  refMin,
  refProd,
  refReduce,
  refSum,
  refVar,
} from './helpers/reduction-ref.js';

type DimArg = number | number[] | null;

/** Layout x shape x dims configurations every reduction runs over. */
const CONFIGS: { layout: Layout; shape: number[]; dims: DimArg[] }[] = [
  { layout: 'contiguous', shape: [3, 4, 5], dims: [null, 0, -1, [0, 2], [-1, 0], [1]] },
  { layout: 'transposed', shape: [3, 4, 5], dims: [null, 1, -3, [2, 0]] },
  { layout: 'strided', shape: [3, 4, 5], dims: [null, 2, [0, 1]] },
  { layout: 'channelsLast', shape: [2, 3, 4, 5], dims: [1, [2, 3], [-1, 1], null] },
  { layout: 'contiguous', shape: [4, 1, 3], dims: [1, [0, 1]] },
];

function valuesFor(dtype: DType, n: number, seed: number, range: [number, number], integral = false): number[] {
  if (integral && dtype !== 'bool' && dtype !== 'uint8') return randomInts(n, seed, Math.floor(range[0]), Math.ceil(range[1]));
  if (dtype === 'bool') return randomInts(n, seed, 0, 2);
  if (dtype === 'uint8') return randomInts(n, seed, 0, Math.max(2, range[1]));
  if (dtype === 'int32' || dtype === 'int64') return randomInts(n, seed, Math.floor(range[0]), Math.ceil(range[1]));
  return randomValues(n, seed, range[0], range[1]);
}

interface ReductionCase {
  name: string;
  call: (x: Tensor, dim: DimArg, keepdim: boolean) => Tensor;
  ref: (g: number[]) => number;
  dtypes: DType[];
  outDtype: (d: DType) => DType;
  range?: [number, number];
  /** Integer-valued inputs for every dtype (so zeros occur in float tensors too). */
  integral?: boolean;
  /** Output compared with an explicit tolerance (e.g. rounding differences after sqrt). */
  tol?: (d: DType) => { atol?: number; rtol?: number };
}

const FLOATS: DType[] = ['float32', 'float16', 'bfloat16'];
const ALL: DType[] = ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'];
const toInt64 = (d: DType): DType => (d === 'float32' || d === 'float16' || d === 'bfloat16' ? d : 'int64');
const same = (d: DType): DType => d;

const CASES: ReductionCase[] = [
  { name: 'sum', call: (x, d, k) => kiln.sum(x, d, k), ref: refSum, dtypes: ALL, outDtype: toInt64, range: [-20, 20] },
  { name: 'prod', call: (x, d, k) => x.prod(d, k), ref: refProd, dtypes: ALL, outDtype: toInt64, range: [0.6, 1.4] },
  { name: 'mean', call: (x, d, k) => x.mean(d, k), ref: refMean, dtypes: FLOATS, outDtype: same },
  { name: 'amax', call: (x, d, k) => kiln.amax(x, d, k), ref: refMax, dtypes: ALL, outDtype: same, range: [-20, 20] },
  { name: 'amin', call: (x, d, k) => x.amin(d, k), ref: refMin, dtypes: ALL, outDtype: same, range: [-20, 20] },
  { name: 'var', call: (x, d, k) => kiln.var(x, d, 1, k), ref: (g) => refVar(g, 1), dtypes: FLOATS, outDtype: same },
  { name: 'var correction 0', call: (x, d, k) => x.var(d, 0, k), ref: (g) => refVar(g, 0), dtypes: ['float32'], outDtype: same },
  { name: 'std', call: (x, d, k) => kiln.std(x, d, 1, k), ref: (g) => Math.sqrt(refVar(g, 1)), dtypes: FLOATS, outDtype: same },
  {
    name: 'logsumexp',
    call: (x, d, k) => kiln.logsumexp(x, d ?? [], k),
    ref: refLogsumexp,
    dtypes: [...FLOATS, 'int32'],
    outDtype: (d) => (d === 'int32' ? 'float32' : d),
    range: [-5, 5],
  },
  { name: 'any', call: (x, d, k) => kiln.any(x, d, k), ref: (g) => (g.some((v) => v !== 0) ? 1 : 0), dtypes: ALL, outDtype: () => 'bool', range: [-1, 2], integral: true },
  { name: 'all', call: (x, d, k) => x.all(d, k), ref: (g) => (g.every((v) => v !== 0) ? 1 : 0), dtypes: ALL, outDtype: () => 'bool', range: [-1, 2], integral: true },
];

for (const c of CASES) {
  test(`${c.name} matches a float64 reference on every layout, dim list, keepdim and dtype`, () => {
    let seed = 1;
    for (const dtype of c.dtypes) {
      for (const cfg of CONFIGS) {
        const n = cfg.shape.reduce((a, b) => a * b, 1);
        const x = makeTensor(valuesFor(dtype, n, seed++, c.range ?? [-2, 2], c.integral), cfg.shape, dtype, cfg.layout);
        const xv = x.toFlatArray();
        for (const dim of cfg.dims) {
          for (const keepdim of [false, true]) {
            const where = `${c.name} ${dtype} ${cfg.layout} [${cfg.shape}] dim=${JSON.stringify(dim)} keepdim=${keepdim}`;
            const out = c.call(x, dim, keepdim);
            const exp = refReduce(xv, cfg.shape, dim, keepdim, c.ref);
            assert.equal(out.dtype, c.outDtype(dtype), `${where}: dtype`);
            assert.ok(isContiguousStrides(out.shape, out.strides) && out.strides.every((s, i) => s === exp.shape.slice(i + 1).reduce((a, b) => a * b, 1)), `${where}: contiguous output`);
            try {
              assertClose(out, exp.values.map((v) => castValue(v, out.dtype === 'bool' ? 'float32' : out.dtype)), exp.shape, c.tol?.(dtype));
            } catch (e) {
              throw new Error(`${where}: ${(e as Error).message}`);
            }
          }
        }
      }
    }
  });
}

test('reductions of broadcast (expanded) inputs read each broadcast element once per position', () => {
  const v = [1.5, -2, 3.25, 4];
  const x = makeExpanded(v, [4], [3, 4]);
  assertClose(kiln.sum(x, 0), v.map((a) => 3 * a), [4]);
  assertClose(kiln.sum(x, 1), [6.75, 6.75, 6.75], [3]);
  assertClose(kiln.var(x, 0), [0, 0, 0, 0], [4]);
  assertClose(kiln.amax(x, [0, 1]), [4], []);
  assert.deepEqual(kiln.argmax(x).toArray(), 3);
  const m = kiln.max(x, 0);
  assert.deepEqual(m.indices.toArray(), [0, 0, 0, 0], 'ties along a broadcast dim give the first index');
});

test('max/min/argmax/argmin match references on every layout and dtype', () => {
  let seed = 100;
  for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'int64', 'uint8'] as DType[]) {
    for (const cfg of CONFIGS) {
      const n = cfg.shape.reduce((a, b) => a * b, 1);
      // Few distinct values, so ties are frequent: indices must be the first occurrence.
      const x = makeTensor(valuesFor(dtype, n, seed++, [0, 4]).map((v) => Math.floor(v)), cfg.shape, dtype, cfg.layout);
      const xv = x.toFlatArray();
      assertClose(kiln.max(x), [Math.max(...xv)], []);
      assertClose(x.min(), [Math.min(...xv)], []);
      assert.equal(kiln.argmax(x).item(), refArgExt(xv, true), `argmax flattened ${dtype} ${cfg.layout}`);
      assert.equal(x.argmin().item(), refArgExt(xv, false));
      const kd = kiln.argmax(x, null, true);
      assert.deepEqual([...kd.shape], cfg.shape.map(() => 1));
      for (const dim of cfg.dims) {
        if (typeof dim !== 'number') continue;
        for (const keepdim of [false, true]) {
          const where = `${dtype} ${cfg.layout} dim=${dim} keepdim=${keepdim}`;
          const mx: kiln.ValuesIndices = kiln.max(x, dim, keepdim);
          const mn: kiln.ValuesIndices = x.min(dim, keepdim);
          assert.equal(mx.values.dtype, dtype);
          assert.equal(mx.indices.dtype, 'int64');
          const rv = refReduce(xv, cfg.shape, dim, keepdim, refMax);
          const ri = refReduce(xv, cfg.shape, dim, keepdim, (g) => refArgExt(g, true));
          assertClose(mx.values, rv.values, rv.shape);
          assertClose(mx.indices, ri.values, ri.shape);
          assertClose(kiln.argmax(x, dim, keepdim), ri.values, ri.shape);
          const rn = refReduce(xv, cfg.shape, dim, keepdim, refMin);
          const rj = refReduce(xv, cfg.shape, dim, keepdim, (g) => refArgExt(g, false));
          assertClose(mn.values, rn.values, rn.shape);
          assertClose(mn.indices, rj.values, rj.shape, {});
          assertClose(x.argmin(dim, keepdim), rj.values, rj.shape);
          assert.ok(mx.indices.isContiguous(), where);
        }
      }
    }
  }
  // bool max works (as in PyTorch).
  const b = kiln.tensor([[false, true], [false, false]]);
  assert.deepEqual(kiln.max(b, 1).values.toArray(), [true, false]);
  assert.deepEqual(kiln.max(b, 1).indices.toArray(), [1, 0]);
});

test('NaN: max/amax/logsumexp propagate it, argmax and max(dim) pick the first NaN', () => {
  const x = kiln.tensor([
    [1, NaN, 5, NaN],
    [2, 7, 7, -1],
  ]);
  assertClose(kiln.amax(x, 1), [NaN, 7], [2]);
  assertClose(kiln.amin(x, 1), [NaN, -1], [2]);
  assertClose(kiln.max(x), [NaN], []);
  assertClose(kiln.min(x), [NaN], []);
  assert.deepEqual(kiln.argmax(x, 1).toArray(), [1, 1], 'NaN index for row 0, first of tied 7s for row 1');
  assert.deepEqual(kiln.argmin(x, 1).toArray(), [1, 3]);
  assert.equal(kiln.argmax(x).item(), 1);
  const m = kiln.max(x, 1);
  assertClose(m.values, [NaN, 7], [2]);
  assert.deepEqual(m.indices.toArray(), [1, 1]);
  assertClose(kiln.logsumexp(x, 1), [NaN, refLogsumexp([2, 7, 7, -1])], [2]);
  assertClose(kiln.sum(x, 1), [NaN, 15], [2]);
  assert.deepEqual(kiln.any(kiln.tensor([0, NaN]), 0).toArray(), true, 'NaN is truthy');
  const firstNan = kiln.tensor([NaN, 3, NaN]);
  assert.equal(firstNan.argmin().item(), 0);
});

test('logsumexp is stable for large values and gives -inf for all -inf rows', () => {
  const x = kiln.tensor([
    [1000, 1000, 999],
    [-Infinity, -Infinity, -Infinity],
    [-1000, -1001, -Infinity],
    [Infinity, 1, 2],
  ]);
  const out = kiln.logsumexp(x, 1);
  assertClose(out, [1000 + Math.log(2 + Math.exp(-1)), -Infinity, -1000 + Math.log(1 + Math.exp(-1)), Infinity], [4]);
  assertClose(kiln.logsumexp(x, [0, 1]), [Infinity], []);
  assertClose(x.logsumexp(-1, true), [1000 + Math.log(2 + Math.exp(-1)), -Infinity, -1000 + Math.log(1 + Math.exp(-1)), Infinity], [4, 1]);
});

test('sum/prod of integers: int64 results keep exact values beyond int32; bool dtype results hold 0/1', () => {
  const x = kiln.tensor([2 ** 40, 3, -(2 ** 40) + 5, 2 ** 31], { dtype: 'int64' });
  assert.equal(kiln.sum(x).item(), 2 ** 31 + 8);
  const i32 = kiln.tensor([2 ** 30, 2 ** 30, 2 ** 30], { dtype: 'int32' });
  const s = kiln.sum(i32);
  assert.equal(s.dtype, 'int64');
  assert.equal(s.item(), 3 * 2 ** 30, 'int32 input accumulates without int32 overflow');
  assert.equal(kiln.prod(kiln.tensor([true, true, false])).dtype, 'int64');
  assert.equal(kiln.sum(kiln.tensor([true, true, false])).item(), 2);
  assert.equal(kiln.sum(i32, null, false, 'int32').dtype, 'int32');
  assert.equal(kiln.sum(kiln.tensor([1.7, 2.7]), null, false, 'int64').item(), 3, 'dtype casts the input first (trunc), as PyTorch');
  const bs = kiln.sum(kiln.tensor([[true, true], [false, false]]), 1, false, 'bool');
  assert.equal(bs.dtype, 'bool');
  assert.deepEqual(bs.toFlatArray(), [1, 0], 'bool storage holds 0/1');
  assert.deepEqual(kiln.cumsum(kiln.tensor([true, true, false]), 0, 'bool').toFlatArray(), [1, 1, 1]);
  assert.deepEqual(kiln.prod(kiln.tensor([3, 5], { dtype: 'uint8' }), 0, false, 'uint8').toArray(), 15);
});

test('mean/sum with an explicit dtype; mean of an int tensor without dtype is an error naming the dtype', () => {
  const x = kiln.tensor([[1, 2], [3, 6]], { dtype: 'int32' });
  const m = kiln.mean(x, 1, false, 'float32');
  assert.equal(m.dtype, 'float32');
  assertClose(m, [1.5, 4.5], [2]);
  assertThrowsWith(() => kiln.mean(x), 'mean', 'int32');
  assertThrowsWith(() => x.mean(0, false, 'int64'), 'mean', 'int64', 'floating');
  const h = kiln.tensor([1, 2, 4], { dtype: 'float16' });
  const m64 = kiln.mean(h, null, false, 'float32');
  assert.equal(m64.dtype, 'float32');
  assertClose(m64, [7 / 3], []);
  assert.equal(kiln.sum(h, 0, false, 'bfloat16').dtype, 'bfloat16');
});

test('empty tensors: sum 0, prod 1, mean NaN, any false, all true, logsumexp -inf; extrema error naming the op', () => {
  const e = makeTensor([], [0, 3]);
  assertClose(kiln.sum(e, 0), [0, 0, 0], [3]);
  assertClose(kiln.sum(e), [0], []);
  assertClose(kiln.prod(e, 0), [1, 1, 1], [3]);
  assertClose(kiln.mean(e, 0), [NaN, NaN, NaN], [3]);
  assertClose(kiln.var(e, 0), [NaN, NaN, NaN], [3]);
  assert.deepEqual(kiln.any(e, 0).toArray(), [false, false, false]);
  assert.deepEqual(kiln.all(e, 0).toArray(), [true, true, true]);
  assertClose(kiln.logsumexp(e, 0), [-Infinity, -Infinity, -Infinity], [3]);
  // Reducing a non-empty dim of an empty tensor is fine: an empty result.
  assert.deepEqual([...kiln.amax(e, 1).shape], [0]);
  assert.deepEqual([...kiln.max(e, 1).indices.shape], [0]);
  assert.deepEqual([...kiln.sum(e, 1, true).shape], [0, 1]);
  assertThrowsWith(() => kiln.amax(e, 0), 'amax', 'dimension 0 of size 0');
  assertThrowsWith(() => kiln.amin(e), 'amin', 'size 0');
  assertThrowsWith(() => kiln.max(e, 0), 'max', 'dimension 0 of size 0', '[0, 3]');
  assertThrowsWith(() => kiln.max(e), 'max', 'empty', '[0, 3]');
  assertThrowsWith(() => kiln.min(e), 'min', 'empty');
  assertThrowsWith(() => kiln.argmax(e), 'argmax', 'empty');
  assertThrowsWith(() => kiln.argmin(e, 0), 'argmin', 'size 0');
});

test('0-d and size-1 inputs', () => {
  const s = kiln.tensor(2.5);
  assertClose(kiln.sum(s), [2.5], []);
  assertClose(kiln.sum(s, 0), [2.5], []);
  assertClose(kiln.sum(s, -1, true), [2.5], []);
  assertClose(kiln.amax(s), [2.5], []);
  assert.equal(kiln.argmax(s).item(), 0);
  assert.deepEqual(kiln.max(s, 0).indices.toArray(), 0);
  assertClose(kiln.var(s), [NaN], []);
  assertClose(kiln.var(s, null, 0), [0], []);
  const one = kiln.tensor([[3]]);
  assertClose(kiln.std(one, 1), [NaN], [1]);
  assertClose(kiln.mean(one, [0, 1], true), [3], [1, 1]);
});

test('var/std: correction larger than the count divides by zero like PyTorch (max(0, n - c))', () => {
  const x = kiln.tensor([1, 2, 4]);
  assertClose(kiln.var(x, 0, 3), [Infinity], []);
  assertClose(kiln.var(x, 0, 2), [refVar([1, 2, 4], 2)], []);
  assertClose(kiln.std(x, null, 0.5), [Math.sqrt(refVar([1, 2, 4], 0.5))], []);
});

test('reduction errors: dim out of range, duplicate dims, wrong dtypes', () => {
  const x = kiln.tensor([[[1, 2], [3, 4]]]);
  assertThrowsWith(() => kiln.sum(x, 3), 'sum', 'dim 3', 'out of range');
  assertThrowsWith(() => kiln.mean(x, [-4]), 'mean', '-4', 'out of range');
  assertThrowsWith(() => kiln.amax(x, [0, 5]), 'amax', '5', 'out of range');
  assertThrowsWith(() => kiln.max(x, 3), 'max', '3', 'out of range');
  assertThrowsWith(() => kiln.argmax(x, -4), 'argmax', '-4', 'out of range');
  assertThrowsWith(() => kiln.logsumexp(x, 7), 'logsumexp', '7', 'out of range');
  assertThrowsWith(() => kiln.sum(x, [0, -3]), 'sum', 'dim 0 appears multiple times', '[0, -3]');
  assertThrowsWith(() => kiln.var(x, [1, 1]), 'var', 'dim 1 appears multiple times');
  assertThrowsWith(() => kiln.any(x, [2, -1]), 'any', 'dim 2 appears multiple times');
  const i = kiln.tensor([1, 2], { dtype: 'int32' });
  assertThrowsWith(() => kiln.mean(i), 'mean', 'int32');
  assertThrowsWith(() => kiln.var(i), 'var', 'int32');
  assertThrowsWith(() => kiln.std(kiln.tensor([true])), 'std', 'bool');
  assertThrowsWith(() => kiln.argmax(kiln.tensor([true, false])), 'argmax', 'bool');
  assertThrowsWith(() => kiln.sum(x, 1.5), 'sum', '1.5');
});
