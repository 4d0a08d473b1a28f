/**
 * cuda kernels for reductions: sum, mean, prod, amax, amin, max, min, any, all, var, std,
 * logsumexp, argmax, argmin and max/min with a dim run their reduce groups (reduce-programs.ts)
 * through reduce-run.ts: the kernels the compiler's renderer writes for the same groups. Inputs of
 * any strides; results as the meta functions lay them out. cumsum / cumprod are scans, which the
 * renderer has no form for: hand-written row kernels (codegen/scan.ts, rows-run.ts). softmax,
 * logSoftmax and the norms: softmax-norm.ts.
 */
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { normalizeDim, numel } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './device.js';
import type { ReduceGroup } from './reduce-group.js';
import { argProgram, logicalProgram, logsumexpProgram, momentProgram, momentScale, reduceProgram } from './reduce-programs.js';
import { runReduce } from './reduce-run.js';
import { runScan } from './rows-run.js';

const dimsOf = (v: unknown): R.DimList => v as R.DimList;
const dtypeOf = (v: unknown): DType | null => (v ?? null) as DType | null;

/** The dtype an accumulating reduction reads: the requested dtype when given (PyTorch casts first). */
function castFor(x: Tensor, dtype: DType | null): DType | undefined {
  return dtype !== null && dtype !== x.dtype ? dtype : undefined;
}

/**
 * Runs the group `program` builds over x; its results are the per-row tensors `outs`, in order.
 * `key` names the group (reduce-run.ts): the op and everything the builder reads but x's layout.
 */
function runPerRow(label: string, key: string, program: () => ReduceGroup, x: Tensor, dims: readonly number[], outs: readonly Tensor[], opts: { params?: number[]; keepRowOrder?: boolean } = {}): void {
  const ct = outs[0]!.dtype === 'float64' ? 'double' : 'float';
  runReduce({
    label,
    key: `${key}|${x.ndim === 0 ? '0d' : 'nd'}`,
    program,
    x,
    dims,
    outs: outs.map((t) => ({ t, row: true })),
    ...(opts.params ? { params: { ct, values: opts.params } } : {}),
    keepRowOrder: opts.keepRowOrder,
  });
}

function reduce(op: string, kind: 'sum' | 'prod' | 'mean' | 'amax' | 'amin', meta: OutMeta, x: Tensor, dims: readonly number[], castTo?: DType): Tensor {
  const out = allocOut(meta);
  runPerRow(op, `${kind}|${x.dtype}|${castTo ?? ''}|${out.dtype}`, () => reduceProgram(kind, x, dims, out.dtype, castTo), x, dims, [out]);
  return out;
}

registerKernel(R.sum, 'cuda', (ctx, self, dim, _k, dtype) => reduce('sum', 'sum', ctx.out, self, R.reductionDims('sum', self, dimsOf(dim)), castFor(self, dtypeOf(dtype))));
registerKernel(R.prod, 'cuda', (ctx, self, dim, _k, dtype) => reduce('prod', 'prod', ctx.out, self, R.reductionDims('prod', self, dimsOf(dim)), castFor(self, dtypeOf(dtype))));
registerKernel(R.mean, 'cuda', (ctx, self, dim, _k, dtype) => reduce('mean', 'mean', ctx.out, self, R.reductionDims('mean', self, dimsOf(dim)), castFor(self, dtypeOf(dtype))));
registerKernel(R.amax, 'cuda', (ctx, self, dim) => reduce('amax', 'amax', ctx.out, self, R.reductionDims('amax', self, dimsOf(dim))));
registerKernel(R.amin, 'cuda', (ctx, self, dim) => reduce('amin', 'amin', ctx.out, self, R.reductionDims('amin', self, dimsOf(dim))));
registerKernel(R.max, 'cuda', (ctx, self) => reduce('max', 'amax', ctx.out, self, R.reductionDims('max', self, null)));
registerKernel(R.min, 'cuda', (ctx, self) => reduce('min', 'amin', ctx.out, self, R.reductionDims('min', self, null)));

