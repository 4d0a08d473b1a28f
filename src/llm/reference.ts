/**
 * Reference implementations of the library ops as compositions of core Kiln ops: they run on any
 * device that has the core ops, serve as the fallback the policy can pick ('reference'), and give
 * opcheck a second, independently written implementation to compare every kernel with. Halves are
 * computed in float32 (float64 stays float64) and cast once at the end, like the kernels; results
 * are made contiguous because the ops' meta functions promise contiguous outputs. They run under
 * noGrad: the op's own backward formula (or none) is what autograd records.
 */
import { noGrad } from '../autograd/grad-mode.js';
import { add, clone, contiguous, copy_ } from '../api/core.js';
import { arange, zeros } from '../api/creation.js';
import { cat, gather, indexPut_, indexSelect, stack } from '../api/indexing.js';
import { linear, matmul } from '../api/linalg.js';
import { div, eq, gelu, gt, lt, mul, remainder, rsqrt, sigmoid, silu, sub, where } from '../api/pointwise.js';
import { scaledDotProductAttention } from '../api/nn.js';
import { tensor } from '../api/data.js';
import { amax, mean, softmax, sum, topk } from '../api/reduction.js';
import { expand, narrow, reshape, select, slice, transpose, unsqueeze, view } from '../api/views.js';
import type { GeluApproximate } from '../ops/defs/llm.js';
import type { MoeActivation, ScoringFunc } from '../ops/defs/llm-moe.js';
import { Tensor } from '../tensor/tensor.js';
import { preservedStrides } from '../tensor/layout.js';
import { assertNoOverlap } from '../ops/library/overlap.js';
import { rotateLast } from '../api/rotate.js';
import { registerLlmImpl } from '../ops/library/policy.js';

function up(t: Tensor): Tensor {
  return t.dtype === 'float64' ? t : t.to('float32');
}
function down(t: Tensor, like: Tensor): Tensor {
  return contiguous(t.to(like.dtype));
}

function rms(x: Tensor, w: Tensor, eps: number): Tensor {
  const x32 = up(x);
  const r = rsqrt(add(mean(mul(x32, x32), [-1], true), eps));
  return down(mul(mul(x32, r), up(w)), x);
}

/** rmsNorm rounded to the dtype (as a separate norm op stores it), then the rotary embedding; x's layout. */
function normRotary(x: Tensor, w: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean): Tensor {
  const n = up(rms(x, w, eps));
  const y = add(mul(n, up(cos)), mul(rotateLast(n, isNeox), up(sin)));
  const out = Tensor.empty(x.shape, x.dtype, x.device, preservedStrides(x.shape, x.shape, x.strides));
  copy_(out, y);
  return out;
}

function gated(x: Tensor, act: (a: Tensor) => Tensor): Tensor {
  const d = x.shape[x.ndim - 1]! / 2;
  const x32 = up(x);
  return down(mul(act(narrow(x32, -1, 0, d)), narrow(x32, -1, d, d)), x);
}

function rope(t: Tensor, positions: Tensor, headSize: number, cache: Tensor, isNeox: boolean): void {
  const tokens = t.shape[0]!;
  const rot = cache.shape[1]!;
  const half = rot / 2;
  const cs = indexSelect(up(cache), 0, positions.to('int64'));
  const cos = unsqueeze(narrow(cs, 1, 0, half), 1);
  const sin = unsqueeze(narrow(cs, 1, half, half), 1);
  const x = reshape(up(t), [tokens, -1, headSize]);
  const r = narrow(x, 2, 0, rot);
  const x1 = isNeox ? narrow(r, 2, 0, half) : slice(r, 2, 0, rot, 2);
  const x2 = isNeox ? narrow(r, 2, half, half) : slice(r, 2, 1, rot, 2);
  const o1 = sub(mul(x1, cos), mul(x2, sin));
  const o2 = add(mul(x2, cos), mul(x1, sin));
  const rotated = isNeox ? cat([o1, o2], 2) : reshape(stack([o1, o2], 3), [tokens, -1, rot]);
  const parts = rot < headSize ? [rotated, narrow(x, 2, rot, headSize - rot)] : [rotated];
  copy_(t, reshape(cat(parts, 2), [...t.shape]).to(t.dtype));
}

/** The k best of each row as weights float32 and ids int32 (ties: torch.topk's order). */
function route(scores: Tensor, selectBy: Tensor, k: number, renormalize: boolean, scale: number): Tensor[] {
  const ids = topk(selectBy, k, -1).indices;
  let w = gather(scores, 1, ids);
  if (renormalize) w = div(w, sum(w, [-1], true));
  if (scale !== 1) w = mul(w, scale);
  return [contiguous(w.to(scores.dtype === 'float64' ? 'float64' : 'float32')), contiguous(ids.to('int32'))];
}

