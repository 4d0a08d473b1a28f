import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { castValue } from '../src/tensor/typed.js';
import { assertThrowsWith } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor } from './helpers/make.js';

// ---- independent references ---------------------------------------------------------------

function count(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Row-major flat index of idx in shape. */
function flatIndex(shape: readonly number[], idx: readonly number[]): number {
  let f = 0;
  for (let d = 0; d < shape.length; d++) f = f * shape[d]! + idx[d]!;
  return f;
}

/** All indices of shape in row-major order. */
function indices(shape: readonly number[]): number[][] {
  const out: number[][] = [];
  const n = count(shape);
  for (let i = 0; i < n; i++) {
    const idx = new Array<number>(shape.length);
    let r = i;
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d] = r % shape[d]!;
      r = Math.floor(r / shape[d]!);
    }
    out.push(idx);
  }
  return out;
}

/** A base tensor whose logical element i is value(i), in the requested layout. */
function iota(shape: readonly number[], layout: Layout = 'contiguous', dtype: DType = 'float32'): Tensor {
  return makeTensor(Array.from({ length: count(shape) }, (_, i) => value(i, dtype)), shape, dtype, layout);
}

function value(i: number, dtype: DType): number {
  return dtype === 'bool' ? i % 2 : castValue(dtype === 'uint8' ? i % 200 : i * 1.5 - 7, dtype);
}

interface ViewCase {
  name: string;
  shape: number[];
  layout?: Layout;
  make: (x: Tensor) => Tensor;
  outShape: number[];
  /** Base index read by the output element at idx. */
  map: (idx: number[]) => number[];
  /** Hand-computed strides/offset (for the given layout). */
  strides?: number[];
  offset?: number;
  /** Overlapping views (expand) can't be written through elementwise. */
  noWrite?: boolean;
}

/** Checks shape, hand-computed strides/offset, shared storage, values, and write-through. */
function checkCase(c: ViewCase, dtype: DType = 'float32'): void {
  const where = `${c.name} (${c.layout ?? 'contiguous'}, ${dtype})`;
  const x = iota(c.shape, c.layout, dtype);
  const out = c.make(x);
  assert.deepEqual([...out.shape], c.outShape, `${where}: shape`);
  if (c.strides) assert.deepEqual([...out.strides], c.strides, `${where}: strides`);
  if (c.offset !== undefined) assert.equal(out.offset, c.offset, `${where}: offset`);
  assert.equal(out.storage, x.storage, `${where}: shares storage`);
  const got = out.toFlatArray();
  const idxs = indices(c.outShape);
  idxs.forEach((idx, i) => {
    const b = c.map(idx);
    assert.equal(got[i], value(flatIndex(c.shape, b), dtype), `${where}: element [${idx}] should be base [${b}]`);
  });
  if (c.noWrite || dtype !== 'float32') return;
  // Write through the view: the base changes exactly at the mapped positions.
  const before = x.toFlatArray();
  out.add_(1000);
  const hit = new Set(idxs.map((idx) => flatIndex(c.shape, c.map(idx))));
  const after = x.toFlatArray();
  after.forEach((v, f) => assert.equal(v, before[f]! + (hit.has(f) ? 1000 : 0), `${where}: base element ${f} after add_ through the view`));
}

// ---- cases ----------------------------------------------------------------------------------

