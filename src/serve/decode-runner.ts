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
 *   graph launch plus the copies of the five small index tensors; on webgpu (also
 *   'reduce-overhead') the program's fused WGSL kernels and the LLM library's kernels, recorded on
 *   the device thread once and replayed each step (compile/codegen/wgsl/replay.ts). Lengths and
 *   positions are values in those tensors, never shapes: no recompile per token, length or request.
 * - 'eager': the same step op by op (llm.reshapeAndCache, llm.pagedAttention); no compile.
 *
 * Inputs live in two device buffers per bucket, made once (int64 [3B]: ids, positions, slots;
 * int32 [B + B x maxBlocks]: lengths, tables) and viewed as the step's five arguments; each step
 * fills a host copy and uploads it with one copy per buffer, which does not wait for the device
 * (tensor/transfer.ts: the previous step may still be running). An async engine step passes the
 * previous step's sampled ids as a device tensor, copied into the ids argument after the upload,
 * in stream order (engine.ts, asyncSteps). The arguments are then the same
 * tensors at the same addresses every step, so a captured graph replays in place (no per-argument
 * device copies) and nothing is allocated per step.
 *
 * The logits returned are the real rows of the bucket's output; with CUDA graphs (and webgpu
 * replays) they alias the static output, valid until the next decode step (the engine samples
 * before that).
 */
import { copy_ } from '../api/core.js';
import { empty } from '../api/creation.js';
import { narrow, view } from '../api/views.js';
import { keep } from '../tensor/scope.js';
import { getOption, optionSource, withOptionSnapshot } from '../runtime/config.js';
import { createWholeStepDecoder, wholeStepByDefault, wholeStepTakes, type WholeStepDecoder } from '../ops/library/whole-step.js';
import { uploadFromHost } from '../tensor/transfer.js';
import { storageArray } from '../tensor/typed.js';
import { compile, type CompiledFunction } from '../compile/compile.js';
import type { CompiledProgram, CompileMode } from '../compile/backend.js';
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
  /** kiln.compile mode for the 'compiled' path (default 'reduce-overhead' on cuda and webgpu, 'default' on cpu). */
  mode?: CompileMode;
}

type StepFn = (ids: Tensor, positions: Tensor, slots: Tensor, tables: Tensor, lens: Tensor) => Tensor;

/** One bucket's input buffers: host copies, device buffers and the five argument views. */
interface BucketInputs {
  readonly longHost: Tensor;
  readonly intHost: Tensor;
  /** The int64 host buffer as 32-bit halves (little-endian: low word first). */
  readonly longWords: Int32Array;
  readonly intWords: Int32Array;
  readonly longDevice: Tensor;
  readonly intDevice: Tensor;
  readonly args: readonly [Tensor, Tensor, Tensor, Tensor, Tensor];
  readonly owned: readonly Tensor[];
}

export function decodeBucket(n: number): number {
  return DECODE_BUCKETS.find((b) => b >= n) ?? n;
}

