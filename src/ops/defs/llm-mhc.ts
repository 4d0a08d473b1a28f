/**
 * LLM library ops, part 3: mHC, DeepSeek's manifold-constrained hyper-connections (Xie et al.,
 * "mHC: Manifold-Constrained Hyper-Connections", arXiv:2512.24880). The residual stream is widened
 * to n streams x_l in R^{n x H}; a layer F reads a mix of them and writes back through another:
 *
 *   x_{l+1} = H_res^T x_l + H_post^T F(H_pre x_l)                               (paper eq. 3, 6)
 *
 * with the mixing maps computed per token from the streams themselves (paper eqs. 7-8, and the
 * inference form used by DeepSeek's kernels and vLLM's mhc_pre):
 *
 *   v      = vec(x_l) in R^{nH},   r = sqrt(mean(v^2) + rmsEps)          (RMSNorm of the flat streams)
 *   m      = (phi v) / r in R^{n(n+2)}                                   (one projection, phi [n(n+2), nH])
 *   pre    = sigmoid(alpha[0] * m[0:n]    + bias[0:n])   + preEps         [n]
 *   post   = postMult * sigmoid(alpha[1] * m[n:2n] + bias[n:2n])          [n]   (paper: postMult = 2)
 *   comb   = SinkhornKnopp(exp(alpha[2] * m[2n:] + bias[2n:]) as [n, n])   [n, n]
 *   input  = sum_i pre[i] * x_l[i, :]                                      [H]   (layer input)
 *
 * Sinkhorn-Knopp (paper eq. 9, t_max = 20): starting from M = exp(logits) it alternately
 * normalises rows and columns. Here, as in DeepSeek's kernels, the first row normalisation is a
 * softmax (the same matrix, computed stably), every normalisation divides by (sum + sinkhornEps),
 * a column normalisation follows it, and `sinkhornIters - 1` further (row, column) rounds follow:
 * columns sum to 1, rows to 1 within the iteration's convergence.
 *
 *   llm.mhcPre(streams [..., n, H], phi [n(n+2), nH], alpha [3], bias [n(n+2)], rmsEps, preEps,
 *              postMult, sinkhornIters, sinkhornEps) -> [layerInput [..., H], post [..., n], comb [..., n, n]]
 *   llm.mhcPost(layerOut [..., H], streams [..., n, H], post [..., n], comb [..., n, n])
 *              -> streams' [..., n, H],  streams'[k] = post[k] * layerOut + sum_j comb[j, k] * streams[j]
 *   llm.mhcHeadCollapse(streams [..., n, H], phi [n, nH], alpha [1], bias [n], rmsEps, eps)
 *              -> [..., H] = sum_i (sigmoid(alpha[0] * (phi v / r)[i] + bias[i]) + eps) * streams[i]
 *
 * post and comb are float32 (float64 for float64 streams); layerInput and the new streams have
 * the streams' dtype; phi/alpha/bias may be any floating dtype (read in float32 or wider).
 */
import type { TensorMeta } from '../../tensor/tensor.js';
import { describe } from '../meta-helpers.js';
import { defineOp } from '../registry.js';
import type { OutMeta } from '../schema.js';
import { computeDtype, dense, floatTensor, positiveFloat, posInt, sameDevice, sameDtype, shapeIs } from './llm-common.js';

export interface MhcGeometry {
  lead: number[];
  tokens: number;
  n: number;
  hidden: number;
}

function streamsGeometry(op: string, streams: TensorMeta): MhcGeometry {
  floatTensor(op, 'streams', streams, 2);
  const r = streams.shape.length;
  const lead = streams.shape.slice(0, r - 2);
  const n = streams.shape[r - 2]!;
  const hidden = streams.shape[r - 1]!;
  if (n < 1) throw new Error(`${op}: argument 'streams' (${describe(streams)}) needs at least one stream (dim -2)`);
  return { lead, tokens: lead.reduce((a, b) => a * b, 1), n, hidden };
}

function mixingParams(op: string, streams: TensorMeta, phi: TensorMeta, alpha: TensorMeta, bias: TensorMeta, rows: number, nAlpha: number, g: MhcGeometry): void {
  floatTensor(op, 'phi', phi);
  shapeIs(op, 'phi', phi, [rows, g.n * g.hidden], () => `[${rows === g.n ? 'n' : 'n * (n + 2)'}, n * H] for n=${g.n}, H=${g.hidden}`);
  floatTensor(op, 'alpha', alpha);
  shapeIs(op, 'alpha', alpha, [nAlpha], nAlpha === 3 ? 'scales of the pre, post and comb logits' : 'scale of the collapse logits');
  floatTensor(op, 'bias', bias);
  shapeIs(op, 'bias', bias, [rows], 'one bias per mixing logit');
  for (const [n, t] of [['phi', phi], ['alpha', alpha], ['bias', bias]] as const) sameDevice(op, ['streams', streams], [n, t]);
}

