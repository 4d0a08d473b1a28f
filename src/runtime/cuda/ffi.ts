/**
 * Declarations of the C functions Kiln calls in libcuda (driver API), libnvrtc and libcublasLt,
 * bound through koffi. Only declarations and their TypeScript shapes live here; logic is elsewhere.
 *
 * Conventions (measured in /work/shared/notes/gpu-facts.md): opaque handles are `void *`, which
 * koffi 3 returns as BigInt; device pointers (CUdeviceptr) are `uint64_t`, which koffi returns as a
 * number below 2^53 (device addresses are 47-bit); `_Out_` parameters take a one-element array;
 * typed arrays pass as pointers to their bytes for the duration of the call.
 */
import { nodeModule } from '../../platform/index.js';

/** An opaque native handle or host pointer as koffi 3 represents it. */
export type Ptr = bigint;
/** A device address; koffi returns uint64 as a number when it fits 2^53. */
export type DevPtr = number;
/** A one-element array that receives an `_Out_` value. */
export type Out<T> = [T];
export type HostBytes = Uint8Array | Float32Array | Float64Array | Int32Array | BigInt64Array | Ptr;

export interface KoffiLib {
  func(decl: string): (...args: never[]) => unknown;
}

export interface Koffi {
  load(path: string): KoffiLib;
  alloc(type: string, n: number): unknown;
  free(p: unknown): void;
  view(p: unknown, len: number): ArrayBuffer;
  address(p: unknown): bigint;
}

/** Loads koffi, or explains that the package is missing. */
export function loadKoffi(): Koffi {
  try {
    return nodeModule.createRequire(import.meta.url)('koffi') as Koffi;
  } catch (e) {
    throw new Error(`the koffi package (FFI for Node) cannot be loaded: ${(e as Error).message}; install it with 'npm install koffi'`);
  }
}

// ------------------------------------------------------------------------------------------------
// libcuda (driver API). Versioned names (_v2) are the symbols the headers' macros select.
// ------------------------------------------------------------------------------------------------

