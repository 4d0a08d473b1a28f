/**
 * The CPU GEMM engine shared by matmul, linear, addmm, bmm and convolution (im2col / implicit GEMM):
 *
 *   C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]
 *
 * Each operand is addressed as data[off + row * rowStride + col * colStride], so transposed and
 * strided operands need no copy. beta = 0 overwrites C (NaNs in C are not propagated).
 *
 * Owned by the linalg group, which tunes it; the signature is the contract other kernels use.
 */
import type { NumArray } from './numeric.js';

export interface GemmOperand {
  data: NumArray;
  offset: number;
  rowStride: number;
  colStride: number;
}

export function gemm(m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand): void {
  const ad = a.data;
  const bd = b.data;
  const cd = c.data;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      let pa = a.offset + i * a.rowStride;
      let pb = b.offset + j * b.colStride;
      for (let p = 0; p < k; p++, pa += a.colStride, pb += b.rowStride) acc += ad[pa]! * bd[pb]!;
      const pc = c.offset + i * c.rowStride + j * c.colStride;
      cd[pc] = beta === 0 ? alpha * acc : alpha * acc + beta * cd[pc]!;
    }
  }
}
