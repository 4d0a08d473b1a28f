/** cuda kernels for reductions, scans (cumsum/cumprod), softmax/logSoftmax and layerNorm/rmsNorm (row kernels). */
import * as R from '../../ops/defs/reduction.js';
import { finfoEps, layerNorm, rmsNorm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { contiguousStrides, isContiguousStrides, normalizeDim, numel } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import type { RowKind } from './codegen/rows.js';
import { contiguousAs, copyTensor } from './core.js';
import { allocOut } from './device.js';
import { runRows, toRows } from './rows-run.js';

const dimsOf = (v: unknown): R.DimList => v as R.DimList;
const dtypeOf = (v: unknown): DType | null => (v ?? null) as DType | null;

interface ReduceOpts {
  /** Cast the input to this dtype first (sum(x, dtype), or float kinds on integer input). */
  castTo?: DType;
  p0?: number;
  p1?: number;
}

function reduce(kind: RowKind, meta: OutMeta, x: Tensor, dims: number[], o: ReduceOpts = {}): Tensor {
  const out = allocOut(meta);
  const r = toRows(x, dims, o.castTo);
  try {
    runRows({ kind, src: r.src, out, outDtype: out.dtype, rows: r.rows, R: r.R, p0: o.p0, p1: o.p1 });
  } finally {
    r.src.dispose();
  }
  return out;
}

/** The dtype an accumulating reduction reads: the requested dtype when given (as PyTorch casts first). */
function castFor(x: Tensor, dtype: DType | null): DType | undefined {
  return dtype !== null && dtype !== x.dtype ? dtype : undefined;
}

registerKernel(R.sum, 'cuda', (ctx, self, dim, _k, dtype) => reduce('sum', ctx.out, self, R.reductionDims('sum', self, dimsOf(dim)), { castTo: castFor(self, dtypeOf(dtype)) }));
registerKernel(R.prod, 'cuda', (ctx, self, dim, _k, dtype) => reduce('prod', ctx.out, self, R.reductionDims('prod', self, dimsOf(dim)), { castTo: castFor(self, dtypeOf(dtype)) }));
registerKernel(R.mean, 'cuda', (ctx, self, dim, _k, dtype) => {
  const dims = R.reductionDims('mean', self, dimsOf(dim));
  const n = numel(dims.map((d) => self.shape[d]!));
  return reduce('sum', ctx.out, self, dims, { castTo: castFor(self, dtypeOf(dtype)), p0: 1 / n, p1: 1 });
});
registerKernel(R.amax, 'cuda', (ctx, self, dim) => reduce('max', ctx.out, self, R.reductionDims('amax', self, dimsOf(dim))));
registerKernel(R.amin, 'cuda', (ctx, self, dim) => reduce('min', ctx.out, self, R.reductionDims('amin', self, dimsOf(dim))));
registerKernel(R.max, 'cuda', (ctx, self) => reduce('max', ctx.out, self, R.reductionDims('max', self, null)));
registerKernel(R.min, 'cuda', (ctx, self) => reduce('min', ctx.out, self, R.reductionDims('min', self, null)));
registerKernel(R.var_, 'cuda', (ctx, self, dim, correction) => reduce('var', ctx.out, self, R.reductionDims('var', self, dimsOf(dim)), { p0: Number(correction), p1: 0 }));
registerKernel(R.std, 'cuda', (ctx, self, dim, correction) => reduce('var', ctx.out, self, R.reductionDims('std', self, dimsOf(dim)), { p0: Number(correction), p1: 1 }));
registerKernel(R.logsumexp, 'cuda', (ctx, self, dim) =>
  reduce('logsumexp', ctx.out, self, R.reductionDims('logsumexp', self, dimsOf(dim)), { castTo: isFloating(self.dtype) ? undefined : ctx.out.dtype }),
);
registerKernel(R.any, 'cuda', (ctx, self, dim) => reduce('any', ctx.out, self, R.reductionDims('any', self, dimsOf(dim))));
registerKernel(R.all, 'cuda', (ctx, self, dim) => reduce('all', ctx.out, self, R.reductionDims('all', self, dimsOf(dim))));

function argReduce(kind: 'argmax' | 'argmin', meta: OutMeta, x: Tensor, dims: number[]): Tensor {
  const out = allocOut(meta);
  const r = toRows(x, dims);
  try {
    runRows({ kind, src: r.src, out: null, aux: out, outDtype: x.dtype, rows: r.rows, R: r.R });
  } finally {
    r.src.dispose();
  }
  return out;
}
registerKernel(R.argmax, 'cuda', (ctx, self, dim) => argReduce('argmax', ctx.out, self, R.reductionDims('argmax', self, dimsOf(dim))));
registerKernel(R.argmin, 'cuda', (ctx, self, dim) => argReduce('argmin', ctx.out, self, R.reductionDims('argmin', self, dimsOf(dim))));

function extremumWithIndex(kind: 'argmax' | 'argmin', metas: readonly OutMeta[], x: Tensor, dim: number): Tensor[] {
  const values = allocOut(metas[0]!);
  const indices = allocOut(metas[1]!);
  const r = toRows(x, R.reductionDims(kind, x, dim));
  try {
    runRows({ kind, src: r.src, out: values, aux: indices, outDtype: values.dtype, rows: r.rows, R: r.R });
  } finally {
    r.src.dispose();
  }
  return [values, indices];
}
registerKernel(R.maxDim, 'cuda', (ctx, self, dim) => extremumWithIndex('argmax', ctx.out, self, dim as number));
registerKernel(R.minDim, 'cuda', (ctx, self, dim) => extremumWithIndex('argmin', ctx.out, self, dim as number));

// ------------------------------------------------------------------------------------------------
// Row-wise kinds: the result has the input's shape; rows are computed contiguously and copied into
// the output's layout when it differs.
// ------------------------------------------------------------------------------------------------

function rowWise(kind: RowKind, meta: OutMeta, x: Tensor, dims: number[], extra: { aux?: Tensor | null; aux2?: Tensor | null; p0?: number; castTo?: DType }): Tensor {
  const out = allocOut(meta);
  const r = toRows(x, dims, extra.castTo);
  const permShape = r.perm.map((d) => x.shape[d]!);
  const permOutStrides = r.perm.map((d) => out.strides[d]!);
  const direct = isContiguousStrides(permShape, permOutStrides);
  const target = direct
    ? new Tensor(out.storage, out.dtype, permShape, permOutStrides, out.offset)
    : allocOut({ shape: permShape, strides: contiguousStrides(permShape), dtype: out.dtype, device: out.device });
  try {
    runRows({ kind, src: r.src, out: target, outDtype: out.dtype, rows: r.rows, R: r.R, aux: extra.aux, aux2: extra.aux2, p0: extra.p0 });
    if (!direct) copyTensor(new Tensor(out.storage, out.dtype, permShape, permOutStrides, out.offset), target);
  } finally {
    r.src.dispose();
    target.dispose();
  }
  return out;
}

function softmaxKernel(kind: 'softmax' | 'logSoftmax', meta: OutMeta, x: Tensor, dim: number): Tensor {
  if (x.ndim === 0) return rowWise(kind, meta, x, [], { castTo: isFloating(x.dtype) ? undefined : meta.dtype });
  const d = normalizeDim(kind, dim, x.ndim);
  return rowWise(kind, meta, x, [d], { castTo: isFloating(x.dtype) ? undefined : meta.dtype });
}
function scanKernel(kind: 'cumsum' | 'cumprod', meta: OutMeta, x: Tensor, dim: number, dtype: DType | null): Tensor {
  const d = x.ndim === 0 ? [] : [normalizeDim(kind, dim, x.ndim)];
  return rowWise(kind, meta, x, d, { castTo: dtype !== null && dtype !== x.dtype ? dtype : undefined });
}
registerKernel(R.cumsum, 'cuda', (ctx, self, dim, dtype) => scanKernel('cumsum', ctx.out, self, dim as number, dtypeOf(dtype)));
registerKernel(R.cumprod, 'cuda', (ctx, self, dim, dtype) => scanKernel('cumprod', ctx.out, self, dim as number, dtypeOf(dtype)));

registerKernel(R.softmax, 'cuda', (ctx, self, dim) => softmaxKernel('softmax', ctx.out, self, dim as number));
registerKernel(R.logSoftmax, 'cuda', (ctx, self, dim) => softmaxKernel('logSoftmax', ctx.out, self, dim as number));

/** A parameter tensor as contiguous data (a view when it already is). */
function dense(t: Tensor | null | undefined): Tensor | null {
  return t ? contiguousAs(t) : null;
}

function normDims(x: Tensor, normalizedShape: readonly number[]): number[] {
  return normalizedShape.map((_, i) => x.ndim - normalizedShape.length + i);
}

registerKernel(layerNorm, 'cuda', (ctx, input, normalizedShape, weight, bias, eps) => {
  const w = dense(weight);
  const b = dense(bias);
  try {
    return rowWise('layerNorm', ctx.out, input, normDims(input, normalizedShape as number[]), { aux: w, aux2: b, p0: Number(eps) });
  } finally {
    if (w && w !== weight) w.dispose();
    if (b && b !== bias) b.dispose();
  }
});

registerKernel(rmsNorm, 'cuda', (ctx, input, normalizedShape, weight, eps) => {
  const w = dense(weight);
  const e = eps === null || eps === undefined ? finfoEps(input.dtype) : Number(eps);
  try {
    return rowWise('rmsNorm', ctx.out, input, normDims(input, normalizedShape as number[]), { aux: w, p0: e });
  } finally {
    if (w && w !== weight) w.dispose();
  }
});