const DRIVER_DECLS = {
  cuInit: 'int cuInit(unsigned int flags)',
  cuDriverGetVersion: 'int cuDriverGetVersion(_Out_ int *version)',
  cuDeviceGetCount: 'int cuDeviceGetCount(_Out_ int *count)',
  cuDeviceGet: 'int cuDeviceGet(_Out_ int *device, int ordinal)',
  cuDeviceGetName: 'int cuDeviceGetName(void *name, int len, int dev)',
  cuDeviceGetAttribute: 'int cuDeviceGetAttribute(_Out_ int *value, int attrib, int dev)',
  cuDeviceTotalMem_v2: 'int cuDeviceTotalMem_v2(_Out_ uint64_t *bytes, int dev)',
  cuDevicePrimaryCtxRetain: 'int cuDevicePrimaryCtxRetain(_Out_ void **ctx, int dev)',
  cuCtxSetCurrent: 'int cuCtxSetCurrent(void *ctx)',
  cuCtxGetCurrent: 'int cuCtxGetCurrent(_Out_ void **ctx)',
  cuCtxSynchronize: 'int cuCtxSynchronize()',
  cuMemGetInfo_v2: 'int cuMemGetInfo_v2(_Out_ uint64_t *free, _Out_ uint64_t *total)',
  cuMemAlloc_v2: 'int cuMemAlloc_v2(_Out_ uint64_t *dptr, uint64_t bytes)',
  cuMemFree_v2: 'int cuMemFree_v2(uint64_t dptr)',
  cuMemAllocHost_v2: 'int cuMemAllocHost_v2(_Out_ void **pp, uint64_t bytes)',
  cuMemFreeHost: 'int cuMemFreeHost(void *p)',
  cuMemcpyHtoDAsync_v2: 'int cuMemcpyHtoDAsync_v2(uint64_t dst, void *src, uint64_t bytes, void *stream)',
  cuMemcpyDtoHAsync_v2: 'int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, uint64_t bytes, void *stream)',
  cuMemcpyDtoDAsync_v2: 'int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, uint64_t bytes, void *stream)',
  cuMemsetD8Async: 'int cuMemsetD8Async(uint64_t dst, uint8_t value, uint64_t n, void *stream)',
  cuStreamCreate: 'int cuStreamCreate(_Out_ void **stream, unsigned int flags)',
  cuStreamDestroy_v2: 'int cuStreamDestroy_v2(void *stream)',
  cuStreamSynchronize: 'int cuStreamSynchronize(void *stream)',
  cuStreamQuery: 'int cuStreamQuery(void *stream)',
  cuStreamWaitEvent: 'int cuStreamWaitEvent(void *stream, void *event, unsigned int flags)',
  cuEventCreate: 'int cuEventCreate(_Out_ void **event, unsigned int flags)',
  cuEventDestroy_v2: 'int cuEventDestroy_v2(void *event)',
  cuEventRecord: 'int cuEventRecord(void *event, void *stream)',
  cuEventSynchronize: 'int cuEventSynchronize(void *event)',
  cuEventQuery: 'int cuEventQuery(void *event)',
  cuEventElapsedTime_v2: 'int cuEventElapsedTime_v2(_Out_ float *ms, void *start, void *end)',
  cuModuleLoadData: 'int cuModuleLoadData(_Out_ void **module, void *image)',
  cuModuleUnload: 'int cuModuleUnload(void *module)',
  cuModuleGetFunction: 'int cuModuleGetFunction(_Out_ void **fn, void *module, const char *name)',
  cuFuncSetAttribute: 'int cuFuncSetAttribute(void *fn, int attrib, int value)',
  cuLaunchKernel:
    'int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem, void *stream, void *params, void *extra)',
  // config: a CUlaunchConfig packed by launch.ts (programmatic dependent launch, runtime/cuda/pdl.ts;
  // cooperative launches, which pass params: an array of pointers into the packed arguments).
  cuLaunchKernelEx: 'int cuLaunchKernelEx(void *config, void *f, void *params, void *extra)',
  cuGetErrorName: 'int cuGetErrorName(int error, _Out_ const char **name)',
  cuGetErrorString: 'int cuGetErrorString(int error, _Out_ const char **text)',
  // --- CUDA graphs (src/runtime/cuda/graph.ts, branch s2-cudaint) ---
  cuStreamBeginCapture_v2: 'int cuStreamBeginCapture_v2(void *stream, int mode)',
  cuStreamEndCapture: 'int cuStreamEndCapture(void *stream, _Out_ void **graph)',
  cuStreamIsCapturing: 'int cuStreamIsCapturing(void *stream, _Out_ int *status)',
  cuGraphInstantiateWithFlags: 'int cuGraphInstantiateWithFlags(_Out_ void **exec, void *graph, uint64_t flags)',
  cuGraphLaunch: 'int cuGraphLaunch(void *exec, void *stream)',
  cuGraphGetNodes: 'int cuGraphGetNodes(void *graph, void *nodes, _Inout_ uint64_t *count)',
  cuGraphExecDestroy: 'int cuGraphExecDestroy(void *exec)',
  cuGraphDestroy: 'int cuGraphDestroy(void *graph)',
  // --- end CUDA graphs ---
} as const;

