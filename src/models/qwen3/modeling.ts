/**
 * Qwen3 and Qwen3-MoE causal language models, matching transformers' Qwen3ForCausalLM and
 * Qwen3MoeForCausalLM: module (and so parameter) names are the checkpoint's names, so
 * `loadStateDict(checkpoint)` works directly.
 *
 *   h = embed_tokens(ids)
 *   per layer: h = h + o_proj(attn(input_layernorm(h)));  h = h + mlp(post_attention_layernorm(h))
 *   logits = lm_head(norm(h))            (lm_head shares embed_tokens' Parameter when tied)
 *
 * Attention: q/k/v projections, q_norm/k_norm (RMSNorm over head_dim, per head, before RoPE),
 * rotate-half RoPE, grouped-query causal scaled-dot-product attention with scale 1/sqrt(head_dim).
 * MLP: down(silu(gate(x)) * up(x)). MoE: softmax (float32) over the router logits, top-k,
 * optional renormalisation, then every expert runs once on the batch of tokens routed to it and
 * its weighted output is scatter-added back. While kiln.compile traces the block, the grouping (a
 * host read of the expert ids) is replaced by a device-side form (moe-device.ts).
 *
 * forwardStep (generation): the step's tokens from any number of sequences run as one flat batch
 * [N, hidden] at explicit positions; each layer writes its keys/values into a cache through the
 * StepKv interface (../step-kv.ts, implemented by serve/) and attends per group of sequences over
 * what the cache returns. Each layer runs in its own kiln.scope so a long prefill keeps one
 * layer's temporaries alive, not all of them. MoE layers group tokens by expert on the host (one
 * device read per layer and step) when run eagerly, as forward does; traced, on the device.
 */
import { moveWeightsToHugePages } from '../huge-page-weights.js';
import { outsideDispatchModes } from '../../ops/dispatch.js';
import { indexPut, indexPut_, indexSelect, cat, embedding } from '../../api/indexing.js';
import { copy_ } from '../../api/core.js';
import { tensor } from '../../api/data.js';
import { zeros } from '../../api/creation.js';
import { div, mul, neg, silu } from '../../api/pointwise.js';
import { softmax, sum, topk } from '../../api/reduction.js';
import { narrow, reshape, transpose, unsqueeze, view } from '../../api/views.js';
import { add } from '../../api/core.js';
import { scaledDotProductAttention } from '../../api/nn.js';
import { isGradEnabled, noGrad } from '../../autograd/index.js';
import { scope } from '../../tensor/scope.js';
import type { DecodeBatch, KvGeometry, PagedKvTensors, StepKv, StepModel } from '../step-kv.js';
import type { DenseDecoderLayerWeights, DenseDecoderSpec } from '../../ops/library/whole-step.js';
import { addRmsNorm, applyRotaryEmb, gateUpSiluAndMul, pagedAttention, qkNormRotaryCache, qkvLinear, reshapeAndCache } from '../../api/llm.js';
import { GEMV_MAX_ROWS } from '../../kernels/cpu/native/gemv-c.js';
import { keep } from '../../tensor/scope.js';
import { FakeTensor } from '../../compile/capture.js';
import { moeOnDevice } from './moe-device.js';
import { openHfFolder } from '../../io/hf.js';
import { type Embedding, type Linear, RMSNorm } from '../../nn/layers/basic.js';
import { type BuildOptions, buildEmbedding, buildLinear, layerOptions, linearSharing } from '../init.js';
import { Module } from '../../nn/module.js';
import type { DeviceLike } from '../../runtime/device.js';
import { Device } from '../../runtime/device.js';
import type { DType } from '../../tensor/dtype.js';
import { fmtShape } from '../../tensor/layout.js';
import { Generator } from '../../tensor/random.js';
import { float32ArrayToBfloat16Bits, float32ArrayToFloat16Bits } from '../../tensor/half.js';
import { Tensor } from '../../tensor/tensor.js';
import { ModuleList } from '../../nn/layers/container.js';
import { Qwen3Config } from './config.js';
import { getOption } from '../../runtime/config.js';

export interface FromConfigOptions {
  /** Seed for the random weights (a fresh Generator; the global one when absent). */
  seed?: number;
  dtype?: DType;
  device?: DeviceLike;
  /**
   * Standard deviation of the random weights (default 0.02, transformers' initializer_range),
   * drawn uniformly; RMSNorm weights are 1 and biases 0.
   */
  initStd?: number;
}

export interface FromPretrainedOptions {
  /** Parameter dtype (default float32); checkpoint tensors are converted as they are read. */
  dtype?: DType;
  device?: DeviceLike;
}

/** Positions as a [T] or [B, T] integer tensor or a JS array. */
export type Positions = Tensor | readonly number[] | readonly (readonly number[])[];

// ---------------------------------------------------------------------------------------------
// RoPE

/**
 * cos and sin tables [P, 1, T, headDim] (P = 1 or B) for the given positions, computed as
 * transformers does in float32: inv_freq = 1 / theta^(2i/d), angle = pos * inv_freq, emb = [angle, angle].
 */
