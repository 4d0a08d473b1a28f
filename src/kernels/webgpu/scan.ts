/**
 * webgpu kernels for cumsum and cumprod: one WGSL scan template over lines along the scanned dim,
 * any input and output strides (the outer dims' sizes and strides are metadata words, walked by a
 * loop, so one pipeline serves every rank). The fused renderer has no scans; this is their
 * template.
 *
 * Strategies: 'thread', one invocation per line with a serial loop (short lines, or so many lines
 * that each invocation has one); 'workgroup', one workgroup per line, the line in tiles of 256
 * elements, each tile scanned in workgroup memory (Hillis-Steele) and offset by the running carry.
 *
 * Accumulators: f32 for floating outputs (float16 / bfloat16 rounded once per stored element), i32
 * for int32 / uint8 / bool outputs (stores wrap uint8 and map nonzero to true, as the CPU's casts),
 * and an exact 64-bit integer (a vec2<u32> with carries; products from 16-bit partial products) for
 * int64 outputs, the default of integer and bool inputs, so cumsum of a bool mask counts exactly.
 * int64 inputs are read as their two words. With `dtype`, elements are cast to it before they are
 * accumulated, as torch does. float64 is not supported (no WGSL type).
 */
import * as R from '../../ops/defs/reduction.js';
import { registerKernel } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { DType } from '../../tensor/dtype.js';
import { isFloating } from '../../tensor/dtype.js';
import { normalizeDim } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { wgslLit } from '../math/wgsl.js';
import { allocOut, unsupportedDtype, webgpu } from './device.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { dataKind, groupsFor, header, kernelFor, WG, words } from './template.js';

type Acc = 'f32' | 'i32' | 'i64';
type Strategy = 'thread' | 'workgroup';

interface ScanSpec {
  readonly product: boolean;
  readonly acc: Acc;
  readonly strategy: Strategy;
  /** Storage of the output (null: int64 words) and of the input (null: int64 words). */
  readonly out: StorageKind | null;
  readonly x: StorageKind | null;
  /** Round each element to this dtype first (a `dtype` cast to a narrower type). */
  readonly castTo: DType | null;
}

function accFor(dt: DType): Acc | null {
  if (dt === 'int64') return 'i64';
  if (dt === 'float64') return null;
  return isFloating(dt) ? 'f32' : 'i32';
}

const ACC_TYPE: Record<Acc, string> = { f32: 'f32', i32: 'i32', i64: 'vec2<u32>' };

/** 64-bit integer helpers: add with carry, the low 64 bits of a product, sign extension. */
const I64_PRELUDE = `
fn kiln_i64(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0i)); }
fn kiln_scan_add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn kiln_mul32(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn kiln_scan_mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let p = kiln_mul32(a.x, b.x);
  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
`;

function identity(s: ScanSpec): string {
  if (s.acc === 'i64') return s.product ? 'vec2<u32>(1u, 0u)' : 'vec2<u32>(0u, 0u)';
  return wgslLit(s.product ? 1 : 0, s.acc);
}

function combine(s: ScanSpec, a: string, b: string): string {
  if (s.acc === 'i64') return s.product ? `kiln_scan_mul64(${a}, ${b})` : `kiln_scan_add64(${a}, ${b})`;
  return s.product ? `(${a} * ${b})` : `(${a} + ${b})`;
}

/** The input element at offset `o` (u32) as the accumulator's type. */
function element(s: ScanSpec, o: string): string {
  if (s.x === null) {
    // int64 input: its words.
    const lo = `bitcast<u32>(b1[2u * (${o})])`;
    const hi = `bitcast<u32>(b1[2u * (${o}) + 1u])`;
    if (s.acc === 'i64') return `vec2<u32>(${lo}, ${hi})`;
    // Exact from the low word where the value fits in int32 (the high word is its sign).
    if (s.acc === 'f32') return `select(f32(bitcast<i32>(${hi})) * 4294967296.0f + f32(${lo}), f32(bitcast<i32>(${lo})), bitcast<i32>(${hi}) == (bitcast<i32>(${lo}) >> 31u))`;
    return `bitcast<i32>(${lo})`;
  }
  const v = loadExpr(s.x, 'b1', o, false);
  const isF = s.x === 'f32' || s.x === 'f16' || s.x === 'f16p' || s.x === 'bf16p';
  let e = v;
  switch (s.castTo) {
    case 'float16':
      e = `kiln_f16_value(kiln_f16_bits(${isF ? v : `f32(${v})`}))`;
      break;
    case 'bfloat16':
      e = `bitcast<f32>(kiln_bf16_bits(${isF ? v : `f32(${v})`}) << 16u)`;
      break;
    case 'bool':
      // A float's bits: NaN is true, and WGSL may assume NaN away in a comparison.
      e = isF ? `select(0i, 1i, (bitcast<u32>(${v}) & 0x7fffffffu) != 0u)` : `select(0i, 1i, ${v} != 0i)`;
      break;
    case 'uint8':
      e = `(${isF ? `i32(${v})` : v} & 255i)`;
      break;
    default:
      break;
  }
  const eIsF = s.castTo === 'float16' || s.castTo === 'bfloat16' ? true : s.castTo === 'bool' || s.castTo === 'uint8' ? false : isF;
  if (s.acc === 'f32') return eIsF ? e : `f32(${e})`;
  const i = eIsF ? `i32(${e})` : e;
  return s.acc === 'i64' ? `kiln_i64(${i})` : i;
}

function store(s: ScanSpec, o: string, v: string): string {
  if (s.out === null) return `b0[2u * (${o})] = ${v}.x; b0[2u * (${o}) + 1u] = ${v}.y;`;
  return storeStmt(s.out, 'b0', o, v);
}

