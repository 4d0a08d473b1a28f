/**
 * A caching allocator shared by accelerators: freed blocks go to per-size-class free lists and are
 * handed out again for requests of the same class, so steady-state loops stop calling the system
 * allocator. Each accelerator supplies the raw allocate/free/zero for its memory.
 */
import type { Allocator, AllocatorStats, DeviceBuffer } from './accelerator.js';
import type { DeviceType } from './device.js';
import { PressureTrigger, reclaimUnreachable } from './memory-pressure.js';

export interface RawMemory {
  alloc(capacity: number): unknown;
  free(handle: unknown): void;
  zero(handle: unknown, nbytes: number): void;
}

// Small blocks round to 512 bytes (as PyTorch's CUDA allocator does); large ones to 1 MiB so that
// slightly different large shapes still share a class without wasting more than 1 MiB a block.
const SMALL_ROUND = 512;
const LARGE_THRESHOLD = 1 << 20;
const LARGE_ROUND = 1 << 20;

export function sizeClass(nbytes: number): number {
  const n = Math.max(nbytes, 1);
  const round = n < LARGE_THRESHOLD ? SMALL_ROUND : LARGE_ROUND;
  return Math.ceil(n / round) * round;
}

interface Block extends DeviceBuffer {
  live: boolean;
}

/**
 * Blocks set apart for one recorded call (a webgpu program's recorded commands, which replays
 * write and read again): while the pool is open, every freed block goes to it instead of the shared
 * free lists, and allocations take from it first, so the recorded call still reuses its dead
 * intermediates; after `endPool` it keeps them, so no other tensor is ever handed a block a replay
 * writes. `releasePool` gives them back (the recording is dropped).
 */
export interface PrivatePool {
  readonly freeLists: Map<number, unknown[]>;
  /** Bytes of the blocks it holds. */
  bytes: number;
}

export class CachingAllocator implements Allocator {
  private readonly freeLists = new Map<number, unknown[]>();
  private readonly pressure = new PressureTrigger();
  /** The open private pool (beginPool), if any. */
  private pool: PrivatePool | undefined;
  private s: AllocatorStats = {
    allocatedBytes: 0,
    reservedBytes: 0,
    peakAllocatedBytes: 0,
    activeAllocations: 0,
    allocations: 0,
    cacheHits: 0,
    cachedBytes: 0,
  };

  constructor(
    private readonly deviceType: DeviceType,
    private readonly deviceIndex: number,
    private readonly raw: RawMemory,
  ) {}

