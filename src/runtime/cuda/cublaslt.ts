/**
 * GEMM through cuBLASLt. Kiln's tensors are row-major; cuBLASLt is column-major, so a row-major
 * D[M,N] = A[M,K] B[K,N] is computed as the column-major D^T = B^T A^T: cuBLASLt's "A" is Kiln's
 * B and its "B" is Kiln's A, and a transposed operand (a weight read as W^T) is a TRANS flag, not a
 * copy. Descriptors, layouts and the heuristic's algorithm are cached per problem (shape, strides,
 * dtype, epilogue), so a repeated GEMM costs one attribute write (the bias pointer) and one
 * cublasLtMatmul call. Enum values are cublasLt.h's (see /work/shared/notes/gpu-facts.md).
 */
import { writeStderr } from '../../platform/index.js';
import { getOption } from '../config.js';
import { check, driver, makeCurrent } from './driver.js';
import { bindCublasLt, type CublasLtApi, type DevPtr, type Ptr } from './ffi.js';
import { findLibrary, missingMessage } from './discover.js';
import { CudaEvent, type CudaStream } from './stream.js';
import { describeAlgo, gemmCandidates, HEURISTIC_ALGOS } from './gemm-candidates.js';
import { tunePersisted } from './gemm-tune-store.js';
import { deviceInfo } from './properties.js';
import { backends } from '../backends.js';

const COMPUTE_32F = 68;
// cublasComputeType_t CUBLAS_COMPUTE_32F_FAST_TF32: fp32 in and out, products on TF32 tensor cores.
const COMPUTE_32F_FAST_TF32 = 77;
const COMPUTE_64F = 70;
const R_32F = 0;
const R_64F = 1;
const DATA_TYPE = { float32: 0, float64: 1, float16: 2, bfloat16: 14 } as const;
const DESC_TRANSA = 3;
const DESC_TRANSB = 4;
const DESC_EPILOGUE = 7;
const DESC_BIAS_POINTER = 8;
const EPILOGUE_BIAS = 4;
const LAYOUT_BATCH_COUNT = 5;
const LAYOUT_STRIDED_BATCH_OFFSET = 6;
const PREF_MAX_WORKSPACE_BYTES = 1;
// MIN_ALIGNMENT_{A,B,C,D}_BYTES: the heuristic assumes 256-byte aligned buffers unless told less,
// and a view at an offset (a slice of a fused QKV projection) is often only 16-byte aligned.
const PREF_MIN_ALIGNMENT = { a: 5, b: 6, c: 7, d: 8 } as const;
const OP_N = 0;
const OP_T = 1;
// 32 MiB of workspace lets the heuristic pick split-K and stream-K kernels for large problems.
const WORKSPACE_BYTES = 32 << 20;
/**
 * Each new problem times its candidate algorithms once (gemm-candidates.ts: the heuristic's offers
 * and split-K variants; TUNE_REPS runs after one warm-up, best kept) and keeps the fastest. The
 * heuristic's first choice is often not the fastest for small-M problems (a transformer's
 * projections at a few hundred tokens). Only problems whose rerun is harmless (beta = 0) are
 * tuned, never during a CUDA graph capture (the warm-up run before a capture tunes them);
 * KILN_GEMM_AUTOTUNE=0 keeps the heuristic's first choice. KILN_GEMM_TUNE_LOG=1 prints each
 * problem's candidates and times to stderr.
 */
const TUNE_REPS = 3;
const TUNE_LOG = getOption('KILN_GEMM_TUNE_LOG');
const TUNE = getOption('KILN_GEMM_AUTOTUNE');

export type GemmDtype = keyof typeof DATA_TYPE;

/**
 * cuBLASLt compute type of a GEMM on `dtype` operands: float64 exact; float32 exact fp32 unless
 * backends.cuda.matmul.allowTf32 (then TF32 tensor cores); fp16/bf16 accumulate in fp32.
 */
export function gemmComputeType(dtype: GemmDtype): number {
  if (dtype === 'float64') return COMPUTE_64F;
  return dtype === 'float32' && backends.cuda.matmul.allowTf32 ? COMPUTE_32F_FAST_TF32 : COMPUTE_32F;
}

