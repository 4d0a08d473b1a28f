/**
 * Skinny bfloat16 GEMMs on tensor cores (2..64 rows of x times a row-major [N, K] weight), the
 * decode step's shape at batch 2..64 (issue #17). cuBLASLt's picks for these shapes stream the
 * weights at about 30% of the H200's bandwidth; the CUDA-core GEMV (gemv.ts) is bound by its fp32
 * FMAs from 8 rows on. Here one pass over W serves every row of x on the tensor cores, so the
 * kernel stays bound by the weight stream.
 *
 * "Swap AB": out^T [N, M] = W [N, K] x^T [K, M]. Each mma.sync.m16n8k16 (bf16 in, fp32
 * accumulate) takes 16 weight rows as its M dimension (fragment A) and 8 rows of x as its N
 * dimension (fragment B); M is padded to MP, a multiple of 8, with zero rows (predicated loads).
 * Both fragments are loaded straight from global memory into registers, 16 bytes a load: the
 * products are summed over k, so any bijection of k inside a 16-step that A and B share is
 * allowed. Lane (g = lane / 4, q = lane % 4) of a warp reads 16 consecutive elements of weight
 * rows g and g + 8 at k0 + 16q (two uint4 each: the 4 lanes of a row read 128 contiguous bytes)
 * and the same 16 elements of x row 8j + g; the 32-bit words 2i and 2i + 1 of each uint4 are the
 * MMA's a0/a2 (row g), a1/a3 (row g + 8) and b0/b1 (x) registers. So a 64-wide k step is 4 MMAs
 * per 8 rows of x with no shuffles and no shared-memory staging. x (M x K, at most a few hundred
 * KiB) is re-read by every warp through L1/L2, which costs far less than the weight stream.
 *
 * Work split: a block is 8 warps = RT row tiles x KW k-slices; a warp computes NT tiles of 16
 * weight rows (plain: NT = 2 adjacent tiles for wide N, sharing the x fragments; gated: the gate
 * tile n and the up tile N + n) over the 64-wide k steps s, s + S, s + 2S, ... of its slice
 * (S = KW * C slices). When N is small (o/down projections, N = 1024 = 64 tiles) K is also split
 * over a thread-block cluster of C = 2 or 4 blocks (sm_90), whose partial sums are added through
 * distributed shared memory. All reductions (KW warps in a tree through shared memory, then the C
 * blocks) run in a fixed order: results are deterministic. Accumulation is float32, rounded once
 * to bfloat16 (round to nearest even) at the store, as the GEMV; the gated variant stores
 * silu(g) * u with g and u rounded first, exactly as gemv.ts's gated kernel.
 *
 * Preconditions (else the caller runs cuBLASLt): those of the GEMV (gemvApplies: bfloat16, rows
 * dense along K, 16-byte aligned starts and strides, K % 8 == 0) with 2 <= M <=
 * KILN_MMA_GEMV_MAX_ROWS (at most 64). Default 0 (off) until measured on the H200
 * (bench/cuda-mma-gemv.ts, bench/decode.ts). Needs sm_80 for the MMA (older devices keep
 * cuBLASLt) and sm_90 for clusters (on sm_80/86/89 K is split over the warps of a block only).
 * Registers: 128..255 a thread at 64 rows (scripts/mma-gemv-nvcc-check.mjs), so one block per SM
 * there; each lane keeps two k steps of weights (4..8 uint4 per step) in flight.
 */
import { getOption } from '../../runtime/config.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch, type ParamType } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';
import { bf16Helpers, fastMathHelpers, gateEpilogueHelper, type GemvProblem } from './gemv.js';

/** The most rows of x one launch takes (MP / 8 accumulator tiles per weight tile, in registers). */
export const MMA_GEMV_MAX_M = 64;
const THREADS = 256;
const WARPS = THREADS / 32;
/** Elements of k one warp step covers: 4 lanes x 16 elements per weight row. */
const KSTEP = 64;

const PARAMS: readonly ParamType[] = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64', 'i64', 'i64'];

