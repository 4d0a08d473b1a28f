/**
 * How each dtype lives in a WGSL storage buffer, and the WGSL that loads an element into its
 * compute type (f32 or i32, kernels/math/wgsl.ts) and stores one back. 32-bit types are arrays of
 * themselves; float16 is array<f16> where the device has shader-f16; 16- and 8-bit types are
 * otherwise packed into u32 words (bfloat16 always: WGSL has no bf16). A packed output is written
 * with atomicAnd/atomicOr on its part of the word, since neighbouring elements of one word belong
 * to other invocations; reads of a written packed binding use atomicLoad.
 *
 * Stores round to 16 bits to nearest even with integer code (kiln_f16_bits, kiln_bf16_bits), not
 * with WGSL's f32 -> f16 conversion or pack2x16float: WGSL leaves the rounding of an inexact
 * conversion to the implementation, and a driver may fold unpack2x16float(pack2x16float(x)) to x
 * (an NVIDIA Vulkan driver does), which made float16 casts inside fused kernels round nothing.
 * float16 stores go through kiln_f16_store, which is the integer code unless a probe of this
 * device showed its own conversion rounds the same (f16-store-probe.ts: then pack2x16float,
 * clamped, with overflow and NaN from the bits); casts inside a kernel always keep the integer code.
 */
import type { DType } from '../../tensor/dtype.js';
import { wgslMathForm } from '../math/wgsl-libm/index.js';
import { F16_STORE_NATIVE, nativeF16Stores } from './f16-store-probe.js';

export type StorageKind = 'f32' | 'i32' | 'f16' | 'f16p' | 'bf16p' | 'u8p' | 'boolp';

/** The storage kind of a dtype, or null where WGSL has no form (float64, int64). */
export function storageKind(dt: DType, nativeF16: boolean): StorageKind | null {
  switch (dt) {
    case 'float32':
      return 'f32';
    case 'int32':
      return 'i32';
    case 'float16':
      return nativeF16 ? 'f16' : 'f16p';
    case 'bfloat16':
      return 'bf16p';
    case 'uint8':
      return 'u8p';
    case 'bool':
      return 'boolp';
    case 'float64':
    case 'int64':
      return null;
    default:
      return dt satisfies never;
  }
}

/** Element bits of a packed kind, 0 for kinds stored as their own array type. */
function packedBits(k: StorageKind): 0 | 8 | 16 {
  switch (k) {
    case 'f32':
    case 'i32':
    case 'f16':
      return 0;
    case 'f16p':
    case 'bf16p':
      return 16;
    case 'u8p':
    case 'boolp':
      return 8;
    default:
      return k satisfies never;
  }
}

/** The WGSL array type of a binding of kind k. */
export function arrayType(k: StorageKind, written: boolean): string {
  if (packedBits(k) === 0) return `array<${k}>`;
  return written ? 'array<atomic<u32>>' : 'array<u32>';
}

/** A packed kind's element (`raw`: its bits, a u32 expression) as its compute type. */
function fromRaw(k: StorageKind, raw: string): string {
  switch (k) {
    case 'f16p':
      return `unpack2x16float(${raw}).x`;
    case 'bf16p':
      return `bitcast<f32>(${raw} << 16u)`;
    case 'u8p':
      return `i32(${raw})`;
    case 'boolp':
      return `select(0i, 1i, ${raw} != 0u)`;
    default:
      throw new Error(`loadExpr: ${k} is not packed`);
  }
}

/** A compute value `v` as a packed kind's bits (a u32 expression below 2^bits). */
function toRaw(k: StorageKind, v: string): string {
  switch (k) {
    case 'f16p':
      return `kiln_f16_store(${v})`;
    case 'bf16p':
      return `kiln_bf16_bits(${v})`;
    case 'u8p':
      return `(u32(${v}) & 0xffu)`;
    case 'boolp':
      return `select(0u, 1u, ${v} != 0i)`;
    default:
      throw new Error(`storeStmt: ${k} is not packed`);
  }
}

