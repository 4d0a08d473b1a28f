/**
 * Eager float32 conv2d on the native path: the implicit-GEMM convolution `kiln_sconv2d` of
 * conv-c.ts (K ordered (kh, kw, c); a channels_last input is read in place, pixel by pixel, an
 * NCHW one after a dense NHWC copy). The weight is rearranged to [O, KH, KW, C] and packed once
 * per weight version (cached on its storage). The output is written in place in its own layout
 * (channels_last rows, or NCHW planes tile by tile); only where the kernel declines does a
 * [pixels, O] scratch and one transposing copy follow. Returns null when the native path is off
 * or the operands are not float32, so the caller runs the JS im2col kernel.
 *
 * conv2dBatchNorm (eval BatchNorm [+ ReLU] after the conv) folds the BatchNorm into the packed
 * weight, as inference engines do: W'[o] = W[o] * scale[o] with scale = gamma / sqrt(var + eps),
 * and the C epilogue adds shift[o] = beta + (bias - mean) * scale and applies the ReLU while the
 * tile is in L1, so the output is written once. The folded packing and its shift are cached per
 * weight view and the storage versions of every BatchNorm tensor and the conv bias, so values
 * changed in place are picked up.
 */
import type { OutMeta } from '../../../ops/schema.js';
import type { Storage } from '../../../tensor/storage.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut, readable } from '../numeric.js';
import { bnFold, bnKey, type ConvBatchNorm } from '../conv-bn-fold.js';
import { nativeGemm, type ConvGeometry, type PackedB } from './gemm.js';
import { cpuPath } from './path.js';

interface PackedConvWeight {
  version: number;
  /** The BatchNorm folded into this packing ('' when none): its tensors' and the conv bias's identities and versions. */
  bnKey: string;
  offset: number;
  strides: string;
  groups: number;
  packed: PackedB[];
  /** With a BatchNorm: the epilogue bias, shift[o] + bias[o] * scale[o] (derived with the packing, once per version). */
  shift: Float32Array | null;
}

const weights = new WeakMap<Storage, PackedConvWeight[]>();

/**
 * The weight as one PackedB per group: B[(kh, kw, c), o] = weight[g * og + o, c, kh, kw], times
 * scale[o] when a BatchNorm is folded, which also gives the epilogue's bias (`shift`). Cached per
 * weight view and BatchNorm key: a compiled conv-stack call used to spend about a third of its
 * host time re-deriving scale and shift from the BatchNorm tensors.
 */
function packedWeight(weight: Tensor, groups: number, bn: ConvBatchNorm | null, bias: Tensor | null): { packed: PackedB[]; shift: Float32Array | null } {
  const strides = weight.strides.join(',');
  const key = bn ? bnKey(bn, bias) : '';
  const list = weights.get(weight.storage) ?? [];
  const hit = list.find((e) => e.version === weight.storage.version && e.offset === weight.offset && e.strides === strides && e.groups === groups && e.bnKey === key);
  if (hit) return hit;
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  // BatchNorm folded: the weight scaled per output channel, the epilogue bias = shift + bias * scale.
  const folded = bn ? bnFold(bn, bias, o) : null;
  const shift = folded ? folded.shift : null;
  const [s0, s1, s2, s3] = weight.strides as [number, number, number, number];
  const r = readable(weight);
  const K = kh * kw * cg;
  const wp = new Float32Array(o * K);
  for (let oo = 0; oo < o; oo++) {
    const f = folded ? folded.scale[oo]! : 1;
    for (let i = 0; i < kh; i++)
      for (let j = 0; j < kw; j++)
        for (let c = 0; c < cg; c++) wp[oo * K + (i * kw + j) * cg + c] = r.data[r.offset + oo * s0 + c * s1 + i * s2 + j * s3]! * f;
  }
  const og = o / groups;
  const lib = nativeGemm();
  const packed = Array.from({ length: groups }, (_, g) => lib.packB(K, og, { data: wp, offset: g * og * K, rowStride: 1, colStride: K }));
  // One entry per (version, view, folded BatchNorm or none): a stale version is replaced, so the
  // cache holds one packing per weight view, plus one per BatchNorm folded into it.
  const keep = list.filter((e) => !(e.offset === weight.offset && e.strides === strides && e.groups === groups && (e.bnKey === '') === (key === '')));
  const entry = { version: weight.storage.version, bnKey: key, offset: weight.offset, strides, groups, packed, shift };
  keep.push(entry);
  weights.set(weight.storage, keep);
  return entry;
}

