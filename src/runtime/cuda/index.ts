/** The cuda runtime: loaded only when a `cuda` device is first used (see probes.ts). */
export { CudaAccelerator, devPtr } from './cuda-accelerator.js';
export { CudaError, check, driver, makeCurrent } from './driver.js';
export { CudaStream, CudaEvent } from './stream.js';
export { CudaAllocator } from './allocator.js';
export { deviceInfo, type CudaDeviceInfo } from './properties.js';
export { launch, loadKernel, paramLayout, type CudaKernel, type ParamType, type LaunchDims } from './launch.js';
export { kernelFromSource, cubinFor, cubinCacheKey, cubinStats } from './kernel-cache.js';
export { compileToCubin, formatNvrtcLog, NvrtcCompileError, nvrtcVersion } from './nvrtc.js';
export { gemm, rowMajorOperand, type GemmProblem, type GemmDtype, type LtOperand } from './cublaslt.js';
