/// <reference types="@webgpu/types" />
/**
 * The thread that owns the Dawn device (see protocol.ts for why it is a thread). It applies
 * batches in order (one command encoder per batch, split around uploads; one compute pass across consecutive
 * dispatches, whose barriers Dawn inserts), answers calls after earlier work, and collects every
 * uncaptured error and the device's loss, to hand them to the main thread with the next answer.
 * Bind groups are made once and reused (bind-groups.ts: createBindGroup was most of a dispatch's
 * cost here), and recordings (a compiled program's commands, compile/codegen/wgsl/replay.ts) keep
 * theirs, so a replay encodes only setPipeline, setBindGroup and dispatchWorkgroups per dispatch.
 * Messages are handled one at a time on a promise chain, since a read's mapAsync must not let a
 * later batch overtake it. Pipelines are created with createComputePipelineAsync: a 'compile' call
 * answers when its pipeline is ready; 'pipeline' commands (sources known good, from the disk cache)
 * start at once, several together, and only a batch that dispatches one waits for it.
 */
import { inNode, workerThreads } from '../../platform/index.js';
import { decodeBatch, encodeAnswer, OP_DISPATCH, STAMP_SLOTS, type AdapterReport, type Answer, type Call, type DeviceFault, type SubgroupMatrixConfig, type ToWorker, type WireCommand, type WorkerInit } from './protocol.js';
import { BindGroupCache } from './bind-groups.js';

/** Node: the worker's data. Browser: the first message ({ t: 'start' }). */
let init: WorkerInit = inNode ? (workerThreads.workerData as WorkerInit) : (undefined as unknown as WorkerInit);
let flag: Int32Array = inNode ? new Int32Array(init.flag) : new Int32Array(4);
const faults: DeviceFault[] = [];

interface DawnModule {
  create(options: string[]): GPU;
  globals: Record<string, unknown>;
}

let device: GPUDevice | undefined;
/**
 * The instance and adapter stay referenced for the thread's life: dawn.node's event pump keeps a
 * raw pointer to the instance, and a collected instance crashed it (a segfault in ProcessEvents).
 */
const keep: unknown[] = [];
let lostReason: string | undefined;
const buffers = new Map<number, GPUBuffer>();
const pipelines = new Map<number, GPUComputePipeline>();
/**
 * Each pipeline's bind group layout, asked of Dawn once: getBindGroupLayout makes a new wrapper
 * object per call, and a decode step asks for one per dispatch (about a thousand).
 */
const layouts = new Map<number, GPUBindGroupLayout>();
/**
 * Batches applied and the time spent applying them (encoding and submitting; submitMs: the part
 * inside finish + submit, where Dawn translates to the backend's commands), the time batches waited
 * between arriving and being applied (queuedMs: earlier messages, pipeline creation), reads and the
 * time from a read's submit to its mapping (readMs: mostly the GPU finishing the work before it),
 * recordings made and replayed, the time spent encoding replays ahead and the dispatches of
 * replays that had been encoded ahead (aheadMs, aheadDispatches): the 'stats' call reports them
 * (issue #20: where a step's host time goes).
 */
const counters = { batches: 0, applyMs: 0, submitMs: 0, queuedMs: 0, reads: 0, readMs: 0, recordings: 0, replays: 0, aheadMs: 0, aheadDispatches: 0 };

/** Submits a finished command buffer, or finishes an encoder and submits it, timed into counters.submitMs. */
function submitTimed(d: GPUDevice, work: GPUCommandEncoder | GPUCommandBuffer): void {
  const t0 = performance.now();
  d.queue.submit(['finish' in work ? work.finish() : work]);
  counters.submitMs += performance.now() - t0;
}
/** Bind groups made once and reused, over the metadata arena (bind-groups.ts); made with the device. */
let groupCache: BindGroupCache<GPUBuffer, GPUBindGroupLayout, GPUBindGroup> | undefined;
/** Arenas replaced while a batch is applied: destroyed after its submit. */
const retired: GPUBuffer[] = [];
/** A command kept between 'record' and 'record-end': dispatches with their metadata words copied. */
type RecordedOp =
  | { readonly t: 'dispatch'; readonly pipeline: number; readonly ids: readonly number[]; readonly words: Uint32Array; readonly x: number; readonly y: number; readonly z: number }
  | { readonly t: 'copy'; readonly src: number; readonly srcOffset: number; readonly dst: number; readonly dstOffset: number; readonly size: number }
  | { readonly t: 'zero'; readonly id: number; readonly offset: number; readonly size: number };
