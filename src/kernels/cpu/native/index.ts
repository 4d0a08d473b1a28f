/** The native CPU path: toolchain discovery, shared-object cache, GEMM and path selection. */
export { cpuPath, cpuPathInfo, forcedCpuPath, setCpuPath, type CpuPath, type CpuPathInfo } from './path.js';
export { GEMM_ACT, loadNativeGemm, nativeGemmCalls, sgemm, type F32Operand, type F32Vector, type GemmAct, type SgemmOptions } from './gemm.js';
export { nativeThreads, setNativeThreads } from './threads.js';
export { buildSharedObject, buildSharedObjectSync, nativeCacheStats, NativeCompileError, objectKey, objectsDir, type NativeCacheStats } from './so-cache.js';
export { compilerCandidates, cpuFeatures, probeToolchain, toolchainFingerprint, type Toolchain, type ToolchainProbe } from './toolchain.js';
export { koffi, loadLibrary } from './koffi.js';
