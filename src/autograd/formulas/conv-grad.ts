/**
 * The gradients of conv2d and avgPool2d written as compositions of registered ops (conv2d, pad,
 * views), so the same formula runs eagerly on any device and is traced by kiln.compile's joint
 * capture (a formula that computed on host arrays could not be). What cuDNN/ATen call
 * convolution_backward, spelled with the forward convolution:
 *
 * - input gradient = the transposed convolution of the output gradient: insert stride - 1 zeros
 *   between its pixels, convolve (stride 1, the same dilation) with the kernel flipped and its
 *   in/out channels swapped per group. The border is d (k - 1) - padBefore on the leading side and
 *   whatever makes the result exactly the input's size on the trailing side; a negative border is a
 *   crop (narrow), a positive one is the convolution's own padding (no padded copy).
 * - weight gradient = a convolution of the input with the output gradient as its kernel, batch and
 *   channels swapped: the images become the reduction channels (per group), stride and dilation
 *   trade places, and the result [Cg, O, kH', kW'] is cropped to the kernel size and transposed.
 *
 * avgPool2d's input gradient is the first of these with a ones kernel, per plane, applied to the
 * output gradient divided by each window's divisor (a constant that depends on shapes only).
 */
import { tensor } from '../../api/data.js';
import { ones } from '../../api/creation.js';
import { pad } from '../../api/pad.js';
import { div } from '../../api/pointwise.js';
import { flip } from '../../api/shape-extra.js';
import { narrow, permute, reshape, transpose } from '../../api/views.js';
import { dispatch } from '../../ops/dispatch.js';
import { conv2d as conv2dOp } from '../../ops/defs/nn.js';
import type { Tensor } from '../../tensor/tensor.js';

/** conv2d through the dispatcher, which takes the 4-value [top, bottom, left, right] padding. */
function conv2d(x: Tensor, w: Tensor, stride: readonly number[], padding: readonly number[], dilation: readonly number[], groups: number): Tensor {
  return dispatch(conv2dOp, x, w, null, [...stride], [...padding], [...dilation], groups);
}

/** Padding [top, bottom, left, right] (conv2d's 4-value form). */
export type Pad4 = readonly [number, number, number, number];

export interface Conv2dGeometry {
  stride: readonly [number, number];
  padding: Pad4;
  dilation: readonly [number, number];
  groups: number;
}

/** Crops a negative border of dim `d` away; returns the tensor and the border left to pad. */
function cropNegative(x: Tensor, d: number, before: number, after: number): [Tensor, number, number] {
  if (before >= 0 && after >= 0) return [x, before, after];
  const lo = Math.max(0, -before);
  const len = x.shape[d]! - lo - Math.max(0, -after);
  return [narrow(x, d, lo, len), Math.max(0, before), Math.max(0, after)];
}

/**
 * Gradient of conv2d with respect to a batched input of spatial size [h, w], from the output
 * gradient g [N, O, OH, OW] and the weight [O, Cg, kH, kW].
 */
export function conv2dInputGrad(g: Tensor, weight: Tensor, inputHW: readonly [number, number], p: Conv2dGeometry): Tensor {
  const [n, o, oh, ow] = g.shape as [number, number, number, number];
  const [, cg, kh, kw] = weight.shape as [number, number, number, number];
  const [sh, sw] = p.stride;
  const [dh, dw] = p.dilation;
  const groups = p.groups;
  let x = g;
  if (sh > 1 || sw > 1) {
    // (N, O, OH, 1, OW, 1) padded to (N, O, OH, sH, OW, sW): stride - 1 zeros after every pixel.
    x = reshape(pad(reshape(g, [n, o, oh, 1, ow, 1]), [0, sw - 1, 0, 0, 0, sh - 1]), [n, o, oh * sh, ow * sw]);
  }
  // A stride-1 convolution with dilated kernel extent e = d (k - 1) + 1 turns L + before + after
  // pixels into L + before + after - e + 1 = the input size.
  const top = dh * (kh - 1) - p.padding[0];
  const left = dw * (kw - 1) - p.padding[2];
  const bottom = inputHW[0] + dh * (kh - 1) - top - oh * sh;
  const right = inputHW[1] + dw * (kw - 1) - left - ow * sw;
  const [xh, pt, pb] = cropNegative(x, 2, top, bottom);
  const [xw, pl, pr] = cropNegative(xh, 3, left, right);
  x = xw;
  // Weight (G*Og, Cg, kH, kW) -> per group swap in/out -> (G*Cg, Og, kH, kW), flipped spatially.
  const og = o / groups;
  let wt = transpose(reshape(weight, [groups, og, cg, kh, kw]), 1, 2);
  wt = flip(reshape(wt, [groups * cg, og, kh, kw]), [2, 3]);
  return conv2d(x, wt, [1, 1], [pt, pb, pl, pr], [dh, dw], groups);
}

