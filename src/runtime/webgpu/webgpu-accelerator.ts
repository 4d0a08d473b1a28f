/**
 * The `webgpu` accelerator (Dawn for Node, the `webgpu` package), one device: webgpu:0. The Dawn
 * device lives on a worker thread (protocol.ts says why); this object is its main-thread face:
 * a caching allocator over numbered GPU buffers (shared size classes), copies, one queue (so one
 * stream), events timed by device timestamps (timestamp-query; host-timed without it), and kernels as compute pipelines that are
 * compiled synchronously (cached by source, so a WGSL error is thrown where the op was called,
 * with Dawn's message and the offending line) and dispatched in batches. Sources known to compile
 * (a compiled program's, from the disk cache) are created asynchronously instead (kernelAsync).
 *
 * Alignment: WebGPU copies move whole 4-byte words. Writes and copies that start or end inside a
 * word that holds live bytes are done read-modify-write through the host (rare: unaligned views of
 * 1- and 2-byte dtypes); everything else is one command.
 */
import type { Accelerator, DeviceBuffer, DeviceEvent, DeviceProperties, DeviceStream, KernelModule } from '../accelerator.js';
import { CachingAllocator } from '../caching-allocator.js';
import { getOption } from '../config.js';
import { STAMP_SLOTS, type Answer, type Call, type Command, type DeviceFault } from './protocol.js';
import { Bridge } from './bridge.js';
import { dawnOptions, WANTED_FEATURES } from './dawn-options.js';
import { faultError, WebgpuError } from './errors.js';

/** A buffer's handle: the worker's number for it. */
export interface WebgpuHandle {
  readonly id: number;
}

/** A compute pipeline: entry point `main`, storage buffers at bindings 0..n-1, metadata words at n. */
export interface WebgpuKernel extends KernelModule {
  readonly id: number;
  readonly source: string;
}

/** launchKernel's launch record on webgpu. */
export interface WebgpuLaunch {
  readonly meta: Uint32Array;
  readonly groups: readonly [number, number, number];
}

export const bufferId = (b: DeviceBuffer): number => (b.handle as WebgpuHandle).id;

class WebgpuStream implements DeviceStream {
  readonly deviceType = 'webgpu' as const;
  readonly deviceIndex = 0;
  constructor(private readonly acc: WebgpuAccelerator) {}
  synchronize(): void {
    this.acc.synchronize(0);
  }
  query(): boolean {
    // Nothing cheaper than a drain answers it exactly; a drained queue is idle.
    this.acc.synchronize(0);
    return true;
  }
}

/**
 * Device-timed where the device has `timestamp-query` (Kiln's Dawn toggles turn off timestamp
 * quantisation, so stamps are nanoseconds): record() queues a timestamp after the work queued
 * before it, without waiting, and elapsedTime resolves the two stamps on the device. Without the
 * feature (or with timing off) record() drains the queue and stamps the host clock, so
 * elapsedTime includes one round trip to the device thread.
 */
class WebgpuEvent implements DeviceEvent {
  private stamp: number | undefined;
  /** The timestamp slot and the record's serial number (device-timed events). */
  private slot: { slot: number; serial: number } | undefined;
  constructor(
    private readonly acc: WebgpuAccelerator,
    private readonly timing: boolean,
  ) {}
  private get deviceTimed(): boolean {
    return this.timing && this.acc.deviceTimestamps;
  }
  record(): void {
    if (this.deviceTimed) {
      this.slot = this.acc.recordStamp();
      return;
    }
    this.acc.synchronize(0);
    this.stamp = performance.now();
  }
  synchronize(): void {
    this.acc.synchronize(0);
  }
  query(): boolean {
    // Nothing cheaper than a drain answers it exactly; a drained queue is idle.
    this.acc.synchronize(0);
    return true;
  }
  elapsedTime(end: DeviceEvent): number {
    if (!(end instanceof WebgpuEvent)) throw new Error('Event.elapsedTime: both events must be webgpu events');
    if (!this.timing || !end.timing) throw new Error('Event.elapsedTime: both events must be created with enableTiming: true');
    if (this.slot && end.slot) {
      const [t0, t1] = this.acc.readStamps([this.slot, end.slot]);
      // Stamps of one queue are monotonic; an end recorded before the start (or a stamp the device
      // left undefined) reads as 0 rather than a negative time.
      return Math.max(0, (t1! - t0!) / 1e6);
    }
    if (this.stamp === undefined || end.stamp === undefined) throw new Error('Event.elapsedTime: both events must be recorded before measuring');
    return end.stamp - this.stamp;
  }
}

