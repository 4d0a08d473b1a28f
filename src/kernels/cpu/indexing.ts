/**
 * CPU kernels for the indexing group. Read-only inputs are taken as dense row-major copies
 * (denseValues), so index arithmetic is plain row-major; outputs are written through the meta
 * function's strides (fromDense). Scatter-like ops work on a dense copy of `self` and write it
 * back only after every index has been checked, so an out-of-range index never leaves a
 * half-written tensor. Views (split, chunk) are built from the meta result and work on any device.
 */
import {
  cat,
  catSkipped,
  checkValuesBroadcast,
  chunk,
  embedding,
  gather,
  indexPut,
  indexPut_,
  indexSelect,
  maskedFill,
  maskedFill_,
  scatter,
  scatter_,
  scatterAdd,
  scatterAdd_,
  split,
  splitWithSizes,
  stack,
  tril,
  triu,
} from '../../ops/defs/indexing.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta, ScalarValue } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { broadcastShapes, broadcastStrides, contiguousStrides, fmtShape, isContiguousStrides, normalizeDim, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { castValue } from '../../tensor/typed.js';
import { allocOut, computeArrayFor, denseValues, fromDense, type NumArray, scatterStrided, writable } from './numeric.js';
import { copyInto, mapBinaryInto } from './pointwise-loop.js';

// ---------------------------------------------------------------------------------------------
// helpers

function outOfRange(op: string, value: number, dim: number, size: number, what = ''): RangeError {
  return new RangeError(`${op}: index ${value} is out of bounds for dim ${dim}${what} with size ${size}`);
}

/** A 0-d tensor behaves as shape [1] in index arithmetic. */
function asAtLeast1d(shape: readonly number[]): readonly number[] {
  return shape.length === 0 ? [1] : shape;
}

/** A dense, writable row-major copy of a tensor's values (never aliases storage). */
function denseCopy(t: Tensor): NumArray {
  const out = computeArrayFor(t.dtype, numel(t.shape));
  out.set(denseValues(t));
  return out;
}

/**
 * Index values as a dense row-major array. int64 storage is read as pairs of 32-bit words (low
 * word first, exact below 2^53) instead of through BigInt, which dominates the cost otherwise.
 */
function indexValues(t: Tensor): NumArray {
  if (t.dtype !== 'int64') return denseValues(t);
  t.assertAlive('cpu kernel');
  const n = numel(t.shape);
  const out = new Float64Array(n);
  if (n === 0) return out;
  const words = new Int32Array(t.storage.cpuArrayBuffer(), 0, t.storage.nbytes >> 2);
  const shape = asAtLeast1d(t.shape);
  const strides = t.ndim === 0 ? [0] : t.strides;
  const r = shape.length;
  const inner = shape[r - 1]!;
  const innerStride = strides[r - 1]! * 2;
  const it = new Walker(shape.slice(0, r - 1), [strides.slice(0, r - 1)]);
  for (let i = 0; i < n; ) {
    let p = (t.offset + it.off[0]!) * 2;
    for (let j = 0; j < inner; j++, i++, p += innerStride) out[i] = (words[p]! >>> 0) + words[p + 1]! * 4294967296;
    it.next();
  }
  return out;
}

/**
 * Row-major odometer over `shape` carrying one running offset per operand, each with its own
 * strides. `next()` advances to the next element.
 */
class Walker {
  readonly off: number[];
  private readonly pos: number[];
  constructor(
    private readonly shape: readonly number[],
    private readonly strides: readonly (readonly number[])[],
  ) {
    this.off = strides.map(() => 0);
    this.pos = new Array<number>(shape.length).fill(0);
  }
  next(): void {
    const { shape, strides, off, pos } = this;
    for (let k = shape.length - 1; k >= 0; k--) {
      pos[k]!++;
      for (let j = 0; j < off.length; j++) off[j]! += strides[j]![k]!;
      if (pos[k]! < shape[k]!) return;
      for (let j = 0; j < off.length; j++) off[j]! -= strides[j]![k]! * shape[k]!;
      pos[k] = 0;
    }
  }
}

/** Writes dense values back into `self` through its strides (the in-place ops' last step). */
function writeBack(self: Tensor, dense: NumArray): Tensor {
  const w = writable(self);
  scatterStrided(dense, w);
  w.commit();
  return self;
}