const cases: ViewCase[] = [
  // view
  { name: 'view(2, -1)', shape: [3, 4], make: (x) => x.view(2, -1), outShape: [2, 6], map: ([a, b]) => [Math.floor((a! * 6 + b!) / 4), (a! * 6 + b!) % 4], strides: [6, 1], offset: 0 },
  { name: 'view([12])', shape: [3, 4], make: (x) => x.view([12]), outShape: [12], map: ([a]) => [Math.floor(a! / 4), a! % 4], strides: [1], offset: 0 },
  { name: 'view split strided', shape: [4, 6], layout: 'strided', make: (x) => kiln.view(x, [4, 2, 3]), outShape: [4, 2, 3], map: ([a, b, c]) => [a!, b! * 3 + c!], strides: [12, 6, 2], offset: 3 },
  { name: 'view split transposed', shape: [3, 4], layout: 'transposed', make: (x) => x.view(3, 2, 2), outShape: [3, 2, 2], map: ([a, b, c]) => [a!, b! * 2 + c!], strides: [1, 6, 3], offset: 0 },
  { name: 'view merge H,W of channels_last', shape: [2, 3, 4, 5], layout: 'channelsLast', make: (x) => x.view(2, 3, 20), outShape: [2, 3, 20], map: ([n, c, s]) => [n!, c!, Math.floor(s! / 5), s! % 5], strides: [60, 1, 3] },
  { name: 'view 0-d to [1, 1]', shape: [], make: (x) => x.view(1, 1), outShape: [1, 1], map: () => [], strides: [1, 1] },
  // reshape (view cases)
  { name: 'reshape contiguous is a view', shape: [2, 6], make: (x) => x.reshape(3, 4), outShape: [3, 4], map: ([a, b]) => [Math.floor((a! * 4 + b!) / 6), (a! * 4 + b!) % 6], strides: [4, 1], offset: 0 },
  { name: 'flatten()', shape: [2, 3, 4], layout: 'strided', make: (x) => x.flatten(), outShape: [24], map: ([a]) => [Math.floor(a! / 12), Math.floor(a! / 4) % 3, a! % 4], strides: [2], offset: 3 },
  { name: 'flatten(1)', shape: [2, 3, 4], make: (x) => x.flatten(1), outShape: [2, 12], map: ([a, b]) => [a!, Math.floor(b! / 4), b! % 4], strides: [12, 1] },
  { name: 'flatten(0, 1)', shape: [2, 3, 4], make: (x) => kiln.flatten(x, 0, 1), outShape: [6, 4], map: ([a, b]) => [Math.floor(a! / 3), a! % 3, b!], strides: [4, 1] },
  { name: 'flatten 0-d', shape: [], make: (x) => x.flatten(), outShape: [1], map: () => [], strides: [1] },
  { name: 'unflatten(1, [2, -1, 3])', shape: [3, 12], make: (x) => x.unflatten(1, [2, -1, 3]), outShape: [3, 2, 2, 3], map: ([a, b, c, d]) => [a!, b! * 6 + c! * 3 + d!], strides: [12, 6, 3, 1] },
  // permutations
  { name: 'permute(2, 0, 1) strided', shape: [2, 3, 4], layout: 'strided', make: (x) => x.permute(2, 0, 1), outShape: [4, 2, 3], map: ([a, b, c]) => [b!, c!, a!], strides: [2, 24, 8], offset: 3 },
  { name: 'permute([-1, 0, 1])', shape: [2, 3, 4], make: (x) => x.permute([-1, 0, 1]), outShape: [4, 2, 3], map: ([a, b, c]) => [b!, c!, a!], strides: [1, 12, 4] },
  { name: 'permute channels_last to NHWC', shape: [2, 3, 4, 5], layout: 'channelsLast', make: (x) => x.permute(0, 2, 3, 1), outShape: [2, 4, 5, 3], map: ([n, h, w, c]) => [n!, c!, h!, w!], strides: [60, 15, 3, 1] },
  { name: 'transpose(0, 2)', shape: [3, 4, 5], make: (x) => x.transpose(0, 2), outShape: [5, 4, 3], map: ([a, b, c]) => [c!, b!, a!], strides: [1, 5, 20] },
  { name: 'transpose(-1, 0) transposed layout', shape: [3, 4], layout: 'transposed', make: (x) => x.transpose(-1, 0), outShape: [4, 3], map: ([a, b]) => [b!, a!], strides: [3, 1] },
  { name: 't()', shape: [3, 4], make: (x) => x.t(), outShape: [4, 3], map: ([a, b]) => [b!, a!], strides: [1, 4] },
  { name: 't() 1-d', shape: [5], make: (x) => kiln.t(x), outShape: [5], map: ([a]) => [a!], strides: [1] },
  { name: 'T 3-d', shape: [2, 3, 4], make: (x) => x.T, outShape: [4, 3, 2], map: ([a, b, c]) => [c!, b!, a!], strides: [1, 4, 12] },
  { name: 'mT', shape: [2, 3, 4], make: (x) => x.mT, outShape: [2, 4, 3], map: ([a, b, c]) => [a!, c!, b!], strides: [12, 1, 4] },
  { name: 'movedim(1, -1)', shape: [2, 3, 4, 5], make: (x) => x.movedim(1, -1), outShape: [2, 4, 5, 3], map: ([n, h, w, c]) => [n!, c!, h!, w!], strides: [60, 5, 1, 20] },
  { name: 'movedim([0, 1], [3, 2])', shape: [2, 3, 4, 5], make: (x) => x.movedim([0, 1], [3, 2]), outShape: [4, 5, 3, 2], map: ([a, b, c, d]) => [d!, c!, a!, b!], strides: [5, 1, 20, 60] },
  // expand
  { name: 'expand(2, 3, 4)', shape: [3, 1], make: (x) => x.expand(2, 3, 4), outShape: [2, 3, 4], map: ([, b]) => [b!, 0], strides: [0, 1, 0], offset: 0, noWrite: true },
  { name: 'expand([-1, 4]) strided', shape: [3, 1], layout: 'strided', make: (x) => x.expand([-1, 4]), outShape: [3, 4], map: ([a]) => [a!, 0], strides: [2, 0], offset: 3, noWrite: true },
  { name: 'expand new size-1 lead', shape: [3, 1], make: (x) => x.expand(1, 3, 1), outShape: [1, 3, 1], map: ([, b]) => [b!, 0], strides: [3, 1, 1] },
  { name: 'expand 0-d', shape: [], make: (x) => x.expand(2, 3), outShape: [2, 3], map: () => [], strides: [0, 0], noWrite: true },
  { name: 'expandAs', shape: [4], make: (x) => x.expandAs(kiln.zeros(3, 4)), outShape: [3, 4], map: ([, b]) => [b!], strides: [0, 1], noWrite: true },
  // slicing
  { name: 'slice(1, -6, null, 2)', shape: [5, 7], make: (x) => x.slice(1, -6, null, 2), outShape: [5, 3], map: ([a, b]) => [a!, 1 + 2 * b!], strides: [7, 2], offset: 1 },
  { name: 'slice(0, 1, 100, 3) strided', shape: [5, 4], layout: 'strided', make: (x) => kiln.slice(x, 0, 1, 100, 3), outShape: [2, 4], map: ([a, b]) => [1 + 3 * a!, b!], strides: [24, 2], offset: 3 + 8 },
  { name: 'slice(0, -100, -2)', shape: [6], make: (x) => x.slice(0, -100, -2), outShape: [4], map: ([a]) => [a!], strides: [1], offset: 0 },
  { name: 'slice empty (start > end)', shape: [6, 2], make: (x) => x.slice(0, 4, 2), outShape: [0, 2], map: () => [], strides: [2, 1], offset: 8 },
  { name: 'slice transposed dim 0', shape: [4, 3], layout: 'transposed', make: (x) => x.slice(0, 1, 3), outShape: [2, 3], map: ([a, b]) => [a! + 1, b!], strides: [1, 4], offset: 1 },
  { name: 'narrow(1, 1, 3) transposed', shape: [4, 5], layout: 'transposed', make: (x) => x.narrow(1, 1, 3), outShape: [4, 3], map: ([a, b]) => [a!, b! + 1], strides: [1, 4], offset: 4 },
  { name: 'narrow(0, -4, 2)', shape: [6], make: (x) => x.narrow(0, -4, 2), outShape: [2], map: ([a]) => [a! + 2], strides: [1], offset: 2 },
  { name: 'select(0, -1)', shape: [3, 4], make: (x) => x.select(0, -1), outShape: [4], map: ([b]) => [2, b!], strides: [1], offset: 8 },
  { name: 'select(1, 2) strided', shape: [3, 4], layout: 'strided', make: (x) => x.select(1, 2), outShape: [3], map: ([a]) => [a!, 2], strides: [8], offset: 7 },
  { name: 'select channel of channels_last', shape: [2, 3, 4, 5], layout: 'channelsLast', make: (x) => x.select(1, 2), outShape: [2, 4, 5], map: ([n, h, w]) => [n!, 2, h!, w!], strides: [60, 15, 3], offset: 2 },
  // squeeze / unsqueeze
  { name: 'squeeze()', shape: [1, 3, 1, 2], make: (x) => x.squeeze(), outShape: [3, 2], map: ([a, b]) => [0, a!, 0, b!], strides: [2, 1] },
  { name: 'squeeze(0)', shape: [1, 3, 1, 2], make: (x) => x.squeeze(0), outShape: [3, 1, 2], map: ([a, , b]) => [0, a!, 0, b!], strides: [2, 2, 1] },
  { name: 'squeeze([0, -2, 1])', shape: [1, 3, 1, 2], make: (x) => x.squeeze([0, -2, 1]), outShape: [3, 2], map: ([a, b]) => [0, a!, 0, b!], strides: [2, 1] },
  { name: 'squeeze 0-d', shape: [], make: (x) => x.squeeze(0), outShape: [], map: () => [], strides: [] },
  { name: 'unsqueeze(0)', shape: [3, 4], make: (x) => x.unsqueeze(0), outShape: [1, 3, 4], map: ([, a, b]) => [a!, b!], strides: [12, 4, 1] },
  { name: 'unsqueeze(1)', shape: [3, 4], make: (x) => x.unsqueeze(1), outShape: [3, 1, 4], map: ([a, , b]) => [a!, b!], strides: [4, 4, 1] },
  { name: 'unsqueeze(-1) strided', shape: [3, 4], layout: 'strided', make: (x) => x.unsqueeze(-1), outShape: [3, 4, 1], map: ([a, b]) => [a!, b!], strides: [8, 2, 1], offset: 3 },
  { name: 'unsqueeze(2) channels_last', shape: [2, 3, 4, 5], layout: 'channelsLast', make: (x) => x.unsqueeze(2), outShape: [2, 3, 1, 4, 5], map: ([n, c, , h, w]) => [n!, c!, h!, w!], strides: [60, 1, 60, 15, 3] },
  // diagonal / asStrided
  { name: 'diagonal()', shape: [3, 4], make: (x) => x.diagonal(), outShape: [3], map: ([i]) => [i!, i!], strides: [5], offset: 0 },
  { name: 'diagonal(1)', shape: [3, 4], make: (x) => x.diagonal(1), outShape: [3], map: ([i]) => [i!, i! + 1], strides: [5], offset: 1 },
  { name: 'diagonal(-1)', shape: [3, 4], make: (x) => x.diagonal(-1), outShape: [2], map: ([i]) => [i! + 1, i!], strides: [5], offset: 4 },
  { name: 'diagonal(0, -2, -1) batched', shape: [2, 3, 3], make: (x) => kiln.diagonal(x, 0, -2, -1), outShape: [2, 3], map: ([b, i]) => [b!, i!, i!], strides: [9, 4] },
  { name: 'diagonal(0, 0, 2)', shape: [3, 2, 4], make: (x) => x.diagonal(0, 0, 2), outShape: [2, 3], map: ([j, i]) => [i!, j!, i!], strides: [4, 9] },
  { name: 'asStrided windows', shape: [10], make: (x) => x.asStrided([4, 3], [2, 1], 1), outShape: [4, 3], map: ([i, j]) => [1 + 2 * i! + j!], strides: [2, 1], offset: 1, noWrite: true },
  { name: 'asStrided default offset', shape: [3, 4], layout: 'strided', make: (x) => kiln.asStrided(x, [2, 2], [2, 8]), outShape: [2, 2], map: ([i, j]) => [j!, i!], strides: [2, 8], offset: 3 },
];

