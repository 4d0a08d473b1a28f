/**
 * webgpu kernels for rmsNorm, layerNorm, groupNorm and batchNorm: each is one row kernel of the
 * fused-group renderer (reduce-run.ts), computed in f32 whatever the storage dtype and rounded once
 * at the store, so a norm is one launch (batchNorm in training adds the running-statistics update).
 *
 * - layerNorm's rows are the leading dims, normalised over the trailing ones.
 * - groupNorm's rows are (sample, group) pairs: the channel dim is split into [groups, channels per
 *   group] as a strided view (always possible, so any input layout is read in place), and the
 *   per-channel weight and bias become inputs broadcast over that view.
 * - batchNorm's rows are the channels, reduced over batch and space; its mean and variance are
 *   outputs too, for the running statistics. In eval mode it is pointwise over the running
 *   statistics, viewed [C, 1, ...] to broadcast over (N, C, *).
 */
import { batchNorm, finfoEps, groupNorm, layerNorm, rmsNorm } from '../../ops/defs/linalg.js';
import { rmsNorm as llmRmsNorm } from '../../ops/defs/llm.js';
import { registerLlmImpl } from '../../ops/library/policy.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import { wgslLit } from '../math/wgsl.js';
import { allocOut } from './device.js';
import type { FusedNode, FusedValue } from './fused/group.js';
import { C, OUT, runGroup, V, X } from './reduce-run.js';
import { runPointwise } from './pointwise-run.js';
import { checkDtype } from './reduction.js';

/**
 * rmsNorm over the trailing `normalizedShape` dims: one row kernel, mean(x * x), add eps, rsqrt,
 * times x, times the weight. Value 1 is the weight (broadcast over the rows).
 */
function rmsNormKernel(meta: OutMeta, x: Tensor, normalizedShape: readonly number[], weight: Tensor | null, eps: number | null): Tensor {
  const op = 'rmsNorm';
  checkDtype(op, x);
  const out = allocOut(meta);
  if (x.numel() === 0) return out;
  const e = eps ?? finfoEps(x.dtype);
  const S = x.shape;
  const d = normalizedShape.map((_, k) => S.length - normalizedShape.length + k);
  const row = S.map((s, i) => (d.includes(i) ? 1 : s));
  const W = 1;
  const values = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: S }]]);
  if (weight) values.set(W, { dtype: weight.dtype, shape: weight.shape });
  const full = (id: number): void => void values.set(id, { dtype: 'float32', shape: S });
  const perRow = (id: number): void => void values.set(id, { dtype: 'float32', shape: row });
  full(10);
  perRow(11);
  perRow(12);
  perRow(13);
  values.set(OUT, { dtype: out.dtype, shape: S });
  const nodes: FusedNode[] = [
    { kind: 'pointwise', op: 'mul', args: [V(X), V(X)], outputs: [10] },
    { kind: 'reduction', op: 'mean', args: [], outputs: [11], reduce: { kind: 'mean', input: 10 } },
    { kind: 'pointwise', op: 'add', args: [V(11), C(e), C(1)], outputs: [12] },
    { kind: 'pointwise', op: 'rsqrt', args: [V(12)], outputs: [13] },
  ];
  if (weight) {
    full(14);
    nodes.push({ kind: 'pointwise', op: 'mul', args: [V(X), V(13)], outputs: [14] });
    nodes.push({ kind: 'pointwise', op: 'mul', args: [V(14), V(W)], outputs: [OUT] });
  } else nodes.push({ kind: 'pointwise', op: 'mul', args: [V(X), V(13)], outputs: [OUT] });
  runGroup({ label: op, x, dims: d, outs: [{ t: out, row: false }], nodes, values, extra: weight ? [weight] : [] });
  return out;
}

registerKernel(rmsNorm, 'webgpu', (ctx, input, normalizedShape, weight, eps) => rmsNormKernel(ctx.out, input, normalizedShape as readonly number[], weight ?? null, (eps as number | null | undefined) ?? null));

/**
 * llm.rmsNorm on webgpu: the same row kernel over the last dim (x * rsqrt(mean(x^2) + eps) in
 * float32, times the weight, rounded once: the reference's order). Without it the op fell to the
 * reference decomposition, eight dispatches (casts, mul, mean, add, rsqrt, two muls): 115 us for
 * one [1, 1024] row on the H200 (issue #20, the final norm of an eager decode step).
 */
registerLlmImpl(llmRmsNorm.name, {
  name: 'webgpu-kernel',
  kind: 'kernel',
  device: 'webgpu',
  priority: 0,
  fn: (ctx, input, weight, eps) => {
    const x = input as Tensor;
    return rmsNormKernel(ctx.out as OutMeta, x, [x.shape[x.ndim - 1]!], weight as Tensor, eps as number);
  },
});

