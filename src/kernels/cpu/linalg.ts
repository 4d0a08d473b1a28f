/**
 * CPU kernels for the linalg group. Matrix products read their operands through their own strides
 * (transposed and strided operands are packed by the GEMM engine, never copied first) and write
 * the contiguous output in place; batched products loop over broadcast batch offsets, folding the
 * batch into the row dimension when the right operand is shared by every batch. Norm kernels work
 * on dense row-major copies with float64 statistics and write through the output's strides.
 */
import { addmm, batchNorm, bmm, dot, finfoEps, groupNorm, layerNorm, linear, matmul, mm, rmsNorm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { broadcastShapes, broadcastStrides, isChannelsLastStrides, isContiguousStrides, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { gemm, type GemmOperand } from './gemm.js';
import { nativeBf16Linear, nativeGemmFn, useNativeFloat32, type GemmFn } from './native/eager.js';
import { nativeLinearGemv } from './native/gemv.js';
import { nativeElementwise, nativeNorm } from './native/ops.js';
import { nativeAddRms } from './native/rows.js';
import { allocOut, denseValues, fromDense, type NumArray, readable, writable } from './numeric.js';
import { copyInto } from './pointwise-loop.js';

/** A (batch of) matrices addressed through strides. */
interface Mat {
  data: NumArray;
  offset: number;
  batchShape: number[];
  batchStrides: number[];
  rows: number;
  cols: number;
  rs: number;
  cs: number;
}

/**
 * A tensor as a matrix operand of matmul: a 1-d left operand is a row [1, k], a 1-d right operand
 * a column [k, 1]; `transpose` swaps the two matrix dims (linear's weight).
 */
function asMat(t: Tensor, side: 'lhs' | 'rhs', transpose = false): Mat {
  const r = readable(t);
  const rank = t.shape.length;
  let m: Mat;
  if (rank === 1) {
    const k = t.shape[0]!;
    const s = t.strides[0]!;
    m = side === 'lhs'
      ? { data: r.data, offset: r.offset, batchShape: [], batchStrides: [], rows: 1, cols: k, rs: 0, cs: s }
      : { data: r.data, offset: r.offset, batchShape: [], batchStrides: [], rows: k, cols: 1, rs: s, cs: 0 };
  } else {
    m = {
      data: r.data,
      offset: r.offset,
      batchShape: t.shape.slice(0, rank - 2),
      batchStrides: t.strides.slice(0, rank - 2),
      rows: t.shape[rank - 2]!,
      cols: t.shape[rank - 1]!,
      rs: t.strides[rank - 2]!,
      cs: t.strides[rank - 1]!,
    };
  }
  if (transpose) m = { ...m, rows: m.cols, cols: m.rows, rs: m.cs, cs: m.rs };
  return m;
}

/** Strides of a row-merged view of dims (sizes, strides), or undefined when they don't merge. */
function mergedRowStride(sizes: readonly number[], strides: readonly number[]): number | undefined {
  let inner: number | undefined;
  let expected = 0;
  for (let d = sizes.length - 1; d >= 0; d--) {
    const size = sizes[d]!;
    if (size === 1) continue;
    if (inner === undefined) {
      inner = strides[d]!;
      expected = inner * size;
    } else {
      if (strides[d] !== expected) return undefined;
      expected *= size;
    }
  }
  return inner ?? 0;
}

/**
 * out (dense, row-major [...batch, m, n] at `c.offset`) = alpha * a @ b + beta * out, with the
 * batch dims of a and b broadcast against each other.
 */
function batchedGemm(c: { data: NumArray; offset: number }, a: Mat, b: Mat, alpha: number, beta: number, mm: GemmFn = gemm): void {
  const m = a.rows;
  const n = b.cols;
  const k = a.cols;
  const batch = broadcastShapes('matmul', a.batchShape, b.batchShape);
  const nb = numel(batch);
  if (nb === 0 || m === 0 || n === 0) return;
  const sa = broadcastStrides(a.batchShape, a.batchStrides, batch);
  const sb = broadcastStrides(b.batchShape, b.batchStrides, batch);
  const A: GemmOperand = { data: a.data, offset: a.offset, rowStride: a.rs, colStride: a.cs };
  const B: GemmOperand = { data: b.data, offset: b.offset, rowStride: b.rs, colStride: b.cs };
  const C: GemmOperand = { data: c.data, offset: c.offset, rowStride: n, colStride: 1 };
  if (nb === 1) {
    mm(m, n, k, alpha, A, B, beta, C);
    return;
  }
  // b shared by every batch and a's batch dims merge with its rows: one tall GEMM.
  if (sb.every((s) => s === 0)) {
    const rs = mergedRowStride([...batch, m], [...sa, a.rs]);
    if (rs !== undefined) {
      mm(nb * m, n, k, alpha, { ...A, rowStride: rs }, B, beta, C);
      return;
    }
  }
  const rank = batch.length;
  const idx = new Array<number>(rank).fill(0);
  for (let i = 0; i < nb; i++) {
    let oa = a.offset;
    let ob = b.offset;
    for (let d = 0; d < rank; d++) {
      oa += idx[d]! * sa[d]!;
      ob += idx[d]! * sb[d]!;
    }
    A.offset = oa;
    B.offset = ob;
    C.offset = c.offset + i * m * n;
    mm(m, n, k, alpha, A, B, beta, C);
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]!++;
      if (idx[d]! < batch[d]!) break;
      idx[d] = 0;
    }
  }
}

