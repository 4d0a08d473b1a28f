/**
 * Backend switches, in the spirit of torch.backends: process-wide flags read by kernels at each call.
 *
 * `backends.cuda.allowTf32Conv` (default true, like PyTorch's torch.backends.cudnn.allow_tf32):
 * float32 convolutions on cuda run on TF32 tensor cores (10-bit mantissa products, float32
 * accumulation; relative error around 1e-3). Set it to false for exact float32 (FMA) convolutions.
 * The environment variable KILN_CUDA_CONV_TF32=0 sets the default to false. A compiled program
 * replaying a CUDA graph keeps the kernels it captured: set the flag before the first call.
 */

function envFlag(name: string, fallback: boolean): boolean {
  const v = process.env[name]?.trim().toLowerCase();
  if (v === undefined || v === '') return fallback;
  if (v === '0' || v === 'false' || v === 'off') return false;
  if (v === '1' || v === 'true' || v === 'on') return true;
  throw new RangeError(`${name} must be 0/1, true/false or on/off, got '${process.env[name]}'`);
}

export interface CudaBackendFlags {
  /** float32 conv2d on TF32 tensor cores (default true; KILN_CUDA_CONV_TF32=0 for false). */
  allowTf32Conv: boolean;
}

export const backends: { cuda: CudaBackendFlags } = {
  cuda: { allowTf32Conv: envFlag('KILN_CUDA_CONV_TF32', true) },
};
