/**
 * torch.nn.MultiheadAttention with PyTorch's parameter names (in_proj_weight [3E, E],
 * in_proj_bias [3E], out_proj.weight, out_proj.bias), so its state dicts load PyTorch's and the
 * reverse. Property names are snake_case for that reason: Module names parameters after them.
 *
 * Masks follow MultiheadAttention's convention, which is the reverse of scaledDotProductAttention's:
 * a bool `attnMask` or `keyPaddingMask` is true where attention is NOT allowed; a float one is
 * added to the scores. Both become one additive float mask. With needWeights (the default, as
 * torch) the scores are materialised to return the weights (averaged over heads unless
 * averageAttnWeights is false); without, the call goes to scaledDotProductAttention, which may use
 * its fused paths. Separate key/value dims (kdim/vdim) and bias_k/bias_v are not supported.
 */
import { add } from '../../api/core.js';
import { arange, empty } from '../../api/creation.js';
import { dropout, scaledDotProductAttention } from '../../api/nn.js';
import { where } from '../../api/pointwise.js';
import { mean, softmax } from '../../api/reduction.js';
import { linear, matmul } from '../../api/linalg.js';
import { checkOptionKeys, keysOf } from '../../runtime/option-keys.js';
import { isFloating } from '../../tensor/dtype.js';
import { fmtShape, shapeEquals } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { constant_, xavierUniform_ } from '../init.js';
import { Module, Parameter } from '../module.js';
import { LAYER_KEYS, Linear, type LayerOptions } from './basic.js';

export interface MultiheadAttentionOptions extends LayerOptions {
  /** Dropout on the attention weights while training (default 0). */
  dropout?: number;
  /** Biases on the input and output projections (default true). */
  bias?: boolean;
  /** Inputs and output are [N, L, E] (default false: [L, N, E], as torch). */
  batchFirst?: boolean;
}

const MHA_KEYS = [...LAYER_KEYS, ...keysOf<Omit<MultiheadAttentionOptions, keyof LayerOptions>>({ dropout: true, bias: true, batchFirst: true })];

export interface MhaForwardOptions {
  /** [N, S] (or [S] unbatched): true (or a float added to the scores) where a key is padding. */
  keyPaddingMask?: Tensor | null;
  /** Return the attention weights (default true, as torch). */
  needWeights?: boolean;
  /** [L, S] or [N * numHeads, L, S]: true where attention is not allowed, or an additive float mask. */
  attnMask?: Tensor | null;
  /** Average the returned weights over heads (default true): [N, L, S]; false: [N, H, L, S]. */
  averageAttnWeights?: boolean;
  /** Causal attention; used when attnMask is not given (torch treats it as a hint about attnMask). */
  isCausal?: boolean;
}

const FORWARD_KEYS = keysOf<MhaForwardOptions>({ keyPaddingMask: true, needWeights: true, attnMask: true, averageAttnWeights: true, isCausal: true });

export interface MhaOutput {
  /** [L, N, E] ([N, L, E] with batchFirst; [L, E] unbatched). */
  output: Tensor;
  /** The attention weights when needWeights, else null. */
  weights: Tensor | null;
}

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

export class MultiheadAttention extends Module {
  in_proj_weight: Parameter;
  in_proj_bias: Parameter | null;
  out_proj: Linear;
  readonly headDim: number;
  readonly dropout: number;
  readonly batchFirst: boolean;

  constructor(
    readonly embedDim: number,
    readonly numHeads: number,
    options: MultiheadAttentionOptions = {},
  ) {
    super();
    checkOptionKeys(`nn.${new.target.name}`, options, MHA_KEYS);
    if (!Number.isInteger(embedDim) || embedDim <= 0) throw new Error(`nn.MultiheadAttention: embedDim must be a positive integer, got ${embedDim}`);
    if (!Number.isInteger(numHeads) || numHeads <= 0 || embedDim % numHeads !== 0) {
      throw new Error(`nn.MultiheadAttention: embedDim (${embedDim}) must be divisible by numHeads (${numHeads})`);
    }
    this.headDim = embedDim / numHeads;
    this.dropout = options.dropout ?? 0;
    if (!(this.dropout >= 0 && this.dropout <= 1)) throw new Error(`nn.MultiheadAttention: dropout must be in [0, 1], got ${this.dropout}`);
    this.batchFirst = options.batchFirst ?? false;
    const bias = options.bias ?? true;
    const o = { dtype: options.dtype, device: options.device };
    const init = options.init ?? true;
    // torch's _reset_parameters: xavier_uniform_ on the packed projection, zero biases.
    this.in_proj_weight = new Parameter(empty([3 * embedDim, embedDim], o));
    this.in_proj_bias = bias ? new Parameter(empty([3 * embedDim], o)) : null;
    this.out_proj = new Linear(embedDim, embedDim, bias, { ...o, generator: options.generator, init });
    if (init) {
      xavierUniform_(this.in_proj_weight, 1, options.generator);
      if (this.in_proj_bias) constant_(this.in_proj_bias, 0);
      if (this.out_proj.bias) constant_(this.out_proj.bias, 0);
    }
  }