const bitsMask = (bits: number): string => (bits === 16 ? '0xffffu' : '0xffu');

/** Load element `i` (a u32 expression) of binding `b` into the kind's compute type. */
export function loadExpr(k: StorageKind, b: string, i: string, written: boolean): string {
  const bits = packedBits(k);
  if (bits === 0) return k === 'f16' ? `f32(${b}[${i}])` : `${b}[${i}]`;
  const per = 32 / bits;
  const word = written ? `atomicLoad(&${b}[(${i}) / ${per}u])` : `${b}[(${i}) / ${per}u]`;
  return fromRaw(k, `((${word} >> (((${i}) % ${per}u) * ${bits}u)) & ${bitsMask(bits)})`);
}

/** Statements storing compute value `v` at element `i` of binding `b`. */
export function storeStmt(k: StorageKind, b: string, i: string, v: string): string {
  const bits = packedBits(k);
  if (bits === 0) return k === 'f16' ? `${b}[${i}] = bitcast<vec2<f16>>(kiln_f16_store(${v})).x;` : `${b}[${i}] = ${v};`;
  const per = 32 / bits;
  const mask = bitsMask(bits);
  return [
    `{ let w = (${i}) / ${per}u; let sh = ((${i}) % ${per}u) * ${bits}u;`,
    `  atomicAnd(&${b}[w], ~(${mask} << sh)); atomicOr(&${b}[w], ${toRaw(k, v)} << sh); }`,
  ].join('\n');
}

// ------------------------------------------------------------------------------------------------
// Vector forms (vectorised pointwise kernels, fused/vector.ts): a binding read or written V
// elements at a time (V = 2 or 4, one vector per invocation step). Native kinds are arrays of
// vec<V>; packed kinds are arrays of whole words (V / per words: u32 or vec2<u32>), written whole
// by the one invocation that owns them, so neither atomics nor a read-modify-write are needed.
// Every element is converted with the same expressions as the scalar forms above (fromRaw, toRaw,
// kiln_f16_store), so a vectorised kernel computes the bits the scalar one does.
// ------------------------------------------------------------------------------------------------

/** Elements per vector access of a vectorised pointwise kernel. */
export type VecWidth = 2 | 4;

/** Bytes per element of a storage kind. */
export function kindBytes(k: StorageKind): 1 | 2 | 4 {
  const bits = packedBits(k);
  return bits === 0 ? (k === 'f16' ? 2 : 4) : bits === 16 ? 2 : 1;
}

/** Whether kind k has a vector form of width V (8-bit kinds only in whole words: V = 4). */
export function hasVectorForm(k: StorageKind, V: VecWidth): boolean {
  return packedBits(k) !== 8 || V === 4;
}

/** The WGSL array type of a binding of kind k accessed V elements at a time (never atomic). */
export function vectorArrayType(k: StorageKind, V: VecWidth): string {
  const bits = packedBits(k);
  if (bits === 0) return `array<vec${V}<${k}>>`;
  const words = (V * bits) / 32;
  if (words === 1) return 'array<u32>';
  if (words === 2) return 'array<vec2<u32>>';
  throw new Error(`vectorArrayType: ${k} has no vector form of ${V} elements`);
}

/** Lane c (a constant) of vector `x` (a value read from a vector binding of kind k) as the compute type. */
export function laneExpr(k: StorageKind, V: VecWidth, x: string, c: number): string {
  const bits = packedBits(k);
  if (bits === 0) return k === 'f16' ? `f32(${x}[${c}])` : `${x}[${c}]`;
  const per = 32 / bits;
  const word = V / per === 1 ? x : `${x}[${Math.floor(c / per)}]`;
  return fromRaw(k, `((${word} >> ${(c % per) * bits}u) & ${bitsMask(bits)})`);
}