export function ropeTables(positions: number[][], headDim: number, theta: number, dtype: DType, device: Device): { cos: Tensor; sin: Tensor } {
  const half = headDim / 2;
  const invFreq = new Float32Array(half);
  for (let i = 0; i < half; i++) invFreq[i] = Math.fround(1 / Math.fround(Math.pow(theta, Math.fround((2 * i) / headDim))));
  const P = positions.length;
  const T = positions[0]?.length ?? 0;
  const rows = P * T;
  // One half row per position (the two halves of a row are equal): half the trig results to
  // store and, for 16-bit dtypes, half the values to round; the halves are duplicated at the end.
  const cosH = new Float32Array(rows * half);
  const sinH = new Float32Array(rows * half);
  for (let p = 0; p < P; p++) {
    const row = positions[p]!;
    for (let t = 0; t < T; t++) {
      const pos = Math.fround(row[t]!);
      const base = (p * T + t) * half;
      for (let i = 0; i < half; i++) {
        const a = Math.fround(pos * invFreq[i]!);
        cosH[base + i] = Math.cos(a);
        sinH[base + i] = Math.sin(a);
      }
    }
  }
  // Row r of the table: [h_r, h_r], h_r the r-th half row.
  const expand = <A extends Float32Array | Uint16Array>(h: A, out: A): A => {
    for (let r = 0; r < rows; r++) {
      const src = r * half;
      const dst = r * headDim;
      for (let i = 0; i < half; i++) {
        const v = h[src + i]!;
        out[dst + i] = v;
        out[dst + half + i] = v;
      }
    }
    return out;
  };
  const mk = (h: Float32Array): Tensor => {
    // A real tensor even under kiln.compile's tracer (no op: the shape is set directly), so a
    // table made while tracing can be kept (Qwen3Model.ropeTable).
    let t: Tensor;
    if (dtype === 'bfloat16' || dtype === 'float16') {
      // Rounded in bulk as the cpu cast rounds (half.ts), with no float32 tensor and no cast: the
      // serving engine's full table (40960 positions for Qwen3) took a quarter second through a cast.
      const hw = new Uint16Array(h.length);
      if (dtype === 'bfloat16') float32ArrayToBfloat16Bits(h, hw);
      else float32ArrayToFloat16Bits(h, hw);
      t = Tensor.empty([P, 1, T, headDim], dtype, new Device('cpu'));
      expand(hw, new Uint16Array(t.storage.cpuArrayBuffer(), t.offset * 2, rows * headDim));
    } else {
      const flat = tensor(expand(h, new Float32Array(rows * headDim)));
      t = new Tensor(flat.storage, 'float32', [P, 1, T, headDim]);
      flat.dispose();
      if (dtype !== 'float32') t = t.to(dtype);
    }
    if (!device.equals(t.device)) t = t.to(device);
    return t;
  };
  return { cos: mk(cosH), sin: mk(sinH) };
}

/** [-x2, x1] where x1, x2 are the two halves of the last dim. */
export function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.ndim - 1]!;
  const h = d / 2;
  return cat([neg(narrow(x, -1, h, h)), narrow(x, -1, 0, h)], -1);
}

export function applyRotaryPosEmb(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
  return add(mul(x, cos), mul(rotateHalf(x), sin));
}

/**
 * Whether a decode step runs fused library ops in place of primitive chains: eagerly on cpu (not
 * traced), where each of a step's ~600 small ops costs tens of microseconds of dispatch and
 * allocation (issue #17). llm.applyRotaryEmb replaces a rotary's seven ops (narrow, neg, cat,
 * mul, mul, add), llm.addRmsNorm the residual add and the norm after it; both round once, so
 * they are no further from float64 than the chains. Traced graphs (compiled decode, cuda) keep
 * the primitives the compiler's qk-norm + rotary pass and its fusion match.
 */
function fusedDecode(x: Tensor): boolean {
  return x.device.type === 'cpu' && !(x instanceof FakeTensor);
}

/**
 * Whether an eager decode step's rotary is llm.applyRotaryEmb: as fusedDecode, and on webgpu too,
 * whose kernel (kernels/webgpu/llm-rotary.ts) is one dispatch where the rotate-half chain (neg, cat,
 * two muls, an add) is six (issue #20: 280 of a Qwen3-0.6B eager step's 848 dispatches). The add +
 * norm stays two ops there (llm.addRmsNorm has no webgpu kernel; its reference adds casts).
 */
function fusedRotary(x: Tensor): boolean {
  return (x.device.type === 'cpu' || x.device.type === 'webgpu') && !(x instanceof FakeTensor);
}

