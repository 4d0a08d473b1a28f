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
import type { OutMeta } from '../../../ops/schema.js';
import type { DType } from '../../../tensor/dtype.js';
import { bfloat16BitsToFloat32Array, float32ArrayToBfloat16Bits } from '../../../tensor/half.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Storage } from '../../../tensor/storage.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut } from '../numeric.js';
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

/**
 * linear(input, weight, bias) with bfloat16 input, weight and output on the native path, through
 * the float32 GEMM reading the weight's bfloat16 bits in place (kiln_sgemm widens them as it
 * packs; no float32 copy of the weight), or null when it does not apply (the caller keeps its
 * path). input [..., k] contiguous (decoded to float32: a prompt's rows, small next to the
 * weight), weight [n, k] of any strides, bias [n] or null; products exact in float32, float32
 * sums, the output rounded once to bfloat16. Issue #17: a bfloat16 Qwen3-0.6B prefill of 32 tokens
 * on the cpu took 3.5 s against float32's 0.32, every weight decoded in JavaScript per call.
 */
export function nativeBf16Linear(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null): Tensor | null {
  if (input.dtype !== 'bfloat16' || weight.dtype !== 'bfloat16' || meta.dtype !== 'bfloat16' || (bias !== null && (bias.dtype !== 'bfloat16' || bias.ndim !== 1))) return null;
  if (weight.ndim !== 2 || input.ndim < 1 || cpuPath() !== 'native') return null;
  const [n, k] = weight.shape as [number, number];
  if (input.shape[input.ndim - 1] !== k || !isContiguousStrides(input.shape, input.strides) || !isContiguousStrides(meta.shape, meta.strides)) return null;
  const m = k === 0 ? 0 : numel(input.shape) / k;
  const out = allocOut(meta);
  if (m === 0 || n === 0) return out;
  const bits = (t: Tensor): Uint16Array => new Uint16Array(t.storage.cpuArrayBuffer(), 0, t.storage.nbytes / 2);
  const a = bfloat16BitsToFloat32Array(bits(input), input.offset, m * k);
  const dense = bias?.contiguous() ?? null;
  const b = dense === null ? null : bfloat16BitsToFloat32Array(bits(dense), dense.offset, n);
  const c = new Float32Array(m * n);
  // weight [n, k] read as B [k, n]: B's rows are weight's columns.
  sgemm(m, n, k, 1, { data: a, offset: 0, rowStride: k, colStride: 1 }, { data: bits(weight), offset: weight.offset, rowStride: weight.strides[1]!, colStride: weight.strides[0]! }, 0, { data: c, offset: 0, stride: 1, ldc: n }, { bias: b === null ? null : { data: b, offset: 0, stride: 1 } });
  float32ArrayToBfloat16Bits(c, bits(out), out.offset);
  return out;
}
