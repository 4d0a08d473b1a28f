/**
 * Recorded replay of compiled webgpu programs, webgpu's counterpart of CUDA graphs in mode
 * 'reduce-overhead' (issue #20), and in the other modes for programs of many steps (target.ts),
 * where each call's results are copies of the static outputs instead of aliases. A compiled decode
 * step is about a thousand dispatches; issuing them costs the main thread the step runner, every
 * extern kernel's host code and the packing of each dispatch, and the device thread a bind group
 * per dispatch. WebGPU has no compute bundles (command buffers are single-use), so the device
 * thread keeps the commands instead: the pipelines, one bind group per dispatch over a metadata
 * buffer of the recording's own, the copies and clears (runtime/webgpu/worker.ts, makeRecording).
 * A replay is one command from the main thread and, on the device thread, setPipeline /
 * setBindGroup / dispatchWorkgroups per dispatch.
 *
 * Per program (one per input signature, as kiln.compile keeps them):
 *   1. the first call runs plainly: pipelines are created, configs decided, lazy state made;
 *   2. the next call runs recorded: it executes as usual (so each call runs the program exactly
 *      once, in place writes included) while the device thread keeps its commands. The
 *      allocator's private pool (caching-allocator.ts) takes every block freed meanwhile, so the
 *      blocks the recording writes are never handed to another tensor; the call's outputs are kept
 *      as the static outputs;
 *   3. later calls whose inputs (arguments and lifted tensors) are the same buffers at the same
 *      offsets and layouts replay, and return new tensors over the static outputs: as with CUDA
 *      graphs in 'reduce-overhead', they alias them, valid until the next call (clone what must
 *      survive it). Inputs elsewhere record again (twice in a row without a replay between: the
 *      program runs plainly from then on).
 * A recording is refused where a replay would not repeat the call: a host-to-device write or a
 * read of device data inside it (the host decided something on this call's values), a destroyed
 * buffer, random ops (their seeds come from the host per call), inputs on the cpu. The call still
 * ran, so its result is returned; the program then runs plainly, saying why in `stats.disabled`.
 */
import type { WebgpuAccelerator, WebgpuHandle } from '../../../runtime/webgpu/webgpu-accelerator.js';
import type { PrivatePool } from '../../../runtime/caching-allocator.js';
import { getAccelerator } from '../../../runtime/registry.js';
import { keep, scope } from '../../../tensor/scope.js';
import { Tensor } from '../../../tensor/tensor.js';
import type { CompiledProgram, ProgramCacheStatus } from '../../backend.js';
import type { Graph } from '../../ir.js';
import { drawsRandom } from '../../passes/util.js';
import { clone } from '../../../ops/defs/core.js';
import { dispatch } from '../../../ops/dispatch.js';
import type { WgslProgram } from './program.js';

export interface WgslReplayStats {
  /** Calls run plainly (the first, and every call once replay is off). */
  plainRuns: number;
  /** Recordings made, and replays. */
  recordings: number;
  replays: number;
  /** Dispatches of the current recording. */
  dispatches: number;
  /** Why the program runs plainly, once it does for good. */
  disabled: string | null;
}

/** What a recording's replay needs of each input to read and write what it recorded. */
interface InputPlace {
  readonly buffer: number;
  readonly offset: number;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
}

interface Recorded {
  readonly id: number;
  readonly dispatches: number;
  readonly places: readonly InputPlace[];
  readonly pool: PrivatePool;
  readonly output: unknown;
}

const placeOf = (t: Tensor): InputPlace => ({ buffer: (t.storage.buffer.handle as WebgpuHandle).id, offset: t.offset, dtype: t.dtype, shape: t.shape, strides: t.strides });

function samePlace(p: InputPlace, t: Tensor): boolean {
  if (t.offset !== p.offset || t.dtype !== p.dtype || t.device.type !== 'webgpu' || (t.storage.buffer.handle as WebgpuHandle).id !== p.buffer) return false;
  const { shape, strides } = t;
  if (shape.length !== p.shape.length) return false;
  for (let i = 0; i < shape.length; i++) if (shape[i] !== p.shape[i] || strides[i] !== p.strides[i]) return false;
  return true;
}

/** `x` with every Tensor in arrays and plain objects replaced by `f(t)` (one result per tensor). */
function mapTensors(x: unknown, f: (t: Tensor) => Tensor, seen = new Map<Tensor, Tensor>()): unknown {
  if (x instanceof Tensor) {
    let y = seen.get(x);
    if (!y) seen.set(x, (y = f(x)));
    return y;
  }
  if (Array.isArray(x)) return x.map((e) => mapTensors(e, f, seen));
  if (x !== null && typeof x === 'object' && Object.getPrototypeOf(x) === Object.prototype) return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, mapTensors(v, f, seen)]));
  return x;
}

function tensorsOf(x: unknown): Tensor[] {
  const out: Tensor[] = [];
  mapTensors(x, (t) => (out.push(t), t));
  return out;
}

