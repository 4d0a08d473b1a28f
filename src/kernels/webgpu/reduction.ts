/**
 * webgpu kernels for reductions (sum, mean, prod, amax, amin, max, min, max/min with a dim,
 * argmax, argmin, any, all, var, std, logsumexp) and softmax / logSoftmax: each call is a one-node program (softmax: its
 * row kernel, amax, sub, exp, sum, div) rendered by the fused-group renderer the webgpu compile
 * target uses (fused/render.ts, through reduce-run.ts), so eager and compiled reductions are the
 * same WGSL. Inputs of any strides; outputs as the op's meta function lays them out. Results the
 * WGSL kernels cannot hold (an int64 sum of integers, float64) fail with the dtype named; indices
 * are written as int64.
 */
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { wgslComputeType } from '../math/wgsl.js';
import { getOption } from '../../runtime/config.js';
import { splitArgReduce } from './argreduce-split.js';
import { allocOut, unsupportedDtype } from './device.js';
import type { FusedNode, FusedReduceKind, FusedValue } from './fused/group.js';
import { C, OUT, runGroup, V, X } from './reduce-run.js';

export function checkDtype(op: string, t: Tensor): void {
  if (wgslComputeType(t.dtype) === null) throw unsupportedDtype(op, t);
}

const dimsOf = (v: unknown): R.DimList => v as R.DimList;

/** A reduction of `x` over `dims` into a new `meta` tensor; `castTo` rounds the input first (sum(x, dtype)). */
function reduce(op: string, kind: FusedReduceKind, meta: OutMeta, x: Tensor, dims: readonly number[], castTo?: DType): Tensor {
  checkDtype(op, x);
  const out = allocOut(meta);
  if (wgslComputeType(out.dtype) === null) {
    out.dispose();
    throw unsupportedDtype(op, { dtype: out.dtype, shape: out.shape });
  }
  const values = new Map<number, FusedValue>([
    [X, { dtype: x.dtype, shape: x.shape }],
    [100, { dtype: out.dtype, shape: out.shape }],
  ]);
  const nodes: FusedNode[] = [];
  let input = X;
  if (castTo !== undefined && castTo !== x.dtype) {
    values.set(1, { dtype: castTo, shape: x.shape });
    nodes.push({ kind: 'pointwise', op: 'toDtype', args: [{ kind: 'value', id: X }], outputs: [1], cast: true });
    input = 1;
  }
  nodes.push({ kind: 'reduction', op: kind, args: [], outputs: [100], reduce: { kind, input } });
  runGroup({ label: op, x, dims, outs: [{ t: out, row: true }], nodes, values });
  return out;
}

const castFor = (x: Tensor, dtype: unknown): DType | undefined => (dtype !== null && dtype !== undefined && dtype !== x.dtype ? (dtype as DType) : undefined);

registerKernel(R.sum, 'webgpu', (ctx, self, dim, _k, dtype) => reduce('sum', 'sum', ctx.out, self, R.reductionDims('sum', self, dimsOf(dim)), castFor(self, dtype)));
registerKernel(R.prod, 'webgpu', (ctx, self, dim, _k, dtype) => reduce('prod', 'prod', ctx.out, self, R.reductionDims('prod', self, dimsOf(dim)), castFor(self, dtype)));
registerKernel(R.mean, 'webgpu', (ctx, self, dim, _k, dtype) => reduce('mean', 'mean', ctx.out, self, R.reductionDims('mean', self, dimsOf(dim)), castFor(self, dtype)));
registerKernel(R.amax, 'webgpu', (ctx, self, dim) => reduce('amax', 'amax', ctx.out, self, R.reductionDims('amax', self, dimsOf(dim))));
registerKernel(R.amin, 'webgpu', (ctx, self, dim) => reduce('amin', 'amin', ctx.out, self, R.reductionDims('amin', self, dimsOf(dim))));
registerKernel(R.max, 'webgpu', (ctx, self) => reduce('max', 'amax', ctx.out, self, R.reductionDims('max', self, null)));
registerKernel(R.min, 'webgpu', (ctx, self) => reduce('min', 'amin', ctx.out, self, R.reductionDims('min', self, null)));

