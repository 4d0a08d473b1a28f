/**
 * CUDA C source of the implicit-GEMM conv2d forward kernel (no cuDNN, no patch matrix).
 *
 * GEMM view: out[m, o] = sum_k A[m, k] * B[k, o] with m = (n, oh, ow) (M = N*OH*OW), o the output
 * channel (of one group) and k = (kh, kw, c) (K = KH*KW*Cg, channel fastest, so a run of k is a run
 * of input channels of one pixel: contiguous in channels_last). A is never materialised: the loader
 * computes each element's input address (stride, padding, dilation, any input strides) and fills
 * zeros for padding and for k >= K (K is padded up to the stage depth). B is the weight rearranged
 * by a small prep kernel into [Npad, Kpad] (k fastest, zero padded, tf32-rounded for the tf32 path),
 * so its loads never need bounds checks.
 *
 * Block tile BM (m) x 64 (o): warps as warpsM x 2, warp tile warpM (32 or 64) x 32; a stage holds
 * 64 or 128 bytes of K per row, rows padded by 16 bytes so ldmatrix is bank-conflict free; 3 to 5
 * stages in dynamic shared memory (IGEMM_TILES; conv-igemm.ts picks one by a measured rule).
 * Math: bf16/f16 `mma.sync.m16n8k16`, f32 as tf32 `mma.sync.m16n8k8` (A rounded with
 * cvt.rna.tf32, B rounded by the prep kernel), fragments of both by ldmatrix; or exact f32 FMAs
 * (SIMT, 8 x 4 outputs per thread, float4 shared loads).
 * A loader: 'vec' (16-byte cp.async with zero-fill, when channels are contiguous and a 16-byte run
 * never crosses a pixel: Cg % (16 / elemBytes) == 0) or 'scalar' (element loads into registers
 * one stage ahead, any strides; the small-Cin first layer and non-channels_last inputs).
 * Epilogue: + bias[o], then * scale[o] + shift[o] (eval BatchNorm folded), then ReLU, stored into
 * any output strides (channel pairs as one store when channels are contiguous).
 * Every shape, stride and switch is a compile-time constant, so index divisions are multiplies.
 */
import type { DType } from '../../tensor/dtype.js';
import { PRELUDE } from './codegen/ctypes.js';

export type IgemmDtype = 'float32' | 'float16' | 'bfloat16';
/** 'mma16': bf16/f16 tensor cores; 'tf32': f32 data on tf32 tensor cores; 'simt': exact f32 FMAs. */
export type IgemmMath = 'mma16' | 'tf32' | 'simt';

export const IGEMM_BN = 64;

/**
 * Block tiles: warpsM warps along m (always 2 along o), each warpM rows; stages of the cp.async
 * ring; kBytes of K per stage and row (64: 32 16-bit or 16 32-bit elements; 128: twice that).
 * Shared rows are kBytes + 16 bytes (80 or 144: eight rows hit eight distinct 16-byte bank groups,
 * so ldmatrix and the 16-byte stores are conflict-free).
 */
export interface IgemmTile {
  readonly warpsM: number;
  readonly warpM: 32 | 64;
  readonly stages: number;
  readonly kBytes: 64 | 128;
}

/**
 * The tiles the generator supports. 'm128w32': 8 warps of 32 x 32 (fewest registers, 2 blocks per
 * SM); 'm128w64': 4 warps of 64 x 32 (half the shared-memory fragment traffic per mma);
 * 'm256w64': 8 warps of 64 x 32 (each weight stage feeds 256 rows). SIMT runs 'm128w32' only.
 */
