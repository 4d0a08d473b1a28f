/**
 * Compiled float32 linear layers (lower/gemm.ts 'gemm' steps): the module (the f32x4 GEMM of
 * kernels/cpu/wasm-gemm.ts with bias + the folded pointwise kernel as its epilogue) and the
 * runner that moves data in and out of the program's GemmArena.
 *
 * Per call the runner copies the activation rows into the arena (one memcpy when contiguous), the
 * bias and any epilogue inputs, runs the GEMM over K blocks and copies C into the output. The
 * packed weight is reused while the weight tensor is the same storage, view and storage version
 * (every in-place write through the dispatcher bumps the version; writers that bypass it, like
 * the initialisers, bump it themselves), so an optimizer step or copy_ repacks on the next call.
 */
import { GEMM_IMPORT_PAGES, GEMM_MR, GEMM_NR, GemmArena, GemmArenaFull, type Epilogue, type GemmFn, gemmModule, instantiateGemm, packB, packedBytes } from '../../../kernels/cpu/wasm-gemm.js';
import { get, OP, set, V128, wasmApi } from '../../../kernels/cpu/wasm-asm.js';
import { readable, type NumArray } from '../../../kernels/cpu/numeric.js';
import { type PackedB as WasmPackedB, wasmPackB, wasmSgemm, wasmSgemmAvailable } from '../../../kernels/cpu/wasm-sgemm-run.js';
import { isContiguousStrides, numel } from '../../../tensor/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { Storage } from '../../../tensor/storage.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { GemmStep } from '../../lower/gemm.js';
import { emitGroup } from './pointwise.js';

export interface GemmConfig {
  /** Depth of a K block: one packed B sliver is KC x 8 floats and should stay in L1. */
  readonly kc: number;
  /** 'wasm': this module; 'extern': the eager linear kernel (plus the epilogue as its own kernel). */
  readonly impl: 'wasm' | 'extern';
}

/** Default and max-autotune candidates: KC = 512 keeps a sliver at 16 KiB (L1 is 32 KiB). */
export const GEMM_CONFIGS: readonly GemmConfig[] = [
  { impl: 'wasm', kc: 512 },
  { impl: 'wasm', kc: 256 },
  { impl: 'wasm', kc: 128 },
  { impl: 'extern', kc: 0 },
];

/** The module for a gemm step (bias when present, then the epilogue group), or null when not expressible. */
export function gemmStepModule(step: GemmStep, low: Lowered): Uint8Array | null {
  if (!wasmApi()) return null;
  const hasBias = step.node.args[2]?.kind === 'value';
  const v = step.node.outputs[0]!;
  const g = step.epilogue;
  const inputs = [...(hasBias ? (['row'] as const) : []), ...step.epilogueInputs.map((e) => e.kind)];
  if (!hasBias && !g) return gemmModule(null, GEMM_IMPORT_PAGES);
  let ok = true;
  const epi: Epilogue = {
    inputs,
    emit(f, acc, ins) {
      let cur = acc;
      if (hasBias) {
        cur = f.local(V128);
        f.emit(get(acc), get(ins[0]!), OP.F32X4_ADD, set(cur));
      }
      if (!g) return cur;
      const locals = new Map<ValueId, number>([[v, cur]]);
      step.epilogueInputs.forEach((e, q) => locals.set(e.id, ins[q + (hasBias ? 1 : 0)]!));
      if (!emitGroup(f, g, low, locals)) {
        ok = false;
        return cur;
      }
      return locals.get(g.outputs[0]!)!;
    },
  };
  const bytes = gemmModule(epi, GEMM_IMPORT_PAGES);
  return ok ? bytes : null;
}

interface Packed {
  storage: Storage;
  version: number;
  offset: number;
  strides: string;
  at: number;
  bytes: number;
  kc: number;
}

let plainBytes: Uint8Array | undefined;
/** Whether `bytes` is the module without bias or epilogue (then the product is the whole step). */
function isPlain(bytes: Uint8Array): boolean {
  plainBytes ??= gemmModule(null, GEMM_IMPORT_PAGES);
  return bytes.length === plainBytes.length && bytes.every((b, i) => b === plainBytes![i]);
}

/**
 * Runs one gemm step's module on real tensors.
 *
 * Where the Wasm cpu path's GEMM engine is available (kernels/cpu/wasm-sgemm-run.ts: packed A,
 * 4 x 8 tiles, worker threads), a contiguous activation takes it: the weight is packed once per
 * version into the engine's memory, the product lands in this arena's C buffer and the step's
 * module then applies only its epilogue there (kc = 0 with flags 3: load C, epilogue, store).
 * Otherwise the module computes product and epilogue itself, as below.
 */
/** 16-byte alignment of arena addresses (f32x4 loads). */
const align16 = (a: number): number => (a + 15) & ~15;

export class GemmRunner {
  private mm: GemmFn | undefined;
  private packed: Packed | null = null;
  private wasmPacked: { storage: Storage; version: number; offset: number; strides: string; packed: WasmPackedB } | null = null;
  private readonly plain: boolean;
  private scratch = { at: 0, bytes: 0 };
  /** Weight packings performed (tests check invalidation with it). */
  packs = 0;

