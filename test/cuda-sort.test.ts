/**
 * sort / argsort / topk on cuda against the CPU kernels on the same inputs: values and indices
 * must be identical (the cuda kernels use the CPU's total order: NaN above +inf, -0 equal to +0,
 * ties by position). Covers every dtype, the sorted dim last or not (transposing copy), odd and
 * power-of-two lengths, ties, short rows packed several per block, rows beyond the shared-memory
 * sort (topk by register lists and by sorted segments), empty and zero-dim inputs, and the
 * not-supported error; and
 * scatterAdd / scatterAdd_ (gather's backward) against the CPU.
 * Skips where no CUDA device exists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, randomInts, randomValues } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';
import { setLongTopk } from '../src/kernels/cuda/sort.js';
const skip = skipUnlessCuda();

function same(label: string, got: Tensor, want: Tensor): void {
  assert.equal(got.device.type, 'cuda', `${label}: result on cuda`);
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  assert.equal(got.dtype, want.dtype, `${label}: dtype`);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  for (let i = 0; i < w.length; i++) {
    if (!Object.is(g[i], w[i]) && !(g[i] === w[i])) assert.fail(`${label}: element ${i}: cuda ${g[i]}, cpu ${w[i]}`);
  }
}

/** Values with many ties (a few distinct levels), plus NaN, +-inf and -0 for floats. */
function values(n: number, seed: number, dtype: DType, levels: number): number[] {
  if (dtype === 'bool') return randomInts(n, seed, 0, 2);
  if (dtype === 'uint8') return randomInts(n, seed, 0, Math.min(levels, 255));
  if (dtype === 'int32' || dtype === 'int64') return randomInts(n, seed, -levels, levels);
  const v = levels > 0 ? randomInts(n, seed, -levels, levels).map((x) => x / 4) : randomValues(n, seed, -3, 3);
  if (n > 8) {
    v[1] = NaN;
    v[3] = -0;
    v[4] = 0;
    v[5] = Infinity;
    v[7] = -Infinity;
    v[n - 1] = NaN;
  }
  return v;
}

const ALL: DType[] = ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8', 'bool'];
const TOPK: DType[] = ['float32', 'float16', 'bfloat16', 'float64', 'int32', 'int64', 'uint8'];

function both(x: Tensor, fn: (t: Tensor) => Tensor[], label: string): void {
  const want = fn(x);
  const xc = x.to('cuda');
  const got = fn(xc);
  want.forEach((w, i) => same(`${label} output ${i}`, got[i]!, w));
  for (const t of [xc, ...got, ...want]) t.dispose();
}

test('sort and argsort match the CPU (values and indices) for every dtype, both directions, dim last or not', { skip }, () => {
  for (const dtype of ALL) {
    for (const [shape, dim] of [
      [[5, 37], -1],
      [[37, 5], 0],
      [[3, 4, 64], 1],
      [[2, 1000], 1],
      [[1, 5000], -1],
      [[300, 3], -1],
    ] as [number[], number][]) {
      const n = shape.reduce((a, b) => a * b, 1);
      for (const levels of [4, 0]) {
        // Integer dtypes have only tie-rich data; float64 too, because the CPU's full sort orders
        // float64 by float32-rounded keys (values equal in float32 tie there, not on cuda).
        if (levels === 0 && (dtype === 'bool' || dtype.startsWith('int') || dtype === 'uint8' || dtype === 'float64')) continue;
        const x = makeTensor(values(n, n + levels, dtype, levels), shape, dtype);
        for (const desc of [false, true]) {
          const label = `${dtype} [${shape}] dim ${dim} ${desc ? 'desc' : 'asc'} levels ${levels}`;
          both(x, (t) => { const r = kiln.sort(t, dim, desc); return [r.values, r.indices]; }, `sort ${label}`);
          both(x, (t) => [kiln.argsort(t, dim, desc)], `argsort ${label}`);
        }
      }
    }
  }
});

