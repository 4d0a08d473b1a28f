/**
 * The 'cuda' compile target: CUDA C per fused kernel (codegen/cuda), launched through the cuda
 * runtime's launcher of the graph's device, the whole call replayed as a CUDA graph where the mode
 * asks for it or it measures faster, in pieces where it cannot be captured whole
 * (compile-cuda.ts). Fuses what the cpu target fuses (CUDA_FUSION, codegen/cuda/backend.ts).
 * Registers itself for 'cuda'; kiln-backend.ts imports it.
 */
import { CUDA_FUSION } from '../codegen/cuda/backend.js';
import { CudaProgram } from '../codegen/cuda/program.js';
import { cudaRuntimeLauncher } from '../codegen/cuda/runtime-launcher.js';
import { type CompileTarget, registerCompileTarget } from '../target.js';
import { compileForCuda } from './compile-cuda.js';
import { decodeMode } from '../mode.js';

export const cudaTarget: CompileTarget = {
  description: 'cuda: CUDA C kernels through NVRTC, CUDA graphs',
  fusion: CUDA_FUSION,
  program: (low, sched, device, options) => {
    const launcher = cudaRuntimeLauncher(device.index);
    return new CudaProgram(low, sched, launcher, { tuneOnFirstRun: decodeMode(options.mode).tuneOnFirstRun, flush: () => launcher.flushL2() });
  },
  compile: (graph, device, options) => compileForCuda(graph, device.index, options),
};

registerCompileTarget('cuda', cudaTarget);