let lt: CublasLtApi | undefined;

function api(): CublasLtApi {
  if (lt) return lt;
  const { koffi } = driver();
  const found = findLibrary('cublasLt');
  let lastErr = '';
  for (const c of found.candidates) {
    try {
      lt = bindCublasLt(koffi, c);
      return lt;
    } catch (e) {
      lastErr = (e as Error).message;
    }
  }
  throw new Error(missingMessage(found, lastErr));
}

function ltCheck(rc: number, doing: string): void {
  // cublasStatus_t: 0 success; 7 not supported, 8 internal error, 13 execution failed.
  if (rc !== 0) throw new Error(`cublasLt: ${doing} failed with cublasStatus ${rc}`);
}

/** One matrix operand in cuBLASLt's column-major terms. */
export interface LtOperand {
  ptr: DevPtr;
  /** Stored rows/cols (column-major) and leading dimension. */
  rows: number;
  cols: number;
  ld: number;
  trans: boolean;
  batchStride: number;
}

/** A row-major [R, C] view with element strides (sr, sc): how cuBLASLt can read it, or null (needs a copy). */
export function rowMajorOperand(ptr: DevPtr, R: number, C: number, sr: number, sc: number, batchStride: number): LtOperand | null {
  const rs = R === 1 ? Math.max(C, 1) : sr;
  const cs = C === 1 ? 1 : sc;
  // Row-major rows of C elements: column-major C x R with ld = rs, read untransposed.
  if (cs === 1 && rs >= Math.max(C, 1)) return { ptr, rows: C, cols: R, ld: rs, trans: false, batchStride };
  // Column-major storage (a transposed view): R x C with ld = sc, read transposed.
  const rs2 = R === 1 ? 1 : sr;
  const cs2 = C === 1 ? Math.max(R, 1) : sc;
  if (rs2 === 1 && cs2 >= Math.max(R, 1)) return { ptr, rows: R, cols: C, ld: cs2, trans: true, batchStride };
  return null;
}

export interface GemmProblem {
  dtype: GemmDtype;
  m: number;
  n: number;
  k: number;
  batch: number;
  /** Kiln's A [M,K] and B [K,N], already mapped by rowMajorOperand. */
  a: LtOperand;
  b: LtOperand;
  /** Output D [M,N] row-major with row stride ldd. */
  d: DevPtr;
  ldd: number;
  dBatchStride: number;
  /** Bias of length N added to every row (the BIAS epilogue). */
  bias?: DevPtr;
  alpha: number;
  beta: number;
  /** C for beta != 0 (same layout as D); defaults to D. */
  c?: DevPtr;
  /** Dtype of C/D when it differs from A/B (bf16 inputs with fp32 output). */
  outDtype?: GemmDtype;
}

interface Plan {
  desc: Ptr;
  la: Ptr;
  lb: Ptr;
  lc: Ptr;
  algo: Uint8Array;
  /** Every algorithm the heuristic offered, best guess first. */
  algos: Uint8Array[];
  tuned: boolean;
  /** The problem and where each algorithm came from (KILN_GEMM_TUNE_LOG). */
  what: string;
  origins: string[];
  /** The problem's cache key (also the key of its persisted autotune winner, gemm-tune-store.ts). */
  key: string;
}

interface DeviceState {
  handle: Ptr;
  workspace: DevPtr;
  plans: Map<string, Plan>;
}

const devices = new Map<number, DeviceState>();

function deviceState(index: number): DeviceState {
  let s = devices.get(index);
  if (s) return s;
  makeCurrent(index);
  const L = api();
  const h: [Ptr | null] = [null];
  ltCheck(L.cublasLtCreate(h), 'creating a handle');
  const ws: [DevPtr] = [0];
  check(driver().cu.cuMemAlloc_v2(ws, WORKSPACE_BYTES), `allocating the ${WORKSPACE_BYTES >> 20} MiB cuBLASLt workspace on cuda:${index}`);
  s = { handle: h[0]!, workspace: Number(ws[0]), plans: new Map() };
  devices.set(index, s);
  return s;
}

