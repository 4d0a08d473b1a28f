/**
 * Storage: one device allocation shared by a tensor and all its views. Views retain it; dispose()
 * releases, and the block returns to the caching allocator when the last holder lets go. A
 * FinalizationRegistry on tensors is the backstop for tensors that are dropped without dispose().
 */
import type { DeviceBuffer } from '../runtime/accelerator.js';
import { Device } from '../runtime/device.js';
import { acceleratorFor } from '../runtime/registry.js';

export class Storage {
  private refs = 0;
  /** Bumped by every op that writes into this storage (autograd checks saved tensors with it). */
  version = 0;
  private freed = false;
  /** Set for a storage lent over a buffer that someone else owns (see `borrow`). */
  private lent = false;

  private constructor(
    readonly device: Device,
    private buf: DeviceBuffer,
  ) {}

  /** The device allocation. Stable for the storage's life except for a lent storage's `detach`. */
  get buffer(): DeviceBuffer {
    return this.buf;
  }

  /**
   * A storage over `buffer` that someone else owns (a CUDA graph's static output buffer, which
   * the next replay overwrites): releasing it frees nothing. Before the owner overwrites the
   * buffer it calls `detach` on every lent storage that is still alive, which gives it a copy of
   * its own; results handed out this way thus never change under their holder, yet cost no copy
   * when the holder disposed them in time (the usual case in a loop).
   */
  static borrow(device: Device, buffer: DeviceBuffer): Storage {
    const s = new Storage(device, buffer);
    s.lent = true;
    return s;
  }

  /** Whether this is a lent storage that still reads its owner's buffer. */
  get isLent(): boolean {
    return this.lent;
  }

  /**
   * Moves a lent storage onto a buffer of its own, filled by `copy(dst)` from the owner's buffer
   * (enqueued in stream order before the owner overwrites it). No-op when freed or not lent.
   */
  detach(copy: (dst: DeviceBuffer) => void): void {
    if (this.freed || !this.lent) return;
    const alloc = acceleratorFor(this.device).accelerator.allocator(this.device.index);
    const own = alloc.allocate(this.buf.nbytes, { zero: false });
    copy(own);
    this.buf = own;
    this.lent = false;
  }

  /**
   * Moves this storage onto `handle`, memory made outside the allocator that it adopts (at least
   * `sizeClass(nbytes)` bytes; the cpu's huge-page weight blocks), after `copy(dst)` has filled it
   * from the current buffer. The old block is forgotten, not cached: its memory goes back through
   * the garbage collector (cpu), since a typed array taken from it earlier may still alias it.
   * Every view sees the move (views share this storage); a kernel that kept the old buffer's
   * memory across calls would not, so this is for storages no program has captured yet (weights
   * at load time).
   */
  rehome(handle: unknown, copy: (dst: DeviceBuffer) => void): void {
    if (this.freed) throw new Error('Storage: use after dispose');
    if (this.lent) throw new Error('Storage.rehome: a lent storage reads its owner\'s buffer; detach it first');
    const alloc = acceleratorFor(this.device).accelerator.allocator(this.device.index);
    if (!alloc.adopt) throw new Error(`Storage.rehome: the ${this.device.type} allocator cannot adopt outside memory`);
    const own = alloc.adopt(handle, this.buf.nbytes);
    copy(own);
    alloc.release(this.buf);
    this.buf = own;
  }

  static allocate(device: Device, nbytes: number, zero = false): Storage {
    const { accelerator, device: d } = acceleratorFor(device);
    return new Storage(d, accelerator.allocator(d.index).allocate(nbytes, { zero }));
  }

  get nbytes(): number {
    return this.buffer.nbytes;
  }

  get isFreed(): boolean {
    return this.freed;
  }

  retain(): void {
    if (this.freed) throw new Error('Storage: use after dispose (the tensor or one of its views was disposed)');
    this.refs++;
  }

  /** Drops one holder. `collected` marks a finalizer path: the block is forgotten, never reused. */
  release(collected = false): void {
    if (this.freed) return;
    this.refs--;
    if (this.refs > 0) return;
    this.freed = true;
    if (this.lent) return;
    const alloc = acceleratorFor(this.device).accelerator.allocator(this.device.index);
    // A collected tensor's buffer may still be aliased by a typed array the user kept, so it is
    // never handed to another tensor; only explicit dispose() recycles memory.
    if (collected) alloc.release(this.buffer);
    else alloc.free(this.buffer);
  }

  /** The CPU ArrayBuffer behind this storage. */
  cpuArrayBuffer(): ArrayBuffer {
    if (this.device.type !== 'cpu') throw new Error(`Storage: expected a cpu storage, got ${this.device.toString()}`);
    if (this.freed) throw new Error('Storage: use after dispose');
    return this.buffer.handle as ArrayBuffer;
  }
}
