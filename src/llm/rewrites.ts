/**
 * Pattern rewrites from core-op compositions to library ops (src/compile/passes/rewrite.ts):
 *
 *   x * rsqrt(mean(x^2, -1, keepdim) + eps) * w          -> llm.rmsNorm(x, w, eps)
 *     (x^2 as pow(x, 2), square(x) or x * x; either operand order of both products)
 *   the same over s = a + r (alpha 1)                      -> llm.addRmsNorm(a, r, w, eps) = [y, s]
 *     (out-of-place, so it is always safe: the sum is also an output, later readers of s read it,
 *     and nothing is written in place; the eager add rounds the sum to the dtype as the kernel does)
 *   silu(x[..., :d]) * x[..., d:]                          -> llm.siluAndMul(x)
 *   gelu(x[..., :d], a) * x[..., d:]                       -> llm.geluAndMul(x, a)
 *     (halves as narrow, slice with step 1, or outputs 0 and 1 of chunk(x, 2, -1))
 *
 *   x * cos + cat([-x[..., d:], x[..., :d]], -1) * sin   -> llm.applyRotaryEmb(x, cos, sin, true)
 *     (the Hugging Face rotate-half RoPE; either operand order of the products and of the sum; the
 *     halves as narrow or slice, the negation as neg or mul by -1; cos/sin broadcast to x)
 *
 * Every rule checks dtypes, shapes and the reduced dim, and fires only where the library op's
 * output has the layout eager mode gives (contiguous inputs for the norms and act-and-mul; for
 * RoPE the op keeps x's layout, so the sum's layout must be x's). The rotate-half form maps onto
 * applyRotaryEmb rather than vLLM's llm.rotaryEmbedding: turning cos/sin tensors into a positions +
 * cache pair needs values (which positions), not just structure.
 */
import { P, type Match, type OpPattern, type RewriteRule } from '../compile/passes/rewrite.js';
import { type GraphBuilder, Val } from '../compile/passes/util.js';
import type { IRArg, IRNode, ValueId } from '../compile/ir.js';
import { isFloating } from '../tensor/dtype.js';
import { isContiguousStrides, preservedStrides } from '../tensor/layout.js';

const isNum = (v: unknown): boolean => typeof v === 'number';
const isOne = (v: unknown): boolean => v === 1;

function squares(x: string): OpPattern[] {
  return [P.op('pow', [P.v(x), P.c(undefined, (v) => v === 2)]), P.op('square', [P.v(x)]), P.op('mul', [P.v(x), P.v(x)])];
}

function normPatterns(): OpPattern[] {
  return squares('x').map((sq) => {
    const ms = P.op('mean', [sq, P.any(), P.c(undefined, (v) => v === true)]);
    const r = P.op('rsqrt', [P.op('add', [ms, P.c('eps', isNum), P.c(undefined, isOne)])]);
    return P.op('mul', [P.op('mul', [P.v('x'), r], { commutative: true }), P.v('w')], { commutative: true });
  });
}

function producerOf(b: GraphBuilder, id: ValueId): IRNode | undefined {
  const r = b.resolve(id);
  for (let i = b.nodes.length - 1; i >= 0; i--) if (b.nodes[i]!.outputs.includes(r)) return b.nodes[i];
  return undefined;
}

function constOf(a: IRArg | undefined): unknown {
  if (!a) return undefined;
  if (a.kind === 'const') return a.value;
  if (a.kind === 'list') return a.items.map(constOf);
  return undefined;
}

function normalisedDims(v: unknown, rank: number): number[] | null {
  const list = typeof v === 'number' ? [v] : Array.isArray(v) ? v : null;
  if (!list || !list.every((d) => typeof d === 'number')) return null;
  return list.map((d: number) => (d < 0 ? d + rank : d));
}

