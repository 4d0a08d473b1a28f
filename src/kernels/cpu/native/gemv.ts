/**
 * The eager hook of the native GEMV (gemv-c.ts): `nativeLinearGemv` runs a linear whose input has
 * at most GEMV_MAX_ROWS rows (a decode step's tokens) against a row-major float32 or bfloat16
 * weight, streaming the weight once in place, and returns null when the call does not fit (the
 * GEMM or the JS engine then runs it). A bfloat16 linear computes in float32 (x decoded exactly,
 * the weight widened in registers) and rounds the output once, as the JS kernels' bfloat16 path
 * does, without decoding the whole weight to float32 on every call.
 */
import type { OutMeta } from '../../../ops/schema.js';
import { getOption } from '../../../runtime/config.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut, readable } from '../numeric.js';
import { GEMV_C_SOURCE, GEMV_MAX_ROWS } from './gemv-c.js';
import type { KoffiLib, NativeFn } from './koffi.js';
import { cpuPath } from './path.js';
import { loadPoolObject } from './pool.js';
import { nativeThreads } from './threads.js';

let gemvFn: NativeFn | undefined;
let gatedFn: NativeFn | undefined;
let calls = 0;

/** How many native GEMV calls this process made (tests check that it ran). */
export function nativeGemvCalls(): number {
  return calls;
}

function gemv(): NativeFn {
  if (gemvFn) return gemvFn;
  const lib = gemvLibrary();
  gemvFn = lib.func(
    'int32_t kiln_gemv(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *w, int64_t wo, int64_t ldw, int32_t wbf16, void *bias, int64_t biaso, int64_t bs, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t nthreads, int32_t flags)',
  );
  return gemvFn;
}

function gated(): NativeFn {
  if (gatedFn) return gatedFn;
  gatedFn = gemvLibrary().func(
    'int32_t kiln_gemv_gated(int64_t m, int64_t n, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, void *wg, int64_t wgo, int64_t ldg, void *wu, int64_t wuo, int64_t ldu, int32_t wbf16, void *y, int64_t yo, int64_t ldy, int32_t ybf16, int32_t nthreads, int32_t flags)',
  );
  return gatedFn;
}

let multiFn: NativeFn | undefined;

function multi(): NativeFn {
  if (multiFn) return multiFn;
  multiFn = gemvLibrary().func(
    'int32_t kiln_gemv_multi(int64_t m, int64_t k, void *x, int64_t xo, int64_t ldx, int32_t xbf16, int32_t wbf16, void *w0, int64_t wo0, int64_t ldw0, int64_t n0, void *y0, int64_t yo0, int64_t ldy0, void *w1, int64_t wo1, int64_t ldw1, int64_t n1, void *y1, int64_t yo1, int64_t ldy1, void *w2, int64_t wo2, int64_t ldw2, int64_t n2, void *y2, int64_t yo2, int64_t ldy2, int32_t ybf16, int32_t nthreads, int32_t flags)',
  );
  return multiFn;
}

let gemvLib: KoffiLib | undefined;

function gemvLibrary(): KoffiLib {
  if (gemvLib) return gemvLib;
  gemvLib = loadPoolObject('kiln_gemv', GEMV_C_SOURCE);
  return gemvLib;
}

/** Threads of one GEMV call. */
function gemvThreads(): number {
  return nativeThreads();
}

/** The last two arguments of every kiln_gemv entry: the call's threads and its flags for them. */
function gemvThreadsAndFlags(): [number, number] {
  const threads = gemvThreads();
  syncWeightPrefetch(threads);
  return [threads, gemvFlags(threads)];
}

/** The lookahead last given to the pool (bytes; -1: not yet). */
let prefetchSet = -1;
let pfConfigFn: NativeFn | undefined;

/**
 * KILN_CPU_WEIGHT_PREFETCH_MB into the pool's weight prefetch (pool-c.ts, pf_*) when it changed:
 * off on one thread (no worker waits between jobs to do it).
 */
function syncWeightPrefetch(threads: number): void {
  const bytes = threads > 1 ? getOption('KILN_CPU_WEIGHT_PREFETCH_MB') * 2 ** 20 : 0;
  if (bytes === prefetchSet) return;
  pfConfigFn ??= gemvLibrary().func('void kiln_pool_pf_config(int64_t lookahead)');
  pfConfigFn(bytes);
  prefetchSet = bytes;
}