export const IGEMM_TILES = {
  m128w32: { warpsM: 4, warpM: 32, stages: 3, kBytes: 64 },
  // Deeper rings: the R1 measurements were latency-bound (3 stages of 64 bytes keep too little in flight).
  m128w32s5: { warpsM: 4, warpM: 32, stages: 5, kBytes: 64 },
  m128w32k128: { warpsM: 4, warpM: 32, stages: 3, kBytes: 128 },
  m128w64: { warpsM: 2, warpM: 64, stages: 4, kBytes: 64 },
  m128w64k128: { warpsM: 2, warpM: 64, stages: 4, kBytes: 128 },
  m256w64: { warpsM: 4, warpM: 64, stages: 3, kBytes: 64 },
  // Session 4: a 4-stage 128-byte ring keeps more loads in flight at two 8-warp blocks per SM
  // (2 x 110 KB of shared memory). 256-row blocks of 32 x 32 warps (m256w32k128: 16 warps, one block
  // per SM, halving the per-block re-read of the whole weight from L2) measured faster still on the
  // f32 body conv (0.225 vs 0.234 ms, R1), but the R2 run of the every-tile test hit a misaligned
  // address with the 256-row / SIMT-on-4-stage candidates, unresolved without device time, so they
  // are not offered.
  m128w32k128s4: { warpsM: 4, warpM: 32, stages: 4, kBytes: 128 },
} as const satisfies Record<string, IgemmTile>;
export type IgemmTileName = keyof typeof IGEMM_TILES;

export function tileRows(t: IgemmTileName): number {
  return IGEMM_TILES[t].warpsM * IGEMM_TILES[t].warpM;
}

export function tileThreads(t: IgemmTileName): number {
  return IGEMM_TILES[t].warpsM * 2 * 32;
}

/** The SIMT kernel's thread mapping (16 x 16 threads, 8 x 4 outputs each) needs 256 threads over 128 rows. */
export function simtTile(t: IgemmTileName): boolean {
  // The SIMT kernel is validated on the 3- and 5-stage rings only (see m128w32k128s4 above).
  return IGEMM_TILES[t].warpsM === 4 && IGEMM_TILES[t].warpM === 32 && t !== 'm128w32k128s4';
}

function rowBytes(t: IgemmTileName): number {
  return IGEMM_TILES[t].kBytes + 16;
}

/** Dynamic shared memory of a tile: stages x (A rows + B rows) x row bytes. */
export function tileSharedBytes(t: IgemmTileName): number {
  return IGEMM_TILES[t].stages * (tileRows(t) + IGEMM_BN) * rowBytes(t);
}

export interface IgemmSpec {
  dtype: IgemmDtype;
  math: IgemmMath;
  tile: IgemmTileName;
  aLoader: 'vec' | 'scalar';
  /** Input channels per group, kernel size, stride, leading padding, dilation. */
  cg: number;
  kh: number;
  kw: number;
  sh: number;
  sw: number;
  pt: number;
  pl: number;
  dh: number;
  dw: number;
  /** Input spatial size and output spatial size. */
  h: number;
  w: number;
  oh: number;
  ow: number;
  /** Output channels (of the whole conv; groups are not handled here). */
  cout: number;
  /** Input strides (n, c, h, w) and output strides (n, c, h, w), in elements. */
  xs: readonly [number, number, number, number];
  os: readonly [number, number, number, number];
  bias: boolean;
  /** Per-channel f32 scale and shift after the bias (eval BatchNorm). */
  affine: boolean;
  relu: boolean;
  /** Output channel pairs stored as one 2-element store (channel stride 1, even strides, aligned). */
  pairStore: boolean;
  /** 64-bit input/output offsets (a tensor spans more than 2^31 elements). */
  wide: boolean;
}

export function elemBytes(d: IgemmDtype): number {
  return d === 'float32' ? 4 : 2;
}

/** K elements per stage. */
export function stageK(d: IgemmDtype, t: IgemmTileName): number {
  return IGEMM_TILES[t].kBytes / elemBytes(d);
}

export function kTotal(s: Pick<IgemmSpec, 'cg' | 'kh' | 'kw'>): number {
  return s.cg * s.kh * s.kw;
}

export function kPadded(s: Pick<IgemmSpec, 'cg' | 'kh' | 'kw' | 'dtype' | 'tile'>): number {
  const bk = stageK(s.dtype, s.tile);
  return Math.ceil(kTotal(s) / bk) * bk;
}

export function nPadded(cout: number): number {
  return Math.ceil(cout / IGEMM_BN) * IGEMM_BN;
}

function storage(d: IgemmDtype): string {
  return d === 'float32' ? 'float' : 'unsigned short';
}

function toFloat(d: IgemmDtype, e: string): string {
  return d === 'float32' ? e : d === 'bfloat16' ? `kiln_bf2f(${e})` : `kiln_h2f(${e})`;
}

