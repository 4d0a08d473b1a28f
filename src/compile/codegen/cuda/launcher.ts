/**
 * What the CUDA program needs from a CUDA runtime, as a small interface so the code generator and
 * program do not import the runtime (which loads native libraries): compile a generated source
 * into kernel handles, launch a handle with a packed argument block, and give a tensor's device
 * address. One adapter file implements it over the real runtime (runtime-launcher.ts); tests use
 * a recording fake.
 */
import type { Tensor } from '../../../tensor/tensor.js';
import type { ParamType } from '../../../kernels/cuda/fused/args.js';
import type { CudaTarget } from './configs.js';

export interface KernelHandle {
  readonly name: string;
}

export interface CudaCompileOptions {
  /** NVRTC options the source needs (architecture, include path in 'headers' mode). */
  readonly nvrtcOptions: readonly string[];
  /** Largest dynamic shared memory any launch of these kernels asks for. */
  readonly maxDynamicShared: number;
  /** Parameter types of each entry, in `names` order (C ABI layout: see args.ts). */
  readonly params: readonly (readonly ParamType[])[];
}

export interface CudaLauncher {
  /** The device code is generated for (architecture, SM count, half conversion mode). */
  readonly target: CudaTarget;
  /**
   * Compiles `source` and returns a handle per entry in `names` (same order). May answer with a
   * promise (a compile worker); the program then needs `prepare()` before `run()`.
   */
  compile(source: string, names: readonly string[], options: CudaCompileOptions): KernelHandle[] | Promise<KernelHandle[]>;
  /**
   * Launches on the current stream of the tensors' device. `args` has exactly the kernel's parameter
   * size (the packed-argument path rejects any other size).
   */
  launch(handle: KernelHandle, grid: number, block: number, sharedBytes: number, args: Uint8Array): void;
  /** Device address of byte 0 of the tensor's storage. */
  address(t: Tensor): number | bigint;
}
