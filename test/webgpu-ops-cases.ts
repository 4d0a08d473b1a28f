/**
 * Cases for the webgpu kernels of the ops issue #20 brought to webgpu (scans, sorting, logical and
 * moment reductions, norms, indexing writes, masks, pooling, convolution): each a function of
 * CPU-built inputs (test/helpers/make.ts: contiguous, transposed, or strided with junk in the gaps),
 * which the test runs on webgpu (the same layouts) and on the CPU in float64 (floating inputs
 * widened), over the dtypes each op takes, with the edge cases that reach every path: empty
 * tensors, ties (sort is stable), NaN, negative and repeated indices, long rows (the workgroup scan,
 * the multi-pass sort), in-place forms and 64-bit data where a kernel moves words.
 */
import * as kiln from '../src/index.js';
import type { DType } from '../src/tensor/dtype.js';
import { numel } from '../src/tensor/layout.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { type Layout, makeTensor, randomInts, randomValues } from './helpers/make.js';

export interface OpCase {
  readonly label: string;
  /** Inputs on the CPU; their layouts are kept on webgpu. */
  readonly inputs: readonly Tensor[];
  /** The op over the inputs (a tensor, a list, or values / indices). */
  readonly run: (...xs: Tensor[]) => unknown;
  /** Results compared exactly: every one (true), or those listed (indices). */
  readonly exact?: boolean | readonly number[];
  /** Tolerance of the inexact results (default: the result dtype's, doubled for halves). */
  readonly tol?: { readonly atol: number; readonly rtol: number };
  /** The kernel reads data back to plan on the host (indexPut): garbage on Dawn's null backend. */
  readonly readsBack?: boolean;
}

let seed = 9000;
const FLOATS: readonly DType[] = ['float32', 'float16', 'bfloat16'];

/** A tensor of `dtype` in `layout`: floats in [lo, hi), integers in [lo, hi) (uint8 from 0), bool 0/1. */
export function make(shape: number[], dtype: DType = 'float32', layout: Layout = 'contiguous', lo = -2, hi = 2): Tensor {
  const n = numel(shape);
  const s = seed++;
  let v: number[];
  if (dtype === 'bool') v = randomInts(n, s, 0, 2);
  else if (dtype === 'int32' || dtype === 'int64') v = randomInts(n, s, lo, hi);
  else if (dtype === 'uint8') v = randomInts(n, s, 0, Math.max(hi, 1));
  else v = randomValues(n, s, lo, hi);
  return makeTensor(v, shape, dtype, layout);
}

/** Small integer values as `dtype` (ties for the sorts). */
const ties = (shape: number[], dtype: DType, layout: Layout = 'contiguous'): Tensor => makeTensor(randomInts(numel(shape), seed++, 0, 4), shape, dtype, layout);

/** An index tensor in [lo, hi). */
const index = (shape: number[], lo: number, hi: number, dtype: DType = 'int64', layout: Layout = 'contiguous'): Tensor => makeTensor(randomInts(numel(shape), seed++, lo, hi), shape, dtype, layout);

const vi = (r: { values: Tensor; indices: Tensor }): Tensor[] => [r.values, r.indices];

function logical(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool'] as DType[]) {
    const x = make([3, 37, 5], dt, 'strided', -1, 2);
    out.push({ label: `any(1) ${dt} strided`, inputs: [x], run: (t) => kiln.any(t, 1), exact: true });
    out.push({ label: `all([0, 2], keepdim) ${dt} strided`, inputs: [x], run: (t) => kiln.all(t, [0, 2], true), exact: true });
    out.push({ label: `all() ${dt} transposed long`, inputs: [make([7, 300], dt, 'transposed', 0, 3)], run: (t) => kiln.all(t), exact: true });
  }
  const nan = makeTensor([0, NaN, 0, 0, 0, 0], [2, 3]);
  out.push({ label: 'any with NaN (NaN is true)', inputs: [nan], run: (t) => kiln.any(t, 1), exact: true });
  out.push({ label: 'any/all of empty rows', inputs: [make([0, 4])], run: (t) => [kiln.any(t, 0), kiln.all(t, 0)], exact: true });
  return out;
}