/** The statement storing lanes 0..V-1 of `v` (a vec<V> of the compute type) as vector `j` of binding `b`. */
export function vectorStoreStmt(k: StorageKind, V: VecWidth, b: string, j: string, v: string): string {
  const bits = packedBits(k);
  if (bits === 0 && k !== 'f16') return `${b}[${j}] = ${v};`;
  // 16-bit kinds (f16 included: its bits are kiln_f16_store's, as a scalar store's) and 8-bit kinds as u32 words.
  const eb = bits === 0 ? 16 : bits;
  const per = 32 / eb;
  const raw = (c: number): string => (k === 'f16' ? `kiln_f16_store(${v}[${c}])` : toRaw(k, `${v}[${c}]`));
  const words: string[] = [];
  for (let w = 0; w < (V * eb) / 32; w++) {
    const parts: string[] = [];
    for (let c = 0; c < per; c++) parts.push(c === 0 ? raw(w * per) : `(${raw(w * per + c)} << ${c * eb}u)`);
    words.push(parts.join(' | '));
  }
  const value = words.length === 1 ? words[0]! : `vec2<u32>(${words.join(', ')})`;
  return k === 'f16' ? `${b}[${j}] = bitcast<vec${V}<f16>>(${value});` : `${b}[${j}] = ${value};`;
}

/** The u32 word holding element `i` of a vector binding of packed kind k (a reference expression). */
function vectorWord(bits: number, V: VecWidth, b: string, i: string): string {
  const per = 32 / bits;
  return V === per ? `${b}[(${i}) / ${per}u]` : `${b}[(${i}) / ${V}u][((${i}) / ${per}u) % ${(V * bits) / 32}u]`;
}

/** Load element `i` (a u32 expression) of a vector binding (a broadcast operand, the scalar tail). */
export function vectorElementLoad(k: StorageKind, V: VecWidth, b: string, i: string): string {
  const bits = packedBits(k);
  if (bits === 0) {
    const e = `${b}[(${i}) / ${V}u][(${i}) % ${V}u]`;
    return k === 'f16' ? `f32(${e})` : e;
  }
  const per = 32 / bits;
  return fromRaw(k, `((${vectorWord(bits, V, b, i)} >> (((${i}) % ${per}u) * ${bits}u)) & ${bitsMask(bits)})`);
}

/**
 * Statements storing compute value `v` at element `i` of a vector binding: only for elements of a
 * vector no other invocation writes (the scalar tail), since a packed element is stored by a plain
 * read-modify-write of its word.
 */
export function vectorElementStoreStmt(k: StorageKind, V: VecWidth, b: string, i: string, v: string): string {
  const bits = packedBits(k);
  if (bits === 0) {
    const e = `${b}[(${i}) / ${V}u][(${i}) % ${V}u]`;
    return k === 'f16' ? `${e} = bitcast<vec2<f16>>(kiln_f16_store(${v})).x;` : `${e} = ${v};`;
  }
  const per = 32 / bits;
  const w = vectorWord(bits, V, b, i);
  return `{ let sh = ((${i}) % ${per}u) * ${bits}u; ${w} = (${w} & ~(${bitsMask(bits)} << sh)) | (${toRaw(k, v)} << sh); }`;
}

/** bfloat16 rounding (to nearest even; NaN stays a quiet NaN), used by packed bfloat16 stores. */
export const BF16_PRELUDE = `
fn kiln_bf16_bits(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
`;

/**
 * float16 rounding to nearest even as integer code (the bits of half.ts's float32ToFloat16Bits:
 * subnormals, overflow to infinity, NaN a quiet NaN with its sign), and the exact value of float16
 * bits as f32. A float16 store writes kiln_f16_bits; a float16 cast inside a kernel is
 * kiln_f16_value(kiln_f16_bits(x)), which no compiler can fold away.
 */
/** kiln_f16_store (the bits a float16 store writes) as the integer code; f16-store-probe.ts has the native form. */
const F16_STORE_EXACT = 'fn kiln_f16_store(v: f32) -> u32 { return kiln_f16_bits(v); }\n';

