/**
 * kiln.llm (also kiln.ops.llm): public functions of the LLM kernel library. Each dispatches one
 * registered `llm.*` op; the implementation (CPU kernel, reference composition, later cuda or
 * vendor kernels) is chosen by the llm dispatch policy (src/ops/library/policy.ts). Defaults follow vLLM.
 */
import { dispatch } from '../ops/dispatch.js';
import * as D from '../ops/defs/llm.js';
import * as M from '../ops/defs/llm-moe.js';
import * as H from '../ops/defs/llm-mhc.js';
import * as R from '../ops/defs/llm-rotary.js';
import * as QK from '../ops/defs/llm-qk-norm-rotary.js';
import * as PG from '../ops/defs/llm-paged.js';
import * as QKC from '../ops/defs/llm-qk-norm-rotary-cache.js';
import * as QKA from '../ops/defs/llm-qk-norm-rotary-paged-attention.js';
import * as QKV from '../ops/defs/llm-qkv-linear.js';
import * as LSM from '../ops/defs/llm-linear-silu-mul.js';
import * as LG from '../ops/defs/llm-linear-gelu.js';
import * as GUS from '../ops/defs/llm-gate-up-silu-mul.js';
import * as ARL from '../ops/defs/llm-add-rms-norm-linear.js';
import type { Tensor } from '../tensor/tensor.js';
import { fmtShape } from '../tensor/layout.js';
import { parseRmsNormArgs, type RmsNormArgs, type RmsNormOptions } from './rms-norm-args.js';

export type { GeluApproximate } from '../ops/defs/llm.js';
export type { MoeActivation, ScoringFunc } from '../ops/defs/llm-moe.js';

/**
 * RMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * weight (float32 math for halves); eps
 * defaults to 1e-6. Also takes kiln.rmsNorm's (input, normalizedShape, weight, eps) and an options
 * object (api/rms-norm-args.ts), as long as they name the last dim and a weight.
 */
export function rmsNorm(input: Tensor, weight: Tensor, eps?: number | null): Tensor;
export function rmsNorm(input: Tensor, normalizedShape: number | readonly number[], weight: Tensor, eps?: number | null): Tensor;
export function rmsNorm(input: Tensor, options: RmsNormOptions & { weight: Tensor }): Tensor;
export function rmsNorm(input: Tensor, ...args: RmsNormArgs): Tensor {
  const a = parseRmsNormArgs('llm.rmsNorm', args);
  if (a.weight === null) throw new TypeError(`llm.rmsNorm: 'weight' is required (input ${fmtShape(input.shape)} ${input.dtype}); kiln.rmsNorm normalises without one`);
  const last = input.shape.at(-1);
  // A 1-d shape taken from the weight (the vLLM form) is checked by the op's meta, with its own message.
  const fromWeight = a.normalizedShape !== null && a.normalizedShape.length === 1 && a.weight.ndim === 1 && a.normalizedShape[0] === a.weight.shape[0];
  if (a.normalizedShape !== null && !fromWeight && (a.normalizedShape.length !== 1 || a.normalizedShape[0] !== last)) {
    throw new Error(`llm.rmsNorm: normalises over the last dim only: 'normalizedShape' ${fmtShape(a.normalizedShape)} must be [${last}] for input ${fmtShape(input.shape)} ${input.dtype}; kiln.rmsNorm takes several trailing dims`);
  }
  return dispatch(D.rmsNorm, input, a.weight, a.eps ?? 1e-6);
}

/** vLLM's fused_add_rms_norm, in place: residual = input + residual, input = rmsNorm(residual). */
export function fusedAddRmsNorm(input: Tensor, residual: Tensor, weight: Tensor, eps = 1e-6): { input: Tensor; residual: Tensor } {
  const [x, r] = dispatch(D.fusedAddRmsNorm, input, residual, weight, eps);
  return { input: x!, residual: r! };
}

/** Out-of-place add + RMSNorm: { out: rmsNorm(input + residual), residual: input + residual }. */
export function addRmsNorm(input: Tensor, residual: Tensor, weight: Tensor, eps = 1e-6): { out: Tensor; residual: Tensor } {
  const [o, r] = dispatch(D.addRmsNorm, input, residual, weight, eps);
  return { out: o!, residual: r! };
}

/** silu(x[..., :d]) * x[..., d:] for a last dim of 2d. */
export function siluAndMul(input: Tensor): Tensor {
  return dispatch(D.siluAndMul, input);
}

/** gelu(x[..., :d], approximate) * x[..., d:] for a last dim of 2d. */
export function geluAndMul(input: Tensor, approximate: D.GeluApproximate = 'none'): Tensor {
  return dispatch(D.geluAndMul, input, approximate);
}

