/**
 * The matrix-product cases the webgpu tests run (mm, bmm, matmul with broadcast batches and 1-D
 * operands, linear, addmm, dot): ragged sizes that leave partial tiles, K = 0, split K, transposed and
 * strided operands read in place, broadcast batches beyond the kernel's three batch dims (the
 * contiguous-copy path). `argsFor` builds a case's arguments on a device in a dtype, or on the CPU
 * in float64 from the same rounded values (the reference).
 */
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';

export const GEMM_TEST_DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16'];

export interface GemmCase {
  readonly label: string;
  readonly op: string;
  /** Arguments from `mk(shape)`, which makes a tensor of fresh values (views are applied after). */
  readonly build: (mk: (shape: number[]) => Tensor) => unknown[];
}

export const GEMM_CASES: readonly GemmCase[] = [
  { label: 'mm 64x64x64', op: 'mm', build: (mk) => [mk([64, 64]), mk([64, 64])] },
  { label: 'mm ragged 37x29 @ 29x53', op: 'mm', build: (mk) => [mk([37, 29]), mk([29, 53])] },
  { label: 'mm 1x300 @ 300x17', op: 'mm', build: (mk) => [mk([1, 300]), mk([300, 17])] },
  { label: 'mm 130x257 @ 257x70 (several tiles and K steps)', op: 'mm', build: (mk) => [mk([130, 257]), mk([257, 70])] },
  { label: 'mm K = 0', op: 'mm', build: (mk) => [mk([3, 0]), mk([0, 4])] },
  { label: 'mm a transposed', op: 'mm', build: (mk) => [mk([29, 37]).t(), mk([29, 53])] },
  { label: 'mm b transposed', op: 'mm', build: (mk) => [mk([37, 29]), mk([53, 29]).t()] },
  { label: 'mm both transposed', op: 'mm', build: (mk) => [mk([29, 37]).t(), mk([53, 29]).t()] },
  { label: 'mm strided (narrowed) operands', op: 'mm', build: (mk) => [mk([40, 61]).narrow(1, 3, 20), mk([20, 90]).narrow(1, 7, 33)] },
  { label: 'bmm 3x33x20 @ 3x20x45', op: 'bmm', build: (mk) => [mk([3, 33, 20]), mk([3, 20, 45])] },
  { label: 'bmm b transposed', op: 'bmm', build: (mk) => [mk([3, 33, 20]), mk([3, 45, 20]).transpose(1, 2)] },
  { label: 'bmm batch-major transposed a', op: 'bmm', build: (mk) => [mk([33, 3, 20]).transpose(0, 1), mk([3, 20, 45])] },
  { label: 'matmul broadcast batch [2,1,17,9] @ [3,9,11]', op: 'matmul', build: (mk) => [mk([2, 1, 17, 9]), mk([3, 9, 11])] },
  { label: 'matmul four broadcast batch dims (copied)', op: 'matmul', build: (mk) => [mk([2, 1, 3, 1, 5, 4]), mk([1, 2, 1, 3, 4, 6])] },
  { label: 'matmul [4,10,24] @ [24,19] (batch folded into rows)', op: 'matmul', build: (mk) => [mk([4, 10, 24]), mk([24, 19])] },
  { label: 'matmul [10,4,24].transpose(0,1) @ [24,19]', op: 'matmul', build: (mk) => [mk([10, 4, 24]).transpose(0, 1), mk([24, 19])] },
  { label: 'matmul [K] @ [K,N]', op: 'matmul', build: (mk) => [mk([31]), mk([31, 12])] },
  { label: 'matmul [M,K] @ [K]', op: 'matmul', build: (mk) => [mk([12, 31]), mk([31])] },
  { label: 'matmul [K] @ [K]', op: 'matmul', build: (mk) => [mk([70]), mk([70])] },
  { label: 'matmul [B,M,K] @ [K]', op: 'matmul', build: (mk) => [mk([2, 5, 31]), mk([31])] },
  { label: 'matmul [K] @ [B,K,N]', op: 'matmul', build: (mk) => [mk([31]), mk([2, 31, 6])] },
  { label: 'linear with bias', op: 'linear', build: (mk) => [mk([2, 5, 40]), mk([23, 40]), mk([23])] },
  { label: 'linear without bias', op: 'linear', build: (mk) => [mk([7, 40]), mk([23, 40]), null] },
  { label: 'linear 1-D input', op: 'linear', build: (mk) => [mk([40]), mk([23, 40]), mk([23])] },
  { label: 'linear 1-D weight with bias', op: 'linear', build: (mk) => [mk([6, 40]), mk([40]), mk([])] },
  { label: 'linear bias broadcast over rows [5,23]', op: 'linear', build: (mk) => [mk([2, 5, 40]), mk([23, 40]), mk([5, 23])] },
  { label: 'linear non-foldable input', op: 'linear', build: (mk) => [mk([5, 2, 40]).transpose(0, 1), mk([23, 40]), mk([23])] },
  { label: 'addmm beta 0.5 alpha 2, self [N]', op: 'addmm', build: (mk) => [mk([21]), mk([13, 17]), mk([17, 21]), 0.5, 2] },
  { label: 'addmm beta 1 alpha 1, self [M,N]', op: 'addmm', build: (mk) => [mk([13, 21]), mk([13, 17]), mk([17, 21]), 1, 1] },
  { label: 'addmm beta 0 ignores self', op: 'addmm', build: (mk) => [mk([13, 21]), mk([13, 17]), mk([17, 21]), 0, 1] },
  { label: 'dot', op: 'dot', build: (mk) => [mk([300]), mk([300])] },
  // Split K (few output tiles, K >= 256: linalg.ts planSplitK): partial sums and the combine's epilogue.
  { label: 'linear split K with bias [2,20,296] @ [30,296]^T', op: 'linear', build: (mk) => [mk([2, 20, 296]), mk([30, 296]), mk([30])] },
  { label: 'addmm split K beta 0.5 alpha 2, K 300', op: 'addmm', build: (mk) => [mk([13, 21]), mk([13, 300]), mk([300, 21]), 0.5, 2] },
  { label: 'mm split K, b transposed, 70x264 @ 264x9', op: 'mm', build: (mk) => [mk([70, 264]), mk([9, 264]).t()] },
];

/** A small deterministic generator (the same values on every run and device). */
function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * The case's arguments: tensors of `dtype` on `device`, or (reference) the same values, rounded
 * to `dtype`, as float64 on the CPU.
 */
export function argsFor(c: GemmCase, dtype: DType, device: string, reference = false): unknown[] {
  let seed = 7;
  for (const ch of c.label) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0;
  const next = lcg(seed);
  const mk = (shape: number[]): Tensor => {
    const n = shape.reduce((p, s) => p * s, 1);
    const vals = Array.from({ length: n }, () => next() * 2 - 1);
    const t = kiln.tensor(vals, { dtype }).reshape(shape);
    return reference ? t.to('float64') : t.to(device);
  };
  return c.build(mk);
}

/** |a| and |b| in place of every tensor argument (for the error bound |A| @ |B|); scalars as |x|. */
export function absArgs(args: readonly unknown[]): unknown[] {
  return args.map((a) => (a !== null && typeof a === 'object' ? (a as Tensor).abs() : typeof a === 'number' ? Math.abs(a) : a));
}