/** The pool's weight-prefetch state (tests): learned weights, whether the cycle closed, its bytes, and the positions. */
export function weightPrefetchState(): { weights: number; frozen: boolean; cycleBytes: number; pos: number; front: number; next: number; lookahead: number } {
  const out = new BigInt64Array(7);
  gemvLibrary().func('void kiln_pool_pf_state(void *out)')(out);
  const [weights, frozen, cycleBytes, pos, front, next, lookahead] = Array.from(out, Number) as [number, number, number, number, number, number, number];
  return { weights, frozen: frozen === 1, cycleBytes, pos, front, next, lookahead };
}

/**
 * kiln_gemv's flags for a call on `threads` threads: the stream order (bit 0), one item per thread
 * (bit 1: KILN_CPU_GEMV_SPLIT, up to KILN_CPU_GEMV_SPLIT_MAX_THREADS threads) and the item size in
 * KiB otherwise (bits 8 and up). Why the split stops at a thread count: on 2 threads it took the
 * 197 bfloat16 GEMVs of a Qwen3-0.6B step, called in a loop, from 62.8 to 50.5 ms (the 2-vCPU VM,
 * session 21), but on the H200 machine's 16-core host it took the bfloat16 decode step from 22.2
 * to 24.3 ms (session 22), where the shared counter's 64 KiB items balance sixteen threads better
 * than one fixed run each.
 */
export function gemvFlags(threads: number): number {
  const split = getOption('KILN_CPU_GEMV_SPLIT') && threads <= getOption('KILN_CPU_GEMV_SPLIT_MAX_THREADS');
  return (getOption('KILN_CPU_GEMV_STREAM') ? 1 : 0) | (split ? 2 : 0) | (Math.min(getOption('KILN_CPU_GEMV_ITEM_KIB'), 1 << 20) << 8);
}

/**
 * The rows of x (input [..., k]) the GEMV takes, or null: 1 to GEMV_MAX_ROWS of them, one row
 * through any leading strides, several only when the input is contiguous.
 */
function gemvRows(input: Tensor, k: number): number | null {
  const m = numel(input.shape) / k;
  if (m < 1 || m > GEMV_MAX_ROWS) return null;
  if (input.strides[input.ndim - 1] !== 1 && k > 1) return null;
  if (m > 1 && !isContiguousStrides(input.shape, input.strides)) return null;
  return m;
}

/** The dtypes the GEMV reads weights in (x, bias and output share the weight's dtype). */
const GEMV_DTYPES: ReadonlySet<string> = new Set(['float32', 'bfloat16']);

/** The storage of a float32 / bfloat16 tensor as its words (bfloat16: bits), from element 0. */
function bits(t: Tensor): Uint16Array | Float32Array {
  const buf = t.storage.cpuArrayBuffer();
  return t.dtype === 'bfloat16' ? new Uint16Array(buf, 0, t.storage.nbytes / 2) : new Float32Array(buf, 0, t.storage.nbytes / 4);
}

/**
 * llm.gateUpSiluAndMul(input, gateWeight, upWeight) through the gated GEMV (kiln_gemv_gated: both
 * projections in one pool job, silu(g) * u in its epilogue), or null when it does not apply (the
 * caller runs the composition): the conditions of nativeLinearGemv, both weights [n, k] of the input's dtype.
 */
export function nativeGateUpSiluMul(meta: OutMeta, input: Tensor, gateWeight: Tensor, upWeight: Tensor): Tensor | null {
  if (gateWeight.ndim !== 2 || upWeight.ndim !== 2 || input.ndim < 1) return null;
  const dtype = gateWeight.dtype;
  if (!GEMV_DTYPES.has(dtype) || upWeight.dtype !== dtype || input.dtype !== dtype || meta.dtype !== dtype) return null;
  const [n, k] = gateWeight.shape as [number, number];
  if (upWeight.shape[0] !== n || upWeight.shape[1] !== k || k === 0 || n === 0 || gateWeight.strides[1] !== 1 || upWeight.strides[1] !== 1) return null;
  const m = gemvRows(input, k);
  if (m === null) return null;
  if (!isContiguousStrides(meta.shape, meta.strides)) return null;
  if (cpuPath() !== 'native' || !getOption('KILN_CPU_GEMV')) return null;
  const fn = gated();
  calls++;
  const bf16 = dtype === 'bfloat16' ? 1 : 0;
  input.assertAlive('llm.gateUpSiluAndMul');
  const out = allocOut(meta);
  const rc = fn(m, n, k, bits(input), input.offset, k, bf16, bits(gateWeight), gateWeight.offset, gateWeight.strides[0]!, bits(upWeight), upWeight.offset, upWeight.strides[0]!, bf16, bits(out), out.offset, n, bf16, ...gemvThreadsAndFlags());
  if (rc !== 0) throw new Error(`native gated GEMV [${m}, ${k}] x 2 x [${n}, ${k}]^T: out of memory`);
  return out;
}

