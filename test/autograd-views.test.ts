/**
 * Backward formulas of the view ops: gradcheck for every view on contiguous and non-contiguous
 * inputs, reshape/flatten in both their view and copy cases, expand summing back, the scattering
 * views (slice, narrow, select, diagonal, asStrided), and asStrided's overlap error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import * as V from '../src/ops/defs/views.js';
import { listOps } from '../src/ops/registry.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeTensor, randomValues } from './helpers/make.js';

const { gradcheck } = kiln;

function leaf(shape: readonly number[], seed: number, layout: Layout = 'contiguous'): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(randomValues(n, seed, -2, 2), shape, 'float64', layout).requiresGrad_();
}

/** Backward with a seed 1, 2, 3, ... (so every output element is told apart). */
function back(y: Tensor): void {
  const n = y.numel();
  y.backward(makeTensor(Array.from({ length: n }, (_, i) => i + 1), y.shape, y.dtype));
}

const LAYOUTS: Layout[] = ['contiguous', 'transposed', 'strided'];

function check(name: string, shape: readonly number[], fn: (x: Tensor) => Tensor | Tensor[], layouts: readonly Layout[] = LAYOUTS): void {
  let seed = 1;
  for (const layout of layouts) {
    const x = leaf(shape, seed++, layout);
    assert.doesNotThrow(() => gradcheck(fn, [x]), `${name} (${layout})`);
  }
}

test('view / reshape / flatten / unflatten: gradcheck (view and copy cases)', () => {
  // Merging dims is a view only when their strides nest (not for the transposed layout).
  check('view merge', [2, 3, 2], (x) => x.view(3, 4), ['contiguous', 'strided']);
  check('view split', [2, 3, 2], (x) => x.view(2, 3, 1, 2));
  check('reshape', [2, 3, 2], (x) => x.reshape(-1, 2));
  check('reshape to 1-d', [3, 4], (x) => x.reshape(12));
  check('flatten', [2, 3, 2], (x) => x.flatten());
  check('flatten(1, 2)', [2, 3, 2], (x) => x.flatten(1, 2));
  check('unflatten', [2, 6], (x) => x.unflatten(1, [3, -1]));
});

test('reshape / flatten of a transposed input copies; its gradient still maps back elementwise', () => {
  const x = makeTensor([0, 1, 2, 3, 4, 5], [2, 3], 'float64', 'transposed').requiresGrad_();
  const r = x.reshape(-1);
  assert.notEqual(r.storage, x.storage, 'expected the copy case');
  back(r.mul(1));
  assert.deepEqual(x.grad!.toFlatArray(), [1, 2, 3, 4, 5, 6]);
  const y = makeTensor([0, 1, 2, 3, 4, 5], [3, 2], 'float64', 'transposed').requiresGrad_();
  back(y.flatten());
  assert.deepEqual(y.grad!.toFlatArray(), [1, 2, 3, 4, 5, 6]);
});

test('permute / transpose / t / movedim / T / mT: gradcheck', () => {
  check('permute', [2, 3, 2], (x) => x.permute(2, 0, 1));
  check('permute negative dims', [2, 3, 2], (x) => x.permute(-1, -3, -2));
  check('transpose', [2, 3, 2], (x) => x.transpose(0, 2));
  check('t', [2, 3], (x) => x.t());
  check('t 1-d', [4], (x) => x.t());
  check('movedim', [2, 3, 2], (x) => x.movedim(0, -1));
  check('movedim lists', [2, 3, 2, 1], (x) => x.movedim([0, 1], [3, 0]));
  check('T', [2, 3, 2], (x) => x.T);
  check('mT', [2, 3, 2], (x) => x.mT);
});

test('expand: the gradient sums over expanded and new leading dims', () => {
  check('expand', [3, 1], (x) => x.expand(2, 3, 4));
  check('expand -1', [1, 3], (x) => x.expand(4, -1));
  check('expandAs', [3], (x) => x.expandAs(makeTensor(new Array(6).fill(0), [2, 3], 'float64')));
  const x = makeTensor([1, 2], [2, 1], 'float64').requiresGrad_();
  back(x.expand(3, 2, 2));
  // Seeds 1..12 laid out [3, 2, 2]: row 0 of x collects 1,2,5,6,9,10 and row 1 the rest.
  assert.deepEqual(x.grad!.toFlatArray(), [33, 45]);
});

