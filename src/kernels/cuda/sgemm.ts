/**
 * Runs exact-fp32 `linear`-layout GEMMs (C[M,N] = A[M,K] W[N,K]^T (+ bias)) on Kiln's SIMT kernel
 * (codegen/sgemm-simt.ts) instead of cuBLASLt, when enabled and the problem fits its
 * preconditions; otherwise says no (returns false) and the caller runs cuBLASLt.
 *
 * Experiment switch: KILN_SGEMM=1, default off. H200 R1 (bench/cuda-sgemm.ts, device time, best
 * tile x split per shape against cuBLASLt's autotuned pick): q|k|v 37.5 vs 36.1 us, o 23.2 vs 23.4,
 * gate|up 55.4 vs 50.3, down 31.0 vs 31.0; torch's exact fp32 (cuBLAS) times were the same as
 * cuBLASLt's. Both sit near 30 TFLOP/s at M = 128 (the lm head, 1187 output tiles, reaches 45), so
 * cuBLASLt stays the fp32 path and this kernel is the measured baseline for the question "is there
 * headroom at M = 128" (none found with this tiling). Split-K partials go to one persistent per-device workspace (like
 * cuBLASLt's: allocated once, outside any CUDA graph capture, reused by every call on the stream),
 * reduced in split order by a second kernel (deterministic).
 */
import { getOption, setOption } from '../../runtime/config.js';
import { check, driver, makeCurrent } from '../../runtime/cuda/driver.js';
import type { DevPtr } from '../../runtime/cuda/ffi.js';
import { kernelFromSource } from '../../runtime/cuda/kernel-cache.js';
import { launch } from '../../runtime/cuda/launch.js';
import { deviceInfo } from '../../runtime/cuda/properties.js';
import type { CudaStream } from '../../runtime/cuda/stream.js';
import type { LtOperand } from '../../runtime/cuda/cublaslt.js';
import { SGEMM_PARAMS, SGEMM_REDUCE_NAME, SGEMM_REDUCE_PARAMS, SGEMM_THREADS, sgemmName, sgemmReduceSource, sgemmSource, type SgemmTile } from './codegen/sgemm-simt.js';

/** Turns the SIMT path on or off (tests and benchmarks; undefined: back to KILN_SGEMM, default off). */
export function setSimtLinear(on: boolean | undefined): void {
  setOption('KILN_SGEMM', on);
}

/** Calls run on the SIMT kernel, and how many of them split K. */
export const simtStats = { runs: 0, split: 0 };
/** Split-K workspace per device: 8 MiB holds 16 splits of a 128 x 1024 output (Qwen3's o/down projections). */
const WORKSPACE_BYTES = 32 << 20;
/** Each split keeps at least this much of K: shorter K loops are dominated by the prologue's load latency. */
const MIN_K_PER_SPLIT = 128;
const SPLITS = [1, 2, 4, 8, 16] as const;

const workspaces = new Map<number, DevPtr>();

function workspace(index: number): DevPtr {
  let w = workspaces.get(index);
  if (w === undefined) {
    makeCurrent(index);
    const out: [DevPtr] = [0];
    check(driver().cu.cuMemAlloc_v2(out, WORKSPACE_BYTES), `allocating the ${WORKSPACE_BYTES >> 20} MiB SIMT GEMM split-K workspace on cuda:${index}`);
    w = Number(out[0]);
    workspaces.set(index, w);
  }
  return w;
}

export interface SimtLinear {
  m: number;
  n: number;
  k: number;
  /** Kiln's A [M,K] and B [K,N] as cublaslt.ts's rowMajorOperand maps them. */
  a: LtOperand;
  b: LtOperand;
  d: DevPtr;
  ldd: number;
  bias?: DevPtr;
}

/** Tile and split count for a problem (see the module header: first guesses, tuned by measurement). */
export function simtPlan(m: number, n: number, k: number, sms: number): { tile: SgemmTile; splits: number } | null {
  const tile: SgemmTile = m > 64 ? { bm: 128, bn: 128, bk: 16 } : { bm: 64, bn: 64, bk: 16 };
  const tiles = Math.ceil(m / tile.bm) * Math.ceil(n / tile.bn);
  let splits = 1;
  for (const s of SPLITS) {
    if (k % (s * tile.bk) !== 0) continue;
    if (s > 1 && k / s < MIN_K_PER_SPLIT) break;
    splits = s;
    // Within 10% of one block per SM is a full wave (Qwen3's q|k|v: 32 tiles x 4 = 128 of 132 SMs).
    if (tiles * s >= 0.9 * sms) break;
  }
  if (k % tile.bk !== 0) return null;
  while (splits > 1 && splits * m * n * 4 > WORKSPACE_BYTES) splits /= 2;
  return { tile, splits };
}

/** Runs the problem on the SIMT kernel and returns true, or returns false (nothing launched). */
export function runSimtLinear(index: number, stream: CudaStream, p: SimtLinear): boolean {
  if (!getOption('KILN_SGEMM')) return false;
  const { a, b, m, n, k } = p;
  // A row-major [M,K] (cuBLASLt sees it as K x M untransposed), W [N,K] row-major (B = W^T read transposed).
  if (a.trans || !b.trans || a.ld % 4 !== 0 || b.ld % 4 !== 0 || n % 4 !== 0 || p.ldd % 4 !== 0) return false;
  if (a.ptr % 16 !== 0 || b.ptr % 16 !== 0 || p.d % 16 !== 0 || (p.bias !== undefined && p.bias % 4 !== 0)) return false;
  const plan = simtPlan(m, n, k, deviceInfo(index).smCount);
  if (!plan) return false;
  const { tile, splits } = plan;
  const kern = kernelFromSource(index, sgemmSource(tile), sgemmName(tile), SGEMM_PARAMS);
  const grid = { grid: Math.ceil(n / tile.bn), gridY: Math.ceil(m / tile.bm), gridZ: splits, block: SGEMM_THREADS };
  simtStats.runs++;
  if (splits === 1) {
    launch(kern, [a.ptr, b.ptr, p.d, p.bias ?? 0, m, n, k, a.ld, b.ld, p.ldd, k], grid, stream);
    return true;
  }
  simtStats.split++;
  const ws = workspace(index);
  launch(kern, [a.ptr, b.ptr, ws, 0, m, n, k, a.ld, b.ld, n, k / splits], grid, stream);
  const reduce = kernelFromSource(index, sgemmReduceSource(), SGEMM_REDUCE_NAME, SGEMM_REDUCE_PARAMS);
  launch(reduce, [ws, p.d, p.bias ?? 0, m, n, p.ldd, splits], { grid: Math.ceil((m * n) / 4 / 256), block: 256 }, stream);
  return true;
}