/**
 * vLLM's rotary_embedding, in place on query (and key). query [T, heads * headSize] or [T, heads,
 * headSize], key likewise or null, positions [T] int, cosSinCache [maxPosition, rotaryDim] with the
 * cosines in its first half and the sines in its second; only the first rotaryDim features of
 * each head rotate. isNeox: pairs (i, i + rotaryDim/2); otherwise gpt-j pairs (2i, 2i + 1).
 */
export function rotaryEmbedding(
  positions: Tensor,
  query: Tensor,
  key: Tensor | null,
  headSize: number,
  cosSinCache: Tensor,
  isNeox = true,
): { query: Tensor; key: Tensor | null } {
  const out = dispatch(D.rotaryEmbedding, positions, query, key ?? null, headSize, cosSinCache, isNeox);
  return { query: out[0]!, key: out[1] ?? null };
}

/**
 * Rotary embedding from explicit cos/sin (the Hugging Face form), out of place:
 * input * cos + rot(input) * sin, rot = rotate-half (isNeox) or interleaved pairs (gpt-j). cos and
 * sin broadcast to input (e.g. [T, D] against [B, H, T, D]). kiln.compile maps the rotate-half
 * composition `x * cos + cat([-x2, x1], -1) * sin` onto this op.
 */
export function applyRotaryEmb(input: Tensor, cos: Tensor, sin: Tensor, isNeox = true): Tensor {
  return dispatch(R.applyRotaryEmb, input, cos, sin, isNeox);
}

/**
 * Per-head RMSNorm then rotary embedding of q and k in one call (Qwen3's q_norm/k_norm before
 * RoPE): { q: applyRotaryEmb(rmsNorm(q, qWeight, eps), cos, sin), k: the same for k }, the norm
 * rounded to the dtype before the rotation as the two ops would. One cuda launch for both;
 * kiln.compile maps the unfused chains onto it in inference programs. Inference only (no backward).
 */
export function qkNormRotary(q: Tensor, k: Tensor, qWeight: Tensor, kWeight: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox = true): { q: Tensor; k: Tensor } {
  const [qo, ko] = dispatch(QK.qkNormRotary, q, k, qWeight, kWeight, eps, cos, sin, isNeox);
  return { q: qo!, k: ko! };
}

/** Softmax over experts, then the top k: { weights float32 [T, k] (float64 for float64 logits), ids int32 [T, k] }. */
export function topkSoftmax(gatingOutput: Tensor, topk: number, renormalize = false): { weights: Tensor; ids: Tensor } {
  const [w, i] = dispatch(M.topkSoftmax, gatingOutput, topk, renormalize);
  return { weights: w!, ids: i! };
}

export interface GroupedTopkOptions {
  numExpertGroup: number;
  topkGroup: number;
  scoringFunc?: M.ScoringFunc;
  /** DeepSeek-V3's e_score_correction_bias: added to the scores for selection only. */
  eScoreCorrectionBias?: Tensor | null;
  routedScalingFactor?: number;
}

/**
 * DeepSeek-V3 grouped top-k routing: score the experts (softmax or sigmoid), rank the groups (by
 * their best score, or with a correction bias by the sum of their two best biased scores), keep
 * the topkGroup best groups and pick the top k experts inside them. Weights are the unbiased
 * scores (renormalised if asked) times routedScalingFactor.
 */
export function groupedTopk(gatingOutput: Tensor, topk: number, renormalize: boolean, options: GroupedTopkOptions): { weights: Tensor; ids: Tensor } {
  const [w, i] = dispatch(
    M.groupedTopk,
    gatingOutput,
    topk,
    renormalize,
    options.numExpertGroup,
    options.topkGroup,
    options.scoringFunc ?? 'softmax',
    options.eScoreCorrectionBias ?? null,
    options.routedScalingFactor ?? 1,
  );
  return { weights: w!, ids: i! };
}

/** Sum over the topk dim: [T, k, H] -> [T, H]. */
export function moeSum(input: Tensor): Tensor {
  return dispatch(M.moeSum, input);
}

/**
 * Fused MoE MLP: out[t] = sum_j weights[t, j] * w2[e] @ act(gate) * up, with gate/up = w13[e] @ x[t]
 * (w13 rows: gate first, then up) and e = ids[t, j].
 */
export function fusedMoe(hidden: Tensor, w13: Tensor, w2: Tensor, topkWeights: Tensor, topkIds: Tensor, activation: M.MoeActivation = 'silu'): Tensor {
  return dispatch(M.fusedMoe, hidden, w13, w2, topkWeights, topkIds, activation);
}

