/**
 * Eager hooks of the native row kernels (rows-c.ts): RMSNorm, add + RMSNorm, neox rotary, silu,
 * same-shape mul, llm.siluAndMul, llm.reshapeAndCache's row copies, llm.qkNormRotaryCache (neox) and
 * argmax over trailing dims,
 * for contiguous float32 or bfloat16 tensors of one dtype on the native path; each returns null
 * (false for the cache copy) when the call does not fit (the JS kernel then runs). They replace JS
 * loops that decode and round every element through doubles: the small ops of a cpu decode step
 * (issue #17).
 */
import type { OutMeta } from '../../../ops/schema.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut } from '../numeric.js';
import { loadLibrary, type NativeFn } from './koffi.js';
import { cpuPath } from './path.js';
import { ROWS_C_SOURCE } from './rows-c.js';
import { buildSharedObjectSync } from './so-cache.js';
import { probeToolchain } from './toolchain.js';

interface RowsLib {
  addRms: NativeFn;
  rope: NativeFn;
  silu: NativeFn;
  mul: NativeFn;
  siluMul: NativeFn;
  cacheRows: NativeFn;
  argmax: NativeFn;
  qkNormRopeCache: NativeFn;
}

let lib: RowsLib | undefined;
let calls = 0;

/** How many native row-kernel calls this process made (tests check that they ran). */
export function nativeRowCalls(): number {
  return calls;
}

function rows(): RowsLib {
  if (lib) return lib;
  const probe = probeToolchain();
  if (!probe.ok) throw new Error(`native cpu path: ${probe.reason}`);
  const l = loadLibrary(buildSharedObjectSync('kiln_rows', ROWS_C_SOURCE, probe.toolchain));
  lib = {
    addRms: l.func('void kiln_add_rms(int64_t rows, int64_t n, void *x, void *r, void *w, double eps, void *out, void *sum, int32_t bf16)'),
    rope: l.func('void kiln_rope(int64_t rows, int64_t heads, int64_t d, void *x, void *cs, void *sn, void *out, int32_t bf16)'),
    silu: l.func('void kiln_silu(int64_t n, void *x, void *out, int32_t bf16)'),
    mul: l.func('void kiln_mul(int64_t n, void *a, void *b, void *out, int32_t bf16)'),
    siluMul: l.func('void kiln_silu_mul(int64_t rows, int64_t d, void *x, void *out, int32_t bf16)'),
    cacheRows: l.func('int64_t kiln_cache_rows(int64_t n, int64_t rowBytes, void *slots, int32_t slots64, int64_t capacity, void *k, void *v, void *kc, void *vc)'),
    argmax: l.func('void kiln_argmax(int64_t rows, int64_t n, void *x, void *out, int32_t bf16)'),
    qkNormRopeCache: l.func(
      'int64_t kiln_qk_norm_rope_cache(int64_t n, int64_t hq, int64_t hk, int64_t d, void *q, void *k, void *v, void *qw, void *kw, double eps, void *cs, void *sn, void *qout, void *slots, int32_t slots64, int64_t capacity, void *kc, void *vc, int32_t bf16)',
    ),
  };
  return lib;
}

const DTYPES: ReadonlySet<string> = new Set(['float32', 'bfloat16']);

/** The tensor's elements from its offset on (a view of its storage). */
function words(t: Tensor): Float32Array | Uint16Array {
  const buf = t.storage.cpuArrayBuffer();
  return t.dtype === 'bfloat16' ? new Uint16Array(buf, t.offset * 2, numel(t.shape)) : new Float32Array(buf, t.offset * 4, numel(t.shape));
}

function fits(dtype: string, ...ts: (Tensor | OutMeta)[]): boolean {
  return DTYPES.has(dtype) && ts.every((t) => t.dtype === dtype && isContiguousStrides(t.shape, t.strides)) && cpuPath() === 'native';
}