export class DecodeRunner {
  /** Width of every block table row: blocks of the longest sequence the cache and model allow. */
  readonly maxBlocks: number;
  /** Steps run, padding rows they carried, and steps the whole-step decoder ran (the rest: the step function). */
  readonly counters = { steps: 0, paddedRows: 0, wholeSteps: 0 };
  private readonly step: StepFn;
  private readonly compiled: CompiledFunction<StepFn> | null;
  private readonly buckets = new Map<number, BucketInputs>();
  /** The whole-step decoder the steps of buckets up to its maxBatch run on (KILN_DECODE_MEGAKERNEL; unset: the device's default), or null: the step function. */
  get wholeStepDecoder(): WholeStepDecoder | null {
    return this.whole;
  }
  /** Why KILN_DECODE_MEGAKERNEL found no whole-step decoder, or why the device refused the one it found (null: it runs, or it is off). */
  get wholeStepReason(): string | null {
    return this.wholeReason;
  }
  private whole: WholeStepDecoder | null = null;
  private wholeReason: string | null = null;

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
      // cuda: CUDA graphs; webgpu: recorded replays (compile/codegen/wgsl/replay.ts). Both alias
      // the logits to a static buffer, which the engine samples before the next step.
      const type = cache.geometry.device.type;
      const mode = options.mode ?? (type === 'cuda' || type === 'webgpu' ? 'reduce-overhead' : 'default');
      // One entry per bucket; the limit must not push a bucket back to eager.
      // The cache tensors and rotary tables are captured on purpose (written in place, never reassigned).
      this.compiled = compile(raw, { mode, dynamic: false, recompileLimit: DECODE_BUCKETS.length + 8, capturedTensors: 'allow' });
      this.step = this.compiled;
    } else {
      this.compiled = null;
      // Eager steps read each option from the environment once (hundreds of ops, a few reads each).
      this.step = (...args) => withOptionSnapshot(() => raw(...args));
    }
    // KILN_DECODE_MEGAKERNEL decides when set; unset, the device's registration does (cpu: on).
    const type = cache.geometry.device.type;
    const wantWhole = optionSource('KILN_DECODE_MEGAKERNEL') === 'default' ? wholeStepByDefault(type) : getOption('KILN_DECODE_MEGAKERNEL');
    if (wantWhole) {
      const spec = model.wholeStepSpec?.(tensors, this.maxBlocks) ?? 'the model describes no whole-step decoder';
      const made = typeof spec === 'string' ? spec : createWholeStepDecoder(spec);
      if (typeof made === 'string') this.wholeReason = made;
      else this.whole = made;
    }
  }

  /** Compile counters of the 'compiled' path (traces, compiles, cache hits), or null. */
  get compileCounters(): CompiledFunction<StepFn>['counters'] | null {
    return this.compiled?.counters ?? null;
  }

  /** The compiled path's programs (one per bucket; tests and tools inspect them), or none. */
  get programs(): readonly CompiledProgram[] {
    return this.compiled?.programs().inference ?? [];
  }

  /** The bucket sizes run so far, in first-use order: the compiled path traces once for each. */
  get bucketSizes(): number[] {
    return [...this.buckets.keys()];
  }

  /**
   * Logits [rows.length, vocab] of the rows' next tokens (their K/V are written to the cache).
   * `deviceIds` (int64 [k], k <= rows.length, on the cache's device): the first k rows' token ids,
   * copied device to device into the step's static input after the upload (those rows' tokenId is
   * ignored): the previous step's sampled ids, which the host has not read yet (async steps).
   */
  run(rows: readonly DecodeRow[], deviceIds?: Tensor): Tensor {
    const n = rows.length;
    if (n === 0) throw new Error('DecodeRunner.run: no rows');
    const B = decodeBucket(n);
    const M = this.maxBlocks;
    const inp = this.inputs(B);
    const lw = inp.longWords;
    const iw = inp.intWords;
    lw.fill(0);
    iw.fill(0);
    // int64 [ids | positions | slots]; padding rows: id 0, position 0, slot -1 (skipped).
    const put = (at: number, v: number): void => {
      lw[2 * at] = v;
      lw[2 * at + 1] = v < 0 ? -1 : 0;
    };
    for (let i = n; i < B; i++) put(2 * B + i, -1);
    rows.forEach((r, i) => {
      if (r.blockTable.length > M) throw new Error(`DecodeRunner.run: row ${i} has ${r.blockTable.length} blocks; tables hold ${M}`);
      put(i, r.tokenId);
      put(B + i, r.position);
      put(2 * B + i, this.cache.slot(r.blockTable, r.position));
      // int32 [lengths | tables]
      iw[i] = r.position + 1;
      iw.set(r.blockTable, B + i * M);
    });
    if (inp.longDevice !== inp.longHost) {
      // Not waiting for the device: the previous step may still be running (stream order puts
      // these copies after it).
      uploadFromHost(inp.longDevice, inp.longHost);
      uploadFromHost(inp.intDevice, inp.intHost);
    }
    if (deviceIds !== undefined) {
      const k = deviceIds.numel();
      if (deviceIds.ndim !== 1 || deviceIds.dtype !== 'int64' || k > n || !deviceIds.device.equals(this.cache.geometry.device)) {
        throw new Error(`DecodeRunner.run: deviceIds must be int64 [k <= ${n}] on ${this.cache.geometry.device.toString()}, got ${deviceIds.dtype} [${deviceIds.shape.join(', ')}] on ${deviceIds.device.toString()}`);
      }
      if (k > 0) {
        const dst = narrow(inp.args[0], 0, 0, k);
        copy_(dst, deviceIds);
        dst.dispose();
      }
    }
    const [ids, positions, slots, tables, lens] = inp.args;
    let logits = this.whole !== null && wholeStepTakes(this.whole, B, rows) ? this.whole.run({ ids, positions, slots, tables, lens }) : null;
    if (typeof logits === 'string') {
      // The device refused the decoder (nothing ran): this step and every later one take the step function.
      this.wholeReason = `the whole-step decoder ${this.whole!.name} was refused by the device: ${logits}`;
      this.whole!.dispose();
      this.whole = null;
      logits = null;
    }
    if (logits !== null) this.counters.wholeSteps++;
    else logits = this.step(...inp.args);
    this.counters.steps++;
    this.counters.paddedRows += B - n;
    return B === n ? logits : narrow(logits, 0, 0, n);
  }

  /**
   * Frees the input buffers, and what the compiled programs hold on the device beyond the garbage
   * collector's reach (webgpu recordings: their static outputs and private pool); the programs go
   * with the compiled function.
   */
  dispose(): void {
    for (const p of this.programs) (p as { dispose?: () => void }).dispose?.();
    this.whole?.dispose();
    for (const b of this.buckets.values()) for (const t of b.owned) t.dispose();
    this.buckets.clear();
  }

  private inputs(B: number): BucketInputs {
    const have = this.buckets.get(B);
    if (have) return have;
    const M = this.maxBlocks;
    const device = this.cache.geometry.device;
    const onCpu = device.type === 'cpu';
    const longHost = keep(empty([3 * B], { dtype: 'int64', device: 'cpu' }));
    const intHost = keep(empty([B + B * M], { dtype: 'int32', device: 'cpu' }));
    const longDevice = onCpu ? longHost : keep(empty([3 * B], { dtype: 'int64', device }));
    const intDevice = onCpu ? intHost : keep(empty([B + B * M], { dtype: 'int32', device }));
    const args = [
      keep(narrow(longDevice, 0, 0, B)),
      keep(narrow(longDevice, 0, B, B)),
      keep(narrow(longDevice, 0, 2 * B, B)),
      keep(view(narrow(intDevice, 0, B, B * M), [B, M])),
      keep(narrow(intDevice, 0, 0, B)),
    ] as const;
    const made: BucketInputs = {
      longHost,
      intHost,
      longWords: new Int32Array(longHost.storage.cpuArrayBuffer(), longHost.offset * 8, 6 * B),
      intWords: storageArray('int32', intHost.storage.cpuArrayBuffer(), intHost.offset * 4, B + B * M) as Int32Array,
      longDevice,
      intDevice,
      args,
      owned: [...args, ...new Set([longHost, intHost, longDevice, intDevice])],
    };
    this.buckets.set(B, made);
    return made;
  }
}