export class WebgpuAccelerator implements Accelerator {
  readonly type = 'webgpu' as const;
  readonly bridge: Bridge;
  private nextBuffer = 1;
  private nextPipeline = 1;
  private readonly kernels = new Map<string, WebgpuKernel>();
  private readonly alloc: CachingAllocator;
  private readonly stream: WebgpuStream;
  private readonly maxBufferSize: number;

  constructor(bridge?: Bridge) {
    this.bridge = bridge ?? new Bridge(dawnOptions(), WANTED_FEATURES);
    this.maxBufferSize = this.bridge.adapter.limits.maxBufferSize ?? 2 ** 28;
    this.alloc = new CachingAllocator('webgpu', 0, {
      alloc: (capacity) => {
        // WebGPU reports out-of-memory later; what is known now is checked now.
        if (capacity > this.maxBufferSize) throw new WebgpuError(`a buffer of ${capacity} bytes exceeds the device's maxBufferSize (${this.maxBufferSize})`, 'out-of-memory');
        const id = this.nextBuffer++;
        this.bridge.enqueue({ k: 'create', id, size: capacity });
        return { id } satisfies WebgpuHandle;
      },
      free: (h) => this.bridge.enqueue({ k: 'destroy', id: (h as WebgpuHandle).id }),
      zero: (h, n) => this.bridge.enqueue({ k: 'zero', id: (h as WebgpuHandle).id, offset: 0, size: n }),
    });
    this.stream = new WebgpuStream(this);
  }

  /** Whether the device has a feature (shader-f16, subgroups, timestamp-query, ...). */
  hasFeature(name: string): boolean {
    return this.bridge.adapter.features.includes(name);
  }

  /**
   * Events are timed on the device: the adapter has `timestamp-query` and KILN_WEBGPU_TIMESTAMPS is
   * not 0. Without, events are host-timed and the WGSL autotuner keeps default configs.
   */
  get deviceTimestamps(): boolean {
    return this.hasFeature('timestamp-query') && getOption('KILN_WEBGPU_TIMESTAMPS');
  }

  /** Dawn's backend is the null one: shaders validate, nothing computes. */
  get computesNothing(): boolean {
    return this.bridge.adapter.backend === 'null';
  }

  deviceCount(): number {
    return 1;
  }

  private check(index: number): void {
    if (index !== 0) throw new Error(`webgpu: device index ${index} does not exist (only webgpu:0 in this build)`);
  }

  properties(index: number): DeviceProperties {
    this.check(index);
    const a = this.bridge.adapter;
    const props: DeviceProperties = {
      name: a.description || a.device || `${a.vendor} ${a.architecture}`.trim() || 'webgpu adapter',
      backend: a.backend,
      vendor: a.vendor,
      architecture: a.architecture,
      features: a.features,
      toggles: a.toggles,
      subgroupMinSize: a.subgroupMinSize ?? 0,
      subgroupMaxSize: a.subgroupMaxSize ?? 0,
      subgroupMatrixConfigs: (a.subgroupMatrixConfigs ?? []).map((c) => `${c.componentType}x${c.componentType}->${c.resultComponentType} ${c.M}x${c.N}x${c.K}`),
    };
    for (const [k, v] of Object.entries(a.limits)) props[k] = v;
    return props;
  }

  allocator(index: number): CachingAllocator {
    this.check(index);
    return this.alloc;
  }

  /** Set once the device is lost: every later call fails with the same error (nothing on it survives). */
  private lost: DeviceFault | undefined;

  /**
   * Makes a call and turns faults the device reported since the last one into an error. A loss
   * comes first (the validation errors that accompany it are its consequences) and is sticky.
   */
  private call(c: Call, doing: string): Answer {
    if (this.lost) throw faultError([this.lost], doing, this.alloc.stats());
    const a = this.bridge.call(c, doing);
    if (a.faults.length > 0) {
      const lost = a.faults.find((f) => f.kind === 'lost');
      if (lost) this.lost = lost;
      throw faultError(lost ? [lost, ...a.faults.filter((f) => f !== lost)] : a.faults, doing, this.alloc.stats());
    }
    return a;
  }

  /** The device thread's counters: bind groups made and reused, metadata arena writes and resets (bind-groups.ts). */
  deviceThreadStats(): Readonly<Record<string, number>> {
    const a = this.call({ k: 'stats' }, 'reading the webgpu device thread counters');
    return (a.ok ? a.stats : undefined) ?? {};
  }

