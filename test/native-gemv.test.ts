/**
 * The native GEMV (kernels/cpu/native/gemv.ts) that runs decode-sized linears: float32 and
 * bfloat16 weights, 1-4 rows, with and without bias, sizes that leave vector and 4-row tails, a
 * strided single row, a weight view with a row stride; against float64 references of the same
 * (bfloat16-exact) inputs. Each case asserts the GEMV ran; 5 rows fall back to the GEMM. Skips
 * where no C compiler works.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativeGemvCalls } from '../src/kernels/cpu/native/gemv.js';
import { randomValues } from './helpers/make.js';

const probe = probeToolchain();
const skip = probe.ok ? false : `native cpu path unavailable: ${probe.reason}`;

/** float64 x W^T + b over the tensors' own (already rounded) values. */
function reference(x: Tensor, w: Tensor, b: Tensor | null): number[] {
  const xs = x.to('float32').contiguous().toFlatArray();
  const ws = w.to('float32').contiguous().toFlatArray();
  const bs = b ? b.to('float32').toFlatArray() : null;
  const [n, k] = w.shape as [number, number];
  const m = xs.length / k;
  const out: number[] = [];
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = bs ? bs[j]! : 0;
      for (let p = 0; p < k; p++) s += xs[i * k + p]! * ws[j * k + p]!;
      out.push(s);
    }
  }
  return out;
}

function check(x: Tensor, w: Tensor, b: Tensor | null, what: string): void {
  setCpuPath('native');
  try {
    const before = nativeGemvCalls();
    const y = kiln.nn.functional.linear(x, w, b ?? undefined);
    assert.equal(nativeGemvCalls() - before, 1, `${what}: the GEMV ran`);
    assert.equal(y.dtype, w.dtype);
    assert.deepEqual(y.shape, [...x.shape.slice(0, -1), w.shape[0]]);
    const got = y.to('float32').toFlatArray();
    const want = reference(x, w, b);
    const k = w.shape[1]!;
    for (let i = 0; i < want.length; i++) {
      // float32 accumulation over k terms of size <= 4 (|x|, |w| <= 2); bfloat16 adds one rounding of the output.
      const tol = w.dtype === 'bfloat16' ? 2 ** -8 * Math.abs(want[i]!) + 1e-5 * k : 2e-6 * k;
      assert.ok(Math.abs(got[i]! - want[i]!) <= tol, `${what}[${i}]: got ${got[i]}, expected ${want[i]} (tol ${tol})`);
    }
  } finally {
    setCpuPath(undefined);
  }
}

const t = (n: number, shape: number[], dtype: 'float32' | 'bfloat16', seed: number): Tensor => kiln.tensor(randomValues(n, seed), { dtype }).view(shape);

test('GEMV linear matches float64 for float32 and bfloat16 weights, 1-4 rows, tails, bias', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    for (const [m, n, k] of [[1, 37, 70], [1, 256, 1024], [2, 9, 33], [3, 130, 64], [4, 1001, 300], [1, 5, 3]] as const) {
      for (const withBias of [false, true]) {
        const x = t(m * k, [m, k], dtype, m + n + k);
        const w = t(n * k, [n, k], dtype, 7 * n + k);
        const b = withBias ? t(n, [n], dtype, n) : null;
        check(x, w, b, `${dtype} [${m}, ${k}] x [${n}, ${k}]^T${withBias ? ' + b' : ''}`);
      }
    }
  }
});

test('GEMV linear: 3-d input, a strided single row, a weight with a padded row stride', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    check(t(2 * 48, [1, 2, 48], dtype, 1), t(20 * 48, [20, 48], dtype, 2), null, `${dtype} 3-d`);
    // Row 1, columns 8..47 of a [3, 64] matrix: a single row read in place through its offset.
    const base = t(3 * 64, [3, 64], dtype, 3);
    check(kiln.narrow(base, 1, 8, 40).narrow(0, 1, 1), t(11 * 40, [11, 40], dtype, 4), null, `${dtype} sliced row`);
    const wide = t(17 * 80, [17, 80], dtype, 5);
    check(t(64, [1, 64], dtype, 6), kiln.narrow(wide, 1, 16, 64), t(17, [17], dtype, 7), `${dtype} weight row stride 80`);
  }
});

test('five rows or a transposed weight skip the GEMV', { skip }, () => {
  setCpuPath('native');
  try {
    const before = nativeGemvCalls();
    kiln.nn.functional.linear(t(5 * 32, [5, 32], 'float32', 1), t(8 * 32, [8, 32], 'float32', 2));
    kiln.nn.functional.linear(t(32, [1, 32], 'float32', 1), t(8 * 32, [32, 8], 'float32', 2).t());
    assert.equal(nativeGemvCalls() - before, 0);
  } finally {
    setCpuPath(undefined);
  }
});