function i32(v: number): Uint8Array {
  return new Uint8Array(new Int32Array([v]).buffer);
}
function u32(v: number): Uint8Array {
  return new Uint8Array(new Uint32Array([v]).buffer);
}
/** Largest power of two (up to 256) dividing an address. */
function alignment(ptr: DevPtr): number {
  let a = 256;
  while (a > 1 && ptr % a !== 0) a >>= 1;
  return a;
}
function i64(v: number): Uint8Array {
  return new Uint8Array(new BigInt64Array([BigInt(v)]).buffer);
}

function layout(L: CublasLtApi, type: number, rows: number, cols: number, ld: number, batch: number, batchStride: number): Ptr {
  const out: [Ptr | null] = [null];
  ltCheck(L.cublasLtMatrixLayoutCreate(out, type, rows, cols, ld), `creating a ${rows}x${cols} layout (ld ${ld})`);
  if (batch > 1) {
    ltCheck(L.cublasLtMatrixLayoutSetAttribute(out[0]!, LAYOUT_BATCH_COUNT, i32(batch), 4), 'setting the batch count');
    ltCheck(L.cublasLtMatrixLayoutSetAttribute(out[0]!, LAYOUT_STRIDED_BATCH_OFFSET, i64(batchStride), 8), 'setting the batch stride');
  }
  return out[0]!;
}

function plan(index: number, p: GemmProblem): Plan {
  const s = deviceState(index);
  // cuBLASLt's A is Kiln's B, its B is Kiln's A.
  const A = p.b;
  const B = p.a;
  const al = { a: alignment(A.ptr), b: alignment(B.ptr), d: alignment(p.d), c: alignment(p.c ?? p.d) };
  const compute = gemmComputeType(p.dtype);
  const key = [compute, al.a, al.b, al.c, al.d, p.dtype, p.m, p.n, p.k, p.batch, A.rows, A.cols, A.ld, A.trans, A.batchStride, B.rows, B.cols, B.ld, B.trans, B.batchStride, p.ldd, p.dBatchStride, p.bias !== undefined, p.beta !== 0, p.outDtype ?? p.dtype].join(',');
  const hit = s.plans.get(key);
  if (hit) return hit;
  const L = api();
  const f64 = p.dtype === 'float64';
  const d: [Ptr | null] = [null];
  ltCheck(L.cublasLtMatmulDescCreate(d, compute, f64 ? R_64F : R_32F), 'creating a matmul descriptor');
  const desc = d[0]!;
  ltCheck(L.cublasLtMatmulDescSetAttribute(desc, DESC_TRANSA, i32(A.trans ? OP_T : OP_N), 4), 'setting TRANSA');
  ltCheck(L.cublasLtMatmulDescSetAttribute(desc, DESC_TRANSB, i32(B.trans ? OP_T : OP_N), 4), 'setting TRANSB');
  if (p.bias !== undefined) ltCheck(L.cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE, i32(EPILOGUE_BIAS), 4), 'setting the BIAS epilogue');
  const t = DATA_TYPE[p.dtype];
  const la = layout(L, t, A.rows, A.cols, A.ld, p.batch, A.batchStride);
  const lb = layout(L, t, B.rows, B.cols, B.ld, p.batch, B.batchStride);
  const lc = layout(L, DATA_TYPE[p.outDtype ?? p.dtype], p.n, p.m, p.ldd, p.batch, p.dBatchStride);
  const pr: [Ptr | null] = [null];
  ltCheck(L.cublasLtMatmulPreferenceCreate(pr), 'creating a preference');
  ltCheck(L.cublasLtMatmulPreferenceSetAttribute(pr[0]!, PREF_MAX_WORKSPACE_BYTES, i64(WORKSPACE_BYTES), 8), 'setting the workspace size');
  for (const [which, attr] of Object.entries(PREF_MIN_ALIGNMENT)) {
    ltCheck(L.cublasLtMatmulPreferenceSetAttribute(pr[0]!, attr, u32(al[which as keyof typeof al]), 4), `setting the ${which.toUpperCase()} alignment`);
  }
  if (p.bias !== undefined) ltCheck(L.cublasLtMatmulDescSetAttribute(desc, DESC_BIAS_POINTER, i64(p.bias), 8), 'setting the bias pointer');
  const what = `${p.dtype}${compute === COMPUTE_32F_FAST_TF32 ? ' (tf32)' : ''} [${p.m}x${p.k}] @ [${p.k}x${p.n}] (batch ${p.batch})`;
  const offered = gemmCandidates(L, {
    handle: s.handle, desc, la, lb, lc, pref: pr[0]!, k: p.k, workspaceBytes: WORKSPACE_BYTES, requested: TUNE ? HEURISTIC_ALGOS : 1, what,
    types: { compute, scale: f64 ? R_64F : R_32F, ab: t, cd: DATA_TYPE[p.outDtype ?? p.dtype] },
  });
  L.cublasLtMatmulPreferenceDestroy(pr[0]!);
  if (offered.length < 1) throw new Error(`cublasLt: no algorithm for ${what}`);
  const algos = offered.map((c) => c.algo);
  const made: Plan = { desc, la, lb, lc, algo: algos[0]!, algos, tuned: algos.length < 2, what, origins: offered.map((c) => `${c.origin} (waves ${c.waves.toFixed(2)})`), key };
  s.plans.set(key, made);
  return made;
}

