/**
 * float64 runs through every op group (it exists for references and gradcheck): results stay
 * float64 and carry float64 precision, checked against the same math in JS doubles.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose } from './helpers/assert.js';
import { makeTensor, randomValues } from './helpers/make.js';

const d = (vals: number[], shape: number[]) => makeTensor(vals, shape, 'float64');

test('float64 keeps double precision through pointwise, reduction and promotion', () => {
  const x = d([1, 1e-10, 2, 3], [4]);
  const e = kiln.exp(x);
  assert.equal(e.dtype, 'float64');
  assert.deepEqual(e.toFlatArray(), [Math.E, Math.exp(1e-10), Math.exp(2), Math.exp(3)]);
  assert.equal(kiln.add(x, 1e-12).toFlatArray()[0], 1 + 1e-12, 'float32 would round this away');
  assert.equal(kiln.add(kiln.tensor([1, 2]), d([0.5, 0.25], [2])).dtype, 'float64');
  assert.equal(kiln.sum(d([0.1, 0.2], [2])).item(), 0.1 + 0.2, 'float64 storage and accumulation');
  assert.equal(kiln.tensor(new Float64Array([0.1])).dtype, 'float64');
  assert.equal(kiln.zeros([2], { dtype: 'float64' }).dtype, 'float64');
});

test('float64 matmul, linear, softmax, layerNorm, conv2d, sdpa and gather against double references', () => {
  const a = randomValues(12, 1);
  const b = randomValues(20, 2);
  const mm = kiln.matmul(d(a, [3, 4]), d(b, [4, 5]));
  const ref: number[] = [];
  for (let i = 0; i < 3; i++) for (let j = 0; j < 5; j++) {
    let s = 0;
    for (let k = 0; k < 4; k++) s += a[i * 4 + k]! * b[k * 5 + j]!;
    ref.push(s);
  }
  assert.equal(mm.dtype, 'float64');
  assertClose(mm, ref, [3, 5], { atol: 1e-13, rtol: 1e-13 });
  const sm = kiln.softmax(d(a, [3, 4]), -1);
  const smRef = [0, 1, 2].flatMap((r) => {
    const row = a.slice(r * 4, r * 4 + 4);
    const m = Math.max(...row);
    const z = row.reduce((s, v) => s + Math.exp(v - m), 0);
    return row.map((v) => Math.exp(v - m) / z);
  });
  assertClose(sm, smRef, [3, 4], { atol: 1e-15, rtol: 1e-14 });
  const ln = kiln.layerNorm(d(a, [3, 4]), [4]);
  assert.equal(ln.dtype, 'float64');
  const conv = kiln.conv2d(d(randomValues(2 * 3 * 5 * 5, 3), [2, 3, 5, 5]), d(randomValues(4 * 3 * 3 * 3, 4), [4, 3, 3, 3]), null, 1, 1);
  assert.equal(conv.dtype, 'float64');
  const q = d(randomValues(8, 5), [1, 2, 4]);
  assert.equal(kiln.scaledDotProductAttention(q, q, q).dtype, 'float64');
  const g = kiln.gather(d(a, [3, 4]), 1, kiln.tensor([[0], [3], [1]], { dtype: 'int64' }));
  assert.deepEqual(g.toFlatArray(), [a[0], a[7], a[9]]);
  assert.deepEqual(d([3, 1, 2], [3]).to('float32').toArray(), [3, 1, 2]);
});
