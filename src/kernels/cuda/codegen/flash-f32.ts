/**
 * Fused attention forward for float32 on CUDA cores (full fp32 FMA, no TF32: PyTorch's float32 SDPA
 * is exact fp32 too). Same algorithm as the tensor-core kernel (a block owns BM query rows, loops
 * over BN-key tiles, online softmax; no L x S matrix), with a SIMT tiling: 128 threads as 16 row
 * groups x 8 column lanes. Thread (ty, tx) owns rows ty + 16 i (i < RM) and, in S, key columns
 * tx*4 + 32 h + c, in O, value columns tx*4 + 32 h + c: the 8 lanes of a row group are adjacent, so
 * row max/sum need three shuffles. Q and K sit transposed in shared memory ([d][row]) so the S loop
 * reads kf4 rows of K; P goes through shared memory to feed O += P V with kf4 reads of V.
 * Q is pre-multiplied by scale * log2(e) as it is staged (scores come out in the exp2 domain).
 *
 * Head dims: D % 4 == 0 up to 256, padded to DP (multiple of 32) with zeros in shared memory.
 */
import { PRELUDE } from './ctypes.js';
import { flashKernelName, flashOffsets, flashParamDecl, maskCType, type FlashSpec } from './flash-common.js';
import { F32_ACC_INIT, F32_RESCALE, f32MaskLines, f32PvAccumulate, f32StoreRow } from './flash-f32-parts.js';
import type { GeneratedFlash } from './flash-tc.js';

export function paddedHeadDimF32(d: number): number {
  return Math.ceil(d / 32) * 32;
}

/**
 * Rows per thread: 4 (64-row blocks) up to DP 128, where O is 4 * DP/8 <= 64 floats per thread;
 * 2 beyond, so DP 256 still holds O in 64 registers. Keys per tile: 64 (two kf4 column groups).
 */
export function f32RowsPerThread(d: number): number {
  return paddedHeadDimF32(d) <= 128 ? 4 : 2;
}