// ---------------------------------------------------------------------------------------------
// embedding, indexSelect, gather

/**
 * Rows `ix` of a contiguous 16-bit float (bfloat16 / float16) tensor viewed as [rows, inner],
 * copied as raw words into a new contiguous output, or null for other inputs. Decoding the whole
 * source first (denseValues) cost a decode step of a bfloat16 Qwen3-0.6B 1.7 s for the embedding
 * (151936 x 1024) and 0.3 s for the rotary tables' indexSelect, to read one row each; a word copy
 * is also bit-exact.
 */
function gatherHalfRows(meta: OutMeta, src: Tensor, ix: ArrayLike<number>, inner: number): Tensor | null {
  if ((src.dtype !== 'bfloat16' && src.dtype !== 'float16') || meta.dtype !== src.dtype || !isContiguousStrides(src.shape, src.strides)) return null;
  if (!isContiguousStrides(meta.shape, meta.strides)) return null;
  const out = allocOut(meta);
  const from = new Uint16Array(src.storage.cpuArrayBuffer(), src.offset * 2, numel(src.shape));
  const to = new Uint16Array(out.storage.cpuArrayBuffer(), out.offset * 2, ix.length * inner);
  for (let i = 0; i < ix.length; i++) to.set(from.subarray(ix[i]! * inner, ix[i]! * inner + inner), i * inner);
  return out;
}

registerKernel(embedding, 'cpu', (ctx, input, weight) => {
  const ix = indexValues(input);
  const num = weight.shape[0]!;
  const dim = weight.shape[1]!;
  for (let i = 0; i < ix.length; i++) if (ix[i]! < 0 || ix[i]! >= num) throw outOfRange('embedding', ix[i]!, 0, num, " of 'weight'");
  const half = gatherHalfRows(ctx.out, weight, ix, dim);
  if (half) return half;
  const w = denseValues(weight);
  const out = computeArrayFor(weight.dtype, ix.length * dim);
  for (let i = 0; i < ix.length; i++) {
    const v = ix[i]!;
    if (v < 0 || v >= num) throw outOfRange('embedding', v, 0, num, " of 'weight'");
    out.set(w.subarray(v * dim, v * dim + dim), i * dim);
  }
  return fromDense(ctx.out, out);
});

registerKernel(indexSelect, 'cpu', (ctx, self, dim, index) => {
  const shape = asAtLeast1d(self.shape);
  const d = normalizeDim('indexSelect', dim as number, self.ndim);
  const size = shape[d]!;
  const ix = indexValues(index);
  for (let j = 0; j < ix.length; j++) {
    const v = ix[j]!;
    if (v < 0 || v >= size) throw outOfRange('indexSelect', v, d, size);
  }
  const n = ix.length;
  const outer = numel(shape.slice(0, d));
  const inner = numel(shape.slice(d + 1));
  const half = outer === 1 ? gatherHalfRows(ctx.out, self, ix, inner) : null;
  if (half) return half;
  const xs = denseValues(self);
  const out = computeArrayFor(self.dtype, outer * n * inner);
  for (let o = 0; o < outer; o++) {
    for (let j = 0; j < n; j++) {
      const src = (o * size + ix[j]!) * inner;
      const dst = (o * n + j) * inner;
      for (let i = 0; i < inner; i++) out[dst + i] = xs[src + i]!;
    }
  }
  return fromDense(ctx.out, out);
});

registerKernel(gather, 'cpu', (ctx, self, dim, index) => {
  const xShape = asAtLeast1d(self.shape);
  const iShape = asAtLeast1d(index.shape);
  const d = normalizeDim('gather', dim as number, self.ndim);
  const xStr = contiguousStrides(xShape);
  const dimStride = xStr[d]!;
  const size = xShape[d]!;
  const walk = [...xStr];
  walk[d] = 0;
  const xs = denseValues(self);
  const ix = indexValues(index);
  const n = ix.length;
  const out = computeArrayFor(self.dtype, n);
  if (n === 0) return fromDense(ctx.out, out);
  // Odometer over all but the last index dim; the last dim runs as a tight loop.
  const r = iShape.length;
  const inner = iShape[r - 1]!;
  const innerWalk = walk[r - 1]!;
  const it = new Walker(iShape.slice(0, r - 1), [walk.slice(0, r - 1)]);
  for (let i = 0; i < n; ) {
    let base = it.off[0]!;
    for (let j = 0; j < inner; j++, i++, base += innerWalk) {
      const v = ix[i]!;
      if (v < 0 || v >= size) throw outOfRange('gather', v, d, size);
      out[i] = xs[base + v * dimStride]!;
    }
    it.next();
  }
  return fromDense(ctx.out, out);
});

