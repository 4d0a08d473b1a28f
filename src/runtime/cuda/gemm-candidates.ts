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
import { getOption } from '../config.js';
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
/**
 * Below this occupancy (fraction of one full wave) a problem is worth splitting along K.
 * KILN_GEMM_SPLIT_WAVES overrides it (A/B measurements: fp32's first offers use smaller tiles than
 * bf16's, so their reported occupancy can sit above the bf16-chosen threshold).
 */
const SPLIT_WAVES = getOption('KILN_GEMM_SPLIT_WAVES');
const MAX_WAVES_FOR_SPLIT = SPLIT_WAVES ?? 0.5;
/**
 * Exact-fp32 problems (COMPUTE_32F on fp32 operands) are searched (below) up to this occupancy of
 * their first offer, which takes in Qwen3's lm head ([128x1024]@[1024x151936], 1.5 waves). H200 R1
 * (qwen3-0.6b-forward f32, autotune log, best of 3 runs each): the search's winners against the
 * best heuristic offer or split-K variant: q|k|v 35.8 vs 36.1 us, o 24.1 vs 24.7, down 29.7 vs
 * 32.2, lm head 854 vs 880 (gate|up kept a heuristic offer): about 0.12 ms of the forward. bf16
 * problems were not measured with it and keep the heuristic and split-K candidates only.
 */
const FP32_SEARCH_WAVES = 4;
const COMPUTE_32F = 68;
const R_32F = 0;
/** Split counts tried; each split keeps at least MIN_K_PER_SPLIT of the contraction. */
const SPLITS = [2, 3, 4, 6, 8, 12, 16] as const;
const MIN_K_PER_SPLIT = 128;
/** KILN_GEMM_SPLITK=0: time the heuristic's offers only (A/B measurements). */
const SPLIT_K = getOption('KILN_GEMM_SPLITK');
/**
 * The algorithm search: for under-occupied problems also enumerate cuBLASLt's algorithm ids x
 * tiles x stages x splits (AlgoGetIds / AlgoInit / AlgoCheck) and time the SEARCH_TIMED valid ones
 * whose occupancy estimate is closest to one full wave. On by default for exact-fp32 problems
 * (FP32_SEARCH_WAVES); KILN_GEMM_SEARCH=1 turns it on for every dtype, =0 off.
 */
const SEARCH = getOption('KILN_GEMM_SEARCH');
const SEARCH_TIMED = 48;
const CAP_TILE_IDS = 6;
const CAP_STAGES_IDS = 13;

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
  /** cuBLASLt types of the problem (for the algorithm search: AlgoGetIds / AlgoInit). */
  readonly types: { readonly compute: number; readonly scale: number; readonly ab: number; readonly cd: number };
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

function capU32Array(L: CublasLtApi, algo: Uint8Array, attr: number): number[] {
  // One call into a buffer larger than any list cuBLASLt reports (tiles and stages are enums < 256).
  const buf = new Uint8Array(1024);
  const written: [number] = [0];
  if (L.cublasLtMatmulAlgoCapGetAttribute(algo, attr, buf, buf.length, written) !== 0) return [];
  return Array.from(new Uint32Array(buf.buffer, 0, Math.min(256, Math.floor(Number(written[0]) / 4))));
}

/** The search of KILN_GEMM_SEARCH (see there). */
function searchCandidates(L: CublasLtApi, q: CandidateQuery): Candidate[] {
  const ids = new Int32Array(128);
  const n: [number] = [0];
  const t = q.types;
  if (L.cublasLtMatmulAlgoGetIds(q.handle, t.compute, t.scale, t.ab, t.ab, t.cd, t.cd, ids.length, ids, n) !== 0) return [];
  const found: Candidate[] = [];
  const result = new Uint8Array(HEURISTIC_RESULT_BYTES);
  const set = (algo: Uint8Array, attr: number, v: number): boolean => L.cublasLtMatmulAlgoConfigSetAttribute(algo, attr, u32(v), 4) === 0;
  for (const id of ids.subarray(0, n[0])) {
    const base = new Uint8Array(ALGO_BYTES);
    if (L.cublasLtMatmulAlgoInit(q.handle, t.compute, t.scale, t.ab, t.ab, t.cd, t.cd, id, base) !== 0) continue;
    const tiles = capU32Array(L, base, CAP_TILE_IDS).filter((x) => x !== 0);
    const stages = capU32Array(L, base, CAP_STAGES_IDS).filter((x) => x !== 0);
    const splitOk = capU32(L, base, CAP_SPLITK_SUPPORT) !== 0 && (capU32(L, base, CAP_REDUCTION_SCHEME_MASK) & REDUCTION_COMPUTE_TYPE) !== 0;
    for (const tile of tiles.length > 0 ? tiles : [0]) {
      for (const stage of stages.length > 0 ? stages : [0]) {
        for (const split of splitOk ? [1, 4, 8] : [1]) {
          if (split > 1 && q.k / split < MIN_K_PER_SPLIT) continue;
          const algo = base.slice();
          if (tile !== 0 && !set(algo, CONFIG_TILE_ID, tile)) continue;
          if (stage !== 0 && !set(algo, CONFIG_STAGES_ID, stage)) continue;
          if (split > 1 && !(set(algo, CONFIG_SPLITK_NUM, split) && set(algo, CONFIG_REDUCTION_SCHEME, REDUCTION_COMPUTE_TYPE))) continue;
          if (L.cublasLtMatmulAlgoCheck(q.handle, q.desc, q.la, q.lb, q.lc, q.lc, algo, result) !== 0) continue;
          const r = readResult(result, 0);
          if (r.state !== 0 || r.workspace > q.workspaceBytes) continue;
          found.push({ algo, waves: r.waves, origin: `search id ${id} tile ${tile} stages ${stage} split ${split}` });
        }
      }
    }
  }
  // Closest to one full wave first, under-filling launches ranked after over-filling ones of equal distance.
  found.sort((a, b) => Math.abs(Math.log(a.waves)) - Math.abs(Math.log(b.waves)));
  return found.slice(0, SEARCH_TIMED);
}

/**
 * The algorithms to time for one problem, the heuristic's first choice first (it is what runs
 * untuned). Throws when the heuristic call itself fails (a cublasStatus, e.g. 15 for a layout the
 * library does not cover: linalg.ts then runs its fallback); an empty list means it offered nothing.
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
  const fp32 = q.types.compute === COMPUTE_32F && q.types.ab === R_32F;
  const search = SEARCH ?? fp32;
  const maxWaves = fp32 && search && SPLIT_WAVES === undefined ? FP32_SEARCH_WAVES : MAX_WAVES_FOR_SPLIT;
  if (!SPLIT_K || q.requested < 2 || offered.length === 0 || !(offered[0]!.waves < maxWaves)) return offered;
  const seen = new Set(offered.map((c) => Buffer.from(c.algo).toString('hex')));
  const out = [...offered];
  if (search) out.push(...searchCandidates(L, q));
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