test('topk matches the CPU for every dtype, largest and smallest, k from 1 to the whole row, with ties', { skip }, () => {
  for (const dtype of TOPK) {
    for (const [shape, dim, ks] of [
      [[7, 33], -1, [1, 2, 8, 33]],
      [[33, 7], 0, [1, 5]],
      [[64, 256], -1, [2, 8]],
      [[3, 16384], -1, [1, 50]],
    ] as [number[], number, number[]][]) {
      const n = shape.reduce((a, b) => a * b, 1);
      const x = makeTensor(values(n, 17 + n, dtype, dtype === 'uint8' ? 9 : 6), shape, dtype);
      for (const k of ks) {
        for (const largest of [true, false]) {
          both(x, (t) => { const r = kiln.topk(t, k, dim, largest); return [r.values, r.indices]; }, `topk ${dtype} [${shape}] dim ${dim} k ${k} ${largest ? 'largest' : 'smallest'}`);
        }
      }
    }
  }
});

test('topk of rows longer than the shared-memory sort, all three first passes (register lists, sorted segments, radix select), ties and NaN', { skip }, () => {
  const topk = (k: number, largest = true) => (t: Tensor): Tensor[] => {
    const r = kiln.topk(t, k, -1, largest);
    return [r.values, r.indices];
  };
  try {
    for (const dtype of ['float32', 'bfloat16', 'int64', 'float64'] as DType[]) {
      const shape = [3, 40000];
      const x = makeTensor(values(120000, 5, dtype, 50), shape, dtype);
      for (const mode of ['select', 'segments', 'radix'] as const) {
        setLongTopk(mode);
        for (const k of [1, 7, 32, 64]) {
          for (const largest of [true, false]) both(x, topk(k, largest), `long topk (${mode}) ${dtype} k ${k} ${largest}`);
        }
      }
      setLongTopk('segments');
      for (const k of [65, 300]) both(x, topk(k), `long topk (segments) ${dtype} k ${k}`);
      // Radix select: with 100 levels over 40000 elements the k-th key is shared by about 400
      // elements, so k = 1000 and 3000 take the ordered tie-break among equal keys (the
      // candidates do not fit in the 1024 or 4096 slots before every digit is resolved).
      setLongTopk('auto');
      for (const k of [65, 300, 1000, 3000]) for (const largest of [true, false]) both(x, topk(k, largest), `long topk (radix) ${dtype} k ${k} ${largest}`);
    }
    // Radix select in every dtype it keys differently (float16's 19 key bits, bytes, bools).
    for (const dtype of ['float16', 'int32', 'uint8'] as DType[]) {
      const x = makeTensor(values(2 * 33000, 6, dtype, 40), [2, 33000], dtype);
      for (const k of [1, 20, 700]) for (const largest of [true, false]) both(x, topk(k, largest), `long topk (radix) ${dtype} k ${k} ${largest}`);
    }
    // One key everywhere: every pass keeps the whole row, the first k positions win.
    const zeros = makeTensor(new Array<number>(2 * 30000).fill(0), [2, 30000], 'float32');
    for (const k of [1, 100, 5000]) both(zeros, topk(k), `long topk (radix) of zeros k ${k}`);
    // Many short-enough rows (one block each) and one row over many blocks, k-th key tied.
    const many = makeTensor(values(600 * 17000, 9, 'bfloat16', 30), [600, 17000], 'bfloat16');
    for (const k of [12, 400]) both(many, topk(k), `long topk (radix) [600, 17000] k ${k}`);
    // A vocabulary-sized row whose length is no multiple of the segment (a short last segment).
    const v = makeTensor(values(2 * 151936, 8, 'float32', 0), [2, 151936], 'float32');
    for (const k of [1, 50, 200, 5000]) both(v, topk(k), `vocab topk k ${k}`);
  } finally {
    setLongTopk('auto');
  }
});

