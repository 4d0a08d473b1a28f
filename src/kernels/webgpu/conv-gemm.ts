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
 * Split K: where the tiles of C are too few to fill a GPU and K is long (the weight gradient of
 * conv-grad.ts is such a convolution: M = Cin * KH * KW and N = O are small, K = batch * OH * OW is
 * large), each group's K is cut into `splits` slices of Kc (a multiple of the K step), one
 * workgroup z per (group, slice); the slices store f32 partial tiles to a scratch buffer and a
 * second kernel (combineSource) sums them in slice order, adds the bias and rounds once to the
 * output. planSplits says when.
 *
 * conv.ts decides between this kernel and its direct one.
 */
import { aTileCoords, buildGemmTile, gemmDecls, gemmStoreRow, GEMM_BK, GEMM_BM, GEMM_BN, GEMM_LOADS, GEMM_RM, GEMM_THREADS } from './gemm-tile.js';
import { loadExpr, storeStmt, type StorageKind } from './storage.js';
import { header, WG } from './template.js';

export interface ConvGemmSpec {
  /** Storage kind of input, weight, bias and output alike. */
  readonly kind: StorageKind;
  /** K order: 'hwc' (channels_last input) or 'chw'. */
  readonly order: 'hwc' | 'chw';
  /** How the B tile walks the weight: 'k' (k fastest, the usual layouts) or 'n' (output channels fastest: a weight whose O stride is 1, as the weight gradient's). */
  readonly bMajor: 'n' | 'k';
  readonly bias: boolean;
  /** Store f32 partial sums of a K slice to the scratch (binding 0) instead of the output. */
  readonly partial: boolean;
}

/**
 * Metadata word positions: [M, N, K, groups * splits, tilesN, tilesM, OH, OW, Cg, KH, KW, H, W, sh,
 * sw, pt, pl, dh, dw, xOff, wOff, oOff, bOff, bStride, xs0..3, ws0..3, os0..3, splits, Kc].
 */
export const CONV_GEMM_META = { x: 19, w: 20, o: 21, bias: 22, xs: 24, ws: 28, os: 32, splits: 36, kc: 37, words: 38 } as const;

export const convGemmKey = (s: ConvGemmSpec): string => `${s.kind}.${s.order}.${s.bMajor}.${s.bias ? 'b' : ''}${s.partial ? '.partial' : ''}`;

/** Workgroups below which a long K is split. */
const SPLIT_TARGET = 256;
/** The shortest K slice worth a workgroup (32 K steps). */
const SPLIT_MIN_K = 512;
/** The most f32 partial sums a split may hold (64 MiB of scratch). */
const SPLIT_MAX_PARTIALS = 1 << 24;

/** K slices per group (1: no split) and the K of each slice (a multiple of the K step). */
export function planSplits(m: number, n: number, k: number, groups: number): { splits: number; kc: number } {
  const { tilesM, tilesN } = convGemmTiles(m, n);
  const wgs = tilesM * tilesN * groups;
  let splits = Math.min(Math.ceil(SPLIT_TARGET / wgs), Math.floor(k / SPLIT_MIN_K), Math.floor(SPLIT_MAX_PARTIALS / (m * n * groups)));
  if (splits <= 1) return { splits: 1, kc: Math.ceil(k / GEMM_BK) * GEMM_BK };
  const kc = Math.ceil(k / splits / GEMM_BK) * GEMM_BK;
  splits = Math.ceil(k / kc);
  return { splits, kc };
}