  constructor(
    private readonly arena: GemmArena,
    private readonly bytes: Uint8Array,
  ) {
    this.plain = isPlain(bytes);
  }

  /** The engine's packing of w (B[k, n] = W[n, k]), repacked when the weight changed; null when it can't be kept. */
  private enginePacked(w: Tensor, K: number, N: number): WasmPackedB | null {
    const p = this.wasmPacked;
    const strides = w.strides.join(',');
    if (p && p.storage === w.storage && p.version === w.storage.version && p.offset === w.offset && p.strides === strides) return p.packed;
    const r = readable(w);
    if (!(r.data instanceof Float32Array)) return null;
    const packed = wasmPackB({ data: r.data, offset: r.offset, rowStride: w.strides[1]!, colStride: w.strides[0]! }, K, N, p?.packed, this);
    if (!packed) return null;
    this.wasmPacked = { storage: w.storage, version: w.storage.version, offset: w.offset, strides, packed };
    this.packs++;
    return packed;
  }

  /** The engine path (see the class comment); false when it does not apply. */
  private runEngine(x: Tensor, w: Tensor, bias: Tensor | null, extras: readonly { t: Tensor; kind: 'full' | 'row' }[], out: NumArray, outOffset: number): boolean {
    if (!wasmSgemmAvailable() || !(out instanceof Float32Array) || !isContiguousStrides(x.shape, x.strides)) return false;
    const rx = readable(x);
    if (!(rx.data instanceof Float32Array)) return false;
    const K = w.shape[1]!;
    const N = w.shape[0]!;
    const M = numel(x.shape) / K;
    const packed = this.enginePacked(w, K, N);
    if (!packed) return false;
    const A = { data: rx.data, offset: rx.offset, rowStride: K, colStride: 1 };
    if (this.plain) {
      wasmSgemm(M, N, K, 1, A, null, 0, { data: out, offset: outOffset, rowStride: N, colStride: 1 }, { packed });
      return true;
    }
    const Mp = Math.ceil(M / GEMM_MR) * GEMM_MR;
    const Np = Math.ceil(N / GEMM_NR) * GEMM_NR;
    const cBytes = Mp * Np * 4;
    const vecBytes = Np * 4;
    const nVec = (bias ? 1 : 0) + extras.filter((e) => e.kind === 'row').length;
    const nFull = extras.filter((e) => e.kind === 'full').length;
    const cAt = align16(this.region(cBytes * (1 + nFull) + vecBytes * nVec + 64 * (2 + nFull + nVec)));
    const next = align16(cAt + cBytes);
    const eAddrs = stageEpilogue(this.arena.f32, next, bias, extras, M, N, Np);
    // Rows M..Mp and columns N..Np of C are never copied out: the epilogue may run on anything there.
    wasmSgemm(M, N, K, 1, A, null, 0, { data: this.arena.f32, offset: cAt >> 2, rowStride: Np, colStride: 1 }, { packed });
    this.fn()(Mp / GEMM_MR, Np / GEMM_NR, 0, cAt, K * 4, cAt, cAt, Np * 4, 3, ...eAddrs);
    copyOut(this.arena.f32, cAt, M, N, Np, out, outOffset);
    return true;
  }

  private fn(): GemmFn {
    this.mm ??= instantiateGemm(this.bytes, this.arena);
    return this.mm;
  }

  /** Whether the runner handles these operands (else the caller runs the extern + epilogue kernel). */
  static accepts(x: Tensor, w: Tensor, out: { shape: readonly number[]; strides: readonly number[] }): boolean {
    return x.dtype === 'float32' && w.dtype === 'float32' && w.shape.length === 2 && isContiguousStrides(out.shape, out.strides) && numel(x.shape) > 0;
  }

  private weight(w: Tensor, K: number, N: number, kc: number): number {
    const p = this.packed;
    const strides = w.strides.join(',');
    if (p && p.storage === w.storage && p.version === w.storage.version && p.offset === w.offset && p.strides === strides && p.kc === kc && p.bytes === packedBytes(K, N)) return p.at;
    const bytes = packedBytes(K, N);
    const at = p && p.bytes >= bytes ? p.at : this.arena.alloc(bytes);
    const r = readable(w);
    // B[k, n] = W[n, k]
    packB(this.arena, at, r.data, r.offset, w.strides[1]!, w.strides[0]!, K, N, kc);
    this.packed = { storage: w.storage, version: w.storage.version, offset: w.offset, strides, at, bytes: Math.max(bytes, p?.bytes ?? 0), kc };
    this.packs++;
    return at;
  }

  private region(bytes: number): number {
    if (this.scratch.bytes < bytes) this.scratch = { at: this.arena.alloc(bytes), bytes };
    return this.scratch.at;
  }