/** Calls that ran here (tests and the A/B benchmark read it). */
export const mmaGemvStats = { runs: 0 };

/** A launch configuration: padded rows, tiles per warp, warps per row tile along K, blocks per cluster. */
export interface MmaGemvConfig {
  /** M rounded up to a multiple of 8. */
  mp: number;
  /** Weight tiles (16 rows) per warp: 1 or 2 (plain); the gated kernel always has 2 (gate, up). */
  nt: number;
  /** Warps of a block that split K for one row tile: 1, 2, 4 or 8 (the block has 8 / kw row tiles). */
  kw: number;
  /** Blocks of a cluster that split K further: 1, 2 or 4 (needs kw >= 2). */
  c: number;
  gated: boolean;
  /** Gated only: silu through ex2.approx / rcp.approx (KILN_CUDA_FAST_MATH), as gemv.ts. */
  fast: boolean;
}

export function mmaGemvName(cfg: MmaGemvConfig): string {
  return `kiln_mma_gemv${cfg.gated ? '_silu_mul' : ''}_bf16_mp${cfg.mp}_nt${cfg.nt}_kw${cfg.kw}_c${cfg.c}${cfg.gated && cfg.fast ? '_fast' : ''}`;
}

/** Output columns (weight rows of the plain product, gate/up pairs of the gated one) one warp covers. */
function colsPerWarp(cfg: Pick<MmaGemvConfig, 'nt' | 'gated'>): number {
  return cfg.gated ? 16 : 16 * cfg.nt;
}

const HELPERS = `${bf16Helpers('kiln_mg')}static __device__ __forceinline__ uint4 kiln_mg_ld(const unsigned short* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
}
// d += A (16 x 16, row) * B (16 x 8, col), bf16 in, fp32 accumulate.
static __device__ __forceinline__ void kiln_mg_mma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
`;

const CLUSTER_HELPERS = `static __device__ __forceinline__ unsigned kiln_mg_rank() { unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
// All threads of all blocks of the cluster; release / acquire order the shared-memory writes before it.
static __device__ __forceinline__ void kiln_mg_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// A float of block \`rank\`'s shared memory at the address \`p\` has in this block (distributed shared memory).
static __device__ __forceinline__ float kiln_mg_peer(const float* p, unsigned rank) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
}
`;

const FAST_HELPERS = fastMathHelpers('kiln_mg');

/** silu(g) * u with g and u rounded to bfloat16 first: gemv.ts's epilogue under this family's prefix. */
const gateHelper = (fast: boolean): string => gateEpilogueHelper('kiln_mg', fast);

