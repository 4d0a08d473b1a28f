/**
 * Decode steps that stay on the device: when every sequence of a step adds one token, the engine
 * runs the model's decodeStep (models/step-kv.ts) instead of the general forwardStep. The batch is
 * padded to a bucket (1, 2, 4, ..., 512; vLLM's and gpt-fast's CUDA-graph batch sizes): padding rows
 * write nothing (slot -1) and attend to nothing (length 0). The block tables have a fixed width
 * (blocks for the longest sequence the engine allows), so a bucket's shapes never change.
 *
 * Paths:
 * - 'compiled': kiln.compile over the step, one program per bucket; on cuda in mode
 *   'reduce-overhead', so each bucket is captured once as a CUDA graph and every later step is one
 *   graph launch plus the copies of the five small index tensors. Lengths and positions are
 *   values in those tensors, never shapes: no recompile per token, length or request.
 * - 'eager': the same step op by op (llm.reshapeAndCache, llm.pagedAttention); no compile.
 *
 * The logits returned are the real rows of the bucket's output; with CUDA graphs they alias the
 * graph's static output, valid until the next decode step (the engine samples before that).
 */
import { tensor } from '../api/data.js';
import { narrow } from '../api/views.js';
import { compile, type CompiledFunction } from '../compile/compile.js';
import type { CompileMode } from '../compile/backend.js';
import type { DecodeBatch, PagedKvTensors, StepModel } from '../models/step-kv.js';
import type { Tensor } from '../tensor/tensor.js';
import type { PagedKvCache } from './kv-cache.js';

export type DecodePath = 'step' | 'eager' | 'compiled';

/** Batch sizes a decode step is padded to (beyond the last: the exact size). */
export const DECODE_BUCKETS: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/** One row of a decode step: a sequence's next token. */
export interface DecodeRow {
  readonly tokenId: number;
  /** The token's position (= tokens already cached). */
  readonly position: number;
  readonly blockTable: readonly number[];
}

export interface DecodeRunnerOptions {
  /** kiln.compile mode for the 'compiled' path (default 'reduce-overhead' on cuda, 'default' on cpu). */
  mode?: CompileMode;
}

type StepFn = (ids: Tensor, positions: Tensor, slots: Tensor, tables: Tensor, lens: Tensor) => Tensor;

export function decodeBucket(n: number): number {
  return DECODE_BUCKETS.find((b) => b >= n) ?? n;
}

export class DecodeRunner {
  /** Width of every block table row: blocks of the longest sequence the cache and model allow. */
  readonly maxBlocks: number;
  readonly counters = { steps: 0, paddedRows: 0 };
  private readonly step: StepFn;
  private readonly compiled: CompiledFunction<StepFn> | null;

  constructor(
    model: StepModel,
    private readonly cache: PagedKvCache,
    readonly path: 'eager' | 'compiled',
    options: DecodeRunnerOptions = {},
  ) {
    const decode = model.decodeStep?.bind(model);
    if (decode === undefined) throw new Error(`DecodeRunner: the model has no decodeStep; use the engine's decode: 'step'`);
    model.prepareDecode?.();
    this.maxBlocks = Math.min(cache.blocksFor(model.maxPositions), cache.numBlocks);
    const tensors: PagedKvTensors = { keys: cache.keys, values: cache.values };
    const raw: StepFn = (inputIds, positions, slotMapping, blockTables, contextLens) => decode({ inputIds, positions, slotMapping, blockTables, contextLens } satisfies DecodeBatch, tensors);
    if (path === 'compiled') {
      const mode = options.mode ?? (cache.geometry.device.type === 'cuda' ? 'reduce-overhead' : 'default');
      // One entry per bucket; the limit must not push a bucket back to eager.
      this.compiled = compile(raw, { mode, dynamic: false, recompileLimit: DECODE_BUCKETS.length + 8 });
      this.step = this.compiled;
    } else {
      this.compiled = null;
      this.step = raw;
    }
  }

  /** Compile counters of the 'compiled' path (traces, compiles, cache hits), or null. */
  get compileCounters(): CompiledFunction<StepFn>['counters'] | null {
    return this.compiled?.counters ?? null;
  }

  /** Logits [rows.length, vocab] of the rows' next tokens (their K/V are written to the cache). */
  run(rows: readonly DecodeRow[]): Tensor {
    const n = rows.length;
    if (n === 0) throw new Error('DecodeRunner.run: no rows');
    const B = decodeBucket(n);
    const M = this.maxBlocks;
    const ids = new Int32Array(B);
    const positions = new Int32Array(B);
    const slots = new Int32Array(B).fill(-1);
    const lens = new Int32Array(B);
    const tables = new Int32Array(B * M);
    rows.forEach((r, i) => {
      if (r.blockTable.length > M) throw new Error(`DecodeRunner.run: row ${i} has ${r.blockTable.length} blocks; tables hold ${M}`);
      ids[i] = r.tokenId;
      positions[i] = r.position;
      slots[i] = this.cache.slot(r.blockTable, r.position);
      lens[i] = r.position + 1;
      tables.set(r.blockTable, i * M);
    });
    const device = this.cache.geometry.device;
    const long = (a: Int32Array): Tensor => tensor(a, { dtype: 'int64', device });
    const int = (a: Int32Array, shape: number[]): Tensor => tensor(a, { dtype: 'int32', device }).view(shape);
    const logits = this.step(long(ids), long(positions), long(slots), int(tables, [B, M]), int(lens, [B]));
    this.counters.steps++;
    this.counters.paddedRows += B - n;
    return B === n ? logits : narrow(logits, 0, 0, n);
  }
}
