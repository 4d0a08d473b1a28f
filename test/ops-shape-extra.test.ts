/**
 * flip, roll, repeat, pad, nonzero and the conversion methods (.float/.half/.tolist) against
 * float64 references written here from index arithmetic (independent of the kernels and the
 * compositions), finite-difference gradchecks, and kiln.compile against eager.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { gradcheck } from '../src/autograd/gradcheck.js';
import { contiguousStrides, numel } from '../src/tensor/layout.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { makeTensor, rand, randomValues, type Layout } from './helpers/make.js';

/** Reference: out[idx] = in[src(idx)] over row-major multi-indices; src returns null for a fill. */
function refMap(x: readonly number[], inShape: readonly number[], outShape: readonly number[], src: (o: number[]) => number[] | null, fill = 0): number[] {
  const inSt = contiguousStrides(inShape);
  const out: number[] = [];
  const idx = new Array<number>(outShape.length).fill(0);
  for (let k = 0; k < numel(outShape); k++) {
    const s = src([...idx]);
    out.push(s === null ? fill : x[s.reduce((a, v, d) => a + v * inSt[d]!, 0)]!);
    for (let d = outShape.length - 1; d >= 0; d--) {
      if (++idx[d]! < outShape[d]!) break;
      idx[d] = 0;
    }
  }
  return out;
}

const leaf = (shape: number[], seed: number): Tensor => makeTensor(randomValues(numel(shape), seed), shape, 'float64').requiresGrad_();
const layouts: Layout[] = ['contiguous', 'transposed', 'strided'];

test('flip over one, several and no dims, any layout and dtype', () => {
  for (const layout of layouts) {
    const x = rand([3, 4, 5], 2, layout);
    const xv = x.toFlatArray();
    for (const dims of [[0], [-1], [0, 2], [0, 1, 2], []]) {
      const nd = dims.map((d) => (d < 0 ? d + 3 : d));
      const want = refMap(xv, [3, 4, 5], [3, 4, 5], (o) => o.map((v, d) => (nd.includes(d) ? [3, 4, 5][d]! - 1 - v : v)));
      assertClose(kiln.flip(x, dims), want, [3, 4, 5], { atol: 0, rtol: 0 });
    }
  }
  assert.deepEqual(kiln.tensor([[1, 2], [3, 4]], { dtype: 'int32' }).flip(0, 1).tolist(), [[4, 3], [2, 1]]);
  assert.deepEqual(kiln.tensor([true, false, false]).flip(0).tolist(), [false, false, true]);
  assertThrowsWith(() => kiln.flip(rand([2, 3]), [0, -2]), 'flip', 'dim 0 appears multiple times');
  assertThrowsWith(() => kiln.flip(rand([2, 3]), [2]), 'flip', 'out of range');
});

test('roll along dims and flattened, shifts beyond the size and negative', () => {
  for (const layout of layouts) {
    const x = rand([3, 4], 3, layout);
    const xv = x.toFlatArray();
    const mod = (a: number, n: number): number => ((a % n) + n) % n;
    assertClose(kiln.roll(x, [1, -6], [0, 1]), refMap(xv, [3, 4], [3, 4], ([i, j]) => [mod(i! - 1, 3), mod(j! + 6, 4)]), [3, 4], { atol: 0, rtol: 0 });
    assertClose(kiln.roll(x, 5), refMap(xv, [12], [12], ([i]) => [mod(i! - 5, 12)]), [3, 4], { atol: 0, rtol: 0 });
    assertClose(x.roll(-1, 1), refMap(xv, [3, 4], [3, 4], ([i, j]) => [i!, mod(j! + 1, 4)]), [3, 4], { atol: 0, rtol: 0 });
  }
  assertThrowsWith(() => kiln.roll(rand([2, 3]), [1, 2], [0]), 'roll', "'shifts' [1, 2] and 'dims' [0]");
  assertThrowsWith(() => kiln.roll(rand([2, 3]), [1, 2]), 'roll', 'exactly one shift');
});

test('repeat tiles, with leading new dims and zero repeats', () => {
  for (const layout of layouts) {
    const x = rand([2, 3], 4, layout);
    const xv = x.toFlatArray();
    assertClose(x.repeat(2, 1, 3), refMap(xv, [2, 3], [2, 2, 9], ([, i, j]) => [i! % 2, j! % 3]), [2, 2, 9], { atol: 0, rtol: 0 });
    assertClose(kiln.repeat(x, [0, 2]), [], [0, 6]);
  }
  assert.deepEqual(kiln.tensor(7).repeat(3).tolist(), [7, 7, 7]);
  assertThrowsWith(() => rand([2, 3]).repeat(2), 'repeat', 'can not be smaller than the number of dims');
});