/** The recording being made, if any. */
let building: { readonly id: number; readonly ops: RecordedOp[]; broken?: string } | undefined;
/** A recording ready to replay: pipelines and bind groups made, buffers resolved. */
type ReadyOp =
  | { readonly t: 'dispatch'; readonly p: GPUComputePipeline; readonly g: GPUBindGroup; readonly x: number; readonly y: number; readonly z: number }
  | { readonly t: 'copy'; readonly src: GPUBuffer; readonly srcOffset: number; readonly dst: GPUBuffer; readonly dstOffset: number; readonly size: number }
  | { readonly t: 'zero'; readonly b: GPUBuffer; readonly offset: number; readonly size: number };
interface Recording {
  readonly ops: readonly ReadyOp[];
  /** Its dispatches' metadata, one slot of the storage-offset alignment (or more) each. */
  readonly meta: GPUBuffer | undefined;
  readonly buffers: readonly number[];
  /** Set when a buffer it uses was destroyed: replaying it is a fault. */
  broken?: string;
}
const recordings = new Map<number, Recording>();
/** Recordings by the buffers they use (a destroyed buffer breaks them). */
const recordingsOf = new Map<number, Set<number>>();
/** Pipelines being created (createComputePipelineAsync) for 'pipeline' commands: a batch that dispatches one waits for it. */
const creating = new Map<number, Promise<void>>();
/** Timestamp slots for events (created on the first stamp; needs the timestamp-query feature). */
let stampSet: GPUQuerySet | undefined;

// Usage flags (the WebGPU constants; Dawn's globals are not installed on this thread's globalThis).
const MAP_READ = 0x0001;
const COPY_SRC = 0x0004;
const COPY_DST = 0x0008;
const STORAGE = 0x0080;
const QUERY_RESOLVE = 0x0200;

