/** Numeric assertions against float64 references. */
import assert from 'node:assert/strict';
import type { Tensor } from '../../src/tensor/tensor.js';

export interface Tolerance {
  atol?: number;
  rtol?: number;
}

/** Default tolerances per dtype: float32 kernels vs float64 references. */
export function tolFor(dtype: string): Required<Tolerance> {
  switch (dtype) {
    case 'float16':
      return { atol: 2e-3, rtol: 2e-3 };
    case 'bfloat16':
      return { atol: 1.6e-2, rtol: 1.6e-2 };
    case 'float32':
      return { atol: 1e-5, rtol: 1e-5 };
    case 'float64':
      return { atol: 1e-12, rtol: 1e-12 };
    default:
      return { atol: 0, rtol: 0 };
  }
}

/** Asserts shape and elementwise closeness (NaN matches NaN, infinities must match exactly). */
export function assertClose(actual: Tensor, expected: ArrayLike<number>, expectedShape: readonly number[], tol: Tolerance = {}): void {
  assert.deepEqual([...actual.shape], [...expectedShape], `shape: got [${actual.shape}] expected [${expectedShape}]`);
  const d = tolFor(actual.dtype);
  const atol = tol.atol ?? d.atol;
  const rtol = tol.rtol ?? d.rtol;
  const got = actual.toFlatArray();
  assert.equal(got.length, expected.length, 'element count');
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!;
    const e = expected[i]!;
    if (Number.isNaN(e)) {
      assert.ok(Number.isNaN(g), `element ${i}: expected NaN, got ${g}`);
      continue;
    }
    if (!Number.isFinite(e)) {
      assert.equal(g, e, `element ${i}: expected ${e}, got ${g}`);
      continue;
    }
    const err = Math.abs(g - e);
    if (err > atol + rtol * Math.abs(e)) {
      assert.fail(`element ${i}: got ${g}, expected ${e} (|diff| ${err} > atol ${atol} + rtol ${rtol}*|e|)`);
    }
  }
}

/** Asserts that `fn` throws an error whose message contains every fragment. */
export function assertThrowsWith(fn: () => unknown, ...fragments: string[]): void {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  assert.ok(thrown instanceof Error, `expected an error containing ${fragments.map((f) => `'${f}'`).join(', ')}`);
  for (const f of fragments) assert.ok(thrown.message.includes(f), `error message '${thrown.message}' lacks '${f}'`);
}

/** max |got - ref| / max |ref|: an error relative to the output's scale (for long dot products). */
export function maxRelError(got: ArrayLike<number>, ref: ArrayLike<number>): number {
  let err = 0;
  let mag = 0;
  for (let i = 0; i < ref.length; i++) {
    err = Math.max(err, Math.abs(got[i]! - ref[i]!));
    mag = Math.max(mag, Math.abs(ref[i]!));
  }
  return err / mag;
}
