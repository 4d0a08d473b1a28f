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
 *
 * Large tiles (`tile: 'large'`): 128x128 per workgroup, each invocation an 8x8 block read from
 * vec4 workgroup tiles (4 vec4 loads per 64 FMAs instead of 8 scalar loads per 16, which bound the
 * small form: ~23 TFLOP/s float32 on the H200), the global loads double-buffered in registers.
 * linalg.ts picks it for the plain tiled dispatch of products with many tiles (KILN_WEBGPU_GEMM_TILE).
 *
 * Split K (`partial`): a product with too few output tiles to fill the GPU and a long K (a 128-row
 * prefill's projections: 8 to 32 tiles walking K = 1024..3072 one step at a time) is cut into K
 * slices of GEMM_META.kc elements, one workgroup z per slice (the batch loop's index; linalg.ts
 * uses it for single-batch products only). Each slice stores its raw f32 sums to a dense scratch
 * [slice][M][N], and generateGemmCombine sums the slices in slice order, then applies alpha, bias
 * and beta and rounds once to the output, as the unsplit epilogue does. linalg.ts plans the split
 * (planSplitK) for this kernel and for the staged subgroup matrix one.
 */
import { GEMM_BM, GEMM_BN, GEMM_BK, GEMM_THREADS, buildGemmTile, gemmDecls } from './gemm-tile.js';
import { PRELUDE_MARK, withPrelude } from '../math/wgsl-prelude.js';
import { arrayType, loadExpr, storagePrelude, storeStmt, type StorageKind } from './storage.js';

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
  /**
   * ReLU on the finished value (after alpha, bias and beta), before the rounding store: a fused
   * conv2dBatchNorm's activation. select(), not max(): max(NaN, 0) may be either operand in WGSL,
   * and a NaN must stay NaN as relu's does.
   */
  readonly relu?: boolean;
  /**
   * GELU on the finished value (after alpha, bias and beta), before the rounding store, in torch's
   * two forms ('none': the erf form; 'tanh'), with the WGSL math library's kiln_gelu /
   * kiln_gelu_tanh (kernels/math/wgsl-libm), the functions the gelu kernels run: llm.linearGelu's
   * epilogue (kernels/webgpu/llm-linear-gelu.ts).
   */
  readonly gelu?: GemmGelu;
  /**
   * A is a channels_last conv input read through im2col addresses (the staged float16 kernel only;
   * conv.ts): row m of A is output pixel m, column k is tap (kh, kw) channel c with k in (kh, kw, c)
   * order, zero where the tap falls in the padding. The geometry is CONV_A_META's words after the
   * GEMM's; A's own metadata words give only its offset.
   */
  readonly aConv?: boolean;
  /**
   * With aConv: each invocation keeps its words' tap (kh, kw) and channel c from one K step to the
   * next, stepping them by carries, instead of splitting k into (kh, kw, c) with four integer
   * divisions per word per K step (KILN_WEBGPU_CONV_CARRY, on: conv-stack float16 0.42 -> 0.39 ms on an H100).
   */
  readonly aConvCarry?: boolean;
  /**
   * Split K: workgroup z is K slice z (kmeta[kc] elements); binding 0 is the f32 scratch
   * [slice][M][N] of raw sums (no alpha, bias or beta: generateGemmCombine applies them). c is 'f32'.
   */
  readonly partial?: boolean;
  /** The 128x128 form of gemm-tile.ts (8x8 blocks per invocation); absent: 64x64. */
  readonly tile?: 'large';
}

/**
 * Metadata word positions: [M, N, K, batch, tilesN, tilesM, bd0, bd1, bd2,
 * C: off, sM, sN, sb0..2, A: off, sM, sK, sb0..2, B: off, sK, sN, sb0..2, bias: off, sN, alpha bits, beta bits,
 * kc (split K: the K of one slice; batch is then the number of slices)].
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
  kc: 31,
  words: 32,
} as const;

/**
 * The conv geometry of an aConv GEMM, after GEMM_META's words: [OH, OW, C, KW, sh, sw, pt, pl, dh,
 * dw, H, W, input strides n, h, w] (channel stride 1). CONV_A_META.at is where they start.
 */
