/**
 * The `cpu` accelerator: memory is ArrayBuffers behind the caching allocator, work runs
 * synchronously on the calling thread, so streams are always idle and events are timestamps from
 * the monotonic high-resolution clock.
 */
import { cpuCount, hostDescription, inNode, nowNs, os } from '../../platform/index.js';
import type { Accelerator, DeviceBuffer, DeviceEvent, DeviceProperties, DeviceStream as Stream } from '../accelerator.js';
import { CachingAllocator } from '../caching-allocator.js';

class CpuStream implements Stream {
  readonly deviceType = 'cpu' as const;
  readonly deviceIndex = 0;
  synchronize(): void {}
  query(): boolean {
    return true;
  }
}

class CpuEvent implements DeviceEvent {
  private stamp: bigint | undefined;
  constructor(private readonly enableTiming: boolean) {}
  record(_stream: Stream): void {
    this.stamp = nowNs();
  }
  synchronize(): void {}
  query(): boolean {
    return true;
  }
  elapsedTime(end: DeviceEvent): number {
    if (!(end instanceof CpuEvent)) throw new Error('Event.elapsedTime: both events must be cpu events');
    if (!this.enableTiming || !end.enableTiming) {
      throw new Error('Event.elapsedTime: both events must be created with enableTiming: true');
    }
    if (this.stamp === undefined || end.stamp === undefined) {
      throw new Error('Event.elapsedTime: both events must be recorded before measuring');
    }
    return Number(end.stamp - this.stamp) / 1e6;
  }
}

function asBytes(buffer: DeviceBuffer, byteOffset: number, length: number): Uint8Array {
  return new Uint8Array(buffer.handle as ArrayBuffer, byteOffset, length);
}

export class CpuAccelerator implements Accelerator {
  readonly type = 'cpu' as const;
  private readonly alloc = new CachingAllocator('cpu', 0, {
    alloc: (capacity) => new ArrayBuffer(capacity),
    free: () => {}, // the garbage collector reclaims dropped ArrayBuffers
    zero: (handle, n) => new Uint8Array(handle as ArrayBuffer, 0, n).fill(0),
  });
  private readonly stream = new CpuStream();

  deviceCount(): number {
    return 1;
  }

  private check(index: number): void {
    if (index !== 0) throw new Error(`cpu: device index ${index} does not exist (only cpu:0)`);
  }

  properties(index: number): DeviceProperties {
    this.check(index);
    if (!inNode) {
      const host = hostDescription();
      return { name: 'browser cpu', cores: cpuCount(), arch: host.arch, totalMemoryBytes: 0, endianness: 'LE', node: host.runtime, wasmSimd: wasmSimdSupported() };
    }
    const cpus = os.cpus();
    return {
      name: cpus[0]?.model.trim() ?? 'unknown cpu',
      cores: cpus.length,
      arch: hostDescription().arch,
      totalMemoryBytes: os.totalmem(),
      endianness: os.endianness(),
      node: hostDescription().runtime,
      wasmSimd: wasmSimdSupported(),
    };
  }

  allocator(index: number): CachingAllocator {
    this.check(index);
    return this.alloc;
  }

  copyHostToDevice(dst: DeviceBuffer, dstByteOffset: number, src: Uint8Array): void {
    asBytes(dst, dstByteOffset, src.byteLength).set(src);
  }

  copyDeviceToHost(dst: Uint8Array, src: DeviceBuffer, srcByteOffset: number): void {
    dst.set(asBytes(src, srcByteOffset, dst.byteLength));
  }

  copyDeviceToDevice(dst: DeviceBuffer, dstByteOffset: number, src: DeviceBuffer, srcByteOffset: number, nbytes: number): void {
    asBytes(dst, dstByteOffset, nbytes).set(asBytes(src, srcByteOffset, nbytes));
  }

  defaultStream(index: number): Stream {
    this.check(index);
    return this.stream;
  }

  createStream(index: number): Stream {
    this.check(index);
    return new CpuStream();
  }

  createEvent(index: number, options: { enableTiming: boolean }): DeviceEvent {
    this.check(index);
    return new CpuEvent(options.enableTiming);
  }

  synchronize(index: number): void {
    this.check(index);
  }
}

// A minimal module using one v128 instruction: validates only where Wasm SIMD128 is supported.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03, 0x02, 0x01, 0x00,
  0x0a, 0x0a, 0x01, 0x08, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0xfd, 0x62, 0x0b,
]);

function wasmSimdSupported(): boolean {
  const wasm = (globalThis as { WebAssembly?: { validate(bytes: Uint8Array): boolean } }).WebAssembly;
  return wasm !== undefined && wasm.validate(SIMD_PROBE);
}