/** D = alpha * A @ B (+ bias) (+ beta * C), on `stream`. */
export function gemm(index: number, stream: CudaStream, p: GemmProblem): void {
  const s = deviceState(index);
  makeCurrent(index);
  const pl = plan(index, p);
  const L = api();
  if (p.bias !== undefined) ltCheck(L.cublasLtMatmulDescSetAttribute(pl.desc, DESC_BIAS_POINTER, i64(p.bias), 8), 'setting the bias pointer');
  const f64 = p.dtype === 'float64';
  const alpha = new Uint8Array((f64 ? new Float64Array([p.alpha]) : new Float32Array([p.alpha])).buffer);
  const beta = new Uint8Array((f64 ? new Float64Array([p.beta]) : new Float32Array([p.beta])).buffer);
  const c = p.c ?? p.d;
  const run = (algo: Uint8Array): number => L.cublasLtMatmul(s.handle, pl.desc, alpha, p.b.ptr, pl.la, p.a.ptr, pl.lb, beta, c, pl.lc, p.d, pl.lc, algo, s.workspace, WORKSPACE_BYTES, stream.handle);
  if (!pl.tuned && p.beta === 0 && !stream.isCapturing()) tunePersisted(deviceInfo(index), pl.key, pl, L.cublasLtGetVersion(), () => tune(index, stream, pl, run));
  ltCheck(run(pl.algo), `running ${p.dtype} [${p.m}x${p.k}] @ [${p.k}x${p.n}] (batch ${p.batch})`);
}

/** Times every offered algorithm on this call's operands (D is overwritten; beta is 0) and keeps the fastest. */
function tune(index: number, stream: CudaStream, pl: Plan, run: (algo: Uint8Array) => number): void {
  pl.tuned = true;
  const start = new CudaEvent(index, true);
  const end = new CudaEvent(index, true);
  let best = Infinity;
  let winner = -1;
  const log: string[] = [];
  for (const [i, algo] of pl.algos.entries()) {
    if (run(algo) !== 0) {
      if (TUNE_LOG) log.push(`  ${pl.origins[i]}: refused`);
      continue; // an algorithm the heuristic offered but that refuses these pointers
    }
    let ms = Infinity;
    for (let r = 0; r < TUNE_REPS; r++) {
      start.record(stream);
      run(algo);
      end.record(stream);
      end.synchronize();
      ms = Math.min(ms, start.elapsedTime(end));
    }
    if (TUNE_LOG) log.push(`  ${(ms * 1000).toFixed(1).padStart(7)} us  ${pl.origins[i]}  ${describeAlgo(api(), algo)}`);
    if (ms < best) {
      best = ms;
      pl.algo = algo;
      winner = i;
    }
  }
  if (TUNE_LOG) writeStderr(`[kiln gemm tune] ${pl.what}: best ${(best * 1000).toFixed(1)} us (${pl.origins[winner] ?? '-'}; first offer ${pl.origins[0]})\n${log.join('\n')}\n`);
}

export function cublasLtVersion(): number {
  return api().cublasLtGetVersion();
}