  /** Destroys the Dawn device, as a driver reset would lose it (tests of the device-lost path). */
  loseDeviceForTesting(): void {
    this.bridge.call({ k: 'lose' }, 'destroying the webgpu device (test)');
  }

  private enqueue(cmd: Command, transfer?: ArrayBuffer): void {
    this.bridge.enqueue(cmd, transfer);
  }

  private readBytes(src: DeviceBuffer, offset: number, size: number): Uint8Array {
    const a = this.call({ k: 'read', id: bufferId(src), offset, size }, `reading ${size} bytes from webgpu buffer ${bufferId(src)}`);
    if (!a.ok) throw new WebgpuError(`reading ${size} bytes from a webgpu buffer failed: ${a.error}`, 'validation');
    return new Uint8Array(a.data!);
  }

  copyHostToDevice(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array): void {
    const n = src.byteLength;
    if (n === 0) return;
    const start = dstByteOffset & ~3;
    const end = (dstByteOffset + n + 3) & ~3;
    // A partial first or last word is merged with the device's bytes, unless they are padding.
    const headLive = start < dstByteOffset;
    const tailLive = end > dstByteOffset + n && dstByteOffset + n < dst.nbytes;
    const data = new Uint8Array(end - start);
    if (headLive || tailLive) data.set(this.readBytes(dst, start, end - start));
    data.set(src, dstByteOffset - start);
    this.enqueue({ k: 'write', id: bufferId(dst), offset: start, data }, data.buffer as ArrayBuffer);
  }

  copyDeviceToHost(dst: Uint8Array, src: DeviceBuffer, srcByteOffset: number): void {
    if (dst.byteLength === 0) return;
    dst.set(this.readBytes(src, srcByteOffset, dst.byteLength));
  }

  copyDeviceToDevice(dst: DeviceBuffer, dstByteOffset: number, src: DeviceBuffer, srcByteOffset: number, nbytes: number): void {
    if (nbytes === 0) return;
    const aligned = dstByteOffset % 4 === 0 && srcByteOffset % 4 === 0;
    const padded = (nbytes + 3) & ~3;
    const fits = nbytes % 4 === 0 || (dstByteOffset + nbytes >= dst.nbytes && srcByteOffset + padded <= src.capacity && dstByteOffset + padded <= dst.capacity);
    if (aligned && fits) {
      this.enqueue({ k: 'copy', src: bufferId(src), srcOffset: srcByteOffset, dst: bufferId(dst), dstOffset: dstByteOffset, size: padded });
      return;
    }
    this.copyHostToDevice(dst, dstByteOffset, this.readBytes(src, srcByteOffset, nbytes));
  }

  defaultStream(index: number): DeviceStream {
    this.check(index);
    return this.stream;
  }

  createStream(index: number): DeviceStream {
    // One queue per device in WebGPU: every stream is the queue.
    this.check(index);
    return this.stream;
  }

  createEvent(index: number, options: { enableTiming: boolean }): DeviceEvent {
    this.check(index);
    return new WebgpuEvent(this, options.enableTiming);
  }

  synchronize(index: number): void {
    this.check(index);
    const a = this.call({ k: 'sync' }, 'synchronizing webgpu:0');
    if (!a.ok) throw new WebgpuError(`synchronizing webgpu:0 failed: ${a.error}`, 'worker');
  }

  private stampSerial = 0;

  /** Queues a device timestamp (an Event's record) and returns its slot in the worker's ring. */
  recordStamp(): { slot: number; serial: number } {
    const serial = this.stampSerial++;
    const slot = serial % STAMP_SLOTS;
    this.enqueue({ k: 'stamp', slot });
    return { slot, serial };
  }

  /** The stamps of recorded slots, in nanoseconds (waits for the work before them). */
  readStamps(stamps: readonly { slot: number; serial: number }[]): number[] {
    for (const s of stamps) {
      if (this.stampSerial - s.serial > STAMP_SLOTS) throw new Error(`Event.elapsedTime: the webgpu event's timestamp was overwritten (${STAMP_SLOTS} events were recorded after it); measure sooner after recording`);
    }
    const a = this.call({ k: 'stamps', slots: stamps.map((s) => s.slot) }, 'reading webgpu event timestamps');
    if (!a.ok) throw new WebgpuError(`reading webgpu event timestamps failed: ${a.error}`, 'validation');
    return [...new Float64Array(a.data!)];
  }