test('transposed and strided inputs, outputs in the layout meta predicts; k = 0, empty and zero-dim inputs', { skip }, () => {
  const x = makeTensor(values(6 * 45, 3, 'float32', 5), [6, 45], 'float32', 'transposed');
  both(x, (t) => { const r = kiln.sort(t, 1, true); return [r.values, r.indices]; }, 'sort transposed dim 1');
  both(x, (t) => { const r = kiln.sort(t, 0); return [r.values, r.indices]; }, 'sort transposed dim 0');
  const s = makeTensor(values(4 * 19, 9, 'bfloat16', 3), [4, 19], 'bfloat16', 'strided');
  both(s, (t) => { const r = kiln.topk(t, 4, -1); return [r.values, r.indices]; }, 'topk strided');
  both(s, (t) => { const r = kiln.topk(t, 0, -1); return [r.values, r.indices]; }, 'topk k=0');
  both(makeTensor([], [0, 5], 'float32'), (t) => { const r = kiln.sort(t, -1); return [r.values, r.indices]; }, 'sort of an empty tensor');
  both(makeTensor([2.5], [], 'float32'), (t) => { const r = kiln.topk(t, 1, 0); return [r.values, r.indices]; }, 'topk of a zero-dim tensor');
});

test('a full sort of a row beyond the shared-memory limit is reported as not supported, naming the file', { skip }, () => {
  const x = kiln.zeros([2, 20000], { device: 'cuda' });
  assert.throws(() => kiln.sort(x, -1), /sort: not supported yet on cuda: dim 1 of input \[2, 20000\].*src\/kernels\/cuda\/sort\.ts/);
  // Radix select takes any k its shared-memory sort holds.
  const y = kiln.zeros([1, 40000], { device: 'cuda' });
  assert.throws(() => kiln.topk(y, 20000, -1), /topk: not supported yet on cuda.*k <= 16384 \(for rows of 40000\)/);
  for (const t of [x, y]) t.dispose();
});

test('scatterAdd and scatterAdd_ (gather backward) match the CPU: floats within rounding, integers exactly, any dim, strided index', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16', 'float16', 'float64', 'int32', 'int64'] as DType[]) {
    for (const dim of [0, 1]) {
      const self = makeTensor(randomInts(4 * 6, 3, -5, 5), [4, 6], dtype);
      const src = makeTensor(randomInts(5 * 7, 4, -5, 5).map((v) => (dtype.startsWith('int') ? v : v / 8)), [5, 7], dtype);
      const size = dim === 0 ? 4 : 6;
      const index = makeTensor(randomInts(3 * 5, 5 + dim, 0, size), [3, 5], 'int64', 'transposed');
      const want = kiln.scatterAdd(self, dim, index, src);
      const got = kiln.scatterAdd(self.to('cuda'), dim, index.to('cuda'), src.to('cuda'));
      const tol = dtype === 'bfloat16' ? 1e-2 : dtype === 'float16' ? 1e-3 : 0;
      const g = got.toFlatArray();
      want.toFlatArray().forEach((w, i) => assert.ok(Math.abs(g[i]! - w) <= tol * Math.max(1, Math.abs(w)), `scatterAdd ${dtype} dim ${dim} element ${i}: cuda ${g[i]}, cpu ${w}`));
      const inPlace = self.to('cuda');
      kiln.scatterAdd_(inPlace, dim, index.to('cuda'), src.to('cuda'));
      const h = inPlace.toFlatArray();
      want.toFlatArray().forEach((w, i) => assert.ok(Math.abs(h[i]! - w) <= tol * Math.max(1, Math.abs(w)), `scatterAdd_ ${dtype} dim ${dim} element ${i}: cuda ${h[i]}, cpu ${w}`));
    }
  }
  const x = kiln.zeros([3], { device: 'cuda' });
  assert.throws(() => kiln.scatterAdd(x, 0, makeTensor([0, 3], [2], 'int64').to('cuda'), kiln.ones([2], { device: 'cuda' })), /scatterAdd: index 3 is out of bounds for dimension 0 with size 3/);
});
