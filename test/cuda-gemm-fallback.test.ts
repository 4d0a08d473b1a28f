/**
 * The cuda GEMM of last resort (src/kernels/cuda/gemm-fallback.ts): run directly on transposed,
 * batched and biased operands against a float64 reference written here, and the float64 batched
 * product that cuBLASLt refused on the H200 (a [1x4] @ [4x6] batch-4 bmm of llm.pagedAttention's
 * reference) computed right through the public matmul, whichever path runs it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { rowMajorOperand } from '../src/runtime/cuda/cublaslt.js';
import { ptrOf, streamOf } from '../src/kernels/cuda/device.js';
import { runFallbackGemm } from '../src/kernels/cuda/gemm-fallback.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();

function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  });
}

/** out[z, i, j] = alpha * sum_x A(z, i, x) B(z, x, j) + bias[j], A and B read through accessors. */
function reference(B: number, M: number, N: number, K: number, a: (z: number, i: number, x: number) => number, b: (z: number, x: number, j: number) => number, bias: number[] | null, alpha: number): number[] {
  const out: number[] = [];
  for (let z = 0; z < B; z++) {
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let acc = 0;
        for (let x = 0; x < K; x++) acc += a(z, i, x) * b(z, x, j);
        out.push(alpha * acc + (bias ? bias[j]! : 0));
      }
    }
  }
  return out;
}

for (const dtype of ['float64', 'float32'] as const) {
  test(`gemm fallback (${dtype}): transposed A, row-major B, batched, bias and alpha against float64`, { skip }, () => {
    const [Bt, M, N, K] = [3, 5, 7, 9];
    const av = values(Bt * K * M, 11); // stored [B, K, M]: A = transpose of the last two dims
    const bv = values(Bt * K * N, 12); // stored [B, K, N]
    const biasv = values(N, 13);
    const a = kiln.tensor(av, { dtype }).reshape([Bt, K, M]).to('cuda');
    const b = kiln.tensor(bv, { dtype }).reshape([Bt, K, N]).to('cuda');
    const bias = kiln.tensor(biasv, { dtype }).to('cuda');
    const out = kiln.zeros([Bt, M, N], { dtype, device: 'cuda' });
    // A[z, i, x] = stored[z, x, i]: element strides (row 1, col M) — a transposed view.
    const aOp = rowMajorOperand(ptrOf(a), M, K, 1, M, K * M)!;
    const bOp = rowMajorOperand(ptrOf(b), K, N, N, 1, K * N)!;
    assert.equal(aOp.trans, true, 'the A operand is read transposed');
    runFallbackGemm(0, streamOf(out), { dtype, m: M, n: N, k: K, batch: Bt, a: aOp, b: bOp, d: ptrOf(out), ldd: N, dBatchStride: M * N, bias: ptrOf(bias), alpha: 0.5, beta: 0 });
    const want = reference(Bt, M, N, K, (z, i, x) => av[z * K * M + x * M + i]!, (z, x, j) => bv[z * K * N + x * N + j]!, biasv, 0.5);
    const got = out.toFlatArray() as number[];
    const tol = dtype === 'float64' ? 1e-13 : 1e-5;
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= tol * (1 + Math.abs(want[i]!)), `element ${i}: ${v} vs ${want[i]}`));
  });
}

test('float64 batched [1x4] @ [4x6] (batch 4), the product cuBLASLt refused on the H200, equals float64', { skip }, () => {
  const av = values(4 * 4, 21);
  const bv = values(4 * 4 * 6, 22);
  const a = kiln.tensor(av, { dtype: 'float64' }).reshape([4, 1, 4]).to('cuda');
  const b = kiln.tensor(bv, { dtype: 'float64' }).reshape([4, 6, 4]).to('cuda').transpose(1, 2);
  const got = kiln.matmul(a, b).toFlatArray() as number[];
  const want = reference(4, 1, 6, 4, (z, _i, x) => av[z * 4 + x]!, (z, x, j) => bv[z * 24 + j * 4 + x]!, null, 1);
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-13, `element ${i}: ${v} vs ${want[i]}`));
});

test('float64 scaledDotProductAttention on cuda keeps double precision (its scores were float32)', { skip }, () => {
  const [B, L, S, E] = [2, 3, 5, 4];
  const qv = values(B * L * E, 31);
  const kv = values(B * S * E, 32);
  const vv = values(B * S * E, 33);
  const t = (v: number[], shape: number[]): kiln.Tensor => kiln.tensor(v, { dtype: 'float64' }).reshape(shape).to('cuda');
  const got = kiln.nn.functional.scaledDotProductAttention(t(qv, [B, L, E]), t(kv, [B, S, E]), t(vv, [B, S, E])).toFlatArray() as number[];
  const want: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < L; i++) {
      const sc = Array.from({ length: S }, (_, j) => {
        let d = 0;
        for (let x = 0; x < E; x++) d += qv[(b * L + i) * E + x]! * kv[(b * S + j) * E + x]!;
        return d / Math.sqrt(E);
      });
      const mx = Math.max(...sc);
      const w = sc.map((s) => Math.exp(s - mx));
      const z = w.reduce((a, c) => a + c, 0);
      for (let x = 0; x < E; x++) want.push(w.reduce((a, c, j) => a + c * vv[(b * S + j) * E + x]!, 0) / z);
    }
  }
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-12, `element ${i}: ${v} vs ${want[i]} (float32 scores would be ~1e-7 off)`));
});

test('integer matmul on cuda (int32, int64, uint8) is exact and wraps like PyTorch on the cpu, batched and transposed', { skip }, () => {
  const [B, M, K, N] = [2, 3, 5, 4];
  const ints = (n: number, seed: number, lo: number, hi: number): number[] => values(n, seed).map((v) => Math.floor(lo + (v + 0.5) * (hi - lo)));
  for (const [dtype, lo, hi] of [['int32', -50000, 50000], ['int64', -1e6, 1e6], ['uint8', 0, 256]] as const) {
    const av = ints(B * M * K, 41, lo, hi);
    const bv = ints(B * N * K, 42, lo, hi); // stored [B, N, K]: the right operand is its transpose
    const a = kiln.tensor(av, { dtype }).reshape([B, M, K]).to('cuda');
    const b = kiln.tensor(bv, { dtype }).reshape([B, N, K]).to('cuda').transpose(1, 2);
    const got = kiln.matmul(a, b).toFlatArray().map(Number);
    const wrap = (x: bigint): number => {
      if (dtype === 'uint8') return Number(BigInt.asUintN(8, x));
      if (dtype === 'int32') return Number(BigInt.asIntN(32, x));
      return Number(BigInt.asIntN(64, x));
    };
    const want: number[] = [];
    for (let z = 0; z < B; z++) for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) {
      let acc = 0n;
      for (let x = 0; x < K; x++) acc += BigInt(av[(z * M + i) * K + x]!) * BigInt(bv[(z * N + j) * K + x]!);
      want.push(wrap(acc));
    }
    assert.deepEqual(got, want, dtype);
  }
});
