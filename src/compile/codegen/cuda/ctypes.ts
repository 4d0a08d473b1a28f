/**
 * C types of Kiln dtypes in generated CUDA C: how each dtype is stored in global memory, what type
 * values of that dtype are computed in (float32 for all floating dtypes below float64: halves are
 * loaded, widened to float, computed on and narrowed only on store, as Inductor's Triton kernels
 * do), and C literals. Conversions for halves are prelude functions (prelude.ts).
 */
// The storage and compute types, literals and libm names are the eager generator's (one table for
// both code generators and the math table, kernels/math/cuda.ts); the conversions below differ in
// form because the compiler's kernels name their values.
export { cLit, computeType, mathFn, storageType, type CType } from '../../../kernels/cuda/codegen/ctypes.js';

export { loadConvert, storeConvert } from '../../../kernels/cuda/fused/ctypes.js';