function scans(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool'] as DType[]) {
    const lo = dt === 'uint8' ? 0 : -2;
    const isF = FLOATS.includes(dt);
    for (const [name, shape, layout, dim] of [
      ['short rows', [4, 9, 5], 'strided', 1],
      ['long rows', [3, 700], 'transposed', 1],
      ['dim 0', [40, 6], 'contiguous', 0],
    ] as const) {
      const x = make([...shape], dt, layout, lo, 3);
      out.push({ label: `cumsum ${dt} ${name}`, inputs: [x], run: (t) => kiln.cumsum(t, dim), exact: !isF, tol: isF && name === 'long rows' ? { atol: 1e-3, rtol: 1e-4 } : undefined });
      // Products of values in [0.5, 1.5) (floats) or [-2, 3) (integers, exact in int64 over 40 steps).
      const y = isF ? make([...shape], dt, layout, 0.5, 1.5) : x;
      out.push({ label: `cumprod ${dt} ${name}`, inputs: [y], run: (t) => kiln.cumprod(t, dim), exact: !isF, tol: isF ? { atol: 1e-4, rtol: 2e-3 } : undefined });
    }
  }
  out.push({ label: 'cumsum int32 with dtype float32', inputs: [make([5, 8], 'int32', 'contiguous', -9, 9)], run: (t) => kiln.cumsum(t, 1, 'float32'), exact: true });
  out.push({ label: 'cumsum float32 with dtype int32 (truncates first)', inputs: [make([5, 8], 'float32', 'contiguous', -9, 9)], run: (t) => kiln.cumsum(t, -1, 'int32'), exact: true });
  out.push({ label: 'cumsum int64 input', inputs: [index([6, 50], -1000, 1000)], run: (t) => kiln.cumsum(t, 1), exact: true });
  out.push({ label: 'cumsum int64 input to float32', inputs: [index([6, 50], -1000, 1000)], run: (t) => kiln.cumsum(t, 1, 'float32'), exact: true });
  // 3^33 < 2^53: past int32, still exact in the CPU's float64.
  out.push({ label: 'cumprod int32 past 2^31 (int64 result)', inputs: [makeTensor(new Array<number>(33).fill(3), [33], 'int32')], run: (t) => kiln.cumprod(t, 0), exact: true });
  out.push({ label: 'casts to int64 and back (floats truncate; past int32 split exactly)', inputs: [makeTensor([0, -1, -3.7, 2.9, 3e9, -3e9, -2147483648, 1e15, -65536.5], [9])], run: (t) => { const i = t.to('int64'); return [i, i.to('float32'), i.to('int32'), i.to('bool')]; }, exact: true });
  out.push({ label: 'casts of int32 and bool to int64', inputs: [makeTensor([-5, 7, 0, -2147483648], [4], 'int32'), makeTensor([1, 0, 1], [3], 'bool')], run: (a, b) => [a!.to('int64'), b!.to('int64'), a!.to('int64').to('float16')], exact: true });
  out.push({ label: 'cumsum 0-d', inputs: [makeTensor([2.5], [])], run: (t) => kiln.cumsum(t, 0) });
  out.push({ label: 'cumsum empty', inputs: [make([0, 5])], run: (t) => kiln.cumsum(t, 0) });
  return out;
}

