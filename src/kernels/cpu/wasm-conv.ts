/**
 * Eager float32 conv2d on the Wasm cpu path: an implicit GEMM on the Wasm GEMM engine
 * (wasm-sgemm-run.ts), C[pixel, o] = patches[pixel, (kh, kw, c)] . W[(kh, kw, c), o].
 *
 * - The patch matrix [pixels, (kh, kw, c)] is written straight into the engine's Wasm memory, where
 *   the kernel reads it in place (no packing pass): for a channels_last input each kernel row of
 *   a patch is one contiguous run of the input (kw pixels x c channels), one TypedArray.set. The JS
 *   im2col kernel built the matrix element by element and the GEMM then packed it again.
 * - The weight is rearranged and packed once per weight version (kept in the engine's memory,
 *   looked up through the weight's storage), as a compiled linear's weight is.
 * - The output is written through its strides (channels_last or contiguous) with the bias added
 *   in the same copy; images run as one GEMM when their pixels are evenly strided (channels_last),
 *   else one GEMM per image. Tiles of C are split over the engine's threads.
 * Returns null (the caller runs the JS im2col kernel) off the wasm path, for non-float32 operands
 * and for grouped convolutions.
 */
import type { OutMeta } from '../../ops/schema.js';
import type { Storage } from '../../tensor/storage.js';
import type { Tensor } from '../../tensor/tensor.js';
import { cpuPath } from './native/path.js';
import { allocOut, readable, writable } from './numeric.js';
import { type ARows, type PackedB, wasmPackB, wasmSgemm, wasmSgemmAvailable } from './wasm-sgemm-run.js';

export interface WasmConvArgs {
  readonly stride: readonly number[];
  /** [top, bottom, left, right] (convPadding). */
  readonly padding: readonly [number, number, number, number];
  readonly dilation: readonly number[];
  readonly groups: number;
}

interface PackedConvWeight {
  version: number;
  offset: number;
  strides: string;
  packed: PackedB;
}

const weights = new WeakMap<Storage, PackedConvWeight>();

/** B[(kh, kw, c), o] = weight[o, c, kh, kw], packed in the engine (null when too large to keep). */
function packedWeight(weight: Tensor): PackedB | null {
  const strides = weight.strides.join(',');
  const e = weights.get(weight.storage);
  if (e && e.version === weight.storage.version && e.offset === weight.offset && e.strides === strides) return e.packed;
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const [s0, s1, s2, s3] = weight.strides as [number, number, number, number];
  const r = readable(weight);
  const K = kh * kw * cg;
  const wp = new Float32Array(o * K);
  for (let oo = 0; oo < o; oo++)
    for (let i = 0; i < kh; i++)
      for (let j = 0; j < kw; j++)
        for (let c = 0; c < cg; c++) wp[oo * K + (i * kw + j) * cg + c] = r.data[r.offset + oo * s0 + c * s1 + i * s2 + j * s3]!;
  // A stale packing of the same shape is overwritten in place.
  const packed = wasmPackB({ data: wp, offset: 0, rowStride: 1, colStride: K }, K, o, e?.packed);
  if (packed) weights.set(weight.storage, { version: weight.storage.version, offset: weight.offset, strides, packed });
  return packed;
}

