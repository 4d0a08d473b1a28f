/**
 * bernoulli, randperm and multinomial: distributions checked statistically with fixed seeds
 * (chi-square on 10^5 draws against bounds a wrong distribution fails by a wide margin),
 * uniqueness without replacement, reproducibility through kiln's generators, and input errors.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertThrowsWith } from './helpers/assert.js';

/** Pearson chi-square of observed counts against expected probabilities. */
function chiSquare(counts: readonly number[], probs: readonly number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  return counts.reduce((s, c, i) => (probs[i]! > 0 ? s + (c - n * probs[i]!) ** 2 / (n * probs[i]!) : s), 0);
}

function histogram(values: readonly number[], k: number): number[] {
  const h = new Array<number>(k).fill(0);
  for (const v of values) h[v]!++;
  return h;
}

// 99.9% quantiles of chi-square: 9 dof 27.9, 4 dof 18.5, 1 dof 10.8.
test('multinomial with replacement: category frequencies match the weights (chi-square, 10^5 draws)', () => {
  const w = [0.05, 0.1, 0.0, 0.2, 0.15, 0.05, 0.1, 0.15, 0.1, 0.1].map((x) => x * 3); // unnormalised
  const probs = w.map((x) => x / 3);
  const g = new kiln.Generator(7);
  const s = kiln.multinomial(kiln.tensor(w), 100000, true, g);
  assert.equal(s.dtype, 'int64');
  assert.deepEqual(s.shape, [100000]);
  const h = histogram(s.toFlatArray(), 10);
  assert.equal(h[2], 0, 'a zero-weight category is never drawn');
  const chi = chiSquare(h, probs);
  assert.ok(chi < 27.9, `chi-square ${chi.toFixed(2)} (9 dof) too large`);
  // The same test rejects a wrong distribution (uniform over the nonzero categories).
  assert.ok(chiSquare(h, probs.map((p) => (p > 0 ? 1 / 9 : 0))) > 1000);
  // Rows of a 2-d input are independent distributions; a seed reproduces the draw.
  const two = kiln.multinomial(kiln.tensor([[1, 0, 0], [0, 0, 5]]), 4, { replacement: true, generator: new kiln.Generator(1) });
  assert.deepEqual(two.tolist(), [[0, 0, 0, 0], [2, 2, 2, 2]]);
  const again = (seed: number): number[] => kiln.multinomial(kiln.tensor(w), 50, true, new kiln.Generator(seed)).toFlatArray();
  assert.deepEqual(again(3), again(3));
  assert.notDeepEqual(again(3), again(4));
});

test('multinomial without replacement: distinct samples, first draw follows the weights, second the renormalised rest', () => {
  const w = [0.4, 0.3, 0.2, 0.1, 0];
  const g = new kiln.Generator(11);
  const rows = 20000;
  const s = kiln.multinomial(kiln.tensor(Array.from({ length: rows }, () => w)), 3, false, g);
  assert.deepEqual(s.shape, [rows, 3]);
  const v = s.toFlatArray();
  const first: number[] = [];
  const secondAfter0: number[] = [];
  for (let r = 0; r < rows; r++) {
    const row = v.slice(r * 3, r * 3 + 3);
    assert.equal(new Set(row).size, 3, `row ${r} repeats a category: ${row}`);
    assert.ok(!row.includes(4), 'the zero-weight category is never drawn while others remain');
    first.push(row[0]!);
    if (row[0] === 0) secondAfter0.push(row[1]!);
  }
  assert.ok(chiSquare(histogram(first, 5), w) < 18.5, 'first draw ~ weights');
  // Given category 0 first, the second is drawn from [0.3, 0.2, 0.1] / 0.6.
  assert.ok(chiSquare(histogram(secondAfter0, 5), [0, 0.5, 1 / 3, 1 / 6, 0]) < 18.5, 'second draw ~ renormalised weights');
  // numSamples = n gives a permutation per row.
  const all = kiln.multinomial(kiln.tensor([1, 2, 3, 4, 5, 6]), 6).toFlatArray();
  assert.deepEqual([...all].sort(), [0, 1, 2, 3, 4, 5]);
});