export interface DriverApi {
  cuInit(flags: number): number;
  cuDriverGetVersion(v: Out<number>): number;
  cuDeviceGetCount(n: Out<number>): number;
  cuDeviceGet(d: Out<number>, ordinal: number): number;
  cuDeviceGetName(name: Uint8Array, len: number, dev: number): number;
  cuDeviceGetAttribute(v: Out<number>, attrib: number, dev: number): number;
  cuDeviceTotalMem_v2(bytes: Out<number>, dev: number): number;
  cuDevicePrimaryCtxRetain(ctx: Out<Ptr | null>, dev: number): number;
  cuCtxSetCurrent(ctx: Ptr | null): number;
  cuCtxGetCurrent(ctx: Out<Ptr | null>): number;
  cuCtxSynchronize(): number;
  cuMemGetInfo_v2(free: Out<number>, total: Out<number>): number;
  cuMemAlloc_v2(dptr: Out<DevPtr>, bytes: number): number;
  cuMemFree_v2(dptr: DevPtr): number;
  cuMemAllocHost_v2(pp: Out<Ptr | null>, bytes: number): number;
  cuMemFreeHost(p: Ptr): number;
  cuMemcpyHtoDAsync_v2(dst: DevPtr, src: HostBytes, bytes: number, stream: Ptr | null): number;
  cuMemcpyDtoHAsync_v2(dst: HostBytes, src: DevPtr, bytes: number, stream: Ptr | null): number;
  cuMemcpyDtoDAsync_v2(dst: DevPtr, src: DevPtr, bytes: number, stream: Ptr | null): number;
  cuMemsetD8Async(dst: DevPtr, value: number, n: number, stream: Ptr | null): number;
  cuStreamCreate(s: Out<Ptr | null>, flags: number): number;
  cuStreamDestroy_v2(s: Ptr): number;
  cuStreamSynchronize(s: Ptr | null): number;
  cuStreamQuery(s: Ptr | null): number;
  cuStreamWaitEvent(s: Ptr | null, e: Ptr, flags: number): number;
  cuEventCreate(e: Out<Ptr | null>, flags: number): number;
  cuEventDestroy_v2(e: Ptr): number;
  cuEventRecord(e: Ptr, s: Ptr | null): number;
  cuEventSynchronize(e: Ptr): number;
  cuEventQuery(e: Ptr): number;
  cuEventElapsedTime_v2(ms: Out<number>, start: Ptr, end: Ptr): number;
  cuModuleLoadData(m: Out<Ptr | null>, image: Uint8Array): number;
  cuModuleUnload(m: Ptr): number;
  cuModuleGetFunction(f: Out<Ptr | null>, m: Ptr, name: string): number;
  cuFuncSetAttribute(f: Ptr, attrib: number, value: number): number;
  cuLaunchKernel(f: Ptr, gx: number, gy: number, gz: number, bx: number, by: number, bz: number, shmem: number, stream: Ptr | null, params: null, extra: Ptr): number;
  cuLaunchKernelEx(config: Ptr, f: Ptr, params: Ptr | null, extra: Ptr | null): number;
  cuGetErrorName(code: number, name: Out<string | null>): number;
  cuGetErrorString(code: number, text: Out<string | null>): number;
  // --- CUDA graphs (src/runtime/cuda/graph.ts) ---
  cuStreamBeginCapture_v2(s: Ptr, mode: number): number;
  cuStreamEndCapture(s: Ptr, graph: Out<Ptr | null>): number;
  cuStreamIsCapturing(s: Ptr, status: Out<number>): number;
  cuGraphInstantiateWithFlags(exec: Out<Ptr | null>, graph: Ptr, flags: number): number;
  cuGraphLaunch(exec: Ptr, s: Ptr | null): number;
  cuGraphGetNodes(graph: Ptr, nodes: null, count: [number]): number;
  cuGraphExecDestroy(exec: Ptr): number;
  cuGraphDestroy(graph: Ptr): number;
  // --- end CUDA graphs ---
}

// ------------------------------------------------------------------------------------------------
// libnvrtc
// ------------------------------------------------------------------------------------------------

const NVRTC_DECLS = {
  nvrtcVersion: 'int nvrtcVersion(_Out_ int *major, _Out_ int *minor)',
  nvrtcGetErrorString: 'const char *nvrtcGetErrorString(int result)',
  nvrtcCreateProgram: 'int nvrtcCreateProgram(_Out_ void **prog, const char *src, const char *name, int numHeaders, void *headers, void *includeNames)',
  nvrtcCompileProgram: 'int nvrtcCompileProgram(void *prog, int numOptions, const char **options)',
  nvrtcGetProgramLogSize: 'int nvrtcGetProgramLogSize(void *prog, _Out_ uint64_t *size)',
  nvrtcGetProgramLog: 'int nvrtcGetProgramLog(void *prog, void *log)',
  nvrtcGetCUBINSize: 'int nvrtcGetCUBINSize(void *prog, _Out_ uint64_t *size)',
  nvrtcGetCUBIN: 'int nvrtcGetCUBIN(void *prog, void *cubin)',
  nvrtcDestroyProgram: 'int nvrtcDestroyProgram(_Inout_ void **prog)',
} as const;

