/**
 * C types of Kiln dtypes in generated CUDA C: how each dtype is stored in global memory, what type
 * values of that dtype are computed in (float32 for all floating dtypes below float64: halves are
 * loaded, widened to float, computed on and narrowed only on store, as Inductor's Triton kernels
 * do), and C literals. Conversions for halves are prelude functions (prelude.ts).
 */
import type { DType } from '../../../tensor/dtype.js';

// The storage and compute types, literals and libm names are the eager generator's (one table for
// both code generators and the math table, kernels/math/cuda.ts); the conversions below differ in
// form because the compiler's kernels name their values.
export { cLit, computeType, mathFn, storageType, type CType } from '../../../kernels/cuda/codegen/ctypes.js';

/** Converts a raw stored element (expression) to its compute type. */
export function loadConvert(d: DType, raw: string): string {
  switch (d) {
    case 'float16':
      return `kiln_h2f(${raw})`;
    case 'bfloat16':
      return `kiln_bf2f(${raw})`;
    case 'uint8':
    case 'bool':
      return `(int)(${raw})`;
    default:
      return raw;
  }
}

/** Converts a computed value (identifier) of dtype `d` to its storage type. */
export function storeConvert(d: DType, v: string): string {
  switch (d) {
    case 'float16':
      return `kiln_f2h(${v})`;
    case 'bfloat16':
      return `kiln_f2bf(${v})`;
    case 'uint8':
      return `(unsigned char)(${v})`;
    case 'bool':
      return `(unsigned char)(${v} != 0)`;
    default:
      return v;
  }
}
