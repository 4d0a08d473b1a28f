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
 * How a histogram pass counts: 'match' aggregates a warp's equal digits with __match_any_sync
 * before one shared atomic each; 'shared' has every lane add to one block-wide histogram;
 * 'warp' gives each warp its own histogram (256 bins only), summed after the pass.
 */
export type RadixHist = 'match' | 'shared' | 'warp';

export interface RadixOptions {
  /** Bits of key resolved per pass: 8 (256 bins) or 11 (2048 bins). */
  digitBits: 8 | 11;
  hist: RadixHist;
}

/**
 * The digits of a dtype's key, from the top: [shift, width] per pass, covering exactly the bits
 * that carry information. float16 keys carry 19 bits (sign, exponent, 10 mantissa bits: 31..13),
 * bfloat16 keys 16 (31..16); below those the key is fixed by the bits above, so once every digit
 * is resolved, matching keys are equal keys. uint8 and bool keys are the value itself (7..0).
 */
export function radixDigits(d: DType, bits: number): [number, number][] {
  const [top, info] = ((): [number, number] => {
    switch (d) {
      case 'float64':
      case 'int64':
        return [64, 64];
      case 'float32':
      case 'int32':
        return [32, 32];
      case 'float16':
        return [32, 19];
      case 'bfloat16':
        return [32, 16];
      case 'uint8':
      case 'bool':
        return [8, 8];
      default:
        return d satisfies never;
    }
  })();
  const out: [number, number][] = [];
  for (let hi = top; hi > top - info; ) {
    const w = Math.min(bits, hi - (top - info));
    out.push([hi - w, w]);
    hi -= w;
  }
  return out;
}

/** Dynamic shared bytes of the histogram(s) after the candidates (16-byte aligned offset). */
export function radixHistBytes(o: RadixOptions): number {
  return o.hist === 'warp' ? 32 * 256 * 4 : (1 << o.digitBits) * 4;
}

/** Shared bytes per candidate: a packed 64-bit (key, position) for 32-bit keys, else key + int. */
export function radixCandidateBytes(d: DType): number {
  return keyType(d) === 'unsigned int' ? 8 : 12;
}

// (x, vals, idx, rows, R, k, descending, cap)
const RADIX_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i32'];

/**
 * topk by radix select. `cap` (a power of two >= k) bounds the gathered candidates; dynamic shared
 * memory holds cap * radixCandidateBytes of them, then the histogram (radixHistBytes). R < 2^31
 * (positions are 32-bit).
 */
