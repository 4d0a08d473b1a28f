/**
 * The cuBLASLt algorithms a new GEMM problem times (cublaslt.ts tunes them once and keeps the
 * fastest): the heuristic's offers, plus split-K variants of its first offers for problems that
 * leave most SMs idle.
 *
 * Why split-K: at few rows (M = 128 tokens) a GEMM's output has only N/tileN tiles, e.g. 8 CTAs
 * of 128x128 for N = 1024 on a 132-SM H200, so one wave uses a few percent of the GPU and the
 * time is the K loop of one CTA. Splitting K over S CTAs multiplies the parallelism by S; the
 * partial sums go to the workspace in the compute type (fp32) and are reduced by a second kernel
 * (REDUCTION_SCHEME_COMPUTE_TYPE: deterministic, and no rounding of partials to bf16). Float32
 * keeps COMPUTE_32F (exact fp32, no TF32): split-K changes only the summation order.
 * The heuristic reports how much of the GPU an algorithm's launch occupies (wavesCount, 1.0 =
 * all SMs); variants are added only where its first offer is under MAX_WAVES_FOR_SPLIT.
 * Each variant is validated by cublasLtMatmulAlgoCheck (supported here, workspace within ours).
 *
 * Enum values are cublasLt.h's: config SPLITK_NUM = 2, REDUCTION_SCHEME = 3; capability
 * SPLITK_SUPPORT = 0, REDUCTION_SCHEME_MASK = 1; reduction scheme COMPUTE_TYPE = 2. Heuristic
 * results are 96 bytes: algo (64), workspaceSize (size_t at 64), state (int at 72), wavesCount
 * (float at 76).
 */
import type { CublasLtApi, Ptr } from './ffi.js';

const HEURISTIC_RESULT_BYTES = 96;
const ALGO_BYTES = 64;
const CONFIG_ID = 0;
const CONFIG_TILE_ID = 1;
const CONFIG_SPLITK_NUM = 2;
const CONFIG_REDUCTION_SCHEME = 3;
const CONFIG_STAGES_ID = 6;
const CAP_SPLITK_SUPPORT = 0;
const CAP_REDUCTION_SCHEME_MASK = 1;
const REDUCTION_COMPUTE_TYPE = 2;
/** Heuristic offers timed per problem (the first is its best guess; the rest often win at small M). */
export const HEURISTIC_ALGOS = 16;
/** Split-K variants are made from this many of the heuristic's first offers. */
const SPLIT_BASES = 3;
/** Below this occupancy (fraction of one full wave) a problem is worth splitting along K. */
const MAX_WAVES_FOR_SPLIT = 0.5;
/** Split counts tried; each split keeps at least MIN_K_PER_SPLIT of the contraction. */
const SPLITS = [2, 3, 4, 6, 8, 12, 16] as const;
const MIN_K_PER_SPLIT = 128;
/** KILN_GEMM_SPLITK=0: time the heuristic's offers only (A/B measurements). */
const SPLIT_K = process.env['KILN_GEMM_SPLITK'] !== '0';

export interface CandidateQuery {
  readonly handle: Ptr;
  readonly desc: Ptr;
  readonly la: Ptr;
  readonly lb: Ptr;
  readonly lc: Ptr;
  readonly pref: Ptr;
  readonly k: number;
  readonly workspaceBytes: number;
  /** Heuristic offers wanted (1 when tuning is off). */
  readonly requested: number;
  /** The problem, for errors ("bfloat16 [128x1024] @ [1024x4096] (batch 1)"). */
  readonly what: string;
}

export interface Candidate {
  readonly algo: Uint8Array;
  /** The heuristic's occupancy estimate (NaN for variants checked by AlgoCheck that report none). */
  readonly waves: number;
  /** How it was made, for logs. */
  readonly origin: string;
}

function u32(v: number): Uint8Array {
  return new Uint8Array(new Uint32Array([v]).buffer);
}

function readResult(buf: Uint8Array, i: number): { algo: Uint8Array; workspace: number; state: number; waves: number } {
  const base = i * HEURISTIC_RESULT_BYTES;
  const view = new DataView(buf.buffer, buf.byteOffset + base, HEURISTIC_RESULT_BYTES);
  return {
    algo: buf.slice(base, base + ALGO_BYTES),
    workspace: Number(view.getBigUint64(64, true)),
    state: view.getInt32(72, true),
    waves: view.getFloat32(76, true),
  };
}

