/**
 * Device-side checks that never synchronise the host: a kernel that finds bad input (an index out
 * of range) records the first one in a small per-device error word and carries on safely (the
 * gather kernels write zeros for such rows); the host raises a clear error at the next point where
 * it waits for the device anyway: `kiln.synchronize` and every device-to-host copy (toArray, item).
 * Like PyTorch's device-side asserts, the error comes later than the op that caused it, but unlike
 * them the context stays usable: the word is cleared when the error is raised.
 *
 * Why: checking indices on the host costs a synchronisation per gather, and no CUDA graph can
 * contain one, so a model whose entry is an embedding could not be captured as one graph.
 *
 * The report lives in pinned host memory (cuMemAllocHost): with unified addressing (every 64-bit
 * Linux system CUDA supports) kernels write it through the same address the host reads, so the
 * check at a synchronisation is a read of host memory, no copy. Layout (4 x int64): the check's
 * code (0: no error), the bad value, the valid size, unused. The first failing thread claims the
 * report with atomicCAS on a claim word in device memory (atomics on mapped host memory depend on
 * the bus supporting them; device-memory atomics do not) and only that thread writes the report,
 * so it is one consistent triple; raising the error clears both (the claim with a memset on the
 * default stream, ordered before any later kernel). Codes name an op and what it indexed
 * (registered once per distinct description).
 */
import { check, driver, makeCurrent } from './driver.js';
import type { DevPtr, Ptr } from './ffi.js';

const WORD_BYTES = 32;
const CLAIM_BYTES = 8;

interface ErrorWord {
  readonly view: BigInt64Array;
  /** The report's address for kernels (the host address, under unified addressing). */
  readonly report: DevPtr;
  /** Device memory: 0 until a failing thread claims the report. */
  readonly claim: DevPtr;
}

const words = new Map<number, ErrorWord>();

export interface DeviceCheck {
  readonly op: string;
  /** What the value indexes, e.g. "'weight' rows" or "dim 1 of 'self' [4, 5]". */
  readonly what: string;
}

const checks: DeviceCheck[] = [];
const codes = new Map<string, number>();

/** A code for kernels to record for a failing `check` (1, 2, ...; stable for the process). */
export function deviceCheckCode(c: DeviceCheck): number {
  const key = `${c.op}\u0000${c.what}`;
  let code = codes.get(key);
  if (code === undefined) {
    checks.push(c);
    code = checks.length;
    codes.set(key, code);
  }
  return code;
}

function wordFor(index: number): ErrorWord {
  let w = words.get(index);
  if (w) return w;
  makeCurrent(index);
  const { cu, koffi } = driver();
  const out: [Ptr | null] = [null];
  check(cu.cuMemAllocHost_v2(out, WORD_BYTES), `pinning ${WORD_BYTES} bytes of host memory for device-side error reports`);
  const host = out[0]!;
  const view = new BigInt64Array(koffi.view(host, WORD_BYTES));
  view.fill(0n);
  const claim: [DevPtr] = [0];
  check(cu.cuMemAlloc_v2(claim, CLAIM_BYTES), 'allocating the device-side error claim word');
  check(cu.cuMemsetD8Async(claim[0], 0, CLAIM_BYTES, null), 'clearing the device-side error claim word');
  check(cu.cuCtxSynchronize(), 'clearing the device-side error claim word');
  w = { view, report: Number(host), claim: claim[0] };
  words.set(index, w);
  return w;
}

/** The claim and report addresses of cuda:`index`, kernel arguments of every checking kernel. */
export function deviceErrorArgs(index: number): { claim: DevPtr; report: DevPtr } {
  const w = wordFor(index);
  return { claim: w.claim, report: w.report };
}

/**
 * CUDA C: `kiln_report_index(claim, report, code, value, size)` records a bad index unless an
 * earlier one holds the report. For kernels that take `unsigned long long* claim, long long* report`.
 */
export const REPORT_INDEX_C = `
__device__ __forceinline__ void kiln_report_index(unsigned long long* claim, volatile long long* report, long long code, long long value, long long size) {
  if (atomicCAS(claim, 0ULL, 1ULL) == 0ULL) { report[1] = value; report[2] = size; __threadfence_system(); report[0] = code; }
}
`;

/** The error an error word reports (exported for tests of the message). */
export function deviceCheckError(index: number, code: number, value: bigint, size: bigint): Error {
  const c = checks[code - 1];
  const op = c?.op ?? 'a cuda kernel';
  const what = c?.what ?? 'its input';
  return new RangeError(
    `${op}: index ${value} is out of range for ${what} of size ${size} (found on cuda:${index} by the device-side index check and raised at the next synchronisation; the rows of bad indices were written as zeros)`,
  );
}

/**
 * Raises (and clears) the error cuda:`index`'s kernels recorded, if any. Call only once the device
 * has finished the work in question (after a synchronisation): the kernel's writes are visible
 * then. `stream`: the device's default stream, which clears the claim before its next kernel.
 */
export function raiseDeviceErrors(index: number, stream: Ptr): void {
  const w = words.get(index);
  if (!w || w.view[0] === 0n) return;
  const code = Number(w.view[0]);
  const value = w.view[1]!;
  const size = w.view[2]!;
  w.view.fill(0n);
  makeCurrent(index);
  check(driver().cu.cuMemsetD8Async(w.claim, 0, CLAIM_BYTES, stream), 'clearing the device-side error claim word');
  throw deviceCheckError(index, code, value, size);
}