export interface MhcPreOptions {
  /** RMSNorm epsilon of the flattened streams (default 1e-6). */
  rmsEps?: number;
  /** Added to the sigmoid pre weights (default 0). */
  preEps?: number;
  /** Scale of the sigmoid post weights (the paper's 2, the default). */
  postMult?: number;
  /** Sinkhorn-Knopp rounds (the paper's t_max = 20, the default). */
  sinkhornIters?: number;
  /** Added to every Sinkhorn normaliser (default 1e-6). */
  sinkhornEps?: number;
}

/** mHC pre-mix (see src/ops/defs/llm-mhc.ts): { layerInput [..., H], post [..., n], comb [..., n, n] }. */
export function mhcPre(streams: Tensor, phi: Tensor, alpha: Tensor, bias: Tensor, options: MhcPreOptions = {}): { layerInput: Tensor; post: Tensor; comb: Tensor } {
  const [x, p, c] = dispatch(
    H.mhcPre,
    streams,
    phi,
    alpha,
    bias,
    options.rmsEps ?? 1e-6,
    options.preEps ?? 0,
    options.postMult ?? 2,
    options.sinkhornIters ?? 20,
    options.sinkhornEps ?? 1e-6,
  );
  return { layerInput: x!, post: p!, comb: c! };
}

/** mHC post-mix: post[..., :, None] * layerOut[..., None, :] + comb^T @ streams. */
export function mhcPost(layerOut: Tensor, streams: Tensor, post: Tensor, comb: Tensor): Tensor {
  return dispatch(H.mhcPost, layerOut, streams, post, comb);
}

/** Final collapse of the n streams: sum_i (sigmoid(alpha * (phi v / rms)[i] + bias[i]) + eps) * streams[i]. */
export function mhcHeadCollapse(streams: Tensor, phi: Tensor, alpha: Tensor, bias: Tensor, options: { rmsEps?: number; eps?: number } = {}): Tensor {
  return dispatch(H.mhcHeadCollapse, streams, phi, alpha, bias, options.rmsEps ?? 1e-6, options.eps ?? 0);
}

/**
 * vLLM's reshape_and_cache, in place: writes key/value [N, kvHeads, headDim] into the paged caches
 * [numBlocks, blockSize, kvHeads, headDim] at slots slotMapping [N] (block * blockSize + offset);
 * a slot of -1 skips its token (padding rows of a batch bucket).
 */
export function reshapeAndCache(key: Tensor, value: Tensor, keyCache: Tensor, valueCache: Tensor, slotMapping: Tensor): { keyCache: Tensor; valueCache: Tensor } {
  const [k, v] = dispatch(PG.reshapeAndCache, key, value, keyCache, valueCache, slotMapping);
  return { keyCache: k!, valueCache: v! };
}

/**
 * siluAndMul(linear(input, weight, bias)) in one call: weight [2I, K] holds the gate rows then the
 * up rows; returns [..., I]. On cuda one GEMV launch (bfloat16, few rows) with the activation in
 * its epilogue; what a compiled decode step's MLP runs on cuda (KILN_LINEAR_SILU_MUL, on by default).
 */
export function linearSiluAndMul(input: Tensor, weight: Tensor, bias: Tensor | null = null): Tensor {
  return dispatch(LSM.linearSiluAndMul, input, weight, bias);
}

/**
 * gelu(linear(input, weight, bias), approximate) in one call: weight [N, K], bias [N] or null;
 * returns [..., N]. On webgpu the GELU runs in the GEMM's epilogue (one dispatch fewer, the
 * product rounded once); elsewhere the two ops. What a compiled GELU MLP runs on webgpu
 * (KILN_LINEAR_GELU, on by default).
 */
export function linearGelu(input: Tensor, weight: Tensor, bias: Tensor | null = null, approximate: 'none' | 'tanh' = 'none'): Tensor {
  return dispatch(LG.linearGelu, input, weight, bias, approximate);
}

/**
 * silu(input @ gateWeight^T) * (input @ upWeight^T) in one call (a SwiGLU MLP's gate and up
 * projections kept as two weights [I, K]); returns [..., I]. On the cpu one native call for up to
 * 4 rows (both weights streamed in one job, the activation in its epilogue): what Qwen3's eager cpu
 * decode step runs (KILN_DECODE_GATE_UP). Inference only (no backward).
 */
export function gateUpSiluAndMul(input: Tensor, gateWeight: Tensor, upWeight: Tensor): Tensor {
  return dispatch(GUS.gateUpSiluAndMul, input, gateWeight, upWeight);
}