test('every view op: shape, hand-computed strides and offset, shared storage, values, write-through', () => {
  for (const c of cases) checkCase(c);
});

test('views keep values for every dtype', () => {
  const picks = ['view split strided', 'permute(2, 0, 1) strided', 'slice(1, -6, null, 2)', 'select channel of channels_last', 'diagonal(1)', 'expand(2, 3, 4)', 'unsqueeze(2) channels_last'];
  for (const dtype of ['float16', 'bfloat16', 'int32', 'int64', 'uint8', 'bool'] as DType[]) {
    for (const name of picks) checkCase(cases.find((c) => c.name === name)!, dtype);
  }
});

test('views of views compose: permute -> slice -> view, then reshape copies', () => {
  const x = iota([4, 6]);
  const p = x.permute(1, 0); // [6, 4] strides [1, 6]
  const s = p.slice(0, 1, null, 2); // rows 1, 3, 5 of p: [3, 4] strides [2, 6] offset 1
  assert.deepEqual([...s.strides], [2, 6]);
  assert.equal(s.offset, 1);
  const v = s.view(3, 2, 2);
  assert.deepEqual([...v.shape], [3, 2, 2]);
  assert.deepEqual([...v.strides], [2, 12, 6]);
  assert.equal(v.offset, 1);
  assert.equal(v.storage, x.storage);
  const ref = indices([3, 2, 2]).map(([a, b, c]) => value(flatIndex([4, 6], [b! * 2 + c!, 1 + 2 * a!]), 'float32'));
  assert.deepEqual(v.toFlatArray(), ref);
  assertThrowsWith(() => v.view(12), 'view', 'not compatible', 'reshape');
  const r = v.reshape(12);
  assert.notEqual(r.storage, x.storage, 'reshape of a non-viewable tensor copies');
  assert.deepEqual([...r.strides], [1]);
  assert.deepEqual(r.toFlatArray(), ref);
  // The copy is independent of the base.
  r.add_(1);
  assert.deepEqual(v.toFlatArray(), ref);
  // Writes through the composed view land in the base.
  v.select(0, 0).copy_(kiln.full([2, 2], -1));
  const base = x.toFlatArray();
  for (const [b, c] of [[0, 0], [0, 1], [1, 0], [1, 1]] as const) assert.equal(base[flatIndex([4, 6], [b * 2 + c, 1])], -1);
  assert.equal(base[flatIndex([4, 6], [0, 0])], value(0, 'float32'));
});