function answer(a: Answer, reply?: SharedArrayBuffer): void {
  if (reply) encodeAnswer(a, reply);
  else init.port!.postMessage(a);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

function drained(): DeviceFault[] {
  return faults.splice(0, faults.length);
}

function dev(): GPUDevice {
  if (!device) throw new Error('webgpu worker: no device (init failed or not called)');
  if (lostReason !== undefined) throw new Error(`the webgpu device was lost: ${lostReason}`);
  return device;
}

function buf(id: number): GPUBuffer {
  const b = buffers.get(id);
  if (!b) throw new Error(`webgpu worker: unknown buffer ${id}`);
  return b;
}

async function open(): Promise<AdapterReport> {
  // A browser's own WebGPU (navigator.gpu, in this worker), else Dawn for Node.
  const gpu = inNode ? ((await import('webgpu')) as unknown as DawnModule).create([...init.dawnOptions]) : (globalThis as unknown as { navigator: { gpu?: GPU } }).navigator.gpu;
  if (!gpu) throw new Error('this browser has no WebGPU (navigator.gpu is undefined in a worker)');
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error(inNode ? `Dawn found no adapter (options: ${init.dawnOptions.join(' ') || 'none'})` : 'navigator.gpu.requestAdapter() found no adapter');
  keep.push(gpu, adapter);
  const features = init.wantedFeatures.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
  // Ask for the adapter's own limits where Kiln needs large buffers and grids (the defaults are
  // 128 MiB bindings and 256 MiB buffers).
  const want = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupStorageSize'];
  const requiredLimits: Record<string, number> = {};
  for (const k of want) requiredLimits[k] = (adapter.limits as unknown as Record<string, number>)[k]!;
  const d = await adapter.requestDevice({ requiredFeatures: features, requiredLimits, label: 'kiln' });
  d.addEventListener('uncapturederror', (ev) => {
    const e = (ev as GPUUncapturedErrorEvent).error;
    const kind = e.constructor.name === 'GPUOutOfMemoryError' ? 'out-of-memory' : e.constructor.name === 'GPUInternalError' ? 'internal' : 'validation';
    faults.push({ kind, message: e.message });
  });
  void d.lost.then((info) => {
    lostReason = `${info.reason}: ${info.message}`;
    faults.push({ kind: 'lost', message: lostReason });
  });
  device = d;
  groupCache = new BindGroupCache(
    {
      createArena: (bytes) => d.createBuffer({ size: bytes, usage: STORAGE | COPY_DST, label: 'kiln meta arena' }),
      writeArena: (arena, offset, words) => d.queue.writeBuffer(arena, offset, words),
      retireArena: (arena) => retired.push(arena),
      createBindGroup: (layout, ids, arena, offset, bytes, label) => {
        const entries: GPUBindGroupEntry[] = ids.map((id, i) => ({ binding: i, resource: { buffer: buf(id) } }));
        entries.push({ binding: ids.length, resource: { buffer: arena, offset, size: bytes } });
        return d.createBindGroup({ layout, entries, label });
      },
    },
    d.limits.minStorageBufferOffsetAlignment,
  );
  const limits: Record<string, number> = {};
  for (const k of [...want, 'minStorageBufferOffsetAlignment', 'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupSizeZ']) limits[k] = (d.limits as unknown as Record<string, number>)[k]!;
  const info = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number; subgroupMatrixConfigs?: Iterable<SubgroupMatrixConfig> };
  // Dawn lists its subgroup matrix shapes on the adapter info (chromium-experimental-subgroup-matrix).
  const configs = features.includes('chromium-experimental-subgroup-matrix' as GPUFeatureName)
    ? [...(info.subgroupMatrixConfigs ?? [])].map((c) => ({ componentType: String(c.componentType), resultComponentType: String(c.resultComponentType), M: c.M, N: c.N, K: c.K }))
    : [];
  const backend = inNode ? (init.dawnOptions.find((o) => o.startsWith('backend='))?.slice(8) ?? 'default') : 'browser';
  return {
    backend,
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    features: [...d.features].sort(),
    limits,
    toggles: init.dawnOptions.filter((o) => !o.startsWith('backend=')),
    subgroupMinSize: info.subgroupMinSize ?? 0,
    subgroupMaxSize: info.subgroupMaxSize ?? 0,
    subgroupMatrixConfigs: configs,
  };
}

/**
 * Applies one batch: one encoder (split only around uploads), compute passes split only by copies
 * and clears. Dispatches are read straight from the packed numbers (protocol.ts: OP_DISPATCH), with
 * their bind groups from the cache.
 */