export const CONV_A_META = { at: GEMM_META.words, words: 15 } as const;

export function gemmKey(s: GemmSpec): string {
  return `${s.a},${s.b},${s.c},${s.aMajor}${s.bMajor},${s.bias ? 'bias' : ''},${s.beta ? 'beta' : ''}${s.partial === true ? ',partial' : ''}${s.tile === 'large' ? ',large' : ''}${actKey(s)}`;
}

/** GemmSpec.gelu's forms (torch's `approximate`). */
export type GemmGelu = 'none' | 'tanh';

/** The activation part of a GEMM spec: what actKey and actStmts read. */
export type GemmAct = Pick<GemmSpec, 'relu' | 'gelu'>;

/** The key suffix of the epilogue's activation (empty without one, so existing keys stay as they were). */
export const actKey = (s: GemmAct): string => `${s.relu === true ? ',relu' : ''}${s.gelu === 'none' ? ',gelu' : s.gelu === 'tanh' ? ',gelut' : ''}`;

/**
 * The epilogue's activation statements on `v` (none without one): see GemmSpec.relu and .gelu. A
 * source with GELU carries PRELUDE_MARK and goes through withActPrelude (the math library's gelu).
 */
export function actStmts(s: GemmAct): string[] {
  const out: string[] = [];
  if (s.relu === true) out.push('v = select(v, 0.0, v < 0.0);');
  if (s.gelu === 'none') out.push('v = kiln_gelu(v);');
  if (s.gelu === 'tanh') out.push('v = kiln_gelu_tanh(v);');
  return out;
}

/** `source` with the math library's functions its activation calls (GELU), else unchanged. */
export const withActPrelude = (s: GemmAct, source: string): string => (s.gelu === undefined ? source : withPrelude(`${source}\n${PRELUDE_MARK}`));

/** Checks a split-K spec: raw f32 sums, no epilogue terms (the combine kernel applies them). */
export function checkPartialSpec(s: GemmSpec): void {
  if (s.partial === true && (s.c !== 'f32' || s.bias || s.beta || s.relu === true || s.gelu !== undefined)) throw new Error(`a split-K GEMM writes raw f32 sums (c 'f32', no bias, beta or activation), got ${gemmKey(s)}`);
}

export function generateGemm(s: GemmSpec): string {
  const m = GEMM_META;
  checkPartialSpec(s);
  const partial = s.partial === true;
  // A slice's loads stop at its end (the last K step of a slice would reach into the next one).
  const kLim = partial ? 'kEnd' : 'K';
  return withActPrelude(s, buildGemmTile({
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
      // Split K: bz is the slice (batch sizes are 1 and batch strides 0, so c0 = bz moves no operand).
      ...(partial ? [`let kBeg = bz * kmeta[${m.kc}]; let kEnd = min(K, kBeg + kmeta[${m.kc}]);`] : []),
    ],
    ...(partial ? { kRange: { begin: 'kBeg', end: 'kEnd' } } : {}),
    aMajor: s.aMajor,
    bMajor: s.bMajor,
    loadA: () => ['let gm = m0 + am; let gk = k0 + ak;', 'var av = 0.0;', `if (gm < M && gk < ${kLim}) { let i = oA + gm * sAm + gk * sAk; av = ${loadExpr(s.a, 'a', 'i', false)}; }`],
    loadB: () => ['let hn = n0 + bn; let hk = k0 + bk;', 'var bv = 0.0;', `if (hn < N && hk < ${kLim}) { let i = oB + hk * sBk + hn * sBn; bv = ${loadExpr(s.b, 'b', 'i', false)}; }`],
    store: (acc) => partial ? [`c[(bz * M + gm) * N + gn] = ${acc};`] : [
      'let ic = oC + gm * sCm + gn * sCn;',
      `var v = alpha * ${acc};`,
      ...(s.bias ? [`{ let ib = kmeta[${m.bias}] + gn * kmeta[${m.bias + 1}]; v = v + ${loadExpr(s.c, 'bias', 'ib', false)}; }`] : []),
      ...(s.beta ? [`v = v + beta * ${loadExpr(s.c, 'c', 'ic', true)};`] : []),
      ...actStmts(s),
      storeStmt(s.c, 'c', 'ic', 'v'),
    ],
  }, s.tile === 'large' ? 'large' : 'small'));
}