test('reshape of a transposed / channels_last / broadcast tensor copies with the right values', () => {
  const x = iota([3, 4]);
  const tr = x.t();
  const r = tr.reshape(-1);
  assert.notEqual(r.storage, x.storage);
  assert.deepEqual([...r.strides], [1]);
  assert.equal(r.offset, 0);
  const ref: number[] = [];
  for (let j = 0; j < 4; j++) for (let i = 0; i < 3; i++) ref.push(value(i * 4 + j, 'float32'));
  assert.deepEqual(r.toFlatArray(), ref);
  assert.deepEqual(tr.reshape(2, 6).toArray(), [ref.slice(0, 6), ref.slice(6)]);
  // flatten of a transposed tensor copies too, and so do flatten ranges that cross a gap.
  assert.deepEqual(tr.flatten().toFlatArray(), ref);
  assert.notEqual(tr.flatten().storage, x.storage);
  const cl = iota([2, 3, 4, 5], 'channelsLast');
  const rc = cl.reshape(6, 20);
  assert.notEqual(rc.storage, cl.storage);
  assert.deepEqual(rc.toFlatArray(), Array.from({ length: 120 }, (_, i) => value(i, 'float32')));
  const b = makeExpanded([1, 2, 3], [3], [2, 3]).reshape(6);
  assert.deepEqual(b.toFlatArray(), [1, 2, 3, 1, 2, 3]);
  // float16 / int64 copies keep exact values.
  for (const dtype of ['float16', 'int64', 'bool'] as DType[]) {
    const y = iota([3, 4], 'contiguous', dtype).t().reshape(12);
    assert.deepEqual(y.toFlatArray(), Array.from({ length: 12 }, (_, k) => value((k % 3) * 4 + Math.floor(k / 3), dtype)));
  }
  // Empty reshape keeps working.
  assert.deepEqual([...iota([0, 4]).reshape(2, 0, 2).shape], [2, 0, 2]);
});