function sorting(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool'] as DType[]) {
    const x = ties([4, 37, 3], dt, 'strided');
    out.push({ label: `sort(1) stable ties ${dt} strided`, inputs: [x], run: (t) => vi(kiln.sort(t, 1, false, true)), exact: true });
    out.push({ label: `sort(1, descending) stable ties ${dt}`, inputs: [x], run: (t) => vi(kiln.sort(t, 1, true, true)), exact: true });
    out.push({ label: `argsort(-1) ${dt} transposed`, inputs: [ties([5, 6, 11], dt, 'transposed')], run: (t) => kiln.argsort(t, -1, false, true), exact: true });
    if (dt !== 'bool') {
      const y = make([6, 29], dt, 'contiguous', -50, 50);
      out.push({ label: `topk(5) ${dt}`, inputs: [y], run: (t) => vi(kiln.topk(t, 5, 1)), exact: true });
      out.push({ label: `topk(3, dim 0, smallest) ${dt}`, inputs: [y], run: (t) => vi(kiln.topk(t, 3, 0, false)), exact: true });
    }
  }
  out.push({ label: 'sort long rows (multi-pass) with ties', inputs: [ties([3, 5000], 'float32')], run: (t) => vi(kiln.sort(t, 1, true, true)), exact: true });
  out.push({ label: 'topk(10) of a long row', inputs: [make([2, 9000])], run: (t) => vi(kiln.topk(t, 10, -1)), exact: true });
  out.push({ label: 'sort with NaN and -0 (NaN last; -0 ties +0)', inputs: [makeTensor([1, NaN, -0, 0, -Infinity, NaN, 2, -0], [8])], run: (t) => vi(kiln.sort(t, 0, false, true)), exact: true });
  out.push({ label: 'sort descending with NaN (NaN first)', inputs: [makeTensor([1, NaN, -3, Infinity, 0], [5])], run: (t) => vi(kiln.sort(t, 0, true, true)), exact: true });
  out.push({ label: 'topk k = 0 and k = len', inputs: [make([3, 7])], run: (t) => [...vi(kiln.topk(t, 0, 1)), ...vi(kiln.topk(t, 7, 1))], exact: true });
  out.push({ label: 'sort empty and 0-d', inputs: [make([0, 4]), makeTensor([3], [])], run: (a, b) => [...vi(kiln.sort(a!, 1)), ...vi(kiln.sort(b!, 0))], exact: true });
  return out;
}

function moments(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of FLOATS) {
    const x = make([4, 33, 6], dt, 'strided');
    out.push({ label: `var(1) ${dt}`, inputs: [x], run: (t) => kiln.var(t, 1) });
    out.push({ label: `std([0, 2], correction 0, keepdim) ${dt}`, inputs: [x], run: (t) => kiln.std(t, [0, 2], 0, true) });
    out.push({ label: `logsumexp(-1) ${dt}`, inputs: [x], run: (t) => kiln.logsumexp(t, -1) });
  }
  out.push({ label: 'logsumexp int32 input', inputs: [make([3, 9], 'int32', 'contiguous', -5, 5)], run: (t) => kiln.logsumexp(t, 1) });
  // Infinite entries: the shift is 0 where the max is infinite. (An all -inf row needs log(0) = -inf,
  // which SwiftShader's log does not give: the WGSL math table's business, not this kernel's.)
  out.push({ label: 'logsumexp with infinite entries', inputs: [makeTensor([-Infinity, 3, 1, 2, Infinity, 0], [3, 2])], run: (t) => kiln.logsumexp(t, 1) });
  out.push({ label: 'var of one element (inf / NaN)', inputs: [makeTensor([1, 2, 3], [3, 1])], run: (t) => kiln.var(t, 1) });
  return out;
}

