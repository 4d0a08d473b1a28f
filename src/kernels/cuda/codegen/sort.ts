/**
 * CUDA C for sort / argsort / topk along the last axis of a contiguous [rows, R] block.
 *
 * Order: every value maps to an unsigned key whose ascending order is the wanted order (the bits
 * of a float flipped so they compare as unsigned, NaN above +inf, -0 equal to +0; integers with
 * the sign bit flipped; a descending sort inverts the key), and ties break by position, lower
 * first. That is exactly the CPU kernels' total order (src/kernels/cpu/reduction.ts), so indices
 * match the CPU's, ties included.
 *
 * Three kernels here (and the radix-select topk of long rows in topk-radix.ts, which shares the keys):
 * - `warp` (topk with k <= WARP_MAX_K of rows up to WARP_MAX_R): one warp per row; each lane holds
 *   the keys of positions lane, lane + 32, ... in registers, and each of k rounds is a lane-local
 *   best over the untaken keys plus a warp-wide argmin (shuffles); the winner's lane marks it taken.
 * - `bitonic`: a row (padded to P = next power of two, P <= SORT_MAX) is sorted in shared memory
 *   as (key, position) pairs by a block-level bitonic network; TPR = P / 2 threads own a row
 *   (several rows per block when rows are short) and each compare-exchange is one thread's work
 *   per stage. The first `count` entries are written (count = R for sort, k for topk).
 * - `select`: topk with small k on rows longer than SORT_MAX: each of SELECT_THREADS threads
 *   keeps the L >= k best (key, position) pairs of its strided share of a row segment in
 *   registers (fully unrolled insertion, so the list never touches local memory), then k rounds of
 *   a block-wide argmin over the list heads pick the segment's best k.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { PRELUDE, storageType } from './ctypes.js';

/** Longest row the bitonic kernel sorts: 16384 (key, position) pairs of 64-bit keys use 192 KiB of the H100/H200's 227 KiB shared memory per block. */
export const SORT_MAX = 16384;
/** Largest k of the register-list selection (64 pairs per thread stay in registers). */
export const SELECT_MAX_K = 64;
/** Threads of the selection kernel (4 warps: the merge's block argmin is one shuffle tree and a 4-way compare). */
export const SELECT_THREADS = 128;

/** 64-bit keys for 64-bit dtypes, 32-bit otherwise (half the shared memory and compares). */
export function keyType(d: DType): 'unsigned int' | 'unsigned long long' {
  return d === 'float64' || d === 'int64' ? 'unsigned long long' : 'unsigned int';
}

export function keyBytes(d: DType): number {
  return keyType(d) === 'unsigned int' ? 4 : 8;
}

/** The order-preserving key of a stored value `v` of dtype d (before the descending flip). */
export function keyExpr(d: DType, v: string): string {
  switch (d) {
    case 'float32':
      return `kiln_fkey(${v})`;
    case 'float16':
      return `kiln_fkey(kiln_h2f(${v}))`;
    case 'bfloat16':
      return `kiln_fkey(kiln_bf2f(${v}))`;
    case 'float64':
      return `kiln_dkey(${v})`;
    case 'int32':
      return `((unsigned int)(${v}) ^ 0x80000000u)`;
    case 'int64':
      return `((unsigned long long)(${v}) ^ 0x8000000000000000ull)`;
    case 'uint8':
    case 'bool':
      return `(unsigned int)(${v})`;
    default:
      return d satisfies never;
  }
}

