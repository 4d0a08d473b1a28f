/**
 * C types of Kiln dtypes in generated CUDA C: how each dtype is stored in global memory, what type
 * values of that dtype are computed in (float32 for all floating dtypes below float64: halves are
 * loaded, widened to float, computed on and narrowed only on store, as Inductor's Triton kernels
 * do), and C literals. Conversions for halves are prelude functions (prelude.ts).
 */
import type { DType } from '../../../tensor/dtype.js';

// The storage and compute types are the eager generator's (one table for both code generators);
// the conversions below differ in form because the compiler's kernels name their values.
import type { CType } from '../../../kernels/cuda/codegen/ctypes.js';
export { computeType, storageType, type CType } from '../../../kernels/cuda/codegen/ctypes.js';

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

/**
 * A C literal of value `x` in type `t`. Floats print with 9 significant digits (enough to round-trip
 * float32), doubles with 17; non-finite values go through bit-pattern intrinsics so no header
 * (math_constants.h) is needed under NVRTC.
 */
export function cLit(x: number, t: CType): string {
  if (t === 'int' || t === 'long long') {
    if (!Number.isFinite(x)) return '0';
    const v = Math.trunc(x);
    if (t === 'int') return v === -2147483648 ? '(-2147483647 - 1)' : v < 0 ? `(${v})` : String(v);
    return v < 0 ? `(${v}LL)` : `${v}LL`;
  }
  if (t === 'float') {
    if (Number.isNaN(x)) return '__int_as_float(0x7fc00000)';
    if (x === Infinity) return '__int_as_float(0x7f800000)';
    if (x === -Infinity) return '__int_as_float(0xff800000)';
    if (Object.is(x, -0)) return '(-0.0f)';
    const s = Number.isInteger(x) && Math.abs(x) < 1e15 ? `${x}.0f` : `${x.toPrecision(9)}f`;
    return x < 0 ? `(${s})` : s;
  }
  if (Number.isNaN(x)) return '__longlong_as_double(0x7ff8000000000000LL)';
  if (x === Infinity) return '__longlong_as_double(0x7ff0000000000000LL)';
  if (x === -Infinity) return '__longlong_as_double((long long)0xfff0000000000000ULL)';
  if (Object.is(x, -0)) return '(-0.0)';
  const s = Number.isInteger(x) && Math.abs(x) < 1e15 ? `${x}.0` : x.toPrecision(17);
  return x < 0 ? `(${s})` : s;
}

/** Name of a libm function in the precision of `t` (expf for float, exp for double). */
export function mathFn(name: string, t: CType): string {
  return t === 'float' ? `${name}f` : name;
}
