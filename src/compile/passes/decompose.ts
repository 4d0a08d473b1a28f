/**
 * Decompositions: rewrite composite ops into a smaller core set (pointwise math, sum/mean/amax
 * reductions, mm/linear) for the code generator. Each decomposition is a function from a graph
 * node to new nodes over existing primitive ops, emitted through a GraphBuilder; it returns the
 * values that replace the node's outputs, or null to keep the node (unsupported dtype or
 * arguments). Decompositions only apply to float32 inputs: half-precision kernels compute in
 * float32 internally, and a decomposition in half precision would round every intermediate.
 * When the original op gives a contiguous result and the decomposition does not (transposed
 * input), a `contiguous` is appended so strides match too.
 *
 * `linear` is kept (an extern GEMM for the code generator).
 */
import { finfoEps } from '../../ops/defs/linalg.js';
import { isContiguousStrides } from '../../tensor/layout.js';
import type { Graph, IRArg, IRNode, ValueId } from '../ir.js';
import { argValues } from '../ir.js';
import { GraphBuilder, Val, mutatedValues } from './util.js';

export type Decomposition = (node: IRNode, b: GraphBuilder) => ValueId[] | null;

const registry = new Map<string, Decomposition>();

export function registerDecomposition(op: string, fn: Decomposition): void {
  registry.set(op, fn);
}

export function getDecomposition(op: string): Decomposition | undefined {
  return registry.get(op);
}

export function listDecompositions(): string[] {
  return [...registry.keys()];
}

function constArg(node: IRNode, i: number): unknown {
  const a = node.args[i];
  if (!a) return undefined;
  if (a.kind === 'const') return a.value;
  if (a.kind === 'list') return a.items.map((x) => (x.kind === 'const' ? x.value : undefined));
  return undefined;
}

function valueArg(node: IRNode, i: number): Val | null {
  const a: IRArg | undefined = node.args[i];
  return a?.kind === 'value' ? new Val(a.id) : null;
}

/** Float32 input check shared by all decompositions. */
function f32(b: GraphBuilder, v: Val | null): v is Val {
  return v !== null && b.info(v.id).dtype === 'float32';
}

/** Trailing dims [-k, ..., -1]. */
function trailing(k: number): number[] {
  return Array.from({ length: k }, (_, i) => i - k);
}

function dimList(d: unknown, rank: number): number[] | null {
  if (d === null || d === undefined) return Array.from({ length: rank }, (_, i) => i);
  if (typeof d === 'number') return [d];
  if (Array.isArray(d) && d.every((x) => typeof x === 'number')) return d as number[];
  return null;
}

const single =
  (fn: (node: IRNode, b: GraphBuilder) => Val | null): Decomposition =>
  (node, b) => {
    const r = fn(node, b);
    return r ? [r.id] : null;
  };

registerDecomposition(
  'softmax',
  single((n, b) => {
    const x = valueArg(n, 0);
    const dim = constArg(n, 1) as number;
    const dtype = constArg(n, 2);
    if (!f32(b, x) || (dtype !== null && dtype !== undefined && dtype !== 'float32')) return null;
    const m = b.op('amax', x, [dim], true);
    const e = b.op('exp', b.op('sub', x, m, 1));
    return b.op('div', e, b.op('sum', e, [dim], true, null), null);
  }),
);

registerDecomposition(
  'logSoftmax',
  single((n, b) => {
    const x = valueArg(n, 0);
    const dim = constArg(n, 1) as number;
    const dtype = constArg(n, 2);
    if (!f32(b, x) || (dtype !== null && dtype !== undefined && dtype !== 'float32')) return null;
    const m = b.op('amax', x, [dim], true);
    const shifted = b.op('sub', x, m, 1);
    const lse = b.op('log', b.op('sum', b.op('exp', shifted), [dim], true, null));
    return b.op('sub', shifted, lse, 1);
  }),
);

registerDecomposition(
  'logsumexp',
  single((n, b) => {
    const x = valueArg(n, 0);
    const dims = dimList(constArg(n, 1), 0);
    const keepdim = constArg(n, 2) === true;
    if (!f32(b, x) || !dims || dims.length === 0 || b.info(x.id).shape.length === 0) return null;
    // Shift by the max (0 where it is infinite, as torch does, so all -inf rows give -inf).
    const m = b.op('amax', x, dims, true);
    const safe = b.op('where', b.op('isfinite', m), m, 0);
    const s = b.op('sum', b.op('exp', b.op('sub', x, safe, 1)), dims, keepdim, null);
    const mk = keepdim ? safe : b.op('squeeze', safe, dims);
    return b.op('add', b.op('log', s), mk, 1);
  }),
);