function fromFloat(d: IgemmDtype, e: string): string {
  return d === 'float32' ? e : d === 'bfloat16' ? `kiln_f2bf(${e})` : `kiln_f2h(${e})`;
}

/** A short stable name for the spec (the kernel's extern "C" name). */
export function igemmName(s: IgemmSpec): string {
  const f = (xs: readonly number[]): string => xs.map((x) => (x < 0 ? `m${-x}` : String(x))).join('_');
  const flags = `${s.bias ? 'b' : ''}${s.affine ? 'a' : ''}${s.relu ? 'r' : ''}${s.pairStore ? 'p' : ''}${s.wide ? 'w' : ''}`;
  return `kiln_conv_${s.dtype}_${s.math}_${s.tile}_${s.aLoader}_${f([s.cg, s.kh, s.kw, s.sh, s.sw, s.pt, s.pl, s.dh, s.dw, s.h, s.w, s.oh, s.ow, s.cout])}_x${f(s.xs)}_o${f(s.os)}_${flags || 'n'}`;
}

const PTX_HELPERS = `
__device__ __forceinline__ unsigned kc_smem(const void* p) {
  unsigned r; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p)); return r;
}
__device__ __forceinline__ void kc_cp16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void kc_commit() { asm volatile("cp.async.commit_group;\\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void kc_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N) : "memory"); }
__device__ __forceinline__ void kc_ldsm4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ unsigned kc_tf32(float f) { unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f)); return r; }
`;

function mmaLine(d: IgemmDtype, math: IgemmMath): string {
  if (math === 'tf32') {
    return `__device__ __forceinline__ void kc_mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}`;
  }
  if (math === 'simt') return '';
  const t = d === 'bfloat16' ? 'bf16' : 'f16';
  return `__device__ __forceinline__ void kc_mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.${t}.${t}.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n"
    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}`;
}

/** The compute part of one stage (reads smem buffer `buf`, accumulates into acc). */
function computeStage(s: IgemmSpec): string {
  if (s.math !== 'simt') {
    // One k step is 32 bytes of K: k16 of bf16/f16 (m16n8k16) or k8 of tf32 (m16n8k8). ldmatrix
    // serves both: its 8 x 16-byte rows are 8 x 4 32-bit words, which is the tf32 fragment layout
    // (a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4); b0 = (k t, n g), b1 = (k t + 4, n g)).
    const cvt = s.math === 'tf32'
      ? `
      #pragma unroll
      for (int q = 0; q < 4; ++q) af[mt][q] = kc_tf32(__uint_as_float(af[mt][q]));`
      : '';
    return `
  #pragma unroll
  for (int ks = 0; ks < KB / 32; ++ks) {
    unsigned af[MT][4], bf[4][2];
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      kc_ldsm4(aBase + (wm * WTM + mt * 16 + (lane & 15)) * ROWB + ks * 32 + (lane >> 4) * 16, af[mt][0], af[mt][1], af[mt][2], af[mt][3]);${cvt}
    }
    #pragma unroll
    for (int np = 0; np < 2; ++np)
      kc_ldsm4(bBase + (wn * 32 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * ROWB + ks * 32 + ((lane >> 3) & 1) * 16,
               bf[np * 2][0], bf[np * 2][1], bf[np * 2 + 1][0], bf[np * 2 + 1][1]);
    #pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      #pragma unroll
      for (int nt = 0; nt < 4; ++nt) kc_mma(acc[mt][nt], af[mt], bf[nt]);
  }`;
  }
  return `
  const float* As = (const float*)(smA + buf * BM * ROWB);
  const float* Bs = (const float*)(smB + buf * BN * ROWB);
  // Four k at a time as float4 loads (rows are 16-byte aligned): 12 shared loads per 128 FMAs.
  #pragma unroll
  for (int k = 0; k < BK; k += 4) {
    float4 a[8], b[4];
    #pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = *(const float4*)(As + (tm + 16 * i) * ROWF + k);
    #pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = *(const float4*)(Bs + (tn + 16 * j) * ROWF + k);
    #pragma unroll
    for (int i = 0; i < 8; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
        acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
        acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
        acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
      }
  }`;
}

