/**
 * The config space and launch geometry of generated CUDA kernels live with the renderer
 * (kernels/cuda/fused/configs.ts), where the eager cuda reductions use them too; re-exported here
 * for the compiler's cuda target and its tests.
 */
export * from '../../../kernels/cuda/fused/configs.js';