function norms(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of FLOATS) {
    const x = make([2, 6, 5, 3], dt, 'strided');
    const w = make([6], dt);
    const b = make([6], dt);
    out.push({ label: `groupNorm(3) ${dt} strided`, inputs: [x, w, b], run: (t, ww, bb) => kiln.groupNorm(t, 3, ww, bb, 1e-5) });
    out.push({ label: `groupNorm(2) no affine ${dt} channels_last`, inputs: [make([2, 4, 3, 3], dt, 'channelsLast')], run: (t) => kiln.groupNorm(t, 2) });
    out.push({ label: `layerNorm([5, 3]) ${dt}`, inputs: [x, make([5, 3], dt), make([5, 3], dt)], run: (t, ww, bb) => kiln.layerNorm(t, [5, 3], ww, bb) });
    out.push({ label: `batchNorm eval ${dt}`, inputs: [x, make([6]), make([6], 'float32', 'contiguous', 0.5, 2), w, b], run: (t, m, v, ww, bb) => kiln.batchNorm(t, m, v, ww, bb, false) });
    out.push({
      label: `batchNorm training + running statistics ${dt}`,
      inputs: [x, make([6]), make([6], 'float32', 'contiguous', 0.5, 2), w, b],
      run: (t, m, v, ww, bb) => [kiln.batchNorm(t, m, v, ww, bb, true, 0.2), m!, v!],
    });
  }
  out.push({ label: 'groupNorm 3-d input', inputs: [make([3, 4, 10])], run: (t) => kiln.groupNorm(t, 4) });
  return out;
}

function gathers(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool', 'int64'] as DType[]) {
    const x = make([5, 7, 4], dt, 'strided', -9, 9);
    out.push({ label: `gather(1) ${dt} strided self`, inputs: [x, index([5, 3, 4], 0, 7)], run: (t, i) => kiln.gather(t, 1, i!), exact: true });
  }
  out.push({ label: 'gather(0) int32 index, transposed', inputs: [make([6, 5], 'float32', 'transposed'), index([9, 5], 0, 6, 'int32', 'transposed')], run: (t, i) => kiln.gather(t, 0, i!), exact: true });
  out.push({ label: 'gather(-1) smaller index', inputs: [make([4, 8]), index([2, 3], 0, 8)], run: (t, i) => kiln.gather(t, -1, i!), exact: true });
  return out;
}

function scatters(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool', 'int64'] as DType[]) {
    const self = make([4, 6, 3], dt, 'strided', 0, 9);
    // Many index repeats: the last write in index order wins, as on the CPU.
    out.push({ label: `scatter(1) ${dt} repeated indices`, inputs: [self, index([4, 5, 3], 0, 3), make([4, 5, 3], dt, 'contiguous', 0, 9)], run: (s, i, v) => kiln.scatter(s!, 1, i!, v!), exact: true });
    out.push({ label: `scatter_(0) scalar ${dt}`, inputs: [self, index([2, 6, 3], 0, 4)], run: (s, i) => s!.scatter_(0, i!, 1), exact: true });
  }
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool'] as DType[]) {
    const isF = FLOATS.includes(dt);
    const self = make([4, 6, 3], dt, 'transposed', 1, 4);
    const src = make([4, 9, 3], dt, 'strided', 1, 4);
    const idx = index([4, 9, 3], 0, 6);
    out.push({ label: `scatterAdd(1) ${dt}`, inputs: [self, idx, src], run: (s, i, v) => kiln.scatterAdd(s!, 1, i!, v!), exact: !isF });
    out.push({ label: `scatterAdd_(1) ${dt} in place`, inputs: [self, idx, src], run: (s, i, v) => s!.scatterAdd_(1, i!, v!), exact: !isF });
    for (const r of ['sum', 'prod', 'mean', 'amax', 'amin'] as const) {
      if (dt === 'bool' && r === 'mean') continue;
      out.push({ label: `scatter(1, reduce ${r}) ${dt}`, inputs: [self, idx, src], run: (s, i, v) => kiln.scatter(s!, 1, i!, v!, r), exact: !isF, tol: r === 'prod' && isF ? { atol: 1e-3, rtol: 4e-3 } : undefined });
    }
  }
  out.push({ label: 'scatter reduce mean int32 floors', inputs: [make([3, 4], 'int32', 'contiguous', -9, 9), index([3, 6], 0, 4), make([3, 6], 'int32', 'contiguous', -9, 9)], run: (s, i, v) => kiln.scatter(s!, 1, i!, v!, 'mean'), exact: true });
  out.push({ label: 'scatter reduce scalar multiply', inputs: [make([3, 4]), index([3, 2], 0, 4)], run: (s, i) => kiln.scatter(s!, 1, i!, 3, 'multiply') });
  out.push({ label: 'scatterAdd empty index', inputs: [make([3, 4]), index([3, 0], 0, 4), make([3, 0])], run: (s, i, v) => kiln.scatterAdd(s!, 1, i!, v!), exact: true });
  out.push({ label: 'scatterAdd 0-d', inputs: [makeTensor([1.5], []), makeTensor([0], [], 'int64'), makeTensor([2], [])], run: (s, i, v) => kiln.scatterAdd(s!, 0, i!, v!) });
  return out;
}

