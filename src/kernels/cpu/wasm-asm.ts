/**
 * A tiny WebAssembly assembler: LEB128 encoding, the opcodes Kiln's generated kernels use (core
 * i32 control flow and the 128-bit SIMD subset for f32x4 / f64x2 / i32x4) and a module writer for
 * modules of a few functions over one memory. Used by the GEMM macro-kernel (linalg-wasm.ts) and
 * by the compiler's Wasm code generator (src/compile/codegen/wasm). No toolchain, no binary blobs:
 * every kernel is assembled from bytes at load or compile time and checked by WebAssembly.validate.
 */

export const I32 = 0x7f;
export const F32 = 0x7d;
export const F64 = 0x7c;
export const V128 = 0x7b;
export type ValType = typeof I32 | typeof F32 | typeof F64 | typeof V128;

export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

export function sleb(n: number): number[] {
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

export function str(s: string): number[] {
  return [...uleb(s.length), ...Array.from(s, (c) => c.charCodeAt(0))];
}

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

// --- core instructions ---------------------------------------------------------------------------
export const get = (l: number): number[] => [0x20, ...uleb(l)];
export const set = (l: number): number[] => [0x21, ...uleb(l)];
export const tee = (l: number): number[] => [0x22, ...uleb(l)];
export const i32c = (v: number): number[] => [0x41, ...sleb(v)];
export const ADD = [0x6a];
export const SUB = [0x6b];
export const MUL = [0x6c];
export const SHL = [0x74];
export const GE_U = [0x4f];
export const GE_S = [0x4e];
export const EQZ = [0x45];
export const BLOCK = [0x02, 0x40];
export const LOOP = [0x03, 0x40];
export const END = [0x0b];
export const br = (d: number): number[] => [0x0c, ...uleb(d)];
export const brIf = (d: number): number[] => [0x0d, ...uleb(d)];

// --- SIMD (0xfd prefix) -----------------------------------------------------------------------------
export const simd = (op: number): number[] => [0xfd, ...uleb(op)];
const memarg = (offset: number): number[] => [0, ...uleb(offset)];
export const v128Load = (offset: number): number[] => [...simd(0x00), ...memarg(offset)];
export const v128Store = (offset: number): number[] => [...simd(0x0b), ...memarg(offset)];
export const load64Splat = (offset: number): number[] => [...simd(0x0a), ...memarg(offset)];
export const load32Splat = (offset: number): number[] => [...simd(0x09), ...memarg(offset)];
export const V128_ZERO = [...simd(0x0c), ...new Array<number>(16).fill(0)];

/** v128.const with the same float32 in all four lanes. */
export function f32x4Const(x: number): number[] {
  const b = new Uint8Array(new Float32Array([x, x, x, x]).buffer);
  return [...simd(0x0c), ...b];
}

/** v128.const with the same int32 in all four lanes. */
export function i32x4Const(x: number): number[] {
  const b = new Uint8Array(new Int32Array([x, x, x, x]).buffer);
  return [...simd(0x0c), ...b];
}

export const OP = {
  F64X2_ADD: simd(0xf0),
  F64X2_MUL: simd(0xf2),
  F32X4_EQ: simd(0x41),
  F32X4_NE: simd(0x42),
  F32X4_LT: simd(0x43),
  F32X4_GT: simd(0x44),
  F32X4_LE: simd(0x45),
  F32X4_GE: simd(0x46),
  V128_NOT: simd(0x4d),
  V128_AND: simd(0x4e),
  V128_ANDNOT: simd(0x4f),
  V128_OR: simd(0x50),
  V128_XOR: simd(0x51),
  /** (a, b, mask): a where mask bits are set, else b. */
  V128_BITSELECT: simd(0x52),
  F32X4_CEIL: simd(0x67),
  F32X4_FLOOR: simd(0x68),
  F32X4_TRUNC: simd(0x69),
  F32X4_NEAREST: simd(0x6a),
  I32X4_EQ: simd(0x37),
  I32X4_SHL: simd(0xab),
  I32X4_SHR_S: simd(0xac),
  I32X4_SHR_U: simd(0xad),
  I32X4_ADD: simd(0xae),
  I32X4_SUB: simd(0xb1),
  F32X4_ABS: simd(0xe0),
  F32X4_NEG: simd(0xe1),
  F32X4_SQRT: simd(0xe3),
  F32X4_ADD: simd(0xe4),
  F32X4_SUB: simd(0xe5),
  F32X4_MUL: simd(0xe6),
  F32X4_DIV: simd(0xe7),
  /** NaN-propagating min / max (IEEE minimum / maximum, as torch.minimum / maximum). */
  F32X4_MIN: simd(0xe8),
  F32X4_MAX: simd(0xe9),
  I32X4_TRUNC_SAT_F32X4_S: simd(0xf8),
  F32X4_CONVERT_I32X4_S: simd(0xfa),
  /** Relaxed SIMD (a, b, c) -> a * b + c, fused or not as the engine chooses (validate before use). */
  F32X4_RELAXED_MADD: simd(0x105),
} as const;

// --- functions and modules ----------------------------------------------------------------------------

/** One function under construction: parameters, growable locals, a byte body. */
export class FnBuilder {
  readonly code: number[] = [];
  private readonly localTypes: ValType[] = [];

  constructor(
    readonly name: string,
    readonly params: readonly ValType[],
    readonly results: readonly ValType[] = [],
  ) {}

  /** A fresh local of `type`; returns its index. */
  local(type: ValType): number {
    this.localTypes.push(type);
    return this.params.length + this.localTypes.length - 1;
  }

  emit(...parts: readonly (readonly number[])[]): void {
    for (const p of parts) for (const b of p) this.code.push(b);
  }

  /** Locals declaration + body, as a code-section entry. */
  encode(): number[] {
    const groups: [number, ValType][] = [];
    for (const t of this.localTypes) {
      const last = groups[groups.length - 1];
      if (last && last[1] === t) last[0]++;
      else groups.push([1, t]);
    }
    const body = [...uleb(groups.length), ...groups.flatMap(([n, t]) => [...uleb(n), t]), ...this.code, ...END];
    return [...uleb(body.length), ...body];
  }
}

export interface ModuleSpec {
  readonly functions: readonly FnBuilder[];
  /** Pages (64 KiB) of memory. */
  readonly pages: number;
  /** 'import': imported as env.mem (the caller creates it); 'export': defined here and exported as 'mem'. */
  readonly memory: 'import' | 'export';
  /** With 'import': the memory is shared (threads) with this maximum in pages (shared memories need one). */
  readonly sharedMaxPages?: number;
}

/** Encodes a module whose functions are all exported under their names. */
export function encodeModule(spec: ModuleSpec): Uint8Array {
  const fns = spec.functions;
  const type = [...uleb(fns.length), ...fns.flatMap((f) => [0x60, ...uleb(f.params.length), ...f.params, ...uleb(f.results.length), ...f.results])];
  // An imported memory only states its minimum, so a growable memory of any maximum fits.
  // A shared import (flag 3) must state a maximum equal to or above the memory's.
  const limits =
    spec.memory === 'import'
      ? spec.sharedMaxPages !== undefined
        ? [0x03, ...uleb(spec.pages), ...uleb(spec.sharedMaxPages)]
        : [0x00, ...uleb(spec.pages)]
      : [0x01, ...uleb(spec.pages), ...uleb(spec.pages)];
  const funcs = [...uleb(fns.length), ...fns.flatMap((_, i) => uleb(i))];
  const exportsList = fns.map((f, i) => [...str(f.name), 0x00, ...uleb(i)]);
  if (spec.memory === 'export') exportsList.push([...str('mem'), 0x02, 0]);
  const exports = [...uleb(exportsList.length), ...exportsList.flat()];
  const code = [...uleb(fns.length), ...fns.flatMap((f) => f.encode())];
  const parts = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, ...section(1, type)];
  if (spec.memory === 'import') parts.push(...section(2, [1, ...str('env'), ...str('mem'), 0x02, ...limits]));
  parts.push(...section(3, funcs));
  if (spec.memory === 'export') parts.push(...section(5, [1, ...limits]));
  parts.push(...section(7, exports), ...section(10, code));
  return new Uint8Array(parts);
}

/** The slice of the WebAssembly JS API Kiln uses (the project's TS libs don't declare it). */
export interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Memory: new (desc: { initial: number; maximum: number; shared?: boolean }) => { buffer: ArrayBuffer };
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

/** The global WebAssembly object, or undefined where there is none. */
export function wasmApi(): WasmApi | undefined {
  return (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
}