export const KEY_HELPERS = `
// NaN (any payload) above +inf, -0 as +0: the CPU kernels' sortKey.
__device__ __forceinline__ unsigned int kiln_fkey(float v) {
  unsigned int b = __float_as_uint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;
  if ((b & 0x7fffffffu) == 0u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ unsigned long long kiln_dkey(double v) {
  unsigned long long b = (unsigned long long)__double_as_longlong(v);
  if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return 0xffffffffffffffffull;
  if ((b & 0x7fffffffffffffffull) == 0ull) b = 0ull;
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}
template <typename K> __device__ __forceinline__ bool kiln_before(K ka, int ia, K kb, int ib) { return ka < kb || (ka == kb && ia < ib); }
// Bitonic networks over n entries (n a power of two) in shared memory, run by \`threads\` threads
// (thread t of them); every thread of the block must call them. A stage's pairs (lo, lo + j) with
// lo = 2p - (p & (j - 1)) for pair p: for j <= 32 the 32 pairs of a warp stay inside one 64-entry
// block, so a stage only needs the block-wide barrier when it or the next stage has j > 32 (or
// never, when a row's threads are part of one warp); otherwise a warp barrier.
#define KILN_BITONIC_SYNC(j, k, threads) \\
  if ((threads) > 32 && ((j) > 32 || ((j) == 1 && (k) > 32))) __syncthreads(); else __syncwarp();
// 32-bit keys packed over their position: one 64-bit compare orders (key, position).
__device__ __forceinline__ void kiln_bitonic_packed(unsigned long long* s, int n, int t, int threads) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int p = t; p < (n >> 1); p += threads) {
        const int lo = 2 * p - (p & (j - 1));
        const int hi = lo + j;
        const bool up = (lo & k) == 0;
        const unsigned long long a = s[lo], b = s[hi];
        if ((b < a) == up) { s[lo] = b; s[hi] = a; }
      }
      KILN_BITONIC_SYNC(j, k, threads)
    }
  }
  __syncthreads();
}
// 64-bit keys: keys and positions in two arrays.
template <typename K> __device__ __forceinline__ void kiln_bitonic(K* sk, int* si, int n, int t, int threads) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int p = t; p < (n >> 1); p += threads) {
        const int lo = 2 * p - (p & (j - 1));
        const int hi = lo + j;
        const bool up = (lo & k) == 0;
        K a = sk[lo], b = sk[hi]; int ia = si[lo], ib = si[hi];
        if (kiln_before(b, ib, a, ia) == up) { sk[lo] = b; sk[hi] = a; si[lo] = ib; si[hi] = ia; }
      }
      KILN_BITONIC_SYNC(j, k, threads)
    }
  }
  __syncthreads();
}
`;

/**
 * CUDA C that stores and reads a (key, position) pair at shared-memory slot i: one 64-bit word
 * (key above position, so one compare orders them) in `sp` for 32-bit keys, else the key in `sk`
 * and the position in `si`.
 */
export function sharedPairs(packed: boolean): { put(i: string, key: string, pos: string): string; pos(i: string): string } {
  return {
    put: (i, key, pos) => (packed ? `sp[${i}] = ((unsigned long long)(${key}) << 32) | (unsigned int)(${pos});` : `sk[${i}] = ${key}; si[${i}] = ${pos};`),
    pos: (i) => (packed ? `(int)(unsigned int)sp[${i}]` : `si[${i}]`),
  };
}

export interface SortKernel {
  name: string;
  source: string;
  params: ParamType[];
}

// (x, vals, idx, lines, R, P, count, descending, writeVals, rowsPerBlock, chunkLen, chunks)
const BITONIC_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'];

/**
 * Sorts lines of at most P elements (P a power of two) with TPR = blockDim / rowsPerBlock threads
 * per line; writes the first `count` (value, int64 position) pairs per line, contiguous
 * [lines, count]. A line is segment `seg` of row `r` (line = r * chunks + seg): elements
 * [seg * chunkLen, min(R, (seg + 1) * chunkLen)) of the contiguous row, positions given within the
 * row. Whole rows are chunks = 1, chunkLen = R; topk of long rows sorts their segments (sort.ts).
 */
export function bitonicSource(d: DType): SortKernel {
  const t = storageType(d);
  const K = keyType(d);
  const packed = K === 'unsigned int';
  const max = packed ? '0xffffffffu' : '0xffffffffffffffffull';
  const name = `kiln_sort_bitonic_${d}`;
  const slots = packed
    ? `unsigned long long* sp = (unsigned long long*)kiln_smem + (long long)sub * P;`
    : `${K}* sk = (${K}*)kiln_smem + (long long)sub * P;
  int* si = (int*)((${K}*)kiln_smem + (long long)rowsPerBlock * P) + (long long)sub * P;`;
  const { put, pos } = sharedPairs(packed);
  const source = `${PRELUDE}${KEY_HELPERS}
extern "C" __global__ void __launch_bounds__(1024) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ vals, long long* __restrict__ idx,
    long long rows, int R, int P, int count, int descending, int writeVals, int rowsPerBlock, int chunkLen, int chunks) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  const int tpr = blockDim.x / rowsPerBlock;
  const int sub = threadIdx.x / tpr;
  const int t = threadIdx.x % tpr;
  ${slots}
  const ${K} flip = descending ? ${max} : (${K})0;
  // Every thread runs the same number of iterations: the network synchronises the whole block.
  for (long long base = (long long)blockIdx.x * rowsPerBlock; base < rows; base += (long long)gridDim.x * rowsPerBlock) {
    const long long row = base + sub;
    const bool live = row < rows;
    const long long r = row / chunks;
    const int off = (int)(row - r * chunks) * chunkLen;
    const int len = R - off < chunkLen ? R - off : chunkLen;
    const ${t}* xr = x + r * R + off;
    for (int i = t; i < P; i += tpr) {
      if (live && i < len) { ${put('i', `${keyExpr(d, 'xr[i]')} ^ flip`, 'i')} }
      else { ${put('i', max, '0x7fffffff')} }
    }
    __syncthreads();
    ${packed ? 'kiln_bitonic_packed(sp, P, t, tpr);' : `kiln_bitonic<${K}>(sk, si, P, t, tpr);`}
    if (live) {
      for (int i = t; i < count; i += tpr) {
        const int j = ${pos('i')};
        idx[row * count + i] = off + j;
        if (writeVals) vals[row * count + i] = xr[j];
      }
    }
    __syncthreads();
  }
}
`;
  return { name, source, params: BITONIC_PARAMS };
}