/**
 * llm.qkvLinear(input, qWeight, kWeight, vWeight) through one GEMV pool job over the three weights
 * (kiln_gemv_multi: each weight's rows as kiln_gemv computes them), or null when it does not apply
 * (the caller runs the composition): the conditions of nativeLinearGemv, each weight [n_i, k] of the
 * input's dtype with unit column stride.
 */
export function nativeQkvLinear(metas: readonly OutMeta[], input: Tensor, weights: readonly [Tensor, Tensor, Tensor]): Tensor[] | null {
  if (input.ndim < 1 || metas.length !== 3) return null;
  const dtype = input.dtype;
  if (!GEMV_DTYPES.has(dtype)) return null;
  const k = input.shape[input.ndim - 1]!;
  if (k === 0) return null;
  for (const [i, w] of weights.entries()) {
    if (w.ndim !== 2 || w.dtype !== dtype || w.shape[1] !== k || w.strides[1] !== 1 || metas[i]!.dtype !== dtype || !isContiguousStrides(metas[i]!.shape, metas[i]!.strides)) return null;
  }
  const m = gemvRows(input, k);
  if (m === null) return null;
  if (cpuPath() !== 'native' || !getOption('KILN_CPU_GEMV')) return null;
  const fn = multi();
  calls++;
  const bf16 = dtype === 'bfloat16' ? 1 : 0;
  input.assertAlive('llm.qkvLinear');
  const outs = metas.map((meta) => allocOut(meta));
  const args: unknown[] = [m, k, bits(input), input.offset, k, bf16, bf16];
  for (const [i, w] of weights.entries()) args.push(bits(w), w.offset, w.strides[0]!, w.shape[0]!, bits(outs[i]!), outs[i]!.offset, w.shape[0]!);
  const rc = fn(...args, bf16, ...gemvThreadsAndFlags());
  if (rc !== 0) throw new Error(`native q/k/v GEMV [${m}, ${k}] x [${weights.map((w) => w.shape[0]).join(', ')}, ${k}]^T: out of memory`);
  return outs;
}

/** linear(input, weight, bias) through the GEMV, or null when it does not apply. */
export function nativeLinearGemv(meta: OutMeta, input: Tensor, weight: Tensor, bias: Tensor | null): Tensor | null {
  if (weight.ndim !== 2 || input.ndim < 1) return null;
  const dtype = weight.dtype;
  if (!GEMV_DTYPES.has(dtype) || input.dtype !== dtype || meta.dtype !== dtype || (bias !== null && (bias.dtype !== dtype || bias.ndim !== 1))) return null;
  const [n, k] = weight.shape as [number, number];
  if (k === 0 || n === 0 || weight.strides[1] !== 1) return null;
  const m = gemvRows(input, k);
  if (m === null) return null;
  if (cpuPath() !== 'native' || !getOption('KILN_CPU_GEMV')) return null;
  const fn = gemv();
  calls++;
  const bf16 = dtype === 'bfloat16';
  // bfloat16 x and y go to C as their bits (decoded and rounded there): no JS pass over them.
  const bits = (t: Tensor): Uint16Array | Float32Array => {
    const buf = t.storage.cpuArrayBuffer();
    return bf16 ? new Uint16Array(buf, 0, t.storage.nbytes / 2) : new Float32Array(buf, 0, t.storage.nbytes / 4);
  };
  input.assertAlive('linear');
  const b = bias === null ? null : readable(bias);
  const out = allocOut(meta);
  const rc = fn(m, n, k, bits(input), input.offset, k, bf16 ? 1 : 0, bits(weight), weight.offset, weight.strides[0]!, bf16 ? 1 : 0, b?.data ?? null, b?.offset ?? 0, bias?.strides[0] ?? 0, bits(out), out.offset, n, bf16 ? 1 : 0, ...gemvThreadsAndFlags());
  if (rc !== 0) throw new Error(`native GEMV [${m}, ${k}] x [${n}, ${k}]^T: out of memory`);
  return out;
}
