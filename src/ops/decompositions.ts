/**
 * The decomposition table's entries (decompose.ts): composite ops as compositions of core ops
 * (pointwise math, sum/mean/amax reductions, mm, views). Each is the op's eager fallback on an
 * accelerator without a kernel for it, and the compiler's rewrite into ops its code generators
 * fuse (compile/passes/decompose.ts). They apply to float32 inputs only and return null otherwise:
 * kernels for the half types compute in float32 internally, and a composition in half precision
 * would round every intermediate. `linear` is not decomposed (an extern GEMM for the compiler).
 */
import { finfoEps } from './defs/linalg.js';
import { defineDecomposition, single, type DecompositionBuilder } from './decompose.js';
import './defs/nn.js';
import './defs/pointwise.js';
import './defs/reduction.js';

/** Argument i when it is a value (a tensor), else null. */
function val<V>(b: DecompositionBuilder<V>, args: readonly unknown[], i: number): V | null {
  const a = args[i];
  return b.isValue(a) ? a : null;
}

/** Float32 input check shared by all decompositions. */
function f32<V>(b: DecompositionBuilder<V>, v: V | null): v is V {
  return v !== null && b.meta(v).dtype === 'float32';
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


defineDecomposition(
  'softmax',
  single((b, args) => {
    const x = val(b, args, 0);
    const dim = args[1] as number;
    const dtype = args[2];
    if (!f32(b, x) || (dtype !== null && dtype !== undefined && dtype !== 'float32')) return null;
    const m = b.op('amax', x, [dim], true);
    const e = b.op('exp', b.op('sub', x, m, 1));
    return b.op('div', e, b.op('sum', e, [dim], true, null), null);
  }),
);

defineDecomposition(
  'logSoftmax',
  single((b, args) => {
    const x = val(b, args, 0);
    const dim = args[1] as number;
    const dtype = args[2];
    if (!f32(b, x) || (dtype !== null && dtype !== undefined && dtype !== 'float32')) return null;
    const m = b.op('amax', x, [dim], true);
    const shifted = b.op('sub', x, m, 1);
    const lse = b.op('log', b.op('sum', b.op('exp', shifted), [dim], true, null));
    return b.op('sub', shifted, lse, 1);
  }),
);

defineDecomposition(
  'logsumexp',
  single((b, args) => {
    const x = val(b, args, 0);
    const dims = dimList(args[1], 0);
    const keepdim = args[2] === true;
    if (!f32(b, x) || !dims || dims.length === 0 || b.meta(x).shape.length === 0) return null;
    // Shift by the max (0 where it is infinite, as torch does, so all -inf rows give -inf).
    const m = b.op('amax', x, dims, true);
    const safe = b.op('where', b.op('isfinite', m), m, 0);
    const s = b.op('sum', b.op('exp', b.op('sub', x, safe, 1)), dims, keepdim, null);
    const mk = keepdim ? safe : b.op('squeeze', safe, dims);
    return b.op('add', b.op('log', s), mk, 1);
  }),
);

function moment<V>(b: DecompositionBuilder<V>, args: readonly unknown[], std: boolean): V | null {
  const x = val(b, args, 0);
  if (!f32(b, x)) return null;
  const shape = b.meta(x).shape;
  const dims = dimList(args[1], shape.length);
  const correction = args[2];
  const keepdim = args[3] === true;
  if (!dims || typeof correction !== 'number' || shape.length === 0) return null;
  const count = dims.reduce((p, d) => p * shape[d < 0 ? d + shape.length : d]!, 1);
  const mu = b.op('mean', x, dims, true, null);
  const d = b.op('sub', x, mu, 1);
  const s = b.op('sum', b.op('mul', d, d), dims, keepdim, null);
  const v = b.op('div', s, Math.max(count - correction, 0), null);
  return std ? b.op('sqrt', v) : v;
}
defineDecomposition(
  'var',
  single((b, args) => moment(b, args, false)),
);
defineDecomposition(
  'std',
  single((b, args) => moment(b, args, true)),
);

defineDecomposition(
  'layerNorm',
  single((b, args) => {
    const x = val(b, args, 0);
    const ns = args[1];
    const w = val(b, args, 2);
    const bias = val(b, args, 3);
    const eps = args[4];
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

defineDecomposition(
  'rmsNorm',
  single((b, args) => {
    const x = val(b, args, 0);
    const ns = args[1];
    const w = val(b, args, 2);
    const epsArg = args[3];
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
defineDecomposition(
  'batchNorm',
  single((b, args) => {
    const x = val(b, args, 0);
    const mean = val(b, args, 1);
    const variance = val(b, args, 2);
    const w = val(b, args, 3);
    const bias = val(b, args, 4);
    const training = args[5];
    const eps = args[7];
    if (training !== false || typeof eps !== 'number' || !f32(b, x) || !f32(b, mean) || !f32(b, variance)) return null;
    if ((w && !f32(b, w)) || (bias && !f32(b, bias))) return null;
    const rank = b.meta(x).shape.length;
    if (rank < 2) return null;
    const c = b.meta(x).shape[1]!;
    const perChannel = (v: typeof x): typeof x => (rank === 2 ? v : b.op('view', v, [c, ...new Array<number>(rank - 2).fill(1)]));
    let scale = b.op('rsqrt', b.op('add', variance, eps, 1));
    if (w) scale = b.op('mul', scale, w);
    let y = b.op('mul', b.op('sub', x, perChannel(mean), 1), perChannel(scale));
    if (bias) y = b.op('add', y, perChannel(bias), 1);
    return y;
  }),
);

defineDecomposition(
  'gelu',
  single((b, args) => {
    const x = val(b, args, 0);
    const approximate = args[1];
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

defineDecomposition(
  'sigmoid',
  single((b, args) => {
    const x = val(b, args, 0);
    if (!f32(b, x)) return null;
    return b.op('reciprocal', b.op('add', b.op('exp', b.op('neg', x)), 1, 1));
  }),
);

defineDecomposition(
  'silu',
  single((b, args) => {
    const x = val(b, args, 0);
    if (!f32(b, x)) return null;
    return b.op('div', x, b.op('add', b.op('exp', b.op('neg', x)), 1, 1), null);
  }),
);

defineDecomposition(
  'softplus',
  single((b, args) => {
    const x = val(b, args, 0);
    const beta = args[1];
    const threshold = args[2];
    if (!f32(b, x) || typeof beta !== 'number' || typeof threshold !== 'number') return null;
    const bx = beta === 1 ? x : b.op('mul', x, beta);
    let y = b.op('log1p', b.op('exp', bx));
    if (beta !== 1) y = b.op('div', y, beta, null);
    return b.op('where', b.op('gt', bx, threshold), x, y);
  }),
);

defineDecomposition(
  'addmm',
  single((b, args) => {
    const self = val(b, args, 0);
    const m1 = val(b, args, 1);
    const m2 = val(b, args, 2);
    const beta = args[3];
    const alpha = args[4];
    if (!f32(b, self) || !f32(b, m1) || !f32(b, m2) || typeof beta !== 'number' || typeof alpha !== 'number') return null;
    let r = b.op('mm', m1, m2);
    if (alpha !== 1) r = b.op('mul', r, alpha);
    // beta = 0 ignores self entirely (NaN in self does not propagate), as in torch.
    if (beta === 0) return r;
    return b.op('add', r, beta === 1 ? self : b.op('mul', self, beta), 1);
  }),
);

// Dropout outside training (or with p = 0) is the identity. The compiler's pass renames the output
// to the input, unless the graph later writes into it (then a clone keeps the input intact).
defineDecomposition('dropout', (b, args) => {
  const x = val(b, args, 0);
  const p = args[1];
  const training = args[2];
  if (!x || !(training === false || p === 0)) return null;
  return [x];
});
