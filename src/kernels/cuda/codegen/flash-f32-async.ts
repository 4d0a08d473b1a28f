/**
 * Fused attention forward for float32 on CUDA cores, cp.async variant (compute capability 8.0+;
 * full fp32 FMA, no TF32). Same online-softmax algorithm as flash-f32.ts; what differs is how the
 * operands reach shared memory and how work is spread over lanes:
 * - Q, K and V tiles are copied global -> shared with cp.async in their natural [row][d] layout
 *   (no register staging, no transposing stores), K/V double-buffered: tile j+1 is in flight while
 *   tile j is computed. flash-f32.ts loads each 16-byte vector into a register, then stores it
 *   transposed, one after the other, so a short call (Qwen3's [1,16,128,128], 1-2 key tiles per
 *   block) waits for ~40 dependent global loads per thread.
 * - Threads are RG row groups (16, 8 or 4) x TX lanes (TX 8 or 16); a thread owns rows ty + RG i. Lane tx owns keys tx + TX c of a tile (so the
 *   8 lanes of a 16-byte shared-memory phase read 8 consecutive K rows: rows are DP + 4 floats apart,
 *   4 banks, conflict-free) and value columns 4 tx + 4 TX h. Row max/sum reduce over the TX lanes of
 *   a row group, which sit in one warp, so P (scores after exp2) needs only __syncwarp between its
 *   stores and the P V loop that reads it.
 * - The softmax scale (times log2 e) multiplies the finished scores; Q is not pre-scaled.
 *
 * Head dims: D % 4 == 0 up to 256, padded to DP (a multiple of 4 TX) with zeros in shared memory.
 */
import { PRELUDE } from './ctypes.js';
import { flashKernelName, flashOffsets, flashParamDecl, maskCType, type FlashSpec } from './flash-common.js';
import { F32_ACC_INIT, F32_RESCALE, f32MaskLines, f32PvAccumulate, f32StoreRow } from './flash-f32-parts.js';
import type { GeneratedFlash } from './flash-tc.js';

/**
 * Tile of the cp.async kernel: row groups (default 16), rows per thread (block rows rg x rm), lanes
 * per row group (threads rg x tx), keys per tile. Fewer row groups with more rows each reuse every
 * K and V element read from shared memory for more rows: at Qwen3's [1,16,128,128] the 16 x 1 x 16
 * tile was shared-memory-bound (H200 R1: 18 us a call, 5 16-byte shared loads per 16 FMAs).
 */
export interface F32AsyncTile {
  rg?: 4 | 8 | 16;
  /**
   * Key splits (default 1): ks groups of rg x tx threads walk alternate key tiles with their own
   * K/V buffers and online-softmax state, merged through shared memory at the end; the heaviest
   * causal block of a short prefill then waits for half its key tiles.
   */
  ks?: 1 | 2;
  rm: 1 | 2 | 4;
  tx: 8 | 16;
  bn: 32 | 64;
}

export function paddedHeadDimF32Async(d: number, tx: number): number {
  return Math.ceil(d / (4 * tx)) * 4 * tx;
}

/** Shared memory bytes of a tile: Q [BM][DP+4], K and V [2][BN][DP+4], P [BM][BN+4]. */
export function f32AsyncSharedBytes(d: number, t: F32AsyncTile): number {
  const dp = paddedHeadDimF32Async(d, t.tx);
  const bm = (t.rg ?? 16) * t.rm;
  const ks = t.ks ?? 1;
  return (bm * (dp + 4) + ks * 4 * t.bn * (dp + 4) + ks * bm * (t.bn + 4)) * 4;
}