function moment(n: IRNode, b: GraphBuilder, std: boolean): Val | null {
  const x = valueArg(n, 0);
  if (!f32(b, x)) return null;
  const shape = b.info(x.id).shape;
  const dims = dimList(constArg(n, 1), shape.length);
  const correction = constArg(n, 2);
  const keepdim = constArg(n, 3) === true;
  if (!dims || typeof correction !== 'number' || shape.length === 0) return null;
  const count = dims.reduce((p, d) => p * shape[d < 0 ? d + shape.length : d]!, 1);
  const mu = b.op('mean', x, dims, true, null);
  const d = b.op('sub', x, mu, 1);
  const s = b.op('sum', b.op('mul', d, d), dims, keepdim, null);
  const v = b.op('div', s, Math.max(count - correction, 0), null);
  return std ? b.op('sqrt', v) : v;
}
registerDecomposition(
  'var',
  single((n, b) => moment(n, b, false)),
);
registerDecomposition(
  'std',
  single((n, b) => moment(n, b, true)),
);

registerDecomposition(
  'layerNorm',
  single((n, b) => {
    const x = valueArg(n, 0);
    const ns = constArg(n, 1);
    const w = valueArg(n, 2);
    const bias = valueArg(n, 3);
    const eps = constArg(n, 4);
    if (!f32(b, x) || !Array.isArray(ns) || typeof eps !== 'number') return null;
    if ((w && !f32(b, w)) || (bias && !f32(b, bias))) return null;
    const dims = trailing(ns.length);
    const mu = b.op('mean', x, dims, true, null);
    const d = b.op('sub', x, mu, 1);
    const v = b.op('mean', b.op('mul', d, d), dims, true, null);
    let y = b.op('mul', d, b.op('rsqrt', b.op('add', v, eps, 1)));
    if (w) y = b.op('mul', y, w);
    if (bias) y = b.op('add', y, bias, 1);
    return y;
  }),
);

registerDecomposition(
  'rmsNorm',
  single((n, b) => {
    const x = valueArg(n, 0);
    const ns = constArg(n, 1);
    const w = valueArg(n, 2);
    const epsArg = constArg(n, 3);
    if (!f32(b, x) || !Array.isArray(ns) || (w && !f32(b, w))) return null;
    const eps = typeof epsArg === 'number' ? epsArg : finfoEps('float32');
    const ms = b.op('mean', b.op('mul', x, x), trailing(ns.length), true, null);
    const y = b.op('mul', x, b.op('rsqrt', b.op('add', ms, eps, 1)));
    return w ? b.op('mul', y, w) : y;
  }),
);

// batchNorm in inference: (x - running_mean) * rsqrt(running_var + eps) * weight + bias, with the
// per-channel statistics viewed as [C, 1, ...] so they broadcast over (N, C, *). The pointwise form
// fuses with what follows (the ReLU of a conv block), and constant folding can precompute the
// per-channel scale from the running stats. Training mode (batch statistics, running-stat
// updates) keeps the op.
registerDecomposition(
  'batchNorm',
  single((n, b) => {
    const x = valueArg(n, 0);
    const mean = valueArg(n, 1);
    const variance = valueArg(n, 2);
    const w = valueArg(n, 3);
    const bias = valueArg(n, 4);
    const training = constArg(n, 5);
    const eps = constArg(n, 7);
    if (training !== false || typeof eps !== 'number' || !f32(b, x) || !f32(b, mean) || !f32(b, variance)) return null;
    if ((w && !f32(b, w)) || (bias && !f32(b, bias))) return null;
    const rank = b.info(x.id).shape.length;
    if (rank < 2) return null;
    const c = b.info(x.id).shape[1]!;
    const perChannel = (v: Val): Val => (rank === 2 ? v : b.op('view', v, [c, ...new Array<number>(rank - 2).fill(1)]));
    let scale = b.op('rsqrt', b.op('add', variance, eps, 1));
    if (w) scale = b.op('mul', scale, w);
    let y = b.op('mul', b.op('sub', x, perChannel(mean), 1), perChannel(scale));
    if (bias) y = b.op('add', y, perChannel(bias), 1);
    return y;
  }),
);