function applyBatch(ops: Float64Array, others: readonly WireCommand[], words: Uint32Array | undefined): void {
  const d = dev();
  const cache = groupCache!;
  const noWords = new Uint32Array(0);
  let enc = d.createCommandEncoder({ label: 'kiln batch' });
  let encoded = false;
  let pass: GPUComputePassEncoder | undefined;
  let passPipeline: GPUComputePipeline | undefined;
  const endPass = (): void => {
    pass?.end();
    pass = undefined;
  };
  const destroyed: number[] = [];
  for (let i = 0; i < ops.length; ) {
    if (ops[i] === OP_DISPATCH) {
      const pid = ops[i + 1]!;
      const n = ops[i + 7]!;
      const p = pipelines.get(pid);
      if (!p) throw new Error(`webgpu worker: unknown pipeline ${pid}`);
      let layout = layouts.get(pid);
      if (!layout) layouts.set(pid, (layout = p.getBindGroupLayout(0)));
      const w = words ?? noWords;
      const at = ops[i + 2]!;
      const len = ops[i + 3]!;
      const group = cache.groupFor(pid, layout, p.label, ops, i + 8, n, w, at, len);
      if (building) building.ops.push({ t: 'dispatch', pipeline: pid, ids: Array.from(ops.subarray(i + 8, i + 8 + n)), words: w.slice(at, at + len), x: ops[i + 4]!, y: ops[i + 5]!, z: ops[i + 6]! });
      if (!pass) {
        pass = enc.beginComputePass({ label: 'kiln pass' });
        passPipeline = undefined;
      }
      // Consecutive dispatches of one pipeline (a layer's GEMVs, elementwise chains) set it once.
      if (passPipeline !== p) pass.setPipeline(p);
      passPipeline = p;
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(ops[i + 4]!, ops[i + 5]!, ops[i + 6]!);
      encoded = true;
      i += 8 + n;
      continue;
    }
    const c = others[ops[i + 1]!]!;
    i += 2;
    switch (c.k) {
      case 'create':
        buffers.set(c.id, d.createBuffer({ size: c.size, usage: STORAGE | COPY_SRC | COPY_DST, label: `kiln buffer ${c.id}` }));
        break;
      case 'destroy':
        // After this batch's submit: a buffer this encoder uses must still exist when submitted
        // (and destroy() after a submit waits for the work that uses it).
        destroyed.push(c.id);
        if (building) building.broken ??= `buffer ${c.id} was destroyed while recording`;
        break;
      case 'write':
        // A replay would not upload the bytes again (the main thread knows it too: bridge.ts).
        if (building) building.broken ??= 'a host-to-device write while recording';
        // writeBuffer runs at its place in the queue: submit what this batch encoded before it.
        endPass();
        if (encoded) {
          submitTimed(d, enc);
          enc = d.createCommandEncoder({ label: 'kiln batch' });
          encoded = false;
        }
        d.queue.writeBuffer(buf(c.id), c.offset, c.data);
        break;
      case 'copy':
        endPass();
        enc.copyBufferToBuffer(buf(c.src), c.srcOffset, buf(c.dst), c.dstOffset, c.size);
        encoded = true;
        if (building) building.ops.push({ t: 'copy', src: c.src, srcOffset: c.srcOffset, dst: c.dst, dstOffset: c.dstOffset, size: c.size });
        break;
      case 'zero':
        endPass();
        enc.clearBuffer(buf(c.id), c.offset, c.size);
        encoded = true;
        if (building) building.ops.push({ t: 'zero', id: c.id, offset: c.offset, size: c.size });
        break;
      case 'record':
        if (building) throw new Error(`webgpu worker: recording ${c.id} started inside recording ${building.id}`);
        building = { id: c.id, ops: [] };
        break;
      case 'record-end': {
        const b = building;
        building = undefined;
        if (!b || b.id !== c.id) throw new Error(`webgpu worker: 'record-end' of ${c.id} without its 'record'`);
        if (c.keep && b.broken === undefined) {
          makeRecording(d, b.id, b.ops);
          counters.recordings++;
        }
        break;
      }
      case 'replay': {
        // Not kept by a recording being made (the bridge refuses that recording too).
        if (building) building.broken ??= 'a replay of another recording';
        const r = recordings.get(c.id);
        if (!r || r.broken !== undefined) {
          faults.push({ kind: 'validation', message: `webgpu: replaying recording ${c.id}: ${r ? r.broken! : 'no such recording'}` });
          break;
        }
        counters.replays++;
        // What this batch encoded before the replay runs before it.
        endPass();
        if (encoded) {
          submitTimed(d, enc);
          enc = d.createCommandEncoder({ label: 'kiln batch' });
          encoded = false;
        }
        let job = ahead.get(c.id);
        ahead.delete(c.id);
        const skip = c.skip ?? [];
        if (!job || job.submitEvery !== c.submitEvery || job.skip.join(',') !== skip.join(',')) job = new EncodeAhead(d, r, c.submitEvery, skip);
        else counters.aheadDispatches += job.dispatchesDone;
        // Finished command buffers are submitted one by one (the GPU starts on the first while
        // Dawn translates the next); what was not encoded ahead is encoded here.
        for (;;) {
          for (const cb of job.take()) submitTimed(d, cb);
          if (job.done) break;
          job.advance(c.submitEvery > 0 ? c.submitEvery : Infinity);
        }
        if (c.ahead) {
          ahead.set(c.id, new EncodeAhead(d, r, c.submitEvery, skip));
          scheduleAhead();
        }
        break;
      }
      case 'drop-recording': {
        const r = recordings.get(c.id);
        recordings.delete(c.id);
        ahead.delete(c.id);
        if (r?.meta) retired.push(r.meta);
        for (const id of r?.buffers ?? []) recordingsOf.get(id)?.delete(c.id);
        break;
      }
      case 'dispatch':
        throw new Error('webgpu worker: a dispatch sent as an object (dispatches travel as numbers)');
      case 'pipeline':
        // Started (and awaited where dispatched) before the batch was applied: startPipelines.
        break;
      case 'stamp': {
        endPass();
        stampSet ??= d.createQuerySet({ type: 'timestamp', count: STAMP_SLOTS, label: 'kiln events' });
        enc.beginComputePass({ label: 'kiln event', timestampWrites: { querySet: stampSet, beginningOfPassWriteIndex: c.slot } }).end();
        encoded = true;
        break;
      }
      default:
        throw new Error(`webgpu worker: unknown command ${(c satisfies never as { k: string }).k}`);
    }
  }
  endPass();
  submitTimed(d, enc);
  for (const a of retired.splice(0)) a.destroy();
  for (const id of destroyed) {
    cache.dropBuffer(id);
    for (const r of recordingsOf.get(id) ?? []) {
      const rec = recordings.get(r);
      if (rec) rec.broken ??= `buffer ${id}, which it uses, was destroyed`;
      // Its commands encoded ahead name the buffer: never submitted.
      ahead.delete(r);
    }
    recordingsOf.delete(id);
    buffers.get(id)?.destroy();
    buffers.delete(id);
  }
}

