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

  private constructor(
    readonly device: Device,
    readonly buffer: DeviceBuffer,
  ) {}

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
