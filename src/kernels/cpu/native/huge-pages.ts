/**
 * Memory for large, long-lived cpu tensors (model weights) in transparent huge pages (issue #17:
 * cpu decode streams every weight once a token, so the rate at which one thread can read memory
 * bounds it).
 *
 * Why: a JavaScript ArrayBuffer comes from glibc's malloc, an mmap whose data starts 16 bytes past
 * a 4 KiB page and which Linux's default THP mode ("madvise") backs with 4 KiB pages. Streaming a
 * weight then walks the page tables every 4 KiB and the hardware prefetchers stop at each page
 * end. Here the block is 2 MiB-aligned (posix_memalign) and advised MADV_HUGEPAGE before its first
 * touch, so the kernel backs it with 2 MiB pages as it faults in. Measured on the 2-vCPU VM
 * (2026-12-04, /tmp scripts in session 21's note): the 197 bfloat16 weights of a Qwen3-0.6B step
 * (1.19 GB) through the native GEMV split over 2 threads, 50.5 ms a step (23.6 GB/s) in
 * ArrayBuffers against 41.6 ms (28.7 GB/s) in these blocks; the read probe itself 28 -> 29-30 GB/s.
 *
 * The block is wrapped as an ArrayBuffer (koffi.view) so every kernel reads it like any other cpu
 * storage; a FinalizationRegistry frees it once that ArrayBuffer is collected (views of it keep it
 * alive). V8 does not count this memory as the ArrayBuffer's, so it is for blocks that live long
 * (weights), not for activations that come and go. libc is reached through koffi (no C compiler
 * needed); anywhere this cannot work (not Linux, no koffi, THP "never", a failed call) the caller
 * gets null with the reason and keeps its ArrayBuffer.
 */
import { fs, inNode, os } from '../../../platform/index.js';
import { sizeClass } from '../../../runtime/caching-allocator.js';
import type { Storage } from '../../../tensor/storage.js';
import { koffi } from './koffi.js';

/** Linux's constants (asm-generic/mman-common.h): PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, MADV_HUGEPAGE. */
const PROT_RW = 3;
const MAP_PRIVATE_ANON = 0x22;
const MADV_HUGEPAGE = 14;
const HUGE = 2n * 1024n * 1024n;
const PAGE = 4096n;

interface Libc {
  mmap(length: bigint): bigint;
  munmap(addr: bigint, length: bigint): number;
  madvise(addr: bigint, length: bigint, advice: number): number;
  view(addr: bigint, size: number): ArrayBuffer;
}

let libc: Libc | string | undefined;
let blocks = 0;
let bytes = 0;

function loadLibc(): Libc | string {
  if (libc !== undefined) return libc;
  if (!inNode || os.platform() !== 'linux') return (libc = 'transparent huge pages are a Linux feature');
  try {
    const mode = fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
    if (/\[never\]/.test(mode)) return (libc = 'transparent huge pages are off on this machine (/sys/kernel/mm/transparent_hugepage/enabled: never)');
  } catch {
    return (libc = 'this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled missing)');
  }
  try {
    const k = koffi() as unknown as { load(p: string): { func(s: string): (...a: unknown[]) => unknown }; view(p: unknown, n: number): ArrayBuffer };
    const lib = k.load('libc.so.6');
    // Addresses as 64-bit integers (the same registers as pointers on x86-64 and arm64), so the
    // alignment arithmetic happens here.
    const mmap = lib.func('uint64_t mmap(uint64_t addr, size_t length, int prot, int flags, int fd, int64_t offset)');
    const munmap = lib.func('int munmap(uint64_t addr, size_t length)');
    const madvise = lib.func('int madvise(uint64_t addr, size_t length, int advice)');
    libc = {
      mmap: (n) => BigInt(mmap(0, n, PROT_RW, MAP_PRIVATE_ANON, -1, 0) as number | bigint),
      munmap: (a, n) => munmap(a, n) as number,
      madvise: (a, n, adv) => madvise(a, n, adv) as number,
      view: (a, n) => k.view(a, n),
    };
    return libc;
  } catch (e) {
    return (libc = `libc cannot be reached through koffi (${(e as Error).message})`);
  }
}