/** Stores one output value (row offset `ro`, channel `co`); `pairs` stores co and co + 1. */
function epilogue(s: IgemmSpec): string {
  const d = s.dtype;
  const T = storage(d);
  const fx = (v: string, c: string): string => {
    let e = v;
    if (s.bias) e = `(${e} + ${toFloat(d, `bias[${c}]`)})`;
    if (s.affine) e = `fmaf(${e}, scale[${c}], shift[${c}])`;
    if (s.relu) e = `fmaxf(${e}, 0.0f)`;
    return e;
  };
  const pairStore =
    d === 'float32'
      ? `*(float2*)(out + ro + co) = make_float2(v0, v1);`
      : `*(unsigned*)(out + ro + co) = (unsigned)${fromFloat(d, 'v0')} | ((unsigned)${fromFloat(d, 'v1')} << 16);`;
  return `
__device__ __forceinline__ void kc_store(${T}* __restrict__ out, const ${T}* __restrict__ bias, const float* __restrict__ scale,
    const float* __restrict__ shift, IDX ro, int co, float a0, float a1) {
  if (co >= COUT) return;
  ${s.pairStore ? `if (co + 1 < COUT) { const float v0 = ${fx('a0', 'co')}; const float v1 = ${fx('a1', 'co + 1')}; ${pairStore} return; }` : ''}
  out[ro + (IDX)co * OS1] = ${fromFloat(d, fx('a0', 'co'))};
  if (co + 1 < COUT) out[ro + (IDX)(co + 1) * OS1] = ${fromFloat(d, fx('a1', 'co + 1'))};
}
/** Output offset of GEMM row m (without the channel term), or -1 past M. */
__device__ __forceinline__ IDX kc_rowOffset(int m, int M) {
  if (m >= M) return (IDX)-1;
  const int n = m / (OH * OW);
  const int r = m - n * (OH * OW);
  const int oh = r / OW;
  const int ow = r - oh * OW;
  return (IDX)n * OS0 + (IDX)oh * OS2 + (IDX)ow * OS3;
}`;
}

function aLoaderVec(): string {
  return `
  // Vec A loader: BM * CPR 16-byte chunks per stage, ACH per thread: rows tid / CPR + i * (THREADS / CPR).
  constexpr int ACH = BM * CPR / THREADS;
  const int cc = tid % CPR;
  IDX aBaseOff[ACH]; int aIh0[ACH], aIw0[ACH]; bool aRow[ACH];
  #pragma unroll
  for (int i = 0; i < ACH; ++i) {
    const int m = m0 + tid / CPR + i * (THREADS / CPR);
    aRow[i] = m < M;
    const int mm = aRow[i] ? m : 0;
    const int n = mm / (OH * OW);
    const int r = mm - n * (OH * OW);
    const int oh = r / OW;
    aBaseOff[i] = (IDX)n * XS0;
    aIh0[i] = oh * SH - PT;
    aIw0[i] = (r - oh * OW) * SW - PL;
  }
  auto loadA = [&](int buf, int kt) {
    const int k = kt * BK + cc * VEC;
    const int c = k % CG;
    const int rr = k / CG;
    const int kx = rr % KW;
    const int ky = rr / KW;
    #pragma unroll
    for (int i = 0; i < ACH; ++i) {
      const int ih = aIh0[i] + ky * DH;
      const int iw = aIw0[i] + kx * DW;
      const bool ok = aRow[i] && k < KTOT && ih >= 0 && ih < H && iw >= 0 && iw < W;
      const T* src = ok ? x + aBaseOff[i] + (IDX)ih * XS2 + (IDX)iw * XS3 + c : x;
      kc_cp16(aBase0 + buf * (BM * ROWB) + (tid / CPR + i * (THREADS / CPR)) * ROWB + cc * 16, src, ok ? 16 : 0);
    }
  };`;
}