/**
 * Gradient of conv2d with respect to the weight [O, Cg, kH, kW], from a batched input
 * [N, C, H, W] and the output gradient g [N, O, OH, OW].
 */
export function conv2dWeightGrad(input: Tensor, g: Tensor, weightShape: readonly number[], p: Conv2dGeometry): Tensor {
  const [n, c, h, w] = input.shape as [number, number, number, number];
  const [, , kh, kw] = weightShape as [number, number, number, number];
  const groups = p.groups;
  const cg = c / groups;
  // X'[c, gg*N + n] = input[n, gg*Cg + c]: per group, the images are the channels to reduce over.
  const xt = reshape(permute(reshape(input, [n, groups, cg, h, w]), [2, 1, 0, 3, 4]), [cg, groups * n, h, w]);
  // Kernel K'[gg*Og + o, n] = g[n, gg*Og + o]: the output gradient of each image.
  const kt = transpose(g, 0, 1);
  const full = conv2d(xt, kt, p.dilation, p.padding, p.stride, groups);
  // [Cg, O, kH', kW'] with kH' >= kH (a partial last stride step adds rows the forward never used).
  let r = full;
  if (full.shape[2] !== kh) r = narrow(r, 2, 0, kh);
  if (full.shape[3] !== kw) r = narrow(r, 3, 0, kw);
  return transpose(r, 0, 1);
}

export interface AvgPool2dGeometry {
  kernel: readonly [number, number];
  stride: readonly [number, number];
  padding: readonly [number, number];
  countIncludePad: boolean;
  divisorOverride: number | null;
}

/** Each window's divisor as the forward computes it, [OH, OW] float64 values (shapes only). */
function avgPoolDivisors(h: number, w: number, oh: number, ow: number, p: AvgPool2dGeometry): number[] {
  const [kh, kw] = p.kernel;
  const [sh, sw] = p.stride;
  const [ph, pw] = p.padding;
  const out: number[] = [];
  for (let y = 0; y < oh; y++) {
    const h0 = y * sh - ph;
    const h1 = Math.min(h0 + kh, h + ph);
    const inH = Math.min(h1, h) - Math.max(h0, 0);
    for (let x = 0; x < ow; x++) {
      const w0 = x * sw - pw;
      const w1 = Math.min(w0 + kw, w + pw);
      const inW = Math.min(w1, w) - Math.max(w0, 0);
      const d = p.divisorOverride ?? (p.countIncludePad ? (h1 - h0) * (w1 - w0) : inH * inW);
      // A window wholly in the padding has no input element to send its gradient to.
      out.push(inH > 0 && inW > 0 ? d : 1);
    }
  }
  return out;
}

/** avgPool2d's input gradient for a batched [N, C, H, W] input from g [N, C, OH, OW]. */
export function avgPool2dInputGrad(inputShape: readonly number[], g: Tensor, p: AvgPool2dGeometry): Tensor {
  const [n, c, h, w] = inputShape as [number, number, number, number];
  const [, , oh, ow] = g.shape as [number, number, number, number];
  const divisors = tensor(avgPoolDivisors(h, w, oh, ow, p), { dtype: g.dtype, device: g.device });
  const scaled = div(g, reshape(divisors, [oh, ow]));
  const planes = reshape(scaled, [n * c, 1, oh, ow]);
  const kernel = ones([1, 1, p.kernel[0], p.kernel[1]], { dtype: g.dtype, device: g.device });
  const geometry: Conv2dGeometry = { stride: p.stride, padding: [p.padding[0], p.padding[0], p.padding[1], p.padding[1]], dilation: [1, 1], groups: 1 };
  return reshape(conv2dInputGrad(planes, kernel, [h, w], geometry), [n, c, h, w]);
}
