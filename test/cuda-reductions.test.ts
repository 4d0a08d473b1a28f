/**
 * The eager cuda reductions and row kernels (one-node programs of the fused-group renderer:
 * kernels/cuda/reduction.ts, softmax-norm.ts) against the CPU: floating results against the op on a
 * float64 copy of the input (within the result dtype's tolerance), exact results (extremes, indices,
 * any/all, integer sums) against the CPU kernel in the same dtype. Every dtype the ops take, dims
 * lists, keepdim and negative dims; contiguous, transposed, offset, 3-d, expanded and channels-last
 * inputs; empty reduced dims; rows longer than a block (split reductions, long softmax rows, a
 * vocabulary-sized argmax); strided rows read in place (many rows) and through a dense copy (few
 * long rows). Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tolFor, type Tolerance } from './helpers/assert.js';
import { makeTensor, rand, randomInts, randomValues } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
const FLOATS: DType[] = ['float32', 'float16', 'bfloat16', 'float64'];
const INTS: DType[] = ['int32', 'int64', 'uint8', 'bool'];
type Fn = (x: Tensor) => Tensor;
type View = [string, Fn];

const VIEWS: View[] = [
  ['contiguous', (t) => t],
  ['transposed', (t) => kiln.transpose(t, 0, 1)],
  ['offset', (t) => kiln.narrow(t, 1, 1, t.shape[1]! - 2)],
];

/** Values a dtype holds exactly: small integers for integer dtypes and bool, uniform floats otherwise. */
function input(shape: number[], seed: number, dtype: DType, lo = -3, hi = 3): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (dtype === 'bool') return makeTensor(randomInts(n, seed, 0, 2), shape, 'bool');
  if (dtype === 'uint8') return makeTensor(randomInts(n, seed, 0, 10), shape, 'uint8');
  if (dtype === 'int32' || dtype === 'int64') return makeTensor(randomInts(n, seed, -9, 10), shape, dtype);
  return makeTensor(randomValues(n, seed, lo, hi), shape, dtype);
}

function compare(label: string, got: Tensor, want: Tensor, tol: Required<Tolerance>, exact: boolean): void {
  assert.equal(got.device.type, 'cuda', `${label}: result on ${got.device.toString()}`);
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  const g = got.toFlatArray().map(Number);
  const w = want.toFlatArray().map(Number);
  for (let i = 0; i < w.length; i++) {
    const e = w[i]!;
    const a = g[i]!;
    if (Number.isNaN(e)) assert.ok(Number.isNaN(a), `${label}: element ${i}: expected NaN, got ${a}`);
    else if (exact || !Number.isFinite(e)) assert.equal(a, e, `${label}: element ${i}`);
    else if (!(Math.abs(a - e) <= tol.atol + tol.rtol * Math.abs(e))) assert.fail(`${label}: element ${i}: cuda ${a}, float64 reference ${e} (atol ${tol.atol}, rtol ${tol.rtol})`);
  }
}

/** fn(view(x)) on cuda against fn(view(x in float64)) on the CPU, within the result dtype's tolerance. */
function check64(label: string, fn: Fn, x: Tensor, view: Fn = (t) => t, tol: Tolerance = {}): void {
  const xc = x.to('cuda');
  const got = fn(view(xc));
  const want = fn(view(x.to('float64')));
  const d = tolFor(got.dtype);
  compare(label, got, want, { atol: tol.atol ?? d.atol, rtol: tol.rtol ?? d.rtol }, false);
  assert.equal(got.dtype, fn(view(x)).dtype, `${label}: dtype`);
}

/** fn(view(x)) on cuda against the CPU kernel in the same dtype, element for element. */
function checkExact(label: string, fn: Fn, x: Tensor, view: Fn = (t) => t): void {
  const got = fn(view(x.to('cuda')));
  const want = fn(view(x));
  assert.equal(got.dtype, want.dtype, `${label}: dtype`);
  compare(label, got, want, { atol: 0, rtol: 0 }, true);
}

const DIMS: (number | number[] | null)[] = [1, 0, -1, [0, 1], null];