/**
 * The nodes of (x - mean) * rsqrt(var + eps) [* weight] [+ bias] over the reduced dims, var the
 * biased mean squared deviation (as the CPU kernels); the weight is value 1 and the bias the next
 * input. The mean and var are values `meanId` and `varId` (outputs, where a caller keeps them).
 */
function normalise(values: Map<number, FusedValue>, S: readonly number[], row: readonly number[], outDtype: FusedValue['dtype'], eps: number, weight: boolean, bias: boolean, meanId = 10, varId = 13): FusedNode[] {
  for (const id of [11, 12, 16, 17]) values.set(id, { dtype: 'float32', shape: S });
  for (const id of [meanId, varId, 14, 15]) if (!values.has(id)) values.set(id, { dtype: 'float32', shape: row });
  values.set(OUT, { dtype: outDtype, shape: S });
  const nodes: FusedNode[] = [
    { kind: 'reduction', op: 'mean', args: [], outputs: [meanId], reduce: { kind: 'mean', input: X } },
    { kind: 'pointwise', op: 'sub', args: [V(X), V(meanId), C(1)], outputs: [11] },
    { kind: 'pointwise', op: 'mul', args: [V(11), V(11)], outputs: [12] },
    { kind: 'reduction', op: 'mean', args: [], outputs: [varId], reduce: { kind: 'mean', input: 12 } },
    { kind: 'pointwise', op: 'add', args: [V(varId), C(eps), C(1)], outputs: [14] },
    { kind: 'pointwise', op: 'rsqrt', args: [V(14)], outputs: [15] },
  ];
  // The last node writes OUT; those before it the next id.
  const steps: [string, number][] = [['mul', 15]];
  if (weight) steps.push(['mul', 1]);
  if (bias) steps.push(['add', weight ? 2 : 1]);
  let cur = 11;
  steps.forEach(([fn, arg], k) => {
    const dst = k === steps.length - 1 ? OUT : 16 + k;
    nodes.push({ kind: 'pointwise', op: fn, args: fn === 'add' ? [V(cur), V(arg), C(1)] : [V(cur), V(arg)], outputs: [dst] });
    cur = dst;
  });
  return nodes;
}

registerKernel(layerNorm, 'webgpu', (ctx, input, normalizedShape, weight, bias, eps) => {
  const op = 'layerNorm';
  checkDtype(op, input);
  const out = allocOut(ctx.out);
  if (input.numel() === 0) return out;
  const S = input.shape;
  const k = (normalizedShape as readonly number[]).length;
  const dims = S.map((_, i) => i).filter((i) => i >= S.length - k);
  const row = S.map((s, i) => (i >= S.length - k ? 1 : s));
  const extra = [weight, bias].filter((p): p is Tensor => p !== null && p !== undefined);
  const values = new Map<number, FusedValue>([[X, { dtype: input.dtype, shape: S }]]);
  extra.forEach((t, j) => values.set(X + 1 + j, { dtype: t.dtype, shape: t.shape }));
  const nodes = normalise(values, S, row, out.dtype, Number(eps), !!weight, !!bias);
  runGroup({ label: op, x: input, dims, outs: [{ t: out, row: false }], nodes, values, extra });
  return out;
});

/** `t` [N, C, *] viewed as [N, G, C / G, *] (dim 1 split; a view of any strides). */
function splitChannels(t: Tensor, groups: number): Tensor {
  const [n, c] = t.shape as [number, number];
  const cg = c / groups;
  const s1 = t.strides[1]!;
  return new Tensor(t.storage, t.dtype, [n, groups, cg, ...t.shape.slice(2)], [t.strides[0]!, cg * s1, s1, ...t.strides.slice(2)], t.offset);
}

/** A [C] parameter as a view of shape `S` ([N, G, C / G, *]) that varies along the channel dims only. */
function perChannel(p: Tensor, S: readonly number[]): Tensor {
  const cg = S[2]!;
  const s = p.strides[0]!;
  return new Tensor(p.storage, p.dtype, [...S], S.map((_, k) => (k === 1 ? cg * s : k === 2 ? s : 0)), p.offset);
}

/** groupNorm: per (sample, group) row; two reduction levels, so two passes over the row and a third that stores. */
function groupNormKernel(meta: OutMeta, input: Tensor, groups: number, weight: Tensor | null, bias: Tensor | null, eps: number): Tensor {
  const op = 'groupNorm';
  checkDtype(op, input);
  for (const p of [weight, bias]) if (p) checkDtype(op, p);
  const out = allocOut(meta);
  if (input.numel() === 0) return out;
  const x = splitChannels(input, groups);
  const o = splitChannels(out, groups);
  const S = x.shape;
  const extra = [weight, bias].flatMap((p) => (p ? [perChannel(p, S)] : []));
  try {
    const dims = S.map((_, k) => k).filter((k) => k >= 2);
    const row = S.map((s, k) => (k >= 2 ? 1 : s));
    const values = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: S }]]);
    extra.forEach((t, k) => values.set(X + 1 + k, { dtype: t.dtype, shape: S }));
    const nodes = normalise(values, S, row, out.dtype, eps, weight !== null, bias !== null);
    runGroup({ label: op, x, dims, outs: [{ t: o, row: false }], nodes, values, extra });
  } finally {
    for (const t of [x, o, ...extra]) t.dispose();
  }
  return out;
}