test('slice / narrow / select: gradcheck, and the gradient lands at the picked positions', () => {
  check('slice step', [5, 3], (x) => x.slice(0, 1, null, 2));
  check('slice negative', [3, 5], (x) => x.slice(1, -3, -1));
  check('slice empty', [3, 4], (x) => [x.slice(1, 2, 2), x.mul(2)]);
  check('narrow', [4, 3], (x) => x.narrow(0, 1, 2));
  check('narrow negative start', [3, 4], (x) => x.narrow(1, -3, 2));
  check('select', [3, 4], (x) => x.select(1, 2));
  check('select negative', [3, 2, 2], (x) => x.select(0, -1));
  const x = makeTensor([0, 1, 2, 3, 4, 5], [6], 'float64').requiresGrad_();
  back(x.slice(0, 1, null, 2));
  assert.deepEqual(x.grad!.toFlatArray(), [0, 1, 0, 2, 0, 3]);
  const y = makeTensor([0, 1, 2, 3, 4, 5], [2, 3], 'float64').requiresGrad_();
  back(y.select(0, -1));
  assert.deepEqual(y.grad!.toFlatArray(), [0, 0, 0, 1, 2, 3]);
});

test('squeeze / unsqueeze: gradcheck', () => {
  check('squeeze all', [2, 1, 3, 1], (x) => x.squeeze());
  check('squeeze dims', [2, 1, 3, 1], (x) => x.squeeze([1, -1]));
  check('squeeze non-1 dim (no-op)', [2, 3], (x) => x.squeeze(0));
  check('unsqueeze', [2, 3], (x) => x.unsqueeze(1));
  check('unsqueeze end', [2, 3], (x) => x.unsqueeze(-1));
  check('0-d unsqueeze', [], (x) => x.unsqueeze(0));
});

test('diagonal: gradcheck with offsets and dims, and the gradient lands on the diagonal', () => {
  check('diagonal', [3, 3], (x) => x.diagonal());
  check('diagonal +1', [3, 4], (x) => x.diagonal(1));
  check('diagonal -1', [4, 3], (x) => x.diagonal(-1));
  check('diagonal dims (0, 2)', [3, 2, 3], (x) => x.diagonal(0, 0, 2));
  check('diagonal out of range (empty)', [2, 2], (x) => [x.diagonal(3), x.mul(2)]);
  const x = makeTensor(new Array(9).fill(0), [3, 3], 'float64').requiresGrad_();
  back(x.diagonal(1));
  assert.deepEqual(x.grad!.toFlatArray(), [0, 1, 0, 0, 0, 2, 0, 0, 0]);
});

test('asStrided: gradcheck for non-overlapping geometries (offsets, gaps, interleaved strides)', () => {
  const x = leaf([3, 4], 1);
  gradcheck((t) => t.asStrided([2, 2], [4, 2], 1), [x]);
  gradcheck((t) => t.asStrided([3, 2], [2, 3]), [leaf([12], 2)]); // offsets 0,3,2,5,4,7: interleaved, disjoint
  gradcheck((t) => t.asStrided([2, 3], [1, 2], 5), [leaf([12], 3)]);
  // A non-contiguous input: asStrided addresses the storage directly, including positions that are
  // not elements of the input; those carry no gradient to it.
  const s = leaf([2, 3], 4, 'strided');
  gradcheck((t) => t.asStrided([2, 2], [2, 6]), [s]);
  const v = leaf([4, 3], 5);
  gradcheck((t) => t.slice(0, 1).asStrided([2, 3], [3, 1], 6), [v]);
});

test('asStrided: exact gradient; overlapping geometries throw a clear error at backward', () => {
  const x = makeTensor([0, 1, 2, 3, 4, 5], [6], 'float64').requiresGrad_();
  back(x.asStrided([2, 2], [3, 1], 1));
  assert.deepEqual(x.grad!.toFlatArray(), [0, 1, 2, 0, 3, 4]);
  const y = makeTensor([0, 1, 2, 3, 4, 5], [6], 'float64').requiresGrad_();
  const o = y.asStrided([3, 2], [1, 1]);
  assertThrowsWith(() => back(o), 'asStrided backward', 'overlap', 'size [3, 2]', 'stride [1, 1]');
  const z = makeTensor([1, 2], [2, 1], 'float64').requiresGrad_();
  const e = z.expand(2, 3).asStrided([2], [1]);
  assertThrowsWith(() => back(e), 'asStrided backward', 'input geometry', 'overlap');
});

test('chains of views on a non-contiguous input', () => {
  check('chain', [2, 3, 4], (x) => x.transpose(0, 2).reshape(4, 6).slice(1, 1, 5).unsqueeze(0).expand(2, 4, 4).select(2, 1).mul(x.select(1, 0)));
});

test('every view op has a backward formula', () => {
  const names = new Set(Object.values(V).flatMap((v) => (typeof v === 'object' && v !== null && 'kernels' in v && 'name' in v ? [(v as { name: string }).name] : [])));
  const ops = listOps().filter((op) => names.has(op.name));
  assert.equal(ops.length, 16, `view ops found: ${ops.map((o) => o.name).join(', ')}`);
  const missing = ops.filter((op) => op.backward === undefined).map((op) => op.name);
  assert.deepEqual(missing, [], `view ops without a backward formula: ${missing.join(', ')}`);
});