function indexPuts(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool', 'int64'] as DType[]) {
    const self = make([5, 4, 3], dt, 'strided', 0, 9);
    out.push({ label: `indexPut two broadcast index lists ${dt}`, inputs: [self, index([3, 1], -5, 5), index([1, 4], 0, 4), make([3, 4, 3], dt, 'contiguous', 0, 9)], run: (s, i, j, v) => kiln.indexPut(s!, [i!, j!], v!), exact: true, readsBack: true });
    out.push({ label: `indexPut_ bool mask, scalar ${dt}`, inputs: [self, make([5, 4], 'bool')], run: (s, m) => s!.indexPut_([m!], 7), exact: true, readsBack: true });
    out.push({ label: `indexPut on dim 1 (null first) ${dt}`, inputs: [self, index([6], 0, 4), makeTensor([1], [1], dt)], run: (s, i, v) => kiln.indexPut(s!, [null as never, i!], v!), exact: true, readsBack: true });
  }
  for (const dt of [...FLOATS, 'int32', 'bool'] as DType[]) {
    const isF = FLOATS.includes(dt);
    out.push({
      label: `indexPut accumulate, repeated rows ${dt}`,
      inputs: [make([6, 5], dt, 'transposed', 0, 3), index([10], 0, 6), make([10, 5], dt, 'strided', 0, 3)],
      run: (s, i, v) => kiln.indexPut(s!, [i!], v!, true),
      exact: !isF,
      readsBack: true,
    });
  }
  // Distinct rows: with a repeated index, which write lands is unspecified (PyTorch too); random
  // indices repeated here once and NVIDIA kept another row than SwiftShader (H200, session 11).
  out.push({ label: 'indexPut_ rows (the row writer)', inputs: [make([6, 4]), makeTensor([4, 0, 2], [3], 'int64'), make([3, 4])], run: (s, i, v) => s!.indexPut_([i!], v!), exact: true });
  return out;
}

function masks(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32', 'uint8', 'bool', 'int64', 'float64'] as DType[]) {
    const x = make([3, 5, 4], dt, 'strided', 0, 9);
    out.push({ label: `maskedFill broadcast mask ${dt}`, inputs: [x, make([5, 1], 'bool')], run: (t, m) => kiln.maskedFill(t, m!, dt === 'bool' ? 1 : 3), exact: true });
    out.push({ label: `maskedFill_ 0-d value tensor ${dt}`, inputs: [x, make([3, 5, 4], 'bool', 'transposed'), makeTensor([5], [], dt)], run: (t, m, v) => t.maskedFill_(m!, v!), exact: true });
    for (const d of [-2, 0, 3]) {
      out.push({ label: `tril(${d}) ${dt}`, inputs: [x], run: (t) => kiln.tril(t, d), exact: true });
      out.push({ label: `triu(${d}) ${dt} transposed`, inputs: [make([2, 4, 6], dt, 'transposed', 0, 9)], run: (t) => kiln.triu(t, d), exact: true });
    }
  }
  out.push({ label: 'tril diagonal past the matrix', inputs: [make([3, 3])], run: (t) => [kiln.tril(t, 100), kiln.triu(t, 100), kiln.tril(t, -100)], exact: true });
  return out;
}