/**
 * A recording's next replay encoded ahead (KILN_WEBGPU_ENCODE_AHEAD, issue #20). WebGPU command
 * buffers are single-use, so a replay must encode its ~260 dispatches again each step; on the
 * H200's host that cost the device thread about 2.5-2.9 ms of a 3 ms batch-1 decode step, while
 * the thread idles during the step's GPU tail and the host's sampling. This encodes the next
 * replay in slices of AHEAD_SLICE dispatches in those idle turns (a read or a batch arriving waits at
 * most one slice), into command buffers finished every `submitEvery` dispatches; the replay then
 * submits them and encodes only what is left. A command buffer may be submitted any time after it
 * is finished, so the order of work is the order of submits, as before. Buffers it names are kept
 * alive by the recording; a destroyed one drops the job (the recording is broken then too).
 */
class EncodeAhead {
  private i = 0;
  private n = 0;
  private enc: GPUCommandEncoder | undefined;
  private pass: GPUComputePassEncoder | undefined;
  private pipeline: GPUComputePipeline | undefined;
  private readonly finished: GPUCommandBuffer[] = [];
  done = false;

  constructor(
    private readonly d: GPUDevice,
    private readonly r: Recording,
    readonly submitEvery: number,
    /** KILN_WEBGPU_REPLAY_SKIP (measurement only): dispatches whose pipeline label contains one of these are left out. */
    readonly skip: readonly string[] = [],
  ) {}

  /** Dispatches encoded so far. */
  get dispatchesDone(): number {
    return this.n;
  }

  /** Command buffers finished so far (each once). */
  take(): GPUCommandBuffer[] {
    return this.finished.splice(0);
  }

  /** Encodes up to `budget` more dispatches (and the copies and clears between them). */
  advance(budget: number): void {
    const ops = this.r.ops;
    let spent = 0;
    while (this.i < ops.length && spent < budget) {
      const o = ops[this.i]!;
      this.enc ??= this.d.createCommandEncoder({ label: 'kiln replay' });
      if (o.t === 'dispatch') {
        this.n++;
        spent++;
        if (this.skip.length > 0 && this.skip.some((k) => o.p.label.includes(k))) {
          this.i++;
          continue;
        }
        if (!this.pass) {
          this.pass = this.enc.beginComputePass({ label: 'kiln pass' });
          this.pipeline = undefined;
        }
        if (this.pipeline !== o.p) this.pass.setPipeline(o.p);
        this.pipeline = o.p;
        this.pass.setBindGroup(0, o.g);
        this.pass.dispatchWorkgroups(o.x, o.y, o.z);
        // A command buffer every submitEvery dispatches, so the GPU can start on it.
        if (this.submitEvery > 0 && this.n % this.submitEvery === 0) this.finish();
      } else {
        this.pass?.end();
        this.pass = undefined;
        if (o.t === 'copy') this.enc.copyBufferToBuffer(o.src, o.srcOffset, o.dst, o.dstOffset, o.size);
        else this.enc.clearBuffer(o.b, o.offset, o.size);
      }
      this.i++;
    }
    if (this.i >= ops.length && !this.done) {
      this.finish();
      this.done = true;
    }
  }