function normalizePositions(positions: Positions | undefined, B: number, T: number): number[][] {
  if (positions === undefined) return [Array.from({ length: T }, (_, i) => i)];
  let rows: number[][];
  if (positions instanceof Tensor) {
    const flat = positions.toFlatArray();
    if (positions.ndim === 1) rows = [flat];
    else if (positions.ndim === 2) rows = Array.from({ length: positions.shape[0]! }, (_, b) => flat.slice(b * positions.shape[1]!, (b + 1) * positions.shape[1]!));
    else throw new Error(`Qwen3: positions must be [T] or [B, T], got ${fmtShape(positions.shape)}`);
  } else if (positions.length > 0 && Array.isArray(positions[0])) {
    rows = (positions as readonly (readonly number[])[]).map((r) => [...r]);
  } else {
    rows = [[...(positions as readonly number[])]];
  }
  for (const r of rows) {
    if (r.length !== T) throw new Error(`Qwen3: positions have ${r.length} entries per row but the input has ${T} tokens`);
    for (const p of r) if (!Number.isInteger(p) || p < 0) throw new Error(`Qwen3: positions must be non-negative integers, got ${p}`);
  }
  if (rows.length !== 1 && rows.length !== B) throw new Error(`Qwen3: positions have ${rows.length} rows but the batch has ${B}`);
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Layers

export class Qwen3Attention extends Module {
  q_proj: Linear;
  k_proj: Linear;
  v_proj: Linear;
  o_proj: Linear;
  q_norm: RMSNorm;
  k_norm: RMSNorm;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly scaling: number;

  constructor(config: Qwen3Config, o: BuildOptions) {
    super();
    const { hiddenSize: H, numAttentionHeads: nh, numKeyValueHeads: nkv, headDim: D, attentionBias: bias } = config;
    this.numHeads = nh;
    this.numKvHeads = nkv;
    this.headDim = D;
    this.scaling = 1 / Math.sqrt(D);
    this.q_proj = buildLinear(H, nh * D, bias, o);
    this.k_proj = buildLinear(H, nkv * D, bias, o);
    this.v_proj = buildLinear(H, nkv * D, bias, o);
    this.o_proj = buildLinear(nh * D, H, bias, o);
    this.q_norm = new RMSNorm(D, config.rmsNormEps, true, layerOptions(o));
    this.k_norm = new RMSNorm(D, config.rmsNormEps, true, layerOptions(o));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    const [B, T] = x.shape as [number, number];
    const D = this.headDim;
    const q = transpose(this.q_norm.forward(view(this.q_proj.forward(x), [B, T, this.numHeads, D])), 1, 2);
    const k = transpose(this.k_norm.forward(view(this.k_proj.forward(x), [B, T, this.numKvHeads, D])), 1, 2);
    const v = transpose(view(this.v_proj.forward(x), [B, T, this.numKvHeads, D]), 1, 2);
    const qr = applyRotaryPosEmb(q, cos, sin);
    const kr = applyRotaryPosEmb(k, cos, sin);
    const o = scaledDotProductAttention(qr, kr, v, null, 0, true, this.scaling, this.numKvHeads !== this.numHeads);
    return this.o_proj.forward(reshape(transpose(o, 1, 2), [B, T, this.numHeads * D]));
  }

  /**
   * One generation step for layer `layer`: x is the step's flat tokens [N, hidden], cos/sin are
   * [N, 1, headDim]. Keys/values go into the cache first, so each group attends to its cached
   * prefix and its own new tokens in one call.
   */
  forwardStep(x: Tensor, cos: Tensor, sin: Tensor, kv: StepKv, layer: number): Tensor {
    const N = x.shape[0]!;
    const { numHeads: nh, numKvHeads: nkv, headDim: D } = this;
    const q = applyRotaryPosEmb(this.q_norm.forward(view(this.q_proj.forward(x), [N, nh, D])), cos, sin);
    const k = applyRotaryPosEmb(this.k_norm.forward(view(this.k_proj.forward(x), [N, nkv, D])), cos, sin);
    const v = view(this.v_proj.forward(x), [N, nkv, D]);
    kv.write(layer, k, v);
    const outs = kv.groups.map((g, gi) => {
      const n = g.rows * g.queryLen;
      const qg = transpose(reshape(narrow(q, 0, g.start, n), [g.rows, g.queryLen, nh, D]), 1, 2);
      const { keys, values, mask, causal } = kv.read(layer, gi);
      const o = scaledDotProductAttention(qg, keys, values, mask, 0, causal, this.scaling, nkv !== nh);
      return reshape(transpose(o, 1, 2), [n, nh * D]);
    });
    return this.o_proj.forward(outs.length === 1 ? outs[0]! : cat(outs, 0));
  }

  /**
   * One decode token per row, all on the device: x [B, hidden], cos/sin [B, 1, headDim]. Keys and
   * values go into the paged cache (llm.reshapeAndCache), then llm.pagedAttention reads each
   * row's blocks; attention reads the caches the write returned, so a compiled graph orders them.
   */
  forwardDecode(x: Tensor, cos: Tensor, sin: Tensor, batch: DecodeBatch, keyCache: Tensor, valueCache: Tensor): Tensor {
    const B = x.shape[0]!;
    const { numHeads: nh, numKvHeads: nkv, headDim: D } = this;
    if (this.fusedQkCache(x)) {
      // q/k norms, both rotaries and the cache write as one llm.qkNormRotaryCache (one native call
      // on the cpu) in place of five ops: the same roundings (issue #17).
      const p = this.fusedQkv(x) ? qkvLinear(x, this.q_proj.weight, this.k_proj.weight, this.v_proj.weight) : { q: this.q_proj.forward(x), k: this.k_proj.forward(x), v: this.v_proj.forward(x) };
      const q = view(p.q, [B, nh, D]);
      const k = view(p.k, [B, nkv, D]);
      const v = view(p.v, [B, nkv, D]);
      const r = qkNormRotaryCache(q, k, v, this.q_norm.weight!, this.k_norm.weight!, this.q_norm.eps!, cos, sin, true, keyCache, valueCache, batch.slotMapping);
      const o = pagedAttention(r.q, r.keyCache, r.valueCache, batch.blockTables, batch.contextLens, this.scaling);
      // view: attention's output is a fresh contiguous tensor (reshape ~5 us a call, view ~2, on
      // the 2-core machine).
      return this.o_proj.forward(view(o, [B, nh * D]));
    }
    const rope = fusedRotary(x) ? (t: Tensor): Tensor => applyRotaryEmb(t, cos, sin, true) : (t: Tensor): Tensor => applyRotaryPosEmb(t, cos, sin);
    const q = rope(this.q_norm.forward(view(this.q_proj.forward(x), [B, nh, D])));
    const k = rope(this.k_norm.forward(view(this.k_proj.forward(x), [B, nkv, D])));
    const v = view(this.v_proj.forward(x), [B, nkv, D]);
    const written = reshapeAndCache(k, v, keyCache, valueCache, batch.slotMapping);
    const o = pagedAttention(q, written.keyCache, written.valueCache, batch.blockTables, batch.contextLens, this.scaling);
    return this.o_proj.forward(reshape(o, [B, nh * D]));
  }

  /**
   * Whether the q, k and v projections run as one llm.qkvLinear (one native GEMV job on the cpu
   * where they were three; issue #17): eager cpu decode (fusedDecode), KILN_DECODE_QKV, no biases,
   * at most the GEMV's rows.
   */
  private fusedQkv(x: Tensor): boolean {
    const rows = x.shape[0] ?? 1;
    return fusedDecode(x) && getOption('KILN_DECODE_QKV') && this.q_proj.bias === null && this.k_proj.bias === null && this.v_proj.bias === null && rows <= GEMV_MAX_ROWS;
  }

  /** Whether forwardDecode runs llm.qkNormRotaryCache: eager cpu (fusedDecode), KILN_DECODE_QK_CACHE, affine norms of one eps. */
  private fusedQkCache(x: Tensor): boolean {
    const { q_norm: qn, k_norm: kn } = this;
    return fusedDecode(x) && getOption('KILN_DECODE_QK_CACHE') && qn.weight !== null && kn.weight !== null && qn.eps !== null && qn.eps === kn.eps && qn.normalizedShape.length === 1 && kn.normalizedShape.length === 1;
  }
}

/** SwiGLU feed-forward: down(silu(gate(x)) * up(x)). */
export class Qwen3MLP extends Module {
  gate_proj: Linear;
  up_proj: Linear;
  down_proj: Linear;

  constructor(hidden: number, intermediate: number, o: BuildOptions) {
    super();
    this.gate_proj = buildLinear(hidden, intermediate, false, o);
    this.up_proj = buildLinear(hidden, intermediate, false, o);
    this.down_proj = buildLinear(intermediate, hidden, false, o);
  }

  forward(x: Tensor): Tensor {
    return this.down_proj.forward(mul(silu(this.gate_proj.forward(x)), this.up_proj.forward(x)));
  }

  /**
   * The MLP of an eager decode step: on the cpu (fusedDecode, KILN_DECODE_GATE_UP, no biases, at
   * most the GEMV's rows) the gate and up projections and silu * mul are one llm.gateUpSiluAndMul
   * (one native call where they were four ops; silu(g) * u rounded once, not silu(g) first).
   */
  forwardDecode(x: Tensor): Tensor {
    const { gate_proj: g, up_proj: u } = this;
    const rows = x.shape[0] ?? 1;
    if (fusedDecode(x) && getOption('KILN_DECODE_GATE_UP') && g.bias === null && u.bias === null && rows <= GEMV_MAX_ROWS) {
      return this.down_proj.forward(gateUpSiluAndMul(x, g.weight, u.weight));
    }
    return this.forward(x);
  }
}

/** Routing of a batch of tokens: per token the chosen experts and their weights. */
export interface Routing {
  /** Router logits [N, E]. */
  logits: Tensor;
  /** Routing weights [N, k] in the input dtype (renormalised when normTopkProb). */
  weights: Tensor;
  /** Selected experts [N, k] (int64). */
  experts: Tensor;
}

export class Qwen3SparseMoeBlock extends Module {
  gate: Linear;
  experts: ModuleList<Qwen3MLP>;
  readonly numExperts: number;
  readonly topK: number;
  readonly normTopkProb: boolean;

  constructor(config: Qwen3Config, o: BuildOptions) {
    super();
    this.numExperts = config.numExperts;
    this.topK = config.numExpertsPerTok;
    this.normTopkProb = config.normTopkProb;
    this.gate = buildLinear(config.hiddenSize, config.numExperts, false, o);
    this.experts = new ModuleList<Qwen3MLP>();
    for (let e = 0; e < config.numExperts; e++) this.experts.append(new Qwen3MLP(config.hiddenSize, config.moeIntermediateSize, o));
  }

  /** Expert `e`'s MLP. */
  expert(e: number): Qwen3MLP {
    return this.experts.at(e);
  }

  /** Router: softmax over experts in float32, top-k, optional renormalisation. `x` is [N, H]. */
  route(x: Tensor): Routing {
    const logits = this.gate.forward(x);
    const probs = softmax(logits, -1, 'float32');
    const { values, indices } = topk(probs, this.topK, -1);
    let w = values;
    if (this.normTopkProb) w = div(w, sum(w, -1, true));
    if (w.dtype !== x.dtype) w = w.to(x.dtype);
    return { logits, weights: w, experts: indices };
  }

  forward(x: Tensor): Tensor {
    const shape = x.shape;
    const H = shape[shape.length - 1]!;
    const flat = reshape(x, [-1, H]);
    // Traced (kiln.compile): the expert ids are data, so the grouping below would be a graph
    // break; the device-side form (moe-device.ts) computes the same block without reading them.
    if (flat instanceof FakeTensor) return reshape(moeOnDevice(this, flat), shape);
    const N = flat.shape[0]!;
    const { weights, experts } = this.route(flat);
    const k = this.topK;
    // Group (token, slot) pairs by expert on the host.
    const sel = experts.toFlatArray();
    const tokens: number[][] = Array.from({ length: this.numExperts }, () => []);
    const slots: number[][] = Array.from({ length: this.numExperts }, () => []);
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < k; j++) {
        const e = sel[n * k + j]!;
        tokens[e]!.push(n);
        slots[e]!.push(n * k + j);
      }
    }
    const wFlat = reshape(weights, [-1]);
    const inPlace = !isGradEnabled();
    let out = zeros([N, H], { dtype: x.dtype, device: x.device });
    for (let e = 0; e < this.numExperts; e++) {
      if (tokens[e]!.length === 0) continue;
      const ti = tensor(tokens[e]!, { dtype: 'int64', device: x.device });
      const si = tensor(slots[e]!, { dtype: 'int64', device: x.device });
      const ye = this.experts.at(e).forward(indexSelect(flat, 0, ti));
      const contrib = mul(ye, unsqueeze(indexSelect(wFlat, 0, si), 1));
      out = inPlace ? indexPut_(out, [ti], contrib, true) : indexPut(out, [ti], contrib, true);
    }
    return reshape(out, shape);
  }
}

