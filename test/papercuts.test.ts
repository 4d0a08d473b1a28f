/** Issue #19 item 7: typed item, sdpa options object, one rmsNorm signature for kiln and kiln.llm. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { assertClose, assertThrowsWith } from './helpers/assert.js';
import { randomValues } from './helpers/make.js';
import { refAttention } from './helpers/nn-ref.js';

const F64 = { dtype: 'float64' as const };

test('itemNumber / itemBool are typed and check the dtype; item keeps its union', () => {
  const n: number = kiln.tensor([2.5]).itemNumber();
  assert.equal(n, 2.5);
  const b: boolean = kiln.tensor([true]).itemBool();
  assert.equal(b, true);
  assert.equal(kiln.tensor([false]).item(), false);
  assertThrowsWith(() => kiln.tensor([true]).itemNumber(), 'itemNumber', 'bool', 'itemBool');
  assertThrowsWith(() => kiln.tensor([1]).itemBool(), 'itemBool', 'float32');
  assertThrowsWith(() => kiln.tensor([1, 2]).itemNumber(), 'item', '[2]');
});

test('scaledDotProductAttention takes an options object and gives the positional form\'s result', () => {
  const q = { values: randomValues(2 * 3 * 4, 1), shape: [2, 3, 4] };
  const k = { values: randomValues(2 * 5 * 4, 2), shape: [2, 5, 4] };
  const v = { values: randomValues(2 * 5 * 3, 3), shape: [2, 5, 3] };
  const maskV = randomValues(3 * 5, 4).map((x) => x > -1);
  const t = (a: { values: readonly number[]; shape: readonly number[] }): kiln.Tensor => kiln.tensor([...a.values], F64).reshape([...a.shape]);
  const mask = kiln.tensor(maskV).reshape([3, 5]);
  const viaOptions = kiln.scaledDotProductAttention(t(q), t(k), t(v), { attnMask: mask, scale: 0.3 });
  const positional = kiln.scaledDotProductAttention(t(q), t(k), t(v), mask, 0, false, 0.3);
  assert.deepEqual(viaOptions.toFlatArray(), positional.toFlatArray());
  const ref = refAttention(q, k, v, { mask: { values: maskV.map(Number), shape: [3, 5], bool: true }, scale: 0.3 });
  assertClose(viaOptions, ref.values, ref.shape, { atol: 1e-12, rtol: 1e-12 });
  const causal = refAttention(q, k, v, { causal: true });
  assertClose(kiln.nn.functional.scaledDotProductAttention(t(q), t(k), t(v), { isCausal: true }), causal.values, causal.shape, { atol: 1e-12, rtol: 1e-12 });
  assert.throws(() => kiln.scaledDotProductAttention(t(q), t(k), t(v), { isCasual: true } as never), /scaledDotProductAttention: unknown option 'isCasual' \(did you mean 'isCausal'\?\)/);
});

/** x * rsqrt(mean(x^2 over the last `n` elements) + eps) * w, in float64. */
function refRms(x: readonly number[], n: number, w: readonly number[] | null, eps: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < x.length / n; r++) {
    const row = x.slice(r * n, (r + 1) * n);
    const inv = 1 / Math.sqrt(row.reduce((s, v) => s + v * v, 0) / n + eps);
    row.forEach((v, i) => out.push(v * inv * (w ? w[i]! : 1)));
  }
  return out;
}

test('kiln.rmsNorm and kiln.llm.rmsNorm accept the same three argument forms', () => {
  const xv = randomValues(3 * 6, 5);
  const wv = randomValues(6, 6, 0.5, 1.5);
  const x = kiln.tensor(xv, F64).reshape([3, 6]);
  const w = kiln.tensor(wv, F64);
  const ref = refRms(xv, 6, wv, 1e-5);
  for (const [name, fn] of [['kiln.rmsNorm', kiln.rmsNorm], ['kiln.llm.rmsNorm', kiln.llm.rmsNorm]] as const) {
    const f = fn as (input: kiln.Tensor, ...args: unknown[]) => kiln.Tensor;
    assertClose(f(x, [6], w, 1e-5), ref, [3, 6], { atol: 1e-12, rtol: 1e-12 });
    assertClose(f(x, 6, w, 1e-5), ref, [3, 6], { atol: 1e-12, rtol: 1e-12 });
    assertClose(f(x, w, 1e-5), ref, [3, 6], { atol: 1e-12, rtol: 1e-12 });
    assertClose(f(x, { weight: w, eps: 1e-5 }), ref, [3, 6], { atol: 1e-12, rtol: 1e-12 });
    assertClose(f(x, { normalizedShape: [6], weight: w, eps: 1e-5 }), ref, [3, 6], { atol: 1e-12, rtol: 1e-12 });
    assert.throws(() => f(x, { wieght: w }), new RegExp(`${name.replace('kiln.', '').replace('.', '\\.')}: unknown option 'wieght'`));
  }
  // The defaults stay each library's own: vLLM's 1e-6 here; kiln.rmsNorm's finfo eps is tested in linalg-norm.test.ts.
  assertClose(kiln.llm.rmsNorm(x, w), refRms(xv, 6, wv, 1e-6), [3, 6], { atol: 1e-12, rtol: 1e-12 });
  // What only one of them can do is an error naming the other.
  assertThrowsWith(() => kiln.llm.rmsNorm(x, { normalizedShape: [6] } as never), 'llm.rmsNorm', "'weight' is required", 'kiln.rmsNorm');
  assertThrowsWith(() => kiln.llm.rmsNorm(x.reshape([1, 18]), [3, 6], kiln.ones([3, 6], F64)), 'llm.rmsNorm', 'last dim only', '[3, 6]');
  assertThrowsWith(() => kiln.rmsNorm(x, {}), 'rmsNorm', "'normalizedShape'");
  assertClose(kiln.rmsNorm(x.reshape([1, 3, 6]), { normalizedShape: [3, 6], eps: 1e-5 }), refRms(xv, 18, null, 1e-5), [1, 3, 6], { atol: 1e-12, rtol: 1e-12 });
});