/** The combine's key (its pipeline depends on the output kind and the epilogue terms only). */
export const gemmCombineKey = (c: StorageKind, bias: boolean, beta: boolean, act: GemmAct = {}): string => `combine,${c},${bias ? 'bias' : ''},${beta ? 'beta' : ''}${actKey(act)}`;

/** Invocations per workgroup of the combine kernel. */
export const GEMM_COMBINE_WG = 256;

/**
 * The split-K combine: one invocation per output element (grid-stride) sums its kmeta[batch]
 * slices' raw f32 sums in slice order from the scratch [slice][M][N] (binding 1), then applies
 * alpha, bias, beta (and the activation) as generateGemm's epilogue does and rounds once to C's kind (binding
 * 0 at its offset and strides). Bindings: c, scratch, bias (optional), kmeta (GEMM_META words).
 */
export function generateGemmCombine(c: StorageKind, bias: boolean, beta: boolean, act: GemmAct = {}): string {
  const m = GEMM_META;
  const lines: string[] = [];
  if (c === 'f16') lines.push('enable f16;');
  lines.push(`@group(0) @binding(0) var<storage, read_write> c: ${arrayType(c, true)};`);
  lines.push('@group(0) @binding(1) var<storage, read> parts: array<f32>;');
  if (bias) lines.push(`@group(0) @binding(2) var<storage, read> bias: ${arrayType(c, false)};`);
  lines.push(`@group(0) @binding(${bias ? 3 : 2}) var<storage, read> kmeta: array<u32>;`);
  const helpers = storagePrelude([c]);
  if (helpers) lines.push(helpers);
  lines.push(
    `@compute @workgroup_size(${GEMM_COMBINE_WG})`,
    'fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) ng: vec3u) {',
    `  let M = kmeta[${m.M}]; let N = kmeta[${m.N}]; let S = kmeta[${m.batch}]; let MN = M * N;`,
    `  let sCm = kmeta[${m.c + 1}]; let sCn = kmeta[${m.c + 2}];`,
    `  let alpha = bitcast<f32>(kmeta[${m.alpha}]);`,
    ...(beta ? [`  let beta = bitcast<f32>(kmeta[${m.beta}]);`] : []),
    `  for (var e = gid.x + gid.y * ng.x * ${GEMM_COMBINE_WG}u; e < MN; e = e + ng.x * ng.y * ${GEMM_COMBINE_WG}u) {`,
    '    let gm = e / N; let gn = e % N;',
    '    var s = 0.0;',
    '    for (var sp = 0u; sp < S; sp = sp + 1u) { s = s + parts[sp * MN + e]; }',
    `    let ic = kmeta[${m.c}] + gm * sCm + gn * sCn;`,
    '    var v = alpha * s;',
    ...(bias ? [`    { let ib = kmeta[${m.bias}] + gn * kmeta[${m.bias + 1}]; v = v + ${loadExpr(c, 'bias', 'ib', false)}; }`] : []),
    ...(beta ? [`    v = v + beta * ${loadExpr(c, 'c', 'ic', true)};`] : []),
    ...actStmts(act).map((x) => `    ${x}`),
    `    ${storeStmt(c, 'c', 'ic', 'v').replace(/\n/g, '\n    ')}`,
    '  }',
    '}',
  );
  return withActPrelude(act, lines.join('\n'));
}