/**
 * Metadata: [lines, len, nd, xStep, oStep, xOff, oOff, then per outer dim (innermost last):
 * size, xStride, oStride].
 */
function scanSource(s: ScanSpec): string {
  const lines = header(
    [
      { kind: s.out ?? 'u32', written: true },
      { kind: s.x ?? 'i32', written: false },
    ],
    { f16: s.castTo === 'float16', bf16: s.castTo === 'bfloat16' },
  );
  if (s.acc === 'i64') lines.push(I64_PRELUDE.trim());
  const T = ACC_TYPE[s.acc];
  const wg = s.strategy === 'workgroup';
  if (wg) lines.push(`var<workgroup> sh: array<${T}, ${WG}>;`);
  lines.push(
    `@compute @workgroup_size(${WG})`,
    wg
      ? 'fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) ng: vec3u) {'
      : 'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let lines = kmeta[0]; let len = kmeta[1]; let nd = kmeta[2]; let xs = kmeta[3]; let os = kmeta[4];',
    wg ? '  for (var line = wid.x; line < lines; line = line + ng.x) {' : `  for (var line = gid.x; line < lines; line = line + ng.x * ${WG}u) {`,
    '    var xo = kmeta[5]; var oo = kmeta[6]; var rem = line;',
    '    for (var k = nd; k > 0u; k = k - 1u) {',
    '      let m = 7u + 3u * (k - 1u); let c = rem % kmeta[m]; rem = rem / kmeta[m];',
    '      xo = xo + c * kmeta[m + 1u]; oo = oo + c * kmeta[m + 2u];',
    '    }',
  );
  if (!wg) {
    lines.push(
      `    var acc: ${T} = ${identity(s)};`,
      '    for (var j = 0u; j < len; j = j + 1u) {',
      `      acc = ${combine(s, 'acc', element(s, 'xo + j * xs'))};`,
      `      ${store(s, 'oo + j * os', 'acc').replace(/\n/g, '\n      ')}`,
      '    }',
    );
  } else {
    lines.push(
      `    var carry: ${T} = ${identity(s)};`,
      `    for (var base = 0u; base < len; base = base + ${WG}u) {`,
      '      let j = base + lid;',
      `      var v: ${T} = ${identity(s)};`,
      `      if (j < len) { v = ${element(s, 'xo + j * xs')}; }`,
      '      sh[lid] = v;',
      '      workgroupBarrier();',
      `      for (var d = 1u; d < ${WG}u; d = d << 1u) {`,
      `        var before: ${T} = ${identity(s)};`,
      '        if (lid >= d) { before = sh[lid - d]; }',
      '        workgroupBarrier();',
      `        sh[lid] = ${combine(s, 'before', 'sh[lid]')};`,
      '        workgroupBarrier();',
      '      }',
      `      let r = ${combine(s, 'carry', 'sh[lid]')};`,
      `      if (j < len) { ${store(s, 'oo + j * os', 'r').replace(/\n/g, ' ')} }`,
      `      carry = ${combine(s, 'carry', `sh[${WG - 1}u]`)};`,
      '      workgroupBarrier();',
      '    }',
    );
  }
  lines.push('  }', '}');
  return lines.join('\n');
}

function scan(op: 'cumsum' | 'cumprod', meta: OutMeta, x: Tensor, dim: number, dtype: DType | null): Tensor {
  const out = allocOut(meta);
  const acc = accFor(out.dtype);
  if (acc === null) {
    out.dispose();
    throw unsupportedDtype(op, { dtype: out.dtype, shape: out.shape });
  }
  const xk = dataKind(op, x);
  if (x.dtype === 'float64') {
    out.dispose();
    throw unsupportedDtype(op, x);
  }
  if (out.numel() === 0) return out;
  const d = x.ndim === 0 ? -1 : normalizeDim(op, dim, x.ndim);
  const len = d < 0 ? 1 : x.shape[d]!;
  const lines = out.numel() / len;
  const outer = x.shape.map((_, k) => k).filter((k) => k !== d);
  const castTo = dtype !== null && dtype !== x.dtype && (dtype === 'float16' || dtype === 'bfloat16' || dtype === 'bool' || dtype === 'uint8') ? dtype : null;
  const spec: ScanSpec = {
    product: op === 'cumprod',
    acc,
    strategy: len <= 64 || lines >= 16384 ? 'thread' : 'workgroup',
    out: out.dtype === 'int64' ? null : dataKind(op, out).kind,
    x: xk.wide ? null : xk.kind,
    castTo,
  };
  const key = `scan.${op}.${spec.acc}.${spec.strategy}.${spec.out ?? 'i64'}.${spec.x ?? 'i64'}.${castTo ?? ''}.${webgpu().hasFeature('shader-f16') ? 'h' : ''}`;
  const k = kernelFor(key, () => scanSource(spec));
  const step = (t: Tensor): number => (d < 0 ? 0 : t.strides[d]!);
  const meta32 = words([lines, len, outer.length, step(x), step(out), x.offset, out.offset, ...outer.flatMap((k) => [x.shape[k]!, x.strides[k]!, out.strides[k]!])]);
  const groups = spec.strategy === 'workgroup' ? groupsFor(lines, 1) : groupsFor(lines);
  webgpu().dispatch(k, [out.storage.buffer, x.storage.buffer], meta32, groups);
  return out;
}

const dtypeOf = (v: unknown): DType | null => (v ?? null) as DType | null;

registerKernel(R.cumsum, 'webgpu', (ctx, self, dim, dtype) => scan('cumsum', ctx.out, self, dim as number, dtypeOf(dtype)));
registerKernel(R.cumprod, 'webgpu', (ctx, self, dim, dtype) => scan('cumprod', ctx.out, self, dim as number, dtypeOf(dtype)));
