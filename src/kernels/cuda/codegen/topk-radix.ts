/**
 * CUDA C for topk of long rows by radix select: one block of RADIX_THREADS threads per row of a
 * contiguous [rows, R] block (grid-stride over rows).
 *
 * Keys are those of sort.ts (the wanted order as unsigned ascending, a descending topk inverts
 * them), so the k wanted elements are the k smallest (key, position) pairs. The block narrows
 * them down a digit of 8 bits at a time, from the key's top: a pass histograms the digit of the
 * elements that still match the prefix found so far, and the bucket where the running count
 * reaches the number still needed extends the prefix. Elements whose key is below the prefix are
 * all wanted; those matching it are candidates. Once wanted + candidates fit in `cap` (usually
 * after one or two passes), one more pass over the row gathers them into shared memory as
 * (key, position) pairs, which a bitonic sort orders; the first k are written. When every digit
 * has been resolved and they still do not fit, the matching elements share one key, and only the
 * first ones in row order are gathered (a block-wide ordered count), as many as are still needed.
 *
 * Each pass reads the whole row (L2 serves the later ones for rows that fit in it) but no pass
 * launches a kernel, sorts, or writes to global memory: against the earlier segment-then-merge
 * passes this replaces 2-4 launches and a sort of every segment with reads.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { PRELUDE, storageType } from './ctypes.js';
import { KEY_HELPERS, keyExpr, keyType, type SortKernel } from './sort.js';

/** Threads per row: a whole block, so that a row's loads keep enough bytes in flight. */
export const RADIX_THREADS = 1024;

/**
 * Digit passes that resolve every bit of information in a dtype's key, and the lowest bit of the
 * first digit. float16 keys carry 19 bits (sign, exponent, 10 mantissa bits: 31..13), bfloat16
 * keys 16 (31..16); below those the key is fixed by the bits above, so after the passes matching
 * keys are equal keys. uint8 and bool keys are the value itself (bits 7..0).
 */
export function radixPasses(d: DType): { passes: number; shift0: number } {
  switch (d) {
    case 'float64':
    case 'int64':
      return { passes: 8, shift0: 56 };
    case 'float32':
    case 'int32':
      return { passes: 4, shift0: 24 };
    case 'float16':
      return { passes: 3, shift0: 24 };
    case 'bfloat16':
      return { passes: 2, shift0: 24 };
    case 'uint8':
    case 'bool':
      return { passes: 1, shift0: 0 };
    default:
      return d satisfies never;
  }
}

/** Shared bytes per candidate: a packed 64-bit (key, position) for 32-bit keys, else key + int. */
export function radixCandidateBytes(d: DType): number {
  return keyType(d) === 'unsigned int' ? 8 : 12;
}

// (x, vals, idx, rows, R, k, descending, cap)
const RADIX_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i32'];

/**
 * topk by radix select. `cap` (a power of two >= k) bounds the gathered candidates and sizes the
 * dynamic shared memory (cap * radixCandidateBytes). R < 2^31 (positions are 32-bit).
 */
