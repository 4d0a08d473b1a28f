/**
 * llm.gateUpSiluAndMul (a SwiGLU MLP's gate and up projections with silu * mul, two weights) on the
 * cpu: the native gated GEMV (1-4 rows, float32 and bfloat16, vector and row tails, both weight
 * orders of KILN_CPU_GEMV_STREAM) and the reference composition it falls back to (5 rows) against
 * a float64 loop of the op's definition (g and u rounded to the dtype, the product rounded once);
 * argument errors named by the op.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { probeToolchain, setCpuPath } from '../src/kernels/cpu/native/index.js';
import { nativeGemvCalls } from '../src/kernels/cpu/native/gemv.js';
import { setOption } from '../src/runtime/config.js';
import { roundToBfloat16 } from '../src/tensor/half.js';
import { rand } from './helpers/make.js';

const skip = probeToolchain().ok ? false : 'native cpu path unavailable';

/** float64 silu(round(x Wg^T)) * round(x Wu^T) over the tensors' own values; round: the dtype's. */
function reference(x: Tensor, wg: Tensor, wu: Tensor, round: (v: number) => number): number[] {
  const xs = x.to('float64').contiguous().toFlatArray();
  const gs = wg.to('float64').contiguous().toFlatArray();
  const us = wu.to('float64').contiguous().toFlatArray();
  const [n, k] = wg.shape as [number, number];
  const out: number[] = [];
  for (let i = 0; i < xs.length / k; i++) {
    for (let j = 0; j < n; j++) {
      let g = 0;
      let u = 0;
      for (let p = 0; p < k; p++) {
        g += xs[i * k + p]! * gs[j * k + p]!;
        u += xs[i * k + p]! * us[j * k + p]!;
      }
      g = round(g);
      u = round(u);
      out.push((g / (1 + Math.exp(-g))) * u);
    }
  }
  return out;
}

test('llm.gateUpSiluAndMul on the cpu: native gated GEMV for 1-4 rows (both weight orders; 2 and 3 threads), reference for 5, vs float64', { skip }, async () => {
  const { setNativeThreads } = await import('../src/kernels/cpu/native/threads.js');
  setCpuPath('native');
  try {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const round = dtype === 'bfloat16' ? roundToBfloat16 : Math.fround;
      for (const [m, n, k] of [[1, 37, 70], [2, 64, 1024], [1, 300, 1024], [3, 130, 129], [4, 9, 33], [5, 12, 40]] as const) {
        for (const stream of [false, true]) {
          setOption('KILN_CPU_GEMV_STREAM', stream);
          setNativeThreads(stream ? 3 : 2);
          try {
            const x = rand([m, k], m + k, 'contiguous', dtype, -1, 1);
            const wg = rand([n, k], n + 2 * k, 'contiguous', dtype, -1, 1);
            const wu = rand([n, k], 3 * n + k, 'contiguous', dtype, -1, 1);
            const before = nativeGemvCalls();
            const y = kiln.llm.gateUpSiluAndMul(x, wg, wu);
            const what = `${dtype} [${m}, ${k}] x [${n}, ${k}]^T${stream ? ' (stream order, 3 threads)' : ' (2 threads)'}`;
            assert.equal(nativeGemvCalls() - before, m <= 4 ? 1 : 0, `${what}: ${m <= 4 ? 'one gated GEMV' : 'the reference (its linears: the GEMM at 5 rows)'}`);
            assert.deepEqual(y.shape, [m, n]);
            assert.equal(y.dtype, dtype);
            const want = reference(x, wg, wu, round);
            const got = y.to('float32').toFlatArray();
            for (let i = 0; i < want.length; i++) {
              // float32 accumulation over k products (|x|, |w| <= 1), which the rounding of g and u
              // can move by a unit of the dtype; bfloat16 adds the output's rounding.
              const unit = dtype === 'bfloat16' ? 2 ** -7 : 2 ** -22;
              const tol = unit * (Math.abs(want[i]!) + 1) * 2 + 2e-6 * k;
              assert.ok(Math.abs(got[i]! - want[i]!) <= tol, `${what}[${i}]: got ${got[i]}, expected ${want[i]} (tol ${tol})`);
            }
          } finally {
            setOption('KILN_CPU_GEMV_STREAM', undefined);
            setNativeThreads(undefined);
          }
        }
      }
    }
  } finally {
    setCpuPath(undefined);
  }
});

test('llm.gateUpSiluAndMul rejects bad arguments naming the op', () => {
  const x = rand([2, 8], 1);
  const w = rand([6, 8], 2);
  assert.throws(() => kiln.llm.gateUpSiluAndMul(x, rand([6, 7], 3), w), /llm\.gateUpSiluAndMul: argument 'gateWeight' must be \[I, 8\]/);
  assert.throws(() => kiln.llm.gateUpSiluAndMul(x, w, rand([5, 8], 4)), /llm\.gateUpSiluAndMul: argument 'upWeight' must be \[6, 8\]/);
  assert.throws(() => kiln.llm.gateUpSiluAndMul(x, w, rand([6, 8], 5, 'contiguous', 'bfloat16')), /llm\.gateUpSiluAndMul/);
});