/** max/min with a dim (values and int64 indices) and argmax/argmin: one arg reduction, the first index among equals. */
function argReduce(op: string, kind: 'argmax' | 'argmin', x: Tensor, dims: readonly number[], valuesMeta: OutMeta | null, indexMeta: OutMeta): Tensor[] {
  checkDtype(op, x);
  if (x.dtype === 'bool' && valuesMeta === null) throw new TypeError(`${op}: not implemented for bool`);
  const values = valuesMeta ? allocOut(valuesMeta) : null;
  const index = allocOut(indexMeta);
  // Long rows, few of them (a decode step's argmax over the vocabulary): split over workgroups.
  if (!values && getOption('KILN_WEBGPU_SPLIT_ARG') && splitArgReduce(kind, x, dims, index)) return [index];
  const vals = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: x.shape }]]);
  // The value accumulator is an internal value when only the index is a result.
  const vid = values ? 100 : 50;
  const iid = values ? 101 : 100;
  vals.set(vid, { dtype: x.dtype, shape: index.shape });
  vals.set(iid, { dtype: 'int64', shape: index.shape });
  const nodes: FusedNode[] = [{ kind: 'reduction', op: kind, args: [], outputs: [vid, iid], reduce: { kind, input: X } }];
  const outs = values ? [{ t: values, row: true }, { t: index, row: true }] : [{ t: index, row: true }];
  runGroup({ label: op, x, dims, outs, nodes, values: vals, keepRowOrder: true });
  return values ? [values, index] : [index];
}

registerKernel(R.maxDim, 'webgpu', (ctx, self, dim) => argReduce('max', 'argmax', self, R.reductionDims('max', self, dim as number), ctx.out[0]!, ctx.out[1]!) as never);
registerKernel(R.minDim, 'webgpu', (ctx, self, dim) => argReduce('min', 'argmin', self, R.reductionDims('min', self, dim as number), ctx.out[0]!, ctx.out[1]!) as never);
registerKernel(R.argmax, 'webgpu', (ctx, self, dim) => argReduce('argmax', 'argmax', self, R.reductionDims('argmax', self, dim as R.DimList), null, ctx.out)[0]!);
registerKernel(R.argmin, 'webgpu', (ctx, self, dim) => argReduce('argmin', 'argmin', self, R.reductionDims('argmin', self, dim as R.DimList), null, ctx.out)[0]!);

/**
 * softmax / logSoftmax along `dim`: the row kernel amax, sub, exp, sum, div (or log, sub), computed
 * in f32 whatever the storage dtype; `dtype` casts the input first, as torch does.
 */
function softmaxKernel(op: 'softmax' | 'logSoftmax', meta: OutMeta, x: Tensor, dim: number, dtype: unknown): Tensor {
  checkDtype(op, x);
  const out = allocOut(meta);
  if (x.numel() === 0) return out;
  if (wgslComputeType(out.dtype) === null) {
    out.dispose();
    throw unsupportedDtype(op, { dtype: out.dtype, shape: out.shape });
  }
  const d = x.shape.length === 0 ? [] : [normalizeDim(op, dim, x.shape.length)];
  const S = x.shape;
  const dt = out.dtype;
  const row = S.map((s, i) => (d.includes(i) ? 1 : s));
  const values = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: S }]]);
  const full = (id: number): void => void values.set(id, { dtype: dt, shape: S });
  const perRow = (id: number): void => void values.set(id, { dtype: dt, shape: row });
  const nodes: FusedNode[] = [];
  let xin = X;
  if (castFor(x, dtype) !== undefined) {
    full(1);
    nodes.push({ kind: 'pointwise', op: 'toDtype', args: [V(X)], outputs: [1], cast: true });
    xin = 1;
  }
  perRow(2);
  full(3);
  full(4);
  perRow(5);
  full(100);
  nodes.push({ kind: 'reduction', op: 'amax', args: [], outputs: [2], reduce: { kind: 'amax', input: xin } });
  nodes.push({ kind: 'pointwise', op: 'sub', args: [V(xin), V(2), C(1)], outputs: [3] });
  nodes.push({ kind: 'pointwise', op: 'exp', args: [V(3)], outputs: [4] });
  nodes.push({ kind: 'reduction', op: 'sum', args: [], outputs: [5], reduce: { kind: 'sum', input: 4 } });
  if (op === 'softmax') nodes.push({ kind: 'pointwise', op: 'div', args: [V(4), V(5), C(null)], outputs: [100] });
  else {
    perRow(6);
    nodes.push({ kind: 'pointwise', op: 'log', args: [V(5)], outputs: [6] });
    nodes.push({ kind: 'pointwise', op: 'sub', args: [V(3), V(6), C(1)], outputs: [100] });
  }
  runGroup({ label: op, x, dims: d, outs: [{ t: out, row: false }], nodes, values });
  return out;
}

