/**
 * L2 prefetch of weight ranges (KILN_CUDA_L2_PREFETCH; the plan of which weights and when is
 * compile/codegen/cuda/l2-prefetch-plan.ts). A decode step at small batches alternates kernels
 * that stream weights (the GEMVs, DRAM-bound) with kernels that are latency-bound and read little
 * (paged attention: about 1 MB of K/V a layer at batch 1, 8-9 us on the H200). This kernel asks
 * the memory system to pull the next GEMVs' weights into L2 while such a kernel runs, so that the
 * GEMVs after it read from L2 instead of DRAM.
 *
 * The kernel issues `cp.async.bulk.prefetch.L2.global` (sm_90+; a no-op elsewhere) over 8 KiB
 * chunks of up to four ranges, in order (the first range is used first), each thread taking
 * chunks `grid-stride` apart, and loads nothing into registers: a prefetch is a hint, so the
 * results of every kernel are bit-identical with or without it. The whole body is a PDL pre-wait
 * section (runtime/cuda/pdl.ts), so under PDL it runs while the kernel before it still drains and
 * then only waits for it. The grid is spread over many SMs (one chunk a thread) so that no single
 * SM's copy unit issues a whole range: its issue rate was not measured, and a one-block launch
 * would depend on it.
 */
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import { PREFETCH_BEGIN, PREFETCH_END } from '../../runtime/cuda/pdl.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';

/** Ranges one launch takes (a layer's o, gate|up and down weights, and one more). */
export const L2_PREFETCH_MAX_RANGES = 4;
/** Bytes one prefetch instruction asks for (a multiple of 16, as the instruction requires). */
export const L2_PREFETCH_CHUNK = 8192;
/** One warp a block: a block's chunks are one instruction per thread. */
const THREADS = 32;
const NAME = 'kiln_l2_prefetch';
const PARAMS: readonly ParamType[] = Array.from({ length: L2_PREFETCH_MAX_RANGES }, () => ['ptr', 'i64'] as const).flat();

/** The kernel's source, rendered once (it has no parameters). */
let source: string | undefined;

/** Launches and bytes asked for (tests and benchmarks read it). */
export const l2PrefetchStats = { launches: 0, bytes: 0 };

/** One device range: its address and length in bytes. */
export interface L2Range {
  readonly ptr: number;
  readonly bytes: number;
}

/**
 * The kernel's CUDA C. The chunks of all ranges are numbered in order (range 0's first), thread t
 * of the grid takes chunks t, t + threads, ...; chunk j of range r covers bytes
 * [j * CHUNK, min((j + 1) * CHUNK, n_r)), rounded down to 16 bytes (the instruction's granule; a
 * tail under 16 bytes is left to the kernel that reads it).
 */
export function l2PrefetchSource(): string {
  const R = L2_PREFETCH_MAX_RANGES;
  const C = L2_PREFETCH_CHUNK;
  const args = Array.from({ length: R }, (_, r) => `const char* __restrict__ p${r}, long long n${r}`).join(', ');
  const ends = Array.from({ length: R }, (_, r) => `  const long long e${r} = ${r === 0 ? '' : `e${r - 1} + `}(n${r} + ${C - 1}ll) / ${C}ll;`).join('\n');
  // Range of chunk i: the first r with i < e_r (nested conditionals: no arrays in the section).
  const pick = (field: (r: number) => string): string => Array.from({ length: R - 1 }, (_, r) => `i < e${r} ? ${field(r)} : `).join('') + field(R - 1);
  return `
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(${args}) {
  ${PREFETCH_BEGIN} L2 prefetches only: the whole kernel runs before the PDL wait
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
${ends}
  const long long stride = (long long)gridDim.x * ${THREADS};
  for (long long i = (long long)blockIdx.x * ${THREADS} + threadIdx.x; i < e${R - 1}; i += stride) {
    const char* p = ${pick((r) => `p${r}`)};
    const long long n = ${pick((r) => `n${r}`)};
    const long long off = (${pick((r) => (r === 0 ? 'i' : `i - e${r - 1}`))}) * ${C}ll;
    const long long left = n - off;
    const unsigned int bytes = (unsigned int)(left < ${C}ll ? left : ${C}ll) & ~15u;
    if (bytes > 0u) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p + off), "r"(bytes) : "memory");
  }
#endif
  ${PREFETCH_END}
}
`;
}

/**
 * Blocks of a launch over `chunks` chunks: one chunk per thread (so each SM issues a few
 * instructions, not hundreds), at most two blocks per SM beyond which threads loop.
 */
export function l2PrefetchBlocks(chunks: number, sms: number): number {
  return Math.max(1, Math.min(2 * sms, Math.ceil(chunks / THREADS)));
}

/**
 * Enqueues the prefetch of `ranges` (at most L2_PREFETCH_MAX_RANGES, empty ones skipped) on
 * `stream` of device `index`. Nothing to wait for and nothing to free: the kernel only issues hints.
 */
export function prefetchToL2(index: number, stream: CudaStream, ranges: readonly L2Range[]): void {
  const used = ranges.filter((r) => r.bytes >= 16);
  if (used.length === 0) return;
  if (used.length > L2_PREFETCH_MAX_RANGES) throw new Error(`l2 prefetch: at most ${L2_PREFETCH_MAX_RANGES} ranges a launch, got ${used.length}`);
  const args: number[] = [];
  let chunks = 0;
  let bytes = 0;
  for (let r = 0; r < L2_PREFETCH_MAX_RANGES; r++) {
    const range = used[r];
    args.push(range?.ptr ?? 0, range?.bytes ?? 0);
    if (range) {
      chunks += Math.ceil(range.bytes / L2_PREFETCH_CHUNK);
      bytes += range.bytes;
    }
  }
  source ??= l2PrefetchSource();
  const kern = kernelFromSource(index, source, NAME, PARAMS);
  launch(kern, args, { grid: l2PrefetchBlocks(chunks, deviceInfo(index).smCount), block: THREADS }, stream);
  l2PrefetchStats.launches++;
  l2PrefetchStats.bytes += bytes;
}