export class Qwen3DecoderLayer extends Module {
  self_attn: Qwen3Attention;
  mlp: Qwen3MLP | Qwen3SparseMoeBlock;
  input_layernorm: RMSNorm;
  post_attention_layernorm: RMSNorm;

  constructor(config: Qwen3Config, layerIdx: number, o: BuildOptions) {
    super();
    this.self_attn = new Qwen3Attention(config, o);
    this.mlp = config.isSparseLayer(layerIdx) ? new Qwen3SparseMoeBlock(config, o) : new Qwen3MLP(config.hiddenSize, config.intermediateSize, o);
    this.input_layernorm = new RMSNorm(config.hiddenSize, config.rmsNormEps, true, layerOptions(o));
    this.post_attention_layernorm = new RMSNorm(config.hiddenSize, config.rmsNormEps, true, layerOptions(o));
  }

  forward(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    const h = add(x, this.self_attn.forward(this.input_layernorm.forward(x), cos, sin));
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }

  forwardStep(x: Tensor, cos: Tensor, sin: Tensor, kv: StepKv, layer: number): Tensor {
    const h = add(x, this.self_attn.forwardStep(this.input_layernorm.forward(x), cos, sin, kv, layer));
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }

  forwardDecode(x: Tensor, cos: Tensor, sin: Tensor, batch: DecodeBatch, keyCache: Tensor, valueCache: Tensor): Tensor {
    const post = this.post_attention_layernorm;
    if (fusedDecode(x) && post.weight !== null && post.eps !== null && post.normalizedShape.length === 1) {
      const a = this.self_attn.forwardDecode(this.input_layernorm.forward(x), cos, sin, batch, keyCache, valueCache);
      const { out, residual } = addRmsNorm(a, x, post.weight, post.eps);
      return add(residual, this.mlp instanceof Qwen3MLP ? this.mlp.forwardDecode(out) : this.mlp.forward(out));
    }
    const h = add(x, this.self_attn.forwardDecode(this.input_layernorm.forward(x), cos, sin, batch, keyCache, valueCache));
    return add(h, this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }

  /**
   * The layer of a chained eager decode step (Qwen3Model.forwardDecode, cpu): `normed` is
   * input_layernorm(x), already computed by the caller, and the residual add after the MLP is left
   * to it too (folded into the next norm by llm.addRmsNorm): returns the MLP output and the
   * residual stream it is added to.
   */
  forwardDecodeChained(normed: Tensor, x: Tensor, cos: Tensor, sin: Tensor, batch: DecodeBatch, keyCache: Tensor, valueCache: Tensor): { mlp: Tensor; residual: Tensor } {
    const post = this.post_attention_layernorm;
    const a = this.self_attn.forwardDecode(normed, cos, sin, batch, keyCache, valueCache);
    const { out, residual } = addRmsNorm(a, x, post.weight!, post.eps!);
    return { mlp: this.mlp instanceof Qwen3MLP ? this.mlp.forwardDecode(out) : this.mlp.forward(out), residual };
  }
}

/** Whether a norm can be one llm.addRmsNorm: an affine RMSNorm over the last dim. */
function chainableNorm(n: RMSNorm): boolean {
  return n.weight !== null && n.eps !== null && n.normalizedShape.length === 1;
}

/** The decoder stack without the LM head (transformers' Qwen3Model). */
export class Qwen3Model extends Module {
  embed_tokens: Embedding;
  layers: ModuleList<Qwen3DecoderLayer>;
  norm: RMSNorm;