function rmsReplace(b: GraphBuilder, m: Match, root: IRNode): ValueId[] | null {
  const x = m.value('x');
  const w = m.value('w');
  const xi = b.info(x.id);
  const wi = b.info(w.id);
  const out = b.info(root.outputs[0]!);
  const h = xi.shape[xi.shape.length - 1];
  if (!isFloating(xi.dtype) || xi.shape.length === 0 || wi.dtype !== xi.dtype || out.dtype !== xi.dtype) return null;
  if (wi.shape.length !== 1 || wi.shape[0] !== h || out.shape.length !== xi.shape.length || !isContiguousStrides(xi.shape, xi.strides)) return null;
  const mean = m.nodes.find((n) => n.op === 'mean');
  const dims = normalisedDims(constOf(mean?.args[1]), xi.shape.length);
  if (!dims || dims.length !== 1 || dims[0] !== xi.shape.length - 1) return null;
  const eps = m.consts.get('eps') as number;
  if (!(eps > 0)) return null;
  const add = producerOf(b, x.id);
  if (add && add.op === 'add' && add.args.length >= 2 && add.args[0]!.kind === 'value' && add.args[1]!.kind === 'value' && constOf(add.args[2]) === 1) {
    const a = b.info(add.args[0].id);
    const r = b.info(add.args[1].id);
    const same = (t: typeof a): boolean => t.dtype === xi.dtype && t.shape.length === xi.shape.length && t.shape.every((s, i) => s === xi.shape[i]);
    if (same(a) && same(r)) {
      const [y, s] = b.call('llm.addRmsNorm', [new Val(add.args[0].id), new Val(add.args[1].id), w, eps]);
      b.replace(x.id, s!);
      return [y!];
    }
  }
  return [b.op('llm.rmsNorm', x, w, eps).id];
}

/** The source tensor and half length when `a` and `b` are the first and second halves of one tensor's last dim. */
function halves(bld: GraphBuilder, a: ValueId, b: ValueId): ValueId | null {
  const pa = producerOf(bld, a);
  const pb = producerOf(bld, b);
  if (!pa || !pb) return null;
  if (pa === pb && pa.op === 'chunk') {
    const src = pa.args[0];
    if (src?.kind !== 'value' || constOf(pa.args[1]) !== 2 || pa.outputs.length !== 2) return null;
    const rank = bld.info(src.id).shape.length;
    if (normalisedDims(constOf(pa.args[2]), rank)?.[0] !== rank - 1) return null;
    if (bld.info(src.id).shape[rank - 1]! % 2 !== 0) return null;
    return pa.outputs[0] === bld.resolve(a) && pa.outputs[1] === bld.resolve(b) ? src.id : null;
  }
  const range = (n: IRNode): { src: ValueId; dim: number; start: number; end: number } | null => {
    const src = n.args[0];
    if (src?.kind !== 'value') return null;
    const c = n.args.slice(1).map(constOf);
    if (n.op === 'narrow' && typeof c[0] === 'number' && typeof c[1] === 'number' && typeof c[2] === 'number') return { src: src.id, dim: c[0], start: c[1], end: c[1] + c[2] };
    if (n.op === 'slice' && typeof c[0] === 'number' && (c[3] === 1 || c[3] === undefined)) {
      const size = bld.info(src.id).shape[normalisedDims(c[0], bld.info(src.id).shape.length)![0]!]!;
      const start = typeof c[1] === 'number' ? c[1] : 0;
      const end = typeof c[2] === 'number' ? Math.min(c[2], size) : size;
      if (start < 0 || end < 0) return null;
      return { src: src.id, dim: c[0], start, end };
    }
    return null;
  };
  const ra = range(pa);
  const rb = range(pb);
  if (!ra || !rb || ra.src !== rb.src) return null;
  const shape = bld.info(ra.src).shape;
  const last = shape.length - 1;
  if (normalisedDims(ra.dim, shape.length)![0] !== last || normalisedDims(rb.dim, shape.length)![0] !== last) return null;
  const d = shape[last]! / 2;
  return ra.start === 0 && ra.end === d && rb.start === d && rb.end === 2 * d ? ra.src : null;
}