/** `rm`: rows per thread (1, 2 or 4; at most f32RowsPerThread(d)); blocks own 16 * rm query rows. */
export function generateFlashF32(spec: FlashSpec, rm: number = f32RowsPerThread(spec.d)): GeneratedFlash {
  const D = spec.d;
  const DP = paddedHeadDimF32(D);
  if (![1, 2, 4].includes(rm) || rm > f32RowsPerThread(D)) throw new RangeError(`generateFlashF32: rows per thread ${rm} is not 1, 2 or 4 within ${f32RowsPerThread(D)} for head dim ${D}`);
  const RM = rm;
  const BM = 16 * RM;
  const BN = 64;
  const name = flashKernelName(spec, `simt${RM}`);
  const mk = maskCType(spec);
  // Padded strides: +4 floats keeps kf4 alignment and spreads the 4 row groups of a warp over
  // distinct banks (row stride = 4 banks apart).
  const QSTR = BM + 4;
  const KSTR = BN + 4;
  const VSTR = DP + 4;
  const PSTR = BN + 4;
  const sharedBytes = (DP * QSTR + DP * KSTR + BN * VSTR + BM * PSTR) * 4;
  const source = `${PRELUDE}
#define D ${D}
#define DP ${DP}
#define BM ${BM}
#define BN ${BN}
#define RM ${RM}
#define OC (DP / 32)
#define QSTR ${QSTR}
#define KSTR ${KSTR}
#define VSTR ${VSTR}
#define PSTR ${PSTR}
// Own 16-byte vector type: generated kernels include no CUDA headers (NVRTC and nvcc -cubin alike).
struct __align__(16) kf4 { float x, y, z, w; };

extern "C" __global__ void __launch_bounds__(128) ${name}(${flashParamDecl('float')}) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  float* Qt = (float*)kiln_smem;      // [DP][QSTR]
  float* Kt = Qt + DP * QSTR;         // [DP][KSTR]
  float* Vs = Kt + DP * KSTR;         // [BN][VSTR]
  float* Ps = Vs + BN * VSTR;         // [BM][PSTR]
  const int tid = threadIdx.x, ty = tid >> 3, tx = tid & 7;
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BM;
${flashOffsets('float', spec.mask, mk.t)}
  const int kEnd = ${spec.causal ? 'min(S, m0 + BM)' : 'S'};
  const int nTiles = (kEnd + BN - 1) / BN;

  // Q transposed and pre-scaled: consecutive threads take consecutive rows (conflict-free stores).
  for (int idx = tid; idx < BM * (DP / 4); idx += 128) {
    const int m = idx % BM, d4 = idx / BM;
    kf4 x = kf4{0.f, 0.f, 0.f, 0.f};
    if (m0 + m < L && d4 * 4 < D) x = *(const kf4*)(qp + (long long)(m0 + m) * qrs + d4 * 4);
    Qt[(d4 * 4 + 0) * QSTR + m] = x.x * scale_log2;
    Qt[(d4 * 4 + 1) * QSTR + m] = x.y * scale_log2;
    Qt[(d4 * 4 + 2) * QSTR + m] = x.z * scale_log2;
    Qt[(d4 * 4 + 3) * QSTR + m] = x.w * scale_log2;
  }

${F32_ACC_INIT}

  for (int j = 0; j < nTiles; j++) {
    const int n0 = j * BN;
    for (int idx = tid; idx < BN * (DP / 4); idx += 128) {
      const int n = idx % BN, d4 = idx / BN;
      kf4 x = kf4{0.f, 0.f, 0.f, 0.f};
      if (n0 + n < S && d4 * 4 < D) x = *(const kf4*)(kp + (long long)(n0 + n) * krs + d4 * 4);
      Kt[(d4 * 4 + 0) * KSTR + n] = x.x;
      Kt[(d4 * 4 + 1) * KSTR + n] = x.y;
      Kt[(d4 * 4 + 2) * KSTR + n] = x.z;
      Kt[(d4 * 4 + 3) * KSTR + n] = x.w;
    }
    for (int idx = tid; idx < BN * (DP / 4); idx += 128) {
      const int n = idx / (DP / 4), d4 = idx % (DP / 4);
      kf4 x = kf4{0.f, 0.f, 0.f, 0.f};
      if (n0 + n < S && d4 * 4 < D) x = *(const kf4*)(vp + (long long)(n0 + n) * vrs + d4 * 4);
      *(kf4*)(Vs + n * VSTR + d4 * 4) = x;
    }
    __syncthreads();

    float s[RM][8];
    #pragma unroll
    for (int i = 0; i < RM; i++)
      #pragma unroll
      for (int c = 0; c < 8; c++) s[i][c] = 0.f;
    #pragma unroll 4
    for (int d = 0; d < D; d++) {
      const kf4 k0 = *(const kf4*)(Kt + d * KSTR + tx * 4);
      const kf4 k1 = *(const kf4*)(Kt + d * KSTR + 32 + tx * 4);
      #pragma unroll
      for (int i = 0; i < RM; i++) {
        const float qv = Qt[d * QSTR + ty + 16 * i];
        s[i][0] += qv * k0.x; s[i][1] += qv * k0.y; s[i][2] += qv * k0.z; s[i][3] += qv * k0.w;
        s[i][4] += qv * k1.x; s[i][5] += qv * k1.y; s[i][6] += qv * k1.z; s[i][7] += qv * k1.w;
      }
    }
    const bool edge = (n0 + BN > S)${spec.causal ? ' || (n0 + BN - 1 > m0)' : ''};
    #pragma unroll
    for (int i = 0; i < RM; i++) {
      const int row = m0 + ty + 16 * i;
      float mx = rmax[i];
      #pragma unroll
      for (int c = 0; c < 8; c++) {
        float x = s[i][c];
        const int col = n0 + (c >> 2) * 32 + tx * 4 + (c & 3);
        (void)row; (void)col;
${f32MaskLines(spec)}
        s[i][c] = x;
        mx = fmaxf(mx, x);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
${F32_RESCALE}
      kf4 p0, p1;
      p0.x = exp2f(s[i][0] - use); p0.y = exp2f(s[i][1] - use); p0.z = exp2f(s[i][2] - use); p0.w = exp2f(s[i][3] - use);
      p1.x = exp2f(s[i][4] - use); p1.y = exp2f(s[i][5] - use); p1.z = exp2f(s[i][6] - use); p1.w = exp2f(s[i][7] - use);
      rsum[i] += (p0.x + p0.y) + (p0.z + p0.w) + (p1.x + p1.y) + (p1.z + p1.w);
      *(kf4*)(Ps + (ty + 16 * i) * PSTR + tx * 4) = p0;
      *(kf4*)(Ps + (ty + 16 * i) * PSTR + 32 + tx * 4) = p1;
    }
    __syncthreads();
${f32PvAccumulate('16', 'Vs + (n4 + c) * VSTR + h * 32 + tx * 4')}
    __syncthreads();
  }

  #pragma unroll
  for (int i = 0; i < RM; i++) {
    float l = rsum[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    l += __shfl_xor_sync(0xffffffffu, l, 4);
${f32StoreRow('16', 'h * 32 + tx * 4')}
  }
}
`;
  return { source, name, threads: 128, bm: BM, sharedBytes };
}