test('sum, mean, prod, amax, amin in every dtype over dims, keepdim and negative dims, on contiguous, transposed and offset inputs', { skip }, () => {
  for (const dtype of [...FLOATS, ...INTS]) {
    const float = FLOATS.includes(dtype);
    const x = input([37, 300], 11, dtype);
    for (const [vn, view] of VIEWS) {
      for (const dim of DIMS) {
        const d = `${JSON.stringify(dim)} ${dtype} [${vn}]`;
        // Integer and bool sums accumulate exactly in int64.
        (float ? check64 : checkExact)(`sum ${d}`, (a) => kiln.sum(a, dim), x, view);
        if (float) check64(`mean ${d}`, (a) => kiln.mean(a, dim), x, view);
        checkExact(`amax ${d}`, (a) => kiln.amax(a, dim ?? []), x, view);
        checkExact(`amin ${d}`, (a) => kiln.amin(a, dim ?? []), x, view);
      }
      (float ? check64 : checkExact)(`sum keepdim ${dtype} [${vn}]`, (a) => kiln.sum(a, -1, true), x, view);
      checkExact(`max ${dtype} [${vn}]`, (a) => kiln.max(a), x, view);
      checkExact(`min ${dtype} [${vn}]`, (a) => kiln.min(a), x, view);
    }
    const p = float ? input([20, 12], 12, dtype, 0.6, 1.4) : input([20, 12], 12, dtype);
    (float ? check64 : checkExact)(`prod ${dtype}`, (a) => kiln.prod(a, 1), p);
    (float ? check64 : checkExact)(`prod over dim 0 keepdim ${dtype}`, (a) => kiln.prod(a, 0, true), p);
  }
  // dtype= casts the input first (sum of bfloat16 in float32; float32 rounded to float16 before summing).
  check64('sum bfloat16 -> float32', (a) => kiln.sum(a, 1, false, 'float32'), input([37, 300], 13, 'bfloat16'));
  checkExact('sum float32 -> float16 rounds the input first', (a) => kiln.sum(a, 1, false, 'float16'), makeTensor(Array.from({ length: 64 }, (_, i) => 1 + i * 1e-4), [2, 32]));
  check64('mean int32 with dtype float64', (a) => kiln.mean(a, 0, false, 'float64'), input([50, 7], 14, 'int32'));
  // 3-d: a middle dim, outer pairs, everything, keepdim.
  for (const dtype of ['float32', 'bfloat16', 'int64'] as DType[]) {
    const x = input([6, 50, 33], 15, dtype);
    for (const dim of [1, [0, 2], [-1, -3], [0, 1, 2]]) {
      (FLOATS.includes(dtype) ? check64 : checkExact)(`sum 3-d ${JSON.stringify(dim)} ${dtype}`, (a) => kiln.sum(a, dim, true), x);
      checkExact(`amax 3-d ${JSON.stringify(dim)} ${dtype}`, (a) => kiln.amax(a, dim), x);
    }
  }
  // Expanded (stride 0) and channels-last inputs.
  const e = makeTensor(randomValues(33, 16), [1, 33]);
  check64('sum of an expanded input', (a) => kiln.sum(kiln.expand(a, [40, 33]), 0), e);
  const cl = rand([2, 5, 6, 7], 17, 'channelsLast');
  check64('mean of a channels-last input over (0, 2, 3)', (a) => kiln.mean(a, [0, 2, 3]), cl);
  check64('sum of a 0-d input', (a) => kiln.sum(a), kiln.tensor(2.5));
});

