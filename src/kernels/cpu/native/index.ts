/** The native CPU path: toolchain discovery, shared-object cache, GEMM and path selection. */
export { cpuPath, cpuPathInfo, forcedCpuPath, setCpuPath, type CpuPath, type CpuPathInfo } from './path.js';
export { GEMM_ACT, GemmLibrary, loadGemmLibrary, loadNativeGemm, nativeGemm, nativeGemmCalls, sgemm, type ConvGeometry, type F32Extra, type F32Operand, type F32Vector, type GemmAct, type PackedB, type SgemmOptions } from './gemm.js';
export { nativeThreads, setNativeThreads } from './threads.js';
export { buildSharedObject, buildSharedObjectSync, nativeCacheStats, NativeCompileError, objectKey, objectsDir, type NativeCacheStats } from './so-cache.js';
export { compilerCandidates, cpuFeatures, probeToolchain, toolchainFingerprint, type Toolchain, type ToolchainProbe } from './toolchain.js';
export { koffi, loadLibrary } from './koffi.js';
export { ensureSharedPool, sharedPoolStats, type PoolStats } from './pool.js';
export { hugePageArrayBuffer, hugePagesAvailable, hugePageStats, moveStorageToHugePages, HUGE_PAGE_MIN_BYTES } from './huge-pages.js';
