/**
 * What a model's attention needs from a key/value cache during one generation step, and what a
 * generation engine needs from a model. Defined here, below serve/, so that models never import
 * the engine: serve/step-context.ts implements StepKv over the paged cache, and any causal LM with
 * a `forwardStep` (Qwen3 today) can be driven by serve/engine.ts.
 *
 * A step runs N tokens from one or more sequences as one flat batch [1, N]: every projection and
 * MLP sees all N at once. Only attention is per sequence, so the tokens are laid out in groups
 * that attend in one call each: a group is `rows` sequences with `queryLen` new tokens each,
 * stored contiguously from flat token `start` as [rows, queryLen] (decode: many rows of one token;
 * prefill: one row of many tokens).
 */
import type { DType } from '../tensor/dtype.js';
import type { Device } from '../runtime/device.js';
import type { DenseDecoderSpec } from '../ops/library/whole-step.js';
import type { Tensor } from '../tensor/tensor.js';

export interface AttentionGroup {
  /** First flat token of the group. */
  readonly start: number;
  /** Sequences in the group. */
  readonly rows: number;
  /** New tokens per sequence. */
  readonly queryLen: number;
}

/** The keys and values one attention group attends to. */
export interface GroupKv {
  /** [rows, kvHeads, S, headDim]: the cached tokens and this step's, in position order. */
  readonly keys: Tensor;
  readonly values: Tensor;
  /**
   * Bool [rows, 1, queryLen, S] (true = attend), or null when every row attends to all S keys
   * (decode with equal lengths) or `causal` covers it.
   */
  readonly mask: Tensor | null;
  /** Top-left causal masking (query i sees keys 0..i): only when there is no cached prefix. */
  readonly causal: boolean;
}

/** The cache as one step's attention sees it; the same object serves every layer. */
export interface StepKv {
  readonly groups: readonly AttentionGroup[];
  /** Total new tokens in the step (the sum over groups of rows * queryLen). */
  readonly numTokens: number;
  /**
   * Stores layer `layer`'s keys and values of the step's tokens, [N, kvHeads, headDim] after
   * k_norm and RoPE, so that read() includes them. Called once per layer, before read().
   */
  write(layer: number, keys: Tensor, values: Tensor): void;
  /** Group `group`'s keys, values and mask for layer `layer`; the caller disposes keys and values. */
  read(layer: number, group: number): GroupKv;
}

/** The cache geometry a model needs: one K and one V per layer of [kvHeads, headDim] per token. */
export interface KvGeometry {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly dtype: DType;
  readonly device: Device;
}

/**
 * Device tensors of one decode step over a paged cache: every row is one sequence's next token.
 * Nothing in it depends on a sequence's length but the values, so a step compiled for a batch size
 * (and replayed as a CUDA graph) serves every length; padding rows have slot -1 and length 0.
 */
export interface DecodeBatch {
  /** [B] int64: each row's new token. */
  readonly inputIds: Tensor;
  /** [B] int64: its position. */
  readonly positions: Tensor;
  /** [B] int64: where its key/value go in the flat cache (block * blockSize + offset); -1 skips. */
  readonly slotMapping: Tensor;
  /** [B, maxBlocks] int32: each row's block table (padded with 0). */
  readonly blockTables: Tensor;
  /** [B] int32: tokens each row attends to, this one included (0 for padding rows). */
  readonly contextLens: Tensor;
}

/** The paged cache's tensors: per layer K and V [numBlocks, blockSize, kvHeads, headDim]. */
export interface PagedKvTensors {
  readonly keys: readonly Tensor[];
  readonly values: readonly Tensor[];
}

/** A causal LM a generation engine can drive. */
export interface StepModel {
  readonly vocabSize: number;
  /** Longest sequence (prompt + output) the model accepts. */
  readonly maxPositions: number;
  kvGeometry(): KvGeometry;
  /**
   * Logits [R, vocab] for the step's tokens `inputIds` [N] at `positions` [N], with attention over
   * the cache `kv`; R = logitsRows.length (flat token indices, e.g. each sequence's last token),
   * so the LM head runs only where a token is sampled. Inference only (no autograd graph).
   */
  forwardStep(inputIds: Tensor, positions: readonly number[], kv: StepKv, logitsRows: readonly number[]): Tensor;
  /**
   * Logits [B, vocab] of a decode step that stays on the device (no host read, no shape that
   * depends on a length): what the engine compiles per batch size. Optional: engines fall back to
   * forwardStep without it.
   */
  decodeStep?(batch: DecodeBatch, cache: PagedKvTensors): Tensor;
  /**
   * Makes what decodeStep reads besides its arguments (e.g. rotary tables) outside any kiln.compile
   * trace, so a compiled step reads them as constants instead of rebuilding them in its graph.
   */
  prepareDecode?(): void;
  /**
   * The model as a dense decoder for a whole-step decode kernel (ops/library/whole-step.ts) over
   * `cache` with tables `maxBlocks` wide, or why it is not one. Optional.
   */
  wholeStepSpec?(cache: PagedKvTensors, maxBlocks: number): DenseDecoderSpec | string;
}