function gatedRule(name: string, act: 'silu' | 'gelu'): RewriteRule {
  const actPattern = act === 'silu' ? P.op('silu', [P.v('a')]) : P.op('gelu', [P.v('a'), P.c('approximate')]);
  return {
    name,
    pattern: P.op('mul', [actPattern, P.v('b')], { commutative: true }),
    replace(b, m, root) {
      const src = halves(b, m.value('a').id, m.value('b').id);
      if (src === null) return null;
      const xi = b.info(src);
      const out = b.info(root.outputs[0]!);
      if (!isFloating(xi.dtype) || out.dtype !== xi.dtype || !isContiguousStrides(xi.shape, xi.strides)) return null;
      if (act === 'silu') return [b.op('llm.siluAndMul', new Val(src)).id];
      const approx = m.consts.get('approximate') ?? 'none';
      if (approx !== 'none' && approx !== 'tanh') return null;
      return [b.op('llm.geluAndMul', new Val(src), approx).id];
    },
  };
}

/** The value x when `id` is rotate-half(x) = cat([neg(x[..., d:]), x[..., :d]], -1). */
function rotateHalfSource(bld: GraphBuilder, id: ValueId): ValueId | null {
  const cat = producerOf(bld, id);
  if (cat?.op !== 'cat' || cat.args[0]?.kind !== 'list' || cat.args[0].items.length !== 2) return null;
  const rank = bld.info(id).shape.length;
  if (normalisedDims(constOf(cat.args[1]) ?? 0, rank)?.[0] !== rank - 1) return null;
  const [negPart, pos] = cat.args[0].items;
  if (negPart?.kind !== 'value' || pos?.kind !== 'value') return null;
  const neg = producerOf(bld, negPart.id);
  const negated = neg && neg.args[0]?.kind === 'value' && (neg.op === 'neg' || (neg.op === 'mul' && constOf(neg.args[1]) === -1)) ? neg.args[0].id : null;
  if (negated === null) return null;
  // halves(a, b): a = first half, b = second half of one source's last dim.
  return halves(bld, pos.id, negated);
}

const rotaryRule: RewriteRule = {
  name: 'rotate-half-rope',
  pattern: P.op('add', [P.op('mul', [P.v('a'), P.v('b')]), P.op('mul', [P.v('c'), P.v('d')]), P.c(undefined, isOne)]),
  replace(b, m, root) {
    const [va, vb, vc, vd] = ['a', 'b', 'c', 'd'].map((n) => b.resolve(m.value(n).id));
    // One product is x * cos, the other rotate-half(x) * sin, in any order.
    for (const [p1, p2] of [[[va!, vb!], [vc!, vd!]], [[vc!, vd!], [va!, vb!]]] as const) {
      for (const [r, sin] of [[p2[0], p2[1]], [p2[1], p2[0]]] as const) {
        const x = rotateHalfSource(b, r);
        if (x === null) continue;
        const cos = p1[0] === b.resolve(x) ? p1[1] : p1[1] === b.resolve(x) ? p1[0] : null;
        if (cos === null) continue;
        const xi = b.info(x);
        const out = b.info(root.outputs[0]!);
        const same = (id: ValueId): boolean => b.info(id).dtype === xi.dtype && b.info(id).shape.at(-1) === xi.shape.at(-1) && b.info(id).shape.length <= xi.shape.length;
        if (!isFloating(xi.dtype) || out.dtype !== xi.dtype || !same(cos) || !same(sin)) return null;
        if (out.shape.length !== xi.shape.length || out.shape.some((s, i) => s !== xi.shape[i])) return null;
        const keep = preservedStrides(xi.shape, xi.shape, xi.strides);
        if (out.strides.some((s, i) => s !== keep[i])) return null;
        return [b.op('llm.applyRotaryEmb', new Val(x), new Val(cos), new Val(sin), true).id];
      }
    }
    return null;
  },
};

export const llmRewriteRules: readonly RewriteRule[] = [
  rotaryRule,
  ...normPatterns().map((pattern, i): RewriteRule => ({ name: `rms-norm-${['pow', 'square', 'mul'][i]}`, pattern, replace: rmsReplace })),
  gatedRule('silu-and-mul', 'silu'),
  gatedRule('gelu-and-mul', 'gelu'),
];

/**
 * Rules kiln.compile applies by default (code-generating backends): only those that always pay.
 * The rotate-half RoPE is three kernels plus a cat (an extern that blocks fusion) per tensor, and
 * one library kernel after the rewrite. The norm and act-and-mul compositions already fuse into
 * one generated kernel each, so mapping them onto library kernels is opt-in.
 */
export const autoRewriteRules: readonly RewriteRule[] = [rotaryRule];