function aLoaderScalar(s: IgemmSpec): string {
  const T = storage(s.dtype);
  const store =
    s.dtype === 'float32'
      ? `float4* d = (float4*)(smA + buf * BM * ROWB + aRowS * ROWB + aKh * 4);
    #pragma unroll
    for (int j = 0; j < EPT / 4; ++j) d[j] = make_float4(areg[4 * j], areg[4 * j + 1], areg[4 * j + 2], areg[4 * j + 3]);`
      : `uint4* d = (uint4*)(smA + buf * BM * ROWB + aRowS * ROWB + aKh * 2);
    #pragma unroll
    for (int j = 0; j < EPT / 8; ++j) {
      unsigned p[4];
      #pragma unroll
      for (int q = 0; q < 4; ++q) p[q] = (unsigned)areg[8 * j + 2 * q] | ((unsigned)areg[8 * j + 2 * q + 1] << 16);
      d[j] = make_uint4(p[0], p[1], p[2], p[3]);
    }`;
  return `
  // Scalar A loader: thread -> one row (tid % BM, consecutive threads on consecutive pixels) and
  // EPT elements of the stage's K, fetched into registers one stage ahead.
  constexpr int EPT = BK / (THREADS / BM);
  const int aRowS = tid % BM;
  const int aKh = (tid / BM) * EPT;
  ${T} areg[EPT];
  IDX aBaseOff; int aIh0, aIw0; bool aRow;
  {
    const int m = m0 + aRowS;
    aRow = m < M;
    const int mm = aRow ? m : 0;
    const int n = mm / (OH * OW);
    const int r = mm - n * (OH * OW);
    const int oh = r / OW;
    aBaseOff = (IDX)n * XS0;
    aIh0 = oh * SH - PT;
    aIw0 = (r - oh * OW) * SW - PL;
  }
  auto fetchA = [&](int kt) {
    // (c, kx, ky) of the first element by division, then stepped (cheaper than 4 divisions each);
    // k >= KTOT exactly when ky >= KH.
    const int k = kt * BK + aKh;
    int c = k % CG;
    const int rr = k / CG;
    int kx = rr % KW;
    int ky = rr / KW;
    #pragma unroll
    for (int j = 0; j < EPT; ++j) {
      const int ih = aIh0 + ky * DH;
      const int iw = aIw0 + kx * DW;
      const bool ok = aRow && ky < KH && ih >= 0 && ih < H && iw >= 0 && iw < W;
      areg[j] = ok ? x[aBaseOff + (IDX)ih * XS2 + (IDX)iw * XS3 + (IDX)c * XS1] : (${T})0;
      if (++c == CG) { c = 0; if (++kx == KW) { kx = 0; ++ky; } }
    }
  };
  auto storeA = [&](int buf) {
    ${store}
  };`;
}

