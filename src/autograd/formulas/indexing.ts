/**
 * Backward formulas for the indexing group (PyTorch's conventions):
 * - embedding: weight gradient accumulated per index (duplicates add up); rows at paddingIdx get 0.
 * - indexSelect / gather: the gradient accumulated back at the indices (index_add / scatter_add).
 * - scatter: self's gradient is zeroed where src overwrote it (reduce null), src's is gathered
 *   at the index. reduce 'sum'/'add' passes self's gradient through; 'mean' divides by the
 *   number of contributions (self included). 'prod'/'multiply'/'amax'/'amin' throw at backward.
 * - indexPut: values' gradient is the gradient read at the indices (summed over broadcasting);
 *   self's is zeroed at the written positions unless accumulate.
 * - maskedFill: no gradient where masked; a tensor value gets the sum of the masked gradient.
 * - cat/stack split the gradient; split/chunk concatenate their outputs' gradients (outputs that
 *   got none contribute zeros); tril/triu mask it.
 */
import * as ix from '../../ops/defs/indexing.js';
import { catSkipped } from '../../ops/defs/indexing.js';
import { add, copy_, to } from '../../api/core.js';
import { ones, zeros } from '../../api/creation.js';
import { tensor } from '../../api/data.js';
import { cat, gather, indexPut, indexSelect, maskedFill, scatter, scatterAdd, tril, triu } from '../../api/indexing.js';
import { div, eq, logicalNot, mul, remainder } from '../../api/pointwise.js';
import { sum } from '../../api/reduction.js';
import { narrow, permute, reshape, select } from '../../api/views.js';
import { broadcastShapes, normalizeDim } from '../../tensor/layout.js';
import { Tensor } from '../../tensor/tensor.js';
import { defineBackward } from '../graph.js';
import { sumToShape } from '../utils.js';

type Index = Tensor | null;

// ---------------------------------------------------------------------------------------------
// embedding, indexSelect, gather

defineBackward(
  ix.embedding,
  (ctx, [g]) => {
    const [input, weight, paddingIdx] = ctx.args as [Tensor, Tensor, number | null | undefined];
    if (!ctx.needsInputGrad(1)) return [null, null];
    const [num, width] = weight.shape as [number, number];
    const idx = reshape(input, [-1]);
    let rows = reshape(g!, [-1, width]);
    if (paddingIdx !== null && paddingIdx !== undefined) {
      const p = paddingIdx < 0 ? paddingIdx + num : paddingIdx;
      rows = maskedFill(rows, reshape(eq(idx, p), [-1, 1]), 0);
    }
    return [null, indexPut(zeros([num, width], { dtype: rows.dtype, device: rows.device }), [idx], rows, true)];
  },
  { save: ['input'] },
);

defineBackward(
  ix.indexSelect,
  (ctx, [g]) => {
    const [self, dim, index] = ctx.args as [Tensor, number, Tensor];
    if (!ctx.needsInputGrad(0)) return [null];
    if (self.ndim === 0) return [reshape(g!, [])];
    const d = normalizeDim('indexSelect', dim, self.ndim);
    const indices: Index[] = new Array<Index>(d).fill(null);
    indices.push(reshape(index, [-1]));
    return [indexPut(zeros([...self.shape], { dtype: g!.dtype, device: g!.device }), indices, g!, true)];
  },
  { save: ['index'] },
);

defineBackward(
  ix.gather,
  (ctx, [g]) => {
    const [self, dim, index] = ctx.args as [Tensor, number, Tensor];
    if (!ctx.needsInputGrad(0)) return [null];
    const d = normalizeDim('gather', dim, self.ndim);
    return [scatterAdd(zeros([...self.shape], { dtype: g!.dtype, device: g!.device }), d, index, g!)];
  },
  { save: ['index'] },
);

// ---------------------------------------------------------------------------------------------
// scatter, scatterAdd

/** `block` (index-shaped) written into the leading corner of zeros of `shape`. */
function padTo(block: Tensor, shape: readonly number[]): Tensor {
  if (block.shape.every((s, i) => s === shape[i])) return block;
  const z = zeros([...shape], { dtype: block.dtype, device: block.device });
  let corner = z;
  block.shape.forEach((s, i) => (corner = narrow(corner, i, 0, s)));
  copy_(corner, block);
  return z;
}