test('multinomial: clear errors for bad weights and sizes', () => {
  assertThrowsWith(() => kiln.multinomial(kiln.tensor([0.5, -0.1]), 1), 'multinomial', 'element < 0');
  assertThrowsWith(() => kiln.multinomial(kiln.tensor([0, 0]), 1), 'multinomial', 'sum to 0');
  assertThrowsWith(() => kiln.multinomial(kiln.tensor([1, 0, 0]), 2), 'multinomial', 'only 1 categories have nonzero weight');
  assertThrowsWith(() => kiln.multinomial(kiln.tensor([1, 1]), 3), 'multinomial', 'numSamples = 3 > 2');
  assertThrowsWith(() => kiln.multinomial(kiln.zeros([2, 2, 2]), 1), 'multinomial', '1 or 2 dim', '[2, 2, 2] float32');
});

test('randperm: a permutation, every position uniform (chi-square), seeded', () => {
  const n = 10;
  const trials = 10000;
  const g = new kiln.Generator(5);
  // counts[i][v]: how often value v lands at position i.
  const counts = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (let t = 0; t < trials; t++) {
    const p = kiln.randperm(n, { generator: g }).toFlatArray();
    if (t === 0) assert.deepEqual([...p].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    p.forEach((v, i) => counts[i]![v]!++);
  }
  for (let i = 0; i < n; i++) assert.ok(chiSquare(counts[i]!, new Array<number>(n).fill(1 / n)) < 27.9, `position ${i}`);
  const big = kiln.randperm(100000, { generator: new kiln.Generator(2) });
  assert.equal(big.dtype, 'int64');
  assert.equal(new Set(big.toFlatArray()).size, 100000);
  assert.deepEqual(kiln.randperm(6, { generator: new kiln.Generator(9) }).tolist(), kiln.randperm(6, { generator: new kiln.Generator(9) }).tolist());
  assert.equal(kiln.randperm(4, { dtype: 'int32' }).dtype, 'int32');
  assert.deepEqual(kiln.randperm(0).shape, [0]);
  assertThrowsWith(() => kiln.randperm(-1), 'randperm', 'non-negative integer');
});

test('bernoulli: per-element probabilities and a scalar p, frequencies within chi-square bounds', () => {
  const g = new kiln.Generator(13);
  const p = kiln.tensor([0, 0.1, 0.5, 0.9, 1]).reshape(5, 1).expand(5, 20000);
  const s = kiln.bernoulli(p, { generator: g });
  assert.equal(s.dtype, 'float32');
  assert.deepEqual(s.shape, [5, 20000]);
  const v = s.toFlatArray();
  [0, 0.1, 0.5, 0.9, 1].forEach((q, r) => {
    const ones = v.slice(r * 20000, (r + 1) * 20000).reduce((a, b) => a + b, 0);
    if (q === 0 || q === 1) assert.equal(ones, q * 20000);
    else assert.ok(chiSquare([20000 - ones, ones], [1 - q, q]) < 10.8, `p = ${q}: ${ones} ones`);
  });
  const t = kiln.bernoulli(kiln.zeros([100000], { dtype: 'float64' }), { p: 0.3, generator: g });
  assert.equal(t.dtype, 'float64');
  const ones = t.toFlatArray().reduce((a, b) => a + b, 0);
  assert.ok(chiSquare([100000 - ones, ones], [0.7, 0.3]) < 10.8, `${ones} ones of 10^5 at p = 0.3`);
  assertThrowsWith(() => kiln.bernoulli(kiln.zeros([2]), { p: 1.5 }), 'bernoulli', 'p must be in [0, 1]');
});
