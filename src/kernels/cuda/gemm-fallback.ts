/**
 * The GEMM of last resort on cuda: a plain one-thread-per-output kernel, for the integer products
 * cuBLASLt has no kernel for (int32, int64, uint8: PyTorch computes them on the cpu, the fuzzer's
 * reference) and for float32/float64 problems cuBLASLt refuses (CUBLAS_STATUS_NOT_SUPPORTED, or a heuristic that
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
import type { GemmProblem } from '../../runtime/cuda/cublaslt.js';
import { storageType } from './codegen/ctypes.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';

/** What the plain kernel computes: cuBLASLt's refusals (float32, float64) and the integer products cuBLASLt has no kernel for. */
export type FallbackDtype = 'float32' | 'float64' | 'int32' | 'int64' | 'uint8';

/** The problem as cuBLASLt would get it (cublaslt.ts), in one of the fallback's dtypes; C is D, no mixed output. */
export type FallbackGemm = Omit<GemmProblem, 'dtype' | 'c' | 'outDtype'> & { dtype: FallbackDtype };

const NAME = 'kiln_gemm_fallback';
const PARAMS: readonly ParamType[] = [
  'ptr', 'ptr', 'ptr', 'ptr', // a, b, d, bias (0: none)
  'i64', 'i64', 'i64', 'i64', // m, n, k, batch
  'i64', 'i32', 'i64', // a: ld, trans, batch stride
  'i64', 'i32', 'i64', // b: ld, trans, batch stride
  'i64', 'i64', // d: ldd, batch stride
  'f64', 'f64', // alpha, beta
];

function source(dtype: FallbackDtype): string {
  const t = storageType(dtype);
  // Integers accumulate exactly in 64 bits and wrap to their width at the store, as PyTorch's
  // integer matmul on the cpu does; floats accumulate in double.
  const acc = dtype.startsWith('float') ? 'double' : 'long long';
  return `extern "C" __global__ void ${NAME}_${dtype}(const ${t}* a, const ${t}* b, ${t}* d, const ${t}* bias,
    long long m, long long n, long long k, long long batch,
    long long lda, int ta, long long sa, long long ldb, int tb, long long sb,
    long long ldd, long long sd, double alpha, double beta) {
  long long total = m * n * batch;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long col = i % n, row = (i / n) % m, z = i / (m * n);
    const ${t}* A = a + z * sa;
    const ${t}* B = b + z * sb;
    ${acc} acc = 0;
    for (long long x = 0; x < k; x++) {
      ${acc} av = (${acc})A[ta ? x * lda + row : row * lda + x];
      ${acc} bv = (${acc})B[tb ? col * ldb + x : x * ldb + col];
      acc += av * bv;
    }
    ${t}* out = d + z * sd + row * ldd + col;
    ${acc} v = (${acc})alpha * acc;
    if (beta != 0.0) v += (${acc})beta * (${acc})*out;
    if (bias) v += (${acc})bias[col];
    *out = (${t})v;
  }
}
`;
}

/** Runs the problem; the caller has already decided cuBLASLt cannot. */
export function runFallbackGemm(index: number, stream: CudaStream, p: FallbackGemm): void {
  const kern = kernelFromSource(index, source(p.dtype), `${NAME}_${p.dtype}`, PARAMS);
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