function pools(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of [...FLOATS, 'int32'] as DType[]) {
    const x = make([2, 3, 9, 8], dt, 'strided', -9, 9);
    out.push({ label: `maxPool2d 3x3 stride 2 pad 1 ${dt}`, inputs: [x], run: (t) => kiln.maxPool2d(t, 3, 2, 1), exact: true });
    out.push({ label: `maxPool2dWithIndices dilation 2 ceil ${dt}`, inputs: [x], run: (t) => vi(kiln.maxPool2dWithIndices(t, 2, 2, 0, 2, true)), exact: true });
  }
  for (const dt of FLOATS) {
    const x = make([2, 3, 9, 8], dt, 'channelsLast');
    out.push({ label: `avgPool2d 3x3 pad 1 ${dt} channels_last`, inputs: [x], run: (t) => kiln.avgPool2d(t, 3, 2, 1) });
    out.push({ label: `avgPool2d exclude pad, ceil ${dt}`, inputs: [x], run: (t) => kiln.avgPool2d(t, [3, 2], [2, 2], [1, 1], true, false) });
    out.push({ label: `avgPool2d divisor 5 ${dt}`, inputs: [x], run: (t) => kiln.avgPool2d(t, 2, 1, 0, false, true, 5) });
  }
  out.push({ label: 'maxPool2d unbatched with NaN', inputs: [makeTensor([1, NaN, 3, 4, 5, 6, NaN, 8, 9], [1, 3, 3])], run: (t) => vi(kiln.maxPool2dWithIndices(t, 2, 1)), exact: true });
  out.push({ label: 'maxPool2d ties: the first index', inputs: [makeTensor([1, 1, 1, 1], [1, 1, 2, 2])], run: (t) => vi(kiln.maxPool2dWithIndices(t, 2)), exact: true });
  return out;
}

function convs(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of FLOATS) {
    const tol = dt === 'float32' ? { atol: 1e-4, rtol: 1e-4 } : undefined;
    out.push({ label: `conv2d 3x3 pad 1 bias ${dt}`, inputs: [make([2, 4, 7, 6], dt, 'strided'), make([5, 4, 3, 3], dt), make([5], dt)], run: (x, w, b) => kiln.conv2d(x, w!, b!, 1, 1), tol });
    out.push({ label: `conv2d groups 2 stride 2 dilation 2 ${dt} channels_last`, inputs: [make([1, 4, 9, 9], dt, 'channelsLast'), make([6, 2, 2, 3], dt, 'channelsLast')], run: (x, w) => kiln.conv2d(x, w!, null, 2, [1, 2], 2, 2), tol });
  }
  out.push(...convGemms());
  out.push({ label: 'conv2d unbatched, padding same, depthwise', inputs: [make([3, 6, 5]), make([3, 1, 3, 2])], run: (x, w) => kiln.conv2d(x, w!, null, 1, 'same', 1, 3), tol: { atol: 1e-4, rtol: 1e-4 } });
  out.push({ label: 'conv2d empty batch', inputs: [make([0, 2, 4, 4]), make([3, 2, 1, 1])], run: (x, w) => kiln.conv2d(x, w!) });
  return out;
}

/**
 * Convolutions on the implicit GEMM (conv-gemm.ts: 8 or more output channels per group): M, N and
 * K off the 64/64/16 tile, stride 2, asymmetric padding, dilation, groups 2, channels_last and
 * contiguous inputs (the two K orders) and strided ones, weights walked k-fastest and (O stride 1)
 * channel-fastest, bias on and off, each float dtype, unbatched, split K (few tiles, long K), a 7x7
 * stride-2 stem like the conv-stack bench's and a case spanning several M tiles.
 */
