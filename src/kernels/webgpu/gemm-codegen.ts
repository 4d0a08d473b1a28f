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
 * 65535-workgroup grid limit. The tiling and inner product are gemm-tile.ts's skeleton (shared with
 * the implicit-GEMM convolution, conv-gemm.ts); this file gives it the strided-matrix loads and the
 * alpha/bias/beta epilogue.
 */
import { GEMM_BM, GEMM_BN, GEMM_BK, GEMM_THREADS, buildGemmTile, gemmDecls } from './gemm-tile.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';

export { GEMM_BM, GEMM_BN, GEMM_BK, GEMM_THREADS };
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
  const m = GEMM_META;
  return buildGemmTile({
    decls: gemmDecls(s.a, s.b, s.c, s.bias),
    prologue: [
      `let M = kmeta[${m.M}]; let N = kmeta[${m.N}]; let K = kmeta[${m.K}];`,
      `let batch = kmeta[${m.batch}]; let tilesN = kmeta[${m.tilesN}]; let tilesM = kmeta[${m.tilesM}];`,
      `let bd1 = kmeta[${m.batchSizes + 1}]; let bd2 = kmeta[${m.batchSizes + 2}];`,
      `let sCm = kmeta[${m.c + 1}]; let sCn = kmeta[${m.c + 2}];`,
      `let sAm = kmeta[${m.a + 1}]; let sAk = kmeta[${m.a + 2}];`,
      `let sBk = kmeta[${m.b + 1}]; let sBn = kmeta[${m.b + 2}];`,
      `let alpha = bitcast<f32>(kmeta[${m.alpha}]);`,
      ...(s.beta ? [`let beta = bitcast<f32>(kmeta[${m.beta}]);`] : []),
    ],
    batchPrologue: [
      'let c2 = bz % bd2; let rb = bz / bd2; let c1 = rb % bd1; let c0 = rb / bd1;',
      ...([['oC', m.c], ['oA', m.a], ['oB', m.b]] as const).map(([name, base]) => `let ${name} = kmeta[${base}] + c0 * kmeta[${base + 3}] + c1 * kmeta[${base + 4}] + c2 * kmeta[${base + 5}];`),
    ],
    aMajor: s.aMajor,
    bMajor: s.bMajor,
    loadA: () => ['let gm = m0 + am; let gk = k0 + ak;', 'var av = 0.0;', `if (gm < M && gk < K) { let i = oA + gm * sAm + gk * sAk; av = ${loadExpr(s.a, 'a', 'i', false)}; }`],
    loadB: () => ['let hn = n0 + bn; let hk = k0 + bk;', 'var bv = 0.0;', `if (hn < N && hk < K) { let i = oB + hk * sBk + hn * sBn; bv = ${loadExpr(s.b, 'b', 'i', false)}; }`],
    store: (acc) => [
      'let ic = oC + gm * sCm + gn * sCn;',
      `var v = alpha * ${acc};`,
      ...(s.bias ? [`{ let ib = kmeta[${m.bias}] + gn * kmeta[${m.bias + 1}]; v = v + ${loadExpr(s.c, 'bias', 'ib', false)}; }`] : []),
      ...(s.beta ? [`v = v + beta * ${loadExpr(s.c, 'c', 'ic', true)};`] : []),
      storeStmt(s.c, 'c', 'ic', 'v'),
    ],
  });
}