/** The ArrayBuffers made here (a storage already in one is not moved again). */
const made = new WeakSet<ArrayBuffer>();

const registry = new FinalizationRegistry<{ addr: bigint; length: bigint }>(({ addr, length }) => {
  const c = loadLibc();
  if (typeof c === 'string') return;
  c.munmap(addr, length);
  blocks--;
  bytes -= Number(length);
});

/**
 * An ArrayBuffer of `size` bytes, zero-filled, over a fresh 2 MiB-aligned mapping advised for huge
 * pages before anything touches it, or a string saying why there is none. (A fresh mmap rather than
 * posix_memalign: malloc may serve a few MiB from heap pages already faulted in as 4 KiB pages.)
 */
export function hugePageArrayBuffer(size: number): ArrayBuffer | string {
  if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`hugePageArrayBuffer: size must be a positive integer, got ${size}`);
  const c = loadLibc();
  if (typeof c === 'string') return c;
  const length = ((BigInt(size) + PAGE - 1n) / PAGE) * PAGE;
  const base = c.mmap(length + HUGE);
  if (base === 0xffffffffffffffffn || base === 0n) return `mmap of ${size} bytes failed (out of memory?)`;
  // Keep the 2 MiB-aligned part; give back the head and tail of the over-sized mapping.
  const addr = (base + HUGE - 1n) & ~(HUGE - 1n);
  if (addr > base) c.munmap(base, addr - base);
  const tail = base + length + HUGE - (addr + length);
  if (tail > 0n) c.munmap(addr + length, tail);
  // Advice failure (an old kernel) still leaves an aligned, usable block: keep it.
  c.madvise(addr, length, MADV_HUGEPAGE);
  const buf = c.view(addr, size);
  registry.register(buf, { addr, length });
  made.add(buf);
  blocks++;
  bytes += Number(length);
  return buf;
}

/**
 * Whether large weights can live in huge pages here (`kiln info` prints it): true, or why not.
 * Checks the platform, the kernel's THP mode and libc through koffi; allocates nothing.
 */
export function hugePagesAvailable(): true | string {
  const c = loadLibc();
  return typeof c === 'string' ? c : true;
}

/** Mappings made by hugePageArrayBuffer and not yet collected, and their bytes. */
export function hugePageStats(): { blocks: number; bytes: number } {
  return { blocks, bytes };
}

/** The address of a hugePageArrayBuffer's first byte (tests read /proc/self/smaps for it). */
export function arrayBufferAddress(buf: ArrayBuffer): bigint {
  const k = koffi() as unknown as { address(p: unknown): bigint };
  return BigInt(k.address(buf));
}

/** Storages under this size stay where they are: less than one huge page gains nothing. */
export const HUGE_PAGE_MIN_BYTES = Number(HUGE);

/**
 * Moves a cpu storage of at least HUGE_PAGE_MIN_BYTES into a huge-page mapping (a copy, then
 * Storage.rehome); true when moved, else the reason it stayed.
 */
export function moveStorageToHugePages(storage: Storage): true | string {
  if (storage.device.type !== 'cpu') return `not a cpu storage (${storage.device.toString()})`;
  if (storage.isLent) return 'a lent storage';
  if (storage.nbytes < HUGE_PAGE_MIN_BYTES) return `smaller than ${HUGE_PAGE_MIN_BYTES} bytes`;
  if (made.has(storage.cpuArrayBuffer())) return 'already in huge pages';
  // The allocator's size class, so the block can later serve any allocation of that class.
  const buf = hugePageArrayBuffer(sizeClass(storage.nbytes));
  if (typeof buf === 'string') return buf;
  const n = storage.nbytes;
  storage.rehome(buf, () => new Uint8Array(buf, 0, n).set(new Uint8Array(storage.cpuArrayBuffer(), 0, n)));
  return true;
}