/**
 * Allocates the contiguous output, optionally pre-filled with `init` broadcast, and runs the
 * product. float32 products run in native code when that path is active (kernels/cpu/native);
 * a 1-d float32 `init` with beta = 1 (linear's bias) then becomes the kernel's bias epilogue.
 */
function product(meta: OutMeta, a: Mat, b: Mat, alpha: number, beta: number, init: Tensor | null, inputs: readonly Tensor[], weight: Tensor | null = null): Tensor {
  const out = allocOut(meta);
  if (numel(meta.shape) === 0) return out;
  if (useNativeFloat32([meta.dtype, ...inputs.map((t) => t.dtype), ...(init ? [init.dtype] : [])])) {
    const w = writable(out);
    if (init !== null && beta === 1 && init.shape.length === 1 && init.shape[0] === b.cols) {
      const r = readable(init);
      batchedGemm(w, a, b, alpha, 0, nativeGemmFn({ data: r.data as Float32Array, offset: r.offset, stride: init.strides[0]! }, weight));
    } else {
      if (init !== null && beta !== 0) copyInto(out, init);
      batchedGemm(w, a, b, alpha, init !== null ? beta : 0, nativeGemmFn(null, weight));
    }
    return out;
  }
  const useInit = init !== null && beta !== 0;
  if (useInit) copyInto(out, init);
  const w = writable(out);
  batchedGemm(w, a, b, alpha, useInit ? beta : 0);
  w.commit();
  return out;
}

registerKernel(matmul, 'cpu', (ctx, self, other) => product(ctx.out, asMat(self, 'lhs'), asMat(other, 'rhs'), 1, 0, null, [self, other]));
registerKernel(mm, 'cpu', (ctx, self, mat2) => product(ctx.out, asMat(self, 'lhs'), asMat(mat2, 'rhs'), 1, 0, null, [self, mat2]));
registerKernel(bmm, 'cpu', (ctx, self, mat2) => product(ctx.out, asMat(self, 'lhs'), asMat(mat2, 'rhs'), 1, 0, null, [self, mat2]));

registerKernel(linear, 'cpu', (ctx, input, weight, bias) => {
  // A few rows (a decode step): stream the weight once, bfloat16 included (native/gemv.ts).
  const gemv = nativeLinearGemv(ctx.out, input, weight, bias);
  if (gemv) return gemv;
  // More rows in bfloat16 (a prompt): the float32 GEMM over the weight's bits in place.
  const bf = nativeBf16Linear(ctx.out, input, weight, bias);
  if (bf) return bf;
  // input [*, in] as rows, weight [out, in] read transposed (a 1-d weight is a column).
  const a = asMat(input, 'lhs');
  const w = weight.shape.length === 2 ? asMat(weight, 'rhs', true) : asMat(weight, 'rhs');
  return product(ctx.out, a, w, 1, 1, bias, [input, weight], weight.shape.length === 2 ? weight : null);
});