export const F16_PRELUDE = `
fn kiln_f16_bits(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  let s = (u >> 16u) & 0x8000u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7e00u; }
  if (a >= 0x477ff000u) { return s | 0x7c00u; }
  if (a >= 0x38800000u) {
    let r = a - 0x38000000u;
    return s | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
  }
  if (a <= 0x33000000u) { return s; }
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = 126u - (a >> 23u);
  let q = m >> sh;
  let rem = m & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  return s | (q + select(0u, 1u, rem > half || (rem == half && (q & 1u) == 1u)));
}
fn kiln_f16_value(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) { let x = f32(m) * 5.9604644775390625e-8f; return select(x, -x, s != 0u); }
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
${F16_STORE_EXACT}`;

/**
 * KILN_WEBGPU_MATH=fast, a diagnostic (wgsl-libm/v1.ts): float16 bits through pack2x16float, whose
 * rounding WGSL leaves to the implementation (see the header), to measure what the integer rounding
 * of kiln_f16_bits costs a float16 store.
 */
const F16_FAST_PRELUDE = F16_PRELUDE.replace(/fn kiln_f16_bits[\s\S]*?\n}\n/, 'fn kiln_f16_bits(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0f)); }\n');

/**
 * KILN_WEBGPU_MATH=v3: kiln_f16_bits without branches, the same bits as F16_PRELUDE's (round to
 * nearest even in integer code; test/wgsl-libm-mirror.test.ts checks a JavaScript mirror of this
 * text against half.ts's float32ToFloat16Bits over every float32 exponent). v2's form returns from
 * four branches and runs the subnormal path's variable shifts behind one; a float16 store of a
 * vectorised kernel calls it once per lane, so a lane that branches differently (a result near
 * zero: subnormal in float16) diverges its warp. Here both the normal and the subnormal rounding are
 * computed and selected: rounding m >> sh to nearest even is (m + (2^(sh-1) - 1) + ((m >> sh) & 1))
 * >> sh, the normal path's formula with sh = 13, with sh clamped to [14, 25] below 2^-14 (all of
 * 2^-25 and less rounds to 0: m < 2^24, so m + 2^24 - 1 < 2^25; the clamp also keeps shifts below 32).
 */
export const F16_BITS_V3 = `fn kiln_f16_bits(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  let a = u & 0x7fffffffu;
  let r = a - 0x38000000u;
  let hn = (r + 0xfffu + ((r >> 13u) & 1u)) >> 13u;
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = clamp(126u - min(a >> 23u, 126u), 14u, 25u);
  let hs = (m + ((1u << (sh - 1u)) - 1u) + ((m >> sh) & 1u)) >> sh;
  var h = select(hs, hn, a >= 0x38800000u);
  h = select(h, 0x7c00u, a >= 0x477ff000u);
  h = select(h, 0x7e00u, a > 0x7f800000u);
  return ((u >> 16u) & 0x8000u) | h;
}
`;

const F16_V3_PRELUDE = F16_PRELUDE.replace(/fn kiln_f16_bits[\s\S]*?\n}\n/, F16_BITS_V3);

/** The helpers that loads and stores of these storage kinds call (BF16_PRELUDE, F16_PRELUDE), and those named in `also`. */
export function storagePrelude(kinds: readonly StorageKind[], also: { f16?: boolean; bf16?: boolean } = {}): string {
  const out: string[] = [];
  const form = wgslMathForm();
  if (also.f16 === true || kinds.includes('f16') || kinds.includes('f16p')) {
    const pre = form === 'fast' ? F16_FAST_PRELUDE : form === 'v3' ? F16_V3_PRELUDE : F16_PRELUDE;
    out.push((form !== 'fast' && nativeF16Stores() ? pre.replace(F16_STORE_EXACT, F16_STORE_NATIVE) : pre).trim());
  }
  if (also.bf16 === true || kinds.includes('bf16p')) out.push(BF16_PRELUDE.trim());
  return out.join('\n');
}
