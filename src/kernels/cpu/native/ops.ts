/**
 * The eager hooks for the native float32 kernels of ops-c.ts. Each `native*` function returns the
 * result tensor when the native path is active and the operands fit the kernel (float32, the
 * layouts named below), and null otherwise, so the caller runs its JavaScript kernel:
 *
 *   nativeUnary        dense input and output (same memory order)
 *   nativeElementwise  any strides / broadcasting, rank <= 8 after coalescing; output float32, or
 *                      bfloat16 from bfloat16 tensors
 *   nativeSoftmax      softmax / log-softmax over the last dim of a contiguous tensor
 *   nativeNorm         layer / RMS norm over trailing dims of a contiguous tensor
 *   nativeAttention    4-d q, k, v without mask or dropout (grouped-query heads allowed)
 *
 * The library is built on first use (blocking, cached on disk) like the GEMM.
 */
import type { OutMeta } from '../../../ops/schema.js';
import { contiguousStrides, isContiguousStrides, numel } from '../../../tensor/layout.js';
import { float32ArrayToBfloat16Bits } from '../../../tensor/half.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { allocOut, readable } from '../numeric.js';
import type { NativeFn } from './koffi.js';
import { loadPoolObject } from './pool.js';
import { ELEMENTWISE_CODES, ELEMENTWISE_MAX_RANK, OPS_C_SOURCE, UNARY_CODES, type NativeElementwise, type NativeUnary } from './ops-c.js';
import { cpuPath } from './path.js';
import { nativeThreads } from './threads.js';

interface OpsLib {
  unary: NativeFn;
  elementwise: NativeFn;
  softmax: NativeFn;
  norm: NativeFn;
  attention: NativeFn;
}

let lib: OpsLib | undefined;
let calls = 0;

/** How many native eager (non-GEMM) kernel calls this process made (tests check which engine ran). */
export function nativeOpCalls(): number {
  return calls;
}

function ops(): OpsLib {
  if (lib) return lib;
  const l = loadPoolObject('kiln_ops', OPS_C_SOURCE);
  const strides = (p: string): string => `void *${p}, int64_t ${p}o, int64_t ${p}s0, int64_t ${p}s1, int64_t ${p}s2, int64_t ${p}s3`;
  lib = {
    unary: l.func('void kiln_unary(int32_t op, int64_t n, void *x, int64_t xo, void *y, int64_t yo, int32_t nthreads)'),
    elementwise: l.func('void kiln_elementwise(int32_t op, int32_t rank, void *meta, void *y, void *a, void *b, void *c, int32_t bf16, int32_t nthreads)'),
    softmax: l.func('void kiln_softmax(int64_t rows, int64_t n, void *x, int64_t xo, void *y, int64_t yo, int32_t logsm, int32_t nthreads)'),
    norm: l.func('void kiln_norm(int32_t rms, int64_t rows, int64_t n, void *x, int64_t xo, void *w, int64_t wo, void *b, int64_t bo, double eps, void *y, int64_t yo, int32_t nthreads)'),
    attention: l.func(
      `int32_t kiln_attention(int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t EV, int64_t group, int32_t causal, float scale, ${strides('q')}, ${strides('k')}, ${strides('v')}, ${strides('o')}, int32_t nthreads)`,
    ),
  };
  return lib;
}

const f32 = (t: Tensor): boolean => t.dtype === 'float32';
const active = (): boolean => cpuPath() === 'native';

/** Data and element offset of a float32 cpu tensor. */
function view(t: Tensor): { data: Float32Array; offset: number } {
  const r = readable(t);
  return { data: r.data as Float32Array, offset: r.offset };
}

/** Whether t's elements fill [offset, offset + numel) in some order (no gaps, no overlap). */
function dense(t: { shape: readonly number[]; strides: readonly number[] }): boolean {
  const dims = t.shape.map((n, d) => ({ n, s: t.strides[d]! })).filter((x) => x.n !== 1);
  dims.sort((a, b) => a.s - b.s);
  let want = 1;
  for (const d of dims) {
    if (d.s !== want) return false;
    want *= d.n;
  }
  return true;
}