// (x, vals, idx, rows, R, k, descending, chunkLen, chunks)
const SELECT_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i64', 'i32'];

/** The list length of the selection kernel for k: the next power of two >= max(k, 8). */
export function selectListLength(k: number): number {
  let n = 8;
  while (n < k) n <<= 1;
  return n;
}

/**
 * topk of long rows (R > SORT_MAX) for k <= SELECT_MAX_K: register lists, then a k-round merge.
 * Each row is cut into `chunks` segments of chunkLen (the last may be shorter but holds >= k);
 * a block takes one (row, segment) and writes that segment's best k as (value, row position) to
 * [rows * chunks, k]. With one chunk that is the answer; with more, the host runs topk again over
 * the rows * (chunks * k) candidates, whose (key, candidate position) order equals the (key,
 * position) order because segments and their lists are both in position order.
 */
export function selectSource(d: DType, L: number): SortKernel {
  const t = storageType(d);
  const K = keyType(d);
  const max = K === 'unsigned int' ? '0xffffffffu' : '0xffffffffffffffffull';
  const name = `kiln_topk_select_${d}_${L}`;
  const W = SELECT_THREADS / 32;
  const source = `${PRELUDE}${KEY_HELPERS}
extern "C" __global__ void __launch_bounds__(${SELECT_THREADS}) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ vals, long long* __restrict__ idx,
    long long rows, long long R, int k, int descending, long long chunkLen, int chunks) {
  __shared__ ${K} wk[${W}];
  __shared__ int wi[${W}];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const ${K} flip = descending ? ${max} : (${K})0;
  for (long long v = blockIdx.x; v < rows * chunks; v += gridDim.x) {
    const long long row = v / chunks;
    const long long start = (v % chunks) * chunkLen;
    const long long end = start + chunkLen < R ? start + chunkLen : R;
    const ${t}* xr = x + row * R;
    ${K} lk[${L}]; int li[${L}];
#pragma unroll
    for (int j = 0; j < ${L}; j++) { lk[j] = ${max}; li[j] = 0x7fffffff; }
    // Positions grow along a thread's share, so a new pair never beats an equal key it finds; the
    // sentinel (max key, INT_MAX) loses to every real pair, NaN's max key included. The insertion
    // runs the whole unrolled chain (an early exit makes the compiler spill the list).
    for (long long i = start + threadIdx.x; i < end; i += ${SELECT_THREADS}) {
      const ${K} key = ${keyExpr(d, 'xr[i]')} ^ flip;
      if (kiln_before(key, (int)i, lk[${L - 1}], li[${L - 1}])) {
        lk[${L - 1}] = key; li[${L - 1}] = (int)i;
#pragma unroll
        for (int j = ${L - 1}; j > 0; j--) {
          if (kiln_before(lk[j], li[j], lk[j - 1], li[j - 1])) {
            ${K} tk = lk[j]; lk[j] = lk[j - 1]; lk[j - 1] = tk;
            int ti = li[j]; li[j] = li[j - 1]; li[j - 1] = ti;
          }
        }
      }
    }
    // Merge: k rounds of a block-wide argmin over the lists' heads; the owner of the winner (a
    // position is in one list only) pops it. Each list holds its thread's best L >= k, so the
    // block's best k are among the heads as they are popped.
    for (int r = 0; r < k; r++) {
      ${K} hk = lk[0]; int hi = li[0];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const ${K} ok = __shfl_xor_sync(0xffffffffu, hk, o);
        const int oi = __shfl_xor_sync(0xffffffffu, hi, o);
        if (kiln_before(ok, oi, hk, hi)) { hk = ok; hi = oi; }
      }
      if (lane == 0) { wk[warp] = hk; wi[warp] = hi; }
      __syncthreads();
      ${K} bk = wk[0]; int bi = wi[0];
#pragma unroll
      for (int w = 1; w < ${W}; w++) if (kiln_before(wk[w], wi[w], bk, bi)) { bk = wk[w]; bi = wi[w]; }
      __syncthreads();
      if (li[0] == bi) {
#pragma unroll
        for (int j = 0; j < ${L - 1}; j++) { lk[j] = lk[j + 1]; li[j] = li[j + 1]; }
        lk[${L - 1}] = ${max}; li[${L - 1}] = 0x7fffffff;
      }
      if (threadIdx.x == 0) {
        idx[v * k + r] = bi;
        if (vals) vals[v * k + r] = xr[bi];
      }
    }
  }
}
`;
  return { name, source, params: SELECT_PARAMS };
}