export function wasmConv2d(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null, a: WasmConvArgs): Tensor | null {
  if (a.groups !== 1 || input.dtype !== 'float32' || weight.dtype !== 'float32' || meta.dtype !== 'float32' || (bias && bias.dtype !== 'float32')) return null;
  if (cpuPath() !== 'wasm' || !wasmSgemmAvailable()) return null;
  const batched = input.shape.length === 4;
  const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [xs0, xs1, xs2, xs3] = (batched ? input.strides : [0, ...input.strides]) as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  if (cg !== c) return null;
  const oh = meta.shape[batched ? 2 : 1]!;
  const ow = meta.shape[batched ? 3 : 2]!;
  const x = readable(input);
  if (!(x.data instanceof Float32Array)) return null;
  const packed = n * o * oh * ow === 0 ? null : packedWeight(weight);
  if (n * o * oh * ow !== 0 && !packed) return null;
  const out = allocOut(meta);
  if (!packed) return out;
  const [os0, os1, os2, os3] = (batched ? out.strides : [0, ...out.strides]) as [number, number, number, number];
  const res = writable(out);
  const xd = x.data;
  const K = kh * kw * c;
  const sh = a.stride[0]!;
  const sw = a.stride[a.stride.length - 1]!;
  const dh = a.dilation[0]!;
  const dw = a.dilation[a.dilation.length - 1]!;
  const [pt, , pl] = a.padding;
  const plane = oh * ow;
  const rb = bias ? readable(bias) : null;
  const biasOp = rb ? { data: rb.data, offset: rb.offset, stride: bias!.strides[0] ?? 1 } : null;

  // A channels_last input with undilated width: one kernel row of a patch (kw pixels x c channels)
  // is one contiguous run of the input, copied with TypedArray.set.
  const runs = xs1 === 1 && xs3 === c && dw === 1;

  /** Patch rows of pixels [first + m0, first + m0 + m) (pixel = image * plane + y * ow + x), K ordered (kh, kw, c). */
  const rows =
    (first: number): ARows =>
    (buf, at, m0, m, k) => {
      for (let q = 0; q < m; q++) {
        const pix = first + m0 + q;
        const b = Math.floor(pix / plane);
        const rem = pix - b * plane;
        const y = Math.floor(rem / ow);
        const xo = rem - y * ow;
        const xBase = x.offset + b * xs0;
        const ih0 = y * sh - pt;
        const iw0 = xo * sw - pl;
        let t = at + q * k;
        for (let ki = 0; ki < kh; ki++) {
          const ih = ih0 + ki * dh;
          if (ih < 0 || ih >= h) {
            buf.fill(0, t, t + kw * c);
            t += kw * c;
            continue;
          }
          if (runs) {
            // columns iw0 .. iw0 + kw - 1, the part inside [0, w) copied, the rest zero
            const lo = Math.min(kw, Math.max(0, -iw0));
            const hi = Math.max(lo, Math.min(kw, w - iw0));
            if (lo > 0) buf.fill(0, t, t + lo * c);
            if (hi > lo) {
              const src = xBase + ih * xs2 + (iw0 + lo) * c;
              const len = (hi - lo) * c;
              // A subarray view costs an allocation: short runs (a 7x7 kernel over 3 channels: 21) copy by hand.
              if (len >= 64) buf.set(xd.subarray(src, src + len), t + lo * c);
              else for (let q2 = 0, d = t + lo * c; q2 < len; q2++) buf[d + q2] = xd[src + q2]!;
            }
            if (hi < kw) buf.fill(0, t + hi * c, t + kw * c);
            t += kw * c;
            continue;
          }
          for (let kj = 0; kj < kw; kj++) {
            const iw = iw0 + kj * dw;
            if (iw < 0 || iw >= w) {
              buf.fill(0, t, t + c);
              t += c;
              continue;
            }
            for (let cc = 0, src = xBase + ih * xs2 + iw * xs3; cc < c; cc++, src += xs1) buf[t++] = xd[src]!;
          }
        }
      }
    };

  // Pixels of an output plane flatten to one stride (os3) when os2 = ow * os3; across images too when os0 = plane * os3.
  if (oh > 1 && os2 !== ow * os3) throw new Error(`conv2d (wasm): unexpected output strides [${out.strides.join(', ')}]`);
  const od = res.data;
  if (n === 1 || os0 === plane * os3) {
    wasmSgemm(n * plane, o, K, 1, null, null, 0, { data: od, offset: res.offset, rowStride: os3, colStride: os1 }, { packed, rowsA: rows(0), bias: biasOp });
  } else {
    for (let b = 0; b < n; b++) wasmSgemm(plane, o, K, 1, null, null, 0, { data: od, offset: res.offset + b * os0, rowStride: os3, colStride: os1 }, { packed, rowsA: rows(b * plane), bias: biasOp });
  }
  res.commit();
  return out;
}
