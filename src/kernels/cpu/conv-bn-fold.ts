/**
 * Eval-mode BatchNorm folded into the convolution before it (conv2dBatchNorm), shared by the
 * native and Wasm conv kernels: W'[o] = W[o] * scale[o] with scale = gamma / sqrt(var + eps), and
 * the epilogue bias shift[o] = beta - mean * scale + bias * scale, as inference engines fold it.
 * `bnKey` names the fold by the identities and storage versions of every BatchNorm tensor and the
 * conv bias, so a packing cached under it is redone when any of them changes in place.
 */
import type { Storage } from '../../tensor/storage.js';
import type { Tensor } from '../../tensor/tensor.js';
import { readable } from './numeric.js';

/** Eval-mode BatchNorm after the conv (conv2dBatchNorm), folded into the weight and the epilogue. */
export interface ConvBatchNorm {
  readonly runningMean: Tensor;
  readonly runningVar: Tensor;
  readonly weight: Tensor | null;
  readonly bias: Tensor | null;
  readonly eps: number;
  readonly relu: boolean;
}

const storageIds = new WeakMap<Storage, number>();
let nextStorageId = 1;
function storageKey(t: Tensor): string {
  let id = storageIds.get(t.storage);
  if (id === undefined) {
    id = nextStorageId++;
    storageIds.set(t.storage, id);
  }
  return `${id}@${t.storage.version}+${t.offset}/${t.strides[0] ?? 1}`;
}

export function bnKey(bn: ConvBatchNorm, convBias: Tensor | null): string {
  return [bn.runningMean, bn.runningVar, bn.weight, bn.bias, convBias].map((t) => (t ? storageKey(t) : '-')).join(',') + `:${bn.eps}`;
}

/** A [C] tensor's values as float64 (any float dtype, any stride). */
function vector(t: Tensor | null, c: number, fill: number): Float64Array {
  const out = new Float64Array(c).fill(fill);
  if (!t) return out;
  const r = readable(t);
  const s = t.strides[0] ?? 1;
  for (let i = 0; i < c; i++) out[i] = Number(r.data[r.offset + i * s]);
  return out;
}

/**
 * Per-output-channel weight scale and epilogue bias of the fold (float64 math, rounded once): the
 * packed weight is W[o] * scale[o]; the conv's output is then GEMM + shift[o].
 */
export function bnFold(bn: ConvBatchNorm, convBias: Tensor | null, o: number): { scale: Float64Array; shift: Float32Array } {
  const mean = vector(bn.runningMean, o, 0);
  const variance = vector(bn.runningVar, o, 1);
  const gamma = vector(bn.weight, o, 1);
  const beta = vector(bn.bias, o, 0);
  const cb = vector(convBias, o, 0);
  const scale = new Float64Array(o);
  const shift = new Float32Array(o);
  for (let i = 0; i < o; i++) {
    scale[i] = gamma[i]! / Math.sqrt(variance[i]! + bn.eps);
    shift[i] = beta[i]! - mean[i]! * scale[i]! + cb[i]! * scale[i]!;
  }
  return { scale, shift };
}
