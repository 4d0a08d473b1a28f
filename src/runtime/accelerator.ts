/**
 * The device ABI: what every accelerator implements. Nothing here knows about tensors; buffers are
 * opaque handles plus a byte length, and everything above talks to devices only through this.
 */
import type { DeviceType } from './device.js';

/** An allocation on one device. `handle` is accelerator specific (ArrayBuffer on cpu). */
export interface DeviceBuffer {
  readonly deviceType: DeviceType;
  readonly deviceIndex: number;
  /** Bytes the caller asked for. */
  readonly nbytes: number;
  /** Bytes actually reserved (the allocator's size class). */
  readonly capacity: number;
  readonly handle: unknown;
}

export interface AllocatorStats {
  /** Bytes in live allocations (as requested). */
  allocatedBytes: number;
  /** Bytes held from the system, live or cached. */
  reservedBytes: number;
  /** High-water mark of allocatedBytes. */
  peakAllocatedBytes: number;
  /** Live allocations. */
  activeAllocations: number;
  /** Allocation calls in total. */
  allocations: number;
  /** Allocations served from the cache. */
  cacheHits: number;
  /** Bytes in freed blocks kept for reuse. */
  cachedBytes: number;
}

export interface Allocator {
  allocate(nbytes: number, options?: { zero?: boolean; stream?: DeviceStream }): DeviceBuffer;
  free(buffer: DeviceBuffer): void;
  /** Forget a buffer that was garbage collected without free(): stats only, never reused. */
  release(buffer: DeviceBuffer): void;
  /**
   * Takes memory made outside the allocator (`handle`, at least `sizeClass(nbytes)` bytes: the
   * cpu's huge-page weight blocks) as a live block of `nbytes`, counted and later freed like any
   * other. Allocators without it cannot take such memory.
   */
  adopt?(handle: unknown, nbytes: number): DeviceBuffer;
  stats(): AllocatorStats;
  resetPeakStats(): void;
  emptyCache(): void;
}

export interface DeviceStream {
  readonly deviceType: DeviceType;
  readonly deviceIndex: number;
  synchronize(): void;
  /** True when all work queued so far has finished. */
  query(): boolean;
}

export interface DeviceEvent {
  record(stream: DeviceStream): void;
  synchronize(): void;
  query(): boolean;
  /** Milliseconds from `this` to `end`; both must have been recorded with timing enabled. */
  elapsedTime(end: DeviceEvent): number;
}

/** A device-to-host copy in flight (Accelerator.readDeviceToHostAsync). */
export interface PendingHostRead {
  /** Waits for the copy and returns its bytes (the same array on every call). */
  wait(): Uint8Array;
  /** Gives up the result (its host memory may be reused); wait() must not follow. */
  dispose(): void;
}

export interface DeviceProperties {
  name: string;
  /** Free-form, accelerator-specific properties (SM count, compute capability, cores...). */
  [key: string]: string | number | boolean | readonly string[];
}

/** A compiled kernel module; launch semantics are accelerator specific. */
export interface KernelModule {
  readonly name: string;
}

export interface Accelerator {
  readonly type: DeviceType;
  deviceCount(): number;
  properties(index: number): DeviceProperties;
  allocator(index: number): Allocator;
  /** Copies `src` bytes into `dst` at byteOffset. */
  copyHostToDevice(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array, stream?: DeviceStream): void;
  /** Copies `dst.byteLength` bytes from `src` at byteOffset into host memory. */
  copyDeviceToHost(dst: Uint8Array, src: DeviceBuffer, srcByteOffset: number, stream?: DeviceStream): void;
  /**
   * Optional: copyHostToDevice that does not wait for the device. `src` is staged before it
   * returns (the caller may reuse it at once) and the copy runs in stream order, after the work
   * queued before it, while the host goes on. Callers fall back to copyHostToDevice without it
   * (tensor/transfer.ts).
   */
  copyHostToDeviceAsync?(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array, stream?: DeviceStream): void;
  /**
   * Optional: queues a copy of `nbytes` from `src` at byteOffset to host memory in stream order and
   * returns at once; the handle's wait() blocks until that copy (not the work queued after it)
   * has finished and returns the bytes. Lets a host read of one step's result overlap the next
   * step's compute. Callers fall back to a plain read at wait() time without it.
   */
  readDeviceToHostAsync?(src: DeviceBuffer, srcByteOffset: number, nbytes: number, stream?: DeviceStream): PendingHostRead;
  copyDeviceToDevice(
    dst: DeviceBuffer,
    dstByteOffset: number,
    src: DeviceBuffer,
    srcByteOffset: number,
    nbytes: number,
    stream?: DeviceStream,
  ): void;
  defaultStream(index: number): DeviceStream;
  createStream(index: number): DeviceStream;
  createEvent(index: number, options: { enableTiming: boolean }): DeviceEvent;
  synchronize(index: number): void;
  /**
   * Compiles (and caches) source code into a loadable module with one entry point, answered with a
   * promise (cuda: NVRTC on this thread, disk-cached; options name, params, nvrtcOptions). Code
   * generators that need handles synchronously, or compile many sources in one parallel batch (the
   * compiler's cuda programs), compile through the runtime's own NVRTC and loader instead.
   */
  compileKernel?(index: number, source: string, options: Record<string, unknown>): Promise<KernelModule>;
  /**
   * Launches a kernel from a compiled module (cuda: numeric arguments in parameter order, launch =
   * { grid, block, sharedBytes?, gridY?, gridZ? }); no stream: the device's current default stream.
   * The compiler's cuda programs launch every generated kernel through it.
   */
  launchKernel?(module: KernelModule, args: readonly unknown[], launch: Record<string, unknown>, stream?: DeviceStream): void;
}

/** Result of probing for an accelerator without loading it for real. */
export interface AcceleratorProbe {
  available: boolean;
  /** Why it is unavailable, or a short summary when available. */
  reason: string;
}