registerDecomposition(
  'gelu',
  single((n, b) => {
    const x = valueArg(n, 0);
    const approximate = constArg(n, 1);
    if (!f32(b, x)) return null;
    if (approximate === 'tanh') {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const x3 = b.op('mul', b.op('mul', x, x), x);
      const inner = b.op('mul', b.op('add', x, b.op('mul', x3, 0.044715), 1), Math.sqrt(2 / Math.PI));
      return b.op('mul', b.op('mul', x, 0.5), b.op('add', b.op('tanh', inner), 1, 1));
    }
    if (approximate !== 'none') return null;
    // 0.5 x (1 + erf(x / sqrt(2)))
    return b.op('mul', b.op('mul', x, 0.5), b.op('add', b.op('erf', b.op('mul', x, Math.SQRT1_2)), 1, 1));
  }),
);

registerDecomposition(
  'sigmoid',
  single((n, b) => {
    const x = valueArg(n, 0);
    if (!f32(b, x)) return null;
    return b.op('reciprocal', b.op('add', b.op('exp', b.op('neg', x)), 1, 1));
  }),
);

registerDecomposition(
  'silu',
  single((n, b) => {
    const x = valueArg(n, 0);
    if (!f32(b, x)) return null;
    return b.op('div', x, b.op('add', b.op('exp', b.op('neg', x)), 1, 1), null);
  }),
);

registerDecomposition(
  'softplus',
  single((n, b) => {
    const x = valueArg(n, 0);
    const beta = constArg(n, 1);
    const threshold = constArg(n, 2);
    if (!f32(b, x) || typeof beta !== 'number' || typeof threshold !== 'number') return null;
    const bx = beta === 1 ? x : b.op('mul', x, beta);
    let y = b.op('log1p', b.op('exp', bx));
    if (beta !== 1) y = b.op('div', y, beta, null);
    return b.op('where', b.op('gt', bx, threshold), x, y);
  }),
);

registerDecomposition(
  'addmm',
  single((n, b) => {
    const self = valueArg(n, 0);
    const m1 = valueArg(n, 1);
    const m2 = valueArg(n, 2);
    const beta = constArg(n, 3);
    const alpha = constArg(n, 4);
    if (!f32(b, self) || !f32(b, m1) || !f32(b, m2) || typeof beta !== 'number' || typeof alpha !== 'number') return null;
    let r = b.op('mm', m1, m2);
    if (alpha !== 1) r = b.op('mul', r, alpha);
    // beta = 0 ignores self entirely (NaN in self does not propagate), as in torch.
    if (beta === 0) return r;
    return b.op('add', r, beta === 1 ? self : b.op('mul', self, beta), 1);
  }),
);

// Dropout outside training (or with p = 0) is the identity. Handled specially in the pass: the
// output is renamed to the input, unless the graph later writes into it (then a clone keeps the
// input intact).
registerDecomposition('dropout', (n, _b) => {
  const x = valueArg(n, 0);
  const p = constArg(n, 1);
  const training = constArg(n, 2);
  if (!x || !(training === false || p === 0)) return null;
  return [x.id];
});

export interface DecomposeOptions {
  /** Op names to decompose (default: every registered decomposition). */
  only?: readonly string[];
}

/** Applies the registered decompositions to every node (once: decompositions emit core ops only). */
export function decompose(g: Graph, options: DecomposeOptions = {}): Graph {
  const b = new GraphBuilder(g);
  const written = new Set<ValueId>(g.nodes.flatMap(mutatedValues));
  const only = options.only ? new Set(options.only) : null;
  for (const node of g.nodes) {
    const fn = only && !only.has(node.op) ? undefined : registry.get(node.op);
    if (!fn) {
      b.keep(node);
      continue;
    }
    const mapped: IRNode = { ...node, args: node.args.map((a) => b.mapArg(a)) };
    let outs = fn(mapped, b);
    if (!outs || outs.length !== node.outputs.length) {
      b.keep(node);
      continue;
    }
    outs = outs.map((id, k) => {
      const orig = g.values.get(node.outputs[k]!)!;
      const inputs = new Set(node.args.flatMap(argValues).map((v) => b.resolve(v)));
      // Identity results (dropout) must not alias an input the graph later writes through.
      if (inputs.has(id) && written.has(node.outputs[k]!)) return b.op('clone', new Val(id), null).id;
      const info = b.info(id);
      if (isContiguousStrides(orig.shape, orig.strides) && !isContiguousStrides(info.shape, info.strides)) {
        return b.op('contiguous', new Val(id), 'contiguous').id;
      }
      return id;
    });
    node.outputs.forEach((o, k) => b.replace(o, outs[k]!));
  }
  return b.finish();
}