registerKernel(groupNorm, 'webgpu', (ctx, input, numGroups, weight, bias, eps) => groupNormKernel(ctx.out, input, numGroups as number, weight ?? null, bias ?? null, Number(eps)));

/** A [C] parameter viewed [C, 1, ...] so it broadcasts over (N, C, *) of rank `rank`. */
function channelView(p: Tensor, rank: number): Tensor {
  const ones = new Array<number>(Math.max(0, rank - 2)).fill(1);
  return new Tensor(p.storage, p.dtype, [p.shape[0]!, ...ones], [p.strides[0]!, ...ones.map(() => 0)], p.offset);
}

const f = (v: number): string => wgslLit(v, 'f32');

/** Eval mode: (x - runningMean) * rsqrt(runningVar + eps) [* weight] [+ bias], pointwise. */
function batchNormEval(out: Tensor, x: Tensor, rm: Tensor, rv: Tensor, w: Tensor | null, b: Tensor | null, eps: number): Tensor {
  const views = [rm, rv, ...(w ? [w] : []), ...(b ? [b] : [])].map((p) => channelView(p, x.ndim));
  try {
    const expr = `((v0 - v1) * (1.0f / sqrt(v2 + ${f(eps)}))${w ? ' * v3' : ''}${b ? ` + v${w ? 4 : 3}` : ''})`;
    return runPointwise('batchNorm', out, [x, ...views], () => expr);
  } finally {
    for (const v of views) v.dispose();
  }
}

/**
 * Training mode: per channel, the batch mean and biased variance (also outputs), the normalised
 * output, then the running statistics updated in place: (1 - momentum) * running + momentum *
 * statistic, the variance unbiased (times count / (count - 1)), as the CPU kernel.
 */
function batchNormTrain(out: Tensor, x: Tensor, rm: Tensor | null, rv: Tensor | null, w: Tensor | null, b: Tensor | null, momentum: number, eps: number): Tensor {
  const S = x.shape;
  const C = S[1]!;
  const count = x.numel() / C;
  const dims = S.map((_, k) => k).filter((k) => k !== 1);
  const row = S.map((s, k) => (k === 1 ? s : 1));
  const stat = (): Tensor => allocOut({ shape: [C], strides: [1], dtype: 'float32', device: x.device });
  const mean = stat();
  const variance = stat();
  const extra = [w, b].flatMap((p) => (p ? [channelView(p, x.ndim)] : []));
  try {
    const values = new Map<number, FusedValue>([[X, { dtype: x.dtype, shape: S }]]);
    extra.forEach((t, k) => values.set(X + 1 + k, { dtype: t.dtype, shape: t.shape }));
    values.set(OUT + 1, { dtype: 'float32', shape: row });
    values.set(OUT + 2, { dtype: 'float32', shape: row });
    const nodes = normalise(values, S, row, out.dtype, eps, w !== null, b !== null, OUT + 1, OUT + 2);
    const outs = [
      { t: out, row: false },
      { t: mean, row: true },
      { t: variance, row: true },
    ];
    runGroup({ label: 'batchNorm', x, dims, outs, nodes, values, extra });
    if (rm && rv && count > 0) {
      runPointwise('batchNorm running mean', rm, [rm, mean], () => `(${f(1 - momentum)} * v0 + ${f(momentum)} * v1)`);
      runPointwise('batchNorm running var', rv, [rv, variance], () => `(${f(1 - momentum)} * v0 + ${f((momentum * count) / (count - 1))} * v1)`);
    }
  } finally {
    for (const t of [mean, variance, ...extra]) t.dispose();
  }
  return out;
}

registerKernel(batchNorm, 'webgpu', (ctx, input, runningMean, runningVar, weight, bias, training, momentum, eps) => {
  const op = 'batchNorm';
  checkDtype(op, input);
  const out = allocOut(ctx.out);
  if (input.numel() === 0) return out;
  const [rm, rv, w, b] = [runningMean, runningVar, weight, bias].map((t) => t ?? null);
  if (training === true) return batchNormTrain(out, input, rm!, rv!, w!, b!, Number(momentum), Number(eps));
  return batchNormEval(out, input, rm!, rv!, w!, b!, Number(eps));
});