registerKernel(addmm, 'cpu', (ctx, self, mat1, mat2, beta, alpha) =>
  product(ctx.out, asMat(mat1, 'lhs'), asMat(mat2, 'rhs'), Number(alpha), Number(beta), self, [mat1, mat2]),
);

registerKernel(dot, 'cpu', (ctx, self, tensor) => {
  const a = readable(self);
  const b = readable(tensor);
  const n = self.shape[0]!;
  const sa = self.strides[0]!;
  const sb = tensor.strides[0]!;
  let acc = 0;
  for (let i = 0, pa = a.offset, pb = b.offset; i < n; i++, pa += sa, pb += sb) acc += a.data[pa]! * b.data[pb]!;
  return fromDense(ctx.out, [acc]);
});

// ---------------------------------------------------------------------------------------------
// Normalisation

/** A parameter tensor (any strides) as dense row-major float64 values, or null. */
function paramValues(t: Tensor | null): Float64Array | null {
  if (t === null) return null;
  return Float64Array.from(denseValues(t));
}

registerKernel(layerNorm, 'cpu', (ctx, input, normalizedShape, weight, bias, epsArg) => {
  const eps = Number(epsArg);
  const nat = nativeNorm(ctx.out, input, numel(normalizedShape), weight, bias, eps, false);
  if (nat) return nat;
  const x = denseValues(input);
  const inner = numel(normalizedShape);
  const total = x.length;
  const out = new Float64Array(total);
  const w = paramValues(weight);
  const b = paramValues(bias);
  if (inner > 0) {
    for (let base = 0; base < total; base += inner) {
      let sum = 0;
      for (let i = 0; i < inner; i++) sum += x[base + i]!;
      const mean = sum / inner;
      let sq = 0;
      for (let i = 0; i < inner; i++) {
        const d = x[base + i]! - mean;
        sq += d * d;
      }
      const rstd = 1 / Math.sqrt(sq / inner + eps);
      for (let i = 0; i < inner; i++) {
        let y = (x[base + i]! - mean) * rstd;
        if (w) y *= w[i]!;
        if (b) y += b[i]!;
        out[base + i] = y;
      }
    }
  }
  return fromDense(ctx.out, out);
});

registerKernel(rmsNorm, 'cpu', (ctx, input, normalizedShape, weight, eps) => {
  const e = eps === null || eps === undefined ? finfoEps(input.dtype) : Number(eps);
  const nat = nativeNorm(ctx.out, input, numel(normalizedShape), weight, null, e, true);
  if (nat) return nat;
  // bfloat16 (and what nativeNorm left): the row kernel, no JS pass over the elements.
  const row = weight ? nativeAddRms([ctx.out], input, null, weight, numel(normalizedShape), e) : null;
  if (row) return row[0]!;
  const x = denseValues(input);
  const inner = numel(normalizedShape);
  const total = x.length;
  const out = new Float64Array(total);
  const w = paramValues(weight);
  if (inner > 0) {
    for (let base = 0; base < total; base += inner) {
      let sq = 0;
      for (let i = 0; i < inner; i++) {
        const v = x[base + i]!;
        sq += v * v;
      }
      const r = 1 / Math.sqrt(sq / inner + e);
      for (let i = 0; i < inner; i++) out[base + i] = w ? x[base + i]! * r * w[i]! : x[base + i]! * r;
    }
  }
  return fromDense(ctx.out, out);
});

