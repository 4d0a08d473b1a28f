/**
 * Fused attention forward for float16/bfloat16 on tensor cores (flash-attention-2 style): a block
 * owns BM query rows of one (batch, head) (NW warps, each MI m16 row tiles), loops over BN-key tiles
 * of K and V staged in shared memory by cp.async (double-buffered: tile j+1 loads while tile j
 * computes), and keeps a running max and sum per row (online softmax in fp32), so no L x S matrix
 * exists anywhere. S = Q K^T and O += P V run on `mma.sync.m16n8k16` (row.col, fp32 accumulate)
 * with operands from `ldmatrix` (K as the col-major B operand directly, V through `.trans`); P goes
 * from the S accumulators to the A operand in registers. Causal blocks stop at the diagonal;
 * per-element bounds/causal checks run only in tiles that cross it or the end of the keys.
 *
 * Head dims: D % 8 == 0 up to 256, padded to DP (multiple of 16) with zero-filled shared memory.
 * Shared rows are padded by 8 elements (16 bytes), which makes the 8 row addresses of every
 * ldmatrix phase fall in distinct bank groups (no swizzle needed for any DP).
 */
import { PRELUDE } from './ctypes.js';
import { flashKernelName, flashMaskCode, flashOffsets, flashParamDecl, maskCType, type FlashSpec } from './flash-common.js';

export interface TcConfig {
  /** Warps per block. */
  nw: number;
  /** m16 row tiles per warp (2 reuses each K/V fragment twice; only when registers allow). */
  mi: number;
  /** Keys per tile. */
  bn: number;
}

export interface GeneratedFlash {
  source: string;
  name: string;
  threads: number;
  /** Query rows per block. */
  bm: number;
  sharedBytes: number;
}

export function paddedHeadDimTc(d: number): number {
  return Math.ceil(d / 16) * 16;
}

/**
 * Tile shape by head dim. Register budget per thread: O takes MI * DP/2 floats, S MI * BN/2, the Q
 * fragments MI * DP/8 registers. Every shape gives 128 query rows per block up to DP 128, which
 * halves the shared-memory traffic of K and V per row against 64: DP <= 64 as two row tiles per warp
 * (4 warps, ~250 registers), DP <= 128 as 8 warps of one tile (~210 registers; two row tiles would
 * spill). Larger DP keeps O at DP/2 floats and shrinks the key tile to 32 so S fits too.
 * Measured on the H200 (bf16, causal, bench/cuda-sdpa.ts sweep): [1,16,4096,128] 8 warps x 64 keys
 * 0.352 ms, 4 warps 0.386, 4 x 32 keys 0.389, 4 x 128 keys 0.509; [8,16,512,64] within 5% across
 * 4x2x64, 4x1x64, 8x1x64 and 4x1x128 (0.072-0.076 ms, launch-bound).
 */
export function tcConfig(d: number): TcConfig {
  const dp = paddedHeadDimTc(d);
  if (dp <= 64) return { nw: 4, mi: 2, bn: 64 };
  if (dp <= 128) return { nw: 8, mi: 1, bn: 64 };
  return { nw: 4, mi: 1, bn: 32 };
}