function groupedTopkRef(gating: Tensor, k: number, renormalize: boolean, groups: number, topkGroup: number, scoring: ScoringFunc, bias: Tensor | null, scale: number): Tensor[] {
  const [t, e] = gating.shape as [number, number];
  const g32 = up(gating);
  const scores = scoring === 'softmax' ? softmax(g32, -1) : sigmoid(g32);
  const biased = bias ? add(scores, up(bias)) : scores;
  const grouped = reshape(biased, [t, groups, e / groups]);
  const groupScore = bias ? sum(topk(grouped, 2, -1).values, [-1]) : amax(grouped, [-1]);
  const keepIdx = topk(groupScore, topkGroup, -1).indices;
  // mask[t, g] = 1 for kept groups, via a sum of one-hots (no scatter needed). Group ids compare
  // as int32, which every device computes (webgpu has no int64 arithmetic).
  const groupIds = reshape(arange(groups, { dtype: 'int32', device: gating.device }), [1, 1, groups]);
  const mask = sum(eq(unsqueeze(keepIdx.to('int32'), 2), groupIds).to('float32'), [1]);
  const expertMask = reshape(expand(unsqueeze(mask, 2), [t, groups, e / groups]), [t, e]);
  const masked = where(eq(expertMask, 1), biased, -Infinity);
  return route(scores, masked, k, renormalize, scale);
}

function fusedMoeRef(x: Tensor, w13: Tensor, w2: Tensor, weights: Tensor, ids: Tensor, activation: MoeActivation): Tensor {
  const experts = w13.shape[0]!;
  const inter = w13.shape[1]! / 2;
  const x32 = up(x);
  const tw = up(weights);
  let out = zeros([...x.shape], { dtype: x32.dtype, device: x.device });
  // Dense reference: every expert on every token, weighted by the token's routing weight for it.
  for (let e = 0; e < experts; e++) {
    const we = sum(where(eq(ids, e), tw, 0), [-1], true);
    const gu = linear(x32, up(select(w13, 0, e)));
    const gate = narrow(gu, -1, 0, inter);
    const a = mul(activation === 'silu' ? silu(gate) : gelu(gate), narrow(gu, -1, inter, inter));
    out = add(out, mul(linear(a, up(select(w2, 0, e))), we));
  }
  return down(out, x);
}

function sinkhornRef(logits: Tensor, iters: number, eps: number): Tensor {
  let m = add(softmax(logits, -1), eps);
  m = div(m, add(sum(m, [-2], true), eps));
  for (let k = 1; k < iters; k++) {
    m = div(m, add(sum(m, [-1], true), eps));
    m = div(m, add(sum(m, [-2], true), eps));
  }
  return m;
}

/** (phi v) / rms(v) for flattened streams: [..., rows]. */
function mixLogits(s32: Tensor, phi: Tensor, rmsEps: number): Tensor {
  const v = reshape(s32, [...s32.shape.slice(0, -2), -1]);
  const r = rsqrt(add(mean(mul(v, v), [-1], true), rmsEps));
  return mul(linear(v, up(phi)), r);
}

function mhcPreRef(streams: Tensor, phi: Tensor, alpha: Tensor, bias: Tensor, rmsEps: number, preEps: number, postMult: number, iters: number, sinkEps: number): Tensor[] {
  const n = streams.shape[streams.ndim - 2]!;
  const s32 = up(streams);
  const m = mixLogits(s32, phi, rmsEps);
  const a = up(alpha);
  const b = up(bias);
  const part = (i: number, start: number, len: number): Tensor => add(mul(narrow(m, -1, start, len), select(a, 0, i)), narrow(b, 0, start, len));
  const pre = add(sigmoid(part(0, 0, n)), preEps);
  const post = mul(sigmoid(part(1, n, n)), postMult);
  const logits = reshape(part(2, 2 * n, n * n), [...m.shape.slice(0, -1), n, n]);
  const comb = sinkhornRef(logits, iters, sinkEps);
  const layerInput = sum(mul(unsqueeze(pre, -1), s32), [-2]);
  const cd = streams.dtype === 'float64' ? 'float64' : 'float32';
  return [down(layerInput, streams), contiguous(post.to(cd)), contiguous(comb.to(cd))];
}

