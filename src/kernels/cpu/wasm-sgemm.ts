/**
 * The float32 WebAssembly SIMD128 GEMM macro-kernel of the Wasm cpu path (BLIS design, like the
 * native C kernel): a register-blocked MR x NR micro-kernel over packed operands.
 *
 *   macro(mcS, ncS, kc, a, lda, b, c, ldc, accumulate)
 *
 * - `a`: mcS slivers of MR rows, each kc deep, k-major (sliver[p * MR + r] = A[r, p]); or, in the
 *   rowA variant, A itself, row-major with row stride `lda` bytes (read through MR row pointers);
 * - `b`: ncS slivers of NR columns, each kc deep, k-major (sliver[p * NR + q] = B[p, q]);
 * - `c`: the tile origin in a dense float32 C (row stride `ldc` bytes; tiles never need edge
 *   handling: the caller's C buffer is padded to whole tiles); accumulate = 1 adds onto C.
 * - The k loop runs kc / unroll times: production uses unroll 1 (see SGEMM_MR); a larger unroll
 *   (kept for experiments) needs kc to be a multiple of it.
 * - Loop order j (B sliver, kc * NR * 4 bytes, stays in L1) outside i (A slivers streamed from L2).
 * - Each k step loads NR / 4 B vectors and MR A splats (load32_splat: one broadcast load each) and
 *   does MR * NR / 4 multiply-adds: f32x4.relaxed_madd where the engine validates it (Node 20 only
 *   with --experimental-wasm-relaxed-simd), else f32x4.mul + f32x4.add. Which one is used is fixed
 *   per process, so results never depend on which thread computed a tile.
 * - Accumulation is float32 (as the native path and PyTorch's CPU float32 GEMMs).
 */
import { ADD, BLOCK, br, brIf, encodeModule, END, EQZ, FnBuilder, GE_U, get, I32, i32c, load32Splat, LOOP, MUL, OP, set, SUB, V128, V128_ZERO, v128Load, v128Store, wasmApi } from './wasm-asm.js';

/** The micro-tile: MR rows x NR columns (NR a multiple of 4), k unrolled `unroll` times. */
export interface SgemmShape {
  readonly mr: number;
  readonly nr: number;
  readonly unroll: number;
  /** Use f32x4.relaxed_madd (only where relaxedSimdAvailable()). */
  readonly fma: boolean;
  /**
   * A read in place, row-major with row stride `lda` bytes (a contiguous activation or an im2col
   * buffer), through MR row pointers, instead of packed slivers: no packing pass over A.
   */
  readonly rowA?: boolean;
}

/**
 * 4 x 8, no k unroll: eight f32x4 accumulators + two B vectors + four A splats = 14 of the 15
 * xmm registers V8 allocates. Larger tiles (6x8, 5x8, 4x12) and unrolled k spill in V8 12.4's
 * TurboFan (its scheduler hoists every splat load to the top of the loop body; checked with
 * --print-wasm-code) and measured slower: matmul-1024 single thread (process CPU time, min of 9,
 * interleaved, this EPYC under load): 4x8 u1 28.5 GFLOP/s, 6x8 u1 19.7, 4x8 u2 21.6, 4x16 u1 20.2,
 * 5x8 u2 22.2; with relaxed_madd 4x8 u1 41.5.
 */
export const SGEMM_MR = 4;
export const SGEMM_NR = 8;
/**
 * Cache blocking (BLIS): a B sliver KC x NR x 4 = 8 KiB stays in L1 (32 KiB) while the A block
 * (MC_SLIVERS x MR rows x KC x 4 = 128 KiB) streams from L2 (512 KiB per core); the B panel of
 * NC_SLIVERS x NR columns (1 MiB at KC = 256) lives in L3. KC 128..512 and MC 16..64 slivers
 * measured within noise of each other at 1024^3; 16 slivers was 10% slower.
 */
export const SGEMM_KC = 256;
export const SGEMM_MC_SLIVERS = 32;
export const SGEMM_NC_SLIVERS = 128;

const AND = [0x71];
const IF = [0x04, 0x40];

function relaxedProbe(): Uint8Array {
  const f = new FnBuilder('p', [V128, V128, V128], [V128]);
  f.emit(get(0), get(1), get(2), OP.F32X4_RELAXED_MADD);
  return encodeModule({ functions: [f], pages: 0, memory: 'import' });
}

let relaxed: boolean | undefined;
/** Whether this engine has relaxed SIMD's f32x4.relaxed_madd (checked once by validating a tiny module). */
export function relaxedSimdAvailable(): boolean {
  if (relaxed === undefined) {
    try {
      relaxed = wasmApi()?.validate(relaxedProbe()) ?? false;
    } catch {
      relaxed = false;
    }
  }
  return relaxed;
}

/**
 * Assembles the macro-kernel module: 'macro' (packed A) and 'macroRow' (the rowA variant), memory
 * imported as env.mem (shared with `sharedMaxPages` as its maximum when given, so worker threads
 * can run the same module on the same memory).
 */