export interface NvrtcApi {
  nvrtcVersion(major: Out<number>, minor: Out<number>): number;
  nvrtcGetErrorString(result: number): string;
  nvrtcCreateProgram(prog: Out<Ptr | null>, src: string, name: string, numHeaders: number, headers: null, includeNames: null): number;
  nvrtcCompileProgram(prog: Ptr, numOptions: number, options: string[]): number;
  nvrtcGetProgramLogSize(prog: Ptr, size: Out<number>): number;
  nvrtcGetProgramLog(prog: Ptr, log: Uint8Array): number;
  nvrtcGetCUBINSize(prog: Ptr, size: Out<number>): number;
  nvrtcGetCUBIN(prog: Ptr, cubin: Uint8Array): number;
  nvrtcDestroyProgram(prog: [Ptr | null]): number;
}

// ------------------------------------------------------------------------------------------------
// libcublasLt. Device pointers are declared uint64_t (same ABI as void * on x86-64 and aarch64).
// ------------------------------------------------------------------------------------------------

const CUBLASLT_DECLS = {
  cublasLtCreate: 'int cublasLtCreate(_Out_ void **handle)',
  cublasLtGetVersion: 'uint64_t cublasLtGetVersion()',
  cublasLtMatmulDescCreate: 'int cublasLtMatmulDescCreate(_Out_ void **desc, int computeType, int scaleType)',
  cublasLtMatmulDescDestroy: 'int cublasLtMatmulDescDestroy(void *desc)',
  cublasLtMatmulDescSetAttribute: 'int cublasLtMatmulDescSetAttribute(void *desc, int attr, void *buf, uint64_t size)',
  cublasLtMatrixLayoutCreate: 'int cublasLtMatrixLayoutCreate(_Out_ void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld)',
  cublasLtMatrixLayoutDestroy: 'int cublasLtMatrixLayoutDestroy(void *layout)',
  cublasLtMatrixLayoutSetAttribute: 'int cublasLtMatrixLayoutSetAttribute(void *layout, int attr, void *buf, uint64_t size)',
  cublasLtMatmulPreferenceCreate: 'int cublasLtMatmulPreferenceCreate(_Out_ void **pref)',
  cublasLtMatmulPreferenceDestroy: 'int cublasLtMatmulPreferenceDestroy(void *pref)',
  cublasLtMatmulPreferenceSetAttribute: 'int cublasLtMatmulPreferenceSetAttribute(void *pref, int attr, void *buf, uint64_t size)',
  cublasLtMatmulAlgoGetHeuristic:
    'int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref, int requested, void *results, _Out_ int *count)',
  cublasLtMatmulAlgoConfigSetAttribute: 'int cublasLtMatmulAlgoConfigSetAttribute(void *algo, int attr, void *buf, uint64_t size)',
  cublasLtMatmulAlgoConfigGetAttribute: 'int cublasLtMatmulAlgoConfigGetAttribute(void *algo, int attr, void *buf, uint64_t size, _Out_ uint64_t *written)',
  cublasLtMatmulAlgoCapGetAttribute: 'int cublasLtMatmulAlgoCapGetAttribute(void *algo, int attr, void *buf, uint64_t size, _Out_ uint64_t *written)',
  cublasLtMatmulAlgoGetIds:
    'int cublasLtMatmulAlgoGetIds(void *handle, int computeType, int scaleType, int Atype, int Btype, int Ctype, int Dtype, int requested, void *ids, _Out_ int *count)',
  cublasLtMatmulAlgoInit: 'int cublasLtMatmulAlgoInit(void *handle, int computeType, int scaleType, int Atype, int Btype, int Ctype, int Dtype, int algoId, void *algo)',
  cublasLtMatmulAlgoCheck: 'int cublasLtMatmulAlgoCheck(void *handle, void *desc, void *a, void *b, void *c, void *d, void *algo, void *result)',
  cublasLtMatmul:
    'int cublasLtMatmul(void *handle, void *desc, void *alpha, uint64_t A, void *Adesc, uint64_t B, void *Bdesc, void *beta, uint64_t C, void *Cdesc, uint64_t D, void *Ddesc, void *algo, uint64_t workspace, uint64_t workspaceSize, void *stream)',
} as const;

