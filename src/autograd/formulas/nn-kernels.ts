/**
 * Helper kernels for the nn backward formulas: conv2d input/weight gradients and avgPool2d's input
 * gradient. They compute on dense float64 copies on the CPU (any input dtype, device or layout is
 * converted first) and return float64 CPU tensors; the formulas convert back.
 *
 * conv2d: per image and group the im2col patch matrix cols [P = OH*OW, K = Cg*kH*kW] (K ordered c,
 * kh, kw, like the weight) is built once;
 *   dW[g] (Og x K) += dY[n, g] (Og x P) @ cols (P x K)            (GEMM over the im2col patches)
 *   dcols (P x K)   = dY[n, g]^T (P x Og) @ W[g] (Og x K), then col2im scatter-adds dcols into dX
 *                                                                 (the transposed convolution).
 */
import { contiguous } from '../../api/core.js';
import { convPadding } from '../../ops/defs/nn.js';
import { gemm } from '../../kernels/cpu/gemm.js';
import { Device } from '../../runtime/device.js';
import { numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';

const CPU = new Device('cpu');

/** Dense row-major float64 values of `t` (a view of a contiguous float64 CPU copy). */
export function f64Values(t: Tensor): Float64Array {
  const c = contiguous(t.to({ dtype: 'float64', device: CPU }));
  return new Float64Array(c.storage.cpuArrayBuffer(), c.offset * 8, numel(c.shape));
}

/** A zero-filled contiguous float64 CPU tensor and its data. */
export function f64Zeros(shape: readonly number[]): { t: Tensor; data: Float64Array } {
  const t = Tensor.empty(shape, 'float64', CPU, undefined, true);
  return { t, data: new Float64Array(t.storage.cpuArrayBuffer(), t.offset * 8, numel(shape)) };
}

export interface ConvParams {
  stride: readonly number[];
  padding: readonly number[];
  dilation: readonly number[];
  groups: number;
}

/**
 * Input and weight gradients of conv2d for a batched [N, C, H, W] input, weight [O, Cg, kH, kW]
 * and output gradient [N, O, OH, OW]. Either can be skipped.
 */
export function conv2dBackwardKernel(
  input: Tensor,
  weight: Tensor,
  gradOut: Tensor,
  p: ConvParams,
  needInput: boolean,
  needWeight: boolean,
): { gInput: Tensor | null; gWeight: Tensor | null } {
  const [n, c, h, w] = input.shape as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const [, , oh, ow] = gradOut.shape as [number, number, number, number];
  const sh = p.stride[0]!;
  const sw = p.stride[p.stride.length - 1]!;
  const dh = p.dilation[0]!;
  const dw = p.dilation[p.dilation.length - 1]!;
  const [pt, , pl] = convPadding('conv2d backward', p.padding);
  const groups = p.groups;
  const og = o / groups;
  const kk = cg * kh * kw;
  const pp = oh * ow;

  const gd = f64Values(gradOut);
  const xd = needWeight ? f64Values(input) : null;
  const wd = needInput ? f64Values(weight) : null;
  const gx = needInput ? f64Zeros([n, c, h, w]) : null;
  const gw = needWeight ? f64Zeros([o, cg, kh, kw]) : null;
  if (n * o * pp === 0 || kk === 0) return { gInput: gx?.t ?? null, gWeight: gw?.t ?? null };

  // Row index (into the padded-out input) of each (output row, kernel row), -1 where it falls in
  // the padding; same for columns. Shared by im2col and col2im.
  const rowOf = new Int32Array(oh * kh);
  for (let y = 0; y < oh; y++) {
    for (let i = 0; i < kh; i++) {
      const ih = y * sh - pt + i * dh;
      rowOf[y * kh + i] = ih >= 0 && ih < h ? ih : -1;
    }
  }
  const colOf = new Int32Array(ow * kw);
  for (let x = 0; x < ow; x++) {
    for (let j = 0; j < kw; j++) {
      const iw = x * sw - pl + j * dw;
      colOf[x * kw + j] = iw >= 0 && iw < w ? iw : -1;
    }
  }

  const cols = new Float64Array(pp * kk);
  const plane = h * w;
  for (let b = 0; b < n; b++) {
    for (let g = 0; g < groups; g++) {
      const gOff = (b * o + g * og) * pp; // dY[b, g*og, 0, 0]
      const xOff = (b * c + g * cg) * plane; // X[b, g*cg, 0, 0]
      if (gw && xd) {
        // im2col: cols[q, (cc, i, j)]
        let dst = 0;
        for (let y = 0; y < oh; y++) {
          for (let x = 0; x < ow; x++) {
            for (let cc = 0; cc < cg; cc++) {
              const cBase = xOff + cc * plane;
              for (let i = 0; i < kh; i++) {
                const ih = rowOf[y * kh + i]!;
                for (let j = 0; j < kw; j++) {
                  const iw = colOf[x * kw + j]!;
                  cols[dst++] = ih >= 0 && iw >= 0 ? xd[cBase + ih * w + iw]! : 0;
                }
              }
            }
          }
        }
        gemm(
          og,
          kk,
          pp,
          1,
          { data: gd, offset: gOff, rowStride: pp, colStride: 1 },
          { data: cols, offset: 0, rowStride: kk, colStride: 1 },
          1,
          { data: gw.data, offset: g * og * kk, rowStride: kk, colStride: 1 },
        );
      }
      if (gx && wd) {
        gemm(
          pp,
          kk,
          og,
          1,
          { data: gd, offset: gOff, rowStride: 1, colStride: pp },
          { data: wd, offset: g * og * kk, rowStride: kk, colStride: 1 },
          0,
          { data: cols, offset: 0, rowStride: kk, colStride: 1 },
        );
        // col2im: scatter-add each patch entry back to the input pixel it was read from.
        const gxd = gx.data;
        let src = 0;
        for (let y = 0; y < oh; y++) {
          for (let x = 0; x < ow; x++) {
            for (let cc = 0; cc < cg; cc++) {
              const cBase = xOff + cc * plane;
              for (let i = 0; i < kh; i++) {
                const ih = rowOf[y * kh + i]!;
                for (let j = 0; j < kw; j++, src++) {
                  const iw = colOf[x * kw + j]!;
                  if (ih >= 0 && iw >= 0) gxd[cBase + ih * w + iw]! += cols[src]!;
                }
              }
            }
          }
        }
      }
    }
  }
  return { gInput: gx?.t ?? null, gWeight: gw?.t ?? null };
}

export interface AvgPoolParams {
  kernel: readonly number[];
  stride: readonly number[];
  padding: readonly number[];
  countIncludePad: boolean;
  divisorOverride: number | null;
}

/**
 * avgPool2d input gradient for a batched [N, C, H, W] input and output gradient [N, C, OH, OW]:
 * each output's gradient, divided by that window's divisor (the forward's rule: the window clipped
 * to the padded input counts when countIncludePad, else only its part inside the input; or
 * divisorOverride), is added to every input element of the window.
 */
export function avgPool2dBackwardKernel(inputShape: readonly number[], gradOut: Tensor, p: AvgPoolParams): Tensor {
  const [n, c, h, w] = inputShape as [number, number, number, number];
  const [, , oh, ow] = gradOut.shape as [number, number, number, number];
  const [kh, kw] = p.kernel as [number, number];
  const [sh, sw] = p.stride as [number, number];
  const [ph, pw] = p.padding as [number, number];
  const gd = f64Values(gradOut);
  const gx = f64Zeros([n, c, h, w]);
  const gxd = gx.data;
  for (let plane = 0; plane < n * c; plane++) {
    const xBase = plane * h * w;
    const gBase = plane * oh * ow;
    for (let y = 0; y < oh; y++) {
      let ih0 = y * sh - ph;
      let ih1 = Math.min(ih0 + kh, h + ph);
      const poolH = ih1 - ih0;
      ih0 = Math.max(ih0, 0);
      ih1 = Math.min(ih1, h);
      for (let x = 0; x < ow; x++) {
        let iw0 = x * sw - pw;
        let iw1 = Math.min(iw0 + kw, w + pw);
        const poolSize = poolH * (iw1 - iw0);
        iw0 = Math.max(iw0, 0);
        iw1 = Math.min(iw1, w);
        if (ih0 >= ih1 || iw0 >= iw1) continue;
        const div = p.divisorOverride ?? (p.countIncludePad ? poolSize : (ih1 - ih0) * (iw1 - iw0));
        const v = gd[gBase + y * ow + x]! / div;
        for (let ih = ih0; ih < ih1; ih++) {
          const r = xBase + ih * w;
          for (let iw = iw0; iw < iw1; iw++) gxd[r + iw]! += v;
        }
      }
    }
  }
  return gx.t;
}