// ---------------------------------------------------------------------------------------------
// scatter, scatterAdd

type Combine = (cur: number, v: number) => number;

function combineFor(reduce: string | null): Combine | null {
  switch (reduce) {
    case null:
    case undefined:
      return null;
    case 'sum':
    case 'add':
    case 'mean':
      return (a, b) => a + b;
    case 'prod':
    case 'multiply':
      return (a, b) => a * b;
    case 'amax':
      return (a, b) => (Number.isNaN(a) || a >= b ? a : b);
    case 'amin':
      return (a, b) => (Number.isNaN(a) || a <= b ? a : b);
    default:
      throw new Error(`scatter: unknown reduce '${reduce}'`);
  }
}

/**
 * Where each write of a scatter or indexPut goes: `visit(p, s)` per write in the CPU kernel's
 * order, p the destination's row-major position in self, s the source's row-major position in src
 * / values (-1 for a scalar). Indices are all checked before the first visit. The cuda kernels
 * (src/kernels/cuda/scatter.ts) plan their device writes with it, so both devices share the index
 * semantics (negative indices, bool masks, broadcasting) and the error messages.
 */
export type WriteVisitor = (p: number, s: number) => void;

/** Scatters src into `dense` (self's values, row-major) along dim; checks every index. With `visit`, only visits the writes (`dense` and src's values are not read). */
export function scatterDense(op: string, dense: NumArray | null, self: Tensor, dim: number, index: Tensor, src: Tensor | ScalarValue, reduce: string | null, visit?: WriteVisitor): void {
  const xShape = asAtLeast1d(self.shape);
  const iShape = asAtLeast1d(index.shape);
  const d = normalizeDim(op, dim, self.ndim);
  const xStr = contiguousStrides(xShape);
  const dimStride = xStr[d]!;
  const size = xShape[d]!;
  const walk = [...xStr];
  walk[d] = 0;
  const ix = indexValues(index);
  const n = ix.length;
  for (let i = 0; i < n; i++) {
    const v = ix[i]!;
    if (v < 0 || v >= size) throw outOfRange(op, v, d, size);
  }
  const isBool = self.dtype === 'bool';
  const combine = combineFor(reduce);
  const isSum = reduce === 'sum' || reduce === 'add' || reduce === 'mean';
  const counts = reduce === 'mean' ? new Map<number, number>() : null;
  let srcData: NumArray | null = null;
  let srcStr: readonly number[] = new Array<number>(iShape.length).fill(0);
  let scalar = 0;
  if (typeof src === 'object') {
    srcData = visit ? null : denseValues(src);
    srcStr = contiguousStrides(asAtLeast1d(src.shape));
  } else {
    scalar = castValue(Number(src), self.dtype);
  }
  if (n === 0) return;
  if (visit) {
    const it = new Walker(iShape, [walk, srcStr]);
    for (let i = 0; i < n; i++) {
      visit(it.off[0]! + ix[i]! * dimStride, typeof src === 'object' ? it.off[1]! : -1);
      it.next();
    }
    return;
  }
  if (dense === null) throw new Error(`${op}: internal error: no destination values`);
  // Odometer over all but the last index dim; the last dim runs as a tight loop.
  const r = iShape.length;
  const inner = iShape[r - 1]!;
  const innerWalk = walk[r - 1]!;
  const innerSrc = srcStr[r - 1]!;
  const it = new Walker(iShape.slice(0, r - 1), [walk.slice(0, r - 1), srcStr.slice(0, r - 1)]);
  for (let i = 0; i < n; ) {
    let base = it.off[0]!;
    let sp = it.off[1]!;
    if (combine === null) {
      for (let j = 0; j < inner; j++, i++, base += innerWalk, sp += innerSrc) {
        dense[base + ix[i]! * dimStride] = srcData === null ? scalar : srcData[sp]!;
      }
    } else {
      for (let j = 0; j < inner; j++, i++, base += innerWalk, sp += innerSrc) {
        const p = base + ix[i]! * dimStride;
        const v = srcData === null ? scalar : srcData[sp]!;
        const c = isSum ? dense[p]! + v : combine(dense[p]!, v);
        dense[p] = isBool ? (c !== 0 ? 1 : 0) : c;
        if (counts) counts.set(p, (counts.get(p) ?? 0) + 1);
      }
    }
    it.next();
  }
  if (counts) {
    // scatter_reduce 'mean' with include_self: (self + sum of src) / (count + 1); floor for ints.
    const floor = !isFloating(self.dtype);
    for (const [p, c] of counts) {
      const m = dense[p]! / (c + 1);
      dense[p] = isBool ? (m !== 0 ? 1 : 0) : floor ? Math.floor(m) : m;
    }
  }
}