  constructor(readonly config: Qwen3Config, o: BuildOptions) {
    super();
    this.embed_tokens = buildEmbedding(config.vocabSize, config.hiddenSize, o);
    this.layers = new ModuleList<Qwen3DecoderLayer>();
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.append(new Qwen3DecoderLayer(config, i, o));
    this.norm = new RMSNorm(config.hiddenSize, config.rmsNormEps, true, layerOptions(o));
  }

  /** Final hidden states [B, T, hidden]. */
  forward(inputIds: Tensor, positions?: Positions): Tensor {
    if (inputIds.ndim !== 2) throw new Error(`Qwen3: inputIds must be [B, T], got ${fmtShape(inputIds.shape)}`);
    if (inputIds.dtype !== 'int64' && inputIds.dtype !== 'int32') throw new Error(`Qwen3: inputIds must be int64 (or int32), got ${inputIds.dtype}`);
    const [B, T] = inputIds.shape as [number, number];
    let h = embedding(inputIds, this.embed_tokens.weight);
    const { cos, sin } = positions === undefined && T <= this.config.maxPositionEmbeddings ? this.ropePrefix(T, h.dtype, h.device) : ropeTables(normalizePositions(positions, B, T), this.config.headDim, this.config.ropeTheta, h.dtype, h.device);
    for (const layer of this.layers) h = layer.forward(h, cos, sin);
    return this.norm.forward(h);
  }

  /**
   * The tables [1, 1, T, headDim] of positions 0..T-1: the first T rows of ropeTable, so a traced
   * forward reads the kept table (a module property, guarded) and slices it with T, which
   * kiln.compile turns into a symbolic size; one compiled program then serves every length.
   */
  private ropePrefix(T: number, dtype: DType, device: Device): { cos: Tensor; sin: Tensor } {
    const t = this.ropeTable(dtype, device);
    const D = this.config.headDim;
    return { cos: view(narrow(t.cos, 0, 0, T), [1, 1, T, D]), sin: view(narrow(t.sin, 0, 0, T), [1, 1, T, D]) };
  }