/** y = op(x) elementwise for a dense float32 x whose output layout matches (meta from the op). */
export function nativeUnary(meta: OutMeta, x: Tensor, op: NativeUnary): Tensor | null {
  if (!active() || !f32(x) || meta.dtype !== 'float32' || !dense(x) || !x.strides.every((s, d) => s === meta.strides[d] || x.shape[d] === 1)) return null;
  const out = allocOut(meta);
  const n = numel(x.shape);
  if (n === 0) return out;
  const xv = view(x);
  const ov = view(out);
  ops().unary(UNARY_CODES[op], n, xv.data, xv.offset, ov.data, ov.offset, nativeThreads());
  calls++;
  return out;
}

/** As nativeUnary, in place on a dense float32 tensor; false when it does not apply. */
export function nativeUnaryInPlace(x: Tensor, op: NativeUnary): boolean {
  if (!active() || !f32(x) || !dense(x)) return false;
  const n = numel(x.shape);
  if (n > 0) {
    const xv = view(x);
    ops().unary(UNARY_CODES[op], n, xv.data, xv.offset, xv.data, xv.offset, nativeThreads());
    calls++;
  }
  return true;
}

/** Broadcast strides of t against `shape` (0 on broadcast dims), for a float32 cpu tensor. */
function bstrides(t: Tensor, shape: readonly number[]): number[] {
  const r = shape.length - t.shape.length;
  return shape.map((n, d) => (d < r || t.shape[d - r] === 1 ? 0 : t.strides[d - r]!));
}

/** Merges adjacent dims where every operand steps uniformly (innermost last). */
function coalesce(shape: readonly number[], st: number[][]): { shape: number[]; st: number[][] } {
  const out: number[] = [];
  const os: number[][] = st.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const n = shape[d]!;
    if (n === 1) continue;
    const last = out.length - 1;
    if (last >= 0 && st.every((s, k) => os[k]![last] === s[d]! * n)) {
      out[last]! *= n;
      st.forEach((s, k) => (os[k]![last] = s[d]!));
    } else {
      out.push(n);
      st.forEach((s, k) => os[k]!.push(s[d]!));
    }
  }
  if (out.length === 0) {
    out.push(1);
    os.forEach((s) => s.push(0));
  }
  return { shape: out, st: os };
}

/**
 * A float32 tensor (a bfloat16 one where the output is bfloat16), or a scalar that float32
 * represents exactly (others keep the JS kernel's float64 arithmetic).
 */
export type NativeOperand = Tensor | number | boolean;

/** The bfloat16 words of t's whole storage and t's element offset in them (read and written in place). */
function bf16View(t: Tensor): { data: Uint16Array; offset: number } {
  t.assertAlive('cpu kernel');
  return { data: new Uint16Array(t.storage.cpuArrayBuffer(), 0, t.storage.nbytes / 2), offset: t.offset };
}

function operandOk(x: NativeOperand | null, bf16: boolean): boolean {
  if (x === null) return true;
  if (typeof x === 'object') return f32(x) || (bf16 && x.dtype === 'bfloat16');
  const v = Number(x);
  return Math.fround(v) === v || Number.isNaN(v);
}

/**
 * y = a op b (fma: a * b + c) with broadcasting, into a fresh output of `meta` (or into `into`,
 * an in-place target that the inputs may alias only as exactly the same view). A bfloat16 output
 * takes bfloat16 tensors (widened exactly, computed in float32, rounded once: torch's bfloat16
 * arithmetic; for + - * of bfloat16 values the JS kernel's float64-then-round gives the same bits).
 */