/** rmsNorm over the last n elements (residual null) or llm.addRmsNorm's [out, sum]. */
export function nativeAddRms(metas: OutMeta[], x: Tensor, residual: Tensor | null, weight: Tensor, n: number, eps: number): Tensor[] | null {
  const all = residual ? [x, residual, weight, ...metas] : [x, weight, ...metas];
  if (n === 0 || numel(weight.shape) !== n || !fits(x.dtype, ...all)) return null;
  const outs = metas.map((m) => allocOut(m));
  const total = numel(x.shape);
  calls++;
  if (total > 0) rows().addRms(total / n, n, words(x), residual ? words(residual) : null, words(weight), eps, words(outs[0]!), outs[1] ? words(outs[1]) : null, x.dtype === 'bfloat16' ? 1 : 0);
  return outs;
}

/** neox rotary of x [B, H, D] with cos / sin [B, 1, D] (a decode step's positions), or null. */
export function nativeRope(meta: OutMeta, x: Tensor, cos: Tensor, sin: Tensor): Tensor | null {
  if (x.ndim !== 3 || !fits(x.dtype, x, cos, sin, meta)) return null;
  const [B, H, D] = x.shape as [number, number, number];
  for (const t of [cos, sin]) if (t.ndim !== 3 || t.shape[0] !== B || t.shape[1] !== 1 || t.shape[2] !== D) return null;
  if (D % 2 !== 0) return null;
  const out = allocOut(meta);
  calls++;
  if (B * H * D > 0) rows().rope(B, H, D, words(x), words(cos), words(sin), words(out), x.dtype === 'bfloat16' ? 1 : 0);
  return out;
}

const bf = (t: Tensor): number => (t.dtype === 'bfloat16' ? 1 : 0);

/** silu(x) elementwise (the float32 silu of the native kernels, rounded once), or null. */
export function nativeSilu(meta: OutMeta, x: Tensor): Tensor | null {
  if (!fits(x.dtype, x, meta) || !sameShape(x.shape, meta.shape)) return null;
  const out = allocOut(meta);
  const n = numel(x.shape);
  calls++;
  if (n > 0) rows().silu(n, words(x), words(out), bf(x));
  return out;
}

/** a * b for tensors of one shape and dtype (no broadcasting, no scalars), or null. */
export function nativeMul(meta: OutMeta, a: unknown, b: unknown): Tensor | null {
  if (!isTensor(a) || !isTensor(b) || !fits(a.dtype, a, b, meta) || !sameShape(a.shape, b.shape) || !sameShape(a.shape, meta.shape)) return null;
  const out = allocOut(meta);
  const n = numel(a.shape);
  calls++;
  if (n > 0) rows().mul(n, words(a), words(b), words(out), bf(a));
  return out;
}

/** llm.siluAndMul: silu(x[..., :d]) * x[..., d:] in float32, rounded once, or null. */
export function nativeSiluAndMul(meta: OutMeta, x: Tensor): Tensor | null {
  if (x.ndim === 0 || !fits(x.dtype, x, meta)) return null;
  const d = x.shape[x.ndim - 1]! / 2;
  if (!Number.isInteger(d)) return null;
  const out = allocOut(meta);
  const total = numel(x.shape);
  calls++;
  if (d > 0 && total > 0) rows().siluMul(total / (2 * d), d, words(x), words(out), bf(x));
  return out;
}

/**
 * llm.reshapeAndCache's copies: key / value [N, ...row] (contiguous, the caches' dtype) into the
 * contiguous caches' slots; slot < 0 skips. false when the call does not fit (the JS copy runs);
 * a slot >= capacity throws `bad(n, slot)` after the rows before it are written, as the JS copy.
 */
export function nativeCacheRows(key: Tensor, value: Tensor, keyCache: Tensor, valueCache: Tensor, slotMapping: Tensor, row: number, capacity: number, bad: (n: number, slot: number) => Error): boolean {
  const sd = slotMapping.dtype;
  if ((sd !== 'int32' && sd !== 'int64') || !isContiguousStrides(slotMapping.shape, slotMapping.strides) || !fits(key.dtype, key, value, keyCache, valueCache)) return false;
  const n = numel(slotMapping.shape);
  if (numel(key.shape) !== n * row || numel(value.shape) !== n * row) return false;
  const size = key.dtype === 'bfloat16' ? 2 : 4;
  const buf = slotMapping.storage.cpuArrayBuffer();
  const slots = sd === 'int64' ? new BigInt64Array(buf, slotMapping.offset * 8, n) : new Int32Array(buf, slotMapping.offset * 4, n);
  calls++;
  if (n === 0 || row === 0) return true;
  const at = Number(rows().cacheRows(n, row * size, slots, sd === 'int64' ? 1 : 0, capacity, words(key), words(value), words(keyCache), words(valueCache)));
  if (at >= 0) throw bad(at, Number(slots[at]!));
  return true;
}