export function radixTopkSource(d: DType, o: RadixOptions): SortKernel {
  if (o.hist === 'warp' && o.digitBits !== 8) throw new Error(`radixTopkSource: per-warp histograms need 8-bit digits, got ${o.digitBits}`);
  const t = storageType(d);
  const K = keyType(d);
  const packed = K === 'unsigned int';
  const max = packed ? '0xffffffffu' : '0xffffffffffffffffull';
  const digits = radixDigits(d, o.digitBits);
  const passes = digits.length;
  const bins = 1 << o.digitBits;
  const perLane = bins / 32;
  // Loads in flight per thread per step: 8 x 4 bytes (4 x 8) keeps about 32 KiB per block moving.
  const unroll = packed ? 8 : 4;
  const name = `kiln_topk_radix_${d}_${o.digitBits}_${o.hist}`;
  const slots = packed
    ? 'unsigned long long* sp = (unsigned long long*)kiln_smem;'
    : `${K}* sk = (${K}*)kiln_smem;
  int* si = (int*)(sk + cap);`;
  const put = (i: string, key: string, pos: string): string => (packed ? `sp[${i}] = ((unsigned long long)(${key}) << 32) | (unsigned int)(${pos});` : `sk[${i}] = ${key}; si[${i}] = ${pos};`);
  const posAt = (i: string): string => (packed ? `(int)(unsigned int)sp[${i}]` : `si[${i}]`);
  const count =
    o.hist === 'match'
      ? 'kiln_radix_count(hist, hit ? digit : 0xffffffffu);'
      : o.hist === 'shared'
        ? 'if (hit) atomicAdd(&hist[digit], 1u);'
        : 'if (hit) atomicAdd(&hist[(warp << 8) + digit], 1u);';
  const histWords = o.hist === 'warp' ? 32 * 256 : bins;
  const source = `${PRELUDE}${KEY_HELPERS}
// hist[d] += 1 for every lane's d, one atomic per distinct d of the warp (d out of range: nothing).
// Every lane of the warp must call it.
__device__ __forceinline__ void kiln_radix_count(unsigned int* hist, unsigned int d) {
  const unsigned int peers = __match_any_sync(0xffffffffu, d);
  if (d < ${bins}u && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[d], (unsigned int)__popc(peers));
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
  __shared__ int s_bucket, s_before, s_count, s_warp[32];
  __shared__ unsigned int s_n;
  ${slots}
  unsigned int* hist = (unsigned int*)(kiln_smem + (((long long)cap * ${radixCandidateBytes(d)} + 15) & ~15ll));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const ${K} flip = descending ? ${max} : (${K})0;
  const long long step = (long long)blockDim.x * ${unroll};
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const ${t}* xr = x + row * R;
    ${K} prefix = 0, mask = 0;
    // need: how many of the elements matching the prefix are wanted; below: elements under it.
    int need = k, below = 0, matching = (int)R;
    bool truncate = false;
    // Digits from the key's top (radixDigits): ${digits.map((x) => `[${x[0]}, ${x[1]}]`).join(' ')}.
    int hi = ${digits[0]![0] + digits[0]![1]};
#pragma unroll 1
    for (int pass = 0; pass < ${passes}; pass++) {
      const int width = hi - ${digits[digits.length - 1]![0]} < ${o.digitBits} ? hi - ${digits[digits.length - 1]![0]} : ${o.digitBits};
      const int shift = hi - width;
      hi = shift;
      const unsigned int digitMask = (1u << width) - 1u;
      for (int i = threadIdx.x; i < ${histWords}; i += blockDim.x) hist[i] = 0u;
      __syncthreads();
      // The same trip count for every thread (the warp-wide match needs all 32 lanes).
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
          const unsigned int digit = (unsigned int)(key[u] >> shift) & digitMask;
          ${count}
        }
      }
      __syncthreads();
${
  o.hist === 'warp'
    ? `      // Sum the warps' histograms into the first.
      for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        unsigned int c = 0u;
        for (int w = 0; w < nwarps; w++) c += hist[(w << 8) + b];
        hist[b] = c;
      }
      __syncthreads();
`
    : ''
}      if (warp == 0) {
        // Lane l owns bins ${perLane}l .. ${perLane}l + ${perLane - 1}; the first lane whose inclusive count reaches need owns the bucket.
        unsigned int sum = 0u;
#pragma unroll 4
        for (int j = 0; j < ${perLane}; j++) sum += hist[${perLane} * lane + j];
        unsigned int incl = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const unsigned int v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += v;
        }
        const int owner = __ffs(__ballot_sync(0xffffffffu, incl >= (unsigned int)need)) - 1;
        if (lane == owner) {
          unsigned int before = incl - sum;
          int b = ${perLane} * lane + ${perLane - 1};
#pragma unroll 1
          for (int j = 0; j < ${perLane}; j++) {
            const unsigned int c = hist[${perLane} * lane + j];
            if (before + c >= (unsigned int)need) { b = ${perLane} * lane + j; break; }
            before += c;
          }
          s_bucket = b; s_before = (int)before; s_count = (int)hist[b];
        }
      }
      __syncthreads();
      need -= s_before; below += s_before; matching = s_count;
      prefix |= (${K})s_bucket << shift;
      mask |= (${K})digitMask << shift;
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
