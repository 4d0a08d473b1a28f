/**
 * Exact-fp32 GEMM on CUDA cores for the `linear` layout (experiment, measured against cuBLASLt by
 * bench/cuda-sgemm.ts before anything routes to it): C[M,N] = A[M,K] W[N,K]^T (+ bias[N]), A and W
 * row-major with unit-stride K, C row-major. Why: at M = 128 tokens (Qwen3 prefill) cuBLASLt's fp32
 * GEMMs were measured at a fraction of the H200's SIMT peak in the session-4 profile.
 *
 * Classic SIMT tiling: a block computes BM x BN of C with 256 threads, each 8 x 8 outputs held as
 * four 4 x 4 quadrants (rows ty*4 and BM/2 + ty*4, columns tx*4 and BN/2 + tx*4, so each
 * quadrant's loads are one 16-byte shared read); K advances BK at a time through two shared buffers
 * (A and W tiles stored transposed, [BK][BM] and [BK][BN]); the next tile's global loads (16 bytes
 * along K) are in registers while the current one is multiplied. The 32 lanes of a warp are 4 rows
 * x 8 columns of threads, so a k-step's A read touches 64 bytes and its W read 128 bytes (one
 * shared-memory wavefront each).
 *
 * Split-K: gridDim.z blocks share one output tile, each over kPerSplit of K, and write fp32
 * partials to ws[z][M][N]; sgemmReduceSource's kernel sums them in z order (deterministic) and adds
 * the bias. Summation order differs from an unsplit K loop only by where the split points are.
 *
 * Preconditions (the caller checks): K % 4 == 0, kPerSplit % BK == 0, lda/ldw % 4 == 0 and
 * 16-byte aligned A/W; M, N arbitrary (guarded; N % 4 == 0 for the 16-byte stores).
 */
import { PRELUDE } from './ctypes.js';
import type { ParamType } from '../../../runtime/cuda/launch.js';

export interface SgemmTile {
  bm: 64 | 128;
  bn: 64 | 128;
  bk: 8 | 16;
}

export const SGEMM_THREADS = 256;

/** A, W, C (or the split-K workspace), bias (0: none); M, N, K, lda, ldw, ldc, kPerSplit. */
export const SGEMM_PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'];

export function sgemmName(t: SgemmTile): string {
  return `kiln_sgemm_nt_${t.bm}x${t.bn}x${t.bk}`;
}