export interface Conv2dArgs {
  readonly stride: readonly number[];
  /** [top, bottom, left, right] (convPadding). */
  readonly padding: readonly [number, number, number, number];
  readonly dilation: readonly number[];
  readonly groups: number;
}

export function nativeConv2d(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null, a: Conv2dArgs, bn: ConvBatchNorm | null = null): Tensor | null {
  if (cpuPath() !== 'native' || input.dtype !== 'float32' || weight.dtype !== 'float32' || meta.dtype !== 'float32' || (bias && bias.dtype !== 'float32')) return null;
  // Bottom/right padding needs nothing: reads past the input are zeros; the output size is meta's.
  const [pt, , pl] = a.padding;
  const batched = input.shape.length === 4;
  const [n, , h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [xs0, xs1, xs2, xs3] = (batched ? input.strides : [0, ...input.strides]) as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const out = allocOut(meta);
  const oh = meta.shape[batched ? 2 : 1]!;
  const ow = meta.shape[batched ? 3 : 2]!;
  if (n * o * oh * ow === 0) return out;
  const [os0, os1, os2, os3] = (batched ? out.strides : [0, ...out.strides]) as [number, number, number, number];
  const og = o / a.groups;
  const { packed, shift } = packedWeight(weight, a.groups, bn, bias);
  const epiBias = shift ? { data: shift, offset: 0, stride: 1 } : null;
  const lib = nativeGemm();
  const x = readable(input);
  const res = readable(out);
  const P = n * oh * ow;
  const br = bias && !bn ? readable(bias) : null;
  const geometry: ConvGeometry = {
    n,
    h,
    w,
    c: cg,
    xStrides: [xs0, xs2, xs3, xs1],
    o: og,
    kh,
    kw,
    stride: [a.stride[0]!, a.stride[a.stride.length - 1]!],
    padding: [pt, pl],
    dilation: [a.dilation[0]!, a.dilation[a.dilation.length - 1]!],
    oh,
    ow,
  };
  const run = (g: number, dst: { data: Float32Array; offset: number; strides: readonly [number, number, number, number] }): boolean =>
    lib.conv2d(
      geometry,
      { data: x.data as Float32Array, offset: x.offset + g * cg * xs1 },
      packed[g]!,
      dst,
      epiBias
        ? { bias: { data: epiBias.data, offset: g * og, stride: 1 }, act: bn?.relu ? 'relu' : 'none' }
        : { bias: br && bias ? { data: br.data as Float32Array, offset: br.offset + g * og * bias.strides[0]! , stride: bias.strides[0]! } : null },
    );
  // The kernel writes any output layout (NCHW included) in place; only when it declines (a
  // non-channels_last output beyond its direct path) does a [pixel, o] scratch and a copy follow.
  let scratch: Float32Array | null = null;
  for (let g = 0; g < a.groups; g++) {
    if (!scratch && run(g, { data: res.data as Float32Array, offset: res.offset + g * og * os1, strides: [os0, os2, os3, os1] })) continue;
    scratch ??= new Float32Array(P * o);
    run(g, { data: scratch, offset: g * og, strides: [oh * ow * o, ow * o, o, 1] });
  }
  if (scratch) {
    // [pixel, o] scratch -> the output's strides.
    const od = res.data;
    for (let b = 0; b < n; b++)
      for (let oo = 0; oo < o; oo++) {
        const base = res.offset + b * os0 + oo * os1;
        for (let y = 0; y < oh; y++)
          for (let xo = 0; xo < ow; xo++) od[base + y * os2 + xo * os3] = scratch[((b * oh + y) * ow + xo) * o + oo]!;
      }
  }
  return out;
}