test('channels_last inputs: permute to NHWC is contiguous, unsqueeze / squeeze follow PyTorch strides', () => {
  const x = iota([2, 3, 4, 5], 'channelsLast');
  const nhwc = x.permute(0, 2, 3, 1);
  assert.ok(nhwc.isContiguous());
  assert.ok(x.isContiguous('channelsLast'));
  const u = x.unsqueeze(0);
  assert.deepEqual([...u.strides], [120, 60, 1, 15, 3]);
  const back = u.squeeze(0);
  assert.deepEqual([...back.strides], [60, 1, 15, 3]);
  assert.ok(back.isContiguous('channelsLast'));
  assert.deepEqual(nhwc.contiguous().toFlatArray(), nhwc.toFlatArray());
});

test('view and reshape error messages', () => {
  const x = iota([3, 4]);
  assertThrowsWith(() => x.t().view(12), 'view', "view size is not compatible with input tensor's size and stride", '[4, 3]', 'reshape');
  assertThrowsWith(() => x.reshape(5, 3), 'reshape', '[5, 3]', '[3, 4]');
  assertThrowsWith(() => x.view(5, -1), 'view', '[5, -1]', '[3, 4]');
  assertThrowsWith(() => x.reshape(-1, -1), 'reshape', 'only one dimension', '-1');
  assertThrowsWith(() => x.view(-2, 6), 'view', '-2');
  assertThrowsWith(() => iota([0, 3]).reshape(-1, 0), 'reshape', '0 elements', '-1');
  assertThrowsWith(() => x.flatten(1, 0), 'flatten', 'startDim 1', 'endDim 0');
  assertThrowsWith(() => x.flatten(2), 'flatten', 'startDim', '2');
  assertThrowsWith(() => x.unflatten(1, [3, 2]), 'unflatten', '[3, 2]', '(4)');
  assertThrowsWith(() => (x.view as (...a: unknown[]) => Tensor)([2, 6], 1), 'view', 'expected a shape');
});

