/**
 * webgpu kernels for rmsNorm and groupNorm: each is one row kernel of the fused-group renderer
 * (reduce-run.ts), computed in f32 whatever the storage dtype and rounded once at the store, so a
 * norm is one launch. groupNorm's rows are (sample, group) pairs: the channel dim is split into
 * [groups, channels per group] as a strided view (always possible, so any input layout is read in
 * place), and the per-channel weight and bias become inputs broadcast over that view.
 */
import { finfoEps, groupNorm, rmsNorm } from '../../ops/defs/linalg.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { Tensor } from '../../tensor/tensor.js';
import { allocOut } from './device.js';
import type { FusedNode, FusedValue } from './fused/group.js';
import { C, OUT, runGroup, V, X } from './reduce-run.js';
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

/**
 * groupNorm: per (sample, group) row, the mean, then the mean squared deviation (biased, as the
 * CPU kernel), (x - mean) * rsqrt(var + eps), times the channel's weight, plus its bias. Two
 * reduction levels, so the renderer makes two passes over the row and a third that stores.
 */
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
    for (const id of [11, 12, 16, 17, 18]) values.set(id, { dtype: 'float32', shape: S });
    for (const id of [10, 13, 14, 15]) values.set(id, { dtype: 'float32', shape: row });
    values.set(OUT, { dtype: out.dtype, shape: S });
    const nodes: FusedNode[] = [
      { kind: 'reduction', op: 'mean', args: [], outputs: [10], reduce: { kind: 'mean', input: X } },
      { kind: 'pointwise', op: 'sub', args: [V(X), V(10), C(1)], outputs: [11] },
      { kind: 'pointwise', op: 'mul', args: [V(11), V(11)], outputs: [12] },
      { kind: 'reduction', op: 'mean', args: [], outputs: [13], reduce: { kind: 'mean', input: 12 } },
      { kind: 'pointwise', op: 'add', args: [V(13), C(eps), C(1)], outputs: [14] },
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
    runGroup({ label: op, x, dims, outs: [{ t: o, row: false }], nodes, values, extra });
  } finally {
    for (const t of [x, o, ...extra]) t.dispose();
  }
  return out;
}

registerKernel(groupNorm, 'webgpu', (ctx, input, numGroups, weight, bias, eps) => groupNormKernel(ctx.out, input, numGroups as number, weight ?? null, bias ?? null, Number(eps)));