// (cand, sel, out, rows, n, k): out[r, i] = cand[r, sel[r, i]]
const PICK_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i32'];

/** Maps second-stage picks (positions among a row's candidates) to the candidates' row positions. */
export function pickSource(): SortKernel {
  const name = 'kiln_topk_pick';
  const source = `
extern "C" __global__ void __launch_bounds__(256) ${name}(const long long* __restrict__ cand, const long long* __restrict__ sel, long long* __restrict__ out,
    long long rows, int n, int k) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < rows * k; i += (long long)gridDim.x * blockDim.x) {
    out[i] = cand[(i / k) * n + sel[i]];
  }
}
`;
  return { name, source, params: PICK_PARAMS };
}

/** Longest row of the warp kernel: 32 keys per lane in registers. */
export const WARP_MAX_R = 1024;
/** Most rounds of the warp kernel: past this a full bitonic sort of the row costs less. */
export const WARP_MAX_K = 32;
/** Rows (warps) per block of the warp kernel. */
export const WARP_ROWS = 4;

// (x, vals, idx, rows, R, k, descending)
const WARP_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i32', 'i32', 'i32'];

/** Keys per lane of the warp kernel for rows of R: the next power of two >= R / 32. */
export function warpKeysPerLane(R: number): number {
  let v = 1;
  while (v * 32 < R) v <<= 1;
  return v;
}

/** topk of short rows (R <= WARP_MAX_R, k <= WARP_MAX_K): one warp per row, k argmin rounds. */
export function warpSelectSource(d: DType, vpt: number): SortKernel {
  const t = storageType(d);
  const K = keyType(d);
  const max = K === 'unsigned int' ? '0xffffffffu' : '0xffffffffffffffffull';
  const name = `kiln_topk_warp_${d}_${vpt}`;
  const source = `${PRELUDE}${KEY_HELPERS}
extern "C" __global__ void __launch_bounds__(${WARP_ROWS * 32}) ${name}(const ${t}* __restrict__ x, ${t}* __restrict__ vals, long long* __restrict__ idx,
    long long rows, int R, int k, int descending) {
  const int lane = threadIdx.x & 31;
  const ${K} flip = descending ? ${max} : (${K})0;
  for (long long row = (long long)blockIdx.x * ${WARP_ROWS} + (threadIdx.x >> 5); row < rows; row += (long long)gridDim.x * ${WARP_ROWS}) {
    const ${t}* xr = x + row * R;
    ${K} key[${vpt}];
    unsigned int taken = 0u;
#pragma unroll
    for (int i = 0; i < ${vpt}; i++) {
      const int e = lane + 32 * i;
      if (e < R) key[i] = ${keyExpr(d, 'xr[e]')} ^ flip; else { key[i] = ${max}; taken |= 1u << i; }
    }
    for (int r = 0; r < k; r++) {
      ${K} bk = ${max}; int bi = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < ${vpt}; i++) {
        // Positions grow with i, so a strict key compare keeps the lower position on ties.
        if (!((taken >> i) & 1u) && (key[i] < bk || bi == 0x7fffffff)) { bk = key[i]; bi = lane + 32 * i; }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        ${K} ok = __shfl_xor_sync(0xffffffffu, bk, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (kiln_before(ok, oi, bk, bi)) { bk = ok; bi = oi; }
      }
      if (lane == (bi & 31)) taken |= 1u << (bi >> 5);
      if (lane == 0) {
        idx[row * k + r] = bi;
        if (vals) vals[row * k + r] = xr[bi];
      }
    }
  }
}
`;
  return { name, source, params: WARP_PARAMS };
}