registerKernel(scatter, 'cpu', (ctx, self, dim, index, src, reduce = null) => {
  const dense = denseCopy(self);
  scatterDense('scatter', dense, self, dim as number, index, src, reduce as string | null);
  return fromDense(ctx.out, dense);
});

registerKernel(scatter_, 'cpu', (_ctx, self, dim, index, src, reduce = null) => {
  const dense = denseCopy(self);
  scatterDense('scatter_', dense, self, dim as number, index, src, reduce as string | null);
  return writeBack(self, dense);
});

registerKernel(scatterAdd, 'cpu', (ctx, self, dim, index, src) => {
  const dense = denseCopy(self);
  scatterDense('scatterAdd', dense, self, dim as number, index, src, 'sum');
  return fromDense(ctx.out, dense);
});

registerKernel(scatterAdd_, 'cpu', (_ctx, self, dim, index, src) => {
  const dense = denseCopy(self);
  scatterDense('scatterAdd_', dense, self, dim as number, index, src, 'sum');
  return writeBack(self, dense);
});

// ---------------------------------------------------------------------------------------------
// indexPut

interface AdvIndex {
  /** The dim of self this index addresses. */
  readonly dim: number;
  readonly data: NumArray;
  readonly shape: readonly number[];
}

/** Bool masks become one 1-d index per masked dim (the nonzero coordinates, row-major). */
function expandIndices(self: Tensor, indices: readonly (Tensor | null)[]): AdvIndex[] {
  const adv: AdvIndex[] = [];
  let d = 0;
  for (const t of indices) {
    if (t === null || t === undefined) {
      d++;
      continue;
    }
    if (t.dtype === 'bool' || t.dtype === 'uint8') {
      const m = denseValues(t);
      const k = t.ndim;
      let nnz = 0;
      for (let i = 0; i < m.length; i++) if (m[i] !== 0) nnz++;
      const coords = Array.from({ length: k }, () => new Float64Array(nnz));
      const mStr = contiguousStrides(t.shape);
      let c = 0;
      for (let i = 0; i < m.length; i++) {
        if (m[i] === 0) continue;
        let rem = i;
        for (let j = 0; j < k; j++) {
          coords[j]![c] = Math.floor(rem / mStr[j]!);
          rem -= coords[j]![c]! * mStr[j]!;
        }
        c++;
      }
      for (let j = 0; j < k; j++) adv.push({ dim: d + j, data: coords[j]!, shape: [nnz] });
      d += k;
    } else {
      adv.push({ dim: d, data: indexValues(t), shape: t.shape });
      d++;
    }
  }
  return adv;
}

