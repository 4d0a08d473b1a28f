/**
 * CPU kernels for reductions, softmax, scans and sorting.
 *
 * Reductions precompute two offset tables once per call: one for the kept dims (one entry per
 * output element, row-major, so the contiguous output is written in order) and one for the
 * reduced dims (row-major, so an entry's position is the flattened index argmax reports). The
 * inner loops then run over plain typed arrays with no allocation. Everything accumulates in
 * float64 (JS numbers); float16/bfloat16 are read as float32 and int64 as float64 (numeric.ts).
 */
import type { DType } from '../../tensor/dtype.js';
import { contiguousStrides, normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import type { OutMeta } from '../../ops/schema.js';
import { registerKernel } from '../../ops/registry.js';
import * as R from '../../ops/defs/reduction.js';
import { allocOut, type NumArray, readable, writable } from './numeric.js';
import { nativeSoftmax } from './native/ops.js';
import { nativeArgmax } from './native/rows.js';
import { copyInto } from './pointwise-loop.js';

/** Storage offsets of every index over `dims` (row-major in the order given), from `base`. */
function enumOffsets(shape: readonly number[], strides: readonly number[], dims: readonly number[], base: number): Int32Array {
  let n = 1;
  for (const d of dims) n *= shape[d]!;
  const out = new Int32Array(n);
  if (n === 0) return out;
  const k = dims.length;
  if (k === 0) {
    out[0] = base;
    return out;
  }
  const idx = new Array<number>(k).fill(0);
  const lastSize = shape[dims[k - 1]!]!;
  const lastStride = strides[dims[k - 1]!]!;
  let off = base;
  let p = 0;
  while (p < n) {
    for (let i = 0, q = off; i < lastSize; i++, q += lastStride) out[p++] = q;
    let t = k - 2;
    for (; t >= 0; t--) {
      const d = dims[t]!;
      idx[t]!++;
      off += strides[d]!;
      if (idx[t]! < shape[d]!) break;
      off -= strides[d]! * shape[d]!;
      idx[t] = 0;
    }
    if (t < 0) break;
  }
  return out;
}

/** `x` converted to `dtype` (a dense temporary) when an explicit dtype asks for a cast. */
function castInput(x: Tensor, dtype: DType | null): { t: Tensor; temp: boolean } {
  if (dtype === null || dtype === undefined || dtype === x.dtype) return { t: x, temp: false };
  const meta: OutMeta = { shape: [...x.shape], strides: contiguousStrides(x.shape), dtype, device: x.device };
  const t = allocOut(meta);
  copyInto(t, x);
  return { t, temp: true };
}

/*
 * The schema's Realize<> maps plain number/null-typed args to `Tensor | ScalarValue` / `Tensor | null`
 * (its conditional distributes over unions), so kernels narrow them back to what meta accepted.
 */
const dimsOf = (v: unknown): R.DimList => v as R.DimList;
const intOf = (v: unknown): number => v as number;
const dtypeOf = (v: unknown): DType | null => (v ?? null) as DType | null;

type Body = (d: NumArray, base: number, roff: Int32Array) => number;

interface Plan {
  data: NumArray;
  /** One entry per output element: storage offset of the first reduced element. */
  ooff: Int32Array;
  /** Relative offsets of the reduced elements, row-major over the reduced dims. */
  roff: Int32Array;
}

function plan(x: Tensor, dims: readonly number[]): Plan {
  const r = readable(x);
  const kept: number[] = [];
  for (let i = 0; i < x.shape.length; i++) if (!dims.includes(i)) kept.push(i);
  return {
    data: r.data,
    ooff: enumOffsets(x.shape, r.strides, kept, r.offset),
    roff: enumOffsets(x.shape, r.strides, dims, 0),
  };
}

/** Runs `body` for each output element of a reduction of `x` over `dims`, into a new output. */
function reduce(meta: OutMeta, x: Tensor, dims: readonly number[], body: Body): Tensor {
  const out = allocOut(meta);
  const w = writable(out);
  const p = plan(x, dims);
  const od = w.data;
  const { data, ooff, roff } = p;
  if (meta.dtype === 'bool') {
    // e.g. sum(..., dtype='bool'): bool outputs hold 0/1 only (NaN casts to false, like copies).
    for (let o = 0; o < ooff.length; o++) {
      const v = body(data, ooff[o]!, roff);
      od[o] = v !== 0 && v === v ? 1 : 0;
    }
  } else {
    for (let o = 0; o < ooff.length; o++) od[o] = body(data, ooff[o]!, roff);
  }
  w.commit();
  return out;
}

/** The same with an explicit-dtype cast of the input first. */
function reduceCast(meta: OutMeta, x: Tensor, dims: readonly number[], dtype: DType | null, body: Body): Tensor {
  const { t, temp } = castInput(x, dtype);
  try {
    return reduce(meta, t, dims, body);
  } finally {
    if (temp) t.dispose();
  }
}

const sumBody: Body = (d, base, roff) => {
  let s = 0;
  for (let j = 0; j < roff.length; j++) s += d[base + roff[j]!]!;
  return s;
};

const prodBody: Body = (d, base, roff) => {
  let s = 1;
  for (let j = 0; j < roff.length; j++) s *= d[base + roff[j]!]!;
  return s;
};

const meanBody: Body = (d, base, roff) => sumBody(d, base, roff) / roff.length;

const maxBody: Body = (d, base, roff) => {
  let m = -Infinity;
  for (let j = 0; j < roff.length; j++) {
    const v = d[base + roff[j]!]!;
    if (v > m) m = v;
    else if (v !== v) return NaN;
  }
  return m;
};

const minBody: Body = (d, base, roff) => {
  let m = Infinity;
  for (let j = 0; j < roff.length; j++) {
    const v = d[base + roff[j]!]!;
    if (v < m) m = v;
    else if (v !== v) return NaN;
  }
  return m;
};

/** Index (position in roff) of the first maximum, or of the first NaN. */
const argmaxBody: Body = (d, base, roff) => {
  let best = 0;
  let bv = d[base + roff[0]!]!;
  if (bv !== bv) return 0;
  for (let j = 1; j < roff.length; j++) {
    const v = d[base + roff[j]!]!;
    if (v > bv) {
      bv = v;
      best = j;
    } else if (v !== v) return j;
  }
  return best;
};

const argminBody: Body = (d, base, roff) => {
  let best = 0;
  let bv = d[base + roff[0]!]!;
  if (bv !== bv) return 0;
  for (let j = 1; j < roff.length; j++) {
    const v = d[base + roff[j]!]!;
    if (v < bv) {
      bv = v;
      best = j;
    } else if (v !== v) return j;
  }
  return best;
};

/** Two-pass variance: mean first, then the sum of squared deviations. */
function varBody(correction: number): Body {
  return (d, base, roff) => {
    const n = roff.length;
    let s = 0;
    for (let j = 0; j < n; j++) s += d[base + roff[j]!]!;
    const mu = s / n;
    let ss = 0;
    for (let j = 0; j < n; j++) {
      const e = d[base + roff[j]!]! - mu;
      ss += e * e;
    }
    return ss / Math.max(0, n - correction);
  };
}

const logsumexpBody: Body = (d, base, roff) => {
  const m = maxBody(d, base, roff);
  // NaN, +inf and -inf (including an empty or all -inf row) are the answer themselves.
  if (!Number.isFinite(m)) return m;
  let s = 0;
  for (let j = 0; j < roff.length; j++) s += Math.exp(d[base + roff[j]!]! - m);
  return m + Math.log(s);
};

const anyBody: Body = (d, base, roff) => {
  for (let j = 0; j < roff.length; j++) if (d[base + roff[j]!]! !== 0) return 1;
  return 0;
};

const allBody: Body = (d, base, roff) => {
  for (let j = 0; j < roff.length; j++) if (d[base + roff[j]!]! === 0) return 0;
  return 1;
};

registerKernel(R.sum, 'cpu', (ctx, self, dim, _keepdim, dtype) => reduceCast(ctx.out, self, R.reductionDims('sum', self, dimsOf(dim)), dtypeOf(dtype), sumBody));
registerKernel(R.prod, 'cpu', (ctx, self, dim, _keepdim, dtype) => reduceCast(ctx.out, self, R.reductionDims('prod', self, dimsOf(dim)), dtypeOf(dtype), prodBody));
registerKernel(R.mean, 'cpu', (ctx, self, dim, _keepdim, dtype) => reduceCast(ctx.out, self, R.reductionDims('mean', self, dimsOf(dim)), dtypeOf(dtype), meanBody));
registerKernel(R.amax, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('amax', self, dimsOf(dim)), maxBody));
registerKernel(R.amin, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('amin', self, dimsOf(dim)), minBody));
registerKernel(R.max, 'cpu', (ctx, self) => reduce(ctx.out, self, R.reductionDims('max', self, null), maxBody));
registerKernel(R.min, 'cpu', (ctx, self) => reduce(ctx.out, self, R.reductionDims('min', self, null), minBody));
registerKernel(R.var_, 'cpu', (ctx, self, dim, correction) => reduce(ctx.out, self, R.reductionDims('var', self, dimsOf(dim)), varBody(intOf(correction))));
registerKernel(R.std, 'cpu', (ctx, self, dim, correction) => {
  const v = varBody(intOf(correction));
  return reduce(ctx.out, self, R.reductionDims('std', self, dimsOf(dim)), (d, base, roff) => Math.sqrt(v(d, base, roff)));
});
registerKernel(R.logsumexp, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('logsumexp', self, dimsOf(dim)), logsumexpBody));
registerKernel(R.any, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('any', self, dimsOf(dim)), anyBody));
registerKernel(R.all, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('all', self, dimsOf(dim)), allBody));