export function sgemmSource(t: SgemmTile): string {
  const { bm: BM, bn: BN, bk: BK } = t;
  // Threads as 16 x 16 (bm/bn 128: 8 x 8 outputs each) or fewer rows/cols of outputs per thread for 64.
  const TM = BM / 16; // outputs per thread along M: 8 (two quadrants of 4) or 4 (one)
  const TN = BN / 16;
  const LA = (BM * BK) / 4 / SGEMM_THREADS; // 16-byte loads per thread per A tile
  const LW = (BN * BK) / 4 / SGEMM_THREADS;
  if (LA < 1 || LW < 1) throw new RangeError(`sgemmSource: tile ${BM}x${BN}x${BK} gives under one 16-byte load per thread`);
  return `${PRELUDE}
#define BM ${BM}
#define BN ${BN}
#define BK ${BK}
#define TM ${TM}
#define TN ${TN}
#define LA ${LA}
#define LW ${LW}
struct __align__(16) kf4 { float x, y, z, w; };

extern "C" __global__ void __launch_bounds__(${SGEMM_THREADS}) ${sgemmName(t)}(
    const float* __restrict__ A, const float* __restrict__ W, float* __restrict__ C, const float* __restrict__ bias,
    int M, int N, int K, int lda, int ldw, int ldc, int kPerSplit) {
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Ws[2][BK][BN];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Warp = 4 thread rows x 8 thread columns; 8 warps as 4 x 2.
  const int tx = (lane & 7) + 8 * (warp & 1);
  const int ty = (lane >> 3) + 4 * (warp >> 1);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kBeg = blockIdx.z * kPerSplit;
  const int nk = min(kPerSplit, K - kBeg) / BK;

  // Global -> register loads: thread loads rows (tid + i * 256) / (BK / 4), k offset 4 * (.. % (BK / 4)).
  kf4 ra[LA], rw[LW];
  auto loadTiles = [&](int k0) {
    #pragma unroll
    for (int i = 0; i < LA; i++) {
      const int idx = tid + i * ${SGEMM_THREADS};
      const int r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      ra[i] = m0 + r < M ? *(const kf4*)(A + (long long)(m0 + r) * lda + k0 + k4) : kf4{0.f, 0.f, 0.f, 0.f};
    }
    #pragma unroll
    for (int i = 0; i < LW; i++) {
      const int idx = tid + i * ${SGEMM_THREADS};
      const int r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      rw[i] = n0 + r < N ? *(const kf4*)(W + (long long)(n0 + r) * ldw + k0 + k4) : kf4{0.f, 0.f, 0.f, 0.f};
    }
  };
  auto storeTiles = [&](int buf) {
    #pragma unroll
    for (int i = 0; i < LA; i++) {
      const int idx = tid + i * ${SGEMM_THREADS};
      const int r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      As[buf][k4 + 0][r] = ra[i].x; As[buf][k4 + 1][r] = ra[i].y; As[buf][k4 + 2][r] = ra[i].z; As[buf][k4 + 3][r] = ra[i].w;
    }
    #pragma unroll
    for (int i = 0; i < LW; i++) {
      const int idx = tid + i * ${SGEMM_THREADS};
      const int r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      Ws[buf][k4 + 0][r] = rw[i].x; Ws[buf][k4 + 1][r] = rw[i].y; Ws[buf][k4 + 2][r] = rw[i].z; Ws[buf][k4 + 3][r] = rw[i].w;
    }
  };

  float acc[TM][TN];
  #pragma unroll
  for (int i = 0; i < TM; i++)
    #pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

  if (nk > 0) {
    loadTiles(kBeg);
    storeTiles(0);
  }
  __syncthreads();
  for (int t = 0; t < nk; t++) {
    const int buf = t & 1;
    if (t + 1 < nk) loadTiles(kBeg + (t + 1) * BK);
    #pragma unroll
    for (int k = 0; k < BK; k++) {
      float a[TM], w[TN];
      #pragma unroll
      for (int q = 0; q < TM / 4; q++) {
        const kf4 v = *(const kf4*)&As[buf][k][q * (BM / 2) + ty * 4];
        a[q * 4 + 0] = v.x; a[q * 4 + 1] = v.y; a[q * 4 + 2] = v.z; a[q * 4 + 3] = v.w;
      }
      #pragma unroll
      for (int q = 0; q < TN / 4; q++) {
        const kf4 v = *(const kf4*)&Ws[buf][k][q * (BN / 2) + tx * 4];
        w[q * 4 + 0] = v.x; w[q * 4 + 1] = v.y; w[q * 4 + 2] = v.z; w[q * 4 + 3] = v.w;
      }
      #pragma unroll
      for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
    }
    if (t + 1 < nk) storeTiles(buf ^ 1);
    __syncthreads();
  }

  // Split-K blocks write partials to the workspace (C is the workspace, [gridDim.z][M][ldc]); the
  // unsplit kernel adds the bias here.
  float* out = C + (long long)blockIdx.z * M * ldc;
  const bool addBias = bias != 0 && gridDim.z == 1;
  #pragma unroll
  for (int i = 0; i < TM; i++) {
    const int row = m0 + (i / 4) * (BM / 2) + ty * 4 + (i % 4);
    if (row >= M) continue;
    #pragma unroll
    for (int q = 0; q < TN / 4; q++) {
      const int col = n0 + q * (BN / 2) + tx * 4;
      if (col >= N) continue;
      kf4 v = kf4{acc[i][q * 4 + 0], acc[i][q * 4 + 1], acc[i][q * 4 + 2], acc[i][q * 4 + 3]};
      if (addBias) { v.x += bias[col]; v.y += bias[col + 1]; v.z += bias[col + 2]; v.w += bias[col + 3]; }
      *(kf4*)(out + (long long)row * ldc + col) = v;
    }
  }
}
`;
}

/** ws [splits][M][N] (row stride N), C (row stride ldc), bias (0: none); M, N, ldc, splits. */
export const SGEMM_REDUCE_PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i32'];
export const SGEMM_REDUCE_NAME = 'kiln_sgemm_splitk_reduce';

/** Sums the split-K partials in split order (one thread per 4 outputs) and adds the bias. */
export function sgemmReduceSource(): string {
  return `${PRELUDE}
struct __align__(16) kf4 { float x, y, z, w; };
extern "C" __global__ void __launch_bounds__(256) ${SGEMM_REDUCE_NAME}(
    const float* __restrict__ ws, float* __restrict__ C, const float* __restrict__ bias, int M, int N, int ldc, int splits) {
  const long long i4 = (long long)blockIdx.x * 256 + threadIdx.x;
  const long long total = (long long)M * N / 4;
  if (i4 >= total) return;
  const long long e = i4 * 4;
  const int row = (int)(e / N), col = (int)(e % N);
  const long long plane = (long long)M * N;
  kf4 s = *(const kf4*)(ws + e);
  // Four partials loaded before any is added (independent loads in flight, not one L2 round trip
  // per split), then added in split order: the sum is the same for every launch.
  for (int z0 = 1; z0 < splits; z0 += 4) {
    kf4 p[4];
    #pragma unroll
    for (int u = 0; u < 4; u++) p[u] = z0 + u < splits ? *(const kf4*)(ws + (z0 + u) * plane + e) : kf4{0.f, 0.f, 0.f, 0.f};
    #pragma unroll
    for (int u = 0; u < 4; u++) if (z0 + u < splits) { s.x += p[u].x; s.y += p[u].y; s.z += p[u].z; s.w += p[u].w; }
  }
  if (bias != 0) { s.x += bias[col]; s.y += bias[col + 1]; s.z += bias[col + 2]; s.w += bias[col + 3]; }
  *(kf4*)(C + (long long)row * ldc + col) = s;
}
`;
}