  private finish(): void {
    this.pass?.end();
    this.pass = undefined;
    if (this.enc) this.finished.push(this.enc.finish());
    this.enc = undefined;
  }
}

/** Dispatches encoded ahead per idle turn: small, so a read's answer or a new batch waits little. */
const AHEAD_SLICE = 16;
/** Recordings whose next replay is being encoded ahead. */
const ahead = new Map<number, EncodeAhead>();
let aheadScheduled = false;
/** Runs one slice of encoding ahead on a later turn, and again until every job is done. */
function scheduleAhead(): void {
  if (aheadScheduled) return;
  aheadScheduled = true;
  const later = typeof setImmediate === 'function' ? setImmediate : (f: () => void) => setTimeout(f, 0);
  later(() => {
    aheadScheduled = false;
    const job = pendingAhead();
    if (!job || lostReason !== undefined) return;
    const t0 = performance.now();
    try {
      job.advance(AHEAD_SLICE);
    } catch (e) {
      // Encoding ahead is an optimisation: a failure drops the job, and the replay encodes inline
      // (where a real fault is reported).
      for (const [id, j] of ahead) if (j === job) ahead.delete(id);
      void e;
    }
    counters.aheadMs += performance.now() - t0;
    if (pendingAhead()) scheduleAhead();
  });
}

/** A job still being encoded ahead, if any. */
function pendingAhead(): EncodeAhead | undefined {
  for (const j of ahead.values()) if (!j.done) return j;
  return undefined;
}

/**
 * Makes recording `id` from the commands kept while recording: one metadata buffer holding every
 * dispatch's words (a slot of the storage-offset alignment or more each), a bind group per
 * dispatch over it, and the buffers resolved, so a replay is only setPipeline, setBindGroup and
 * dispatchWorkgroups per dispatch.
 */
function makeRecording(d: GPUDevice, id: number, ops: readonly RecordedOp[]): void {
  const align = d.limits.minStorageBufferOffsetAlignment;
  const slotBytes = (o: RecordedOp): number => (o.t === 'dispatch' ? Math.max(1, Math.ceil((o.words.length * 4) / align)) * align : 0);
  let total = 0;
  for (const o of ops) total += slotBytes(o);
  let meta: GPUBuffer | undefined;
  if (total > 0) {
    meta = d.createBuffer({ size: total, usage: STORAGE | COPY_DST, label: `kiln recording ${id} meta` });
    const staged = new Uint32Array(total / 4);
    let at = 0;
    for (const o of ops) {
      if (o.t !== 'dispatch') continue;
      staged.set(o.words, at / 4);
      at += slotBytes(o);
    }
    d.queue.writeBuffer(meta, 0, staged);
  }
  const used = new Set<number>();
  const ready: ReadyOp[] = [];
  let at = 0;
  for (const o of ops) {
    if (o.t === 'dispatch') {
      const p = pipelines.get(o.pipeline);
      if (!p) throw new Error(`webgpu worker: unknown pipeline ${o.pipeline} in recording ${id}`);
      let layout = layouts.get(o.pipeline);
      if (!layout) layouts.set(o.pipeline, (layout = p.getBindGroupLayout(0)));
      const entries: GPUBindGroupEntry[] = o.ids.map((b, i) => ({ binding: i, resource: { buffer: buf(b) } }));
      const bytes = slotBytes(o);
      entries.push({ binding: o.ids.length, resource: { buffer: meta!, offset: at, size: bytes } });
      at += bytes;
      for (const b of o.ids) used.add(b);
      ready.push({ t: 'dispatch', p, g: d.createBindGroup({ layout, entries, label: p.label }), x: o.x, y: o.y, z: o.z });
    } else if (o.t === 'copy') {
      used.add(o.src).add(o.dst);
      ready.push({ t: 'copy', src: buf(o.src), srcOffset: o.srcOffset, dst: buf(o.dst), dstOffset: o.dstOffset, size: o.size });
    } else {
      used.add(o.id);
      ready.push({ t: 'zero', b: buf(o.id), offset: o.offset, size: o.size });
    }
  }
  const buffers = [...used];
  recordings.set(id, { ops: ready, meta, buffers });
  for (const b of buffers) {
    const s = recordingsOf.get(b);
    if (s) s.add(id);
    else recordingsOf.set(b, new Set([id]));
  }
}

