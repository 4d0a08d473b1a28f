import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { contiguousStrides } from '../src/tensor/layout.js';
import { Generator } from '../src/tensor/random.js';
import { assertClose, assertThrowsWith, tolFor } from './helpers/assert.js';
import { type Layout, makeExpanded, makeTensor, rand, randomInts, randomValues } from './helpers/make.js';
import { type AttnInput, refAttention } from './helpers/nn-ref.js';

const vals = (t: kiln.Tensor): AttnInput => ({ values: t.toFlatArray(), shape: [...t.shape] });

function boolMask(shape: number[], seed: number): kiln.Tensor {
  return makeTensor(randomInts(shape.reduce((a, b) => a * b, 1), seed, 0, 2), shape, 'bool');
}

function attnCase(
  qs: number[],
  ks: number[],
  vs: number[],
  opts: { causal?: boolean; scale?: number; mask?: kiln.Tensor; layout?: Layout; dtype?: DType; gqa?: boolean } = {},
): void {
  const dtype = opts.dtype ?? 'float32';
  const layout = opts.layout ?? 'contiguous';
  const q = rand(qs, 1, layout, dtype);
  const k = rand(ks, 2, layout, dtype);
  const v = rand(vs, 3, layout, dtype);
  const y = kiln.scaledDotProductAttention(q, k, v, opts.mask ?? null, 0, opts.causal ?? false, opts.scale ?? null, opts.gqa ?? false);
  const mask = opts.mask ? { ...vals(opts.mask), bool: opts.mask.dtype === 'bool' } : undefined;
  const ref = refAttention(vals(q), vals(k), vals(v), { causal: opts.causal, scale: opts.scale, mask });
  const t = tolFor(dtype);
  assertClose(y, ref.values, ref.shape, { atol: 4 * t.atol, rtol: 4 * t.rtol });
  assert.deepEqual([...y.strides], contiguousStrides(ref.shape));
  assert.equal(y.dtype, dtype);
}

test('SDPA matches softmax(QK^T / sqrt(E)) V, including L != S and Ev != E', () => {
  attnCase([2, 3, 5, 4], [2, 3, 5, 4], [2, 3, 5, 4]);
  attnCase([2, 2, 3, 8], [2, 2, 7, 8], [2, 2, 7, 5]);
  attnCase([4, 6], [9, 6], [9, 3]); // 2-d
  attnCase([3, 4, 6], [3, 9, 6], [3, 9, 2]); // 3-d
  attnCase([2, 2, 3, 4], [2, 2, 6, 4], [2, 2, 6, 4], { scale: 0.37 });
});

test('SDPA causal masking is top-left aligned (query i sees keys j <= i) for L = S, L < S and L > S', () => {
  attnCase([2, 2, 6, 4], [2, 2, 6, 4], [2, 2, 6, 3], { causal: true });
  attnCase([1, 2, 3, 4], [1, 2, 7, 4], [1, 2, 7, 3], { causal: true });
  attnCase([1, 2, 7, 4], [1, 2, 3, 4], [1, 2, 3, 3], { causal: true });
});

test('SDPA with bool (true = take part) and additive float masks, broadcast over batch and heads', () => {
  attnCase([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 5], { mask: boolMask([4, 6], 7) });
  attnCase([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 5], { mask: boolMask([2, 1, 4, 6], 8) });
  attnCase([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 5], { mask: rand([3, 4, 6], 9, 'transposed', 'float32', -3, 1) });
  attnCase([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 5], { mask: makeExpanded(randomValues(6, 10, -4, 0), [6], [2, 3, 4, 6]) });
  // An additive mask with -inf entries excludes keys.
  const m = randomValues(4 * 6, 11, -1, 1).map((x, i) => (i % 5 === 0 ? -Infinity : x));
  attnCase([1, 2, 4, 5], [1, 2, 6, 5], [1, 2, 6, 5], { mask: makeTensor(m, [4, 6]) });
});

test('SDPA grouped-query attention: 8 query heads share 2 key/value heads', () => {
  attnCase([2, 8, 5, 4], [2, 2, 7, 4], [2, 2, 7, 3], { gqa: true });
  attnCase([2, 8, 5, 4], [2, 2, 7, 4], [2, 2, 7, 3], { gqa: true, causal: true, layout: 'transposed' });
  attnCase([1, 8, 5, 4], [1, 2, 7, 4], [1, 2, 7, 3], { mask: boolMask([1, 8, 5, 7], 12) });
  // Each group of 4 query heads reads one kv head: identical queries in a group give identical rows.
  const qv = randomValues(5 * 4, 13);
  const q = makeExpanded(qv, [1, 1, 5, 4], [1, 8, 5, 4]);
  const k = rand([1, 2, 7, 4], 14);
  const v = rand([1, 2, 7, 3], 15);
  const y = kiln.scaledDotProductAttention(q, k, v, null, 0, false, null, true).toFlatArray();
  const head = (h: number) => y.slice(h * 15, (h + 1) * 15);
  assert.deepEqual(head(1), head(0));
  assert.deepEqual(head(3), head(0));
  assert.deepEqual(head(5), head(4));
  assert.notDeepEqual(head(4), head(0));
});

test('SDPA on non-contiguous inputs and float16/bfloat16', () => {
  attnCase([2, 2, 4, 6], [2, 2, 5, 6], [2, 2, 5, 3], { layout: 'strided', mask: boolMask([4, 5], 16) });
  attnCase([2, 2, 4, 6], [2, 2, 5, 6], [2, 2, 5, 3], { layout: 'transposed', causal: true });
  attnCase([2, 2, 4, 6], [2, 2, 5, 6], [2, 2, 5, 3], { dtype: 'float16' });
  attnCase([2, 2, 4, 6], [2, 2, 5, 6], [2, 2, 5, 3], { dtype: 'bfloat16', causal: true });
});

