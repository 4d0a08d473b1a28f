/**
 * CUDA C for topk of long rows by radix select, spread over many blocks per row.
 *
 * Keys are those of sort.ts (the wanted order as unsigned ascending; a descending topk inverts
 * them), so the k wanted elements are the k smallest (key, position) pairs. A row's k-th key is
 * narrowed down one digit of RADIX_BITS at a time from the key's top:
 *
 * - `hist` (one launch per digit, B blocks per row, each over a slice of the row): every block
 *   histograms the digit of its elements that match the prefix found so far into shared memory
 *   and adds the non-zero bins to the row's histogram in global memory. The row's last block to
 *   finish (a counter per row and pass) scans that histogram for the bucket where the running
 *   count reaches the number still needed, extends the row's prefix in `state`, and clears the
 *   histogram for the next pass. Once the elements below the prefix plus those matching it fit in
 *   `cap`, the row is done and later passes return at once.
 * - `collect` (same grid): every block appends its elements at or below the prefix to the row's
 *   candidate list (a global counter; the order does not matter, positions travel with keys).
 * - `finish` (one block per row): sorts the row's candidates as (key, position) pairs in shared
 *   memory (bitonic) and writes the first k. When every digit was resolved and the candidates
 *   still do not fit, the matching elements all share one key, and this block gathers them itself
 *   in row order (a block-wide ordered count), taking only the first ones still needed.
 *
 * One block per row reading the whole row, as a first version did, was limited by the memory
 * requests one SM keeps in flight (about 15 GB/s, 0.1 ms for a 151936-element row on the H200);
 * spreading a row over many blocks reads it at the device's bandwidth.
 */
import type { DType } from '../../../tensor/dtype.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';
import { PRELUDE, storageType } from './ctypes.js';
import { KEY_HELPERS, keyExpr, keyType, sharedPairs, type SortKernel } from './sort.js';

/** Bits resolved per histogram pass: 2048 bins. A 151936-element float32 row of normal values
 * usually fits in the candidates after one pass at 11 bits; 8-bit digits took two passes and were
 * 30% slower in the one-block version (bench/cuda-topk.ts, session 7). */
export const RADIX_BITS = 11;
const BINS = 1 << RADIX_BITS;
/** Threads of the hist and collect blocks. */
export const RADIX_THREADS = 512;
/** Threads of the finish block (one per row: its bitonic sort works on up to SORT_MAX pairs). */
export const RADIX_FINISH_THREADS = 1024;
/** Bytes of one row's state record: prefix and mask (64-bit keys), need, below, matching, flags. */
export const RADIX_STATE_BYTES = 32;

/**
 * The digits of a dtype's key from the top, as [shift, width] per pass, covering exactly the bits
 * that carry information. float16 keys carry 19 bits (sign, exponent, 10 mantissa bits: 31..13),
 * bfloat16 keys 16 (31..16); below those the key is fixed by the bits above, so once every digit
 * is resolved, matching keys are equal keys. uint8 and bool keys are the value itself (7..0).
 */
export function radixDigits(d: DType): [number, number][] {
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
    const w = Math.min(RADIX_BITS, hi - (top - info));
    out.push([hi - w, w]);
    hi -= w;
  }
  return out;
}

/** Bytes per candidate: a packed 64-bit (key, position) for 32-bit keys, else key + int. */
export function radixCandidateBytes(d: DType): number {
  return keyType(d) === 'unsigned int' ? 8 : 12;
}

/** Zeroed work words per row: a counter per pass (blocks done), the candidate count, the histogram. */
export function radixCounterWords(d: DType): number {
  return radixDigits(d).length + 1 + BINS;
}

const STATE_STRUCT = `
struct kiln_radix_state { unsigned long long prefix, mask; int need, below, matching, flags; };
#define KILN_RADIX_DONE 1
#define KILN_RADIX_TRUNCATE 2
`;

function common(d: DType): { t: string; K: string; packed: boolean; max: string; unroll: number; head: string } {
  const K = keyType(d);
  const packed = K === 'unsigned int';
  return {
    t: storageType(d),
    K,
    packed,
    max: packed ? '0xffffffffu' : '0xffffffffffffffffull',
    // Loads in flight per thread per step: 8 x 4 bytes (4 x 8).
    unroll: packed ? 8 : 4,
    head: `${PRELUDE}${KEY_HELPERS}${STATE_STRUCT}`,
  };
}

