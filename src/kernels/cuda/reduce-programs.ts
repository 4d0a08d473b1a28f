/**
 * The eager cuda reductions and row kernels as reduce groups, op by op: what each computes, in
 * nodes of the math table (kernels/math/cuda.ts), reductions and, where an op needs a host scalar
 * or a special case, its own expression. Pure (shapes and dtypes only), so the kernels
 * (reduction.ts, softmax-norm.ts, nn.ts) run them and scripts/cuda-nvcc-check.mjs renders every
 * one in every strategy without a GPU. Internal values are float32 (float64 for float64 results)
 * whatever the storage dtype, rounded once at the store.
 */
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { cLit, mathFn } from './codegen/ctypes.js';
import { computeDtype, ReduceGroup, type ValueMeta } from './reduce-group.js';
import { X } from './codegen/reduce.js';

const ctOf = (d: DType): 'float' | 'double' => (computeDtype(d) === 'float64' ? 'double' : 'float');

/** sum / prod / mean / amax / amin into result 0; `castTo` rounds the input first (sum(x, dtype)). */
export function reduceProgram(kind: 'sum' | 'prod' | 'mean' | 'amax' | 'amin', x: ValueMeta, dims: readonly number[], out: DType, castTo?: DType): ReduceGroup {
  const b = new ReduceGroup(x, dims);
  b.reduction(kind, castTo !== undefined && castTo !== x.dtype ? b.cast(X, castTo) : X, out, 0);
  return b;
}

/**
 * any / all: the max / min of (x != 0), compared with 0 once per row; the comparison maps the empty
 * row's identity (INT_MIN for max, INT_MAX for min) to false / true.
 */
export function logicalProgram(op: 'any' | 'all', x: ValueMeta, dims: readonly number[], out: DType): ReduceGroup {
  const b = new ReduceGroup(x, dims);
  const r = b.reduction(op === 'any' ? 'amax' : 'amin', b.pointwise('ne', [X, { c: 0 }], 'bool'), 'bool');
  b.pointwise(op === 'any' ? 'gt' : 'ne', [r, { c: 0 }], out, { row: true, out: 0 });
  return b;
}

/**
 * var / std: the mean, then the sum of squared deviations (two passes), times s0 = 1 / max(N -
 * correction, 0) (a host scalar, momentScale: one kernel for every row length and correction).
 */
export function momentProgram(op: 'var' | 'std', x: ValueMeta, dims: readonly number[], out: DType): ReduceGroup {
  const F = computeDtype(out);
  const ct = ctOf(out);
  const b = new ReduceGroup(x, dims);
  const d = b.pointwise('sub', [X, b.reduction('mean', X, F), { c: 1 }], F);
  const s = b.reduction('sum', b.pointwise('mul', [d, d], F), F);
  b.expr([s], op === 'std' ? `${mathFn('sqrt', ct)}(a * s0)` : 'a * s0', ct, out, { row: true, out: 0 });
  return b;
}

/** s0 of momentProgram: 1 / (N - correction), inf where that is not positive (0 / 0 gives NaN, x / 0 inf, as PyTorch divides). */
export function momentScale(n: number, correction: number): number {
  const dof = n - correction;
  return dof > 0 ? 1 / dof : Infinity;
}

/**
 * logsumexp = shift + log(sum(exp(x - shift))), shift the row's max or 0 where that is infinite
 * (an all -inf row gives -inf and a +inf gives +inf, not NaN); integers are cast to the result first.
 */
export function logsumexpProgram(x: ValueMeta, dims: readonly number[], out: DType): ReduceGroup {
  const F = computeDtype(out);
  const ct = ctOf(out);
  const b = new ReduceGroup(x, dims);
  const input = isFloating(x.dtype) ? X : b.cast(X, out);
  const shift = b.expr([b.reduction('amax', input, F)], `(kiln_isinf(a) ? ${cLit(0, ct)} : a)`, ct, F, { row: true });
  const s = b.reduction('sum', b.pointwise('exp', [b.pointwise('sub', [input, shift, { c: 1 }], F)], F), F);
  b.expr([s, shift], `b + ${mathFn('log', ct)}(a)`, ct, out, { row: true, out: 0 });
  return b;
}

