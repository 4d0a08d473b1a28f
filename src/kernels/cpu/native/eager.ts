/**
 * The eager hook of the native path: linalg.ts asks `nativeFloat32Gemm(dtypes)` whether a product
 * should run in native code (all operands float32 and the native path active) and then calls the
 * returned function with the same arguments as gemm.ts's `gemm` (plus an optional bias epilogue).
 * Anything else keeps the existing Wasm/JS engine.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { GemmOperand } from '../gemm.js';
import { sgemm, type F32Vector } from './gemm.js';
import { cpuPath } from './path.js';

export type GemmFn = (m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand) => void;

function f32(o: GemmOperand, what: string): { data: Float32Array; offset: number; rowStride: number; colStride: number } {
  if (!(o.data instanceof Float32Array)) throw new TypeError(`native sgemm: ${what} must be float32 data, got ${o.data.constructor.name}`);
  return { data: o.data, offset: o.offset, rowStride: o.rowStride, colStride: o.colStride };
}

/** A gemm-compatible function running the native float32 kernel, with `bias` added to every row of C. */
export function nativeGemmFn(bias: F32Vector | null = null): GemmFn {
  return (m, n, k, alpha, a, b, beta, c) => {
    if (!(c.data instanceof Float32Array)) throw new TypeError(`native sgemm: C must be float32 data, got ${c.data.constructor.name}`);
    sgemm(m, n, k, alpha, f32(a, 'A'), f32(b, 'B'), beta, { data: c.data, offset: c.offset, stride: c.colStride, ldc: c.rowStride }, { bias });
  };
}

/** Whether a product over these dtypes runs natively (every dtype float32 and the native path active). */
export function useNativeFloat32(dtypes: readonly DType[]): boolean {
  return dtypes.every((d) => d === 'float32') && cpuPath() === 'native';
}