/**
 * The loop over a (row, part) block's slice [start, end) of its row: `unroll` keys loaded per
 * thread before any is used (to keep that many loads in flight), then `body` once per key with
 * `i` its position and `key[u]` its key (0 beyond the slice). `decls` go between the bounds and
 * the loop.
 */
function sliceLoop(d: DType, K: string, unroll: number, decls: string, body: string): string {
  return `  const long long start = (long long)part * chunk;
  const long long end = start + chunk < R ? start + chunk : R;
${decls}  for (long long base = start; base < end; base += (long long)blockDim.x * ${unroll}) {
    ${K} key[${unroll}];
#pragma unroll
    for (int u = 0; u < ${unroll}; u++) {
      const long long i = base + (long long)u * blockDim.x + threadIdx.x;
      key[u] = i < end ? (${keyExpr(d, 'xr[i]')} ^ flip) : (${K})0;
    }
#pragma unroll
    for (int u = 0; u < ${unroll}; u++) {
      const long long i = base + (long long)u * blockDim.x + threadIdx.x;
      ${body}
    }
  }`;
}

// (x, state, counters, rows, R, k, descending, cap, pass, blocksPerRow, chunk)
const HIST_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i32', 'i32', 'i32', 'i64'];

/**
 * One digit pass over rows * blocksPerRow blocks; block b of a row takes positions
 * [b * chunk, min(R, (b + 1) * chunk)). `state` ([rows] records) and `counters` ([rows,
 * radixCounterWords]) start zeroed; pass 0 ignores `state` and writes it.
 */
export function radixHistSource(d: DType): SortKernel {
  const { t, K, max, unroll, head } = common(d);
  const digits = radixDigits(d);
  const passes = digits.length;
  const low = digits[passes - 1]![0];
  const name = `kiln_topk_radix_hist_${d}`;
  const source = `${head}
extern "C" __global__ void __launch_bounds__(${RADIX_THREADS}, 2) ${name}(const ${t}* __restrict__ x, kiln_radix_state* __restrict__ state,
    unsigned int* __restrict__ counters, long long rows, long long R, int k, int descending, int cap, int pass, int blocksPerRow, long long chunk) {
  __shared__ unsigned int hist[${BINS}];
  __shared__ int s_last, s_warp[${RADIX_THREADS / 32}];
  const long long row = blockIdx.x / blocksPerRow;
  const int part = (int)(blockIdx.x - row * blocksPerRow);
  if (row >= rows) return;
  kiln_radix_state* st = state + row;
  unsigned int* cnt = counters + row * ${radixCounterWords(d)};
  unsigned int* ghist = cnt + ${passes + 1};
  ${K} prefix = 0, mask = 0;
  int need = k, below = 0;
  if (pass > 0) {
    if (st->flags & KILN_RADIX_DONE) return;
    prefix = st->prefix; mask = st->mask; need = st->need; below = st->below;
  }
  // This pass's digit (radixDigits: ${digits.map((x) => `[${x[0]}, ${x[1]}]`).join(' ')}).
  int hi = ${digits[0]![0] + digits[0]![1]}, width = 0;
  for (int p = 0; p <= pass; p++) {
    width = hi - ${low} < ${RADIX_BITS} ? hi - ${low} : ${RADIX_BITS};
    hi -= width;
  }
  const int shift = hi;
  const unsigned int digitMask = (1u << width) - 1u;
  for (int i = threadIdx.x; i < ${BINS}; i += blockDim.x) hist[i] = 0u;
  __syncthreads();
  const ${K} flip = descending ? ${max} : (${K})0;
  const ${t}* xr = x + row * R;
${sliceLoop(d, K, unroll, '', 'if (i < end && (key[u] & mask) == prefix) atomicAdd(&hist[(unsigned int)(key[u] >> shift) & digitMask], 1u);')}
  __syncthreads();
  for (int i = threadIdx.x; i < ${BINS}; i += blockDim.x) {
    const unsigned int c = hist[i];
    if (c) atomicAdd(&ghist[i], c);
  }
  // The row's last block of this pass (its counter reaches blocksPerRow) picks the bucket.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&cnt[pass], 1u) == (unsigned int)blocksPerRow - 1u;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Block-wide inclusive scan of the row's bins: thread t owns ${BINS / RADIX_THREADS} consecutive bins.
  const int per = ${BINS / RADIX_THREADS};
  unsigned int c[${BINS / RADIX_THREADS}], sum = 0u;
#pragma unroll
  for (int j = 0; j < per; j++) { c[j] = __ldcg(&ghist[threadIdx.x * per + j]); sum += c[j]; }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned int incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) s_warp[warp] = (int)incl;
  __syncthreads();
  unsigned int before = incl - sum;
  for (int w = 0; w < warp; w++) before += (unsigned int)s_warp[w];
  // The owner of the bucket: its bins' range holds the crossing of need.
  if (before < (unsigned int)need && before + sum >= (unsigned int)need) {
    int b = threadIdx.x * per + per - 1, matching = 0;
#pragma unroll
    for (int j = 0; j < per; j++) {
      if (before + c[j] >= (unsigned int)need) { b = threadIdx.x * per + j; matching = (int)c[j]; break; }
      before += c[j];
    }
    const int nowBelow = below + (int)before;
    st->prefix = prefix | ((${K})b << shift);
    st->mask = mask | ((${K})digitMask << shift);
    st->need = need - (int)before;
    st->below = nowBelow;
    st->matching = matching;
    st->flags = nowBelow + matching <= cap ? KILN_RADIX_DONE : pass == ${passes - 1} ? KILN_RADIX_TRUNCATE : 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < ${BINS}; i += blockDim.x) ghist[i] = 0u;
}
`;
  return { name, source, params: HIST_PARAMS };
}

