/** Backward formulas of the reduction group: gradchecks over dims/keepdim/layouts, exact conventions. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import * as red from '../src/ops/defs/reduction.js';
import { listOps } from '../src/ops/registry.js';
import { isFloating } from '../src/tensor/dtype.js';
import { numel } from '../src/tensor/layout.js';
import { type Layout, makeTensor, randomValues } from './helpers/make.js';

const { gradcheck } = kiln;

/** A float64 leaf requiring grad. */
function leaf(shape: number[], seed = 1, layout: Layout = 'contiguous', lo = -2, hi = 2): Tensor {
  return makeTensor(randomValues(numel(shape), seed, lo, hi), shape, 'float64', layout).requiresGrad_();
}
function leafOf(values: number[], shape: number[], layout: Layout = 'contiguous'): Tensor {
  return makeTensor(values, shape, 'float64', layout).requiresGrad_();
}

type DimArg = number | number[] | null;

/** Layout x shape x dims configurations (keepdim is tried both ways on each). */
const CONFIGS: { layout: Layout; shape: number[]; dims: DimArg[] }[] = [
  { layout: 'contiguous', shape: [2, 3, 4], dims: [null, 0, -1, [0, 2], [-1, 0]] },
  { layout: 'transposed', shape: [2, 3, 4], dims: [1, [2, -3]] },
  { layout: 'strided', shape: [3, 4], dims: [null, -2] },
  { layout: 'channelsLast', shape: [2, 3, 2, 2], dims: [1, [-1, 1], [2, 3]] },
  { layout: 'contiguous', shape: [], dims: [null, 0] },
];

/** Number of elements each output element reduces over. */
function groupSize(shape: number[], dim: DimArg): number {
  if (dim === null || shape.length === 0) return numel(shape);
  const list = typeof dim === 'number' ? [dim] : dim;
  return list.reduce((n, d) => n * shape[d < 0 ? d + shape.length : d]!, 1);
}

function forAllConfigs(name: string, fn: (x: Tensor, dim: DimArg, keepdim: boolean) => Tensor, seed = 1, lo = -2, hi = 2, minGroup = 1): void {
  let s = seed;
  for (const { layout, shape, dims } of CONFIGS) {
    for (const dim of dims) {
      if (groupSize(shape, dim) < minGroup) continue;
      for (const keepdim of [false, true]) {
        const x = leaf(shape, s++, layout, lo, hi);
        try {
          gradcheck((t) => fn(t, dim, keepdim), [x]);
        } catch (e) {
          throw new Error(`${name} ${layout} [${shape}] dim=${JSON.stringify(dim)} keepdim=${keepdim}: ${(e as Error).message}`);
        }
      }
    }
  }
}

const grad = (x: Tensor): number[] => x.grad!.toFlatArray();

test('sum and mean: every dims/keepdim/layout configuration', () => {
  forAllConfigs('sum', (x, dim, keepdim) => kiln.sum(x, dim, keepdim));
  forAllConfigs('mean', (x, dim, keepdim) => kiln.mean(x, dim, keepdim));
});

test('prod: gradcheck, including inputs with one and with several zeros', () => {
  forAllConfigs('prod', (x, dim, keepdim) => kiln.prod(x, dim, keepdim), 10, 0.5, 1.5);
  // prod is a polynomial, so finite differences are exact enough at zeros too.
  const withZeros = [1.5, 0, -2, 0.5, 0, 0, 3, 1.2, -0.7, 2, 0, 1.1];
  for (const layout of ['contiguous', 'transposed'] as const) {
    for (const dim of [null, 0, 1, -1, [0, 1]] as DimArg[]) {
      for (const keepdim of [false, true]) {
        gradcheck((t) => kiln.prod(t, dim, keepdim), [leafOf(withZeros, [3, 4], layout)]);
      }
    }
  }
});

test('prod with zeros: exact gradients (no division by the input)', () => {
  const x = leafOf([2, 0, 3, 0, 0, 1, 4, 5, 6], [3, 3]);
  kiln.prod(x, 1).sum().backward();
  assert.deepEqual(grad(x), [0, 6, 0, 0, 0, 0, 30, 24, 20]);
  const y = leafOf([2, 0, 3, 4], [4]);
  kiln.prod(y).backward();
  assert.deepEqual(grad(y), [0, 24, 0, 0]);
  const z = leafOf([2, 0, 3, 0], [4]);
  kiln.prod(z).backward();
  assert.deepEqual(grad(z), [0, 0, 0, 0]);
});

test('amax/amin: gradcheck at distinct values; ties split the gradient evenly', () => {
  forAllConfigs('amax', (x, dim, keepdim) => kiln.amax(x, dim, keepdim), 20);
  forAllConfigs('amin', (x, dim, keepdim) => kiln.amin(x, dim, keepdim), 30);
  const x = leafOf([1, 3, 3, 2, 5, 5, 5, 0], [2, 4]);
  kiln.amax(x, 1).sum().backward();
  assert.deepEqual(grad(x), [0, 0.5, 0.5, 0, 1 / 3, 1 / 3, 1 / 3, 0]);
  const y = leafOf([1, 3, 1, 2], [4]);
  kiln.amin(y, [0], true).sum().backward();
  assert.deepEqual(grad(y), [0.5, 0, 0.5, 0]);
});

