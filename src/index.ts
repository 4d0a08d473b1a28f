/**
 * Kiln: `import * as kiln from 'kilnjs'`. Loads the op registry, the CPU kernels and the public API;
 * other accelerators load lazily on first use.
 */
import './ops/index.js';
import './kernels/cpu/index.js';
import './kernels/cuda/index.js';
import './kernels/webgpu/index.js';

export * from './api/index.js';
export * as autograd from './autograd/index.js';
export * as nn from './nn/index.js';
export * as optim from './optim/index.js';
export * as amp from './optim/amp.js';
export * as data from './data/index.js';
export { scope, keep } from './tensor/scope.js';
export * as io from './io/index.js';
export { saveCheckpoint, loadCheckpoint } from './io/checkpoint.js';
export * as models from './models/index.js';
export * as serve from './serve/index.js';
export { generate, type GenerateOptions } from './serve/generate.js';
export { noGrad, enableGrad, noGradScope, isGradEnabled, gradcheck, inferenceMode, inferenceModeScope, isInferenceModeEnabled, checkpoint } from './autograd/index.js';
export { Tensor, type TensorMeta } from './tensor/tensor.js';
export type { DType } from './tensor/dtype.js';
export { DTYPES, promoteTypes, resultType, isFloating } from './tensor/dtype.js';
export type { MemoryFormat } from './tensor/layout.js';
export {
  Device,
  Event,
  Stream,
  synchronize,
  currentDevice,
  setDefaultDevice,
  withDevice,
  getAccelerator,
  probeAccelerators,
  isAvailable,
  registerAccelerator,
  prepareWebgpu,
} from './runtime/index.js';
export type { Accelerator, AllocatorStats, DeviceType, DeviceLike } from './runtime/index.js';
export { memoryStats, emptyCache, resetPeakMemoryStats } from './memory.js';
export * as ops from './llm/ops-namespace.js';
export * as llm from './llm/index.js';
import './compile/kiln-backend.js';
export { compile, compileCounters, resetCompileCounters, type CompileOptions, type CompileCounters, type CompiledFunction, type CompiledPrograms } from './compile/compile.js';
export { backends, setFloat32MatmulPrecision, getFloat32MatmulPrecision, type CudaBackendFlags, type Float32MatmulPrecision } from './runtime/backends.js';
export const version = '0.1.0';