registerKernel(R.argmax, 'cpu', (ctx, self, dim) => {
  const dims = R.reductionDims('argmax', self, dimsOf(dim));
  return nativeArgmax(ctx.out, self, dims) ?? reduce(ctx.out, self, dims, argmaxBody);
});
registerKernel(R.argmin, 'cpu', (ctx, self, dim) => reduce(ctx.out, self, R.reductionDims('argmin', self, dimsOf(dim)), argminBody));

/** max/min over one dim: the extremum's value and its (first, or first-NaN) index. */
function extremumWithIndex(metas: readonly OutMeta[], x: Tensor, dim: number, arg: Body): Tensor[] {
  const values = allocOut(metas[0]!);
  const indices = allocOut(metas[1]!);
  const wv = writable(values);
  const wi = writable(indices);
  const { data, ooff, roff } = plan(x, R.reductionDims('max', x, dim));
  const vd = wv.data;
  const id = wi.data;
  for (let o = 0; o < ooff.length; o++) {
    const base = ooff[o]!;
    const j = arg(data, base, roff);
    vd[o] = data[base + roff[j]!]!;
    id[o] = j;
  }
  wv.commit();
  wi.commit();
  return [values, indices];
}

registerKernel(R.maxDim, 'cpu', (ctx, self, dim) => extremumWithIndex(ctx.out, self, intOf(dim), argmaxBody));
registerKernel(R.minDim, 'cpu', (ctx, self, dim) => extremumWithIndex(ctx.out, self, intOf(dim), argminBody));