test('pad: constant (with cropping), reflect, replicate and circular, in torch pad-list order', () => {
  const shape = [2, 3, 4];
  for (const layout of layouts) {
    const x = rand(shape, 5, layout);
    const xv = x.toFlatArray();
    const H = 3;
    const W = 4;
    // [left_W, right_W, top_H, bottom_H]
    const cases: [number[], kiln.PadMode, (h: number, w: number) => [number, number] | null][] = [
      [[1, 2, 2, 0], 'constant', (h, w) => (h < 0 || h >= H || w < 0 || w >= W ? null : [h, w])],
      [[3, 1, 2, 2], 'reflect', (h, w) => [h < 0 ? -h : h >= H ? 2 * (H - 1) - h : h, w < 0 ? -w : w >= W ? 2 * (W - 1) - w : w]],
      [[2, 3, 1, 4], 'replicate', (h, w) => [Math.min(Math.max(h, 0), H - 1), Math.min(Math.max(w, 0), W - 1)]],
      [[4, 2, 1, 3], 'circular', (h, w) => [((h % H) + H) % H, ((w % W) + W) % W]],
    ];
    for (const [p, mode, at] of cases) {
      const out = [2, H + p[2]! + p[3]!, W + p[0]! + p[1]!];
      const want = refMap(xv, shape, out, ([n, h, w]) => {
        const s = at(h! - p[2]!, w! - p[0]!);
        return s === null ? null : [n!, ...s];
      }, 0.5);
      assertClose(kiln.pad(x, p, mode, mode === 'constant' ? 0.5 : null), want, out, { atol: 0, rtol: 0 });
    }
    // Negative constant padding crops.
    assertClose(kiln.pad(x, [-1, 2, 0, -2]), refMap(xv, shape, [2, 1, 5], ([n, h, w]) => (w! + 1 < W ? [n!, h!, w! + 1] : null)), [2, 1, 5], { atol: 0, rtol: 0 });
  }
  assertThrowsWith(() => kiln.pad(rand([2, 3]), [3, 0], 'reflect'), 'pad', 'should be less than the size 3');
  assertThrowsWith(() => kiln.pad(rand([2, 3]), [1]), 'pad', 'divisible by 2');
  assertThrowsWith(() => kiln.pad(rand([3]), [1, 1, 1, 1]), 'pad', 'too large for input [3] float32');
  assertThrowsWith(() => kiln.pad(rand([3]), [1, 1], 'reflect', 2), 'pad', "doesn't take in value");
});

test('gradients: flip, roll, repeat, pad (every mode) pass finite-difference checks', () => {
  gradcheck((t) => kiln.flip(t, [0, 2]), [leaf([2, 3, 4], 10)]);
  gradcheck((t) => kiln.roll(t, [2, -1], [1, 0]), [leaf([3, 4], 11)]);
  gradcheck((t) => kiln.roll(t, 7), [leaf([3, 4], 12)]);
  gradcheck((t) => t.repeat(2, 1, 3), [leaf([2, 3], 13)]);
  gradcheck((t) => t.repeat(2, 2), [leaf([2, 3], 14)]);
  for (const mode of ['constant', 'reflect', 'replicate', 'circular'] as const) {
    gradcheck((t) => kiln.pad(t, [2, 1, 1, 2], mode), [leaf([2, 3, 4], 15)]);
  }
  gradcheck((t) => kiln.pad(t, [-1, 2]), [leaf([3, 4], 16)]);
});

test('kiln.compile gives the eager values for flip, roll, repeat and pad', () => {
  const fn = (x: Tensor): Tensor =>
    kiln.pad(kiln.flip(x, [1]).roll([1], [2]).repeat(1, 2, 1).mul(2), [1, 2, 2, 1], 'reflect').add(kiln.pad(x, [0, 0, 2, 2], 'replicate').sum());
  const x = rand([2, 3, 5], 20);
  const c = kiln.compile(fn, { fullgraph: true });
  assertClose(c(x), fn(x).toFlatArray(), [2, 9, 8]);
  const g = kiln.compile((x: Tensor) => kiln.pad(x, [1, 1], 'constant', -1).flip(0));
  const xi = kiln.tensor([[1, 2], [3, 4]], { dtype: 'int32' });
  assert.deepEqual(g(xi).tolist(), [[-1, 3, 4, -1], [-1, 1, 2, -1]]);
});

test('nonzero: int64 [n, ndim] indices in row-major order; eager only under kiln.compile', () => {
  const x = makeTensor([0, 1, 0, 2, Number.NaN, 0, 0, 0, -3, 0, 0, 4], [2, 3, 2], 'float32', 'transposed');
  const v = x.toFlatArray();
  const want: number[] = [];
  v.forEach((e, i) => {
    if (e !== 0) want.push(Math.floor(i / 6), Math.floor(i / 2) % 3, i % 2);
  });
  const r = kiln.nonzero(x);
  assert.equal(r.dtype, 'int64');
  assertClose(r, want, [want.length / 3, 3]);
  assert.deepEqual(kiln.zeros([2, 2]).nonzero().shape, [0, 2]);
  assert.deepEqual(kiln.tensor(5).nonzero().shape, [1, 0]);
  assert.deepEqual(kiln.tensor([true, false, true]).nonzero().tolist(), [[0], [2]]);
  assert.throws(() => kiln.compile((t: Tensor) => kiln.nonzero(t.mul(2)), { fullgraph: true })(x), /nonzero' is data dependent/);
  const c = kiln.compile((t: Tensor) => kiln.nonzero(t.mul(2)));
  assert.deepEqual(c(x).tolist(), r.tolist());
});

test('.float(), .half(), .double(), .tolist()', () => {
  const x = kiln.tensor([[1.5, -2], [3, 4]], { dtype: 'float64' });
  assert.equal(x.float().dtype, 'float32');
  assert.equal(x.half().dtype, 'float16');
  const f = x.float();
  assert.equal(f.float(), f, 'same dtype: the tensor itself, as torch');
  assert.deepEqual(x.half().tolist(), [[1.5, -2], [3, 4]]);
  assert.deepEqual(kiln.tensor(3).tolist(), 3);
  assert.deepEqual(kiln.zeros([2, 0]).tolist(), [[], []]);
  assert.deepEqual(kiln.tensor([true, false]).tolist(), [true, false]);
  assert.equal(kiln.tensor([1, 2], { dtype: 'int32' }).double().dtype, 'float64');
});