  /** Bool (true = masked) or float mask -> additive float mask of `dtype`. */
  private additive(name: string, m: Tensor, dtype: Tensor['dtype']): Tensor {
    if (m.dtype === 'bool') return where(m, -Infinity, 0).to(dtype);
    if (!isFloating(m.dtype)) throw new TypeError(`nn.MultiheadAttention: '${name}' must be bool or floating point, got ${describe(m)}`);
    return m.dtype === dtype ? m : m.to(dtype);
  }

  /** query [L, N, E] (or batchFirst [N, L, E], or [L, E]); key and value [S, N, E] likewise. */
  forward(query: Tensor, key: Tensor, value: Tensor, options: MhaForwardOptions = {}): MhaOutput {
    checkOptionKeys('nn.MultiheadAttention.forward', options, FORWARD_KEYS);
    const E = this.embedDim;
    const H = this.numHeads;
    const D = this.headDim;
    const unbatched = query.ndim === 2;
    for (const [name, t] of [['query', query], ['key', key], ['value', value]] as const) {
      if (t.ndim !== (unbatched ? 2 : 3) || t.shape.at(-1) !== E) {
        throw new Error(`nn.MultiheadAttention: '${name}' must be ${unbatched ? '[L, E]' : this.batchFirst ? '[N, L, E]' : '[L, N, E]'} with E = ${E}, got ${describe(t)} (query ${describe(query)})`);
      }
    }
    if (!shapeEquals(key.shape, value.shape)) throw new Error(`nn.MultiheadAttention: 'key' ${describe(key)} and 'value' ${describe(value)} must have the same shape`);
    // To [N, L, E].
    const batch = (t: Tensor): Tensor => (unbatched ? t.unsqueeze(0) : this.batchFirst ? t : t.transpose(0, 1));
    const q0 = batch(query);
    const k0 = batch(key);
    const v0 = batch(value);
    const N = q0.shape[0]!;
    const L = q0.shape[1]!;
    const S = k0.shape[1]!;
    if (k0.shape[0] !== N) throw new Error(`nn.MultiheadAttention: 'key' ${describe(key)} has another batch size than 'query' ${describe(query)}`);
    const w = this.in_proj_weight;
    const b = this.in_proj_bias;
    const proj = (x: Tensor, i: number, len: number): Tensor =>
      linear(x, w.narrow(0, i * E, E), b ? b.narrow(0, i * E, E) : null).reshape([N, len, H, D]).transpose(1, 2);
    const q = proj(q0, 0, L);
    const k = proj(k0, 1, S);
    const v = proj(v0, 2, S);

    // One additive mask broadcastable to [N, H, L, S].
    let mask: Tensor | null = null;
    const attnMask = options.attnMask ?? null;
    if (attnMask) {
      const ok = (attnMask.ndim === 2 && shapeEquals(attnMask.shape, [L, S])) || (attnMask.ndim === 3 && shapeEquals(attnMask.shape, [N * H, L, S]));
      if (!ok) throw new Error(`nn.MultiheadAttention: 'attnMask' must be [${L}, ${S}] or [${N * H}, ${L}, ${S}] (N * numHeads, L, S), got ${describe(attnMask)}`);
      const m = this.additive('attnMask', attnMask, q.dtype);
      mask = m.ndim === 2 ? m : m.reshape([N, H, L, S]);
    } else if (options.isCausal) {
      const i = arange(L, { device: q.device }).unsqueeze(1);
      const j = arange(S, { device: q.device }).unsqueeze(0);
      mask = this.additive('attnMask', j.gt(i), q.dtype);
    }
    const kpm = options.keyPaddingMask ?? null;
    if (kpm) {
      const want = unbatched ? [S] : [N, S];
      if (!shapeEquals(kpm.shape, want)) throw new Error(`nn.MultiheadAttention: 'keyPaddingMask' must be ${fmtShape(want)} (N, S), got ${describe(kpm)}`);
      const m = this.additive('keyPaddingMask', kpm, q.dtype).reshape([N, 1, 1, S]);
      mask = mask ? add(mask, m) : m;
    }

    const p = this.training ? this.dropout : 0;
    const needWeights = options.needWeights ?? true;
    let out: Tensor;
    let weights: Tensor | null = null;
    if (needWeights) {
      let scores = matmul(q, k.transpose(-2, -1)).mul(1 / Math.sqrt(D));
      if (mask) scores = add(scores, mask);
      const attn = softmax(scores, -1);
      weights = (options.averageAttnWeights ?? true) ? mean(attn, 1) : attn;
      out = matmul(p > 0 ? dropout(attn, p, true) : attn, v);
      if (unbatched) weights = weights.squeeze(0);
    } else {
      out = scaledDotProductAttention(q, k, v, { attnMask: mask, dropoutP: p });
    }
    const merged = out.transpose(1, 2).reshape([N, L, E]);
    const y = this.out_proj.forward(merged);
    return { output: unbatched ? y.squeeze(0) : this.batchFirst ? y : y.transpose(0, 1), weights };
  }
}