/** argmax / argmin, and max / min with a dim (`values`: the extreme value is result 0, the index result 1). */
export function argProgram(kind: 'argmax' | 'argmin', x: ValueMeta, dims: readonly number[], values: boolean): ReduceGroup {
  const b = new ReduceGroup(x, dims);
  b.arg(kind, X, values ? { value: 0, index: 1 } : { index: 0 });
  return b;
}

/**
 * softmax / logSoftmax: the row's max (0 for an all -inf row, so that row gives NaN from 0 / 0 as
 * PyTorch's does, not from -inf - -inf), the sum of exp(x - max), then exp(x - max) / sum or
 * (x - max) - log(sum) as the full-size result 0. `cast`: the dtype to cast x to first.
 */
export function softmaxProgram(kind: 'softmax' | 'logSoftmax', x: ValueMeta, dims: readonly number[], out: DType, cast?: DType): ReduceGroup {
  const F = computeDtype(out);
  const ct = ctOf(out);
  const b = new ReduceGroup(x, dims);
  const input = cast !== undefined && cast !== x.dtype ? b.cast(X, cast) : X;
  const shift = b.expr([b.reduction('amax', input, F)], `(a == ${cLit(-Infinity, ct)} ? ${cLit(0, ct)} : a)`, ct, F, { row: true });
  const d = b.pointwise('sub', [input, shift, { c: 1 }], F);
  const e = b.pointwise('exp', [d], F);
  const s = b.reduction('sum', e, F);
  if (kind === 'softmax') b.pointwise('div', [e, s, { c: null }], out, { out: 0 });
  else b.pointwise('sub', [d, b.pointwise('log', [s], F, { row: true }), { c: 1 }], out, { out: 0 });
  return b;
}

/**
 * layerNorm's (x - mean) * rstd with rstd = 1 / sqrt(mean((x - mean)^2) + s0), rmsNorm's
 * x * (1 / sqrt(mean(x^2) + s0)), then times the weight (value X + 1) and plus the bias (the next
 * value) where given; s0 is eps.
 */
export function normProgram(kind: 'layerNorm' | 'rmsNorm', x: ValueMeta, dims: readonly number[], out: DType, weight: ValueMeta | null, bias: ValueMeta | null): ReduceGroup {
  const F = computeDtype(out);
  const ct = ctOf(out);
  const b = new ReduceGroup(
    x,
    dims,
    [weight, bias].filter((t): t is ValueMeta => t !== null),
  );
  let centred = X;
  let sq: number;
  if (kind === 'layerNorm') {
    centred = b.pointwise('sub', [X, b.reduction('mean', X, F), { c: 1 }], F);
    sq = b.pointwise('mul', [centred, centred], F);
  } else sq = b.pointwise('mul', [X, X], F);
  const rstd = b.expr([b.reduction('mean', sq, F)], `${cLit(1, ct)} / ${mathFn('sqrt', ct)}(a + s0)`, ct, F, { row: true });
  const steps: [string, number][] = [['mul', rstd]];
  if (weight) steps.push(['mul', X + 1]);
  if (bias) steps.push(['add', X + (weight ? 2 : 1)]);
  // The last node writes the result; the ones before it stay in the compute dtype.
  let y = centred;
  steps.forEach(([op, v], i) => {
    const last = i === steps.length - 1;
    y = b.pointwise(op, op === 'add' ? [y, v, { c: 1 }] : [y, v], last ? out : F, last ? { out: 0 } : {});
  });
  return b;
}

/** batchNorm's training statistics: the mean (result 0) and the biased variance (result 1) per row, in `stat`. */
export function batchStatsProgram(x: ValueMeta, dims: readonly number[], stat: DType): ReduceGroup {
  const b = new ReduceGroup(x, dims);
  const d = b.pointwise('sub', [X, b.reduction('mean', X, stat, 0), { c: 1 }], stat);
  b.reduction('mean', b.pointwise('mul', [d, d], stat), stat, 1);
  return b;
}