/** indexPut into `dense` (self's values, row-major); with `visit`, only visits the writes (see WriteVisitor). */
export function indexPutDense(op: string, dense: NumArray | null, self: Tensor, indices: readonly (Tensor | null)[], values: Tensor | ScalarValue, accumulate: boolean, visit?: WriteVisitor): void {
  const sShape = self.shape;
  const cs = contiguousStrides(sShape);
  const adv = expandIndices(self, indices);
  let b: number[];
  try {
    b = broadcastShapes(op, ...adv.map((a) => a.shape));
  } catch {
    throw new Error(`${op}: shape mismatch: indexing tensors could not be broadcast together with shapes ${adv.map((a) => fmtShape(a.shape)).join(', ')}`);
  }
  const advDims = adv.map((a) => a.dim);
  const isAdv = (d: number): boolean => advDims.includes(d);
  const sliceDims: number[] = [];
  for (let d = 0; d < sShape.length; d++) if (!isAdv(d)) sliceDims.push(d);
  // Result dims: each is either a slice of self dim `d` or broadcast-index dim `bi`.
  type Role = { slice: number } | { bdim: number };
  const roles: Role[] = [];
  if (adv.length === 0) sliceDims.forEach((d) => roles.push({ slice: d }));
  else {
    const sorted = [...new Set(advDims)].sort((x, y) => x - y);
    const first = sorted[0]!;
    const consecutive = sorted[sorted.length - 1]! - first === sorted.length - 1;
    const bRoles: Role[] = b.map((_, i) => ({ bdim: i }));
    if (consecutive) {
      sliceDims.filter((d) => d < first).forEach((d) => roles.push({ slice: d }));
      roles.push(...bRoles);
      sliceDims.filter((d) => d > first).forEach((d) => roles.push({ slice: d }));
    } else {
      roles.push(...bRoles);
      sliceDims.forEach((d) => roles.push({ slice: d }));
    }
  }
  const rShape = roles.map((r) => ('slice' in r ? sShape[r.slice]! : b[r.bdim]!));
  const sliceStr = roles.map((r) => ('slice' in r ? cs[r.slice]! : 0));
  // Flattened self offset of every broadcast-index position, checked (and wrapped) up front, so
  // nothing is written when an index is out of range.
  const nb = numel(b);
  const advOff = new Float64Array(nb);
  if (adv.length > 0 && nb > 0) {
    const bw = new Walker(b, adv.map((a) => broadcastStrides(a.shape, contiguousStrides(a.shape), b)));
    for (let i = 0; i < nb; i++) {
      let p = 0;
      for (let k = 0; k < adv.length; k++) {
        const a = adv[k]!;
        const size = sShape[a.dim]!;
        let v = a.data[bw.off[k]!]!;
        if (v < -size || v >= size) throw outOfRange(op, v, a.dim, size);
        if (v < 0) v += size;
        p += v * cs[a.dim]!;
      }
      advOff[i] = p;
      bw.next();
    }
  }
  const bStr = contiguousStrides(b);
  const advStr = roles.map((r) => ('bdim' in r ? bStr[r.bdim]! : 0));
  let vData: NumArray | null = null;
  let vStr: number[] = new Array<number>(rShape.length).fill(0);
  let scalar = 0;
  if (typeof values === 'object') {
    checkValuesBroadcast(op, values.shape, rShape);
    vData = visit ? null : denseValues(values);
    const vShape = values.shape.slice(Math.max(0, values.ndim - rShape.length));
    vStr = broadcastStrides(vShape, contiguousStrides(vShape), rShape);
  } else {
    scalar = castValue(Number(values), self.dtype);
  }
  const n = numel(rShape);
  if (n === 0) return;
  const isBool = self.dtype === 'bool';
  // With a visitor nothing is written (dense may be null).
  const dst: NumArray = dense ?? new Float64Array(0);
  // Odometer over all but the last result dim; the last runs inline over three operands.
  const r = rShape.length;
  const inner = r === 0 ? 1 : rShape[r - 1]!;
  const last = (st: number[]): number => (r === 0 ? 0 : st[r - 1]!);
  const [sIn, aIn, vIn] = [last(sliceStr), last(advStr), last(vStr)];
  const outer = (st: number[]): number[] => st.slice(0, Math.max(r - 1, 0));
  const it = new Walker(outer(rShape), [outer(sliceStr), outer(advStr), outer(vStr)]);
  for (let i = 0; i < n; i += inner) {
    let so = it.off[0]!;
    let ao = it.off[1]!;
    let vo = it.off[2]!;
    for (let j = 0; j < inner; j++, so += sIn, ao += aIn, vo += vIn) {
      const p = so + advOff[ao]!;
      if (visit) {
        visit(p, typeof values === 'object' ? vo : -1);
        continue;
      }
      const val = vData === null ? scalar : vData[vo]!;
      if (!accumulate) dst[p] = val;
      else if (isBool) dst[p] = dst[p] !== 0 || val !== 0 ? 1 : 0;
      else dst[p] = dst[p]! + val;
    }
    it.next();
  }
}

registerKernel(indexPut, 'cpu', (ctx, self, indices, values, accumulate) => {
  const dense = denseCopy(self);
  indexPutDense('indexPut', dense, self, indices as readonly (Tensor | null)[], values, accumulate as boolean);
  return fromDense(ctx.out, dense);
});