/** CUDA C of one configuration. */
export function mmaGemvSource(cfg: MmaGemvConfig): string {
  const { mp, kw, c, gated } = cfg;
  const nt = gated ? 2 : cfg.nt;
  if (mp % 8 !== 0 || mp < 8 || mp > MMA_GEMV_MAX_M) throw new Error(`mma-gemv: padded rows ${mp} must be a multiple of 8 in 8..${MMA_GEMV_MAX_M}`);
  if (![1, 2, 4, 8].includes(kw) || ![1, 2, 4].includes(c) || (c > 1 && kw < 2) || ![1, 2].includes(nt)) throw new Error(`mma-gemv: unsupported configuration ${JSON.stringify(cfg)}`);
  const rt = WARPS / kw;
  const nj = mp / 8;
  const acc = nt * nj * 4; // accumulators per lane
  const cols = colsPerWarp({ nt, gated });
  // Shared memory for the reductions: the KW tree uses rt * kw / 2 <= 4 slots, the cluster rt <= 4.
  const slots = Math.max(1, Math.max(kw > 1 ? (rt * kw) / 2 : 0, c > 1 ? rt : 0));
  const needRed = kw > 1 || c > 1;
  // Weight row of tile t for lane row `rr` (0..15) of output column base nb: plain tiles are
  // adjacent, gated tiles are the gate row and the up row. Rows past N are clamped (loaded, never stored).
  const rowOf = (t: number, rr: string): string => (gated ? `${t === 0 ? '' : 'N + '}min(nb + ${rr}, N - 1)` : `min(nb + ${16 * t} + ${rr}, N - 1)`);
  const store = gated
    ? `#pragma unroll
    for (int j = 0; j < ${nj}; j++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int n = nb + g + (e >= 2 ? 8 : 0), r = j * 8 + 2 * q + (e & 1);
        if (n < N && r < M) out[(long long)r * ldo + n] = kiln_mg_gate(acc[(0 * ${nj} + j) * 4 + e], acc[(1 * ${nj} + j) * 4 + e], bias, n, N);
      }
    }`
    : `#pragma unroll
    for (int t = 0; t < ${nt}; t++) {
#pragma unroll
      for (int j = 0; j < ${nj}; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int n = nb + 16 * t + g + (e >= 2 ? 8 : 0), r = j * 8 + 2 * q + (e & 1);
          if (n < N && r < M) {
            float v = acc[(t * ${nj} + j) * 4 + e];
            if (bias) v += kiln_mg_bf(bias[n]);
            out[(long long)r * ldo + n] = kiln_mg_tobf(v);
          }
        }
      }
    }`;
  return `
${HELPERS}${c > 1 ? CLUSTER_HELPERS : ''}${gated && cfg.fast ? FAST_HELPERS : ''}${gated ? gateHelper(cfg.fast) : ''}extern "C" __global__ void __launch_bounds__(${THREADS}) ${c > 1 ? `__cluster_dims__(${c}, 1, 1) ` : ''}${mmaGemvName({ ...cfg, nt })}(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ w, unsigned short* __restrict__ out,
    const unsigned short* __restrict__ bias, int M, int N, int K, long long ldx, long long ldw, long long ldo) {
${needRed ? `  __shared__ float red[${slots}][${acc}][32];\n` : ''}  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int rt = warp / ${kw}, sub = warp % ${kw};
  const int rank = ${c > 1 ? '(int)kiln_mg_rank()' : '0'};
  // Output columns nb .. nb + ${cols - 1} of this warp; its k slice is ${c > 1 ? 'rank' : '0'} * ${kw} + sub of ${kw * c}.
  const int nb = (blockIdx.x / ${c} * ${rt} + rt) * ${cols};
  const int slice = rank * ${kw} + sub;
  const int steps = (K + ${KSTEP - 1}) / ${KSTEP};
  const unsigned short* wlo[${nt}];
  const unsigned short* whi[${nt}];
#pragma unroll
  for (int t = 0; t < ${nt}; t++) {
    wlo[t] = w + (long long)(t == 0 ? ${rowOf(0, 'g')} : ${rowOf(1, 'g')}) * ldw;
    whi[t] = w + (long long)(t == 0 ? ${rowOf(0, 'g + 8')} : ${rowOf(1, 'g + 8')}) * ldw;
  }
  // Rows 8j + g of x; rows past M read nothing (zeros).
  const unsigned short* xr[${nj}];
#pragma unroll
  for (int j = 0; j < ${nj}; j++) xr[j] = x + (long long)min(j * 8 + g, M - 1) * ldx;
  float acc[${acc}];
#pragma unroll
  for (int i = 0; i < ${acc}; i++) acc[i] = 0.0f;
  if (nb < N) {
    // Two k steps' weights are loaded before either is used: more of the stream in flight per lane.
    for (int s0 = slice; s0 < steps; s0 += ${2 * kw * c}) {
      uint4 wa[2][${nt}][2][2]; // [step][tile][row g / g + 8][first / second 8 elements]
#pragma unroll
      for (int u = 0; u < 2; u++) {
        const int k = (s0 + u * ${kw * c}) * ${KSTEP} + q * 16;
        const bool ok0 = k + 8 <= K, ok1 = k + 16 <= K;
#pragma unroll
        for (int t = 0; t < ${nt}; t++) {
          wa[u][t][0][0] = kiln_mg_ld(wlo[t] + k, ok0);
          wa[u][t][0][1] = kiln_mg_ld(wlo[t] + k + 8, ok1);
          wa[u][t][1][0] = kiln_mg_ld(whi[t] + k, ok0);
          wa[u][t][1][1] = kiln_mg_ld(whi[t] + k + 8, ok1);
        }
      }
#pragma unroll
      for (int u = 0; u < 2; u++) {
        const int k = (s0 + u * ${kw * c}) * ${KSTEP} + q * 16;
        if (k - q * 16 >= K) break; // the second step is past this slice's end (warp-uniform)
        const bool ok0 = k + 8 <= K, ok1 = k + 16 <= K;
#pragma unroll
        for (int j = 0; j < ${nj}; j++) {
          const bool row = j * 8 + g < M;
          const uint4 b0 = kiln_mg_ld(xr[j] + k, row && ok0);
          const uint4 b1 = kiln_mg_ld(xr[j] + k + 8, row && ok1);
#pragma unroll
          for (int t = 0; t < ${nt}; t++) {
            float* d = acc + (t * ${nj} + j) * 4;
            const uint4 lo0 = wa[u][t][0][0], lo1 = wa[u][t][0][1], hi0 = wa[u][t][1][0], hi1 = wa[u][t][1][1];
            kiln_mg_mma(d, lo0.x, hi0.x, lo0.y, hi0.y, b0.x, b0.y);
            kiln_mg_mma(d, lo0.z, hi0.z, lo0.w, hi0.w, b0.z, b0.w);
            kiln_mg_mma(d, lo1.x, hi1.x, lo1.y, hi1.y, b1.x, b1.y);
            kiln_mg_mma(d, lo1.z, hi1.z, lo1.w, hi1.w, b1.z, b1.w);
          }
        }
      }
    }
  }
${
  kw > 1
    ? `  // The ${kw} k slices of a row tile, added in a fixed tree order (each lane's fragment registers in place).
#pragma unroll
  for (int h = ${kw / 2}; h >= 1; h >>= 1) {
    if (sub >= h && sub < 2 * h) {
#pragma unroll
      for (int i = 0; i < ${acc}; i++) red[rt * ${kw / 2} + sub - h][i][lane] = acc[i];
    }
    __syncthreads();
    if (sub < h) {
#pragma unroll
      for (int i = 0; i < ${acc}; i++) acc[i] += red[rt * ${kw / 2} + sub][i][lane];
    }
    __syncthreads();
  }
`
    : ''
}${
  c > 1
    ? `  // The ${c} blocks of the cluster: block 0 adds the others' sums (read from their shared memory), in rank order.
  if (sub == 0) {
#pragma unroll
    for (int i = 0; i < ${acc}; i++) red[rt][i][lane] = acc[i];
  }
  kiln_mg_cluster_sync();
  if (rank == 0 && sub == 0) {
#pragma unroll 1
    for (int p = 1; p < ${c}; p++) {
#pragma unroll
      for (int i = 0; i < ${acc}; i++) acc[i] += kiln_mg_peer(&red[rt][i][lane], p);
    }
  }
  kiln_mg_cluster_sync(); // no block leaves (freeing its shared memory) before block 0 has read it
`
    : ''
}  if (rank == 0 && sub == 0 && nb < N) {
    ${store}
  }
}
`;
}