/**
 * Lines along `dim` for an input and outputs that share one stride pattern: the start offset of
 * each line in the input (`inBase`) and in the outputs (`outBase`), and the step along the line.
 * A 0-d tensor is one line of length 1.
 */
interface Lines {
  len: number;
  inStep: number;
  outStep: number;
  inBase: Int32Array;
  outBase: Int32Array;
}

function lines(shape: readonly number[], dim: number, inStrides: readonly number[], inOffset: number, outStrides: readonly number[]): Lines {
  const rank = shape.length;
  if (rank === 0) return { len: 1, inStep: 0, outStep: 0, inBase: Int32Array.of(inOffset), outBase: Int32Array.of(0) };
  const others: number[] = [];
  for (let i = 0; i < rank; i++) if (i !== dim) others.push(i);
  return {
    len: shape[dim]!,
    inStep: inStrides[dim]!,
    outStep: outStrides[dim]!,
    inBase: enumOffsets(shape, inStrides, others, inOffset),
    outBase: enumOffsets(shape, outStrides, others, 0),
  };
}

function softmaxKernel(meta: OutMeta, self: Tensor, dim: number, dtype: DType | null, log: boolean): Tensor {
  const { t: x, temp } = castInput(self, dtype);
  const out = allocOut(meta);
  const r = readable(x);
  const w = writable(out);
  const d = normalizeDim('softmax', dim, x.shape.length);
  const L = lines(x.shape, d, r.strides, r.offset, out.strides);
  const src = r.data;
  const dst = w.data;
  const len = L.len;
  const si = L.inStep;
  const so = L.outStep;
  const tmp = new Float64Array(len);
  if (len > 0) {
    for (let l = 0; l < L.inBase.length; l++) {
      const pi0 = L.inBase[l]!;
      const po0 = L.outBase[l]!;
      // Max ignoring NaN: a NaN then reaches the sum through exp and poisons the whole line.
      let m = -Infinity;
      for (let i = 0, p = pi0; i < len; i++, p += si) {
        const v = src[p]!;
        if (v > m) m = v;
      }
      let s = 0;
      for (let i = 0, p = pi0; i < len; i++, p += si) {
        const e = Math.exp(src[p]! - m);
        tmp[i] = e;
        s += e;
      }
      if (log) {
        const c = m + Math.log(s);
        for (let i = 0, pi = pi0, po = po0; i < len; i++, pi += si, po += so) dst[po] = src[pi]! - c;
      } else {
        const inv = 1 / s;
        for (let i = 0, po = po0; i < len; i++, po += so) dst[po] = tmp[i]! * inv;
      }
    }
  }
  w.commit();
  if (temp) x.dispose();
  return out;
}