  /** out = epilogue(x . w^T + bias, extras); `out` is contiguous with x's rows times N. */
  run(x: Tensor, w: Tensor, bias: Tensor | null, extras: readonly { t: Tensor; kind: 'full' | 'row' }[], out: NumArray, outOffset: number, kc: number): void {
    if (this.runEngine(x, w, bias, extras, out, outOffset)) return;
    const K = w.shape[1]!;
    const N = w.shape[0]!;
    const M = numel(x.shape) / K;
    const Mp = Math.ceil(M / GEMM_MR) * GEMM_MR;
    const Np = Math.ceil(N / GEMM_NR) * GEMM_NR;
    const bAt = this.weight(w, K, N, kc);
    const aBytes = Mp * K * 4;
    const cBytes = Mp * Np * 4;
    const vecBytes = Np * 4;
    const nVec = (bias ? 1 : 0) + extras.filter((e) => e.kind === 'row').length;
    const nFull = extras.filter((e) => e.kind === 'full').length;
    const base = this.region(aBytes + cBytes * (1 + nFull) + vecBytes * nVec + 64 * (3 + nFull + nVec));
    const aAt = align16(base);
    const cAt = align16(aAt + aBytes);
    const next = align16(cAt + cBytes);
    const f32 = this.arena.f32;
    // A: rows of x, zero rows up to Mp.
    copyRows(f32, aAt >> 2, K, x, M, K);
    f32.fill(0, (aAt >> 2) + M * K, (aAt >> 2) + Mp * K);
    const eAddrs = stageEpilogue(f32, next, bias, extras, M, N, Np);
    const mm = this.fn();
    for (let pc = 0; pc < K; pc += kc) {
      const kcb = Math.min(kc, K - pc);
      const flags = (pc > 0 ? 1 : 0) | (pc + kcb >= K ? 2 : 0);
      mm(Mp / GEMM_MR, Np / GEMM_NR, kcb, aAt + pc * 4, K * 4, bAt + pc * Np * 4, cAt, Np * 4, flags, ...eAddrs);
    }
    copyOut(this.arena.f32, cAt, M, N, Np, out, outOffset);
  }
}


/**
 * Copies the epilogue operands into the arena from byte address `at` on (bias, then the extras in
 * order: 'row' vectors padded to Np, 'full' matrices as M rows of Np) and returns their addresses.
 */
function stageEpilogue(f32: Float32Array, at: number, bias: Tensor | null, extras: readonly { t: Tensor; kind: 'full' | 'row' }[], M: number, N: number, Np: number): number[] {
  const addrs: number[] = [];
  let next = at;
  if (bias) {
    addrs.push(next);
    copyRow(f32, next >> 2, bias, N);
    next = align16(next + Np * 4);
  }
  for (const e of extras) {
    addrs.push(next);
    if (e.kind === 'row') {
      copyRow(f32, next >> 2, e.t, N);
      next = align16(next + Np * 4);
    } else {
      copyRows(f32, next >> 2, Np, e.t, M, N);
      next = align16(next + Math.ceil(M / GEMM_MR) * GEMM_MR * Np * 4);
    }
  }
  return addrs;
}

/** The M x N result from the arena's C (rows of Np floats at byte address cAt) into out. */
function copyOut(view: Float32Array, cAt: number, M: number, N: number, Np: number, out: Float32Array | NumArray, outOffset: number): void {
  const c0 = cAt >> 2;
  if (Np === N) out.set(view.subarray(c0, c0 + M * N), outOffset);
  else for (let i = 0; i < M; i++) out.set(view.subarray(c0 + i * Np, c0 + i * Np + N), outOffset + i * N);
}

/** Copies the M x cols matrix of t's values (t viewed as rows of `cols`) into dst rows of length ld. */
function copyRows(dst: Float32Array, at: number, ld: number, t: Tensor, M: number, cols: number): void {
  const r = readable(t);
  if (isContiguousStrides(t.shape, t.strides)) {
    if (ld === cols) dst.set(r.data.subarray(r.offset, r.offset + M * cols), at);
    else for (let i = 0; i < M; i++) dst.set(r.data.subarray(r.offset + i * cols, r.offset + (i + 1) * cols), at + i * ld);
    return;
  }
  // Strided: walk t in row-major element order (its logical layout is [M rows, cols]).
  const shape = t.shape;
  const rank = shape.length;
  const idx = new Array<number>(rank).fill(0);
  let off = r.offset;
  const inner = shape[rank - 1]!;
  const s = t.strides[rank - 1]!;
  let o = 0;
  const total = M * cols;
  while (o < total) {
    for (let q = 0, p = off; q < inner; q++, p += s, o++) dst[at + Math.floor(o / cols) * ld + (o % cols)] = r.data[p]!;
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]!++;
      off += t.strides[d]!;
      if (idx[d]! < shape[d]!) break;
      off -= t.strides[d]! * shape[d]!;
      idx[d] = 0;
    }
  }
}

/** Copies a row vector (any shape with numel N, last dim N) into dst. */
function copyRow(dst: Float32Array, at: number, t: Tensor, N: number): void {
  const r = readable(t);
  const s = t.strides[t.shape.length - 1] ?? 1;
  for (let j = 0, p = r.offset; j < N; j++, p += s) dst[at + j] = r.data[p]!;
}

export { GemmArena, GemmArenaFull };