export interface CublasLtApi {
  cublasLtCreate(h: Out<Ptr | null>): number;
  cublasLtGetVersion(): number;
  cublasLtMatmulDescCreate(d: Out<Ptr | null>, computeType: number, scaleType: number): number;
  cublasLtMatmulDescDestroy(d: Ptr): number;
  cublasLtMatmulDescSetAttribute(d: Ptr, attr: number, buf: Uint8Array, size: number): number;
  cublasLtMatrixLayoutCreate(l: Out<Ptr | null>, type: number, rows: number, cols: number, ld: number): number;
  cublasLtMatrixLayoutDestroy(l: Ptr): number;
  cublasLtMatrixLayoutSetAttribute(l: Ptr, attr: number, buf: Uint8Array, size: number): number;
  cublasLtMatmulPreferenceCreate(p: Out<Ptr | null>): number;
  cublasLtMatmulPreferenceDestroy(p: Ptr): number;
  cublasLtMatmulPreferenceSetAttribute(p: Ptr, attr: number, buf: Uint8Array, size: number): number;
  cublasLtMatmulAlgoGetHeuristic(h: Ptr, desc: Ptr, a: Ptr, b: Ptr, c: Ptr, d: Ptr, pref: Ptr, requested: number, results: Uint8Array, count: Out<number>): number;
  cublasLtMatmulAlgoConfigSetAttribute(algo: Uint8Array, attr: number, buf: Uint8Array, size: number): number;
  cublasLtMatmulAlgoConfigGetAttribute(algo: Uint8Array, attr: number, buf: Uint8Array, size: number, written: Out<number>): number;
  cublasLtMatmulAlgoCapGetAttribute(algo: Uint8Array, attr: number, buf: Uint8Array, size: number, written: Out<number>): number;
  cublasLtMatmulAlgoGetIds(h: Ptr, computeType: number, scaleType: number, a: number, b: number, c: number, d: number, requested: number, ids: Int32Array, count: Out<number>): number;
  cublasLtMatmulAlgoInit(h: Ptr, computeType: number, scaleType: number, a: number, b: number, c: number, d: number, algoId: number, algo: Uint8Array): number;
  /** `result` is a cublasLtMatmulHeuristicResult_t (96 bytes): workspace size and state for `algo`. */
  cublasLtMatmulAlgoCheck(h: Ptr, desc: Ptr, a: Ptr, b: Ptr, c: Ptr, d: Ptr, algo: Uint8Array, result: Uint8Array): number;
  cublasLtMatmul(
    h: Ptr, desc: Ptr, alpha: Uint8Array, A: DevPtr, Adesc: Ptr, B: DevPtr, Bdesc: Ptr, beta: Uint8Array, C: DevPtr, Cdesc: Ptr,
    D: DevPtr, Ddesc: Ptr, algo: Uint8Array, workspace: DevPtr, workspaceSize: number, stream: Ptr | null,
  ): number;
}

function bind<T>(lib: KoffiLib, decls: Record<string, string>): T {
  const api: Record<string, unknown> = {};
  for (const [name, decl] of Object.entries(decls)) api[name] = lib.func(decl);
  return api as T;
}

export function bindDriver(koffi: Koffi, path: string): DriverApi {
  return bind<DriverApi>(koffi.load(path), DRIVER_DECLS);
}

export function bindNvrtc(koffi: Koffi, path: string): NvrtcApi {
  return bind<NvrtcApi>(koffi.load(path), NVRTC_DECLS);
}

export function bindCublasLt(koffi: Koffi, path: string): CublasLtApi {
  return bind<CublasLtApi>(koffi.load(path), CUBLASLT_DECLS);
}