test('permute / transpose / t / movedim / mT errors', () => {
  const x = iota([2, 3, 4]);
  assertThrowsWith(() => x.permute(0, 0, 1), 'permute', 'repeated dim 0', '[0, 0, 1]');
  assertThrowsWith(() => x.permute(0, 1), 'permute', '[0, 1]', 'rank 3');
  assertThrowsWith(() => x.permute(0, 1, 3), 'permute', 'dim 3', 'out of range');
  assertThrowsWith(() => x.transpose(0, 3), 'transpose', 'dim1 3');
  assertThrowsWith(() => x.t(), 't', '[2, 3, 4]', '<= 2');
  assertThrowsWith(() => x.movedim([0, 1], [2]), 'movedim', '[0, 1]', '[2]');
  assertThrowsWith(() => x.movedim([0, 0], [1, 2]), 'movedim', 'repeated dim 0');
  assertThrowsWith(() => iota([3]).mT, 'mT', '[3]');
  assertThrowsWith(() => x.diagonal(0, 1, 1), 'diagonal', 'dim1=1', 'dim2=1');
  assertThrowsWith(() => iota([3]).diagonal(), 'diagonal', '[3]');
});

test('expand errors', () => {
  const x = iota([3, 1]);
  assertThrowsWith(() => x.expand(4, 2), 'expand', 'expanded size of the tensor (4)', 'existing size (3)', 'dimension 0');
  assertThrowsWith(() => x.expand(-1, 3, 2), 'expand', '-1', 'leading');
  assertThrowsWith(() => x.expand(3), 'expand', '(1)', '(2)');
  assertThrowsWith(() => x.expand(3, -2), 'expand', '-2');
  assertThrowsWith(() => iota([2]).expandAs(iota([3, 3])), 'expand', '(3)', '(2)');
});