registerKernel(groupNorm, 'cpu', (ctx, input, groupsArg, weight, bias, epsArg) => {
  const numGroups = Number(groupsArg);
  const eps = Number(epsArg);
  const x = denseValues(input);
  const [nBatch, c] = input.shape as [number, number];
  const spatial = numel(input.shape.slice(2));
  const cpg = c / numGroups;
  const groupSize = cpg * spatial;
  const out = new Float64Array(x.length);
  const w = paramValues(weight);
  const b = paramValues(bias);
  if (groupSize > 0) {
    for (let nIdx = 0; nIdx < nBatch; nIdx++) {
      for (let g = 0; g < numGroups; g++) {
        const base = (nIdx * c + g * cpg) * spatial;
        let sum = 0;
        for (let i = 0; i < groupSize; i++) sum += x[base + i]!;
        const mean = sum / groupSize;
        let sq = 0;
        for (let i = 0; i < groupSize; i++) {
          const d = x[base + i]! - mean;
          sq += d * d;
        }
        const rstd = 1 / Math.sqrt(sq / groupSize + eps);
        for (let ch = 0; ch < cpg; ch++) {
          const cIdx = g * cpg + ch;
          const scale = w ? w[cIdx]! * rstd : rstd;
          const shift = b ? b[cIdx]! : 0;
          const p0 = base + ch * spatial;
          for (let s = 0; s < spatial; s++) out[p0 + s] = (x[p0 + s]! - mean) * scale + shift;
        }
      }
    }
  }
  return fromDense(ctx.out, out);
});

/**
 * Eval-mode batch norm of a float32 input on the native path: y = x * scale[c] + shift[c] with
 * scale = w / sqrt(var + eps) and shift = b - mean * scale (computed in float64, then rounded), one
 * broadcasting fma pass in any memory format (channels_last included). Null when not native.
 */
function nativeBatchNormEval(meta: OutMeta, input: Tensor, mean: Float64Array, varr: Float64Array, w: Float64Array | null, b: Float64Array | null, eps: number): Tensor | null {
  if (input.dtype !== 'float32' || input.shape.length < 2) return null;
  const c = input.shape[1]!;
  const bshape = [c, ...input.shape.slice(2).map(() => 1)];
  const scale = allocOut({ shape: bshape, strides: bshape.map(() => 1), dtype: 'float32', device: input.device });
  const shift = allocOut({ shape: bshape, strides: bshape.map(() => 1), dtype: 'float32', device: input.device });
  const sd = writable(scale);
  const hd = writable(shift);
  for (let ch = 0; ch < c; ch++) {
    const s = (w ? w[ch]! : 1) / Math.sqrt(varr[ch]! + eps);
    sd.data[sd.offset + ch] = s;
    hd.data[hd.offset + ch] = (b ? b[ch]! : 0) - mean[ch]! * s;
  }
  const out = nativeElementwise(meta, 'fma', input, scale, shift);
  scale.dispose();
  shift.dispose();
  return out;
}

/**
 * Eval-mode batchNorm of a float32 / float64 input that is contiguous or channels_last, into an
 * output of the same layout: one pass in storage order with the float64 arithmetic of the general
 * loops below (so the same results), without their dense copy of the input and strided scatter of
 * the output (eager [2, 64, 32, 32] on the JS and Wasm paths, 2-core machine: channels_last
 * 3.0 -> 1.7-1.9 ms, contiguous 1.8-2.0 -> 1.3-1.6 ms).
 */
function evalBatchNormInOrder(meta: OutMeta, input: Tensor, mean: Float64Array, varr: Float64Array, w: Float64Array | null, b: Float64Array | null, eps: number): Tensor | null {
  const { shape, strides } = input;
  if (shape.length < 2 || meta.dtype !== input.dtype || (input.dtype !== 'float32' && input.dtype !== 'float64')) return null;
  if (meta.strides.length !== strides.length || meta.strides.some((st, i) => st !== strides[i])) return null;
  const channelsLast = !isContiguousStrides(shape, strides) && isChannelsLastStrides(shape, strides);
  if (!channelsLast && !isContiguousStrides(shape, strides)) return null;
  const [nBatch, c] = shape as [number, number];
  const spatial = numel(shape.slice(2));
  const scale = new Float64Array(c);
  const shift = new Float64Array(c);
  for (let ch = 0; ch < c; ch++) {
    const rstd = 1 / Math.sqrt(varr[ch]! + eps);
    scale[ch] = w ? w[ch]! * rstd : rstd;
    shift[ch] = b ? b[ch]! : 0;
  }
  const out = allocOut(meta);
  const r = readable(input);
  const o = writable(out);
  const xd = r.data;
  const od = o.data;
  let xi = r.offset;
  let oi = o.offset;
  if (channelsLast) {
    for (let q = 0; q < nBatch * spatial; q++) {
      for (let ch = 0; ch < c; ch++) od[oi++] = (xd[xi++]! - mean[ch]!) * scale[ch]! + shift[ch]!;
    }
  } else {
    for (let nb = 0; nb < nBatch; nb++) {
      for (let ch = 0; ch < c; ch++) {
        const mu = mean[ch]!;
        const sc = scale[ch]!;
        const sh = shift[ch]!;
        for (let sp = 0; sp < spatial; sp++) od[oi++] = (xd[xi++]! - mu) * sc + sh;
      }
    }
  }
  o.commit();
  return out;
}

