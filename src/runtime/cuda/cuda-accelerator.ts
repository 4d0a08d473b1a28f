/**
 * The `cuda` accelerator: NVIDIA's driver API through koffi. Memory comes from the stream-aware
 * caching allocator; host<->device copies go through a pinned staging buffer (two halves, so filling
 * one overlaps the DMA of the other); all work is asynchronous on each device's Kiln default stream
 * (created non-blocking), and reading back to the host synchronises that stream.
 */
import type { Accelerator, DeviceBuffer, DeviceEvent, DeviceProperties, DeviceStream, KernelModule, PendingHostRead } from '../accelerator.js';
import { CudaAllocator } from './allocator.js';
import { raiseDeviceErrors } from './device-errors.js';
import { check, deviceCount, driver, makeCurrent } from './driver.js';
import type { DevPtr, Ptr } from './ffi.js';
import { kernelFromSource } from './kernel-cache.js';
import { type CudaKernel, launch, type LaunchDims, type ParamType } from './launch.js';
import { nvrtcVersion } from './nvrtc.js';
import { PinnedRing } from './pinned-ring.js';
import { deviceInfo } from './properties.js';
import { CudaEvent, CudaStream } from './stream.js';

// 2 x 16 MiB of pinned memory: large enough that a chunk's DMA runs near PCIe/NVLink-C2C speed,
// small enough that pinning it at first use costs a few milliseconds.
const STAGING_HALF_BYTES = 16 << 20;

interface Staging {
  halves: { ptr: Ptr; bytes: Uint8Array; event: CudaEvent; pending: boolean }[];
}

export function devPtr(buffer: DeviceBuffer, byteOffset = 0): DevPtr {
  return (buffer.handle as DevPtr) + byteOffset;
}

export class CudaAccelerator implements Accelerator {
  readonly type = 'cuda' as const;
  private readonly count: number;
  private readonly allocators = new Map<number, CudaAllocator>();
  private readonly streams = new Map<number, CudaStream>();
  private readonly staging = new Map<number, Staging>();
  private readonly rings = new Map<number, PinnedRing>();

  constructor() {
    this.count = deviceCount();
    if (this.count === 0) throw new Error('the NVIDIA driver loaded but reports no CUDA device');
  }

  deviceCount(): number {
    return this.count;
  }