  /** The pipeline for a WGSL source, compiled on first use (a WGSL error throws here, named by `label`). */
  kernel(source: string, label: string): WebgpuKernel {
    let k = this.kernels.get(source);
    if (k) return k;
    const id = this.nextPipeline++;
    const a = this.call({ k: 'compile', id, source, label }, `compiling the WGSL kernel '${label}'`);
    if (!a.ok) throw new WebgpuError(`webgpu: the WGSL kernel '${label}' does not compile:\n${a.error}`, 'compile');
    this.pipelineStats.compiled++;
    k = { name: label, id, source };
    this.kernels.set(source, k);
    return k;
  }

  /**
   * The pipeline for a WGSL source known to compile (stored by an earlier process, which compiled
   * it): created asynchronously on the device thread, without waiting here; the first dispatch of
   * it waits there. Should it fail after all, the error comes with the next call's faults. Cached
   * by source, shared with kernel().
   */
  kernelAsync(source: string, label: string): WebgpuKernel {
    let k = this.kernels.get(source);
    if (k) return k;
    const id = this.nextPipeline++;
    this.enqueue({ k: 'pipeline', id, source, label });
    this.pipelineStats.async++;
    k = { name: label, id, source };
    this.kernels.set(source, k);
    return k;
  }

  /** Pipelines created: by kernel() (waited for) and by kernelAsync() (not waited for). */
  readonly pipelineStats = { compiled: 0, async: 0 };

  compileKernel(index: number, source: string, options: Record<string, unknown>): Promise<KernelModule> {
    this.check(index);
    try {
      return Promise.resolve(this.kernel(source, typeof options.name === 'string' ? options.name : 'kernel'));
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  /** Dispatches queued so far, those of replayed recordings included (benchmarks: dispatches per step). */
  dispatchCount = 0;

  /** Queues one dispatch: `buffers` at bindings 0..n-1, `meta` at binding n. */
  dispatch(kernel: WebgpuKernel, buffers: readonly DeviceBuffer[], meta: Uint32Array, groups: readonly [number, number, number]): void {
    this.dispatchCount++;
    this.enqueue({ k: 'dispatch', pipeline: kernel.id, buffers: buffers.map(bufferId), meta, groups });
  }

  private nextRecording = 1;
  /** The recording being made: its id and the dispatch count when it began. */
  private recordingNow: { id: number; from: number } | undefined;

  /**
   * Starts recording what is queued from now on (compile/codegen/wgsl/replay.ts): the commands
   * still run now, and endRecording keeps them on the device thread for `replay`. Work queued before
   * is not part of it.
   */
  /** Whether a recording is being made (beginRecording .. endRecording). */
  get recording(): boolean {
    return this.recordingNow !== undefined;
  }

  beginRecording(): void {
    const id = this.nextRecording++;
    this.bridge.beginRecording(id);
    this.recordingNow = { id, from: this.dispatchCount };
  }

  /**
   * Ends the recording: its id and dispatch count, or why it cannot be replayed (a host write, a
   * device read or a destroyed buffer inside it; nothing is kept then).
   */
  endRecording(): { id: number; dispatches: number } | { broken: string } {
    const r = this.recordingNow;
    if (!r) throw new WebgpuError('endRecording without beginRecording', 'worker');
    this.recordingNow = undefined;
    const end = this.bridge.endRecording();
    return end.broken !== undefined ? { broken: end.broken } : { id: r.id, dispatches: this.dispatchCount - r.from };
  }

  /** Queues recording `id` again (its `dispatches` count toward dispatchCount). */
  replay(id: number, dispatches: number): void {
    this.dispatchCount += dispatches;
    const skip = getOption('KILN_WEBGPU_REPLAY_SKIP');
    this.enqueue({ k: 'replay', id, submitEvery: getOption('KILN_WEBGPU_REPLAY_SUBMIT'), ahead: getOption('KILN_WEBGPU_ENCODE_AHEAD'), ...(skip ? { skip: skip.split('|').filter((x) => x !== '') } : {}) });
  }

  /** Frees recording `id` on the device thread. */
  dropRecording(id: number): void {
    this.enqueue({ k: 'drop-recording', id });
  }

  launchKernel(module: KernelModule, args: readonly unknown[], launch: Record<string, unknown>): void {
    const l = launch as unknown as WebgpuLaunch;
    this.dispatch(module as WebgpuKernel, args as DeviceBuffer[], l.meta, l.groups);
  }
}
