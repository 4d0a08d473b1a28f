/**
 * The GEMM of last resort on cuda: a plain one-thread-per-output kernel for float32 and float64,
 * used only when cuBLASLt refuses a problem (CUBLAS_STATUS_NOT_SUPPORTED, or a heuristic that
 * offers no algorithm). Seen on the H200 for small batched float64 problems (a [1x4] @ [4x6]
 * batch-4 product of llm.pagedAttention's float64 reference): cuBLASLt's float64 kernels do not
 * cover every operand layout and alignment the strided-batch API lets us describe. A refusal
 * used to reach the user as a raw cublasStatus; correctness beats speed on this path, so it is
 * simple rather than tiled, and accumulates in double for both dtypes.
 *
 * Operands come as cuBLASLt sees them (cublaslt.ts's `rowMajorOperand`): element (r, c) of
 * Kiln's row-major [R, C] matrix is at `ptr + batch * batchStride + (trans ? c * ld + r : r * ld + c)`.
 */
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import type { LtOperand } from '../../runtime/cuda/cublaslt.js';
import type { DevPtr } from '../../runtime/cuda/ffi.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';

export interface FallbackGemm {
  dtype: 'float32' | 'float64';
  m: number;
  n: number;
  k: number;
  batch: number;
  a: LtOperand;
  b: LtOperand;
  d: DevPtr;
  ldd: number;
  dBatchStride: number;
  bias?: DevPtr;
  alpha: number;
  beta: number;
}

const NAME = 'kiln_gemm_fallback';
const PARAMS: readonly ParamType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', // a, b, d, bias (0: none)
  'i64', 'i64', 'i64', 'i64', // m, n, k, batch
  'i64', 'i32', 'i64', // a: ld, trans, batch stride
  'i64', 'i32', 'i64', // b: ld, trans, batch stride
  'i64', 'i64', // d: ldd, batch stride
  'f64', 'f64', // alpha, beta
];

function source(t: 'float' | 'double'): string {
  return `extern "C" __global__ void ${NAME}(const ${t}* a, const ${t}* b, ${t}* d, const ${t}* bias,
    long long m, long long n, long long k, long long batch,
    long long lda, int ta, long long sa, long long ldb, int tb, long long sb,
    long long ldd, long long sd, double alpha, double beta) {
  long long total = m * n * batch;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long col = i % n, row = (i / n) % m, z = i / (m * n);
    const ${t}* A = a + z * sa;
    const ${t}* B = b + z * sb;
    double acc = 0.0;
    for (long long x = 0; x < k; x++) {
      double av = (double)A[ta ? x * lda + row : row * lda + x];
      double bv = (double)B[tb ? col * ldb + x : x * ldb + col];
      acc += av * bv;
    }
    ${t}* out = d + z * sd + row * ldd + col;
    double v = alpha * acc;
    if (beta != 0.0) v += beta * (double)*out;
    if (bias) v += (double)bias[col];
    *out = (${t})v;
  }
}
`;
}

/** Runs the problem; the caller has already decided cuBLASLt cannot. */
export function runFallbackGemm(index: number, stream: CudaStream, p: FallbackGemm): void {
  const kern = kernelFromSource(index, source(p.dtype === 'float64' ? 'double' : 'float'), NAME, PARAMS);
  const total = p.m * p.n * p.batch;
  const block = 256;
  const grid = Math.max(1, Math.min(Math.ceil(total / block), 65535));
  const { a, b } = p;
  launch(kern, [
    a.ptr, b.ptr, p.d, p.bias ?? 0,
    p.m, p.n, p.k, p.batch,
    a.ld, a.trans ? 1 : 0, a.batchStride,
    b.ld, b.trans ? 1 : 0, b.batchStride,
    p.ldd, p.dBatchStride,
    p.alpha, p.beta,
  ], { grid, block }, stream);
}

/** Whether a cuBLASLt error is a refusal of the problem (not a fault): worth the fallback. */
export function isLtRefusal(e: unknown): boolean {
  const m = e instanceof Error ? e.message : '';
  return /cublasLt: (no algorithm for|choosing an algorithm for .* failed with cublasStatus 15)/.test(m);
}
