/** CPU kernels for the nn group: pooling and dropout here; convolution and attention in nn-*.ts. */
import './nn-conv.js';
import './nn-attention.js';
import { avgPool2d, avgPoolGeometry, dropout, maxPool2d, maxPool2dWithIndices, maxPoolGeometry, type PoolGeometry } from '../../ops/defs/nn.js';
import type { OutMeta } from '../../ops/schema.js';
import { registerKernel } from '../../ops/registry.js';
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../../tensor/half.js';
import { defaultGenerator, type Generator } from '../../tensor/random.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut, denseValues, fromDense, readable, writable } from './numeric.js';

interface Plane4 {
  s0: number;
  s1: number;
  s2: number;
  s3: number;
}

function strides4(t: Tensor, batched: boolean): Plane4 {
  const s = batched ? t.strides : [0, ...t.strides];
  return { s0: s[0]!, s1: s[1]!, s2: s[2]!, s3: s[3]! };
}

function lowestFor(dtype: string): number {
  switch (dtype) {
    case 'uint8':
      return 0;
    case 'int32':
      return -2147483648;
    case 'int64':
      return -Number.MAX_VALUE;
    default:
      return -Infinity;
  }
}

function maxPoolInto(input: Tensor, g: PoolGeometry, valuesMeta: OutMeta, indicesMeta: OutMeta | null): Tensor[] {
  const values = allocOut(valuesMeta);
  const indices = indicesMeta ? allocOut(indicesMeta) : null;
  const x = readable(input);
  const xd = x.data;
  const xs = strides4(input, g.batched);
  const vw = writable(values);
  const vd = vw.data;
  const vs = strides4(values, g.batched);
  const iw = indices ? writable(indices) : null;
  const id = iw ? iw.data : null;
  const init = lowestFor(input.dtype);
  const [kh, kw] = g.kernel as [number, number];
  const [sh, sw] = g.stride as [number, number];
  const [ph, pw] = g.padding as [number, number];
  const [dh, dw] = g.dilation as [number, number];
  const { h, w } = g;
  for (let n = 0; n < g.n; n++) {
    for (let c = 0; c < g.c; c++) {
      const xBase = x.offset + n * xs.s0 + c * xs.s1;
      const vBase = vw.offset + n * vs.s0 + c * vs.s1;
      for (let oh = 0; oh < g.oh; oh++) {
        let ih0 = oh * sh - ph;
        const ih1 = Math.min(ih0 + (kh - 1) * dh + 1, h);
        while (ih0 < 0) ih0 += dh;
        for (let ow = 0; ow < g.ow; ow++) {
          let iw0 = ow * sw - pw;
          const iw1 = Math.min(iw0 + (kw - 1) * dw + 1, w);
          while (iw0 < 0) iw0 += dw;
          let best = init;
          let bestIdx = ih0 * w + iw0;
          for (let ih = ih0; ih < ih1; ih += dh) {
            const rBase = xBase + ih * xs.s2;
            for (let iwx = iw0; iwx < iw1; iwx += dw) {
              const val = xd[rBase + iwx * xs.s3]!;
              if (val > best || Number.isNaN(val)) {
                best = val;
                bestIdx = ih * w + iwx;
              }
            }
          }
          const vo = vBase + oh * vs.s2 + ow * vs.s3;
          vd[vo] = best;
          if (id && iw) id[iw.offset + n * vs.s0 + c * vs.s1 + oh * vs.s2 + ow * vs.s3] = bestIdx;
        }
      }
    }
  }
  vw.commit();
  iw?.commit();
  return indices ? [values, indices] : [values];
}

// Realize<> widens plain number/boolean args to Tensor | ScalarValue; the meta functions checked them.
registerKernel(maxPool2d, 'cpu', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean);
  return maxPoolInto(input, g, ctx.out, null)[0]!;
});

registerKernel(maxPool2dWithIndices, 'cpu', (ctx, input, kernelSize, stride, padding, dilation, ceilMode) => {
  const g = maxPoolGeometry(input, kernelSize, stride, padding, dilation, ceilMode as boolean, 'maxPool2dWithIndices');
  return maxPoolInto(input, g, ctx.out[0]!, ctx.out[1]!);
});

