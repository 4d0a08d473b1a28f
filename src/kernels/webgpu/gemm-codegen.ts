/**
 * The WGSL source of Kiln's tiled GEMM on webgpu: C = alpha * (A @ B) [+ bias] [+ beta * C], batched
 * (up to three batch dims, each with its own stride per operand, so broadcast batches cost no copy),
 * any row/column strides per operand (transposed operands are read in place). One workgroup of 256
 * invocations computes a 64x64 tile of C, each invocation a 4x4 block (rows ty + 16i, columns
 * tx + 16j, so the stores of a row of invocations are consecutive), stepping K by 16 through two
 * tiles in workgroup memory. Operands are loaded into f32 whatever their storage (float16 through
 * shader-f16 where the device has it, else packed; bfloat16 always packed as 16-bit words) and
 * products are accumulated in f32; the output is rounded once to its dtype.
 *
 * Sizes, strides and offsets are metadata words (gemmMetaWords says where), so one pipeline serves
 * every shape; the source depends only on the storage kinds, on which operand dimension is
 * contiguous (the thread-to-element mapping of the tile loads, for coalescing), and on whether a
 * bias and a beta term are present. Tiles and batches loop grid-stride, so any size fits the
 * 65535-workgroup grid limit.
 */
import { arrayType, loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';

export const GEMM_BM = 64;
export const GEMM_BN = 64;
export const GEMM_BK = 16;
export const GEMM_THREADS = 256;
/** Batch dims the kernel indexes itself; more are copied contiguous by the host first. */
export const GEMM_BATCH_DIMS = 3;

export interface GemmSpec {
  readonly a: StorageKind;
  readonly b: StorageKind;
  readonly c: StorageKind;
  /** Which of A's dims has unit stride (or is preferred for the load mapping): 'k' (row-major A) or 'm'. */
  readonly aMajor: 'k' | 'm';
  /** 'n' (row-major B) or 'k' (B read transposed, as linear's weight). */
  readonly bMajor: 'n' | 'k';
  /** A bias binding (3) indexed by the output column. */
  readonly bias: boolean;
  /** C is read back and added times beta (addmm). */
  readonly beta: boolean;
}

/**
 * Metadata word positions: [M, N, K, batch, tilesN, tilesM, bd0, bd1, bd2,
 * C: off, sM, sN, sb0..2, A: off, sM, sK, sb0..2, B: off, sK, sN, sb0..2, bias: off, sN, alpha bits, beta bits].
 */
export const GEMM_META = {
  M: 0,
  N: 1,
  K: 2,
  batch: 3,
  tilesN: 4,
  tilesM: 5,
  batchSizes: 6,
  c: 9,
  a: 15,
  b: 21,
  bias: 27,
  alpha: 29,
  beta: 30,
  words: 31,
} as const;

export function gemmKey(s: GemmSpec): string {
  return `${s.a},${s.b},${s.c},${s.aMajor}${s.bMajor},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}`;
}

export function generateGemm(s: GemmSpec): string {
  const BM = GEMM_BM;
  const BN = GEMM_BN;
  const BK = GEMM_BK;
  const T = GEMM_THREADS;
  // Invocations per tile row/column, and the 4x4 block each computes.
  const TX = 16;
  const TY = T / TX;
  const RM = BM / TY;
  const RN = BN / TX;
  // Workgroup tiles are stored k-major with one word of padding per row (fewer bank conflicts
  // when the loads walk k fastest).
  const SA = BM + 1;
  const SB = BN + 1;
  const loads = (BM * BK) / T;
  const kinds = [s.a, s.b, s.c];
  const m = GEMM_META;
  const lines: string[] = [];
  if (kinds.includes('f16')) lines.push('enable f16;');
  lines.push(`@group(0) @binding(0) var<storage, read_write> c: ${arrayType(s.c, true)};`);
  lines.push(`@group(0) @binding(1) var<storage, read> a: ${arrayType(s.a, false)};`);
  lines.push(`@group(0) @binding(2) var<storage, read> b: ${arrayType(s.b, false)};`);
  if (s.bias) lines.push(`@group(0) @binding(3) var<storage, read> bias: ${arrayType(s.c, false)};`);
  lines.push(`@group(0) @binding(${s.bias ? 4 : 3}) var<storage, read> kmeta: array<u32>;`);
  const helpers = storagePrelude([s.c]);
  if (helpers) lines.push(helpers);
  lines.push(`var<workgroup> As: array<f32, ${SA * BK}>;`);
  lines.push(`var<workgroup> Bs: array<f32, ${SB * BK}>;`);
  lines.push('');
  lines.push(`@compute @workgroup_size(${T})`);
  lines.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  lines.push(`  let M = kmeta[${m.M}]; let N = kmeta[${m.N}]; let K = kmeta[${m.K}];`);
  lines.push(`  let batch = kmeta[${m.batch}]; let tilesN = kmeta[${m.tilesN}]; let tilesM = kmeta[${m.tilesM}];`);
  lines.push(`  let bd1 = kmeta[${m.batchSizes + 1}]; let bd2 = kmeta[${m.batchSizes + 2}];`);
  lines.push(`  let sCm = kmeta[${m.c + 1}]; let sCn = kmeta[${m.c + 2}];`);
  lines.push(`  let sAm = kmeta[${m.a + 1}]; let sAk = kmeta[${m.a + 2}];`);
  lines.push(`  let sBk = kmeta[${m.b + 1}]; let sBn = kmeta[${m.b + 2}];`);
  lines.push(`  let alpha = bitcast<f32>(kmeta[${m.alpha}]);`);
  if (s.beta) lines.push(`  let beta = bitcast<f32>(kmeta[${m.beta}]);`);
  lines.push(`  let tx = tid % ${TX}u; let ty = tid / ${TX}u;`);
  lines.push('  for (var bz = wid.z; bz < batch; bz = bz + ng.z) {');
  lines.push('    let c2 = bz % bd2; let rb = bz / bd2; let c1 = rb % bd1; let c0 = rb / bd1;');
  for (const [name, base] of [['oC', m.c], ['oA', m.a], ['oB', m.b]] as const) {
    lines.push(`    let ${name} = kmeta[${base}] + c0 * kmeta[${base + 3}] + c1 * kmeta[${base + 4}] + c2 * kmeta[${base + 5}];`);
  }
  lines.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
  lines.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  lines.push(`        let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
  const acc: string[] = [];
  for (let i = 0; i < RM; i++) for (let j = 0; j < RN; j++) acc.push(`acc${i}_${j}`);
  lines.push(`        ${acc.map((x) => `var ${x} = 0.0;`).join(' ')}`);
  lines.push(`        for (var k0 = 0u; k0 < K; k0 = k0 + ${BK}u) {`);
  for (let r = 0; r < loads; r++) {
    lines.push('          {');
    lines.push(`            let e = tid + ${r * T}u;`);
    // A tile: BM x BK; walk the contiguous dim fastest.
    if (s.aMajor === 'k') lines.push(`            let am = e / ${BK}u; let ak = e % ${BK}u;`);
    else lines.push(`            let am = e % ${BM}u; let ak = e / ${BM}u;`);
    lines.push('            let gm = m0 + am; let gk = k0 + ak;');
    lines.push('            var av = 0.0;');
    lines.push(`            if (gm < M && gk < K) { let i = oA + gm * sAm + gk * sAk; av = ${loadExpr(s.a, 'a', 'i', false)}; }`);
    lines.push(`            As[ak * ${SA}u + am] = av;`);
    // B tile: BK x BN.
    if (s.bMajor === 'n') lines.push(`            let bn = e % ${BN}u; let bk = e / ${BN}u;`);
    else lines.push(`            let bn = e / ${BK}u; let bk = e % ${BK}u;`);
    lines.push('            let hn = n0 + bn; let hk = k0 + bk;');
    lines.push('            var bv = 0.0;');
    lines.push(`            if (hn < N && hk < K) { let i = oB + hk * sBk + hn * sBn; bv = ${loadExpr(s.b, 'b', 'i', false)}; }`);
    lines.push(`            Bs[bk * ${SB}u + bn] = bv;`);
    lines.push('          }');
  }
  lines.push('          workgroupBarrier();');
  lines.push(`          for (var kk = 0u; kk < ${BK}u; kk = kk + 1u) {`);
  for (let i = 0; i < RM; i++) lines.push(`            let a${i} = As[kk * ${SA}u + ty + ${i * TY}u];`);
  for (let j = 0; j < RN; j++) lines.push(`            let b${j} = Bs[kk * ${SB}u + tx + ${j * TX}u];`);
  for (let i = 0; i < RM; i++) lines.push(`            ${Array.from({ length: RN }, (_, j) => `acc${i}_${j} = fma(a${i}, b${j}, acc${i}_${j});`).join(' ')}`);
  lines.push('          }');
  lines.push('          workgroupBarrier();');
  lines.push('        }');
  for (let i = 0; i < RM; i++) {
    for (let j = 0; j < RN; j++) {
      lines.push(`        { let gm = m0 + ty + ${i * TY}u; let gn = n0 + tx + ${j * TX}u;`);
      lines.push('          if (gm < M && gn < N) {');
      lines.push('            let ic = oC + gm * sCm + gn * sCn;');
      lines.push(`            var v = alpha * acc${i}_${j};`);
      if (s.bias) lines.push(`            { let ib = kmeta[${m.bias}] + gn * kmeta[${m.bias + 1}]; v = v + ${loadExpr(s.c, 'bias', 'ib', false)}; }`);
      if (s.beta) lines.push(`            v = v + beta * ${loadExpr(s.c, 'c', 'ic', true)};`);
      lines.push(`            ${storeStmt(s.c, 'c', 'ic', 'v').replace(/\n/g, '\n            ')}`);
      lines.push('          }');
      lines.push('        }');
    }
  }
  lines.push('      }');
  lines.push('    }');
  lines.push('  }');
  lines.push('}');
  return lines.join('\n');
}