/**
 * Creates pipeline `id` from WGSL with createComputePipelineAsync (the driver compiles off this
 * thread's queue; several run at once). Resolves to null, or to Dawn's error with the compiler's
 * messages and the offending lines.
 */
async function compile(c: { readonly id: number; readonly source: string; readonly label: string }): Promise<string | null> {
  const d = dev();
  d.pushErrorScope('validation');
  const module = d.createShaderModule({ code: c.source, label: c.label });
  let failed: string | undefined;
  try {
    pipelines.set(c.id, await d.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: c.label }));
  } catch (e) {
    failed = (e as Error).message;
  }
  const err = await d.popErrorScope();
  if (!err && failed === undefined) return null;
  pipelines.delete(c.id);
  const info = await module.getCompilationInfo();
  const lines = c.source.split('\n');
  const notes = info.messages.map((m) => `  ${m.type} at line ${m.lineNum}:${m.linePos}: ${m.message}\n    ${lines[m.lineNum - 1] ?? ''}`);
  return `${(err?.message ?? failed!).trim()}${notes.length > 0 ? `\n${notes.join('\n')}` : ''}`;
}

/**
 * Starts the batch's 'pipeline' commands and waits for the pipelines its dispatches use. A
 * pipeline that does not compile is a fault (reported with the next answer); its dispatches fail.
 */
async function startPipelines(ops: Float64Array, others: readonly WireCommand[]): Promise<void> {
  for (const c of others) {
    if (c.k !== 'pipeline' || creating.has(c.id)) continue;
    creating.set(
      c.id,
      compile(c).then(
        (error) => {
          creating.delete(c.id);
          if (error !== null) faults.push({ kind: 'validation', message: `webgpu: the WGSL kernel '${c.label}' does not compile:\n${error}` });
        },
        (e: Error) => {
          creating.delete(c.id);
          faults.push({ kind: 'validation', message: `webgpu: creating the pipeline of '${c.label}': ${e.message}` });
        },
      ),
    );
  }
  if (creating.size === 0) return;
  const wait = new Set<Promise<void>>();
  for (let i = 0; i < ops.length; ) {
    if (ops[i] !== OP_DISPATCH) {
      i += 2;
      continue;
    }
    const p = creating.get(ops[i + 1]!);
    if (p) wait.add(p);
    i += 8 + ops[i + 7]!;
  }
  if (wait.size > 0) await Promise.all(wait);
}

/** Reads of at most this many bytes (a sampled token id, a flag) reuse one staging buffer. */
const SMALL_READ = 4096;
/**
 * The small reads' staging buffer and the device it belongs to: creating and destroying a
 * MAP_READ buffer per read was part of a decode step's per-token read (issue #20). Reads run one
 * at a time on the message chain, so it is always unmapped when the next read takes it.
 */
let staging: { d: GPUDevice; b: GPUBuffer } | undefined;

async function read(c: Extract<Call, { k: 'read' }>): Promise<ArrayBuffer> {
  const d = dev();
  const start = c.offset & ~3;
  const end = (c.offset + c.size + 3) & ~3;
  const size = Math.max(4, end - start);
  const pooled = size <= SMALL_READ;
  if (pooled && staging?.d !== d) staging = { d, b: d.createBuffer({ size: SMALL_READ, usage: MAP_READ | COPY_DST, label: 'kiln readback (small)' }) };
  const s = pooled ? staging!.b : d.createBuffer({ size, usage: MAP_READ | COPY_DST, label: 'kiln readback' });
  const enc = d.createCommandEncoder({ label: 'kiln readback' });
  if (end > start) enc.copyBufferToBuffer(buf(c.id), start, s, 0, end - start);
  d.queue.submit([enc.finish()]);
  const t0 = performance.now();
  await s.mapAsync(MAP_READ, 0, size);
  counters.reads++;
  counters.readMs += performance.now() - t0;
  const out = s.getMappedRange(0, size).slice(c.offset - start, c.offset - start + c.size);
  s.unmap();
  if (!pooled) s.destroy();
  return out;
}