/** src's gradient: the output gradient read at the index, padded to src's shape. */
function srcGrad(g: Tensor, d: number, index: Tensor, src: Tensor): Tensor {
  return padTo(gather(g, d, index), src.shape);
}

function scatterBackward(
  ctx: { needsInputGrad(i: number): boolean; args: readonly unknown[] },
  g: Tensor,
  reduce: string | null | undefined,
): (Tensor | null)[] {
  const [self, dim, index, src] = ctx.args as [Tensor, number, Tensor, Tensor | number | boolean];
  const d = normalizeDim('scatter', dim, self.ndim);
  const wantSrc = src instanceof Tensor && ctx.needsInputGrad(3);
  switch (reduce ?? null) {
    case null:
      return [
        ctx.needsInputGrad(0) ? scatter(g, d, index, 0) : null,
        null,
        null,
        wantSrc ? srcGrad(g, d, index, src as Tensor) : null,
      ];
    case 'sum':
    case 'add':
      return [ctx.needsInputGrad(0) ? g : null, null, null, wantSrc ? srcGrad(g, d, index, src as Tensor) : null];
    case 'mean': {
      // include_self: each position averages self with everything scattered into it.
      const contributions = scatterAdd(zeros([...self.shape], { dtype: g.dtype, device: g.device }), d, index, ones([...index.shape], { dtype: g.dtype, device: g.device }));
      const gm = div(g, add(contributions, 1));
      return [ctx.needsInputGrad(0) ? gm : null, null, null, wantSrc ? srcGrad(gm, d, index, src as Tensor) : null];
    }
    default:
      throw new Error(`scatter backward: the derivative for scatter with reduce='${String(reduce)}' is not implemented (supported: null, 'sum', 'add', 'mean')`);
  }
}

for (const op of [ix.scatter, ix.scatter_]) {
  defineBackward(op, (ctx, [g]) => scatterBackward(ctx, g!, ctx.args[4] as string | null | undefined), { save: ['index'] });
}

for (const op of [ix.scatterAdd, ix.scatterAdd_]) {
  defineBackward(op, (ctx, [g]) => scatterBackward(ctx, g!, 'sum'), { save: ['index'] });
}

// ---------------------------------------------------------------------------------------------
// indexPut

/** Bool/uint8 masks replaced by one int64 index tensor per masked dim (their nonzero()). */
function expandMasks(indices: readonly Index[]): Index[] {
  const out: Index[] = [];
  for (const t of indices) {
    if (t === null || t === undefined) {
      out.push(null);
      continue;
    }
    if (t.dtype !== 'bool' && t.dtype !== 'uint8') {
      out.push(t);
      continue;
    }
    const flat = t.toFlatArray();
    const coords: number[][] = t.shape.map(() => []);
    flat.forEach((v, e) => {
      if (v === 0) return;
      let rem = e;
      for (let k = t.ndim - 1; k >= 0; k--) {
        coords[k]!.push(rem % t.shape[k]!);
        rem = Math.floor(rem / t.shape[k]!);
      }
    });
    for (const c of coords) out.push(tensor(c, { dtype: 'int64', device: t.device }));
  }
  return out;
}

/** g[indices] with PyTorch's advanced-indexing semantics (the inverse read of indexPut). */
export function advancedIndex(g: Tensor, indices: readonly Index[]): Tensor {
  const list = expandMasks(indices);
  const adv: number[] = [];
  const idx: Tensor[] = [];
  list.forEach((t, dim) => {
    if (t !== null) {
      adv.push(dim);
      idx.push(t);
    }
  });
  if (adv.length === 0) return g;
  const slices = g.shape.map((_, i) => i).filter((i) => !adv.includes(i));
  const b = broadcastShapes('indexPut backward', ...idx.map((t) => t.shape));
  // Linear index into the advanced dims (row-major), negative indices counting from the end. In
  // int32 where it fits, which every device computes (webgpu has no int64 arithmetic).
  const span = adv.reduce((p, d) => p * g.shape[d]!, 1);
  const itype = span < 2 ** 31 ? 'int32' : 'int64';
  let linear: Tensor | null = null;
  let stride = 1;
  for (let k = adv.length - 1; k >= 0; k--) {
    const size = g.shape[adv[k]!]!;
    const term = mul(remainder(to(idx[k]!, itype), size), stride);
    linear = linear === null ? term : add(term, linear);
    stride *= size;
  }
  const sliceSizes = slices.map((i) => g.shape[i]!);
  const gp = reshape(permute(g, [...adv, ...slices]), [stride, ...sliceSizes]);
  const picked = reshape(indexSelect(gp, 0, reshape(linear!, [-1])), [...b, ...sliceSizes]);
  const consecutive = adv[adv.length - 1]! - adv[0]! === adv.length - 1;
  if (!consecutive || adv[0] === 0) return picked;
  // Consecutive advanced dims keep their place: the broadcast block goes after the leading slices.
  const p = adv[0]!;
  const nb = b.length;
  const perm = [
    ...Array.from({ length: p }, (_, i) => nb + i),
    ...Array.from({ length: nb }, (_, i) => i),
    ...Array.from({ length: sliceSizes.length - p }, (_, i) => nb + p + i),
  ];
  return permute(picked, perm);
}