registerKernel(
  R.softmax,
  'cpu',
  (ctx, self, dim, dtype) => (dtypeOf(dtype) === null ? nativeSoftmax(ctx.out, self, intOf(dim), false) : null) ?? softmaxKernel(ctx.out, self, intOf(dim), dtypeOf(dtype), false),
);
registerKernel(
  R.logSoftmax,
  'cpu',
  (ctx, self, dim, dtype) => (dtypeOf(dtype) === null ? nativeSoftmax(ctx.out, self, intOf(dim), true) : null) ?? softmaxKernel(ctx.out, self, intOf(dim), dtypeOf(dtype), true),
);

function scanKernel(meta: OutMeta, self: Tensor, dim: number, dtype: DType | null, product: boolean): Tensor {
  const { t: x, temp } = castInput(self, dtype);
  const out = allocOut(meta);
  const r = readable(x);
  const w = writable(out);
  const L = lines(x.shape, normalizeDim('cumsum', dim, x.shape.length), r.strides, r.offset, out.strides);
  const src = r.data;
  const dst = w.data;
  const toBool = meta.dtype === 'bool';
  for (let l = 0; l < L.inBase.length; l++) {
    let acc = product ? 1 : 0;
    for (let i = 0, pi = L.inBase[l]!, po = L.outBase[l]!; i < L.len; i++, pi += L.inStep, po += L.outStep) {
      acc = product ? acc * src[pi]! : acc + src[pi]!;
      dst[po] = toBool ? (acc !== 0 && acc === acc ? 1 : 0) : acc;
    }
  }
  w.commit();
  if (temp) x.dispose();
  return out;
}

registerKernel(R.cumsum, 'cpu', (ctx, self, dim, dtype) => scanKernel(ctx.out, self, intOf(dim), dtypeOf(dtype), false));
registerKernel(R.cumprod, 'cpu', (ctx, self, dim, dtype) => scanKernel(ctx.out, self, intOf(dim), dtypeOf(dtype), true));

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
/** Index bits packed under the value key: lines up to 2^21 long use the packed fast path. */
const INDEX_RANGE = 2 ** 21;

/**
 * An order-preserving unsigned 32-bit key for a float32-representable value: NaN above +inf,
 * -0 equal to +0. `descending` inverts it, so both directions sort ascending on the key.
 */
function sortKey(v: number, descending: boolean): number {
  let u: number;
  if (v !== v) u = 0xffffffff;
  else {
    f32[0] = v === 0 ? 0 : v;
    const b = u32[0]!;
    u = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
  }
  return descending ? 0xffffffff - u : u;
}

/** Comparator on positions of `vals`: NaN above every number, ties by position (stable). */
function comparator(vals: Float64Array, descending: boolean): (a: number, b: number) => number {
  if (descending) {
    return (a, b) => {
      const x = vals[a]!;
      const y = vals[b]!;
      if (x > y) return -1;
      if (x < y) return 1;
      const xn = x !== x;
      if (xn !== (y !== y)) return xn ? -1 : 1;
      return a - b;
    };
  }
  return (a, b) => {
    const x = vals[a]!;
    const y = vals[b]!;
    if (x < y) return -1;
    if (x > y) return 1;
    const xn = x !== x;
    if (xn !== (y !== y)) return xn ? 1 : -1;
    return a - b;
  };
}