test('var and std (corrections 0, 1 and more than the row), logsumexp (infinities, integer input)', { skip }, () => {
  for (const dtype of FLOATS) {
    const x = input([37, 300], 21, dtype);
    for (const [vn, view] of VIEWS) {
      for (const dim of [1, 0, [0, 1]] as (number | number[])[]) {
        const d = `${JSON.stringify(dim)} ${dtype} [${vn}]`;
        check64(`var ${d}`, (a) => kiln.var(a, dim), x, view);
        check64(`std correction 0 ${d}`, (a) => kiln.std(a, dim, 0), x, view);
        check64(`logsumexp ${d}`, (a) => kiln.logsumexp(a, dim), x, view);
      }
    }
    check64(`var correction 400 (inf) ${dtype}`, (a) => kiln.var(a, 1, 400), x);
    check64(`std keepdim over dim -2 ${dtype}`, (a) => kiln.std(a, -2, 1, true), x);
  }
  check64('var of one element (NaN)', (a) => kiln.var(a, 1), input([3, 1], 22, 'float32'));
  const inf = kiln.tensor([
    [-Infinity, -Infinity, -Infinity],
    [Infinity, 0, 1],
    [-Infinity, 2, NaN],
    [-Infinity, 3, 4],
  ]);
  check64('logsumexp with infinite rows', (a) => kiln.logsumexp(a, 1), inf);
  check64('logsumexp of int32 (float32 result)', (a) => kiln.logsumexp(a, [0]), input([30, 9], 23, 'int32'));
});

test('argmax, argmin, max and min with a dim: the first index among ties, NaN first, every layout and dtype', { skip }, () => {
  for (const dtype of [...FLOATS, 'int32', 'int64', 'uint8'] as DType[]) {
    // Few distinct values: many ties.
    const x = makeTensor(randomInts(37 * 300, 31, 0, 4), [37, 300], dtype);
    for (const [vn, view] of VIEWS) {
      for (const dim of [1, 0, -1]) {
        const d = `dim ${dim} ${dtype} [${vn}]`;
        checkExact(`argmax ${d}`, (a) => kiln.argmax(a, dim), x, view);
        checkExact(`argmin keepdim ${d}`, (a) => kiln.argmin(a, dim, true), x, view);
        checkExact(`max values ${d}`, (a) => kiln.max(a, dim).values, x, view);
        checkExact(`max indices ${d}`, (a) => kiln.max(a, dim).indices, x, view);
        checkExact(`min indices ${d}`, (a) => kiln.min(a, dim, true).indices, x, view);
      }
      checkExact(`argmax of everything ${dtype} [${vn}]`, (a) => kiln.argmax(a), x, view);
      checkExact(`argmin of everything keepdim ${dtype} [${vn}]`, (a) => kiln.argmin(a, null, true), x, view);
    }
  }
  checkExact('max/min with a dim of bool', (a) => kiln.max(a, 1).indices, input([9, 40], 32, 'bool'));
  const nan = makeTensor(
    randomValues(37 * 300, 33).map((v, i) => (i % 41 === 7 ? NaN : v)),
    [37, 300],
  );
  for (const dim of [1, 0]) {
    checkExact(`argmax with NaN dim ${dim}`, (a) => kiln.argmax(a, dim), nan);
    checkExact(`argmin with NaN dim ${dim}`, (a) => kiln.argmin(a, dim), nan);
    checkExact(`max values with NaN dim ${dim}`, (a) => kiln.max(a, dim).values, nan);
  }
  checkExact('argmax of a 3-d tensor (flat index in logical order) of a permuted view', (a) => kiln.argmax(kiln.permute(a, [2, 0, 1])), input([4, 5, 6], 34, 'float32'));
});

test('any and all over dims of every dtype, NaN counts as true', { skip }, () => {
  for (const dtype of [...FLOATS, ...INTS]) {
    const n = 37 * 300;
    const sparse = makeTensor(
      Array.from({ length: n }, (_, i) => (i % 97 === 3 ? 1 : 0)),
      [37, 300],
      dtype,
    );
    const dense = makeTensor(
      Array.from({ length: n }, (_, i) => (i % 89 === 5 ? 0 : 1)),
      [37, 300],
      dtype,
    );
    for (const [vn, view] of VIEWS) {
      for (const dim of [1, 0, null] as (number | null)[]) {
        checkExact(`any ${dim} ${dtype} [${vn}]`, (a) => kiln.any(a, dim), sparse, view);
        checkExact(`all ${dim} ${dtype} [${vn}]`, (a) => kiln.all(a, dim), dense, view);
      }
    }
  }
  checkExact('any of NaN', (a) => kiln.any(a, 1), kiln.tensor([[0, NaN], [0, 0]]));
});