for (const op of [ix.indexPut, ix.indexPut_]) {
  defineBackward(
    op,
    (ctx, [g]) => {
      const [, indices, values, accumulate] = ctx.args as [Tensor, Index[], Tensor | number | boolean, boolean];
      const gSelf = ctx.needsInputGrad(0) ? (accumulate ? g! : indexPut(g!, indices, 0, false)) : null;
      const gValues = values instanceof Tensor && ctx.needsInputGrad(2) ? sumToShape(advancedIndex(g!, indices), values.shape) : null;
      return [gSelf, null, gValues, null];
    },
    { save: ['indices'] },
  );
}

// ---------------------------------------------------------------------------------------------
// maskedFill

for (const op of [ix.maskedFill, ix.maskedFill_]) {
  defineBackward(
    op,
    (ctx, [g]) => {
      const [self, mask, value] = ctx.args as [Tensor, Tensor, Tensor | number | boolean];
      const gSelf = ctx.needsInputGrad(0) ? sumToShape(maskedFill(g!, mask, 0), self.shape) : null;
      const gValue = value instanceof Tensor && ctx.needsInputGrad(2) ? sum(maskedFill(g!, logicalNot(mask), 0)) : null;
      return [gSelf, null, gValue];
    },
    { save: ['mask'] },
  );
}

// ---------------------------------------------------------------------------------------------
// cat, stack, split, chunk, tril, triu

defineBackward(ix.cat, (ctx, [g]) => {
  const [tensors, dim] = ctx.args as [Tensor[], number];
  const ref = tensors.find((t) => !catSkipped(t));
  if (ref === undefined) return [tensors.map((t) => zeros([...t.shape], { dtype: g!.dtype, device: g!.device })), null];
  const d = normalizeDim('cat', dim, ref.ndim);
  let offset = 0;
  const grads = tensors.map((t, i) => {
    if (catSkipped(t)) return ctx.needsInputGrad(0, i) ? zeros([0], { dtype: g!.dtype, device: g!.device }) : null;
    const n = t.shape[d]!;
    const piece = ctx.needsInputGrad(0, i) ? narrow(g!, d, offset, n) : null;
    offset += n;
    return piece;
  });
  return [grads, null];
});

defineBackward(ix.stack, (ctx, [g]) => {
  const [tensors, dim] = ctx.args as [Tensor[], number];
  const d = normalizeDim('stack', dim, tensors[0]!.ndim + 1);
  return [tensors.map((_, i) => (ctx.needsInputGrad(0, i) ? select(g!, d, i) : null)), null];
});

for (const op of [ix.split, ix.splitWithSizes, ix.chunk]) {
  defineBackward(op, (ctx, grads) => {
    const [self, , dim] = ctx.args as [Tensor, unknown, number];
    if (!ctx.needsInputGrad(0)) return [null];
    const d = normalizeDim(op.name, dim, self.ndim);
    // The engine hands zeros for outputs that received no gradient.
    const pieces = grads.map((g, i) => g ?? zeros([...ctx.outputs[i]!.shape], { dtype: self.dtype, device: self.device }));
    return [pieces.length === 1 ? pieces[0]! : cat(pieces, d)];
  });
}

defineBackward(ix.tril, (ctx, [g]) => [ctx.needsInputGrad(0) ? tril(g!, ctx.args[1] as number) : null]);
defineBackward(ix.triu, (ctx, [g]) => [ctx.needsInputGrad(0) ? triu(g!, ctx.args[1] as number) : null]);
