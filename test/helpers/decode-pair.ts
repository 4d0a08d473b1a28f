/**
 * The set-up the compiled fused-vs-unfused decode tests share (cuda-add-rms-norm-linear,
 * cuda-linear-silu-mul, cuda-qk-norm-rotary-cache, webgpu-add-rms-norm-linear-decode,
 * webgpu-qk-norm-rotary-cache): a tiny two-layer Qwen3 (hidden 128, 4 query heads, 2 kv heads of
 * 64) on the device, prepared for paged decode, with two separate but equal sets of caches, so a
 * test can compile its decode step once with an option on and once with it off and compare the
 * logits (and the caches) step by step; and the step inputs those tests feed it.
 */
import * as kiln from '../../src/index.js';
import { tinyQwen3Config } from '../../src/bench/workloads.js';
import type { DType } from '../../src/tensor/dtype.js';
import type { Tensor } from '../../src/tensor/tensor.js';
import { makeTensor, rand } from './make.js';

/** One set of paged caches: per layer, [blocks, block size, kv heads, head dim]. */
export interface DecodeCaches {
  keys: Tensor[];
  values: Tensor[];
}

/** A decode step's inputs: ids, positions, slot mapping, block tables, context lengths. */
export type DecodeArgs = [Tensor, Tensor, Tensor, Tensor, Tensor];

/** Cache blocks, tokens per block, block-table width. */
const [NB, BS, M] = [8, 4, 4];

/** The compile options of the step: captured / recorded and replayed, static shapes, the weights captured. */
export const DECODE_COMPILE_OPTIONS = { mode: 'reduce-overhead', dynamic: false, capturedTensors: 'allow' } as const;

export interface DecodePair {
  /** Two sets of caches, equal at the start; the test compiles one step over each. */
  readonly caches: [DecodeCaches, DecodeCaches];
  /** The model's decode step over caches `c`, as kiln.compile takes it. */
  step(c: DecodeCaches): (...args: DecodeArgs) => Tensor;
}

/**
 * The model (seed 3) and its caches: `init` 'random' gives both sets the same seeded values (the
 * tests that compare the caches a fused cache write leaves), 'zeros' empty ones.
 * `intermediateSize`: the MLP width where the test needs one other than the tiny config's.
 */
export function decodePair(device: 'cuda' | 'webgpu', dtype: DType, init: 'random' | 'zeros', intermediateSize?: number): DecodePair {
  const config = tinyQwen3Config().with({ numHiddenLayers: 2, hiddenSize: 128, ...(intermediateSize === undefined ? {} : { intermediateSize }), numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 64 });
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3, dtype, device });
  model.eval();
  model.prepareDecode();
  let makeCache: () => DecodeCaches;
  if (init === 'random') {
    // Layer l's keys from seed 10, its values from seed 11 (both layers alike), as host tensors copied per set.
    const start = [0, 1].flatMap(() => [rand([NB, BS, 2, 64], 10, 'contiguous', dtype), rand([NB, BS, 2, 64], 11, 'contiguous', dtype)]);
    makeCache = () => {
      const t = start.map((x) => x.to(device));
      return { keys: [t[0]!, t[2]!], values: [t[1]!, t[3]!] };
    };
  } else {
    makeCache = () => ({ keys: [0, 1].map(() => kiln.zeros([NB, BS, 2, 64], { dtype, device })), values: [0, 1].map(() => kiln.zeros([NB, BS, 2, 64], { dtype, device })) });
  }
  return {
    caches: [makeCache(), makeCache()],
    step: (c) => (ids, positions, slotMapping, blockTables, contextLens) => model.decodeStep({ inputIds: ids, positions, slotMapping, blockTables, contextLens }, c),
  };
}

/**
 * Step s's inputs on the device. rows 3: two sequences and a padding row (slot -1, length 0);
 * rows 1: one sequence at position s (slot 4 + s, length s + 1).
 */
export function decodeArgs(s: number, rows: 1 | 3, device: 'cuda' | 'webgpu'): DecodeArgs {
  const t =
    rows === 3
      ? [
          makeTensor([5 + s, 9, 0], [3], 'int64'),
          makeTensor([6 + s, 2 + s, 0], [3], 'int64'),
          makeTensor([4 * 2 + 2 + s, 5 * 4 + 2 + s, -1], [3], 'int64'),
          makeTensor([1, 2, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0], [3, M], 'int32'),
          makeTensor([7 + s, 3 + s, 0], [3], 'int32'),
        ]
      : [makeTensor([5 + s], [1], 'int64'), makeTensor([s], [1], 'int64'), makeTensor([4 + s], [1], 'int64'), makeTensor([1, 2, 0, 0], [1, M], 'int32'), makeTensor([s + 1], [1], 'int32')];
  return t.map((x) => x.to(device)) as DecodeArgs;
}

/** max |a[i] - b[i]|. */
export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}