/** Why a graph's calls cannot be replayed, or null. */
export function replayRefusal(graph: Graph): string | null {
  const random = graph.nodes.find(drawsRandom);
  if (random) return `the graph has a random op (${random.op}): its seed is drawn on the host per call`;
  if ([...graph.values.values()].some((v) => v.device.type !== 'webgpu')) return 'a value of the graph is not on webgpu';
  return null;
}

export class WgslReplayProgram implements CompiledProgram {
  readonly stats: WgslReplayStats = { plainRuns: 0, recordings: 0, replays: 0, dispatches: 0, disabled: null };
  private rec: Recorded | undefined;
  private warm = false;
  /** Recordings made since the last replay (inputs that move every call make one per call). */
  private unreplayed = 0;

  constructor(
    readonly program: WgslProgram,
    refusal: string | null,
    /** Results alias the static outputs (mode 'reduce-overhead'); else each call's are copies of them. */
    readonly aliasOutputs = true,
  ) {
    this.stats.disabled = refusal;
  }

  get kernelCount(): number {
    return this.program.kernelCount;
  }

  get diskCache(): ProgramCacheStatus | undefined {
    return this.program.diskCache;
  }

  describe(): string {
    const state = this.stats.disabled !== null ? `off: ${this.stats.disabled}` : this.rec ? `recorded (${this.rec.dispatches} dispatches), ${this.stats.replays} replays` : 'not recorded yet';
    return `${this.program.describe()}\n// webgpu replay (outputs ${this.aliasOutputs ? 'alias static buffers' : 'copied from static buffers'}): ${state}`;
  }

  run(inputs: readonly Tensor[]): unknown {
    const r = this.rec;
    if (r !== undefined && this.inPlace(r, inputs)) return this.replay(r);
    if (this.stats.disabled !== null || !this.warm) {
      this.warm = true;
      this.stats.plainRuns++;
      return this.program.run(inputs);
    }
    if (r !== undefined) this.release(r);
    if (this.unreplayed >= 2) {
      this.stats.disabled = 'its inputs move between calls (recorded twice in a row without a replay)';
      this.stats.plainRuns++;
      return this.program.run(inputs);
    }
    return this.record(inputs);
  }

  private inPlace(r: Recorded, inputs: readonly Tensor[]): boolean {
    if (inputs.length !== r.places.length) return false;
    for (let i = 0; i < inputs.length; i++) if (!samePlace(r.places[i]!, inputs[i]!)) return false;
    return true;
  }

  private acc(): WebgpuAccelerator {
    return getAccelerator('webgpu') as unknown as WebgpuAccelerator;
  }

  private record(inputs: readonly Tensor[]): unknown {
    if (inputs.some((t) => t.device.type !== 'webgpu')) {
      this.stats.disabled = 'an input is not on webgpu (read by the host at launch)';
      this.stats.plainRuns++;
      return this.program.run(inputs);
    }
    const acc = this.acc();
    const alloc = acc.allocator(0);
    const pool = alloc.beginPool();
    let output: unknown;
    acc.beginRecording();
    try {
      // scope(): the views the program made for extern calls go too, so their blocks reach the pool.
      output = scope(() => this.program.run(inputs));
    } catch (e) {
      alloc.endPool(pool);
      const end = acc.endRecording();
      if (!('broken' in end)) acc.dropRecording(end.id);
      alloc.releasePool(pool);
      throw e;
    }
    alloc.endPool(pool);
    const end = acc.endRecording();
    this.unreplayed++;
    if ('broken' in end) {
      alloc.releasePool(pool);
      this.stats.disabled = `a replay would not repeat the call: ${end.broken} while recording`;
      return output;
    }
    // The call's outputs become the static outputs; the caller gets tensors of its own over them.
    for (const t of tensorsOf(output)) keep(t);
    this.rec = { id: end.id, dispatches: end.dispatches, places: inputs.map(placeOf), pool, output };
    this.stats.recordings++;
    this.stats.dispatches = end.dispatches;
    return this.results(output);
  }

  private replay(r: Recorded): unknown {
    this.acc().replay(r.id, r.dispatches);
    this.stats.replays++;
    this.unreplayed = 0;
    return this.results(r.output);
  }

  /**
   * What a call returns of the static outputs: new tensor objects over them (disposing one drops
   * only its own reference), or with aliasOutputs off copies of them (queued after the replay).
   */
  private results(output: unknown): unknown {
    if (!this.aliasOutputs) return mapTensors(output, (t) => dispatch(clone, t) as Tensor);
    return mapTensors(output, (t) => new Tensor(t.storage, t.dtype, t.shape, t.strides, t.offset));
  }

  /**
   * Frees the recording (its device-thread copy, static outputs and private pool); later calls run
   * plainly. A compiled function has no dispose of its own, so an owner that is done with it (the
   * serve engine's decode runner) calls this, or the blocks would stay set apart for good.
   */
  dispose(): void {
    if (this.rec) this.release(this.rec);
    this.stats.disabled ??= 'disposed';
  }

  private release(r: Recorded): void {
    const acc = this.acc();
    acc.dropRecording(r.id);
    for (const t of tensorsOf(r.output)) t.dispose();
    acc.allocator(0).releasePool(r.pool);
    this.rec = undefined;
  }
}