/**
 * The residual add and RMSNorm before a linear, and the linear, in one call: s = input + residual
 * (residual null: s = input), out = linear(rmsNorm(s) * normWeight, weight, bias) (with `gated`,
 * siluAndMul of it: weight [2I, K] gate rows then up rows), residualOut = s; the norm reads the
 * unrounded sum and its output is rounded to the dtype before the linear. On cuda one GEMV launch
 * (bfloat16, few rows) with the norm in its prologue, on webgpu one skinny-GEMV dispatch (float32,
 * float16, bfloat16; at most 8 rows); what a compiled decode step runs on webgpu (by default) and
 * on cuda with KILN_ADD_RMSNORM_LINEAR=1.
 */
export function addRmsNormLinear(
  input: Tensor,
  residual: Tensor | null,
  normWeight: Tensor,
  eps: number,
  weight: Tensor,
  bias: Tensor | null = null,
  gated = false,
): { out: Tensor; residual: Tensor } {
  const [out, res] = dispatch(ARL.addRmsNormLinear, input, residual, normWeight, eps, weight, bias, gated);
  return { out: out!, residual: res! };
}

/**
 * qkNormRotary of q and k, then reshapeAndCache of the rotated k and of v, in one call: returns the
 * rotated q and the caches (written in place). One cuda launch where the two ops take two; what a
 * compiled decode step runs on cuda (KILN_QK_NORM_ROTARY_CACHE, on by default). Inference only (no backward).
 */
export function qkNormRotaryCache(
  q: Tensor,
  k: Tensor,
  v: Tensor,
  qWeight: Tensor,
  kWeight: Tensor,
  eps: number,
  cos: Tensor,
  sin: Tensor,
  isNeox: boolean,
  keyCache: Tensor,
  valueCache: Tensor,
  slotMapping: Tensor,
): { q: Tensor; keyCache: Tensor; valueCache: Tensor } {
  const [qo, kc, vc] = dispatch(QKC.qkNormRotaryCache, q, k, v, qWeight, kWeight, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping);
  return { q: qo!, keyCache: kc!, valueCache: vc! };
}

/**
 * qkNormRotaryCache, then pagedAttention of the rotated q over the written caches, in one call:
 * returns the attention output [B, heads, headDim] and the caches (written in place). One webgpu
 * dispatch where the two ops take two (issue #20); what a compiled webgpu decode step runs
 * (KILN_WEBGPU_QK_ATTN); other devices run the reference composition. Inference only (no backward).
 */
export function qkNormRotaryPagedAttention(
  q: Tensor,
  k: Tensor,
  v: Tensor,
  qWeight: Tensor,
  kWeight: Tensor,
  eps: number,
  cos: Tensor,
  sin: Tensor,
  isNeox: boolean,
  keyCache: Tensor,
  valueCache: Tensor,
  slotMapping: Tensor,
  blockTables: Tensor,
  contextLens: Tensor,
  scale: number,
): { out: Tensor; keyCache: Tensor; valueCache: Tensor } {
  const [out, kc, vc] = dispatch(QKA.qkNormRotaryPagedAttention, q, k, v, qWeight, kWeight, eps, cos, sin, isNeox, keyCache, valueCache, slotMapping, blockTables, contextLens, scale);
  return { out: out!, keyCache: kc!, valueCache: vc! };
}

/**
 * Decode attention over a paged cache (vLLM's paged_attention): query [B, heads, headDim], one
 * token per sequence; row b attends to its first contextLens[b] cached tokens, found through
 * blockTables [B, maxBlocks]. Grouped-query heads map to kv head h / (heads / kvHeads). Returns
 * [B, heads, headDim]; rows of length 0 are zeros.
 */
export function pagedAttention(query: Tensor, keyCache: Tensor, valueCache: Tensor, blockTables: Tensor, contextLens: Tensor, scale: number): Tensor {
  return dispatch(PG.pagedAttention, query, keyCache, valueCache, blockTables, contextLens, scale);
}

/**
 * An attention layer's q, k and v projections of one input with the weights kept apart:
 * [input @ qWeight^T, input @ kWeight^T, input @ vWeight^T] (no bias). On the cpu one native GEMV
 * call streams the three weights for a decode step's few rows (issue #17); elsewhere three linears.
 */
export function qkvLinear(input: Tensor, qWeight: Tensor, kWeight: Tensor, vWeight: Tensor): { q: Tensor; k: Tensor; v: Tensor } {
  const [q, k, v] = dispatch(QKV.qkvLinear, input, qWeight, kWeight, vWeight);
  return { q: q!, k: k!, v: v! };
}
