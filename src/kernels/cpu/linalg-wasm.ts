/**
 * A WebAssembly SIMD (f64x2) macro-kernel for the CPU GEMM engine, assembled from bytes at load
 * time (no toolchain, no binary blob). It multiplies packed MR x KC slivers of A by packed KC x NR
 * slivers of B (MR = NR = 4, the layout gemm.ts packs) with eight f64x2 accumulators per 4 x 4
 * tile, and writes every tile into a dense row-major float64 C buffer; gemm.ts applies alpha/beta
 * while scattering that buffer into C through C's strides.
 *
 * Signature: macro(mc4, nc4, kc, aBase, bBase, cBase, ldc) where mc4/nc4 count 4-row/4-column
 * slivers, *Base are byte offsets into the imported memory and ldc is C's row length in doubles.
 * Everything is float64, so integer operands stay exact (as in the JS kernel).
 */

export interface WasmGemm {
  /** The module's memory as float64 words. */
  readonly f64: Float64Array;
  /** Float64 word offsets of the packed A block, the packed B panel and the C buffer. */
  readonly aWord: number;
  readonly bWord: number;
  readonly cWord: number;
  macro(mc4: number, nc4: number, kc: number, ldc: number): void;
}

import {
  ADD, BLOCK, br, brIf, END, EQZ, FnBuilder, GE_U, encodeModule, get, I32, i32c, LOOP, load64Splat, MUL, OP, set, SHL, SUB, V128, V128_ZERO, v128Load, v128Store, wasmApi,
} from './wasm-asm.js';

const F64X2_ADD = OP.F64X2_ADD;
const F64X2_MUL = OP.F64X2_MUL;

// Locals: params 0..6, then i32 scratch, then v128 registers.
const MC4 = 0, NC4 = 1, KCL = 2, ABASE = 3, BBASE = 4, CBASE = 5, LDC = 6;
const I = 7, J = 8, P = 9, PA = 10, PB = 11, PC = 12;
const ACC = 13; // 13..20
const B01 = 21, B23 = 22, AV = 23;

function body(f: FnBuilder): void {
  const emit = (...parts: number[][]): void => f.emit(...parts);
  for (let i = 0; i < 6; i++) f.local(I32);
  for (let i = 0; i < 11; i++) f.local(V128);
  emit(i32c(0), set(J), BLOCK, LOOP);
  emit(get(J), get(NC4), GE_U, brIf(1));
  emit(i32c(0), set(I), BLOCK, LOOP);
  emit(get(I), get(MC4), GE_U, brIf(1));
  // pa = aBase + i * kc * 32; pb = bBase + j * kc * 32
  emit(get(ABASE), get(I), get(KCL), MUL, i32c(5), SHL, ADD, set(PA));
  emit(get(BBASE), get(J), get(KCL), MUL, i32c(5), SHL, ADD, set(PB));
  for (let r = 0; r < 8; r++) emit(V128_ZERO, set(ACC + r));
  emit(get(KCL), set(P), BLOCK, LOOP);
  emit(get(P), EQZ, brIf(1));
  emit(get(PB), v128Load(0), set(B01), get(PB), v128Load(16), set(B23));
  for (let r = 0; r < 4; r++) {
    emit(get(PA), load64Splat(r * 8), set(AV));
    emit(get(ACC + 2 * r), get(AV), get(B01), F64X2_MUL, F64X2_ADD, set(ACC + 2 * r));
    emit(get(ACC + 2 * r + 1), get(AV), get(B23), F64X2_MUL, F64X2_ADD, set(ACC + 2 * r + 1));
  }
  emit(get(PA), i32c(32), ADD, set(PA), get(PB), i32c(32), ADD, set(PB), get(P), i32c(1), SUB, set(P));
  emit(br(0), END, END);
  // pc = cBase + (i * ldc + j) * 32  (tile origin: row 4i, column 4j)
  emit(get(CBASE), get(I), get(LDC), MUL, get(J), ADD, i32c(5), SHL, ADD, set(PC));
  for (let r = 0; r < 4; r++) {
    emit(get(PC), get(ACC + 2 * r), v128Store(0), get(PC), get(ACC + 2 * r + 1), v128Store(16));
    emit(get(PC), get(LDC), i32c(3), SHL, ADD, set(PC));
  }
  emit(get(I), i32c(1), ADD, set(I), br(0), END, END);
  emit(get(J), i32c(1), ADD, set(J), br(0), END, END);
}

function moduleBytes(pages: number): Uint8Array {
  const f = new FnBuilder('macro', new Array<number>(7).fill(I32) as (typeof I32)[]);
  body(f);
  return encodeModule({ functions: [f], pages, memory: 'import' });
}

/**
 * Instantiates the kernel for blocks of at most mcMax x kcMax (A), kcMax x ncMax (B) and
 * mcMax x ncMax (C), or returns undefined where WebAssembly SIMD is unavailable.
 */
export function createWasmGemm(mcMax: number, kcMax: number, ncMax: number): WasmGemm | undefined {
  try {
    const WA = wasmApi();
    if (WA === undefined) return undefined;
    const aWords = mcMax * kcMax;
    const bWords = kcMax * ncMax;
    const cWords = mcMax * ncMax;
    const bytes = (aWords + bWords + cWords) * 8;
    const pages = Math.ceil(bytes / 65536);
    const bin = moduleBytes(pages);
    if (!WA.validate(bin)) return undefined;
    const memory = new WA.Memory({ initial: pages, maximum: pages });
    const instance = new WA.Instance(new WA.Module(bin), { env: { mem: memory } });
    const fn = instance.exports['macro'] as (mc4: number, nc4: number, kc: number, a: number, b: number, c: number, ldc: number) => void;
    const f64 = new Float64Array(memory.buffer);
    const aWord = 0;
    const bWord = aWords;
    const cWord = aWords + bWords;
    return {
      f64,
      aWord,
      bWord,
      cWord,
      macro: (mc4, nc4, kc, ldc) => fn(mc4, nc4, kc, aWord * 8, bWord * 8, cWord * 8, ldc),
    };
  } catch {
    return undefined;
  }
}