export function nativeElementwise(meta: OutMeta, op: NativeElementwise, a: NativeOperand, b: NativeOperand, c: NativeOperand | null = null, into: Tensor | null = null): Tensor | null {
  const bf16 = meta.dtype === 'bfloat16';
  if (!active() || (meta.dtype !== 'float32' && !bf16) || !operandOk(a, bf16) || !operandOk(b, bf16) || !operandOk(c, bf16) || (op === 'fma') !== (c !== null)) return null;
  const shape = meta.shape;
  if (shape.length > ELEMENTWISE_MAX_RANK) return null;
  const out = into ?? allocOut(meta);
  const n = numel(shape);
  if (n === 0) return out;
  const operands: NativeOperand[] = [out, a, b, c ?? b];
  const cs = coalesce(
    shape,
    operands.map((t) => (typeof t === 'object' ? bstrides(t, shape) : shape.map(() => 0))),
  );
  const r = cs.shape.length;
  const m = new Float64Array(r + 4 * r + 4);
  cs.shape.forEach((v, d) => (m[d] = v));
  cs.st.forEach((s, k) => s.forEach((v, d) => (m[r + k * r + d] = v)));
  const views = operands.map((t) => (typeof t !== 'object' ? { data: Float32Array.of(Number(t)), offset: 0 } : t.dtype === 'bfloat16' ? bf16View(t) : readable(t)));
  views.forEach((v, k) => (m[r + 4 * r + k] = v.offset));
  // Bit k: operand k (y, a, b, c) is stored as bfloat16.
  const kinds = operands.reduce<number>((bits, t, k) => (typeof t === 'object' && t.dtype === 'bfloat16' ? bits | (1 << k) : bits), 0);
  ops().elementwise(ELEMENTWISE_CODES[op], r, m, views[0]!.data, views[1]!.data, views[2]!.data, views[3]!.data, kinds, nativeThreads());
  calls++;
  return out;
}

/** softmax / log-softmax over `dim` when it is the last dim of a contiguous float32 input. */
export function nativeSoftmax(meta: OutMeta, x: Tensor, dim: number, log: boolean): Tensor | null {
  const nd = x.shape.length;
  const d = dim < 0 ? dim + nd : dim;
  if (!active() || !f32(x) || meta.dtype !== 'float32' || nd === 0 || d !== nd - 1 || !isContiguousStrides(x.shape, x.strides) || !isContiguousStrides(meta.shape, meta.strides)) return null;
  const out = allocOut(meta);
  const n = x.shape[nd - 1]!;
  const rows = numel(x.shape) / Math.max(n, 1);
  if (n === 0 || rows === 0) return out;
  const xv = view(x);
  const ov = view(out);
  ops().softmax(rows, n, xv.data, xv.offset, ov.data, ov.offset, log ? 1 : 0, nativeThreads());
  calls++;
  return out;
}

/** Layer norm (rms: RMS norm, bias null) over the trailing `inner` elements of a contiguous float32 input. */
export function nativeNorm(meta: OutMeta, x: Tensor, inner: number, weight: Tensor | null, bias: Tensor | null, eps: number, rms: boolean): Tensor | null {
  const dense1 = (t: Tensor | null): boolean => t === null || (f32(t) && isContiguousStrides(t.shape, t.strides) && numel(t.shape) === inner);
  if (!active() || !f32(x) || meta.dtype !== 'float32' || !isContiguousStrides(x.shape, x.strides) || !isContiguousStrides(meta.shape, meta.strides) || !dense1(weight) || !dense1(bias)) return null;
  const out = allocOut(meta);
  const total = numel(x.shape);
  if (total === 0 || inner === 0) return inner === 0 ? null : out;
  const xv = view(x);
  const ov = view(out);
  const wv = weight ? view(weight) : null;
  const bv = bias ? view(bias) : null;
  ops().norm(rms ? 1 : 0, total / inner, inner, xv.data, xv.offset, wv?.data ?? null, wv?.offset ?? 0, bv?.data ?? null, bv?.offset ?? 0, eps, ov.data, ov.offset, nativeThreads());
  calls++;
  return out;
}

/**
 * Attention of 4-d float32 q [B, H, L, E], k [B, Hk, S, E], v [B, Hk, S, EV] (Hk divides H) into
 * a fresh output of `meta`; null for masks, dropout or other shapes.
 */