/**
 * llm.qkNormRotaryCache, neox, in one native call: q [N, Hq, D] -> the returned q', k [N, Hkv, D]
 * normalised and rotated straight into the key cache's slots, v copied into the value cache's;
 * cos / sin [N, 1, D]; every tensor contiguous and of one dtype (float32 / bfloat16), slots
 * int32 / int64. null when the call does not fit (the caller runs the composition); a slot >=
 * capacity throws `bad(n, slot)` after the tokens before it are written, as the cache copy does.
 */
export function nativeQkNormRotaryCache(meta: OutMeta, q: Tensor, k: Tensor, v: Tensor, qw: Tensor, kw: Tensor, eps: number, cos: Tensor, sin: Tensor, isNeox: boolean, keyCache: Tensor, valueCache: Tensor, slotMapping: Tensor, capacity: number, bad: (n: number, slot: number) => Error): Tensor | null {
  const sd = slotMapping.dtype;
  if (!isNeox || (sd !== 'int32' && sd !== 'int64') || !isContiguousStrides(slotMapping.shape, slotMapping.strides)) return null;
  if (q.ndim !== 3 || k.ndim !== 3 || v.ndim !== 3 || !fits(q.dtype, q, k, v, qw, kw, cos, sin, keyCache, valueCache, meta)) return null;
  const [N, Hq, D] = q.shape as [number, number, number];
  const Hk = k.shape[1]!;
  if (k.shape[0] !== N || k.shape[2] !== D || !sameShape(k.shape, v.shape) || D % 2 !== 0 || numel(slotMapping.shape) !== N) return null;
  if (numel(qw.shape) !== D || numel(kw.shape) !== D) return null;
  for (const t of [cos, sin]) if (t.ndim !== 3 || t.shape[0] !== N || t.shape[1] !== 1 || t.shape[2] !== D) return null;
  const out = allocOut(meta);
  calls++;
  if (N === 0 || D === 0) return out;
  const buf = slotMapping.storage.cpuArrayBuffer();
  const slots = sd === 'int64' ? new BigInt64Array(buf, slotMapping.offset * 8, N) : new Int32Array(buf, slotMapping.offset * 4, N);
  const at = Number(rows().qkNormRopeCache(N, Hq, Hk, D, words(q), words(k), words(v), words(qw), words(kw), eps, words(cos), words(sin), words(out), slots, sd === 'int64' ? 1 : 0, capacity, words(keyCache), words(valueCache), bf(q)));
  if (at >= 0) throw bad(at, Number(slots[at]!));
  return out;
}

/** argmax over the trailing `n` elements of each row of a contiguous x into an int64 meta, or null. */
export function nativeArgmax(meta: OutMeta, x: Tensor, dims: readonly number[]): Tensor | null {
  if (meta.dtype !== 'int64' || !DTYPES.has(x.dtype) || !isContiguousStrides(x.shape, x.strides) || !isContiguousStrides(meta.shape, meta.strides) || cpuPath() !== 'native') return null;
  const total = numel(x.shape);
  // The reduced dims must be the trailing dims, in order (a flattened index is then the row offset).
  if (dims.length === 0 || dims.some((d, i) => d !== x.ndim - dims.length + i)) return null;
  let n = 1;
  for (const d of dims) n *= x.shape[d]!;
  if (n === 0) return null;
  const out = allocOut(meta);
  calls++;
  const r = total / n;
  if (r > 0) rows().argmax(r, n, words(x), new BigInt64Array(out.storage.cpuArrayBuffer(), out.offset * 8, r), bf(x));
  return out;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

function isTensor(x: unknown): x is Tensor {
  return typeof x === 'object' && x !== null && 'storage' in x && 'dtype' in x && 'shape' in x;
}