export function sgemmModule(shape: SgemmShape, sharedMaxPages?: number): Uint8Array {
  const fns = [macroFn('macro', { ...shape, rowA: false }), macroFn('macroRow', { ...shape, rowA: true })];
  return encodeModule({ functions: fns, pages: 1, memory: 'import', sharedMaxPages });
}

function macroFn(name: string, shape: SgemmShape): FnBuilder {
  const { mr: MR, nr: NR, unroll: U, fma } = shape;
  if (NR % 4 !== 0 || MR < 1 || U < 1) throw new RangeError(`sgemmModule: bad tile ${MR}x${NR} unroll ${U}`);
  const NV = NR / 4;
  const rowA = shape.rowA === true;
  const f = new FnBuilder(name, [I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [MCS, NCS, KC, A, LDA, B, C, LDC, ACC] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const i = f.local(I32);
  const j = f.local(I32);
  const p = f.local(I32);
  const pa = f.local(I32);
  const par = rowA ? Array.from({ length: MR }, () => f.local(I32)) : [];
  const pb = f.local(I32);
  const bsl = f.local(I32);
  const pc = f.local(I32);
  const acc = Array.from({ length: MR * NV }, () => f.local(V128));
  const bv = Array.from({ length: NV }, () => f.local(V128));
  const av = f.local(V128);
  const e = f.emit.bind(f);
  const aSliver = MR * 4; // bytes per k step of an A sliver
  const bSliver = NR * 4;
  // for j in 0..ncS: bsl = b + j * kc * NR * 4
  e(i32c(0), set(j), BLOCK, LOOP, get(j), get(NCS), GE_U, brIf(1));
  e(get(B), get(j), get(KC), MUL, i32c(bSliver), MUL, ADD, set(bsl));
  // for i in 0..mcS: pa = a + i * kc * MR * 4
  e(i32c(0), set(i), BLOCK, LOOP, get(i), get(MCS), GE_U, brIf(1));
  if (rowA) {
    // row r of the sliver: a + (i * MR + r) * lda
    e(get(A), get(i), i32c(MR), MUL, get(LDA), MUL, ADD, set(par[0]!));
    for (let r = 1; r < MR; r++) e(get(par[r - 1]!), get(LDA), ADD, set(par[r]!));
  } else e(get(A), get(i), get(KC), MUL, i32c(aSliver), MUL, ADD, set(pa));
  e(get(bsl), set(pb));
  for (const r of acc) e(V128_ZERO, set(r));
  // p counts k steps down by U (kc is a multiple of U)
  e(get(KC), set(p), BLOCK, LOOP, get(p), EQZ, brIf(1));
  for (let u = 0; u < U; u++) {
    for (let q = 0; q < NV; q++) e(get(pb), v128Load(u * bSliver + q * 16), set(bv[q]!));
    for (let r = 0; r < MR; r++) {
      if (rowA) e(get(par[r]!), load32Splat(u * 4), set(av));
      else e(get(pa), load32Splat(u * aSliver + r * 4), set(av));
      for (let q = 0; q < NV; q++) {
        const k = r * NV + q;
        if (fma) e(get(av), get(bv[q]!), get(acc[k]!), OP.F32X4_RELAXED_MADD, set(acc[k]!));
        else e(get(acc[k]!), get(av), get(bv[q]!), OP.F32X4_MUL, OP.F32X4_ADD, set(acc[k]!));
      }
    }
  }
  if (rowA) for (const q of par) e(get(q), i32c(U * 4), ADD, set(q));
  else e(get(pa), i32c(U * aSliver), ADD, set(pa));
  e(get(pb), i32c(U * bSliver), ADD, set(pb));
  e(get(p), i32c(U), SUB, set(p), br(0), END, END);
  // pc = c + i * MR * ldc + j * NR * 4
  e(get(C), get(i), i32c(MR), MUL, get(LDC), MUL, ADD, get(j), i32c(bSliver), MUL, ADD, set(pc));
  e(get(ACC), i32c(1), AND, IF);
  for (let r = 0; r < MR; r++) {
    for (let q = 0; q < NV; q++) {
      const k = r * NV + q;
      e(get(acc[k]!), get(pc), v128Load(q * 16), OP.F32X4_ADD, set(acc[k]!));
    }
    if (r < MR - 1) e(get(pc), get(LDC), ADD, set(pc));
  }
  // rewind pc to the tile's first row for the stores
  if (MR > 1) e(get(pc), get(LDC), i32c(MR - 1), MUL, SUB, set(pc));
  e(END);
  for (let r = 0; r < MR; r++) {
    for (let q = 0; q < NV; q++) e(get(pc), get(acc[r * NV + q]!), v128Store(q * 16));
    if (r < MR - 1) e(get(pc), get(LDC), ADD, set(pc));
  }
  e(get(i), i32c(1), ADD, set(i), br(0), END, END);
  e(get(j), i32c(1), ADD, set(j), br(0), END, END);
  return f;
}

/** The instantiated macro-kernel: byte addresses and strides, as described in the header. */
export type SgemmMacro = (mcS: number, ncS: number, kc: number, a: number, lda: number, b: number, c: number, ldc: number, accumulate: number) => void;

/** Both variants of an instance. */
export interface SgemmMacros {
  readonly packed: SgemmMacro;
  readonly row: SgemmMacro;
}

/** The macros of an instantiated sgemmModule. */
export function sgemmMacros(exports: Record<string, unknown>): SgemmMacros {
  return { packed: exports['macro'] as SgemmMacro, row: exports['macroRow'] as SgemmMacro };
}

/**
 * Where one GEMM's packed operands and C live in Wasm memory (byte addresses), as laid out by
 * wasm-sgemm-run.ts: for each KC-deep block of K (depth kcb = min(KC, K - pc)), A holds mS slivers
 * of MR rows (block pc at a + Mp * pc * 4, sliver i at + i * kcb * MR * 4) and B holds nS slivers
 * of NR columns (block pc at b + Np * pc * 4); C is dense [mS * MR, ldc / 4].
 */
export interface SgemmLayout {
  readonly mS: number;
  readonly nS: number;
  readonly k: number;
  readonly a: number;
  /** 0: A packed (above); else A is row-major at `a` with this row stride in bytes (macroRow). */
  readonly lda: number;
  readonly b: number;
  readonly c: number;
  readonly ldc: number;
}

/**
 * Runs the tiles of C with row slivers [i0, i1) and column slivers [j0, j1) (the share of one
 * thread). Every tile sums its K blocks in the same order whichever thread runs it, so a split
 * over threads gives bit-identical results.
 */
export function runTiles(macros: SgemmMacros, l: SgemmLayout, i0: number, i1: number, j0: number, j1: number): void {
  const macro = l.lda > 0 ? macros.row : macros.packed;
  const Mp = l.mS * SGEMM_MR;
  const Np = l.nS * SGEMM_NR;
  for (let jc = j0; jc < j1; jc += SGEMM_NC_SLIVERS) {
    const ncs = Math.min(SGEMM_NC_SLIVERS, j1 - jc);
    for (let pc = 0; pc < l.k; pc += SGEMM_KC) {
      const kcb = Math.min(SGEMM_KC, l.k - pc);
      const aBlock = l.lda > 0 ? l.a + pc * 4 : l.a + Mp * pc * 4;
      const aSliver = l.lda > 0 ? SGEMM_MR * l.lda : kcb * SGEMM_MR * 4;
      const bPanel = l.b + Np * pc * 4 + jc * kcb * SGEMM_NR * 4;
      for (let ic = i0; ic < i1; ic += SGEMM_MC_SLIVERS) {
        const mcs = Math.min(SGEMM_MC_SLIVERS, i1 - ic);
        macro(mcs, ncs, kcb, aBlock + ic * aSliver, l.lda, bPanel, l.c + ic * SGEMM_MR * l.ldc + jc * SGEMM_NR * 4, l.ldc, pc > 0 ? 1 : 0);
      }
    }
  }
}

/** Words per entry of a call list: [variant (1 = macroRow, 0 = macro), then the nine macro arguments]. */
export const CALL_WORDS = 10;

/**
 * Runs calls [i0, i1) of a call list at word `at` of `words` (a view of the module's memory): the
 * convolution's direct path builds one (per output row and K block) and splits it over threads
 * by output rows, so every tile's K blocks stay on one thread, in order.
 */
export function runCalls(macros: SgemmMacros, words: Int32Array, at: number, i0: number, i1: number): void {
  for (let i = i0, o = at + i0 * CALL_WORDS; i < i1; i++, o += CALL_WORDS) {
    (words[o] === 1 ? macros.row : macros.packed)(words[o + 1]!, words[o + 2]!, words[o + 3]!, words[o + 4]!, words[o + 5]!, words[o + 6]!, words[o + 7]!, words[o + 8]!, words[o + 9]!);
  }
}

/**
 * Calls both macros `calls` times on a 4 x 8 x 256 problem at byte address `at` of their memory
 * (needs 12.5 KiB there, overwritten): V8 starts every Wasm function in its baseline compiler
 * (Liftoff) and moves it to the optimising one (TurboFan) only after it has spent a budget of
 * executed code (--wasm-tiering-budget, ~70 calls of this size). Each worker isolate tiers up on
 * its own: without this, a worker's first shares (and the caller's first GEMMs) run in Liftoff code.
 */
export function warmUpMacros(macros: SgemmMacros, at: number, calls = 200): void {
  const a = at;
  const b = at + 256 * SGEMM_MR * 4;
  const c = b + 256 * SGEMM_NR * 4;
  for (let i = 0; i < calls; i++) {
    macros.packed(1, 1, 256, a, 0, b, c, SGEMM_NR * 4, 0);
    macros.row(1, 1, 256, a, 256 * 4, b, c, SGEMM_NR * 4, 0);
  }
}