test('SDPA streams over many key blocks with large scores stably', () => {
  const q = rand([1, 2, 3, 8], 17, 'contiguous', 'float32', -6, 6);
  const k = rand([1, 2, 300, 8], 18, 'contiguous', 'float32', -6, 6);
  const v = rand([1, 2, 300, 4], 19);
  const y = kiln.scaledDotProductAttention(q, k, v, null, 0, false, 3);
  const ref = refAttention(vals(q), vals(k), vals(v), { scale: 3 });
  assertClose(y, ref.values, ref.shape, { atol: 1e-5, rtol: 1e-4 });
  const m = boolMask([3, 300], 20);
  const ym = kiln.scaledDotProductAttention(q, k, v, m);
  const rm = refAttention(vals(q), vals(k), vals(v), { mask: { ...vals(m), bool: true } });
  assertClose(ym, rm.values, rm.shape, { atol: 1e-5, rtol: 1e-4 });
});

test('SDPA: a fully masked row gives NaN (bool mask), other rows are unaffected', () => {
  const mv = randomInts(4 * 6, 21, 0, 2);
  for (let j = 0; j < 6; j++) mv[2 * 6 + j] = 0; // row 2 sees nothing
  mv[0] = 1;
  const mask = makeTensor(mv, [4, 6], 'bool');
  const q = rand([1, 1, 4, 5], 22);
  const k = rand([1, 1, 6, 5], 23);
  const v = rand([1, 1, 6, 3], 24);
  const y = kiln.scaledDotProductAttention(q, k, v, mask);
  const ref = refAttention(vals(q), vals(k), vals(v), { mask: { ...vals(mask), bool: true } });
  assert.ok(ref.values.slice(6, 9).every(Number.isNaN));
  assertClose(y, ref.values, ref.shape);
  const out = y.toFlatArray();
  assert.ok(out.slice(6, 9).every(Number.isNaN));
  assert.ok(out.slice(0, 6).every(Number.isFinite));
});

test('SDPA dropout: same generator seed, same result; weights rescaled so the mean is kept', () => {
  const q = rand([1, 1, 2000, 4], 25);
  const k = rand([1, 1, 16, 4], 26);
  const ones = makeTensor(new Array(16 * 2).fill(1), [1, 1, 16, 2]);
  const a = kiln.scaledDotProductAttention(q, k, ones, null, 0.4, false, null, false, new Generator(5)).toFlatArray();
  const b = kiln.scaledDotProductAttention(q, k, ones, null, 0.4, false, null, false, new Generator(5)).toFlatArray();
  const c = kiln.scaledDotProductAttention(q, k, ones, null, 0.4, false, null, false, new Generator(6)).toFlatArray();
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  // Without dropout every output is exactly sum(softmax) = 1; with it the expectation stays 1.
  const mean = a.reduce((s, x) => s + x, 0) / a.length;
  assert.ok(Math.abs(mean - 1) < 0.03, `mean ${mean}`);
  assert.ok(a.some((x) => Math.abs(x - 1) > 0.1), 'dropout changed some rows');
  const z = kiln.scaledDotProductAttention(q, k, ones, null, 1).toFlatArray();
  assert.ok(z.every((x) => x === 0));
});

test('SDPA errors name the op and the shapes', () => {
  const q = rand([2, 8, 4, 6], 1);
  const k = rand([2, 8, 5, 6], 2);
  const v = rand([2, 8, 5, 3], 3);
  const sdpa = kiln.scaledDotProductAttention;
  assertThrowsWith(() => sdpa(q, rand([2, 8, 5, 4], 2), v), 'scaledDotProductAttention', '[2, 8, 4, 6]', '[2, 8, 5, 4]', 'embedding');
  assertThrowsWith(() => sdpa(q, k, rand([2, 8, 6, 3], 3)), 'scaledDotProductAttention', '[2, 8, 5, 6]', '[2, 8, 6, 3]', 'sequence length');
  assertThrowsWith(() => sdpa(q, rand([2, 3, 5, 6], 2), rand([2, 3, 5, 3], 3), null, 0, false, null, true), 'scaledDotProductAttention', 'heads', '[2, 3, 5, 6]', '(3', '(8)');
  assertThrowsWith(() => sdpa(q, k, v, boolMask([3, 5], 4)), 'scaledDotProductAttention', 'attnMask [3, 5]', 'not broadcastable', '[2, 8, 4, 5]');
  assertThrowsWith(() => sdpa(q, k, v, boolMask([3, 2, 8, 4, 5], 4)), 'scaledDotProductAttention', '[3, 2, 8, 4, 5]', 'not broadcastable');
  assertThrowsWith(() => sdpa(q, k, v, rand([4, 5], 4, 'contiguous', 'int32', 0, 3)), 'scaledDotProductAttention', 'attnMask', 'int32');
  assertThrowsWith(() => sdpa(q, rand([2, 8, 5, 6], 2, 'contiguous', 'float16'), v), 'scaledDotProductAttention', 'same dtype', 'float16');
  assertThrowsWith(() => sdpa(q, k, v, boolMask([4, 5], 4), 0, true), 'scaledDotProductAttention', 'isCausal', '[4, 5]');
  assertThrowsWith(() => sdpa(q, k, v, null, 1.5), 'scaledDotProductAttention', 'dropoutP', '1.5');
  assertThrowsWith(() => sdpa(rand([6], 1), k, v), 'scaledDotProductAttention', 'query', '[6]');
});