function mhcPostRef(layerOut: Tensor, streams: Tensor, post: Tensor, comb: Tensor): Tensor {
  const mixed = matmul(transpose(up(comb), -1, -2), up(streams));
  return down(add(mul(unsqueeze(up(post), -1), unsqueeze(up(layerOut), -2)), mixed), streams);
}

function mhcHeadRef(streams: Tensor, phi: Tensor, alpha: Tensor, bias: Tensor, rmsEps: number, eps: number): Tensor {
  const s32 = up(streams);
  const m = mixLogits(s32, phi, rmsEps);
  const w = add(sigmoid(add(mul(m, select(up(alpha), 0, 0)), up(bias))), eps);
  return down(sum(mul(unsqueeze(w, -1), s32), [-2]), streams);
}

/**
 * Paged decode attention as gathers and sdpa: the slot of every (row, position < maxBlocks *
 * blockSize) from the block table, keys/values gathered, positions past a row's length masked
 * (their slot replaced by 0 so the gather stays in range), rows of length 0 set to zero.
 */
function pagedAttentionRef(q: Tensor, kc: Tensor, vc: Tensor, tables: Tensor, lens: Tensor, scale: number): Tensor {
  const [nb, bs, hkv, d] = kc.shape as [number, number, number, number];
  const [b, h] = q.shape as [number, number];
  const s = tables.shape[1]! * bs;
  const device = q.device;
  const t = arange(s, { dtype: 'int64', device });
  const blk = gather(tables.to('int64'), 1, expand(unsqueeze(div(t, bs, 'floor'), 0), [b, s]));
  const valid = lt(unsqueeze(t, 0), unsqueeze(lens.to('int64'), 1));
  const slots = reshape(where(valid, add(mul(blk, bs), unsqueeze(remainder(t, bs), 0)), 0), [-1]);
  const take = (c: Tensor): Tensor => transpose(view(indexSelect(up(view(c, [nb * bs, hkv, d])), 0, slots), [b, s, hkv, d]), 1, 2);
  const o = scaledDotProductAttention(unsqueeze(up(q), 2), take(kc), take(vc), view(valid, [b, 1, 1, s]), 0, false, scale, h !== hkv);
  return down(where(view(gt(lens, 0), [b, 1, 1, 1]), view(o, [b, h, 1, d]), 0).reshape([b, h, d]), q);
}

/** Writes the rows whose slot is >= 0 (the slots are read on the host: this is a reference). */
function reshapeAndCacheRef(key: Tensor, value: Tensor, kc: Tensor, vc: Tensor, slotMapping: Tensor): Tensor[] {
  const [nb, bs, hkv, d] = kc.shape as [number, number, number, number];
  const slots = slotMapping.toFlatArray();
  const rows = slots.flatMap((v, i) => (v >= 0 ? [i] : []));
  if (rows.length === 0) return [kc, vc];
  const device = kc.device;
  const at = tensor(rows.map((i) => slots[i]!), { dtype: 'int64', device });
  const pick = tensor(rows, { dtype: 'int64', device });
  indexPut_(view(kc, [nb * bs, hkv, d]), [at], indexSelect(key, 0, pick));
  indexPut_(view(vc, [nb * bs, hkv, d]), [at], indexSelect(value, 0, pick));
  return [kc, vc];
}

type RefFn = (...args: never[]) => Tensor | Tensor[];