function logical(op: 'any' | 'all', meta: OutMeta, x: Tensor, dims: readonly number[]): Tensor {
  const out = allocOut(meta);
  runPerRow(op, `${op}|${x.dtype}|${out.dtype}`, () => logicalProgram(op, x, dims, out.dtype), x, dims, [out]);
  return out;
}
registerKernel(R.any, 'cuda', (ctx, self, dim) => logical('any', ctx.out, self, R.reductionDims('any', self, dimsOf(dim))));
registerKernel(R.all, 'cuda', (ctx, self, dim) => logical('all', ctx.out, self, R.reductionDims('all', self, dimsOf(dim))));

function moment(op: 'var' | 'std', meta: OutMeta, x: Tensor, dims: readonly number[], correction: number): Tensor {
  const out = allocOut(meta);
  const n = numel(dims.map((d) => x.shape[d]!));
  runPerRow(op, `${op}|${x.dtype}|${out.dtype}`, () => momentProgram(op, x, dims, out.dtype), x, dims, [out], { params: [momentScale(n, correction)] });
  return out;
}
registerKernel(R.var_, 'cuda', (ctx, self, dim, correction) => moment('var', ctx.out, self, R.reductionDims('var', self, dimsOf(dim)), Number(correction)));
registerKernel(R.std, 'cuda', (ctx, self, dim, correction) => moment('std', ctx.out, self, R.reductionDims('std', self, dimsOf(dim)), Number(correction)));

registerKernel(R.logsumexp, 'cuda', (ctx, self, dim) => {
  const out = allocOut(ctx.out);
  const dims = R.reductionDims('logsumexp', self, dimsOf(dim));
  runPerRow('logsumexp', `logsumexp|${self.dtype}|${out.dtype}`, () => logsumexpProgram(self, dims, out.dtype), self, dims, [out]);
  return out;
});

/** argmax / argmin (indices only) and max / min with a dim (values and indices); the index counts over the reduced dims in logical order. */
function argReduce(op: string, kind: 'argmax' | 'argmin', x: Tensor, dims: readonly number[], valuesMeta: OutMeta | null, indexMeta: OutMeta): Tensor[] {
  const outs = valuesMeta ? [allocOut(valuesMeta), allocOut(indexMeta)] : [allocOut(indexMeta)];
  runPerRow(op, `${kind}|${x.dtype}|${valuesMeta !== null}`, () => argProgram(kind, x, dims, valuesMeta !== null), x, dims, outs, { keepRowOrder: true });
  return outs;
}
registerKernel(R.argmax, 'cuda', (ctx, self, dim) => argReduce('argmax', 'argmax', self, R.reductionDims('argmax', self, dim as R.DimList), null, ctx.out)[0]!);
registerKernel(R.argmin, 'cuda', (ctx, self, dim) => argReduce('argmin', 'argmin', self, R.reductionDims('argmin', self, dim as R.DimList), null, ctx.out)[0]!);
registerKernel(R.maxDim, 'cuda', (ctx, self, dim) => argReduce('max', 'argmax', self, R.reductionDims('max', self, dim as number), ctx.out[0]!, ctx.out[1]!) as never);
registerKernel(R.minDim, 'cuda', (ctx, self, dim) => argReduce('min', 'argmin', self, R.reductionDims('min', self, dim as number), ctx.out[0]!, ctx.out[1]!) as never);

function scanKernel(kind: 'cumsum' | 'cumprod', meta: OutMeta, x: Tensor, dim: number, dtype: DType | null): Tensor {
  const d = x.ndim === 0 ? [] : [normalizeDim(kind, dim, x.ndim)];
  return runScan(kind, meta, x, d, castFor(x, dtype));
}
registerKernel(R.cumsum, 'cuda', (ctx, self, dim, dtype) => scanKernel('cumsum', ctx.out, self, dim as number, dtypeOf(dtype)));
registerKernel(R.cumprod, 'cuda', (ctx, self, dim, dtype) => scanKernel('cumprod', ctx.out, self, dim as number, dtypeOf(dtype)));