export function generateFlashF32Async(spec: FlashSpec, t: F32AsyncTile): GeneratedFlash {
  const D = spec.d;
  const { rm: RM, tx: TX, bn: BN } = t;
  const DP = paddedHeadDimF32Async(D, TX);
  const KC = BN / TX;
  const OC = DP / (4 * TX);
  // Registers: O is RM * DP / TX floats and S is RM * KC; beyond 64 + 32 the kernel spills.
  if (RM * OC * 4 > 64) throw new RangeError(`generateFlashF32Async: ${RM} rows x ${DP / TX} output columns per thread exceed 64 registers (head dim ${D}, ${TX} lanes)`);
  if (KC < 2) throw new RangeError(`generateFlashF32Async: ${BN} keys over ${TX} lanes`);
  const RG = t.rg ?? 16;
  const KS = t.ks ?? 1;
  const BM = RG * RM;
  const GT = RG * TX;
  const NT = KS * GT;
  const LOG_TX = Math.log2(TX);
  const name = flashKernelName(spec, `async${RG === 16 ? '' : `g${RG}r`}${RM}x${TX}x${BN}${KS > 1 ? `k${KS}` : ''}`);
  const mk = maskCType(spec);
  const shuffles = (op: string, v: string): string =>
    Array.from({ length: LOG_TX }, (_, s) => `${v} = ${op}(${v}, __shfl_xor_sync(0xffffffffu, ${v}, ${1 << s}));`).join(' ');
  const source = `${PRELUDE}
#define D ${D}
#define DP ${DP}
#define BM ${BM}
#define BN ${BN}
#define RM ${RM}
#define RG ${RG}
#define KS ${KS}
#define GT ${GT}
#define TX ${TX}
#define KC ${KC}
#define OC ${OC}
#define NT ${NT}
// Row strides of Q, K, V (+4 floats: 16-byte aligned, consecutive rows 4 banks apart) and of P.
#define RSTR (DP + 4)
#define PSTR (BN + 4)
struct __align__(16) kf4 { float x, y, z, w; };

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p)); return r;
}
// 16 bytes global -> shared, or 16 zero bytes when !valid (src-size 0 reads nothing).
__device__ __forceinline__ void cp16(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N)); }
__device__ __forceinline__ float kiln_add(float a, float b) { return a + b; }
// The threads of one key-split group (named barrier 1 + g; barrier 0 is __syncthreads).
__device__ __forceinline__ void group_sync(int g) {
  // Immediate barrier ids: a register id would make ptxas reserve all 16 barriers.
  if (KS == 1) __syncthreads();
  else if (g == 0) asm volatile("bar.sync 1, %0;\\n" :: "n"(GT));
  else asm volatile("bar.sync 2, %0;\\n" :: "n"(GT));
}

// rows x DP floats from src (row stride rs, rows < lim valid) into dst [rows][RSTR], by THREADS threads.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_rows(float* dst, const float* src, long long rs, int lim, int tid) {
  // A fixed trip count (the tail guarded); cp.async does not wait for its data, so a partial unroll
  // issues the copies back to back without a register-hungry full unroll (64-thread groups issue 32+ each).
  #pragma unroll 4
  for (int it = 0; it < (ROWS * (DP / 4) + THREADS - 1) / THREADS; it++) {
    const int idx = tid + it * THREADS;
    const int r = idx / (DP / 4), d4 = idx % (DP / 4);
    if (r >= ROWS) break;
    const bool ok = r < lim && d4 * 4 < D;
    cp16(dst + r * RSTR + d4 * 4, ok ? src + (long long)r * rs + d4 * 4 : src, ok);
  }
}

extern "C" __global__ void __launch_bounds__(NT) ${name}(${flashParamDecl('float')}) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  float* Qs = (float*)kiln_smem;      // [BM][RSTR]
  const int g = threadIdx.x / GT, tid = threadIdx.x % GT, ty = tid / TX, tx = tid % TX;
  float* Ks = Qs + BM * RSTR + g * 4 * BN * RSTR;   // this group's [2][BN][RSTR]
  float* Vs = Ks + 2 * BN * RSTR;                   // [2][BN][RSTR]
  float* Ps = Qs + BM * RSTR + KS * 4 * BN * RSTR + g * BM * PSTR;  // [BM][PSTR]
  // Heaviest (causal: last) query blocks first.
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BM;
${flashOffsets('float', spec.mask, mk.t)}
  const int kEnd = ${spec.causal ? 'min(S, m0 + BM)' : 'S'};
  const int nTiles = (kEnd + BN - 1) / BN;

  // Q by every thread, its own copy group; then this group's first key tile (tile g).
  load_rows<BM, NT>(Qs, qp + (long long)m0 * qrs, qrs, L - m0, threadIdx.x);
  cp_commit();
  if (g < nTiles) {
    load_rows<BN, GT>(Ks, kp + (long long)g * BN * krs, krs, kEnd - g * BN, tid);
    load_rows<BN, GT>(Vs, vp + (long long)g * BN * vrs, vrs, kEnd - g * BN, tid);
  }
  cp_commit();
  // Q is read by every group: wait for it (the key tile may still be in flight), then a block barrier.
  cp_wait<1>();
  __syncthreads();

${F32_ACC_INIT}

  for (int j = g, t = 0; j < nTiles; j += KS, t++) {
    const int n0 = j * BN;
    const float* Kb = Ks + (t & 1) * BN * RSTR;
    const float* Vb = Vs + (t & 1) * BN * RSTR;
    if (j + KS < nTiles) {
      const int nn = n0 + KS * BN;
      load_rows<BN, GT>(Ks + ((t + 1) & 1) * BN * RSTR, kp + (long long)nn * krs, krs, kEnd - nn, tid);
      load_rows<BN, GT>(Vs + ((t + 1) & 1) * BN * RSTR, vp + (long long)nn * vrs, vrs, kEnd - nn, tid);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    group_sync(g);

    float s[RM][KC];
    #pragma unroll
    for (int i = 0; i < RM; i++)
      #pragma unroll
      for (int c = 0; c < KC; c++) s[i][c] = 0.f;
    #pragma unroll 4
    for (int d4 = 0; d4 < D / 4; d4++) {
      kf4 qv[RM];
      #pragma unroll
      for (int i = 0; i < RM; i++) qv[i] = *(const kf4*)(Qs + (ty + RG * i) * RSTR + d4 * 4);
      #pragma unroll
      for (int c = 0; c < KC; c++) {
        const kf4 kv = *(const kf4*)(Kb + (tx + TX * c) * RSTR + d4 * 4);
        #pragma unroll
        for (int i = 0; i < RM; i++) s[i][c] = fmaf(qv[i].w, kv.w, fmaf(qv[i].z, kv.z, fmaf(qv[i].y, kv.y, fmaf(qv[i].x, kv.x, s[i][c]))));
      }
    }
    const bool edge = (n0 + BN > S)${spec.causal ? ' || (n0 + BN - 1 > m0)' : ''};
    #pragma unroll
    for (int i = 0; i < RM; i++) {
      const int row = m0 + ty + RG * i;
      float mx = rmax[i];
      #pragma unroll
      for (int c = 0; c < KC; c++) {
        float x = s[i][c] * scale_log2;
        const int col = n0 + tx + TX * c;
        (void)row; (void)col;
${f32MaskLines(spec)}
        s[i][c] = x;
        mx = fmaxf(mx, x);
      }
      ${shuffles('fmaxf', 'mx')}
${F32_RESCALE}
      float ps = 0.f;
      #pragma unroll
      for (int c = 0; c < KC; c++) {
        const float p = exp2f(s[i][c] - use);
        ps += p;
        Ps[(ty + RG * i) * PSTR + tx + TX * c] = p;
      }
      rsum[i] += ps;
    }
    // P rows are written and read by the lanes of one row group, all in this warp.
    __syncwarp();
${f32PvAccumulate('RG', 'Vb + (n4 + c) * RSTR + h * 4 * TX + tx * 4')}
    // Every warp of the group is done with this K/V buffer (and its own P) before the next tile's copy overwrites it.
    group_sync(g);
  }
  // No copy may be in flight at exit (S = 0 leaves the Q group unwaited).
  cp_wait<0>();

  #pragma unroll
  for (int i = 0; i < RM; i++) {
    float l = rsum[i];
    ${shuffles('kiln_add', 'l')}
    rsum[i] = l;
  }
  if (KS > 1) {
    // Group 1 hands (max, sum, O) to group 0 through its own (now idle) K buffers; group 0 rescales
    // both to the common max: m = max(m0, m1), O = O0 2^(m0 - m) + O1 2^(m1 - m), likewise the sums.
    float* X = Qs + BM * RSTR + 4 * BN * RSTR;  // group 1's K/V region: [BM][RSTR] of O, then max and sum
    float* Xm = X + BM * RSTR;
    float* Xl = Xm + BM;
    __syncthreads();
    if (g == 1) {
      #pragma unroll
      for (int i = 0; i < RM; i++) {
        const int r = ty + RG * i;
        #pragma unroll
        for (int h = 0; h < OC; h++) *(kf4*)(X + r * RSTR + h * 4 * TX + tx * 4) = kf4{acc[i][h][0], acc[i][h][1], acc[i][h][2], acc[i][h][3]};
        if (tx == 0) { Xm[r] = rmax[i]; Xl[r] = rsum[i]; }
      }
    }
    __syncthreads();
    if (g == 1) return;
    #pragma unroll
    for (int i = 0; i < RM; i++) {
      const int r = ty + RG * i;
      const float m1 = Xm[r];
      const float m = fmaxf(rmax[i], m1);
      // Both -inf (every key masked so far): 0 * NaN keeps the NaN the unsplit kernel gives.
      const float f0 = exp2f(rmax[i] - m), f1 = exp2f(m1 - m);
      rsum[i] = rsum[i] * f0 + Xl[r] * f1;
      #pragma unroll
      for (int h = 0; h < OC; h++) {
        const kf4 o1 = *(const kf4*)(X + r * RSTR + h * 4 * TX + tx * 4);
        acc[i][h][0] = acc[i][h][0] * f0 + o1.x * f1; acc[i][h][1] = acc[i][h][1] * f0 + o1.y * f1;
        acc[i][h][2] = acc[i][h][2] * f0 + o1.z * f1; acc[i][h][3] = acc[i][h][3] * f0 + o1.w * f1;
      }
    }
  }

  #pragma unroll
  for (int i = 0; i < RM; i++) {
    const float l = rsum[i];
${f32StoreRow('RG', 'h * 4 * TX + tx * 4')}
  }
}
`;
  return { source, name, threads: NT, bm: BM, sharedBytes: f32AsyncSharedBytes(D, t) };
}