const REFERENCES: Record<string, RefFn> = {
  'llm.rmsNorm': (x: Tensor, w: Tensor, eps: number) => rms(x, w, eps),
  'llm.fusedAddRmsNorm': (x: Tensor, r: Tensor, w: Tensor, eps: number) => {
    assertNoOverlap('llm.fusedAddRmsNorm', ['input', x], ['residual', r]);
    const s = add(x, r);
    copy_(r, s);
    copy_(x, rms(s, w, eps));
    return [x, r];
  },
  'llm.addRmsNorm': (x: Tensor, r: Tensor, w: Tensor, eps: number) => {
    const s = contiguous(add(x, r));
    return [rms(s, w, eps), s];
  },
  'llm.siluAndMul': (x: Tensor) => gated(x, silu),
  'llm.linearSiluAndMul': (x: Tensor, w: Tensor, b: Tensor | null) => gated(linear(x, w, b), silu),
  'llm.linearGelu': (x: Tensor, w: Tensor, b: Tensor | null, approximate: 'none' | 'tanh') => gelu(linear(x, w, b), approximate),
  // g and u rounded to the dtype by the linears, silu(g) * u in float32, rounded once.
  'llm.gateUpSiluAndMul': (x: Tensor, wg: Tensor, wu: Tensor) => down(mul(silu(up(linear(x, wg))), up(linear(x, wu))), x),
  'llm.qkvLinear': (x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor) => [linear(x, wq), linear(x, wk), linear(x, wv)],
  'llm.addRmsNormLinear': (x: Tensor, r: Tensor | null, g: Tensor, eps: number, w: Tensor, b: Tensor | null, isGated: boolean) => {
    // The norm reads the unrounded sum (as the compiled add + rmsNorm kernel); both stores round.
    const s = r ? add(up(x), up(r)) : up(x);
    const h = s === x ? clone(x, 'contiguous') : down(s, x);
    const y = down(rms(s, g, eps), x);
    const lin = linear(y, w, b);
    return [isGated ? gated(lin, silu) : contiguous(lin), h];
  },
  'llm.geluAndMul': (x: Tensor, approximate: GeluApproximate) => gated(x, (a) => gelu(a, approximate)),
  'llm.rotaryEmbedding': (positions: Tensor, q: Tensor, k: Tensor | null, headSize: number, cache: Tensor, isNeox: boolean) => {
    assertNoOverlap('llm.rotaryEmbedding', ['query', q], ['key', k]);
    rope(q, positions, headSize, cache, isNeox);
    if (k) rope(k, positions, headSize, cache, isNeox);
    return k ? [q, k] : [q];
  },
  'llm.applyRotaryEmb': (x: Tensor, cos: Tensor, sin: Tensor, isNeox: boolean) => {
    const x32 = up(x);
    const y = add(mul(x32, up(cos)), mul(rotateLast(x32, isNeox), up(sin)));
    // The op keeps the input's layout (see its meta), not the contiguous layout `down` gives.
    const out = Tensor.empty(x.shape, x.dtype, x.device, preservedStrides(x.shape, x.shape, x.strides));
    copy_(out, y);
    return out;
  },
  'llm.qkNormRotary': (q: Tensor, k: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean) => [
    normRotary(q, qw, eps, cos, sin, isNeox),
    normRotary(k, kw, eps, cos, sin, isNeox),
  ],
  'llm.topkSoftmax': (g: Tensor, k: number, renormalize: boolean) => {
    const p = softmax(up(g), -1);
    return route(p, p, k, renormalize, 1);
  },
  'llm.groupedTopk': groupedTopkRef,
  'llm.moeSum': (x: Tensor) => down(sum(up(x), [1]), x),
  'llm.fusedMoe': fusedMoeRef,
  'llm.mhcPre': mhcPreRef,
  'llm.mhcPost': mhcPostRef,
  'llm.mhcHeadCollapse': mhcHeadRef,
  'llm.reshapeAndCache': reshapeAndCacheRef,
  'llm.pagedAttention': pagedAttentionRef,
  'llm.qkNormRotaryCache': (q: Tensor, k: Tensor, v: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, kc: Tensor, vc: Tensor, slots: Tensor) => {
    const [kco, vco] = reshapeAndCacheRef(normRotary(k, kw, eps, cos, sin, isNeox), v, kc, vc, slots);
    return [normRotary(q, qw, eps, cos, sin, isNeox), kco!, vco!];
  },
  // The two ops in sequence: the cache write, then attention of the rotated q over the written caches.
  'llm.qkNormRotaryPagedAttention': (q: Tensor, k: Tensor, v: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, kc: Tensor, vc: Tensor, slots: Tensor, tables: Tensor, lens: Tensor, scale: number) => {
    const [kco, vco] = reshapeAndCacheRef(normRotary(k, kw, eps, cos, sin, isNeox), v, kc, vc, slots);
    return [pagedAttentionRef(normRotary(q, qw, eps, cos, sin, isNeox), kco!, vco!, tables, lens, scale), kco!, vco!];
  },
};

for (const [op, fn] of Object.entries(REFERENCES)) {
  registerLlmImpl(op, {
    name: 'reference',
    kind: 'reference',
    device: '*',
    priority: 0,
    fn: (_ctx, ...args) => noGrad(() => (fn as (...a: readonly unknown[]) => Tensor | Tensor[])(...args)),
  });
}

/** Ops that have a reference composition. */
export function hasReference(op: string): boolean {
  return op in REFERENCES;
}

/** The reference composition of an op, unwrapped (records autograd when grad mode is on). */
export function referenceOf(op: string): ((...args: readonly unknown[]) => Tensor | Tensor[]) | undefined {
  return REFERENCES[op] as ((...args: readonly unknown[]) => Tensor | Tensor[]) | undefined;
}
