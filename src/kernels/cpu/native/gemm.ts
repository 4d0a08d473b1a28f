/**
 * The native float32 GEMM (gemm-c.ts) as a JavaScript function. The shared object is built on
 * first use (blocking: an eager matmul needs it now) and then comes from the on-disk cache.
 * Typed arrays are passed to C as `void *` so koffi hands over their memory without a copy;
 * the offsets travel as separate element counts because a storage view starts at element 0.
 */
import { loadLibrary, type NativeFn } from './koffi.js';
import { GEMM_C_SOURCE } from './gemm-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { nativeThreads } from './threads.js';
import { probeToolchain } from './toolchain.js';

/** Epilogue activations understood by the C kernel (the numbers are its `act` codes). */
export const GEMM_ACT = { none: 0, relu: 1, gelu: 2, geluTanh: 3 } as const;
export type GemmAct = keyof typeof GEMM_ACT;

/** A float32 operand: element (r, c) at data[offset + r * rowStride + c * colStride]. */
export interface F32Operand {
  readonly data: Float32Array;
  readonly offset: number;
  readonly rowStride: number;
  readonly colStride: number;
}

/** The bias epilogue input: element j at data[offset + j * stride]. */
export interface F32Vector {
  readonly data: Float32Array;
  readonly offset: number;
  readonly stride: number;
}

export interface SgemmOptions {
  bias?: F32Vector | null;
  act?: GemmAct;
  /** Threads (default nativeThreads()). */
  threads?: number;
}

let fn: NativeFn | undefined;
let calls = 0;

/** How many native sgemm calls this process made (tests use it to see which engine ran). */
export function nativeGemmCalls(): number {
  return calls;
}

/** Loads (building if needed) the GEMM library; throws NativeCompileError / Error with the reason. */
export function loadNativeGemm(): void {
  if (fn) return;
  const probe = probeToolchain();
  if (!probe.ok) throw new Error(`native cpu path: ${probe.reason}`);
  const file = buildSharedObjectSync('kiln_sgemm', GEMM_C_SOURCE, probe.toolchain);
  fn = loadLibrary(file).func(
    'int32_t kiln_sgemm(int64_t m, int64_t n, int64_t k, float alpha, void *A, int64_t ao, int64_t ars, int64_t acs, void *B, int64_t bo, int64_t brs, int64_t bcs, float beta, void *C, int64_t co, int64_t ldc, void *bias, int64_t biaso, int64_t bs, int32_t act, int32_t nthreads)',
  );
}

/**
 * C[m, n] (row-major from c.offset, leading dimension ldc) = act(alpha * A . B + beta * C + bias).
 * beta = 0 overwrites C (NaNs in C are not propagated).
 */
export function sgemm(m: number, n: number, k: number, alpha: number, a: F32Operand, b: F32Operand, beta: number, c: F32Vector & { ldc: number }, options: SgemmOptions = {}): void {
  loadNativeGemm();
  calls++;
  const bias = options.bias ?? null;
  const act = GEMM_ACT[options.act ?? 'none'];
  if (act === undefined) throw new TypeError(`native sgemm: unknown activation '${String(options.act)}' (expected ${Object.keys(GEMM_ACT).join(', ')})`);
  if (c.stride !== 1) throw new RangeError(`native sgemm: C must have unit column stride, got ${c.stride}`);
  const rc = fn!(
    m, n, k, alpha,
    a.data, a.offset, a.rowStride, a.colStride,
    b.data, b.offset, b.rowStride, b.colStride,
    beta, c.data, c.offset, c.ldc,
    bias?.data ?? null, bias?.offset ?? 0, bias?.stride ?? 0, act, options.threads ?? nativeThreads(),
  ) as number;
  if (rc !== 0) throw new Error(`native sgemm [${m}, ${k}] x [${k}, ${n}]: out of memory for packing buffers`);
}
