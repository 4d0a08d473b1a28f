/**
 * The CudaLauncher over Kiln's cuda runtime (src/runtime/cuda, branch s2-cuda): NVRTC compile with
 * its disk and memory caches (kernelFromSource), launches through its packed-argument path, device
 * addresses from storage buffers, and the target from the device's properties.
 *
 * The runtime is imported dynamically by path, and typed here structurally, so this file compiles
 * (and the CPU-only build works) before and without the runtime; the import fails with a clear
 * error where the runtime is missing. Not exercised by CI (it needs a GPU).
 */
import { getAccelerator } from '../../../runtime/registry.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { argLayout, type ParamType } from './args.js';
import type { CudaTarget } from './configs.js';
import type { CudaLauncher, KernelHandle } from './launcher.js';

/** What this adapter uses of src/runtime/cuda/index.ts. */
interface CudaRuntimeModule {
  kernelFromSource(index: number, source: string, name: string, params: readonly ParamType[], options?: readonly string[], maxDynamicShared?: number): RuntimeKernel;
  launch(kernel: RuntimeKernel, args: readonly number[], dims: { grid: number; block: number; sharedBytes?: number }, stream: unknown): void;
  deviceInfo(index: number): { arch: string; smCount: number; maxThreadsPerSM: number };
  devPtr(buffer: unknown, byteOffset?: number): number;
}
interface RuntimeKernel {
  readonly name: string;
}

interface Handle extends KernelHandle {
  readonly kernel: RuntimeKernel;
  readonly params: readonly ParamType[];
}

const RUNTIME_MODULE = '../../../runtime/cuda/index.js';

export async function createCudaRuntimeLauncher(deviceIndex = 0): Promise<CudaLauncher> {
  let rt: CudaRuntimeModule;
  try {
    rt = (await import(RUNTIME_MODULE)) as CudaRuntimeModule;
  } catch (e) {
    throw new Error(`kiln cuda codegen: the cuda runtime (src/runtime/cuda) cannot be loaded: ${(e as Error).message}`, { cause: e });
  }
  const info = rt.deviceInfo(deviceIndex);
  const target: CudaTarget = { arch: info.arch, sms: info.smCount, maxThreadsPerSm: info.maxThreadsPerSM, halfMode: 'ptx' };
  const acc = getAccelerator('cuda') as unknown as { defaultStream(index: number): unknown };
  const stream = acc.defaultStream(deviceIndex);
  return {
    target,
    compile(source, names, options): KernelHandle[] {
      return names.map((name, i): Handle => {
        const params = options.params[i]!;
        // The runtime adds --gpu-architecture for the device and --std=c++17 itself.
        return { name, params, kernel: rt.kernelFromSource(deviceIndex, source, name, params, options.nvrtcOptions.filter((o) => !o.startsWith('--gpu-architecture') && !o.startsWith('--std')), options.maxDynamicShared) };
      });
    },
    launch(handle, grid, block, sharedBytes, args): void {
      // The runtime packs numbers itself with the same C ABI offsets; unpack the block into them.
      const h = handle as Handle;
      const layout = argLayout(h.params.map((type, i) => ({ name: `a${i}`, type, source: { kind: 'int', what: '' } })));
      if (layout.size !== args.byteLength) throw new Error(`kiln cuda: argument block of ${args.byteLength} bytes for ${h.name}, which takes ${layout.size}`);
      const dv = new DataView(args.buffer, args.byteOffset, args.byteLength);
      const values = layout.params.map((p) => (p.type === 'i32' ? dv.getInt32(p.offset, true) : Number(dv.getBigInt64(p.offset, true))));
      rt.launch(h.kernel, values, { grid, block, sharedBytes }, stream);
    },
    address(t: Tensor): number {
      return rt.devPtr(t.storage.buffer, 0);
    },
  };
}