export function nativeAttention(meta: OutMeta, q: Tensor, k: Tensor, v: Tensor, causal: boolean, scale: number | null): Tensor | null {
  if (!active() || !f32(q) || !f32(k) || !f32(v) || meta.dtype !== 'float32' || q.shape.length !== 4 || k.shape.length !== 4 || v.shape.length !== 4 || meta.shape.length !== 4) return null;
  const [B, H, L, E] = q.shape as [number, number, number, number];
  const [Bk, Hk, S] = k.shape as [number, number, number, number];
  const EV = v.shape[3]!;
  if (Bk !== B || v.shape[0] !== B || v.shape[1] !== Hk || Hk === 0 || H % Hk !== 0) return null;
  const out = allocOut(meta);
  if (B * H * L * EV === 0) return out;
  if (S === 0) return null;
  const [qv, kv, vv, ov] = [q, k, v, out].map(view) as [ReturnType<typeof view>, ReturnType<typeof view>, ReturnType<typeof view>, ReturnType<typeof view>];
  const rc = ops().attention(
    B, H, L, S, E, EV, H / Hk, causal ? 1 : 0, scale ?? 1 / Math.sqrt(E),
    qv.data, qv.offset, ...q.strides, kv.data, kv.offset, ...k.strides, vv.data, vv.offset, ...v.strides, ov.data, ov.offset, ...out.strides,
    nativeThreads(),
  ) as number;
  if (rc !== 0) throw new Error('native scaledDotProductAttention: out of memory for its key buffer');
  calls++;
  return out;
}


/** A 4-d bfloat16 tensor (any strides) as contiguous float32 values (exact). */
function widen4(t: Tensor): Float32Array {
  const src = new Uint16Array(t.storage.cpuArrayBuffer(), 0, t.storage.nbytes / 2);
  const [d0, d1, d2, d3] = t.shape as [number, number, number, number];
  const [s0, s1, s2, s3] = t.strides as [number, number, number, number];
  const out = new Float32Array(d0 * d1 * d2 * d3);
  const bits = new Uint32Array(out.buffer);
  let i = 0;
  for (let a = 0; a < d0; a++)
    for (let b = 0; b < d1; b++)
      for (let c = 0; c < d2; c++) {
        let at = t.offset + a * s0 + b * s1 + c * s2;
        for (let d = 0; d < d3; d++, at += s3) bits[i++] = src[at]! << 16;
      }
  return out;
}

/**
 * nativeAttention for bfloat16 q, k, v and output: the operands widened to float32 (exact), the
 * float32 kernel, the output rounded once to bfloat16; null where nativeAttention would be.
 * Issue #17: a bfloat16 Qwen3-0.6B prefill of 32 tokens spent 120 ms in the JavaScript attention
 * (28 calls), against a few for float32.
 */
export function nativeAttentionBf16(meta: OutMeta, q: Tensor, k: Tensor, v: Tensor, causal: boolean, scale: number | null): Tensor | null {
  if (!active() || q.dtype !== 'bfloat16' || k.dtype !== 'bfloat16' || v.dtype !== 'bfloat16' || meta.dtype !== 'bfloat16') return null;
  if (q.ndim !== 4 || k.ndim !== 4 || v.ndim !== 4 || meta.shape.length !== 4 || !isContiguousStrides(meta.shape, meta.strides)) return null;
  const [B, H, L, E] = q.shape as [number, number, number, number];
  const [Bk, Hk, S] = k.shape as [number, number, number, number];
  const EV = v.shape[3]!;
  if (Bk !== B || v.shape[0] !== B || v.shape[1] !== Hk || Hk === 0 || H % Hk !== 0 || S === 0) return null;
  const out = allocOut(meta);
  if (B * H * L * EV === 0) return out;
  const o32 = new Float32Array(B * H * L * EV);
  const rc = ops().attention(
    B, H, L, S, E, EV, H / Hk, causal ? 1 : 0, scale ?? 1 / Math.sqrt(E),
    widen4(q), 0, ...contiguousStrides(q.shape), widen4(k), 0, ...contiguousStrides(k.shape), widen4(v), 0, ...contiguousStrides(v.shape), o32, 0, ...contiguousStrides(out.shape),
    nativeThreads(),
  ) as number;
  if (rc !== 0) throw new Error('native scaledDotProductAttention: out of memory for its key buffer');
  calls++;
  float32ArrayToBfloat16Bits(o32, new Uint16Array(out.storage.cpuArrayBuffer(), 0, out.storage.nbytes / 2), out.offset);
  return out;
}
