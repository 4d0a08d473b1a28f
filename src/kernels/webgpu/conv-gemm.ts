/**
 * webgpu conv2d forward as an implicit GEMM on the shared tiled skeleton (gemm-tile.ts): per group,
 * C[M, N] = A[M, K] @ B[K, N] with M = batch * OH * OW (output pixels), N = O / groups (output
 * channels of the group), K = Cg * KH * KW. A is never built: each A-tile element is gathered from
 * the input at its im2col address (zero for padding), each B-tile element read from the weight, and
 * each C element stored to its (n, o, oh, ow) place with the bias added; groups are the batch
 * dimension of the skeleton (one per workgroup z). Any stride, padding and dilation; input, weight
 * and output of any strides, read and written in place. float32, float16 and bfloat16, accumulated
 * in f32 and rounded once.
 *
 * The K order follows the input's layout: (kh, kw, c) when the input's channel stride is 1
 * (channels_last: consecutive k are consecutive words, and the A tile walks k fastest), else
 * (c, kh, kw) with the A tile walking output pixels fastest (consecutive ow are consecutive words
 * of a contiguous input at stride 1). The weight is read k-fastest either way (contiguous OIHW
 * under (c, kh, kw), channels_last OHWI under (kh, kw, c)). The decomposition of an output pixel
 * into (n, oh, ow) and its input window origin is hoisted out of the K loop (once per tile and
 * load); only k's decomposition is done per step.
 *
 * conv.ts decides between this kernel and its direct one (convGemmApplies).
 */
import { aTileCoords, buildGemmTile, gemmDecls, gemmStoreRow, GEMM_BM, GEMM_BN, GEMM_LOADS, GEMM_RM, GEMM_THREADS } from './gemm-tile.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';

export interface ConvGemmSpec {
  /** Storage kind of input, weight, bias and output alike. */
  readonly kind: StorageKind;
  /** K order: 'hwc' (channels_last input) or 'chw'. */
  readonly order: 'hwc' | 'chw';
  readonly bias: boolean;
}

/**
 * Metadata word positions: [M, N, K, groups, tilesN, tilesM, OH, OW, Cg, KH, KW, H, W, sh, sw, pt,
 * pl, dh, dw, xOff, wOff, oOff, bOff, bStride, xs0..3, ws0..3, os0..3].
 */
export const CONV_GEMM_META = { x: 19, w: 20, o: 21, bias: 22, xs: 24, ws: 28, os: 32, words: 36 } as const;

export const convGemmKey = (s: ConvGemmSpec): string => `${s.kind}.${s.order}.${s.bias ? 'b' : ''}`;

/** Statements splitting k (a u32 expression) into c, kh, kw for the K order. */
function splitK(order: 'hwc' | 'chw', k: string): string {
  return order === 'hwc'
    ? `let c = ${k} % Cg; let kt = ${k} / Cg; let kw = kt % KW; let kh = kt / KW;`
    : `let kw = ${k} % KW; let kt = ${k} / KW; let kh = kt % KH; let c = kt / KH;`;
}

export function generateConvGemm(s: ConvGemmSpec): string {
  const k = s.kind;
  const aMajor = s.order === 'hwc' ? 'k' : 'm';
  const tilePrologue: string[] = [];
  for (let r = 0; r < GEMM_LOADS; r++) {
    // The output pixel of load r's A row: constant over the K loop.
    const { am } = aTileCoords(aMajor, `(tid + ${r * GEMM_THREADS}u)`);
    tilePrologue.push(
      `let gm${r} = m0 + ${am}; let okm${r} = gm${r} < M;`,
      `let ow${r} = gm${r} % OW; let oq${r} = gm${r} / OW; let oh${r} = oq${r} % OH; let on${r} = oq${r} / OH;`,
      `let ih${r} = i32(oh${r} * sh) - pt; let iw${r} = i32(ow${r} * sw) - pl; let xb${r} = oX + on${r} * sxn;`,
    );
  }
  const storePrologue: string[] = [];
  for (let i = 0; i < GEMM_RM; i++) {
    storePrologue.push(
      `let em${i} = ${gemmStoreRow(i)}; let eq${i} = em${i} / OW;`,
      `let orow${i} = oO + (eq${i} / OH) * son + (eq${i} % OH) * soh + (em${i} % OW) * sow;`,
    );
  }
  return buildGemmTile({
    decls: gemmDecls(k, k, k, s.bias),
    prologue: [
      'let M = kmeta[0]; let N = kmeta[1]; let K = kmeta[2];',
      'let batch = kmeta[3]; let tilesN = kmeta[4]; let tilesM = kmeta[5];',
      'let OH = kmeta[6]; let OW = kmeta[7]; let Cg = kmeta[8]; let KH = kmeta[9]; let KW = kmeta[10];',
      'let H = i32(kmeta[11]); let W = i32(kmeta[12]);',
      'let sh = kmeta[13]; let sw = kmeta[14]; let pt = i32(kmeta[15]); let pl = i32(kmeta[16]); let dh = kmeta[17]; let dw = kmeta[18];',
      'let sxn = kmeta[24]; let sxc = kmeta[25]; let sxh = kmeta[26]; let sxw = kmeta[27];',
      'let swo = kmeta[28]; let swc = kmeta[29]; let swh = kmeta[30]; let sww = kmeta[31];',
      'let son = kmeta[32]; let soc = kmeta[33]; let soh = kmeta[34]; let sow = kmeta[35];',
    ],
    // bz is the group: its input channels, output channels (weight rows) and bias entries.
    batchPrologue: [
      'let oX = kmeta[19] + bz * Cg * sxc; let oW = kmeta[20] + bz * N * swo;',
      'let oO = kmeta[21] + bz * N * soc; let oB = kmeta[22] + bz * N * kmeta[23];',
    ],
    tilePrologue,
    aMajor,
    bMajor: 'k',
    loadA: (r) => [
      'let gk = k0 + ak;',
      'var av = 0.0;',
      `if (okm${r} && gk < K) {`,
      `  ${splitK(s.order, 'gk')}`,
      `  let ih = ih${r} + i32(kh * dh); let iw = iw${r} + i32(kw * dw);`,
      `  if (ih >= 0 && ih < H && iw >= 0 && iw < W) { av = ${loadExpr(k, 'a', `xb${r} + c * sxc + u32(ih) * sxh + u32(iw) * sxw`, false)}; }`,
      '}',
    ],
    loadB: () => [
      'let hn = n0 + bn; let hk = k0 + bk;',
      'var bv = 0.0;',
      `if (hn < N && hk < K) { ${splitK(s.order, 'hk')} bv = ${loadExpr(k, 'b', 'oW + hn * swo + c * swc + kh * swh + kw * sww', false)}; }`,
    ],
    storePrologue,
    store: (acc, i) => [
      `let ic = orow${i} + gn * soc;`,
      `var v = ${acc};`,
      ...(s.bias ? [`v = v + ${loadExpr(k, 'bias', 'oB + gn * kmeta[23]', false)};`] : []),
      storeStmt(k, 'c', 'ic', 'v'),
    ],
  });
}

/** Tiles of the GEMM for M output pixels and N output channels per group. */
export const convGemmTiles = (m: number, n: number): { tilesM: number; tilesN: number } => ({ tilesM: Math.ceil(m / GEMM_BM), tilesN: Math.ceil(n / GEMM_BN) });