// (x, state, counters, cand, rows, R, descending, cap, blocksPerRow, chunk)
const COLLECT_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i32', 'i64'];

/** Appends each row's elements at or below its prefix to `cand` ([rows, cap] pairs); rows to truncate are left to finish. */
export function radixCollectSource(d: DType): SortKernel {
  const { t, K, packed, max, unroll, head } = common(d);
  const passes = radixDigits(d).length;
  const name = `kiln_topk_radix_collect_${d}`;
  const put = packed
    ? 'cp[slot] = ((unsigned long long)key[u] << 32) | (unsigned int)i;'
    : `ck[slot] = key[u]; ci[slot] = (int)i;`;
  const source = `${head}
extern "C" __global__ void __launch_bounds__(${RADIX_THREADS}, 2) ${name}(const ${t}* __restrict__ x, const kiln_radix_state* __restrict__ state,
    unsigned int* __restrict__ counters, unsigned char* __restrict__ cand, long long rows, long long R, int descending, int cap, int blocksPerRow, long long chunk) {
  const long long row = blockIdx.x / blocksPerRow;
  const int part = (int)(blockIdx.x - row * blocksPerRow);
  if (row >= rows) return;
  const kiln_radix_state st = state[row];
  if (st.flags & KILN_RADIX_TRUNCATE) return;
  unsigned int* count = counters + row * ${radixCounterWords(d)} + ${passes};
  ${
    packed
      ? 'unsigned long long* cp = (unsigned long long*)cand + row * cap;'
      : `${K}* ck = (${K}*)cand + row * cap;
  int* ci = (int*)((${K}*)cand + rows * cap) + row * cap;`
  }
  const ${K} flip = descending ? ${max} : (${K})0;
  const ${K} prefix = (${K})st.prefix, mask = (${K})st.mask;
  const ${t}* xr = x + row * R;
${sliceLoop(d, K, unroll, '  const int lane = threadIdx.x & 31;\n', `const bool take = i < end && (key[u] & mask) <= prefix;
      // One global atomic per warp for its takers.
      const unsigned int ballot = __ballot_sync(0xffffffffu, take);
      if (ballot == 0u) continue;
      const int leader = __ffs(ballot) - 1;
      unsigned int slotBase = 0u;
      if (lane == leader) slotBase = atomicAdd(count, (unsigned int)__popc(ballot));
      slotBase = __shfl_sync(0xffffffffu, slotBase, leader);
      if (take) {
        const unsigned int slot = slotBase + __popc(ballot & ((1u << lane) - 1u));
        ${put}
      }`)}
}
`;
  return { name, source, params: COLLECT_PARAMS };
}