/**
 * The configuration for a problem, each warp keeping at least one 64-wide k step:
 * - up to 8 rows (decode at batch 2..8, the default range): k split over all 8 warps of a block
 *   first, then over the fewest cluster blocks that give about 1.4 blocks per SM. Measured on the
 *   H200 at M = 8 (bench/cuda-mma-gemv.ts sweep, bench/results/h200-s17-measure-2026-12-03.json):
 *   this picks the fastest configuration of the sweep for q|k|v, gate|up, o and down, and the
 *   gated gate|up is 6.2 us against 8.4 for the rule below (q|k|v 4.5 against 5.7, the LM head
 *   74.9 against 80.8); about 0.1 ms of a batch-8 step.
 * - more rows: the fewest k splits (KW warps, then C cluster blocks) that give about two blocks
 *   per SM; where nothing reaches that (N = 1024: 64 row tiles), the one with the most blocks.
 * Two tiles per warp (sharing x's fragments, half the L1 traffic of x) for the gated form and for
 * wide weights with 32+ rows, where blocks abound.
 */
export function mmaGemvConfig(m: number, n: number, k: number, gated: boolean, fast: boolean, sms: number, clusters: boolean): MmaGemvConfig {
  const mp = Math.ceil(m / 8) * 8;
  const nt = gated || (mp >= 32 && n >= 8192) ? 2 : 1;
  const groups = Math.ceil(n / colsPerWarp({ nt, gated }));
  const steps = Math.ceil(k / KSTEP);
  const few = mp <= 8;
  const enough = few ? 1.4 * sms : 2 * sms;
  let best: MmaGemvConfig | null = null;
  let bestBlocks = 0;
  for (const c of clusters ? [1, 2, 4] : [1]) {
    for (const kw of few ? [8, 4, 2, 1] : [1, 2, 4, 8]) {
      if ((c > 1 && kw < 2) || (kw * c > steps && kw * c > 1)) continue;
      const blocks = Math.ceil(groups / (WARPS / kw)) * c;
      const cfg = { mp, nt, kw, c, gated, fast };
      if (blocks >= enough) return cfg;
      if (blocks > bestBlocks) {
        best = cfg;
        bestBlocks = blocks;
      }
    }
  }
  return best ?? { mp, nt, kw: 1, c: 1, gated, fast };
}