/** The whole translation unit: prelude, helpers, epilogue and the kernel `igemmName(s)`. */
export function igemmSource(s: IgemmSpec): { name: string; source: string } {
  const name = igemmName(s);
  const T = storage(s.dtype);
  const K = kTotal(s);
  const defs: [string, number | string][] = [
    ['BM', tileRows(s.tile)],
    ['BN', IGEMM_BN],
    ['THREADS', tileThreads(s.tile)],
    ['WTM', IGEMM_TILES[s.tile].warpM],
    ['WM', IGEMM_TILES[s.tile].warpsM],
    ['MT', IGEMM_TILES[s.tile].warpM / 16],
    ['ROWB', rowBytes(s.tile)],
    ['ROWF', rowBytes(s.tile) / 4],
    ['KB', IGEMM_TILES[s.tile].kBytes],
    ['CPR', IGEMM_TILES[s.tile].kBytes / 16],
    ['STAGES', IGEMM_TILES[s.tile].stages],
    ['BK', stageK(s.dtype, s.tile)],
    ['VEC', 16 / elemBytes(s.dtype)],
    ['KTOT', K],
    ['KPAD', kPadded(s)],
    ['CG', s.cg],
    ['KH', s.kh],
    ['KW', s.kw],
    ['SH', s.sh],
    ['SW', s.sw],
    ['PT', s.pt],
    ['PL', s.pl],
    ['DH', s.dh],
    ['DW', s.dw],
    ['H', s.h],
    ['W', s.w],
    ['OH', s.oh],
    ['OW', s.ow],
    ['COUT', s.cout],
    ['XS0', `${s.xs[0]}LL`],
    ['XS1', `${s.xs[1]}LL`],
    ['XS2', `${s.xs[2]}LL`],
    ['XS3', `${s.xs[3]}LL`],
    ['OS0', `${s.os[0]}LL`],
    ['OS1', `${s.os[1]}LL`],
    ['OS2', `${s.os[2]}LL`],
    ['OS3', `${s.os[3]}LL`],
    ['IDX', s.wide ? 'long long' : 'int'],
  ];
  // Strides as IDX-typed constants (int unless wide): the LL suffix is cast away in narrow kernels.
  const head = defs.map(([k, v]) => (typeof v === 'string' && v.endsWith('LL') ? `#define ${k} ((IDX)${v})` : `#define ${k} ${v}`)).join('\n');
  const mma = s.math !== 'simt';
  if (!mma && !simtTile(s.tile)) throw new Error(`conv2d igemm: the SIMT kernel needs a 4 x 32-row warp tile, got ${s.tile}`);
  const accDecl = mma ? 'float acc[MT][4][4];' : 'float acc[8][4];';
  const accInit = mma
    ? `#pragma unroll
  for (int i = 0; i < MT; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j)
      #pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;`
    : `#pragma unroll
  for (int i = 0; i < 8; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;`;
  const store = mma
    ? `#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    #pragma unroll
    for (int h8 = 0; h8 < 2; ++h8) {
      const IDX ro = kc_rowOffset(m0 + wm * WTM + mt * 16 + g + h8 * 8, M);
      if (ro < 0) continue;
      #pragma unroll
      for (int nt = 0; nt < 4; ++nt) kc_store(out, bias, scale, shift, ro, n0 + wn * 32 + nt * 8 + 2 * t4, acc[mt][nt][2 * h8], acc[mt][nt][2 * h8 + 1]);
    }
  }`
    : `#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const IDX ro = kc_rowOffset(m0 + tm + 16 * i, M);
    if (ro < 0) continue;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int co = n0 + tn + 16 * j;
      if (co < COUT) out[ro + (IDX)co * OS1] = ${fromFloat(s.dtype, (() => {
        let e = 'acc[i][j]';
        if (s.bias) e = `(${e} + ${toFloat(s.dtype, 'bias[co]')})`;
        if (s.affine) e = `fmaf(${e}, scale[co], shift[co])`;
        if (s.relu) e = `fmaxf(${e}, 0.0f)`;
        return e;
      })())};
    }
  }`;
  const vec = s.aLoader === 'vec';
  const source = `${PRELUDE}
${head}
typedef ${T} T;
${PTX_HELPERS}
${mmaLine(s.dtype, s.math)}
${mma ? epilogue(s) : `__device__ __forceinline__ IDX kc_rowOffset(int m, int M) {
  if (m >= M) return (IDX)-1;
  const int n = m / (OH * OW);
  const int r = m - n * (OH * OW);
  const int oh = r / OW;
  const int ow = r - oh * OW;
  return (IDX)n * OS0 + (IDX)oh * OS2 + (IDX)ow * OS3;
}`}

extern "C" __global__ void __launch_bounds__(THREADS, ${IGEMM_TILES[s.tile].warpM === 32 ? 2 : 1}) ${name}(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ wp,
    const T* __restrict__ bias, const float* __restrict__ scale, const float* __restrict__ shift, int M) {
  extern __shared__ __align__(16) unsigned char kc_smem_raw[];
  unsigned char* smA = kc_smem_raw;
  unsigned char* smB = kc_smem_raw + STAGES * BM * ROWB;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  ${mma ? 'const int wm = warp % WM, wn = warp / WM, g = lane >> 2, t4 = lane & 3;' : 'const int tn = tid & 15, tm = tid >> 4;'}
  (void)lane; (void)warp;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const unsigned aBase0 = kc_smem(smA);
  const unsigned bBase0 = kc_smem(smB);
  (void)aBase0;
  // B loader: BN * CPR 16-byte chunks per stage, BCH per thread; always in bounds (the prep kernel
  // padded the weight to [Npad, Kpad]).
  constexpr int BCH = BN * CPR / THREADS;
  const T* bSrc = wp + (size_t)(n0 + tid / CPR) * KPAD + (tid % CPR) * VEC;
  const unsigned bDst = bBase0 + (tid / CPR) * ROWB + (tid % CPR) * 16;
  auto loadB = [&](int buf, int kt) {
    #pragma unroll
    for (int i = 0; i < BCH; ++i) kc_cp16(bDst + buf * (BN * ROWB) + i * (THREADS / CPR) * ROWB, bSrc + (size_t)i * (THREADS / CPR) * KPAD + kt * BK, 16);
  };
  ${vec ? aLoaderVec() : aLoaderScalar(s)}
  ${accDecl}
  ${accInit}
  constexpr int KT = KPAD / BK;
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      loadB(s, s);
      ${vec ? 'loadA(s, s);' : 'fetchA(s); storeA(s);'}
    }
    kc_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    kc_wait<STAGES - 2>();
    __syncthreads();
    const int nk = kt + STAGES - 1;
    const bool more = nk < KT;
    if (more) {
      loadB(nk % STAGES, nk);
      ${vec ? 'loadA(nk % STAGES, nk);' : 'fetchA(nk);'}
    }
    kc_commit();
    const int buf = kt % STAGES;
    ${s.math !== 'simt' ? 'const unsigned aBase = aBase0 + buf * (BM * ROWB), bBase = bBase0 + buf * (BN * ROWB);' : ''}
    {${computeStage(s)}
    }
    ${vec ? '' : 'if (more) storeA(nk % STAGES);'}
  }
  ${store}
}
`;
  return { name, source };
}