// (x, state, counters, cand, vals, idx, rows, R, k, descending, cap)
const FINISH_PARAMS: ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'ptr', 'i64', 'i64', 'i32', 'i32', 'i32'];

/**
 * One block per row: the candidates (from `collect`, or gathered here in row order for a row to
 * truncate) sorted in shared memory (cap * radixCandidateBytes dynamic bytes), the first k written.
 */
export function radixFinishSource(d: DType): SortKernel {
  const { t, K, packed, max, head } = common(d);
  const passes = radixDigits(d).length;
  const name = `kiln_topk_radix_finish_${d}`;
  const slots = packed
    ? 'unsigned long long* sp = (unsigned long long*)kiln_smem;'
    : `${K}* sk = (${K}*)kiln_smem;
  int* si = (int*)(sk + cap);`;
  const { put, pos } = sharedPairs(packed);
  const source = `${head}
extern "C" __global__ void __launch_bounds__(${RADIX_FINISH_THREADS}, 1) ${name}(const ${t}* __restrict__ x, const kiln_radix_state* __restrict__ state,
    const unsigned int* __restrict__ counters, const unsigned char* __restrict__ cand, ${t}* __restrict__ vals, long long* __restrict__ idx,
    long long rows, long long R, int k, int descending, int cap) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  __shared__ int s_warp[32];
  __shared__ unsigned int s_n;
  ${slots}
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const kiln_radix_state st = state[row];
    const ${t}* xr = x + row * R;
    int n;
    if (st.flags & KILN_RADIX_TRUNCATE) {
      // The matching elements share one key: all below it, and the first \`need\` matching ones in
      // row order (rank: matches in earlier tiles, earlier warps, earlier lanes).
      const ${K} flip = descending ? ${max} : (${K})0;
      const ${K} prefix = (${K})st.prefix, mask = (${K})st.mask;
      if (threadIdx.x == 0) s_n = 0u;
      int seen = 0;
      __syncthreads();
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
        const bool take = isBelow || (isMatch && rank < st.need);
        const unsigned int ballot = __ballot_sync(0xffffffffu, take);
        if (ballot != 0u) {
          const int leader = __ffs(ballot) - 1;
          unsigned int slotBase = 0u;
          if (lane == leader) slotBase = atomicAdd(&s_n, (unsigned int)__popc(ballot));
          slotBase = __shfl_sync(0xffffffffu, slotBase, leader);
          if (take) { const unsigned int slot = slotBase + __popc(ballot & ((1u << lane) - 1u)); ${put('slot', 'key', '(int)i')} }
        }
        seen += total;
        __syncthreads();
      }
      n = (int)s_n;
    } else {
      n = (int)counters[row * ${radixCounterWords(d)} + ${passes}];
      ${
        packed
          ? `const unsigned long long* cp = (const unsigned long long*)cand + row * cap;
      for (int i = threadIdx.x; i < n; i += blockDim.x) sp[i] = cp[i];`
          : `const ${K}* ck = (const ${K}*)cand + row * cap;
      const int* ci = (const int*)((const ${K}*)cand + rows * cap) + row * cap;
      for (int i = threadIdx.x; i < n; i += blockDim.x) { sk[i] = ck[i]; si[i] = ci[i]; }`
      }
    }
    int P = 1;
    while (P < n) P <<= 1;
    for (int i = n + threadIdx.x; i < P; i += blockDim.x) { ${put('i', max, '0x7fffffff')} }
    __syncthreads();
    ${packed ? 'kiln_bitonic_packed(sp, P, threadIdx.x, blockDim.x);' : `kiln_bitonic<${K}>(sk, si, P, threadIdx.x, blockDim.x);`}
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      const int j = ${pos('i')};
      idx[row * k + i] = j;
      if (vals) vals[row * k + i] = xr[j];
    }
    __syncthreads();
  }
}
`;
  return { name, source, params: FINISH_PARAMS };
}
