/**
 * conv2d on the CPU: im2col into the shared GEMM engine. The patch matrix is built per image,
 * per group and per band of output rows, as [pixels, K] row-major. K is ordered (kh, kw, c) when
 * the input keeps channels innermost (channels_last) so each patch entry is a contiguous channel
 * run, else (c, kh, kw). The GEMM is oriented by the output layout so that it writes the output
 * in place: channels_last output as C[pixel, o], contiguous output as C[o, pixel].
 */
import { conv2d, convPadding } from '../../ops/defs/nn.js';
import { conv2dBatchNorm, conv2dBatchNormComposite } from '../../ops/defs/conv-fused.js';
import { registerKernel } from '../../ops/registry.js';
import { allocOut, denseValues, type NumArray, readable, writable } from './numeric.js';
import { gemm } from './gemm.js';
import { nativeConv2d } from './native/conv.js';
import { wasmConv2d } from './wasm-conv.js';

/** Target size (elements) of one band of the patch matrix. */
const PATCH_BUDGET = 1 << 20;

registerKernel(conv2d, 'cpu', (ctx, input, weight, bias, stride, padding, dilation, groupsArg) => {
  const groups = groupsArg as number; // Realize<> widens plain numbers; the meta function checked it
  const nat = nativeConv2d(ctx.out, input, weight, bias, { stride, padding: convPadding('conv2d', padding), dilation, groups });
  if (nat) return nat;
  // float32 on the Wasm cpu path: implicit GEMM on the Wasm engine (wasm-conv.ts).
  const wc = wasmConv2d(ctx.out, input, weight, bias, { stride, padding: convPadding('conv2d', padding), dilation, groups });
  if (wc) return wc;
  const out = allocOut(ctx.out);
  const batched = input.ndim === 4;
  const [n, c, h, w] = (batched ? input.shape : [1, ...input.shape]) as [number, number, number, number];
  const [xs0, xs1, xs2, xs3] = (batched ? input.strides : [0, ...input.strides]) as [number, number, number, number];
  const [o, cg, kh, kw] = weight.shape as [number, number, number, number];
  const oh = out.shape[batched ? 2 : 1]!;
  const ow = out.shape[batched ? 3 : 2]!;
  const [os0, os1, os2, os3] = (batched ? out.strides : [0, ...out.strides]) as [number, number, number, number];
  if (n * o * oh * ow === 0) return out;
  const sh = stride[0]!;
  const sw = stride[stride.length - 1]!;
  const dh = dilation[0]!;
  const dw = dilation[dilation.length - 1]!;
  const [pt, , pl] = convPadding('conv2d', padding);
  const og = o / groups;
  const kk = cg * kh * kw;
  const p = oh * ow;
  // Pixels (oh, ow) of one output plane flatten to one stride for both layouts the meta gives.
  const pix = os3;
  if (oh > 1 && os2 !== ow * os3) throw new Error(`conv2d: unexpected output strides [${out.strides.join(', ')}]`);

  // Patch and packed-weight buffers in the input's precision (float64 stays float64).
  const scratch = (len: number): NumArray => (input.dtype === 'float64' ? new Float64Array(len) : new Float32Array(len));
  const x = readable(input);
  const xd = x.data;
  const res = writable(out);
  const od = res.data;
  const channelsInner = xs1 <= xs3 && c > 1;

  // Weight as [O, K] row-major in the patch's K order.
  const wDense = denseValues(weight);
  let wk: NumArray = wDense;
  if (channelsInner && kh * kw > 1 && cg > 1) {
    const packed = scratch(o * kk);
    for (let oo = 0; oo < o; oo++) {
      for (let cc = 0; cc < cg; cc++) {
        for (let r = 0; r < kh * kw; r++) packed[oo * kk + r * cg + cc] = wDense[(oo * cg + cc) * kh * kw + r]!;
      }
    }
    wk = packed;
  }

  const rowsPerBand = Math.max(1, Math.min(oh, Math.floor(PATCH_BUDGET / Math.max(1, ow * kk))));
  const cols = scratch(rowsPerBand * ow * kk);
  const outCl = os1 < os3 || (os1 === 1 && o > 1);

  for (let b = 0; b < n; b++) {
    for (let g = 0; g < groups; g++) {
      const xBase = x.offset + b * xs0 + g * cg * xs1;
      for (let r0 = 0; r0 < oh; r0 += rowsPerBand) {
        const r1 = Math.min(oh, r0 + rowsPerBand);
        const pb = (r1 - r0) * ow;
        // Build the patch band [pb, kk].
        let dst = 0;
        for (let y = r0; y < r1; y++) {
          const ih0 = y * sh - pt;
          for (let xo = 0; xo < ow; xo++) {
            const iw0 = xo * sw - pl;
            if (channelsInner) {
              for (let i = 0; i < kh; i++) {
                const ih = ih0 + i * dh;
                const rowOk = ih >= 0 && ih < h;
                for (let j = 0; j < kw; j++) {
                  const iw = iw0 + j * dw;
                  if (rowOk && iw >= 0 && iw < w) {
                    let src = xBase + ih * xs2 + iw * xs3;
                    for (let cc = 0; cc < cg; cc++, src += xs1) cols[dst++] = xd[src]!;
                  } else {
                    for (let cc = 0; cc < cg; cc++) cols[dst++] = 0;
                  }
                }
              }
            } else {
              for (let cc = 0; cc < cg; cc++) {
                const cBase = xBase + cc * xs1;
                for (let i = 0; i < kh; i++) {
                  const ih = ih0 + i * dh;
                  if (ih < 0 || ih >= h) {
                    for (let j = 0; j < kw; j++) cols[dst++] = 0;
                    continue;
                  }
                  const rBase = cBase + ih * xs2;
                  for (let j = 0; j < kw; j++) {
                    const iw = iw0 + j * dw;
                    cols[dst++] = iw >= 0 && iw < w ? xd[rBase + iw * xs3]! : 0;
                  }
                }
              }
            }
          }
        }
        const cOff = res.offset + b * os0 + g * og * os1 + r0 * ow * pix;
        const wOperand = { data: wk, offset: g * og * kk, rowStride: kk, colStride: 1 };
        if (outCl) {
          // C[pixel, o] = cols[pixel, :] . W[o, :]
          gemm(pb, og, kk, 1, { data: cols, offset: 0, rowStride: kk, colStride: 1 }, { data: wk, offset: g * og * kk, rowStride: 1, colStride: kk }, 0, {
            data: od,
            offset: cOff,
            rowStride: pix,
            colStride: os1,
          });
        } else {
          // C[o, pixel] = W[o, :] . cols[pixel, :]
          gemm(og, pb, kk, 1, wOperand, { data: cols, offset: 0, rowStride: 1, colStride: kk }, 0, { data: od, offset: cOff, rowStride: os1, colStride: pix });
        }
      }
    }
  }

  if (bias) {
    const bv = denseValues(bias);
    for (let b = 0; b < n; b++) {
      for (let q = 0; q < p; q++) {
        const base = res.offset + b * os0 + q * pix;
        for (let oo = 0; oo < o; oo++) od[base + oo * os1]! += bv[oo]!;
      }
    }
  }
  res.commit();
  return out;
});

// conv2dBatchNorm (the compiler's conv -> eval BatchNorm [-> ReLU] fold): the native or Wasm conv
// with the BatchNorm folded into its packed weight and epilogue; elsewhere the unfused reference ops.
registerKernel(conv2dBatchNorm, 'cpu', (ctx, input, weight, bias, stride, padding, dilation, groupsArg, runningMean, runningVar, bnWeight, bnBias, eps, relu) => {
  const groups = groupsArg as number;
  const bn = { runningMean, runningVar, weight: bnWeight, bias: bnBias, eps: Number(eps), relu: relu === true };
  const args = { stride, padding: convPadding('conv2d', padding), dilation, groups };
  const folded = nativeConv2d(ctx.out, input, weight, bias, args, bn) ?? wasmConv2d(ctx.out, input, weight, bias, args, bn);
  return folded ?? conv2dBatchNormComposite(input, weight, bias, stride, padding, dilation, groups, runningMean, runningVar, bnWeight, bnBias, bn.eps, bn.relu);
});