registerKernel(R.softmax, 'webgpu', (ctx, self, dim, dtype) => softmaxKernel('softmax', ctx.out, self, dim as number, dtype));
registerKernel(R.logSoftmax, 'webgpu', (ctx, self, dim, dtype) => softmaxKernel('logSoftmax', ctx.out, self, dim as number, dtype));

/**
 * any / all: whether x != 0 (NaN counts as true; a bool input compares with false, since a bool
 * tensor and an integer scalar promote to int64), reduced by amax / amin over int32 0/1 values,
 * then compared with 0. The comparison also maps the empty row's identities to torch's answers:
 * amax's INT_MIN gives any() = false, amin's INT_MAX gives all() = true.
 */
function logical(op: 'any' | 'all', meta: OutMeta, x: Tensor, dims: readonly number[]): Tensor {
  checkDtype(op, x);
  const out = allocOut(meta);
  const values = new Map<number, FusedValue>([
    [X, { dtype: x.dtype, shape: x.shape }],
    [1, { dtype: 'bool', shape: x.shape }],
    [2, { dtype: 'int32', shape: out.shape }],
    [OUT, { dtype: 'bool', shape: out.shape }],
  ]);
  const kind = op === 'any' ? 'amax' : 'amin';
  // Floats test their bits: WGSL lets a compiler assume NaN away, and then NaN != 0 can be false.
  const nonzero = wgslComputeType(x.dtype) === 'f32' ? { expr: `select(0i, 1i, (bitcast<u32>(v${X}) & 0x7fffffffu) != 0u)` } : {};
  const nodes: FusedNode[] = [
    { kind: 'pointwise', op: 'ne', args: [V(X), C(x.dtype === 'bool' ? false : 0)], outputs: [1], ...nonzero },
    { kind: 'reduction', op: kind, args: [], outputs: [2], reduce: { kind, input: 1 } },
    { kind: 'pointwise', op: 'gt', args: [V(2), C(0)], outputs: [OUT] },
  ];
  runGroup({ label: op, x, dims, outs: [{ t: out, row: true }], nodes, values });
  return out;
}

registerKernel(R.any, 'webgpu', (ctx, self, dim) => logical('any', ctx.out, self, R.reductionDims('any', self, dimsOf(dim))));
registerKernel(R.all, 'webgpu', (ctx, self, dim) => logical('all', ctx.out, self, R.reductionDims('all', self, dimsOf(dim))));

/**
 * var / std over `dims`: the mean, then the sum of squared deviations divided by
 * max(count - correction, 0), as the CPU kernel (a zero denominator gives inf, or NaN for 0 / 0),
 * in f32 whatever the storage dtype.
 */
