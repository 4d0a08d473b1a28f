/**
 * Backend switches, in the spirit of torch.backends: process-wide flags read by kernels at each call.
 *
 * `backends.cuda.allowTf32Conv` (default true, like PyTorch's torch.backends.cudnn.allow_tf32):
 * float32 convolutions on cuda run on TF32 tensor cores (10-bit mantissa products, float32
 * accumulation; relative error around 1e-3). Set it to false for exact float32 (FMA) convolutions.
 * The environment variable KILN_CUDA_CONV_TF32=0 sets the default to false. A compiled program
 * replaying a CUDA graph keeps the kernels it captured: set the flag before the first call.
 *
 * `backends.cuda.matmul.allowTf32` (default false, like PyTorch's torch.backends.cuda.matmul.allow_tf32
 * and float32_matmul_precision 'highest'): float32 GEMMs on cuda (matmul, mm, bmm, linear, addmm
 * through cuBLASLt) may run on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to a
 * 10-bit mantissa, float32 accumulation; relative error around 1e-3). Off, they are exact float32
 * (FMA). `setFloat32MatmulPrecision('high' | 'medium')` turns it on and 'highest' off, as
 * torch.set_float32_matmul_precision does ('medium' also means TF32 here: cuBLASLt's bf16-based
 * fp32 mode is not used). KILN_CUDA_MATMUL_TF32=1 sets the default to true. Read at each GEMM
 * call and part of the GEMM autotune key and the compiled-program cache key; a CUDA graph replay
 * keeps the GEMMs it captured, so set it before a compiled function's first call.
 */
import { getOption, setOption } from './config.js';

export interface CudaBackendFlags {
  /** float32 conv2d on TF32 tensor cores (default true; KILN_CUDA_CONV_TF32=0 for false). */
  allowTf32Conv: boolean;
  matmul: {
    /** float32 GEMMs on TF32 tensor cores (default false: exact fp32; KILN_CUDA_MATMUL_TF32=1 for true). */
    allowTf32: boolean;
  };
}

// The flags are views of options KILN_CUDA_CONV_TF32 / KILN_CUDA_MATMUL_TF32 (runtime/config.ts):
// the environment gives the default, an assignment overrides it, and both are in the cache keys.
export const backends: { cuda: CudaBackendFlags } = {
  cuda: {
    get allowTf32Conv(): boolean {
      return getOption('KILN_CUDA_CONV_TF32');
    },
    set allowTf32Conv(on: boolean) {
      setOption('KILN_CUDA_CONV_TF32', on);
    },
    matmul: {
      get allowTf32(): boolean {
        return getOption('KILN_CUDA_MATMUL_TF32');
      },
      set allowTf32(on: boolean) {
        setOption('KILN_CUDA_MATMUL_TF32', on);
      },
    },
  },
};
// Read when this module loads, as before: a malformed variable fails at import, not at a later GEMM.
getOption('KILN_CUDA_CONV_TF32');
getOption('KILN_CUDA_MATMUL_TF32');

/** torch.set_float32_matmul_precision's values: 'highest' exact fp32, 'high' and 'medium' TF32 here. */
export type Float32MatmulPrecision = 'highest' | 'high' | 'medium';
const PRECISIONS: readonly Float32MatmulPrecision[] = ['highest', 'high', 'medium'];
let lastReduced: Float32MatmulPrecision = 'high';

/** Sets backends.cuda.matmul.allowTf32 the way torch.set_float32_matmul_precision sets allow_tf32. */
export function setFloat32MatmulPrecision(precision: Float32MatmulPrecision): void {
  if (!PRECISIONS.includes(precision)) {
    throw new RangeError(`setFloat32MatmulPrecision: argument 'precision' must be 'highest', 'high' or 'medium', got ${JSON.stringify(precision)}`);
  }
  backends.cuda.matmul.allowTf32 = precision !== 'highest';
  if (precision !== 'highest') lastReduced = precision;
}

/** 'highest' while float32 GEMMs are exact, else the reduced precision last set ('high' by default). */
export function getFloat32MatmulPrecision(): Float32MatmulPrecision {
  return backends.cuda.matmul.allowTf32 ? lastReduced : 'highest';
}