test('empty reduced dims give the identities (sum 0, prod 1, any false, all true) and NaN means; empty rows give empty results', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16', 'int64', 'bool'] as DType[]) {
    const x = input([4, 0], 41, dtype);
    const float = FLOATS.includes(dtype);
    (float ? check64 : checkExact)(`sum over an empty dim ${dtype}`, (a) => kiln.sum(a, 1), x);
    (float ? check64 : checkExact)(`prod over an empty dim ${dtype}`, (a) => kiln.prod(a, 1), x);
    checkExact(`any over an empty dim ${dtype}`, (a) => kiln.any(a, 1), x);
    checkExact(`all over an empty dim ${dtype}`, (a) => kiln.all(a, 1), x);
    if (float) {
      check64(`mean over an empty dim ${dtype}`, (a) => kiln.mean(a, 1), x);
      check64(`var over an empty dim ${dtype}`, (a) => kiln.var(a, 1), x);
      check64(`logsumexp over an empty dim ${dtype}`, (a) => kiln.logsumexp(a, 1), x);
    }
    (float ? check64 : checkExact)(`sum of an empty tensor, everything ${dtype}`, (a) => kiln.sum(a), x);
    (float ? check64 : checkExact)(`sum over dim 0 of [0, 5] ${dtype}`, (a) => kiln.sum(a, 0), input([0, 5], 42, dtype));
    (float ? check64 : checkExact)(`sum over dim 1 of [0, 5] (no rows) ${dtype}`, (a) => kiln.sum(a, 1), input([0, 5], 42, dtype));
  }
  check64('softmax of an empty tensor', (a) => kiln.softmax(a, 1), input([0, 5], 43, 'float32'));
});

test('rows longer than a block: split sums and extremes, full reductions, long softmax, logsumexp and var rows, a vocabulary-sized argmax', { skip }, () => {
  // Positive values: a lost or doubled chunk moves the sum far beyond float32 rounding.
  const long = input([3, 1 << 20], 51, 'float32', 0, 1);
  check64('sum of long rows (split)', (a) => kiln.sum(a, 1), long, undefined, { rtol: 1e-5 });
  check64('mean of everything (split)', (a) => kiln.mean(a), long, undefined, { rtol: 1e-5 });
  checkExact('amax of long rows (split)', (a) => kiln.amax(a, 1), long);
  checkExact('amin of everything (split)', (a) => kiln.amin(a, null), long);
  check64('sum of long bfloat16 rows in float32', (a) => kiln.sum(a, 1, false, 'float32'), input([2, 300000], 52, 'bfloat16', 0, 1), undefined, { rtol: 1e-5 });
  checkExact('int32 sum of 2^22 elements -> int64', (a) => kiln.sum(a), input([1 << 22], 53, 'int32'));
  checkExact('bool sum (count) of a long row', (a) => kiln.sum(a, 1), input([2, 700001], 54, 'bool'));
  const logits = input([4, 151936], 55, 'bfloat16', -8, 8);
  check64('softmax of vocabulary rows (bfloat16)', (a) => kiln.softmax(a, -1), logits);
  check64('logSoftmax of vocabulary rows (bfloat16 -> float32)', (a) => kiln.logSoftmax(a, -1, 'float32'), logits);
  check64('logsumexp of vocabulary rows', (a) => kiln.logsumexp(a, [1]), logits);
  check64('var of long rows', (a) => kiln.var(a, 1), long, undefined, { atol: 1e-5, rtol: 1e-4 });
  // Greedy decoding: one row of logits, the winner repeated later (the first one wins).
  const v = randomValues(151936, 56, -5, 5);
  v[123457] = 9;
  v[150000] = 9;
  const row = makeTensor(v, [1, 151936], 'bfloat16');
  checkExact('argmax of a vocabulary row', (a) => kiln.argmax(a, -1), row);
  checkExact('max of a vocabulary row (values and indices)', (a) => kiln.max(a, 1).indices, row);
  assert.deepEqual(kiln.argmax(row.to('cuda'), -1).toArray(), [123457]);
});