/**
 * Sorts each line along `dim` and hands the first `count` positions of its order to `emit`. NaN
 * orders above every number (last ascending, first descending); ties keep their original order,
 * so every sort is stable. Values that fit float32 (every dtype but int64) sort as packed
 * (key, position) doubles with the native numeric sort; small `count`s use a bounded insertion
 * selection instead of a full sort.
 */
function sortLines(
  x: Tensor,
  dim: number,
  outStrides: readonly number[],
  descending: boolean,
  count: number,
  emit: (src: NumArray, perm: Int32Array, inBase: number, inStep: number, outBase: number, outStep: number) => void,
): void {
  const r = readable(x);
  const d = normalizeDim('sort', dim, x.shape.length);
  const L = lines(x.shape, d, r.strides, r.offset, outStrides);
  const len = L.len;
  const vals = new Float64Array(len);
  const perm = new Int32Array(len);
  const keys = new Float64Array(len);
  const cmp = comparator(vals, descending);
  const packed = x.dtype !== 'int64' && len <= INDEX_RANGE;
  const select = count * 16 <= len;
  const src = r.data;
  if (count === 0) return;
  for (let l = 0; l < L.inBase.length; l++) {
    const base = L.inBase[l]!;
    if (select) {
      // Keep the best `count` positions sorted in perm[0..n); later equal values never overtake.
      let n = 0;
      for (let i = 0, p = base; i < len; i++, p += L.inStep) {
        vals[i] = src[p]!;
        if (n === count && cmp(i, perm[n - 1]!) >= 0) continue;
        let j = n < count ? n++ : n - 1;
        while (j > 0 && cmp(i, perm[j - 1]!) < 0) {
          perm[j] = perm[j - 1]!;
          j--;
        }
        perm[j] = i;
      }
    } else if (packed) {
      for (let i = 0, p = base; i < len; i++, p += L.inStep) keys[i] = sortKey(src[p]!, descending) * INDEX_RANGE + i;
      keys.sort();
      for (let i = 0; i < len; i++) perm[i] = keys[i]! % INDEX_RANGE;
    } else {
      for (let i = 0, p = base; i < len; i++, p += L.inStep) {
        vals[i] = src[p]!;
        perm[i] = i;
      }
      perm.sort(cmp);
    }
    emit(src, perm, base, L.inStep, L.outBase[l]!, L.outStep);
  }
}

function sortInto(x: Tensor, dim: number, descending: boolean, values: Tensor | null, indices: Tensor, count: number): void {
  const wv = values ? writable(values) : null;
  const wi = writable(indices);
  const vd = wv ? wv.data : null;
  const id = wi.data;
  sortLines(x, dim, indices.strides, descending, count, (src, perm, inBase, inStep, outBase, outStep) => {
    for (let i = 0, po = outBase; i < count; i++, po += outStep) {
      const j = perm[i]!;
      id[po] = j;
      if (vd) vd[po] = src[inBase + j * inStep]!;
    }
  });
  wv?.commit();
  wi.commit();
}

registerKernel(R.sort, 'cpu', (ctx, self, dim, descending) => {
  const values = allocOut(ctx.out[0]!);
  const indices = allocOut(ctx.out[1]!);
  const d = normalizeDim('sort', intOf(dim), self.shape.length);
  sortInto(self, d, descending === true, values, indices, self.shape.length === 0 ? 1 : self.shape[d]!);
  return [values, indices];
});

registerKernel(R.argsort, 'cpu', (ctx, self, dim, descending) => {
  const indices = allocOut(ctx.out);
  const d = normalizeDim('argsort', intOf(dim), self.shape.length);
  sortInto(self, d, descending === true, null, indices, self.shape.length === 0 ? 1 : self.shape[d]!);
  return indices;
});

registerKernel(R.topk, 'cpu', (ctx, self, k, dim, largest) => {
  const values = allocOut(ctx.out[0]!);
  const indices = allocOut(ctx.out[1]!);
  const d = normalizeDim('topk', intOf(dim), self.shape.length);
  sortInto(self, d, largest === true, values, indices, intOf(k));
  return [values, indices];
});