/** Resolves timestamp slots to nanoseconds (a slot never stamped reads 0). */
async function stamps(c: Extract<Call, { k: 'stamps' }>): Promise<ArrayBuffer> {
  const d = dev();
  const n = c.slots.length;
  const out = new Float64Array(n);
  if (!stampSet || n === 0) return out.buffer;
  // resolveQuerySet writes at 256-byte aligned offsets: one slot per 256 bytes, then packed for the read.
  const resolved = d.createBuffer({ size: n * 256, usage: QUERY_RESOLVE | COPY_SRC, label: 'kiln stamps' });
  const s = d.createBuffer({ size: n * 8, usage: MAP_READ | COPY_DST, label: 'kiln stamps readback' });
  const enc = d.createCommandEncoder({ label: 'kiln stamps' });
  c.slots.forEach((slot, i) => {
    enc.resolveQuerySet(stampSet!, slot, 1, resolved, i * 256);
    enc.copyBufferToBuffer(resolved, i * 256, s, i * 8, 8);
  });
  d.queue.submit([enc.finish()]);
  await s.mapAsync(MAP_READ);
  const ns = new BigUint64Array(s.getMappedRange().slice(0));
  s.unmap();
  s.destroy();
  resolved.destroy();
  ns.forEach((v, i) => (out[i] = Number(v)));
  return out.buffer;
}

async function handleCall(call: Call): Promise<Answer> {
  switch (call.k) {
    case 'init':
      return { ok: true, faults: drained(), adapter: await open() };
    case 'compile': {
      const error = await compile(call);
      return error === null ? { ok: true, faults: drained() } : { ok: false, faults: drained(), error };
    }
    case 'read': {
      const data = await read(call);
      return { ok: true, faults: drained(), data };
    }
    case 'sync':
      await dev().queue.onSubmittedWorkDone();
      return { ok: true, faults: drained() };
    case 'stamps': {
      const data = await stamps(call);
      return { ok: true, faults: drained(), data };
    }
    case 'stats':
      return { ok: true, faults: drained(), stats: { ...counters, ...(groupCache?.stats ?? {}), groupsHeld: groupCache?.size ?? 0 } };
    case 'lose': {
      const d = dev();
      d.destroy();
      // device.lost resolves on a later turn; answer once it has reported.
      await d.lost;
      return { ok: true, faults: [] };
    }
    default:
      throw new Error(`webgpu worker: unknown call ${(call satisfies never as { k: string }).k}`);
  }
}

let chain: Promise<void> = Promise.resolve();
/** A batch that threw: reported with the next answer (the main thread is not waiting for batches). */
function onMessage(m: ToWorker): void {
  const arrived = performance.now();
  chain = chain.then(async () => {
    if (m.t === 'start') {
      init = m.init;
      flag = new Int32Array(init.flag);
      return;
    }
    if (m.t === 'batch') {
      try {
        await startPipelines(m.ops, m.others);
        const t0 = performance.now();
        counters.queuedMs += t0 - arrived;
        applyBatch(m.ops, m.others, m.meta);
        counters.batches++;
        counters.applyMs += performance.now() - t0;
      } catch (e) {
        // After a loss every batch fails; the loss itself is the one fault to report.
        if (lostReason !== undefined) return;
        faults.push({ kind: 'validation', message: `applying a batch of ${decodeBatch(m.ops, m.others).length} commands: ${(e as Error).message}` });
      }
      return;
    }
    try {
      const a = await handleCall(m.call);
      const data = a.ok ? a.data : undefined;
      if (data && !m.reply) {
        init.port!.postMessage(a, [data]);
        Atomics.store(flag, 0, 1);
        Atomics.notify(flag, 0);
      } else answer(a, m.reply);
    } catch (e) {
      answer({ ok: false, faults: drained(), error: (e as Error).message }, m.reply);
    }
  });
}
if (inNode) workerThreads.parentPort!.on('message', onMessage);
else (globalThis as unknown as { onmessage: (ev: { data: ToWorker }) => void }).onmessage = (ev) => onMessage(ev.data);
