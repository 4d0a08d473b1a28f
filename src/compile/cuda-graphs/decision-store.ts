/**
 * Mode 'default' decides per input signature whether replaying a CUDA graph beats launching the
 * kernels one by one, by timing both on the first call (graph-program.ts `faster`): for a large
 * model that is several host-bound plain runs, tens of milliseconds of every process's start.
 * And a program with a host-sync op (scatterAdd, llm.fusedMoe: piecewise.ts) first tries to capture the whole call,
 * which costs a full run and a failed capture before it is split into pieces (346 ms of a 0.74 s
 * warm start in one H200 profile, when Qwen3's embedding still checked indices on the host; skipping it saves less, since the first-run work in it, cuBLASLt
 * and module loading, moves into the pieces' first run). This stores both facts on disk (the compile DiskCache, KILN_CACHE_DIR, namespace
 * 'cuda-graph-decision'): the measured decision, and that the whole-call capture failed and why,
 * so a later process with the same program reuses them, as it reuses GEMM autotune winners
 * (runtime/cuda/gemm-tune-store.ts). Any mode stores the failure; only 'default' measures.
 *
 * Key: the program's cache key (program-key.ts: graph signature, guard key, mode, kiln's version,
 * the compiler's code hash, the device's properties, the configuration fingerprint; null, so nothing stored, for
 * graphs with process-local constants) and the call's signature (argument dtypes, shapes, strides,
 * in-place or copying graph). Only clear decisions are stored: when the two timings are within
 * CLEAR_RATIO of each other, clock noise could have picked either, and each process measures again.
 * KILN_TUNE_STORE=0 turns storing and loading off (as for GEMM winners).
 */
import { cacheKey } from '../../runtime/cache/key.js';
import { getDiskCache } from '../../runtime/cache/disk-cache.js';
import { programCacheKey } from '../cache/program-key.js';
import type { BackendOptions } from '../backend.js';
import { getOption } from '../../runtime/config.js';

const NAMESPACE = 'cuda-graph-decision';
/** Stored only when one way is at least this much faster than the other. */
const CLEAR_RATIO = 1.5;

export interface GraphDecision {
  readonly plainMs: number;
  readonly graphMs: number;
}

export interface DecisionStore {
  load(callKey: string): GraphDecision | undefined;
  store(callKey: string, d: GraphDecision): void;
  /** Why the whole call could not be captured, when an earlier process found out (then it ran in pieces). */
  loadCaptureFailure(): string | undefined;
  /** The op of the step at which that capture failed, when it was an extern or view step. */
  loadCaptureFailureOp(): string | undefined;
  storeCaptureFailure(reason: string, op?: string): void;
}

export const tuneStoreEnabled = (): boolean => getOption('KILN_TUNE_STORE');

/** The store for one program, or null when its decisions cannot be persisted. */
export function decisionStore(options: BackendOptions, deviceIndex: number): DecisionStore | null {
  const ctx = options.cacheContext;
  if (!ctx || !tuneStoreEnabled()) return null;
  const base = programCacheKey({ signature: ctx.signature, guardKey: ctx.guardKey, mode: options.mode, backend: 'kiln/cuda-graph-decision', devices: [`cuda:${deviceIndex}`] });
  if (base === null) return null;
  const keyOf = (callKey: string): string => cacheKey([base, callKey]);
  return {
    load(callKey) {
      const v = getDiskCache().get(NAMESPACE, keyOf(callKey)) as Partial<GraphDecision> | undefined;
      if (!v || typeof v.plainMs !== 'number' || typeof v.graphMs !== 'number' || !(v.plainMs > 0) || !(v.graphMs > 0)) return undefined;
      return { plainMs: v.plainMs, graphMs: v.graphMs };
    },
    store(callKey, d) {
      if (!Number.isFinite(d.plainMs) || !Number.isFinite(d.graphMs) || d.plainMs <= 0 || d.graphMs <= 0) return;
      if (Math.max(d.plainMs, d.graphMs) < CLEAR_RATIO * Math.min(d.plainMs, d.graphMs)) return;
      getDiskCache().put(NAMESPACE, keyOf(callKey), { plainMs: d.plainMs, graphMs: d.graphMs });
    },
    loadCaptureFailure() {
      const v = getDiskCache().get(NAMESPACE, keyOf('capture-failure')) as { reason?: unknown } | undefined;
      return typeof v?.reason === 'string' ? v.reason : undefined;
    },
    loadCaptureFailureOp() {
      const v = getDiskCache().get(NAMESPACE, keyOf('capture-failure')) as { op?: unknown } | undefined;
      return typeof v?.op === 'string' ? v.op : undefined;
    },
    storeCaptureFailure(reason, op) {
      getDiskCache().put(NAMESPACE, keyOf('capture-failure'), op === undefined ? { reason } : { reason, op });
    },
  };
}