/** Whether the kernel takes the problem: the GEMV's layout conditions and 2 <= M <= KILN_MMA_GEMV_MAX_ROWS. */
export function mmaGemvApplies(index: number, p: GemvProblem): boolean {
  // mma.sync with bfloat16 needs sm_80.
  if (Number(deviceInfo(index).computeCapability.split('.')[0]) < 8) return false;
  const rows = Math.min(MMA_GEMV_MAX_M, Number(getOption('KILN_MMA_GEMV_MAX_ROWS')));
  if (p.m < 2 || p.m > rows || p.n < 1 || p.k < 8 || p.k % 8 !== 0) return false;
  if (p.x % 16 !== 0 || p.w % 16 !== 0 || p.ldx % 8 !== 0 || p.ldw % 8 !== 0) return false;
  if (p.out % 2 !== 0 || (p.bias !== undefined && p.bias % 2 !== 0)) return false;
  return p.n < 2 ** 30 && p.k < 2 ** 31;
}

/** The configuration `run` uses on device `index` (the bench prints it). */
export function mmaGemvConfigFor(index: number, p: GemvProblem, gated: boolean, fast: boolean): MmaGemvConfig {
  const info = deviceInfo(index);
  const major = Number(info.computeCapability.split('.')[0]);
  return mmaGemvConfig(p.m, p.n, p.k, gated, fast, info.smCount, major >= 9);
}

/**
 * Runs out = x W^T (+ bias), or with `gated` (W [2n, k]) out = silu(x W_gate^T) * (x W_up^T);
 * `cfg` overrides the configuration (benchmarks).
 */
export function runMmaGemv(index: number, stream: CudaStream, p: GemvProblem, gated = false, fast = false, cfg?: MmaGemvConfig): void {
  const c = cfg ?? mmaGemvConfigFor(index, p, gated, fast);
  const kern = kernelFromSource(index, mmaGemvSource(c), mmaGemvName({ ...c, nt: gated ? 2 : c.nt }), PARAMS);
  const groups = Math.ceil(p.n / colsPerWarp({ nt: c.nt, gated }));
  mmaGemvStats.runs++;
  launch(kern, [p.x, p.w, p.out, p.bias ?? 0, p.m, p.n, p.k, p.ldx, p.ldw, p.ldo], { grid: Math.ceil(groups / (WARPS / c.kw)) * c.c, block: THREADS }, stream);
}