/** Statements splitting k (a u32 expression) into `${p}c`, `${p}kh`, `${p}kw` for the K order. */
function splitK(order: 'hwc' | 'chw', k: string, p = ''): string {
  return order === 'hwc'
    ? `let ${p}c = ${k} % Cg; let ${p}kt = ${k} / Cg; let ${p}kw = ${p}kt % KW; let ${p}kh = ${p}kt / KW;`
    : `let ${p}kw = ${k} % KW; let ${p}kt = ${k} / KW; let ${p}kh = ${p}kt % KH; let ${p}c = ${p}kt / KH;`;
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
    decls: gemmDecls(k, k, s.partial ? 'f32' : k, s.bias && !s.partial),
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
    // bz is (group, K slice): the group's input channels, output channels (weight rows) and bias
    // entries, and the slice's K range.
    batchPrologue: [
      'let grp = bz / kmeta[36]; let kBeg = (bz % kmeta[36]) * kmeta[37]; let kEnd = min(K, kBeg + kmeta[37]);',
      'let oX = kmeta[19] + grp * Cg * sxc; let oW = kmeta[20] + grp * N * swo;',
      'let oO = kmeta[21] + grp * N * soc; let oB = kmeta[22] + grp * N * kmeta[23];',
    ],
    kRange: { begin: 'kBeg', end: 'kEnd' },
    tilePrologue,
    aMajor,
    bMajor: s.bMajor,
    // The k of tid % BK, split once per K step: every B load's k when the B tile walks k fastest
    // (bMajor 'k': bk = e % BK), and every A load's under (kh, kw, c) (aMajor 'k': ak = e % BK).
    kStep: s.order === 'hwc' || s.bMajor === 'k' ? [`let qk = k0 + tid % ${GEMM_BK}u; ${splitK(s.order, 'qk', 'q')}`] : [],
    loadA: (r) => [
      'let gk = k0 + ak;',
      'var av = 0.0;',
      `if (okm${r} && gk < kEnd) {`,
      `  ${s.order === 'hwc' ? 'let c = qc; let kh = qkh; let kw = qkw;' : splitK(s.order, 'gk')}`,
      `  let ih = ih${r} + i32(kh * dh); let iw = iw${r} + i32(kw * dw);`,
      `  if (ih >= 0 && ih < H && iw >= 0 && iw < W) { av = ${loadExpr(k, 'a', `xb${r} + c * sxc + u32(ih) * sxh + u32(iw) * sxw`, false)}; }`,
      '}',
    ],
    loadB: () =>
      s.bMajor === 'k'
        ? ['let hn = n0 + bn;', 'var bv = 0.0;', `if (hn < N && qk < kEnd) { bv = ${loadExpr(k, 'b', 'oW + hn * swo + qc * swc + qkh * swh + qkw * sww', false)}; }`]
        : [
            'let hn = n0 + bn; let hk = k0 + bk;',
            'var bv = 0.0;',
            `if (hn < N && hk < kEnd) { ${splitK(s.order, 'hk')} bv = ${loadExpr(k, 'b', 'oW + hn * swo + c * swc + kh * swh + kw * sww', false)}; }`,
          ],
    storePrologue: s.partial ? [] : storePrologue,
    // A partial tile goes to scratch[bz][gm][gn] (dense f32).
    store: (acc, i) => s.partial ? [`c[(bz * M + gm) * N + gn] = ${acc};`] : [
      `let ic = orow${i} + gn * soc;`,
      `var v = ${acc};`,
      ...(s.bias && !s.partial ? [`v = v + ${loadExpr(k, 'bias', 'oB + gn * kmeta[23]', false)};`] : []),
      storeStmt(k, 'c', 'ic', 'v'),
    ],
  });
}

/** Tiles of the GEMM for M output pixels and N output channels per group. */
export const convGemmTiles = (m: number, n: number): { tilesM: number; tilesN: number } => ({ tilesM: Math.ceil(m / GEMM_BM), tilesN: Math.ceil(n / GEMM_BN) });

/**
 * The split-K combine: one invocation per output element (group, pixel, channel) sums its slices'
 * partials in slice order, adds the bias and stores the output at its strides. Bindings: output,
 * scratch (f32), bias; the conv GEMM's metadata.
 */
export function combineSource(k: StorageKind, bias: boolean): string {
  const lines = header([{ kind: k, written: true }, { kind: 'f32', written: false }, ...(bias ? [{ kind: k, written: false }] : [])]);
  lines.push(
    `@compute @workgroup_size(${WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    '  let M = kmeta[0]; let N = kmeta[1]; let OH = kmeta[6]; let OW = kmeta[7]; let S = kmeta[36];',
    '  let total = (kmeta[3] / S) * M * N;',
    `  for (var e = gid.x; e < total; e = e + ng.x * ${WG}u) {`,
    '    let gn = e % N; let gm = (e / N) % M; let grp = e / (N * M);',
    '    var v = 0.0;',
    '    for (var sp = 0u; sp < S; sp = sp + 1u) { v = v + b1[((grp * S + sp) * M + gm) * N + gn]; }',
    '    let o = grp * N + gn;',
    ...(bias ? [`    v = v + ${loadExpr(k, 'b2', 'kmeta[22] + o * kmeta[23]', false)};`] : []),
    '    let q = gm / OW;',
    `    ${storeStmt(k, 'b0', 'kmeta[21] + (q / OH) * kmeta[32] + o * kmeta[33] + (q % OH) * kmeta[34] + (gm % OW) * kmeta[35]', 'v').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return lines.join('\n');
}