registerKernel(indexPut_, 'cpu', (_ctx, self, indices, values, accumulate) => {
  const dense = denseCopy(self);
  indexPutDense('indexPut_', dense, self, indices as readonly (Tensor | null)[], values, accumulate as boolean);
  return writeBack(self, dense);
});

// ---------------------------------------------------------------------------------------------
// maskedFill

function fillValue(value: Tensor | ScalarValue, dtype: DType): number {
  const v = typeof value === 'object' ? Number(value.item()) : Number(value);
  return castValue(v, dtype);
}

registerKernel(maskedFill, 'cpu', (ctx, self, mask, value) => {
  const v = fillValue(value, self.dtype);
  const out = allocOut(ctx.out);
  mapBinaryInto(out, self, mask, (x, m) => (m !== 0 ? v : x));
  return out;
});

registerKernel(maskedFill_, 'cpu', (_ctx, self, mask, value) => {
  const v = fillValue(value, self.dtype);
  mapBinaryInto(self, self, mask, (x, m) => (m !== 0 ? v : x));
  return self;
});

// ---------------------------------------------------------------------------------------------
// cat, stack

registerKernel(cat, 'cpu', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  const kept = tensors.filter((t) => !catSkipped(t));
  if (kept.length === 0 || out.numel() === 0) return out;
  const d = normalizeDim('cat', dim as number, kept[0]!.ndim);
  let start = 0;
  for (const t of kept) {
    const n = t.shape[d]!;
    if (n === 0) continue;
    const view = new Tensor(out.storage, out.dtype, t.shape, out.strides, out.offset + start * out.strides[d]!);
    copyInto(view, t);
    view.dispose();
    start += n;
  }
  return out;
});

registerKernel(stack, 'cpu', (ctx, tensors, dim) => {
  const out = allocOut(ctx.out);
  if (out.numel() === 0) return out;
  const d = normalizeDim('stack', dim as number, tensors[0]!.ndim + 1);
  const strides = out.strides.filter((_, k) => k !== d);
  tensors.forEach((t, i) => {
    const view = new Tensor(out.storage, out.dtype, t.shape, strides, out.offset + i * out.strides[d]!);
    copyInto(view, t);
    view.dispose();
  });
  return out;
});

// ---------------------------------------------------------------------------------------------
// split, splitWithSizes, chunk

/**
 * The views a split-like op's meta describes, over `self`'s storage. Device-independent, so other
 * accelerators register this same kernel.
 */
export function viewsFromMeta(self: Tensor, metas: readonly OutMeta[]): Tensor[] {
  return metas.map((m) => new Tensor(self.storage, self.dtype, m.shape, m.strides, m.offset ?? self.offset));
}

/** The kernel of split, splitWithSizes and chunk on every device. */
export function splitViewKernel(ctx: { readonly out: readonly OutMeta[] }, self: Tensor): Tensor[] {
  self.assertAlive('split');
  return viewsFromMeta(self, ctx.out);
}

registerKernel(split, 'cpu', splitViewKernel);
registerKernel(splitWithSizes, 'cpu', splitViewKernel);
registerKernel(chunk, 'cpu', splitViewKernel);

// ---------------------------------------------------------------------------------------------
// tril, triu

function triKernel(meta: OutMeta, self: Tensor, diagonal: number, lower: boolean): Tensor {
  const xs = denseValues(self);
  const rows = self.shape[self.ndim - 2]!;
  const cols = self.shape[self.ndim - 1]!;
  const n = xs.length;
  const out = computeArrayFor(self.dtype, n);
  const mat = rows * cols;
  for (let base = 0; base < n; base += mat) {
    for (let i = 0; i < rows; i++) {
      const row = base + i * cols;
      for (let j = 0; j < cols; j++) {
        const keep = lower ? j - i <= diagonal : j - i >= diagonal;
        out[row + j] = keep ? xs[row + j]! : 0;
      }
    }
  }
  return fromDense(meta, out);
}

registerKernel(tril, 'cpu', (ctx, self, diagonal) => triKernel(ctx.out, self, diagonal as number, true));
registerKernel(triu, 'cpu', (ctx, self, diagonal) => triKernel(ctx.out, self, diagonal as number, false));