  /**
   * cos and sin [maxPositions, headDim] for every position, made once per dtype and device and
   * kept (as plain tensor properties: not state, but module-held, so kiln.compile guards them):
   * a decode step gathers its rows by the positions tensor, on the device.
   */
  ropeTable(dtype: DType, device: Device): { cos: Tensor; sin: Tensor } {
    const [cos, sin] = [this.ropeCos, this.ropeSin];
    if (cos && sin && cos.dtype === dtype && cos.device.equals(device) && !cos.isDisposed && !sin.isDisposed) return { cos, sin };
    const n = this.config.maxPositionEmbeddings;
    const D = this.config.headDim;
    // Built for real even under a trace (see outsideDispatchModes), so it is kept from the first call on.
    const full = outsideDispatchModes(() => ropeTables([Array.from({ length: n }, (_, i) => i)], D, this.config.ropeTheta, dtype, device));
    // [n, D] without an op where the table is real (a view would be the tracer's fake).
    const rows = (t: Tensor): Tensor => (t instanceof FakeTensor ? view(t, [n, D]) : keep(new Tensor(t.storage, t.dtype, [n, D], undefined, t.offset)));
    const made = { cos: rows(full.cos), sin: rows(full.sin) };
    // Made inside a kiln.compile trace by a cast or a copy to the device, the table is the trace's
    // (fake) value: use it, do not keep it.
    if (made.cos instanceof FakeTensor) return made;
    for (const x of [cos, sin]) if (x && !x.isDisposed) x.dispose();
    full.cos.dispose();
    full.sin.dispose();
    this.ropeCos = made.cos;
    this.ropeSin = made.sin;
    return made;
  }

  private ropeCos?: Tensor;
  private ropeSin?: Tensor;

  /** Final hidden states [B, hidden] of a decode step (see Qwen3CausalLMBase.decodeStep). */
  forwardDecode(batch: DecodeBatch, cache: PagedKvTensors): Tensor {
    const B = batch.inputIds.shape[0]!;
    const D = this.config.headDim;
    let h = embedding(batch.inputIds, this.embed_tokens.weight);
    const table = this.ropeTable(h.dtype, h.device);
    const cos = view(indexSelect(table.cos, 0, batch.positions), [B, 1, D]);
    const sin = view(indexSelect(table.sin, 0, batch.positions), [B, 1, D]);
    if (this.chainedDecode(h)) {
      // Each layer's closing residual add is folded into the next norm (the next layer's
      // input_layernorm, after the last layer the final norm) as one llm.addRmsNorm: per layer one
      // op in place of an add and an rmsNorm (issue #17: ~2 of a cpu step's ~16 ms outside the
      // linears went to these 56 small ops). The sum is rounded once, as add's; the norm reads it
      // unrounded, as the llm.addRmsNorm after attention already does.
      let normed = this.layers.at(0).input_layernorm.forward(h);
      let residual = h;
      for (let i = 0; i < this.layers.length; i++) {
        const step = this.layers.at(i).forwardDecodeChained(normed, residual, cos, sin, batch, cache.keys[i]!, cache.values[i]!);
        const next = i + 1 < this.layers.length ? this.layers.at(i + 1).input_layernorm : this.norm;
        ({ out: normed, residual } = addRmsNorm(step.mlp, step.residual, next.weight!, next.eps!));
      }
      return normed;
    }
    for (let i = 0; i < this.layers.length; i++) h = this.layers.at(i).forwardDecode(h, cos, sin, batch, cache.keys[i]!, cache.values[i]!);
    return this.norm.forward(h);
  }

  /** Whether forwardDecode chains the residual adds into the norms (fusedDecode, KILN_DECODE_NORM_CHAIN, affine norms). */
  private chainedDecode(h: Tensor): boolean {
    if (!fusedDecode(h) || !getOption('KILN_DECODE_NORM_CHAIN') || !chainableNorm(this.norm)) return false;
    for (const layer of this.layers) if (!chainableNorm(layer.input_layernorm) || !chainableNorm(layer.post_attention_layernorm)) return false;
    return true;
  }

