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

/** The slice of the WebAssembly JS API used here (the project's TS libs don't declare it). */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Memory: new (desc: { initial: number; maximum: number }) => { buffer: ArrayBuffer };
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

// --- a tiny assembler ---------------------------------------------------------------------------

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  while (true) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

function str(s: string): number[] {
  return [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
}

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

const I32 = 0x7f;
const V128 = 0x7b;
const get = (l: number): number[] => [0x20, ...uleb(l)];
const set = (l: number): number[] => [0x21, ...uleb(l)];
const i32c = (v: number): number[] => [0x41, ...sleb(v)];
const ADD = [0x6a];
const SUB = [0x6b];
const MUL = [0x6c];
const SHL = [0x74];
const GE_U = [0x4f];
const EQZ = [0x45];
const simd = (op: number): number[] => [0xfd, ...uleb(op)];
const memarg = (offset: number): number[] => [0, ...uleb(offset)];
const v128Load = (offset: number): number[] => [...simd(0x00), ...memarg(offset)];
const v128Store = (offset: number): number[] => [...simd(0x0b), ...memarg(offset)];
const load64Splat = (offset: number): number[] => [...simd(0x0a), ...memarg(offset)];
const F64X2_ADD = simd(0xf0);
const F64X2_MUL = simd(0xf2);
const V128_ZERO = [...simd(0x0c), ...new Array<number>(16).fill(0)];
const BLOCK = [0x02, 0x40];
const LOOP = [0x03, 0x40];
const END = [0x0b];
const br = (d: number): number[] => [0x0c, ...uleb(d)];
const brIf = (d: number): number[] => [0x0d, ...uleb(d)];

// Locals: params 0..6, then i32 scratch, then v128 registers.
const MC4 = 0, NC4 = 1, KCL = 2, ABASE = 3, BBASE = 4, CBASE = 5, LDC = 6;
const I = 7, J = 8, P = 9, PA = 10, PB = 11, PC = 12;
const ACC = 13; // 13..20
const B01 = 21, B23 = 22, AV = 23;

function body(): number[] {
  const c: number[] = [];
  const emit = (...parts: number[][]): void => {
    for (const p of parts) c.push(...p);
  };
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
  emit(END);
  return c;
}

function moduleBytes(pages: number): Uint8Array {
  const type = [1, 0x60, 7, ...new Array<number>(7).fill(I32), 0];
  const imports = [1, ...str('env'), ...str('mem'), 0x02, 0x00, ...uleb(pages)];
  const funcs = [1, 0];
  const exports = [1, ...str('macro'), 0x00, 0];
  const locals = [2, ...uleb(6), I32, ...uleb(11), V128];
  const fn = [...locals, ...body()];
  const code = [1, ...uleb(fn.length), ...fn];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, type),
    ...section(2, imports),
    ...section(3, funcs),
    ...section(7, exports),
    ...section(10, code),
  ]);
}

/**
 * Instantiates the kernel for blocks of at most mcMax x kcMax (A), kcMax x ncMax (B) and
 * mcMax x ncMax (C), or returns undefined where WebAssembly SIMD is unavailable.
 */
export function createWasmGemm(mcMax: number, kcMax: number, ncMax: number): WasmGemm | undefined {
  try {
    const WA = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
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