export function convGemms(): OpCase[] {
  const out: OpCase[] = [];
  for (const dt of FLOATS) {
    const tol = dt === 'float32' ? { atol: 1e-4, rtol: 1e-4 } : undefined;
    out.push({ label: `conv gemm 3x3 pad 1 bias ${dt} channels_last`, inputs: [make([2, 5, 11, 13], dt, 'channelsLast'), make([70, 5, 3, 3], dt), make([70], dt)], run: (x, w, b) => kiln.conv2d(x, w!, b!, 1, 1), tol });
    out.push({ label: `conv gemm 3x3 pad 1 ${dt} contiguous`, inputs: [make([2, 5, 11, 13], dt), make([70, 5, 3, 3], dt, 'channelsLast')], run: (x, w) => kiln.conv2d(x, w!, null, 1, 1), tol });
    out.push({ label: `conv gemm groups 2 stride 2 dilation 2 pad [1,2] bias ${dt} channels_last`, inputs: [make([3, 6, 15, 14], dt, 'channelsLast'), make([20, 3, 3, 2], dt, 'channelsLast'), make([20], dt, 'strided')], run: (x, w, b) => kiln.conv2d(x, w!, b!, 2, [1, 2], 2, 2), tol });
    out.push({ label: `conv gemm weight O-major pad 2 bias ${dt}`, inputs: [make([2, 5, 9, 10], dt), make([40, 5, 3, 3], dt, 'transposed'), make([40], dt)], run: (x, w, b) => kiln.conv2d(x, w!, b!, 1, 2), tol });
    out.push({ label: `conv gemm groups 2 stride [2,1] ${dt} strided`, inputs: [make([2, 4, 9, 10], dt, 'strided'), make([18, 2, 2, 3], dt, 'strided')], run: (x, w) => kiln.conv2d(x, w!, null, [2, 1], 0, 1, 2), tol });
  }
  out.push({ label: 'conv gemm unbatched 1x1 bias', inputs: [make([17, 6, 5]), make([9, 17, 1, 1]), make([9])], run: (x, w, b) => kiln.conv2d(x, w!, b!), tol: { atol: 1e-4, rtol: 1e-4 } });
  out.push({ label: 'conv gemm 7x7 stride 2 pad 3 stem channels_last', inputs: [make([2, 3, 30, 26], 'float32', 'channelsLast'), make([64, 3, 7, 7]), make([64])], run: (x, w, b) => kiln.conv2d(x, w!, b!, 2, 3), tol: { atol: 1e-4, rtol: 1e-4 } });
  // One-tile GEMMs with K = 2304 (4 slices of 576) and 1024 (2 of 512): split K and the combine kernel.
  for (const dt of FLOATS) {
    const tol = dt === 'float32' ? { atol: 1e-3, rtol: 1e-4 } : undefined;
    out.push({ label: `conv gemm split K bias ${dt} channels_last`, inputs: [make([1, 256, 6, 7], dt, 'channelsLast'), make([20, 256, 3, 3], dt), make([20], dt)], run: (x, w, b) => kiln.conv2d(x, w!, b!, 1, 1), tol });
  }
  out.push({ label: 'conv gemm split K weight O-major channels_last', inputs: [make([1, 256, 6, 7], 'float32', 'channelsLast'), make([20, 256, 3, 3], 'float32', 'transposed')], run: (x, w) => kiln.conv2d(x, w!, null, 1, 1), tol: { atol: 1e-3, rtol: 1e-4 } });
  out.push({ label: 'conv gemm split K groups 2 contiguous', inputs: [make([2, 128, 6, 6]), make([16, 64, 4, 4])], run: (x, w) => kiln.conv2d(x, w!, null, 1, 0, 1, 2), tol: { atol: 1e-3, rtol: 1e-4 } });
  out.push({ label: 'conv gemm 3x3 64->64 channels_last, several M tiles', inputs: [make([2, 64, 12, 12], 'float32', 'channelsLast'), make([64, 64, 3, 3], 'float32', 'channelsLast')], run: (x, w) => kiln.conv2d(x, w!, null, 1, 1), tol: { atol: 1e-4, rtol: 1e-4 } });
  return out;
}

export function opCases(): OpCase[] {
  return [...logical(), ...scans(), ...sorting(), ...moments(), ...norms(), ...gathers(), ...scatters(), ...indexPuts(), ...masks(), ...pools(), ...convs()];
}