  /** Final hidden states [N, hidden] of one generation step (see Qwen3CausalLMBase.forwardStep). */
  forwardStep(inputIds: Tensor, positions: readonly number[], kv: StepKv): Tensor {
    const N = inputIds.shape[0]!;
    let h = embedding(inputIds, this.embed_tokens.weight);
    const tables = ropeTables([[...positions]], this.config.headDim, this.config.ropeTheta, h.dtype, h.device);
    const cos = view(tables.cos, [N, 1, this.config.headDim]);
    const sin = view(tables.sin, [N, 1, this.config.headDim]);
    for (let i = 0; i < this.layers.length; i++) {
      const prev = h;
      h = scope(() => this.layers.at(i).forwardStep(prev, cos, sin, kv, i));
      prev.dispose();
    }
    const out = this.norm.forward(h);
    for (const t of [h, cos, sin, tables.cos, tables.sin]) t.dispose();
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Causal LM

function buildOptions(options: FromConfigOptions): BuildOptions {
  return {
    dtype: options.dtype,
    device: options.device,
    init: true,
    initStd: options.initStd ?? 0.02,
    generator: options.seed === undefined ? undefined : new Generator(options.seed),
  };
}

function asConfig(config: Qwen3Config | Record<string, unknown>): Qwen3Config {
  return config instanceof Qwen3Config ? config : Qwen3Config.fromJSON(config);
}

/** Shared by the dense and MoE causal LMs (they differ only in the MLP blocks the config selects). */
export abstract class Qwen3CausalLMBase extends Module implements StepModel {
  model: Qwen3Model;
  lm_head: Linear;

  constructor(
    readonly config: Qwen3Config,
    options: BuildOptions = {},
  ) {
    super();
    this.model = new Qwen3Model(config, options);
    this.lm_head = config.tieWordEmbeddings
      ? linearSharing(this.model.embed_tokens.weight, options)
      : buildLinear(config.hiddenSize, config.vocabSize, false, options);
    moveWeightsToHugePages(this);
  }

  /** Logits [B, T, vocab] for token ids [B, T]; positions default to 0..T-1. */
  forward(inputIds: Tensor, positions?: Positions): Tensor {
    return this.lm_head.forward(this.model.forward(inputIds, positions));
  }

  get vocabSize(): number {
    return this.config.vocabSize;
  }

  get maxPositions(): number {
    return this.config.maxPositionEmbeddings;
  }

  /** The cache layout a generation engine allocates for this model: its dtype, on its device. */
  kvGeometry(): KvGeometry {
    const w = this.model.embed_tokens.weight;
    return { numLayers: this.config.numHiddenLayers, numKvHeads: this.config.numKeyValueHeads, headDim: this.config.headDim, dtype: w.dtype, device: w.device };
  }

  /**
   * One generation step (serve/engine.ts drives it): logits [R, vocab] for the flat tokens
   * `inputIds` [N] at `positions`, attending through `kv` to each sequence's cached keys/values;
   * only the `logitsRows` (flat token indices) go through the LM head. Inference only.
   */
  forwardStep(inputIds: Tensor, positions: readonly number[], kv: StepKv, logitsRows: readonly number[]): Tensor {
    const fn = 'Qwen3.forwardStep';
    if (inputIds.ndim !== 1) throw new Error(`${fn}: inputIds must be the step's flat tokens [N], got ${fmtShape(inputIds.shape)}`);
    if (inputIds.dtype !== 'int64' && inputIds.dtype !== 'int32') throw new Error(`${fn}: inputIds must be int64 (or int32), got ${inputIds.dtype}`);
    const N = inputIds.shape[0]!;
    if (positions.length !== N) throw new Error(`${fn}: ${positions.length} positions for ${N} tokens`);
    if (kv.numTokens !== N) throw new Error(`${fn}: the cache step holds ${kv.numTokens} tokens but inputIds has ${N}`);
    for (const p of positions) {
      if (!Number.isInteger(p) || p < 0 || p >= this.maxPositions) throw new Error(`${fn}: position ${p} is outside [0, ${this.maxPositions}) (max_position_embeddings)`);
    }
    for (const r of logitsRows) if (!Number.isInteger(r) || r < 0 || r >= N) throw new Error(`${fn}: logits row ${r} is outside [0, ${N})`);
    return noGrad(() => {
      const h = this.model.forwardStep(inputIds, positions, kv);
      const rows = tensor(logitsRows as number[], { dtype: 'int64', device: h.device });
      const picked = indexSelect(h, 0, rows);
      const logits = this.lm_head.forward(picked);
      for (const t of [h, rows, picked]) t.dispose();
      return logits;
    });
  }

  /**
   * Logits [B, vocab] of one decode token per row over the paged cache, with no host read: the
   * step serve/decode-runner.ts compiles once per batch size. Inference only.
   */
  prepareDecode(): void {
    const w = this.model.embed_tokens.weight;
    this.model.ropeTable(w.dtype, w.device);
  }

  decodeStep(batch: DecodeBatch, cache: PagedKvTensors): Tensor {
    const fn = 'Qwen3.decodeStep';
    const B = batch.inputIds.shape[0]!;
    // Shape -1: any size (the table width).
    const expect = (name: string, t: Tensor, shape: readonly number[], dtypes: readonly string[]): void => {
      if (t.ndim !== shape.length || t.shape.some((s, i) => shape[i]! >= 0 && s !== shape[i]) || !dtypes.includes(t.dtype)) {
        const want = `[${shape.map((s) => (s < 0 ? 'maxBlocks' : String(s))).join(', ')}] ${dtypes.join(' or ')}`;
        throw new Error(`${fn}: batch.${name} must be ${want} (B = ${B} rows from inputIds), got ${fmtShape(t.shape)} ${t.dtype}`);
      }
    };
    expect('inputIds', batch.inputIds, [B], ['int64', 'int32']);
    expect('positions', batch.positions, [B], ['int64', 'int32']);
    expect('slotMapping', batch.slotMapping, [B], ['int64', 'int32']);
    expect('blockTables', batch.blockTables, [B, -1], ['int32', 'int64']);
    expect('contextLens', batch.contextLens, [B], ['int32', 'int64']);
    const L = this.config.numHiddenLayers;
    if (cache.keys.length !== L || cache.values.length !== L) throw new Error(`${fn}: the cache has ${cache.keys.length} key and ${cache.values.length} value tensors; the model has ${L} layers`);
    return noGrad(() => this.lm_head.forward(this.model.forwardDecode(batch, cache)));
  }

  /**
   * The model as a dense decoder for a whole-step decode kernel (StepModel.wholeStepSpec), or why
   * it is not one: mixture-of-experts layers, biases, norms without weights or of another eps.
   */
  wholeStepSpec(cache: PagedKvTensors, maxBlocks: number): DenseDecoderSpec | string {
    const c = this.config;
    if (c.attentionBias) return 'the attention projections have biases';
    const eps = c.rmsNormEps;
    const weightOf = (n: RMSNorm, what: string): Tensor | string => {
      if (n.weight === null || n.eps !== eps || n.normalizedShape.length !== 1) return `${what} is not an affine RMSNorm of eps ${eps}`;
      return n.weight;
    };
    const layers: DenseDecoderLayerWeights[] = [];
    for (let i = 0; i < this.model.layers.length; i++) {
      const layer = this.model.layers.at(i);
      const { mlp, self_attn: a } = layer;
      if (!(mlp instanceof Qwen3MLP)) return `layer ${i} is a mixture of experts`;
      const norms = [weightOf(layer.input_layernorm, `layer ${i}'s input norm`), weightOf(a.q_norm, `layer ${i}'s q norm`), weightOf(a.k_norm, `layer ${i}'s k norm`), weightOf(layer.post_attention_layernorm, `layer ${i}'s post-attention norm`)];
      const bad = norms.find((n) => typeof n === 'string');
      if (bad !== undefined) return bad as string;
      const [inputNorm, qNorm, kNorm, postNorm] = norms as Tensor[];
      const linears = [a.q_proj, a.k_proj, a.v_proj, a.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj];
      if (linears.some((l) => l.bias !== null)) return `layer ${i} has projection biases`;
      layers.push({ inputNorm: inputNorm!, q: a.q_proj.weight, k: a.k_proj.weight, v: a.v_proj.weight, qNorm: qNorm!, kNorm: kNorm!, o: a.o_proj.weight, postNorm: postNorm!, gate: mlp.gate_proj.weight, up: mlp.up_proj.weight, down: mlp.down_proj.weight });
    }
    const finalNorm = weightOf(this.model.norm, 'the final norm');
    if (typeof finalNorm === 'string') return finalNorm;
    if (this.lm_head.bias !== null) return 'the LM head has a bias';
    const embed = this.model.embed_tokens.weight;
    const { cos, sin } = this.model.ropeTable(embed.dtype, embed.device);
    return {
      hidden: c.hiddenSize,
      heads: c.numAttentionHeads,
      kvHeads: c.numKeyValueHeads,
      headDim: c.headDim,
      intermediate: c.intermediateSize,
      vocab: c.vocabSize,
      eps,
      layers,
      embed,
      finalNorm,
      lmHead: this.lm_head.weight,
      cos,
      sin,
      keys: cache.keys,
      values: cache.values,
      maxBlocks,
    };
  }

  /** Parameters by checkpoint name; a tied lm_head.weight is left out (as in HF checkpoints). */
  override stateDict(): Record<string, Tensor> {
    const sd = super.stateDict();
    if (this.config.tieWordEmbeddings) delete sd['lm_head.weight'];
    return sd;
  }

  override to(target: DType | DeviceLike): this {
    super.to(target);
    if (this.config.tieWordEmbeddings) this.lm_head.weight = this.model.embed_tokens.weight;
    moveWeightsToHugePages(this);
    return this;
  }

  /**
   * Copies weights from a Hugging Face folder, one tensor at a time (read, convert, copy, free).
   * A tied checkpoint's optional lm_head.weight is ignored; missing or unexpected names are errors.
   */
  loadFromFolder(folder: string): this {
    const ckpt = openHfFolder(folder);
    try {
      const own = this.stateDict();
      const have = new Set(ckpt.keys());
      const missing = Object.keys(own).filter((k) => !have.has(k));
      const unexpected = ckpt.keys().filter((k) => !(k in own) && !(k === 'lm_head.weight' && this.config.tieWordEmbeddings));
      if (missing.length || unexpected.length) {
        throw new Error(
          `Qwen3: ${folder}: checkpoint does not match the model` +
            (missing.length ? `; missing: ${missing.join(', ')}` : '') +
            (unexpected.length ? `; unexpected: ${unexpected.join(', ')}` : ''),
        );
      }
      noGrad(() => {
        for (const [k, dst] of Object.entries(own)) {
          const info = ckpt.info(k);
          if (info.shape.length !== dst.shape.length || info.shape.some((d, i) => d !== dst.shape[i])) {
            throw new Error(`Qwen3: ${folder}: '${k}' has shape ${fmtShape(info.shape)} in the checkpoint, the model expects ${fmtShape(dst.shape)}`);
          }
          const src = ckpt.get(k, { dtype: dst.dtype });
          copy_(dst, src);
          src.dispose();
        }
      });
    } finally {
      ckpt.close();
    }
    return this;
  }
}

function readConfig(folder: string): Qwen3Config {
  const ckpt = openHfFolder(folder);
  try {
    return Qwen3Config.fromJSON(ckpt.config);
  } finally {
    ckpt.close();
  }
}

/** Dense Qwen3 (transformers' Qwen3ForCausalLM). */
export class Qwen3ForCausalLM extends Qwen3CausalLMBase {
  constructor(config: Qwen3Config, options: BuildOptions = {}) {
    if (config.numExperts > 0) throw new Error(`Qwen3ForCausalLM: config has ${config.numExperts} experts; use Qwen3MoeForCausalLM`);
    super(config, options);
  }

  /** Seeded random weights (nn.Linear / nn.Embedding initialisation, RMSNorm weights 1). */
  static fromConfig(config: Qwen3Config | Record<string, unknown>, options: FromConfigOptions = {}): Qwen3ForCausalLM {
    return new Qwen3ForCausalLM(asConfig(config), buildOptions(options));
  }

  /** Loads a Hugging Face folder (config.json + safetensors, sharded or not). */
  static fromPretrained(folder: string, options: FromPretrainedOptions = {}): Qwen3ForCausalLM {
    return new Qwen3ForCausalLM(readConfig(folder), { dtype: options.dtype, device: options.device, init: false }).eval().loadFromFolder(folder);
  }
}

/** Qwen3-MoE (transformers' Qwen3MoeForCausalLM). */
export class Qwen3MoeForCausalLM extends Qwen3CausalLMBase {
  constructor(config: Qwen3Config, options: BuildOptions = {}) {
    if (config.numExperts <= 0) throw new Error('Qwen3MoeForCausalLM: config has no experts (num_experts = 0); use Qwen3ForCausalLM');
    super(config, options);
  }

  static fromConfig(config: Qwen3Config | Record<string, unknown>, options: FromConfigOptions = {}): Qwen3MoeForCausalLM {
    return new Qwen3MoeForCausalLM(asConfig(config), buildOptions(options));
  }

  static fromPretrained(folder: string, options: FromPretrainedOptions = {}): Qwen3MoeForCausalLM {
    return new Qwen3MoeForCausalLM(readConfig(folder), { dtype: options.dtype, device: options.device, init: false }).eval().loadFromFolder(folder);
  }
}

/** Either model, chosen by the folder's config (num_experts > 0 gives the MoE model). */
export function loadQwen3(folder: string, options: FromPretrainedOptions = {}): Qwen3ForCausalLM | Qwen3MoeForCausalLM {
  const cfg = readConfig(folder);
  return cfg.numExperts > 0 ? Qwen3MoeForCausalLM.fromPretrained(folder, options) : Qwen3ForCausalLM.fromPretrained(folder, options);
}