test('slice / narrow / select / squeeze / unsqueeze / asStrided errors', () => {
  const x = iota([3, 4]);
  assertThrowsWith(() => x.slice(0, 0, 2, 0), 'slice', 'step', 'step=0');
  assertThrowsWith(() => x.slice(1, null, null, -1), 'slice', 'step=-1');
  assertThrowsWith(() => x.slice(2, 0, 1), 'slice', 'dim 2', 'out of range');
  assertThrowsWith(() => x.narrow(1, 2, 3), 'narrow', 'start (2) + length (3)', 'size (4)');
  assertThrowsWith(() => x.narrow(0, 4, 0), 'narrow', 'start 4', 'size 3');
  assertThrowsWith(() => x.narrow(0, 0, -1), 'narrow', 'length', '-1');
  assertThrowsWith(() => x.select(0, 3), 'select', 'index 3', '[3, 4]');
  assertThrowsWith(() => x.select(1, -5), 'select', 'index -5', '[3, 4]');
  assertThrowsWith(() => x.select(-3, 0), 'select', 'dim -3');
  assertThrowsWith(() => iota([]).select(0, 0), 'select', '0-dim');
  assertThrowsWith(() => x.squeeze(2), 'squeeze', 'dim 2', 'out of range');
  assertThrowsWith(() => x.squeeze([0, 0]), 'squeeze', 'dim 0', 'multiple');
  assertThrowsWith(() => x.unsqueeze(3), 'unsqueeze', 'dim 3', '[-3, 2]');
  assertThrowsWith(() => iota([4]).asStrided([10, 10], [10, 1]), 'asStrided', 'out of bounds', '[10, 10]');
  assertThrowsWith(() => iota([4]).asStrided([2], [1, 1]), 'asStrided', '[2]', '[1, 1]');
  assertThrowsWith(() => iota([4]).asStrided([2], [-1]), 'asStrided', 'negative stride');
});

test('squeeze leaves non-1 dims, view ops on empty tensors', () => {
  const x = iota([1, 3, 1, 2]);
  assert.deepEqual([...x.squeeze(1).shape], [1, 3, 1, 2]);
  const e = iota([2, 0, 3]);
  assert.deepEqual([...e.permute(2, 0, 1).shape], [3, 2, 0]);
  assert.deepEqual([...e.view(0, 5).shape], [0, 5]);
  assert.deepEqual([...e.select(0, 1).shape], [0, 3]);
  assert.deepEqual([...e.expand(4, 2, 0, 3).shape], [4, 2, 0, 3]);
  assert.deepEqual([...e.flatten().shape], [0]);
  assert.deepEqual(e.slice(1, 0, 5).toFlatArray(), []);
});

test('meta functions predict views without real tensors', async () => {
  const { getOp } = await import('../src/ops/registry.js');
  const meta = { shape: [3, 4], strides: [1, 3], dtype: 'float32' as const, device: new kiln.Device('cpu') };
  assert.deepEqual(getOp('reshape').meta(meta, [12]), { shape: [12], strides: [1], dtype: 'float32', device: meta.device, offset: 0, copies: true });
  const v = getOp('reshape').meta(meta, [3, 2, 2]) as { strides: number[]; copies: boolean; offset: number };
  assert.deepEqual(v.strides, [1, 6, 3]);
  assert.equal(v.copies, false);
  assert.equal((getOp('select').meta({ ...meta, offset: 5 }, 1, 2) as { offset: number }).offset, 11);
});