function capU32(L: CublasLtApi, algo: Uint8Array, attr: number): number {
  const buf = new Uint8Array(4);
  const written: [number] = [0];
  return L.cublasLtMatmulAlgoCapGetAttribute(algo, attr, buf, 4, written) === 0 ? new DataView(buf.buffer).getUint32(0, true) : 0;
}

function configU32(L: CublasLtApi, algo: Uint8Array, attr: number): number {
  const buf = new Uint8Array(4);
  const written: [number] = [0];
  return L.cublasLtMatmulAlgoConfigGetAttribute(algo, attr, buf, 4, written) === 0 ? new DataView(buf.buffer).getUint32(0, true) : -1;
}

/** "id/tile/stages/splitK" of an algorithm (for KILN_GEMM_TUNE_LOG). */
export function describeAlgo(L: CublasLtApi, algo: Uint8Array): string {
  const f = (attr: number): number => configU32(L, algo, attr);
  return `id ${f(CONFIG_ID)} tile ${f(CONFIG_TILE_ID)} stages ${f(CONFIG_STAGES_ID)} splitK ${f(CONFIG_SPLITK_NUM)}`;
}

/** `base` with K split `splits` ways (fp32 partials in the workspace), if cuBLASLt accepts it here. */
function splitVariant(L: CublasLtApi, q: CandidateQuery, base: Uint8Array, splits: number): Candidate | null {
  const algo = base.slice();
  if (L.cublasLtMatmulAlgoConfigSetAttribute(algo, CONFIG_SPLITK_NUM, u32(splits), 4) !== 0) return null;
  if (L.cublasLtMatmulAlgoConfigSetAttribute(algo, CONFIG_REDUCTION_SCHEME, u32(REDUCTION_COMPUTE_TYPE), 4) !== 0) return null;
  const result = new Uint8Array(HEURISTIC_RESULT_BYTES);
  if (L.cublasLtMatmulAlgoCheck(q.handle, q.desc, q.la, q.lb, q.lc, q.lc, algo, result) !== 0) return null;
  const r = readResult(result, 0);
  if (r.state !== 0 || r.workspace > q.workspaceBytes) return null;
  return { algo, waves: r.waves, origin: `split ${splits}` };
}

/**
 * The algorithms to time for one problem, the heuristic's first choice first (it is what runs
 * untuned). Throws nothing: an empty list means the heuristic offered nothing.
 */
export function gemmCandidates(L: CublasLtApi, q: CandidateQuery): Candidate[] {
  const results = new Uint8Array(HEURISTIC_RESULT_BYTES * q.requested);
  const count: [number] = [0];
  const rc = L.cublasLtMatmulAlgoGetHeuristic(q.handle, q.desc, q.la, q.lb, q.lc, q.lc, q.pref, q.requested, results, count);
  if (rc !== 0) throw new Error(`cublasLt: choosing an algorithm for ${q.what} failed with cublasStatus ${rc}`);
  const offered: Candidate[] = [];
  for (let i = 0; i < count[0]; i++) {
    const r = readResult(results, i);
    if (r.state === 0) offered.push({ algo: r.algo, waves: r.waves, origin: `heuristic ${i}` });
  }
  if (!SPLIT_K || q.requested < 2 || offered.length === 0 || !(offered[0]!.waves < MAX_WAVES_FOR_SPLIT)) return offered;
  const seen = new Set(offered.map((c) => Buffer.from(c.algo).toString('hex')));
  const out = [...offered];
  for (const base of offered.slice(0, SPLIT_BASES)) {
    if (capU32(L, base.algo, CAP_SPLITK_SUPPORT) === 0) continue;
    if ((capU32(L, base.algo, CAP_REDUCTION_SCHEME_MASK) & REDUCTION_COMPUTE_TYPE) === 0) continue;
    for (const s of SPLITS) {
      if (q.k / s < MIN_K_PER_SPLIT) break;
      const v = splitVariant(L, q, base.algo, s);
      if (!v) continue;
      const key = Buffer.from(v.algo).toString('hex');
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ ...v, origin: `${base.origin} ${v.origin}` });
    }
  }
  return out;
}