export function generateFlashTc(spec: FlashSpec, cfg: TcConfig = tcConfig(spec.d)): GeneratedFlash {
  const D = spec.d;
  const DP = paddedHeadDimTc(D);
  const STR = DP + 8;
  const { nw, mi, bn } = cfg;
  const BM = nw * 16 * mi;
  // Q fragments stay in registers up to DP 128; beyond, they are re-read from shared memory per use.
  const qreg = DP <= 128;
  const name = flashKernelName(spec, `tc${nw}x${mi}x${bn}`);
  const f16 = spec.dtype === 'float16';
  const mty = f16 ? 'f16' : 'bf16';
  const mk = maskCType(spec);
  const threads = nw * 32;
  const sharedBytes = (BM + 4 * bn) * STR * 2;
  const source = `${PRELUDE}
#define D ${D}
#define DP ${DP}
#define STR ${STR}
#define BM ${BM}
#define BN ${bn}
#define MI ${mi}
#define NT (BN / 8)
#define OT (DP / 8)
#define KD (DP / 16)
#define NTHREADS ${threads}
typedef unsigned short T;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p)); return r;
}
// 16 bytes global -> shared, or 16 zero bytes when !valid (src-size 0 fills with zeros).
__device__ __forceinline__ void cp16(T* dst, const T* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N)); }
__device__ __forceinline__ void ldsm4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const T* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm4t(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const T* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${mty}.${mty}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats -> packed pair (lo in the low half: the lower column index).
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r; asm("cvt.rn.${mty}x2.f32 %0, %1, %2;\\n" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
// rows x DP tile from global (row stride rs, rows r0.. of n valid) into shared (row stride STR).
__device__ __forceinline__ void load_tile(T* dst, const T* src, long long rs, int r0, int n, int rows, int tid) {
  #pragma unroll 4
  for (int c = tid; c < rows * (DP / 8); c += NTHREADS) {
    const int r = c / (DP / 8), ch = c % (DP / 8);
    const bool ok = (r0 + r < n) && (ch * 8 < D);
    cp16(dst + r * STR + ch * 8, ok ? src + (long long)(r0 + r) * rs + ch * 8 : src, ok);
  }
}

extern "C" __global__ void __launch_bounds__(NTHREADS) ${name}(${flashParamDecl('T')}) {
  extern __shared__ __align__(16) unsigned char kiln_smem[];
  T* Qs = (T*)kiln_smem;
  T* Ks = Qs + BM * STR;
  T* Vs = Ks + 2 * BN * STR;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Causal blocks with more rows have more key tiles: launch them first (y runs backwards).
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BM;
${flashOffsets('T', spec.mask, mk.t)}
  const int kEnd = ${spec.causal ? 'min(S, m0 + BM)' : 'S'};
  const int nTiles = (kEnd + BN - 1) / BN;

  load_tile(Qs, qp, qrs, m0, L, BM, tid);
  load_tile(Ks, kp, krs, 0, S, BN, tid);
  load_tile(Vs, vp, vrs, 0, S, BN, tid);
  cp_commit();

  float acc[MI][OT][4];
  float rmax[MI][2], rsum[MI][2];
  #pragma unroll
  for (int t = 0; t < MI; t++) {
    #pragma unroll
    for (int i = 0; i < OT; i++) acc[t][i][0] = acc[t][i][1] = acc[t][i][2] = acc[t][i][3] = 0.f;
    rmax[t][0] = rmax[t][1] = -KILN_INF; rsum[t][0] = rsum[t][1] = 0.f;
  }
  unsigned qf[MI][${qreg ? 'KD' : '1'}][4];

  for (int j = 0; j < nTiles; j++) {
    const int buf = j & 1;
    if (j + 1 < nTiles) {
      load_tile(Ks + (buf ^ 1) * BN * STR, kp, krs, (j + 1) * BN, S, BN, tid);
      load_tile(Vs + (buf ^ 1) * BN * STR, vp, vrs, (j + 1) * BN, S, BN, tid);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const T* Kb = Ks + buf * BN * STR;
    const T* Vb = Vs + buf * BN * STR;
${
  qreg
    ? `    if (j == 0) {
      #pragma unroll
      for (int t = 0; t < MI; t++)
        #pragma unroll
        for (int kk = 0; kk < KD; kk++)
          ldsm4(qf[t][kk][0], qf[t][kk][1], qf[t][kk][2], qf[t][kk][3], Qs + ((warp * MI + t) * 16 + (lane & 15)) * STR + kk * 16 + (lane >> 4) * 8);
    }`
    : ''
}
    float s[MI][NT][4];
    #pragma unroll
    for (int t = 0; t < MI; t++)
      #pragma unroll
      for (int i = 0; i < NT; i++) s[t][i][0] = s[t][i][1] = s[t][i][2] = s[t][i][3] = 0.f;
    #pragma unroll
    for (int kk = 0; kk < KD; kk++) {
${
  qreg
    ? ''
    : `      #pragma unroll
      for (int t = 0; t < MI; t++)
        ldsm4(qf[t][0][0], qf[t][0][1], qf[t][0][2], qf[t][0][3], Qs + ((warp * MI + t) * 16 + (lane & 15)) * STR + kk * 16 + (lane >> 4) * 8);`
}
      #pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        unsigned b0, b1, b2, b3;
        ldsm4(b0, b1, b2, b3, Kb + (nt * 8 + (lane >> 4) * 8 + (lane & 7)) * STR + kk * 16 + ((lane >> 3) & 1) * 8);
        #pragma unroll
        for (int t = 0; t < MI; t++) {
          mma16816(s[t][nt], qf[t][${qreg ? 'kk' : '0'}], b0, b1);
          mma16816(s[t][nt + 1], qf[t][${qreg ? 'kk' : '0'}], b2, b3);
        }
      }
    }
    const int n0 = j * BN;
    const bool edge = (n0 + BN > S)${spec.causal ? ' || (n0 + BN - 1 > m0)' : ''};
    #pragma unroll
    for (int t = 0; t < MI; t++) {
      const int rowBase = m0 + (warp * MI + t) * 16 + (lane >> 2);
      float mx[2] = {rmax[t][0], rmax[t][1]};
      #pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
          float x = s[t][nt][e] * scale_log2;
          const int row = rowBase + (e >> 1) * 8;
          const int col = n0 + nt * 8 + (lane & 3) * 2 + (e & 1);
          (void)row; (void)col;
${flashMaskCode(spec, 'x', 'row', 'col', mk.load)
  .split('\n')
  .map((l) => `          ${l}`)
  .join('\n')}
          s[t][nt][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      }
      #pragma unroll
      for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        // A row with every key so far masked keeps max -inf: use 0 so exp2 gives 0, not NaN.
        const float use = mx[h] == -KILN_INF ? 0.f : mx[h];
        const float corr = exp2f(rmax[t][h] - use);
        rmax[t][h] = mx[h];
        rsum[t][h] *= corr;
        #pragma unroll
        for (int i = 0; i < OT; i++) { acc[t][i][2 * h] *= corr; acc[t][i][2 * h + 1] *= corr; }
        mx[h] = use;
      }
      #pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
          const float p = exp2f(s[t][nt][e] - mx[e >> 1]);
          s[t][nt][e] = p;
          rsum[t][e >> 1] += p;
        }
      }
    }
    #pragma unroll
    for (int kc = 0; kc < BN / 16; kc++) {
      unsigned pa[MI][4];
      #pragma unroll
      for (int t = 0; t < MI; t++) {
        pa[t][0] = pack2(s[t][2 * kc][0], s[t][2 * kc][1]);
        pa[t][1] = pack2(s[t][2 * kc][2], s[t][2 * kc][3]);
        pa[t][2] = pack2(s[t][2 * kc + 1][0], s[t][2 * kc + 1][1]);
        pa[t][3] = pack2(s[t][2 * kc + 1][2], s[t][2 * kc + 1][3]);
      }
      #pragma unroll
      for (int dt = 0; dt < OT; dt += 2) {
        unsigned b0, b1, b2, b3;
        ldsm4t(b0, b1, b2, b3, Vb + (kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * STR + dt * 8 + (lane >> 4) * 8);
        #pragma unroll
        for (int t = 0; t < MI; t++) {
          mma16816(acc[t][dt], pa[t], b0, b1);
          mma16816(acc[t][dt + 1], pa[t], b2, b3);
        }
      }
    }
    __syncthreads();
  }

  #pragma unroll
  for (int t = 0; t < MI; t++) {
    #pragma unroll
    for (int h = 0; h < 2; h++) {
      float l = rsum[t][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      // Every key masked: 0/0 = NaN, as the math path's softmax gives.
      const float inv = 1.f / l;
      const int row = m0 + (warp * MI + t) * 16 + (lane >> 2) + h * 8;
      if (row < L) {
        unsigned* dst = (unsigned*)(op + (long long)row * ors);
        #pragma unroll
        for (int dt = 0; dt < OT; dt++) {
          const int col = dt * 8 + (lane & 3) * 2;
          if (col < D) dst[col >> 1] = pack2(acc[t][dt][2 * h] * inv, acc[t][dt][2 * h + 1] * inv);
        }
      }
    }
  }
}
`;
  return { source, name, threads, bm: BM, sharedBytes };
}