registerKernel(batchNorm, 'cpu', (ctx, input, runningMean, runningVar, weight, bias, training, momentumArg, epsArg) => {
  // Schema-typed scalars arrive widened (Realize maps number to Tensor | ScalarValue).
  const momentum = Number(momentumArg);
  const eps = Number(epsArg);
  const [nBatch, c] = input.shape as [number, number];
  const spatial = numel(input.shape.slice(2));
  const count = nBatch * spatial;
  const w = paramValues(weight);
  const b = paramValues(bias);
  const mean = new Float64Array(c);
  const varr = new Float64Array(c);
  if (training !== true) {
    mean.set(paramValues(runningMean)!);
    varr.set(paramValues(runningVar)!);
    const nat = nativeBatchNormEval(ctx.out, input, mean, varr, w, b, eps) ?? evalBatchNormInOrder(ctx.out, input, mean, varr, w, b, eps);
    if (nat) return nat;
  }
  // The dense float64 copy only where the JS loops below need it: built first, it cost the native
  // eval path a strided gather of the whole input (eager eval at [2, 64, 32, 32] channels_last on
  // the 2-core machine: 2.34 ms with it, 1.08 without; contiguous 1.29 and 0.65).
  const x = denseValues(input);
  const out = new Float64Array(x.length);
  if (training === true) {
    for (let ch = 0; ch < c; ch++) {
      let sum = 0;
      for (let nIdx = 0; nIdx < nBatch; nIdx++) {
        const p0 = (nIdx * c + ch) * spatial;
        for (let s = 0; s < spatial; s++) sum += x[p0 + s]!;
      }
      const mu = count > 0 ? sum / count : NaN;
      let sq = 0;
      for (let nIdx = 0; nIdx < nBatch; nIdx++) {
        const p0 = (nIdx * c + ch) * spatial;
        for (let s = 0; s < spatial; s++) {
          const d = x[p0 + s]! - mu;
          sq += d * d;
        }
      }
      mean[ch] = mu;
      varr[ch] = count > 0 ? sq / count : NaN;
    }
    if (runningMean !== null && runningVar !== null && count > 0) {
      const rm = writable(runningMean);
      const rv = writable(runningVar);
      const sm = runningMean.strides[0]!;
      const sv = runningVar.strides[0]!;
      for (let ch = 0; ch < c; ch++) {
        const pm = rm.offset + ch * sm;
        const pv = rv.offset + ch * sv;
        rm.data[pm] = (1 - momentum) * rm.data[pm]! + momentum * mean[ch]!;
        rv.data[pv] = (1 - momentum) * rv.data[pv]! + momentum * ((varr[ch]! * count) / (count - 1));
      }
      rm.commit();
      rv.commit();
    }
  }
  for (let ch = 0; ch < c; ch++) {
    const rstd = 1 / Math.sqrt(varr[ch]! + eps);
    const scale = w ? w[ch]! * rstd : rstd;
    const shift = b ? b[ch]! : 0;
    const mu = mean[ch]!;
    for (let nIdx = 0; nIdx < nBatch; nIdx++) {
      const p0 = (nIdx * c + ch) * spatial;
      for (let s = 0; s < spatial; s++) out[p0 + s] = (x[p0 + s]! - mu) * scale + shift;
    }
  }
  return fromDense(ctx.out, out);
});
