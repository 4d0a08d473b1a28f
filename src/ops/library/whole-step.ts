/**
 * The whole-step decoder contract: an accelerator may register a kernel that runs an entire
 * decode step of a dense decoder-only transformer (every layer and the LM head) for one sequence
 * in one launch, the shape batch-1 decode needs when each op's launch costs more than its data
 * (issue #17). Models describe themselves in the device-neutral `DenseDecoderSpec` (weights, cache
 * tensors, sizes); the generation engine asks `createWholeStepDecoder` for one and falls back to
 * its compiled or eager step when the answer is a reason instead. Kernels register here, so neither
 * the model nor the engine imports a vendor folder. Registered: cuda's decode megakernel
 * (kernels/cuda/decode-megakernel.ts) and the cpu's one-call step (kernels/cpu/native/decode-step.ts).
 */
import type { Tensor } from '../../tensor/tensor.js';

/** One decoder layer's parameters, in checkpoint layout ([out, in] for the projections). */
export interface DenseDecoderLayerWeights {
  readonly inputNorm: Tensor;
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  /** Per-head RMSNorm weights of q and k (Qwen3). */
  readonly qNorm: Tensor;
  readonly kNorm: Tensor;
  readonly o: Tensor;
  readonly postNorm: Tensor;
  readonly gate: Tensor;
  readonly up: Tensor;
  readonly down: Tensor;
}

/**
 * A dense decoder (RMSNorm, q/k-normed GQA attention with neox rotary, SiLU-gated MLP, no biases)
 * over a paged cache of per-layer K and V tensors [numBlocks, blockSize, kvHeads, headDim].
 */
export interface DenseDecoderSpec {
  readonly hidden: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly intermediate: number;
  readonly vocab: number;
  readonly eps: number;
  readonly layers: readonly DenseDecoderLayerWeights[];
  readonly embed: Tensor;
  readonly finalNorm: Tensor;
  readonly lmHead: Tensor;
  /** Rotary tables [maxPositions, headDim] in the weights' dtype. */
  readonly cos: Tensor;
  readonly sin: Tensor;
  readonly keys: readonly Tensor[];
  readonly values: readonly Tensor[];
  /** Width of a block-table row. */
  readonly maxBlocks: number;
}

/** One step's inputs, as the decode runner holds them for a batch of B (1 <= B <= the decoder's maxBatch). */
export interface WholeStepInputs {
  /** int64 [B] each. */
  readonly ids: Tensor;
  readonly positions: Tensor;
  readonly slots: Tensor;
  /** int32 [B, maxBlocks]. */
  readonly tables: Tensor;
  /** int32 [B]. */
  readonly lens: Tensor;
}

/** One phase of a whole step (readPhaseTimes). */
export interface PhaseTime {
  /** What the phase computes, e.g. 'qkv', 'attention', 'lmHead'. */
  readonly kind: string;
  readonly layer: number;
  /** When its items could start, and when the last of them ended (before any serial tail). */
  readonly openNs: number;
  readonly endNs: number;
}

export interface WholeStepDecoder {
  /** What runs (for logs and tests), e.g. the kernel's name. */
  readonly name: string;
  /** The largest batch (sequences, one token each) a step takes; the runner's larger buckets keep their step. */
  readonly maxBatch: number;
  /**
   * The longest context (tokens, the step's own included) the decoder is built for, if it has
   * such a limit: a step with a longer row runs on the runner's own step function instead.
   */
  readonly maxContext?: number;
  /**
   * Launches a step; the logits [B, vocab] alias a static buffer, valid until the next run. Or a
   * string, when the device refuses to run the decoder at all (nothing ran, nothing was written:
   * e.g. cuda cannot make every block of a grid-synchronised kernel resident because another
   * context holds SMs): why, in a sentence. The caller then runs its own step, and stops asking.
   */
  run(inputs: WholeStepInputs): Tensor | string;
  /** Optional measurement: each phase of the last run, when it opened and when its work ended, in ns from the run's start (see the cpu decoder). */
  readPhaseTimes?(): PhaseTime[] | null;
  /**
   * Optional measurement: per-barrier stamps of the last run (see the cuda decoder), the names of
   * a layer's phases (one barrier ends each) and the names of each layer's extra stamps.
   */
  readTrace?(): { arrive: number[][]; release: number[][]; attention: number[][][]; phases: readonly string[]; stamps: readonly string[] } | null;
  /** Frees the decoder's device buffers. */
  dispose(): void;
}

/** Whether `decoder` takes a step of `rows` padded to `bucket` rows: the bucket within its maxBatch and every row's context (position + 1) within its maxContext. */
export function wholeStepTakes(decoder: Pick<WholeStepDecoder, 'maxBatch' | 'maxContext'>, bucket: number, rows: readonly { readonly position: number }[]): boolean {
  if (bucket > decoder.maxBatch) return false;
  const most = decoder.maxContext ?? Infinity;
  return rows.every((r) => r.position + 1 <= most);
}

/** Makes a decoder for the spec, or says why it cannot (a sentence). */
export type WholeStepFactory = (spec: DenseDecoderSpec) => WholeStepDecoder | string;

/** How a device type's decoder is used when KILN_DECODE_MEGAKERNEL is not set. */
export interface WholeStepRegistration {
  /** Whether the decode runner asks for it by default (else only with KILN_DECODE_MEGAKERNEL=1). */
  readonly byDefault: boolean;
}

const factories = new Map<string, { factory: WholeStepFactory; registration: WholeStepRegistration }>();

/** Registers the whole-step decoder of a device type (one per type; the last registration wins). */
export function registerWholeStepDecoder(deviceType: string, factory: WholeStepFactory, registration: WholeStepRegistration = { byDefault: false }): void {
  factories.set(deviceType, { factory, registration });
}

/** Whether the device type's decoder is on when KILN_DECODE_MEGAKERNEL is not set. */
export function wholeStepByDefault(deviceType: string): boolean {
  return factories.get(deviceType)?.registration.byDefault ?? false;
}

/** A decoder for the spec on its weights' device, or the reason there is none. */
export function createWholeStepDecoder(spec: DenseDecoderSpec): WholeStepDecoder | string {
  const type = spec.embed.device.type;
  const entry = factories.get(type);
  if (entry === undefined) return `no whole-step decoder is registered for ${type}`;
  return entry.factory(spec);
}