export const mhcPre = defineOp({
  name: 'llm.mhcPre',
  args: [
    { name: 'streams', type: 'Tensor' },
    { name: 'phi', type: 'Tensor' },
    { name: 'alpha', type: 'Tensor' },
    { name: 'bias', type: 'Tensor' },
    { name: 'rmsEps', type: 'float' },
    { name: 'preEps', type: 'float' },
    { name: 'postMult', type: 'float' },
    { name: 'sinkhornIters', type: 'int' },
    { name: 'sinkhornEps', type: 'float' },
  ],
  outputs: [
    { name: 'layerInput', type: 'Tensor' },
    { name: 'post', type: 'Tensor' },
    { name: 'comb', type: 'Tensor' },
  ],
  meta(
    streams: TensorMeta,
    phi: TensorMeta,
    alpha: TensorMeta,
    bias: TensorMeta,
    rmsEps: number,
    preEps: number,
    postMult: number,
    sinkhornIters: number,
    sinkhornEps: number,
  ): OutMeta[] {
    const op = 'llm.mhcPre';
    const g = streamsGeometry(op, streams);
    mixingParams(op, streams, phi, alpha, bias, g.n * (g.n + 2), 3, g);
    positiveFloat(op, 'rmsEps', rmsEps);
    positiveFloat(op, 'preEps', preEps, true);
    positiveFloat(op, 'postMult', postMult);
    posInt(op, 'sinkhornIters', sinkhornIters);
    positiveFloat(op, 'sinkhornEps', sinkhornEps, true);
    const cd = computeDtype(streams);
    return [dense([...g.lead, g.hidden], streams.dtype, streams.device), dense([...g.lead, g.n], cd, streams.device), dense([...g.lead, g.n, g.n], cd, streams.device)];
  },
});

export function mhcPostGeometry(layerOut: TensorMeta, streams: TensorMeta, post: TensorMeta, comb: TensorMeta): MhcGeometry {
  const op = 'llm.mhcPost';
  const g = streamsGeometry(op, streams);
  floatTensor(op, 'layerOut', layerOut);
  shapeIs(op, 'layerOut', layerOut, [...g.lead, g.hidden], () => `the streams ${describe(streams)} without the stream dim`);
  sameDtype(op, ['streams', streams], ['layerOut', layerOut]);
  floatTensor(op, 'post', post);
  shapeIs(op, 'post', post, [...g.lead, g.n], 'one weight per stream and token');
  floatTensor(op, 'comb', comb);
  shapeIs(op, 'comb', comb, [...g.lead, g.n, g.n], 'an n x n matrix per token');
  for (const [n, t] of [['layerOut', layerOut], ['post', post], ['comb', comb]] as const) sameDevice(op, ['streams', streams], [n, t]);
  return g;
}

export const mhcPost = defineOp({
  name: 'llm.mhcPost',
  args: [
    { name: 'layerOut', type: 'Tensor' },
    { name: 'streams', type: 'Tensor' },
    { name: 'post', type: 'Tensor' },
    { name: 'comb', type: 'Tensor' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(layerOut: TensorMeta, streams: TensorMeta, post: TensorMeta, comb: TensorMeta): OutMeta {
    mhcPostGeometry(layerOut, streams, post, comb);
    return dense(streams.shape, streams.dtype, streams.device);
  },
});

export const mhcHeadCollapse = defineOp({
  name: 'llm.mhcHeadCollapse',
  args: [
    { name: 'streams', type: 'Tensor' },
    { name: 'phi', type: 'Tensor' },
    { name: 'alpha', type: 'Tensor' },
    { name: 'bias', type: 'Tensor' },
    { name: 'rmsEps', type: 'float' },
    { name: 'eps', type: 'float' },
  ],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta(streams: TensorMeta, phi: TensorMeta, alpha: TensorMeta, bias: TensorMeta, rmsEps: number, eps: number): OutMeta {
    const op = 'llm.mhcHeadCollapse';
    const g = streamsGeometry(op, streams);
    mixingParams(op, streams, phi, alpha, bias, g.n, 1, g);
    positiveFloat(op, 'rmsEps', rmsEps);
    positiveFloat(op, 'eps', eps, true);
    return dense([...g.lead, g.hidden], streams.dtype, streams.device);
  },
});

export function mhcGeometry(streams: TensorMeta): MhcGeometry {
  return streamsGeometry('llm.mhc', streams);
}