  private checkIndex(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.count) {
      throw new Error(`cuda: device index ${index} does not exist (${this.count} device(s))`);
    }
    makeCurrent(index);
  }

  properties(index: number): DeviceProperties {
    this.checkIndex(index);
    const i = deviceInfo(index);
    let nvrtc = 'not found';
    try {
      nvrtc = nvrtcVersion();
    } catch (e) {
      nvrtc = `unavailable (${(e as Error).message})`;
    }
    return { ...i, nvrtcVersion: nvrtc, driverLibrary: driver().path };
  }

  allocator(index: number): CudaAllocator {
    let a = this.allocators.get(index);
    if (!a) {
      this.checkIndex(index);
      a = new CudaAllocator(index, () => this.defaultStream(index));
      this.allocators.set(index, a);
    }
    return a;
  }

  defaultStream(index: number): CudaStream {
    let s = this.streams.get(index);
    if (!s) {
      this.checkIndex(index);
      s = CudaStream.create(index);
      this.streams.set(index, s);
    }
    return s;
  }

  /**
   * Makes `stream` the device's Kiln default stream and returns the previous one. Every launch, copy
   * and allocation of the eager kernels follows the default stream, so CUDA graph capture
   * (src/runtime/cuda/graph.ts) routes a whole call to its capture stream this way, and the
   * allocator's per-stream free lists make that stream's blocks a pool private to the graph.
   */
  setDefaultStream(index: number, stream: CudaStream): CudaStream {
    const prev = this.defaultStream(index);
    if (stream.deviceIndex !== index) throw new Error(`cuda: setDefaultStream: the stream is on cuda:${stream.deviceIndex}, not cuda:${index}`);
    this.streams.set(index, stream);
    return prev;
  }

  createStream(index: number): DeviceStream {
    this.checkIndex(index);
    return CudaStream.create(index);
  }

  createEvent(index: number, options: { enableTiming: boolean }): DeviceEvent {
    this.checkIndex(index);
    return new CudaEvent(index, options.enableTiming);
  }

  synchronize(index: number): void {
    this.checkIndex(index);
    check(driver().cu.cuCtxSynchronize(), `synchronizing cuda:${index} (an earlier asynchronous launch or copy may have failed)`);
    // Bad input found by device-side checks (out-of-range gather indices) surfaces here.
    raiseDeviceErrors(index, this.defaultStream(index).handle);
  }

  private stream(buffer: DeviceBuffer, stream?: DeviceStream): CudaStream {
    if (stream !== undefined) {
      if (!(stream instanceof CudaStream)) throw new Error('cuda: copies need a cuda stream');
      return stream;
    }
    return this.defaultStream(buffer.deviceIndex);
  }

  private stagingFor(index: number): Staging {
    let s = this.staging.get(index);
    if (s) return s;
    const { cu, koffi } = driver();
    const halves: Staging['halves'] = [];
    for (let i = 0; i < 2; i++) {
      const out: [Ptr | null] = [null];
      check(cu.cuMemAllocHost_v2(out, STAGING_HALF_BYTES), `pinning ${STAGING_HALF_BYTES} bytes of host memory for copies`);
      const ptr = out[0]!;
      halves.push({ ptr, bytes: new Uint8Array(koffi.view(ptr, STAGING_HALF_BYTES)), event: new CudaEvent(index, false), pending: false });
    }
    s = { halves };
    this.staging.set(index, s);
    return s;
  }

  copyHostToDevice(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array, stream?: DeviceStream): void {
    if (src.byteLength === 0) return;
    checkRange('copyHostToDevice', dst, dstByteOffset, src.byteLength);
    const s = this.stream(dst, stream);
    makeCurrent(dst.deviceIndex);
    // Checked before the staging is touched: a capture would record the copy and its event without
    // running them, and the staging's next user would wait on an event no stream ever reaches.
    if (s.isCapturing()) throw uncapturableCopy('host->cuda', src.byteLength, dst.deviceIndex);
    const { cu } = driver();
    const st = this.stagingFor(dst.deviceIndex);
    let k = 0;
    for (let off = 0; off < src.byteLength; off += STAGING_HALF_BYTES, k++) {
      const n = Math.min(STAGING_HALF_BYTES, src.byteLength - off);
      const half = st.halves[k % 2]!;
      // The half is reused only after its previous DMA has finished.
      if (half.pending) half.event.synchronize();
      half.bytes.set(src.subarray(off, off + n));
      check(cu.cuMemcpyHtoDAsync_v2(devPtr(dst, dstByteOffset + off), half.ptr, n, s.handle), `copying ${n} bytes host->cuda:${dst.deviceIndex}`);
      half.event.record(s);
      half.pending = true;
    }
    s.lastOpKernel = false; // a copy: the next launch is not after a kernel (PDL, pdl.ts)
    // The caller may reuse `src` and the staging may be refilled by the next copy: wait for the DMA.
    s.synchronize();
    for (const h of st.halves) h.pending = false;
  }

  copyDeviceToHost(dst: Uint8Array, src: DeviceBuffer, srcByteOffset: number, stream?: DeviceStream): void {
    if (dst.byteLength === 0) return;
    checkRange('copyDeviceToHost', src, srcByteOffset, dst.byteLength);
    const s = this.stream(src, stream);
    makeCurrent(src.deviceIndex);
    if (s.isCapturing()) throw uncapturableCopy('cuda->host', dst.byteLength, src.deviceIndex);
    const { cu } = driver();
    const st = this.stagingFor(src.deviceIndex);
    const half = st.halves[0]!;
    for (let off = 0; off < dst.byteLength; off += STAGING_HALF_BYTES) {
      const n = Math.min(STAGING_HALF_BYTES, dst.byteLength - off);
      check(cu.cuMemcpyDtoHAsync_v2(half.ptr, devPtr(src, srcByteOffset + off), n, s.handle), `copying ${n} bytes cuda:${src.deviceIndex}->host`);
      s.lastOpKernel = false;
      s.synchronize();
      dst.set(half.bytes.subarray(0, n), off);
    }
    // A read-back is where eager code waits for the device: report bad input its kernels found.
    raiseDeviceErrors(src.deviceIndex, this.defaultStream(src.deviceIndex).handle);
  }

  private ringFor(index: number): PinnedRing {
    let r = this.rings.get(index);
    if (!r) {
      r = new PinnedRing(index);
      this.rings.set(index, r);
    }
    return r;
  }

  /** Stages `src` in the pinned ring and queues its copy; returns without waiting (pinned-ring.ts). */
  copyHostToDeviceAsync(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array, stream?: DeviceStream): void {
    if (src.byteLength === 0) return;
    checkRange('copyHostToDeviceAsync', dst, dstByteOffset, src.byteLength);
    const s = this.stream(dst, stream);
    makeCurrent(dst.deviceIndex);
    if (s.isCapturing()) throw uncapturableCopy('host->cuda', src.byteLength, dst.deviceIndex);
    const slot = this.ringFor(dst.deviceIndex).take(src.byteLength, ({ event }) => ({ done: () => event.query(), retire: () => event.synchronize() }));
    if (slot === null) {
      this.copyHostToDevice(dst, dstByteOffset, src, stream);
      return;
    }
    slot.view.set(src);
    check(driver().cu.cuMemcpyHtoDAsync_v2(devPtr(dst, dstByteOffset), slot.ptr, src.byteLength, s.handle), `copying ${src.byteLength} bytes host->cuda:${dst.deviceIndex}`);
    slot.event.record(s);
  }

  /** Queues a copy into the pinned ring; wait() waits for that copy's event only (pinned-ring.ts). */
  readDeviceToHostAsync(src: DeviceBuffer, srcByteOffset: number, nbytes: number, stream?: DeviceStream): PendingHostRead {
    checkRange('readDeviceToHostAsync', src, srcByteOffset, nbytes);
    const s = this.stream(src, stream);
    makeCurrent(src.deviceIndex);
    if (s.isCapturing()) throw uncapturableCopy('cuda->host', nbytes, src.deviceIndex);
    const index = src.deviceIndex;
    let data: Uint8Array | null = null;
    let disposed = false;
    let copyOut: () => void = () => undefined;
    const slot = nbytes === 0 ? null : this.ringFor(index).take(nbytes, ({ view, event }) => {
      copyOut = (): void => {
        event.synchronize();
        data = view.slice();
      };
      return {
        done: () => data !== null || disposed,
        retire: () => {
          if (data === null && !disposed) copyOut();
        },
      };
    });
    if (slot === null) {
      // Empty, or larger than the ring: read at wait() time (it then waits for the whole stream).
      return {
        wait: () => {
          if (data === null) {
            data = new Uint8Array(nbytes);
            this.copyDeviceToHost(data, src, srcByteOffset, stream);
          }
          return data;
        },
        dispose: () => undefined,
      };
    }
    check(driver().cu.cuMemcpyDtoHAsync_v2(slot.ptr, devPtr(src, srcByteOffset), nbytes, s.handle), `copying ${nbytes} bytes cuda:${index}->host`);
    s.lastOpKernel = false;
    slot.event.record(s);
    return {
      wait: () => {
        if (disposed) throw new Error('cuda: readDeviceToHostAsync: wait() after dispose()');
        if (data === null) copyOut();
        // Bad input the kernels before the copy found: their writes are visible once it is done.
        raiseDeviceErrors(index, this.defaultStream(index).handle);
        return data!;
      },
      dispose: () => {
        disposed = true;
      },
    };
  }

  copyDeviceToDevice(dst: DeviceBuffer, dstByteOffset: number, src: DeviceBuffer, srcByteOffset: number, nbytes: number, stream?: DeviceStream): void {
    if (nbytes === 0) return;
    checkRange('copyDeviceToDevice', dst, dstByteOffset, nbytes);
    checkRange('copyDeviceToDevice', src, srcByteOffset, nbytes);
    const s = this.stream(dst, stream);
    makeCurrent(dst.deviceIndex);
    check(
      driver().cu.cuMemcpyDtoDAsync_v2(devPtr(dst, dstByteOffset), devPtr(src, srcByteOffset), nbytes, s.handle),
      `copying ${nbytes} bytes cuda:${src.deviceIndex}->cuda:${dst.deviceIndex}`,
    );
    s.lastOpKernel = false; // a copy: the next launch is not after a kernel (PDL, pdl.ts)
  }

  /** Compiles CUDA C with NVRTC for the device's architecture (disk-cached) and loads `options.name`. */
  compileKernel(index: number, source: string, options: Record<string, unknown>): Promise<KernelModule> {
    this.checkIndex(index);
    const name = options.name;
    const params = options.params;
    if (typeof name !== 'string' || !Array.isArray(params)) {
      return Promise.reject(new TypeError("cuda.compileKernel: options must give 'name' (the entry point) and 'params' (parameter types)"));
    }
    try {
      return Promise.resolve(kernelFromSource(index, source, name, params as ParamType[], (options.nvrtcOptions as string[] | undefined) ?? []));
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  launchKernel(module: KernelModule, args: readonly unknown[], dims: Record<string, unknown>, stream?: DeviceStream): void {
    const k = module as CudaKernel;
    launch(k, args as number[], dims as unknown as LaunchDims, (stream as CudaStream | undefined) ?? this.defaultStream(k.deviceIndex));
  }
}

function checkRange(what: string, buffer: DeviceBuffer, offset: number, n: number): void {
  if (offset < 0 || offset + n > buffer.capacity) {
    throw new RangeError(`cuda: ${what}: ${n} bytes at offset ${offset} overrun a block of ${buffer.capacity} bytes`);
  }
}

/** A copy through host memory waits for the host, so a CUDA graph cannot hold it. */
function uncapturableCopy(direction: string, bytes: number, index: number): Error {
  return new Error(`cuda: a ${direction} copy of ${bytes} bytes on cuda:${index} cannot be captured in a CUDA graph (it goes through host memory and waits for it); the compiler captures around such steps`);
}
