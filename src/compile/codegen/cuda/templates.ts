/**
 * The compiler's side of the CUDA C pointwise math: the expression table itself is shared with the
 * eager cuda kernels (kernels/math/cuda.ts); here is how a fused kernel declares a node's value.
 */
export { CUDA_TEMPLATES, type CArg, type CTemplate, type CTemplateCtx } from '../../../kernels/math/cuda.js';

export { declareValue } from '../../../kernels/cuda/fused/ctypes.js';