test('strided rows: a middle dim read in place (many rows) or through a dense copy (few long rows); full-size results laid out back', { skip }, () => {
  check64('sum over the middle dim of [128, 64, 1024] (one thread per row)', (a) => kiln.sum(a, 1), input([128, 64, 1024], 61, 'float32'));
  checkExact('amax over the middle dim of [128, 64, 1024]', (a) => kiln.amax(a, 1), input([128, 64, 1024], 62, 'bfloat16'));
  check64('sum over the middle dim of [2, 40000, 3] (copied into rows)', (a) => kiln.sum(a, 1), input([2, 40000, 3], 63, 'float32'));
  check64('mean over dims (0, 2) of [40, 7, 300] (copied into rows)', (a) => kiln.mean(a, [0, 2]), input([40, 7, 300], 64, 'float16'));
  checkExact('argmax over the middle dim of [4, 3000, 5] (copied; indices in logical order)', (a) => kiln.argmax(a, 1), makeTensor(randomInts(60000, 65, 0, 6), [4, 3000, 5]));
  check64('softmax over dim 0 of [5000, 7] (copied; result laid back out)', (a) => kiln.softmax(a, 0), input([5000, 7], 66, 'float32'));
  check64('logSoftmax over dim 1 of [3, 700, 5]', (a) => kiln.logSoftmax(a, 1), input([3, 700, 5], 67, 'bfloat16'));
  check64('var over dim 0 of [3000, 9]', (a) => kiln.var(a, 0), input([3000, 9], 68, 'float32'));
});

test('softmax, logSoftmax, layerNorm and rmsNorm against float64, with -inf rows, weights, biases and strided inputs', { skip }, () => {
  for (const dtype of FLOATS) {
    const x = input([19, 257], 71, dtype, -4, 4);
    for (const [vn, view] of VIEWS) {
      check64(`softmax -1 ${dtype} [${vn}]`, (a) => kiln.softmax(a, -1), x, view);
      check64(`logSoftmax 0 ${dtype} [${vn}]`, (a) => kiln.logSoftmax(a, 0), x, view);
    }
    if (dtype !== 'float64') check64(`softmax to float32 ${dtype}`, (a) => kiln.softmax(a, -1, 'float32'), x);
    const w = input([257], 72, dtype, 0.5, 1.5);
    const b = input([257], 73, dtype);
    const wc = w.to('cuda');
    const bc = b.to('cuda');
    const w64 = w.to('float64');
    const b64 = b.to('float64');
    const affine = (fn: (a: Tensor, ww: Tensor, bb: Tensor) => Tensor): Fn => (a) => (a.device.type === 'cuda' ? fn(a, wc, bc) : a.dtype === 'float64' ? fn(a, w64, b64) : fn(a, w, b));
    check64(`layerNorm ${dtype}`, affine((a, ww, bb) => kiln.layerNorm(a, [257], ww, bb)), x);
    check64(`layerNorm no affine ${dtype} [transposed]`, (a) => kiln.layerNorm(a, [19]), x, (t) => kiln.transpose(t, 0, 1));
    check64(`rmsNorm ${dtype}`, affine((a, ww) => kiln.rmsNorm(a, [257], ww, 1e-6)), x);
    check64(`rmsNorm default eps ${dtype} [offset]`, (a) => kiln.rmsNorm(a, [255]), x, (t) => kiln.narrow(t, 1, 1, 255));
    check64(`layerNorm over 2 dims ${dtype}`, (a) => kiln.layerNorm(a, [8, 16]), input([2, 3, 8, 16], 74, dtype));
  }
  const rows = kiln.tensor([
    [-Infinity, 0, 1],
    [2, -Infinity, -Infinity],
    [-Infinity, -Infinity, -Infinity],
  ]);
  check64('softmax with -inf rows (an all -inf row is NaN)', (a) => kiln.softmax(a, -1), rows);
  check64('logSoftmax with -inf rows', (a) => kiln.logSoftmax(a, -1), rows);
  check64('softmax of a 0-d tensor', (a) => kiln.softmax(a, 0), kiln.tensor(3));
});