registerKernel(avgPool2d, 'cpu', (ctx, input, kernelSize, stride, padding, ceilMode, countIncludePad, divisorArg) => {
  const divisorOverride = divisorArg as number | null;
  const g = avgPoolGeometry(input, kernelSize, stride, padding, ceilMode as boolean, divisorOverride);
  const out = allocOut(ctx.out);
  const x = readable(input);
  const xd = x.data;
  const xs = strides4(input, g.batched);
  const ow_ = writable(out);
  const od = ow_.data;
  const os = strides4(out, g.batched);
  const intDiv = input.dtype === 'int64';
  const [kh, kw] = g.kernel as [number, number];
  const [sh, sw] = g.stride as [number, number];
  const [ph, pw] = g.padding as [number, number];
  const { h, w } = g;
  for (let n = 0; n < g.n; n++) {
    for (let c = 0; c < g.c; c++) {
      const xBase = x.offset + n * xs.s0 + c * xs.s1;
      const oBase = ow_.offset + n * os.s0 + c * os.s1;
      for (let oh = 0; oh < g.oh; oh++) {
        let ih0 = oh * sh - ph;
        let ih1 = Math.min(ih0 + kh, h + ph);
        const poolH = ih1 - ih0;
        ih0 = Math.max(ih0, 0);
        ih1 = Math.min(ih1, h);
        for (let owi = 0; owi < g.ow; owi++) {
          let iw0 = owi * sw - pw;
          let iw1 = Math.min(iw0 + kw, w + pw);
          const poolSize = poolH * (iw1 - iw0);
          iw0 = Math.max(iw0, 0);
          iw1 = Math.min(iw1, w);
          const o = oBase + oh * os.s2 + owi * os.s3;
          if (ih0 >= ih1 || iw0 >= iw1) {
            od[o] = 0;
            continue;
          }
          const div = divisorOverride ?? (countIncludePad ? poolSize : (ih1 - ih0) * (iw1 - iw0));
          let sum = 0;
          for (let ih = ih0; ih < ih1; ih++) {
            const rBase = xBase + ih * xs.s2;
            for (let iwx = iw0; iwx < iw1; iwx++) sum += xd[rBase + iwx * xs.s3]!;
          }
          od[o] = intDiv ? Math.trunc(sum / div) : sum / div;
        }
      }
    }
  }
  ow_.commit();
  return out;
});

/** 1/(1-p) rounded to the tensor's dtype, as torch's noise tensor holds it. */
export function dropoutScale(dtype: string, p: number): number {
  const s = 1 / (1 - p);
  switch (dtype) {
    case 'float16':
      return float16BitsToFloat32(float32ToFloat16Bits(s));
    case 'bfloat16':
      return bfloat16BitsToFloat32(float32ToBfloat16Bits(s));
    default:
      return Math.fround(s);
  }
}

registerKernel(dropout, 'cpu', (ctx, input, pArg, training, genArg) => {
  const p = pArg as number;
  const generator = genArg as Generator | null;
  const src = denseValues(input);
  const n = src.length;
  const vals = new Float64Array(n);
  if (!training || p === 0) {
    for (let i = 0; i < n; i++) vals[i] = src[i]!;
  } else if (p === 1) {
    for (let i = 0; i < n; i++) vals[i] = src[i]! * 0;
  } else {
    const gen = generator ?? defaultGenerator;
    const scale = dropoutScale(input.dtype, p);
    const keep = 1 - p;
    // Elements are drawn in logical (row-major) order, so a seed gives the same mask in any layout.
    for (let i = 0; i < n; i++) vals[i] = src[i]! * (gen.nextUint32() / 4294967296 < keep ? scale : 0);
  }
  if (input.dtype === 'bool') for (let i = 0; i < n; i++) vals[i] = vals[i] !== 0 ? 1 : 0;
  return fromDense(ctx.out, vals);
});
