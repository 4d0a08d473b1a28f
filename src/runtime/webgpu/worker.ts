/// <reference types="@webgpu/types" />
/**
 * The thread that owns the Dawn device (see protocol.ts for why it is a thread). It applies
 * batches in order (one command encoder per batch, split around uploads; one compute pass across consecutive
 * dispatches, whose barriers Dawn inserts), answers calls after earlier work, and collects every
 * uncaptured error and the device's loss, to hand them to the main thread with the next answer.
 * Messages are handled one at a time on a promise chain, since a read's mapAsync must not let a
 * later batch overtake it. Pipelines are created with createComputePipelineAsync: a 'compile' call
 * answers when its pipeline is ready; 'pipeline' commands (sources known good, from the disk cache)
 * start at once, several together, and only a batch that dispatches one waits for it.
 */
import { inNode, workerThreads } from '../../platform/index.js';
import { decodeBatch, encodeAnswer, STAMP_SLOTS, type AdapterReport, type Answer, type Call, type DeviceFault, type SubgroupMatrixConfig, type ToWorker, type WireCommand, type WorkerInit } from './protocol.js';

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

/** Applies one batch: one encoder (split only around uploads), compute passes split only by copies and clears. */
function applyBatch(cmds: readonly WireCommand[], words: Uint32Array | undefined): void {
  const d = dev();
  // The dispatches' metadata, packed by the bridge in slots of the storage-offset alignment.
  let meta: GPUBuffer | undefined;
  if (words && words.length > 0) {
    meta = d.createBuffer({ size: words.length * 4, usage: STORAGE | COPY_DST, label: 'kiln meta' });
    d.queue.writeBuffer(meta, 0, words);
  }
  let enc = d.createCommandEncoder({ label: 'kiln batch' });
  let encoded = false;
  let pass: GPUComputePassEncoder | undefined;
  let passPipeline: GPUComputePipeline | undefined;
  const endPass = (): void => {
    pass?.end();
    pass = undefined;
  };
  const destroyed: number[] = [];
  for (const c of cmds) {
    switch (c.k) {
      case 'create':
        buffers.set(c.id, d.createBuffer({ size: c.size, usage: STORAGE | COPY_SRC | COPY_DST, label: `kiln buffer ${c.id}` }));
        break;
      case 'destroy':
        // After this batch's submit: a buffer this encoder uses must still exist when submitted
        // (and destroy() after a submit waits for the work that uses it).
        destroyed.push(c.id);
        break;
      case 'write':
        // writeBuffer runs at its place in the queue: submit what this batch encoded before it.
        endPass();
        if (encoded) {
          d.queue.submit([enc.finish()]);
          enc = d.createCommandEncoder({ label: 'kiln batch' });
          encoded = false;
        }
        d.queue.writeBuffer(buf(c.id), c.offset, c.data);
        break;
      case 'copy':
        endPass();
        enc.copyBufferToBuffer(buf(c.src), c.srcOffset, buf(c.dst), c.dstOffset, c.size);
        encoded = true;
        break;
      case 'zero':
        endPass();
        enc.clearBuffer(buf(c.id), c.offset, c.size);
        encoded = true;
        break;
      case 'dispatch': {
        const p = pipelines.get(c.pipeline);
        if (!p) throw new Error(`webgpu worker: unknown pipeline ${c.pipeline}`);
        const entries: GPUBindGroupEntry[] = c.buffers.map((id, i) => ({ binding: i, resource: { buffer: buf(id) } }));
        entries.push({ binding: c.buffers.length, resource: { buffer: meta!, offset: c.metaAt * 4, size: c.metaSize * 4 } });
        let layout = layouts.get(c.pipeline);
        if (!layout) layouts.set(c.pipeline, (layout = p.getBindGroupLayout(0)));
        const group = d.createBindGroup({ layout, entries, label: p.label });
        if (!pass) {
          pass = enc.beginComputePass({ label: 'kiln pass' });
          passPipeline = undefined;
        }
        // Consecutive dispatches of one pipeline (a layer's GEMVs, elementwise chains) set it once.
        if (passPipeline !== p) pass.setPipeline(p);
        passPipeline = p;
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(c.groups[0], c.groups[1], c.groups[2]);
        encoded = true;
        break;
      }
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
  d.queue.submit([enc.finish()]);
  meta?.destroy();
  for (const id of destroyed) {
    buffers.get(id)?.destroy();
    buffers.delete(id);
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
async function startPipelines(cmds: readonly WireCommand[]): Promise<void> {
  for (const c of cmds) {
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
  const wait = new Set<Promise<void>>();
  for (const c of cmds) {
    const p = c.k === 'dispatch' ? creating.get(c.pipeline) : undefined;
    if (p) wait.add(p);
  }
  if (wait.size > 0) await Promise.all(wait);
}

async function read(c: Extract<Call, { k: 'read' }>): Promise<ArrayBuffer> {
  const d = dev();
  const start = c.offset & ~3;
  const end = (c.offset + c.size + 3) & ~3;
  const s = d.createBuffer({ size: Math.max(4, end - start), usage: MAP_READ | COPY_DST, label: 'kiln readback' });
  const enc = d.createCommandEncoder({ label: 'kiln readback' });
  if (end > start) enc.copyBufferToBuffer(buf(c.id), start, s, 0, end - start);
  d.queue.submit([enc.finish()]);
  await s.mapAsync(MAP_READ);
  const out = s.getMappedRange().slice(c.offset - start, c.offset - start + c.size);
  s.unmap();
  s.destroy();
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
  chain = chain.then(async () => {
    if (m.t === 'start') {
      init = m.init;
      flag = new Int32Array(init.flag);
      return;
    }
    if (m.t === 'batch') {
      const cmds = decodeBatch(m.ops, m.others);
      try {
        await startPipelines(cmds);
        applyBatch(cmds, m.meta);
      } catch (e) {
        // After a loss every batch fails; the loss itself is the one fault to report.
        if (lostReason !== undefined) return;
        faults.push({ kind: 'validation', message: `applying a batch of ${cmds.length} commands: ${(e as Error).message}` });
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
