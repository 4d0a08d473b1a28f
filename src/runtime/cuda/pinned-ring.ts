/**
 * Pinned host memory for transfers that do not wait for the device (copyHostToDeviceAsync,
 * readDeviceToHostAsync): a ring of page-locked bytes handed out front to back, each region
 * guarded by an event recorded after its copy. A region is reused only once its copy is done:
 * taking bytes that overlap a live region waits for that region's event (an upload), or for its
 * event and then copies its bytes out to the read handle that owns them (a read not yet waited
 * for). In steady use (a decode loop's few hundred bytes per step) the ring wraps only after
 * thousands of steps, long after those copies finished, so nothing waits.
 *
 * Why not the accelerator's two staging halves: copyHostToDevice waits for its DMA before
 * returning (the caller's bytes are then free), so a step's input upload waited for the whole
 * previous step still queued before it; here the host returns at once.
 */
import { check, driver, makeCurrent } from './driver.js';
import type { Ptr } from './ffi.js';
import { CudaEvent } from './stream.js';

/** Bytes of the ring per device: regions larger than this take the waiting path instead. */
export const PINNED_RING_BYTES = 8 << 20;
const ALIGN = 256;

interface Region {
  readonly start: number;
  readonly end: number;
  readonly event: CudaEvent;
  /** Whether the host may reuse the bytes now without waiting (the copy is done and nobody needs them). */
  done(): boolean;
  /** Waits for the copy and hands the bytes to their owner: the region may be overwritten after. */
  retire(): void;
}

export class PinnedRing {
  readonly bytes: Uint8Array;
  private readonly ptr: Ptr;
  private head = 0;
  /** Live regions, oldest first (ring order from the head). */
  private readonly live: Region[] = [];
  private readonly spare: CudaEvent[] = [];

  constructor(
    readonly deviceIndex: number,
    readonly size = PINNED_RING_BYTES,
  ) {
    makeCurrent(deviceIndex);
    const { cu, koffi } = driver();
    const out: [Ptr | null] = [null];
    check(cu.cuMemAllocHost_v2(out, size), `pinning ${size} bytes of host memory for asynchronous copies`);
    this.ptr = out[0]!;
    this.bytes = new Uint8Array(koffi.view(this.ptr, size));
  }

  /**
   * `n` bytes at a free place in the ring (host pointer, its view, and the event to record after
   * the copy is queued), or null when n exceeds the ring. `make` builds the region's done/retire.
   */
  take(n: number, make: (at: { start: number; view: Uint8Array; event: CudaEvent }) => Pick<Region, 'done' | 'retire'>): { ptr: Ptr; view: Uint8Array; event: CudaEvent } | null {
    if (n > this.size) return null;
    while (this.live.length > 0 && this.live[0]!.done()) this.release(this.live.shift()!);
    const len = Math.ceil(Math.max(n, 1) / ALIGN) * ALIGN;
    const start = this.head + len > this.size ? 0 : this.head;
    const end = start + Math.min(len, this.size - start);
    for (let i = 0; i < this.live.length; ) {
      const r = this.live[i]!;
      if (r.start < end && start < r.end) {
        r.retire();
        this.live.splice(i, 1);
        this.release(r);
      } else i++;
    }
    this.head = end;
    const event = this.spare.pop() ?? new CudaEvent(this.deviceIndex, false);
    const view = this.bytes.subarray(start, start + n);
    this.live.push({ start, end, event, ...make({ start, view, event }) });
    return { ptr: this.ptr + BigInt(start), view, event };
  }

  private release(r: Region): void {
    this.spare.push(r.event);
  }
}