function moment(op: 'var' | 'std', meta: OutMeta, x: Tensor, dims: readonly number[], correction: number): Tensor {
  checkDtype(op, x);
  const out = allocOut(meta);
  if (out.numel() === 0) return out;
  const count = dims.reduce((p, d) => p * x.shape[d]!, 1);
  const denom = Math.max(count - correction, 0);
  const row = x.shape.map((s, i) => (dims.includes(i) ? 1 : s));
  const values = new Map<number, FusedValue>([
    [X, { dtype: x.dtype, shape: x.shape }],
    [1, { dtype: 'float32', shape: row }],
    [2, { dtype: 'float32', shape: x.shape }],
    [3, { dtype: 'float32', shape: x.shape }],
    [4, { dtype: 'float32', shape: row }],
    [5, { dtype: 'float32', shape: row }],
    [OUT, { dtype: out.dtype, shape: out.shape }],
  ]);
  const variance = op === 'var' ? OUT : 5;
  const nodes: FusedNode[] = [
    { kind: 'reduction', op: 'mean', args: [], outputs: [1], reduce: { kind: 'mean', input: X } },
    { kind: 'pointwise', op: 'sub', args: [V(X), V(1), C(1)], outputs: [2] },
    { kind: 'pointwise', op: 'mul', args: [V(2), V(2)], outputs: [3] },
    { kind: 'reduction', op: 'sum', args: [], outputs: [4], reduce: { kind: 'sum', input: 3 } },
    // No division by a literal zero in the source: times infinity gives the same inf / NaN.
    denom > 0 ? { kind: 'pointwise', op: 'div', args: [V(4), C(denom), C(null)], outputs: [variance] } : { kind: 'pointwise', op: 'mul', args: [V(4), C(Infinity)], outputs: [variance] },
  ];
  if (op === 'std') nodes.push({ kind: 'pointwise', op: 'sqrt', args: [V(5)], outputs: [OUT] });
  runGroup({ label: op, x, dims, outs: [{ t: out, row: true }], nodes, values });
  return out;
}

registerKernel(R.var_, 'webgpu', (ctx, self, dim, correction) => moment('var', ctx.out, self, R.reductionDims('var', self, dimsOf(dim)), Number(correction)));
registerKernel(R.std, 'webgpu', (ctx, self, dim, correction) => moment('std', ctx.out, self, R.reductionDims('std', self, dimsOf(dim)), Number(correction)));

/**
 * logsumexp over `dims`: shifted by the row's max (0 where it is infinite, as torch, so an all
 * -inf row gives -inf), log of the sum of exp, plus the shift. Integer inputs are cast to the
 * float result first.
 */
function logsumexpKernel(meta: OutMeta, x: Tensor, dims: readonly number[]): Tensor {
  const op = 'logsumexp';
  checkDtype(op, x);
  const out = allocOut(meta);
  if (wgslComputeType(out.dtype) === null) {
    out.dispose();
    throw unsupportedDtype(op, { dtype: out.dtype, shape: out.shape });
  }
  if (out.numel() === 0) return out;
  const row = x.shape.map((s, i) => (dims.includes(i) ? 1 : s));
  const values = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: x.shape }]]);
  const full = (id: number): void => void values.set(id, { dtype: 'float32', shape: x.shape });
  const perRow = (id: number, dtype: DType = 'float32'): void => void values.set(id, { dtype, shape: row });
  const nodes: FusedNode[] = [];
  let xin = X;
  if (x.dtype !== out.dtype) {
    full(1);
    nodes.push({ kind: 'pointwise', op: 'toDtype', args: [V(X)], outputs: [1], cast: true });
    xin = 1;
  }
  perRow(2);
  perRow(3, 'bool');
  perRow(4);
  full(5);
  full(6);
  perRow(7);
  perRow(8);
  values.set(OUT, { dtype: out.dtype, shape: out.shape });
  nodes.push(
    { kind: 'reduction', op: 'amax', args: [], outputs: [2], reduce: { kind: 'amax', input: xin } },
    { kind: 'pointwise', op: 'isfinite', args: [V(2)], outputs: [3] },
    { kind: 'pointwise', op: 'where', args: [V(3), V(2), C(0)], outputs: [4] },
    { kind: 'pointwise', op: 'sub', args: [V(xin), V(4), C(1)], outputs: [5] },
    { kind: 'pointwise', op: 'exp', args: [V(5)], outputs: [6] },
    { kind: 'reduction', op: 'sum', args: [], outputs: [7], reduce: { kind: 'sum', input: 6 } },
    { kind: 'pointwise', op: 'log', args: [V(7)], outputs: [8] },
    { kind: 'pointwise', op: 'add', args: [V(8), V(4), C(1)], outputs: [OUT] },
  );
  runGroup({ label: op, x, dims, outs: [{ t: out, row: true }], nodes, values });
  return out;
}

registerKernel(R.logsumexp, 'webgpu', (ctx, self, dim) => logsumexpKernel(ctx.out, self, R.reductionDims('logsumexp', self, dimsOf(dim))));
