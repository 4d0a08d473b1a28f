/**
 * The eager hook of the native path: linalg.ts asks `nativeFloat32Gemm(dtypes)` whether a product
 * should run in native code (all operands float32 and the native path active) and then calls the
 * returned function with the same arguments as gemm.ts's `gemm` (plus an optional bias epilogue).
 * Anything else keeps the existing Wasm/JS engine.
 *
 * A linear's weight (up to WEIGHT_CACHE_MAX elements) is packed once per weight version and the
 * packing kept on its storage (a WeakMap: it dies with the storage): an inference loop stops
 * repacking the same weight every call (at [64, 512] x [512, 512] the packing was ~15% of the call).
 * Large weights (an LM head) are packed per call as before, so memory never doubles for them.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { Storage } from '../../../tensor/storage.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { GemmOperand } from '../gemm.js';
import { nativeGemm, sgemm, type F32Vector, type PackedB } from './gemm.js';
import { cpuPath } from './path.js';

export type GemmFn = (m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand) => void;

function f32(o: GemmOperand, what: string): { data: Float32Array; offset: number; rowStride: number; colStride: number } {
  if (!(o.data instanceof Float32Array)) throw new TypeError(`native sgemm: ${what} must be float32 data, got ${o.data.constructor.name}`);
  return { data: o.data, offset: o.offset, rowStride: o.rowStride, colStride: o.colStride };
}

/** Weights up to this many elements keep a packed copy (4 M floats = 16 MiB, a 2048 x 2048 layer). */
const WEIGHT_CACHE_MAX = 1 << 22;

interface PackedWeight {
  version: number;
  offset: number;
  rowStride: number;
  colStride: number;
  packed: PackedB;
}

const packedWeights = new WeakMap<Storage, PackedWeight>();

/** The cached packing of `weight` read as B (k x n) through `b`'s strides, (re)packing when stale. */
function packedFor(weight: Tensor, b: { data: Float32Array; offset: number; rowStride: number; colStride: number }, k: number, n: number): PackedB {
  const e = packedWeights.get(weight.storage);
  if (e && e.version === weight.storage.version && e.offset === b.offset && e.rowStride === b.rowStride && e.colStride === b.colStride && e.packed.k === k && e.packed.n === n) return e.packed;
  const packed = nativeGemm().packB(k, n, b);
  packedWeights.set(weight.storage, { version: weight.storage.version, offset: b.offset, rowStride: b.rowStride, colStride: b.colStride, packed });
  return packed;
}

/** A gemm-compatible function running the native float32 kernel, with `bias` added to every row of C; `weight`: B is this linear weight (packing cached). */
export function nativeGemmFn(bias: F32Vector | null = null, weight: Tensor | null = null): GemmFn {
  return (m, n, k, alpha, a, b, beta, c) => {
    if (!(c.data instanceof Float32Array)) throw new TypeError(`native sgemm: C must be float32 data, got ${c.data.constructor.name}`);
    const B = f32(b, 'B');
    const cached = weight !== null && k * n <= WEIGHT_CACHE_MAX && k > 0 && n > 0 ? packedFor(weight, B, k, n) : null;
    sgemm(m, n, k, alpha, f32(a, 'A'), cached ?? B, beta, { data: c.data, offset: c.offset, stride: c.colStride, ldc: c.rowStride }, { bias });
  };
}

/** Whether a product over these dtypes runs natively (every dtype float32 and the native path active). */
export function useNativeFloat32(dtypes: readonly DType[]): boolean {
  return dtypes.every((d) => d === 'float32') && cpuPath() === 'native';
}
