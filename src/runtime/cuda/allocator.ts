/**
 * The cuda caching allocator. Blocks come from cuMemAlloc in the shared size classes
 * (caching-allocator.ts: 512 B below 1 MiB, 1 MiB above), and freed blocks wait in free lists kept
 * per stream: a block freed by work on stream S is handed out again only for S, so a later kernel on
 * another stream cannot overwrite memory that S's queued kernels still read (PyTorch's rule; a block
 * used on several streams must be freed on the last one). On out-of-memory the cache is given back
 * once, after a synchronous collection of unreachable tensors (memory-pressure.ts), and the allocation retried; the error then says what Kiln holds and what the device has left.
 */
import type { Allocator, AllocatorStats, DeviceBuffer, DeviceStream } from '../accelerator.js';
import { sizeClass } from '../caching-allocator.js';
import { reclaimUnreachable } from '../memory-pressure.js';
import { check, CUDA_ERROR_OUT_OF_MEMORY, cudaError, driver, makeCurrent } from './driver.js';
import type { DevPtr } from './ffi.js';
import type { CudaStream } from './stream.js';

interface Block extends DeviceBuffer {
  live: boolean;
  streamId: number;
  readonly handle: DevPtr;
}

const GiB = 1024 ** 3;
const fmtBytes = (n: number): string => (n >= GiB / 4 ? `${(n / GiB).toFixed(2)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${n} bytes`);

export class CudaAllocator implements Allocator {
  /** stream id -> capacity -> free device addresses. Numeric keys: a string key built per call was
   * a measurable part of an eager op's host time. */
  private readonly freeLists = new Map<number, Map<number, DevPtr[]>>();
  /** Streams whose free lists are private pools of CUDA graphs: emptyCache leaves them alone. */
  private readonly pinned = new Set<number>();
  private s: AllocatorStats = { allocatedBytes: 0, reservedBytes: 0, peakAllocatedBytes: 0, activeAllocations: 0, allocations: 0, cacheHits: 0, cachedBytes: 0 };

  constructor(
    private readonly deviceIndex: number,
    private readonly defaultStream: () => CudaStream,
  ) {}

  allocate(nbytes: number, options?: { zero?: boolean; stream?: DeviceStream }): DeviceBuffer {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0) throw new Error(`allocate: invalid byte count ${nbytes} on cuda:${this.deviceIndex}`);
    const stream = (options?.stream as CudaStream | undefined) ?? this.defaultStream();
    const capacity = sizeClass(nbytes);
    const list = this.freeLists.get(stream.id)?.get(capacity);
    let handle: DevPtr;
    if (list && list.length > 0) {
      handle = list.pop()!;
      this.s.cacheHits++;
      this.s.cachedBytes -= capacity;
    } else {
      handle = this.rawAlloc(capacity, nbytes);
      this.s.reservedBytes += capacity;
    }
    if (options?.zero) {
      check(driver().cu.cuMemsetD8Async(handle, 0, capacity, stream.handle), `zeroing ${capacity} bytes on cuda:${this.deviceIndex}`);
      stream.lastOpKernel = false;
    }
    this.s.allocations++;
    this.s.activeAllocations++;
    this.s.allocatedBytes += nbytes;
    if (this.s.allocatedBytes > this.s.peakAllocatedBytes) this.s.peakAllocatedBytes = this.s.allocatedBytes;
    const block: Block = { deviceType: 'cuda', deviceIndex: this.deviceIndex, nbytes, capacity, handle, live: true, streamId: stream.id };
    return block;
  }

  private rawAlloc(capacity: number, nbytes: number): DevPtr {
    makeCurrent(this.deviceIndex);
    const { cu } = driver();
    const out: [DevPtr] = [0];
    let rc = cu.cuMemAlloc_v2(out, capacity);
    if (rc === CUDA_ERROR_OUT_OF_MEMORY) {
      // Free what unreachable tensors hold (their finalizers return blocks to the free lists), give
      // every cached block back (after the queued work that may still use them) and retry once.
      // Only here, not on a growth threshold as on cpu: a collected tensor's cuda block is reused,
      // so collecting in the middle of an op is kept to the case that would otherwise fail.
      reclaimUnreachable();
      this.emptyCache();
      rc = cu.cuMemAlloc_v2(out, capacity);
    }
    if (rc === CUDA_ERROR_OUT_OF_MEMORY) {
      const free: [number] = [0];
      const total: [number] = [0];
      const info = cu.cuMemGetInfo_v2(free, total) === 0 ? `; the device has ${fmtBytes(Number(free[0]))} free of ${fmtBytes(Number(total[0]))}` : '';
      const st = this.s;
      throw new Error(
        `out of memory on cuda:${this.deviceIndex}: tried to allocate ${fmtBytes(nbytes)} (block of ${capacity} bytes); ` +
          `Kiln holds ${fmtBytes(st.allocatedBytes)} in ${st.activeAllocations} live tensors' blocks and ${fmtBytes(st.cachedBytes)} cached ` +
          `(${fmtBytes(st.reservedBytes)} reserved)${info}. Free tensors with dispose() or kiln.scope(), or use smaller shapes (CUDA_ERROR_OUT_OF_MEMORY)`,
      );
    }
    if (rc !== 0) throw cudaError(rc, `allocating ${capacity} bytes on cuda:${this.deviceIndex}`);
    return Number(out[0]);
  }

  free(buffer: DeviceBuffer): void {
    const b = buffer as Block;
    if (!b.live) throw new Error(`free: buffer of ${b.nbytes} bytes on cuda:${this.deviceIndex} was already freed`);
    b.live = false;
    this.s.activeAllocations--;
    this.s.allocatedBytes -= b.nbytes;
    let lists = this.freeLists.get(b.streamId);
    if (!lists) this.freeLists.set(b.streamId, (lists = new Map()));
    let list = lists.get(b.capacity);
    if (!list) lists.set(b.capacity, (list = []));
    list.push(b.handle);
    this.s.cachedBytes += b.capacity;
  }

  /**
   * A tensor collected without dispose(): unlike host memory nothing else can alias a device block,
   * so the block is reused like a freed one (device memory is scarce, and the finalizer is the only
   * way a forgotten tensor's memory comes back).
   */
  release(buffer: DeviceBuffer): void {
    if ((buffer as Block).live) this.free(buffer);
  }

  stats(): AllocatorStats {
    return { ...this.s };
  }

  resetPeakStats(): void {
    this.s.peakAllocatedBytes = this.s.allocatedBytes;
  }

  /**
   * Keeps `stream`'s free lists out of emptyCache: a captured CUDA graph replays into the blocks its
   * capture freed there (src/runtime/cuda/graph.ts), so they must stay allocated while it lives.
   */
  pinStream(stream: CudaStream, pinned = true): void {
    if (pinned) this.pinned.add(stream.id);
    else this.pinned.delete(stream.id);
  }

  emptyCache(): void {
    if (this.freeLists.size === 0) return;
    makeCurrent(this.deviceIndex);
    const { cu } = driver();
    // Queued kernels may still read cached blocks: wait for them before handing memory back.
    check(cu.cuCtxSynchronize(), `synchronizing cuda:${this.deviceIndex} before emptying the cache`);
    for (const [streamId, lists] of this.freeLists) {
      if (this.pinned.has(streamId)) continue;
      for (const [capacity, list] of lists) {
        for (const h of list) {
          check(cu.cuMemFree_v2(h), `freeing a cached block on cuda:${this.deviceIndex}`);
          this.s.reservedBytes -= capacity;
          this.s.cachedBytes -= capacity;
        }
      }
      this.freeLists.delete(streamId);
    }
  }
}