  allocate(nbytes: number, options: { zero?: boolean } = {}): DeviceBuffer {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0) {
      throw new Error(`allocate: invalid byte count ${nbytes} on ${this.deviceType}:${this.deviceIndex}`);
    }
    const capacity = sizeClass(nbytes);
    const own = this.pool?.freeLists.get(capacity);
    const list = this.freeLists.get(capacity);
    let handle: unknown;
    let missed = false;
    if (own && own.length > 0) {
      handle = own.pop();
      this.pool!.bytes -= capacity;
      this.s.cacheHits++;
      if (options.zero) this.raw.zero(handle, capacity);
    } else if (list && list.length > 0) {
      handle = list.pop();
      this.s.cacheHits++;
      this.s.cachedBytes -= capacity;
      if (options.zero) this.raw.zero(handle, capacity);
    } else {
      missed = true;
      try {
        handle = this.raw.alloc(capacity);
      } catch (e) {
        // Free what unreachable tensors hold, give cached blocks back, and try once more before
        // reporting out-of-memory.
        reclaimUnreachable();
        this.emptyCache();
        try {
          handle = this.raw.alloc(capacity);
        } catch {
          const st = this.s;
          throw new Error(
            `out of memory on ${this.deviceType}:${this.deviceIndex}: tried to allocate ${capacity} bytes; ` +
              `${st.allocatedBytes} bytes allocated in ${st.activeAllocations} live blocks, ${st.reservedBytes} reserved ` +
              `(${(e as Error).message})`,
          );
        }
      }
      this.s.reservedBytes += capacity;
    }
    this.s.allocations++;
    this.s.activeAllocations++;
    this.s.allocatedBytes += nbytes;
    if (this.s.allocatedBytes > this.s.peakAllocatedBytes) this.s.peakAllocatedBytes = this.s.allocatedBytes;
    // Only a cache miss grows memory past what was reserved: the pressure is checked there. The
    // block just made is counted already and cannot be reclaimed (nothing holds it yet to drop).
    if (missed) this.pressure.grew(() => this.s.allocatedBytes);
    const block: Block = {
      deviceType: this.deviceType,
      deviceIndex: this.deviceIndex,
      nbytes,
      capacity,
      handle,
      live: true,
    };
    return block;
  }

  adopt(handle: unknown, nbytes: number): DeviceBuffer {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0) throw new Error(`adopt: invalid byte count ${nbytes} on ${this.deviceType}:${this.deviceIndex}`);
    const capacity = sizeClass(nbytes);
    this.s.reservedBytes += capacity;
    this.s.allocations++;
    this.s.activeAllocations++;
    this.s.allocatedBytes += nbytes;
    if (this.s.allocatedBytes > this.s.peakAllocatedBytes) this.s.peakAllocatedBytes = this.s.allocatedBytes;
    const block: Block = { deviceType: this.deviceType, deviceIndex: this.deviceIndex, nbytes, capacity, handle, live: true };
    return block;
  }

  free(buffer: DeviceBuffer): void {
    const block = buffer as Block;
    if (!block.live) throw new Error(`free: buffer of ${block.nbytes} bytes on ${this.deviceType} was already freed`);
    block.live = false;
    this.s.activeAllocations--;
    this.s.allocatedBytes -= block.nbytes;
    this.pressure.shrank(this.s.allocatedBytes);
    if (this.pool) {
      const own = this.pool.freeLists.get(block.capacity);
      if (own) own.push(block.handle);
      else this.pool.freeLists.set(block.capacity, [block.handle]);
      this.pool.bytes += block.capacity;
      return;
    }
    let list = this.freeLists.get(block.capacity);
    if (!list) this.freeLists.set(block.capacity, (list = []));
    list.push(block.handle);
    this.s.cachedBytes += block.capacity;
  }

  /** Opens a private pool (see PrivatePool): frees go to it until endPool. One at a time. */
  beginPool(): PrivatePool {
    if (this.pool) throw new Error(`beginPool: a private pool is already open on ${this.deviceType}:${this.deviceIndex}`);
    this.pool = { freeLists: new Map(), bytes: 0 };
    return this.pool;
  }

  /** Closes `pool`: it keeps its blocks (reserved, neither allocated nor cached) until releasePool. */
  endPool(pool: PrivatePool): void {
    if (this.pool === pool) this.pool = undefined;
  }

  /** Gives a closed pool's blocks to the shared free lists. */
  releasePool(pool: PrivatePool): void {
    this.endPool(pool);
    for (const [capacity, handles] of pool.freeLists) {
      let list = this.freeLists.get(capacity);
      if (!list) this.freeLists.set(capacity, (list = []));
      for (const h of handles) list.push(h);
      this.s.cachedBytes += capacity * handles.length;
    }
    pool.freeLists.clear();
    pool.bytes = 0;
  }

  release(buffer: DeviceBuffer): void {
    const block = buffer as Block;
    if (!block.live) return;
    block.live = false;
    this.s.activeAllocations--;
    this.s.allocatedBytes -= block.nbytes;
    this.s.reservedBytes -= block.capacity;
    this.pressure.shrank(this.s.allocatedBytes);
  }

  stats(): AllocatorStats {
    return { ...this.s };
  }

  resetPeakStats(): void {
    this.s.peakAllocatedBytes = this.s.allocatedBytes;
  }

  emptyCache(): void {
    for (const [capacity, list] of this.freeLists) {
      for (const h of list) {
        this.raw.free(h);
        this.s.reservedBytes -= capacity;
        this.s.cachedBytes -= capacity;
      }
    }
    this.freeLists.clear();
  }
}