test('max()/min() over all elements: gradcheck, ties split evenly, NaN takes the gradient', () => {
  for (const layout of ['contiguous', 'transposed', 'strided'] as const) {
    gradcheck((t) => kiln.max(t), [leaf([3, 4], 40, layout)]);
    gradcheck((t) => kiln.min(t), [leaf([3, 4], 41, layout)]);
  }
  gradcheck((t) => kiln.max(t), [leaf([2, 3, 2, 2], 42, 'channelsLast')]);
  gradcheck((t) => kiln.min(t), [leaf([], 43)]);
  const x = leafOf([3, 1, 3, 2], [2, 2]);
  kiln.max(x).backward();
  assert.deepEqual(grad(x), [0.5, 0, 0.5, 0]);
  const y = leafOf([-1, 4, -1, -1], [4]);
  kiln.min(y).backward();
  assert.deepEqual(grad(y), [1 / 3, 0, 1 / 3, 1 / 3]);
  const z = leafOf([1, NaN, 7], [3]);
  kiln.max(z).backward();
  assert.deepEqual(grad(z), [0, 1, 0]);
});

test('max(dim)/min(dim): gradcheck; the gradient goes to the returned index only', () => {
  const cases: [number[], Layout, number][] = [
    [[3, 4], 'contiguous', 0],
    [[3, 4], 'contiguous', -1],
    [[2, 3, 4], 'transposed', 1],
    [[3, 4], 'strided', -2],
    [[2, 3, 2, 2], 'channelsLast', 1],
    [[], 'contiguous', 0],
  ];
  let s = 50;
  for (const [shape, layout, dim] of cases) {
    for (const keepdim of [false, true]) {
      gradcheck((t) => [kiln.max(t, dim, keepdim).values, kiln.max(t, dim, keepdim).indices], [leaf(shape, s++, layout)]);
      gradcheck((t) => kiln.min(t, dim, keepdim).values, [leaf(shape, s++, layout)]);
    }
  }
  const x = leafOf([1, 3, 3, 2, 5, 0], [2, 3]);
  const r = kiln.max(x, 1);
  r.values.sum().backward();
  const idx = r.indices.toFlatArray();
  const expected = [0, 0, 0, 0, 0, 0];
  expected[idx[0]!] = 1;
  expected[3 + idx[1]!] = 1;
  assert.deepEqual(grad(x), expected);
  assert.equal(expected.slice(0, 3).reduce((a, b) => a + b, 0), 1, 'one tied maximum gets the whole gradient');
});

test('var/std with corrections 0, 1, 2 over dims and keepdim; std gradient is 0 where std is 0', () => {
  for (const correction of [0, 1, 2]) {
    // Groups must be larger than the correction (else the variance is inf/NaN).
    forAllConfigs(`var c=${correction}`, (x, dim, keepdim) => kiln.var(x, dim, correction, keepdim), 60 + correction * 50, -2, 2, correction + 1);
  }
  for (const correction of [0, 1]) {
    forAllConfigs(`std c=${correction}`, (x, dim, keepdim) => kiln.std(x, dim, correction, keepdim), 200 + correction * 50, -2, 2, correction + 2);
  }
  const x = leafOf([2, 2, 2, 1, 3, 5], [2, 3]);
  kiln.std(x, 1, 1).sum().backward();
  const g = grad(x);
  assert.deepEqual(g.slice(0, 3), [0, 0, 0]);
  // Row 2: std = 2, mean 3, d std / dx = (x - mean) / ((n - 1) std).
  assert.deepEqual(g.slice(3), [-0.5, 0, 0.5]);
});

test('logsumexp: dims, keepdim, layouts', () => {
  for (const { layout, shape, dims } of CONFIGS) {
    for (const dim of dims) {
      if (dim === null) continue;
      for (const keepdim of [false, true]) gradcheck((t) => kiln.logsumexp(t, dim, keepdim), [leaf(shape, 300, layout)]);
    }
  }
});

test('softmax/logSoftmax: every dim, negative dims, non-contiguous and channels_last inputs', () => {
  const cases: [number[], Layout, number[]][] = [
    [[3, 4], 'contiguous', [0, 1, -1]],
    [[2, 3, 4], 'transposed', [0, -2]],
    [[3, 4], 'strided', [1]],
    [[2, 3, 2, 2], 'channelsLast', [1, -1]],
    [[], 'contiguous', [0]],
  ];
  let s = 400;
  for (const [shape, layout, dims] of cases) {
    for (const dim of dims) {
      gradcheck((t) => kiln.softmax(t, dim), [leaf(shape, s++, layout)]);
      gradcheck((t) => kiln.logSoftmax(t, dim), [leaf(shape, s++, layout)]);
    }
  }
});