/**
 * Source of the weight prep kernel: w [O, Cg, KH, KW] (any strides) -> wp [Npad, Kpad], k = (kh, kw, c).
 * With `bn` (the dtype of the BatchNorm tensors of conv2dBatchNorm) it also writes the float32
 * epilogue operands ss[0, O) = scale = gamma / sqrt(var + eps) and ss[O, 2 O) = shift =
 * beta + (bias - mean) * scale (the conv bias folded in) from the statistics' current values:
 * one launch that already runs per call, so the fold costs no extra kernel. gamma, beta and bias
 * may be null.
 */
export function weightPrepSource(dtype: IgemmDtype, tf32: boolean, bn: IgemmDtype | null = null): { name: string; source: string } {
  const T = storage(dtype);
  const name = `kiln_conv_wprep_${dtype}${tf32 ? '_tf32' : ''}${bn ? `_bn_${bn}` : ''}`;
  const val = tf32 ? '__uint_as_float(kc_tf32(w[off]))' : 'w[off]';
  const S = bn ? storage(bn) : '';
  const bnParams = bn
    ? `,
    float* __restrict__ ss, const ${S}* __restrict__ mean, const ${S}* __restrict__ var, const ${S}* __restrict__ gamma,
    const ${S}* __restrict__ beta, const ${T}* __restrict__ bias, float eps`
    : '';
  const bnBody = bn
    ? `
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < O; t += gridDim.x * blockDim.x) {
    // As the eager batchNorm: gamma / sqrt(var + eps) (not rsqrt), in float32.
    const float sc = (gamma ? ${toFloat(bn, 'gamma[t]')} : 1.0f) / sqrtf(${toFloat(bn, 'var[t]')} + eps);
    const float b = bias ? ${toFloat(dtype, 'bias[t]')} : 0.0f;
    ss[t] = sc;
    ss[O + t] = (beta ? ${toFloat(bn, 'beta[t]')} : 0.0f) + (b - ${toFloat(bn, 'mean[t]')}) * sc;
  }`
    : '';
  const source = `${PRELUDE}
__device__ __forceinline__ unsigned kc_tf32(float f) { unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f)); return r; }
extern "C" __global__ void __launch_bounds__(256) ${name}(${T}* __restrict__ wp, const ${T}* __restrict__ w, int total, int kpad, int ktot,
    int O, int CG, int KH, int KW, long long ws0, long long ws1, long long ws2, long long ws3${bnParams}) {${bnBody}
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const int o = e / kpad;
    const int k = e - o * kpad;
    ${T} v = (${T})0;
    if (o < O && k < ktot) {
      const int c = k % CG;
      const int r = k / CG;
      const long long off = o * ws0 + c * ws1 + (r / KW) * ws2 + (r % KW) * ws3;
      v = ${val};
    }
    wp[e] = v;
  }
}
`;
  return { name, source };
}

/** Dtypes the implicit-GEMM kernel covers. */
export function igemmDtype(d: DType): IgemmDtype | null {
  return d === 'float32' || d === 'float16' || d === 'bfloat16' ? d : null;
}