export function radixTopkSource(d: DType): SortKernel {
  const t = storageType(d);
  const K = keyType(d);
  const packed = K === 'unsigned int';
  const max = packed ? '0xffffffffu' : '0xffffffffffffffffull';
  const { passes, shift0 } = radixPasses(d);
  // Loads in flight per thread per step: 8 x 4 bytes (4 x 8) keeps about 32 KiB per block moving.
  const unroll = packed ? 8 : 4;
  const name = `kiln_topk_radix_${d}`;
  const slots = packed
    ? 'unsigned long long* sp = (unsigned long long*)kiln_smem;'
    : `${K}* sk = (${K}*)kiln_smem;
  int* si = (int*)(sk + cap);`;
  const put = (i: string, key: string, pos: string): string => (packed ? `sp[${i}] = ((unsigned long long)(${key}) << 32) | (unsigned int)(${pos});` : `sk[${i}] = ${key}; si[${i}] = ${pos};`);
  const posAt = (i: string): string => (packed ? `(int)(unsigned int)sp[${i}]` : `si[${i}]`);
  const source = `${PRELUDE}${KEY_HELPERS}
// hist[d] += 1 for every lane's d, one atomic per distinct d of the warp (d == 256: nothing).
// Every lane of the warp must call it.
__device__ __forceinline__ void kiln_radix_count(unsigned int* hist, unsigned int d) {
  const unsigned int peers = __match_any_sync(0xffffffffu, d);
  if (d < 256u && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[d], (unsigned int)__popc(peers));
}
// A slot in the candidate list for every lane with take set, one shared atomic per warp.
// Every lane of the warp must call it; returns -1 for lanes that take nothing.
__device__ __forceinline__ int kiln_radix_slot(unsigned int* counter, bool take) {
  const unsigned int ballot = __ballot_sync(0xffffffffu, take);
  if (ballot == 0u) return -1;
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(ballot) - 1;
  unsigned int base = 0u;
  if (lane == leader) base = atomicAdd(counter, (unsigned int)__popc(ballot));
  base = __shfl_sync(0xffffffffu, base, leader);
  return take ? (int)(base + __popc(ballot & ((1u << lane) - 1u))) : -1;
}
extern "C" __global__ void __launch_bounds__(${RADIX_THREADS}, 1) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ vals, long long* __restrict__ idx,
    long long rows, long long R, int k, int descending, int cap) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  __shared__ unsigned int hist[256];
  __shared__ int s_bucket, s_before, s_count, s_warp[32];
  __shared__ unsigned int s_n;
  ${slots}
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const ${K} flip = descending ? ${max} : (${K})0;
  const long long step = (long long)blockDim.x * ${unroll};
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const ${t}* xr = x + row * R;
    ${K} prefix = 0, mask = 0;
    // need: how many of the elements matching the prefix are wanted; below: elements under it.
    int need = k, below = 0, matching = (int)R;
    bool truncate = false;
    for (int pass = 0; pass < ${passes}; pass++) {
      const int shift = ${shift0} - 8 * pass;
      for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0u;
      __syncthreads();
      // The same trip count for every thread: the warp-wide match needs all 32 lanes.
      for (long long base = 0; base < R; base += step) {
        ${K} key[${unroll}];
#pragma unroll
        for (int u = 0; u < ${unroll}; u++) {
          const long long i = base + (long long)u * blockDim.x + threadIdx.x;
          key[u] = i < R ? (${keyExpr(d, 'xr[i]')} ^ flip) : (${K})0;
        }
#pragma unroll
        for (int u = 0; u < ${unroll}; u++) {
          const long long i = base + (long long)u * blockDim.x + threadIdx.x;
          const bool hit = i < R && (key[u] & mask) == prefix;
          kiln_radix_count(hist, hit ? (unsigned int)((key[u] >> shift) & 255u) : 256u);
        }
      }
      __syncthreads();
      if (warp == 0) {
        // Lane l owns bins 8l .. 8l + 7; the first lane whose inclusive count reaches need owns the bucket.
        unsigned int c[8], sum = 0u;
#pragma unroll
        for (int j = 0; j < 8; j++) { c[j] = hist[8 * lane + j]; sum += c[j]; }
        unsigned int incl = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const unsigned int v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += v;
        }
        const int owner = __ffs(__ballot_sync(0xffffffffu, incl >= (unsigned int)need)) - 1;
        if (lane == owner) {
          unsigned int before = incl - sum;
          int b = 8 * lane + 7;
#pragma unroll
          for (int j = 0; j < 8; j++) {
            if (before + c[j] >= (unsigned int)need) { b = 8 * lane + j; break; }
            before += c[j];
          }
          s_bucket = b; s_before = (int)before; s_count = (int)hist[b];
        }
      }
      __syncthreads();
      need -= s_before; below += s_before; matching = s_count;
      prefix |= (${K})s_bucket << shift;
      mask |= (${K})255u << shift;
      __syncthreads();
      if (below + matching <= cap) break;
      if (pass == ${passes - 1}) truncate = true;
    }
    if (threadIdx.x == 0) s_n = 0u;
    __syncthreads();
    if (!truncate) {
      // Everything below or matching the prefix: below + matching <= cap.
      for (long long base = 0; base < R; base += step) {
        ${K} key[${unroll}];
#pragma unroll
        for (int u = 0; u < ${unroll}; u++) {
          const long long i = base + (long long)u * blockDim.x + threadIdx.x;
          key[u] = i < R ? (${keyExpr(d, 'xr[i]')} ^ flip) : (${K})0;
        }
#pragma unroll
        for (int u = 0; u < ${unroll}; u++) {
          const long long i = base + (long long)u * blockDim.x + threadIdx.x;
          const int slot = kiln_radix_slot(&s_n, i < R && (key[u] & mask) <= prefix);
          if (slot >= 0) { ${put('slot', 'key[u]', '(int)i')} }
        }
      }
    } else {
      // The matching elements share one key: take all below it and the first \`need\` matching
      // ones in row order (their rank: matches in earlier tiles, earlier warps, earlier lanes).
      int seen = 0;
      for (long long base = 0; base < R; base += blockDim.x) {
        const long long i = base + threadIdx.x;
        const ${K} key = i < R ? (${keyExpr(d, 'xr[i]')} ^ flip) : (${K})0;
        const bool isBelow = i < R && (key & mask) < prefix;
        const bool isMatch = i < R && (key & mask) == prefix;
        const unsigned int m = __ballot_sync(0xffffffffu, isMatch);
        if (lane == 0) s_warp[warp] = __popc(m);
        __syncthreads();
        int rank = seen + __popc(m & ((1u << lane) - 1u)), total = 0;
        for (int w = 0; w < nwarps; w++) {
          if (w < warp) rank += s_warp[w];
          total += s_warp[w];
        }
        const int slot = kiln_radix_slot(&s_n, isBelow || (isMatch && rank < need));
        if (slot >= 0) { ${put('slot', 'key', '(int)i')} }
        seen += total;
        __syncthreads();
      }
    }
    __syncthreads();
    const int n = (int)s_n;
    int P = 1;
    while (P < n) P <<= 1;
    for (int i = n + threadIdx.x; i < P; i += blockDim.x) { ${put('i', max, '0x7fffffff')} }
    __syncthreads();
    ${packed ? 'kiln_bitonic_packed(sp, P, threadIdx.x, blockDim.x);' : `kiln_bitonic<${K}>(sk, si, P, threadIdx.x, blockDim.x);`}
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const int j = ${posAt('i')};
      idx[row * k + i] = j;
      if (vals) vals[row * k + i] = xr[j];
    }
    __syncthreads();
  }
}
`;
  return { name, source, params: RADIX_PARAMS };
}