test('cumsum/cumprod: dims, layouts; cumprod exact at zeros', () => {
  const cases: [number[], Layout, number[]][] = [
    [[5], 'contiguous', [0, -1]],
    [[3, 4], 'contiguous', [0, 1]],
    [[2, 3, 4], 'transposed', [-1, 1]],
    [[3, 4], 'strided', [0]],
    [[2, 3, 2, 2], 'channelsLast', [1, 3]],
    [[], 'contiguous', [0]],
  ];
  let s = 500;
  for (const [shape, layout, dims] of cases) {
    for (const dim of dims) {
      gradcheck((t) => kiln.cumsum(t, dim), [leaf(shape, s++, layout)]);
      gradcheck((t) => kiln.cumprod(t, dim), [leaf(shape, s++, layout, 0.5, 1.5)]);
    }
  }
  // Zeros: none, one, several per slice (cumprod is a polynomial: gradcheck is valid there).
  const withZeros = [1.5, 0, -2, 0.5, 0, 0, 3, 1.2, -0.7, 2, 0, 1.1, 0, 0.9, 1.3, -1.4];
  for (const dim of [0, 1, -1]) {
    for (const layout of ['contiguous', 'transposed'] as const) gradcheck((t) => kiln.cumprod(t, dim), [leafOf(withZeros, [4, 4], layout)]);
  }
  const x = leafOf([2, 0, 3, 4], [4]);
  kiln.cumprod(x, 0).sum().backward();
  // out = [2, 0, 0, 0]; d/dx0 = 1, d/dx1 = 2 + 2*3 + 2*3*4 = 32, later elements multiply a zero.
  assert.deepEqual(grad(x), [1, 32, 0, 0]);
});

test('sort/topk: the gradient is scattered back through the indices', () => {
  const cases: [number[], Layout, number][] = [
    [[6], 'contiguous', 0],
    [[3, 4], 'contiguous', -1],
    [[3, 4], 'transposed', 0],
    [[3, 4], 'strided', 1],
    [[2, 3, 2, 2], 'channelsLast', 1],
    [[], 'contiguous', 0],
  ];
  let s = 600;
  for (const [shape, layout, dim] of cases) {
    for (const descending of [false, true]) {
      gradcheck((t) => kiln.sort(t, dim, descending).values, [leaf(shape, s++, layout)]);
    }
    const size = shape.length === 0 ? 1 : shape[dim < 0 ? dim + shape.length : dim]!;
    for (const largest of [true, false]) {
      for (const k of [1, size]) gradcheck((t) => kiln.topk(t, k, dim, largest).values, [leaf(shape, s++, layout)]);
    }
  }
  const x = leafOf([3, 1, 2], [3]);
  const r = kiln.topk(x, 2);
  r.values.backward(kiln.tensor([10, 1], { dtype: 'float64' }));
  assert.deepEqual(grad(x), [10, 0, 1]);
});

test('gradients of reductions keep the input dtype (float32 inputs)', () => {
  const x = makeTensor([1, 2, 3, 4], [2, 2], 'float32').requiresGrad_();
  kiln.sum(kiln.softmax(x, 1), null, false, 'float64').backward();
  assert.equal(x.grad!.dtype, 'float32');
});

// Ops of the reduction group without a backward formula, and why.
const NON_DIFFERENTIABLE = new Set([
  'argmax', // int64 output
  'argmin', // int64 output
  'argsort', // int64 output
  'any', // bool output
  'all', // bool output
]);

test('every floating-output op of the reduction group has a backward formula', () => {
  const names = new Set(Object.values(red).flatMap((v) => (typeof v === 'object' && v !== null && 'name' in v && 'meta' in v ? [(v as { name: string }).name] : [])));
  const ops = listOps().filter((op) => names.has(op.name));
  assert.ok(ops.length >= 20, `found ${ops.length} reduction ops`);
  for (const op of ops) {
    if (NON_DIFFERENTIABLE.has(op.name)) {
      assert.equal(op.backward, undefined, `${op.name} is allow-listed as non-differentiable but has a formula`);
      continue;
    }
    assert.ok(op.backward !== undefined, `reduction op '${op.name}' has no backward formula`);
  }
  // A floating-output check on sample metadata: the allow-listed ops really have non-floating outputs.
  const x = kiln.zeros([2, 3]);
  assert.ok(!isFloating(kiln.argmax(x).dtype) && !isFloating(kiln.any(x).dtype) && !isFloating(kiln.argsort(x).dtype));
});

test('a saved input modified in place after the reduction is reported at backward', () => {
  const x = leaf([2, 3], 700);
  const c = kiln.clone(x);
  const p = kiln.prod(c, 1);
  kiln.add_(c, 1);
  assert.throws(() => p.sum().backward(), /modified by an in-place operation/);
});
