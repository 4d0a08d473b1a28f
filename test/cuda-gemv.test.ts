/**
 * The decode GEMV (src/kernels/cuda/gemv.ts): bfloat16 `linear` with at most 8 rows runs on Kiln's
 * weight-streaming kernel (its run counter moves) and equals a float64 product of the same
 * bfloat16-rounded inputs within one bfloat16 rounding of the output, for every warps-per-column
 * split (small and large N), K tails below one 256-element step, strided rows, a bias, and
 * through the compiled path; a ninth row goes back to cuBLASLt.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { gemvStats } from '../src/kernels/cuda/gemv.js';
import { setOption } from '../src/runtime/config.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
// The kernel takes up to 8 rows; by default only 1 is routed to it (the measured win): test all.
setOption('KILN_GEMV_MAX_ROWS', 8);

function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32 - 0.5) * 2;
  });
}

/** y[m, n] = sum_k x[m, k] w[n, k] (+ b[n]) in float64 over the given (already rounded) values. */
function reference(x: number[], w: number[], b: number[] | null, M: number, N: number, K: number): number[] {
  const y: number[] = [];
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += x[m * K + k]! * w[n * K + k]!;
      y.push(acc + (b ? b[n]! : 0));
    }
  }
  return y;
}

function check(label: string, got: number[], want: number[], K: number): void {
  // One bfloat16 rounding of the output (2^-8 relative) plus float32 accumulation over K terms.
  got.forEach((g, i) => {
    const tol = Math.abs(want[i]!) * 2 ** -8 + K * 2 ** -22;
    assert.ok(Math.abs(g - want[i]!) <= tol, `${label} element ${i}: got ${g}, want ${want[i]} (tol ${tol})`);
  });
}

const bf = (v: number[]): number[] => kiln.tensor(v, { dtype: 'bfloat16' }).toFlatArray() as number[];

for (const [M, N, K] of [
  [1, 4096, 1024], // Qwen3 q|k|v shape: one warp per column
  [1, 1024, 3072], // down projection: few columns, K split over warps
  [3, 1000, 72], // K below one step, odd N
  [8, 40, 520], // tiny N: eight warps per column
  [5, 777, 1032],
] as const) {
  test(`gemv bf16 linear [${M}x${K}] x [${N}x${K}]^T equals float64 (with and without bias)`, { skip }, () => {
    const xv = bf(values(M * K, 1 + M));
    const wv = bf(values(N * K, 2 + N));
    const bv = bf(values(N, 3));
    const x = kiln.tensor(xv, { dtype: 'bfloat16' }).reshape([M, K]).to('cuda');
    const w = kiln.tensor(wv, { dtype: 'bfloat16' }).reshape([N, K]).to('cuda');
    const b = kiln.tensor(bv, { dtype: 'bfloat16' }).to('cuda');
    for (const withBias of [false, true]) {
      const before = gemvStats.runs;
      const y = kiln.nn.functional.linear(x, w, withBias ? b : null);
      assert.equal(gemvStats.runs, before + 1, 'ran on the gemv kernel');
      check(`bias ${withBias}`, y.toFlatArray() as number[], reference(xv, wv, withBias ? bv : null, M, N, K), K);
    }
  });
}

test('gemv: x rows with a stride (a narrowed activation) and a compiled linear; 9 rows go to cuBLASLt', { skip }, () => {
  const [M, N, K] = [2, 300, 256];
  const wide = bf(values(M * 2 * K, 9));
  const wv = bf(values(N * K, 10));
  const xw = kiln.tensor(wide, { dtype: 'bfloat16' }).reshape([M, 2 * K]).to('cuda');
  const x = kiln.narrow(xw, 1, K, K); // rows of K at a stride of 2K, starting 512 bytes in
  const w = kiln.tensor(wv, { dtype: 'bfloat16' }).reshape([N, K]).to('cuda');
  const xs = Array.from({ length: M * K }, (_, i) => wide[Math.floor(i / K) * 2 * K + K + (i % K)]!);
  const before = gemvStats.runs;
  check('strided', kiln.nn.functional.linear(x, w, null).toFlatArray() as number[], reference(xs, wv, null, M, N, K), K);
  assert.equal(gemvStats.runs, before + 1);
  const f = kiln.compile((a: kiln.Tensor) => kiln.nn.functional.linear(a, w, null), { capturedTensors: 'allow' });
  check('compiled', f(x).toFlatArray() as number[], reference(xs, wv, null, M, N, K), K);
  const x9 = kiln.tensor(bf(values(9 * K, 11)), { dtype: 'bfloat16' }).reshape([9, K]).to('cuda');
  const runs = gemvStats.runs;
  check('nine rows', kiln.nn.functional.linear(x9, w, null).toFlatArray() as number[], reference(x9.toFlatArray() as number[], wv, null, 9, N, K), K);
  assert.equal(gemvStats.runs, runs, 'nine rows run on cuBLASLt');
});
