/**
 * The shared skeleton of Kiln's tiled GEMM kernels on webgpu (gemm-codegen.ts for matmul,
 * conv-gemm.ts for the implicit-GEMM convolution): one workgroup of 256 invocations computes a
 * 64x64 tile of C, each invocation a 4x4 block (rows ty + 16i, columns tx + 16j, so the stores of a
 * row of invocations are consecutive), stepping K by 16 through two f32 tiles in workgroup memory
 * (stored k-major with one word of padding per row). Batches and tiles loop grid-stride (z, y, x),
 * so any size fits the 65535-workgroup grid limit.
 *
 * The large form (shape 'large', matmul only: gemm-codegen.ts's `tile`) computes a 128x128 tile,
 * each invocation an 8x8 block (rows ty*4 + r and 64 + ty*4 + r, columns likewise with tx), from
 * k-major tiles of vec4<f32> (XOR-swizzled in place of padding, to fit WebGPU's default 16 KiB):
 * 4 vec4 workgroup loads feed 64 FMAs where the small form needs 8 scalar loads per 16, so the
 * inner product is no longer bound by workgroup-memory loads (issue #20: ~23 TFLOP/s float32 on
 * the H200). The global loads are double-buffered in registers: the next K step's 8 + 8 elements
 * are loaded after the barrier that publishes the current tiles and stored after the inner
 * product, so their latency overlaps it.
 *
 * The caller supplies what differs between the kernels as WGSL statements: the declarations, the
 * prologues (of the kernel, of a batch, of a tile, of the stores), how one element of the A and B
 * tiles is loaded (an explicit strided matrix for matmul, an im2col gather for conv) and how one
 * element of C is stored. The builder owns the tiling, the thread mapping and the inner product, so
 * a change there reaches every GEMM-shaped kernel. Statements are given unindented; the builder
 * indents them (continuation lines of a multi-line statement included).
 */
import { arrayType, storagePrelude, type StorageKind } from './storage.js';

export const GEMM_BM = 64;
export const GEMM_BN = 64;
export const GEMM_BK = 16;
export const GEMM_THREADS = 256;
/** Invocations per tile row; the tile has GEMM_THREADS / GEMM_TX rows of invocations. */
const TX = 16;
const TY = GEMM_THREADS / TX;
/** Rows and columns of C per invocation. */
export const GEMM_RM = GEMM_BM / TY;
export const GEMM_RN = GEMM_BN / TX;
/** Loads of each tile per invocation per K step. */
export const GEMM_LOADS = (GEMM_BM * GEMM_BK) / GEMM_THREADS;

/** The tile forms: 'small' (64x64, the default) and 'large' (128x128, each invocation an 8x8 block). */
export type GemmTileShape = 'small' | 'large';
/** Rows (and columns) of C per workgroup of the large form. */
export const GEMM_LARGE_BM = 128;
/** Rows (and columns) of the large form's block per invocation. */
const LARGE_R = GEMM_LARGE_BM / TY;

/**
 * The A-tile coordinates (row am, column ak, WGSL expressions) of element index `e` (tid + r *
 * threads) of a tile of `bm` rows: the contiguous dimension walks fastest, so a row of invocations
 * loads consecutive words.
 */
export function aTileCoords(aMajor: 'k' | 'm', e: string, bm: number = GEMM_BM): { am: string; ak: string } {
  return aMajor === 'k' ? { am: `${e} / ${GEMM_BK}u`, ak: `${e} % ${GEMM_BK}u` } : { am: `${e} % ${bm}u`, ak: `${e} / ${bm}u` };
}

/** The B-tile coordinates (column bn, row bk) of element index `e` of a tile of `bn` columns. */
export function bTileCoords(bMajor: 'n' | 'k', e: string, bn: number = GEMM_BN): { bn: string; bk: string } {
  return bMajor === 'n' ? { bn: `${e} % ${bn}u`, bk: `${e} / ${bn}u` } : { bn: `${e} / ${GEMM_BK}u`, bk: `${e} % ${GEMM_BK}u` };
}

/** The GEMM bindings: c (0, written), a (1), b (2), bias (3, optional), kmeta after them, and the store helpers of c. */
export function gemmDecls(a: StorageKind, b: StorageKind, c: StorageKind, bias: boolean): string[] {
  const lines: string[] = [];
  if ([a, b, c].includes('f16')) lines.push('enable f16;');
  lines.push(`@group(0) @binding(0) var<storage, read_write> c: ${arrayType(c, true)};`);
  lines.push(`@group(0) @binding(1) var<storage, read> a: ${arrayType(a, false)};`);
  lines.push(`@group(0) @binding(2) var<storage, read> b: ${arrayType(b, false)};`);
  if (bias) lines.push(`@group(0) @binding(3) var<storage, read> bias: ${arrayType(c, false)};`);
  lines.push(`@group(0) @binding(${bias ? 4 : 3}) var<storage, read> kmeta: array<u32>;`);
  const helpers = storagePrelude([c]);
  if (helpers) lines.push(helpers);
  return lines;
}

export interface GemmTileParts {
  /** Declarations before the workgroup tiles (gemmDecls). */
  readonly decls: readonly string[];
  /** Kernel prologue: defines M, N, K, batch, tilesN, tilesM (u32) and whatever the hooks use. */
  readonly prologue: readonly string[];
  /** Batch prologue, `bz` (the batch index) in scope. */
  readonly batchPrologue: readonly string[];
  /** The K range of a batch (WGSL expressions; default 0 .. K); a split-K kernel gives each batch a slice. */
  readonly kRange?: { readonly begin: string; readonly end: string };
  /** Tile prologue, `m0` and `n0` (the tile's first row and column) in scope. */
  readonly tilePrologue?: readonly string[];
  readonly aMajor: 'k' | 'm';
  readonly bMajor: 'n' | 'k';
  /** Statements at the top of each K step, `k0` in scope (before the tile loads). */
  readonly kStep?: readonly string[];
  /** Sets `var av` to A[m0 + am][k0 + ak] (0 outside A) for load r of the invocation (`am`, `ak`, `k0` in scope). */
  readonly loadA: (r: number) => readonly string[];
  /** Sets `var bv` to B[k0 + bk][n0 + bn] (0 outside B) for load r (`bn`, `bk`, `k0` in scope). */
  readonly loadB: (r: number) => readonly string[];
  /** After the K loop, before the stores (`ty`, `tx`, `m0`, `n0` in scope). */
  readonly storePrologue?: readonly string[];
  /** Stores accumulator `acc` (row i, column j of the invocation's block) at C[gm][gn], in bounds. */
  readonly store: (acc: string, i: number, j: number) => readonly string[];
}

/** Appends statements at an indent (continuation lines included). */
type Put = (indent: number, stmts: readonly string[]) => void;

/** What differs between the tile forms: the workgroup tiles, the K loop, and the row/column (offsets from m0/n0) of block entry (i, j). */
interface TileForm {
  /** Rows (and columns) of the tile. */
  readonly bm: number;
  /** Rows (and columns) of an invocation's block. */
  readonly rm: number;
  readonly tiles: readonly string[];
  readonly kLoop: (put: Put) => void;
  readonly row: (i: number) => string;
  readonly col: (j: number) => string;
  /** The stores' bounds check (`gm`, `gn` in scope). */
  readonly inBounds: string;
}

/** Load r (element index `e` = tid + r * threads) of both tiles into `av` and `bv` through the hooks, then `then`'s statements, in a block. */
function tileLoads(p: GemmTileParts, r: number, bm: number, then: readonly string[], put: Put, indent: number): void {
  const { am, ak } = aTileCoords(p.aMajor, 'e', bm);
  const { bn, bk } = bTileCoords(p.bMajor, 'e', bm);
  put(indent, ['{', `  let e = tid + ${r * GEMM_THREADS}u;`, `  let am = ${am}; let ak = ${ak};`]);
  put(indent + 2, p.loadA(r));
  put(indent, [`  let bn = ${bn}; let bk = ${bk};`]);
  put(indent + 2, p.loadB(r));
  put(indent + 2, then);
  put(indent, ['}']);
}

/** The 64x64 form: 4x4 blocks (rows ty + 16i), scalar f32 tiles with one word of padding per k-row. */
function smallForm(p: GemmTileParts, lines: string[]): TileForm {
  const BM = GEMM_BM;
  const BN = GEMM_BN;
  const BK = GEMM_BK;
  const T = GEMM_THREADS;
  const SA = BM + 1;
  const SB = BN + 1;
  return {
    bm: BM,
    rm: GEMM_RM,
    tiles: [`var<workgroup> As: array<f32, ${SA * BK}>;`, `var<workgroup> Bs: array<f32, ${SB * BK}>;`],
    row: (i) => `ty + ${i * TY}u`,
    col: (j) => `tx + ${j * TX}u`,
    inBounds: 'gm < M && gn < N',
    kLoop: (put) => {
      const acc: string[] = [];
      for (let i = 0; i < GEMM_RM; i++) for (let j = 0; j < GEMM_RN; j++) acc.push(`acc${i}_${j}`);
      lines.push(`        ${acc.map((x) => `var ${x} = 0.0;`).join(' ')}`);
      lines.push(`        for (var k0 = ${p.kRange?.begin ?? '0u'}; k0 < ${p.kRange?.end ?? 'K'}; k0 = k0 + ${BK}u) {`);
      put(10, p.kStep ?? []);
      for (let r = 0; r < GEMM_LOADS; r++) {
        lines.push('          {');
        lines.push(`            let e = tid + ${r * T}u;`);
        const { am, ak } = aTileCoords(p.aMajor, 'e');
        lines.push(`            let am = ${am}; let ak = ${ak};`);
        put(12, p.loadA(r));
        lines.push(`            As[ak * ${SA}u + am] = av;`);
        const { bn, bk } = bTileCoords(p.bMajor, 'e');
        lines.push(`            let bn = ${bn}; let bk = ${bk};`);
        put(12, p.loadB(r));
        lines.push(`            Bs[bk * ${SB}u + bn] = bv;`);
        lines.push('          }');
      }
      lines.push('          workgroupBarrier();');
      lines.push(`          for (var kk = 0u; kk < ${BK}u; kk = kk + 1u) {`);
      for (let i = 0; i < GEMM_RM; i++) lines.push(`            let a${i} = As[kk * ${SA}u + ty + ${i * TY}u];`);
      for (let j = 0; j < GEMM_RN; j++) lines.push(`            let b${j} = Bs[kk * ${SB}u + tx + ${j * TX}u];`);
      for (let i = 0; i < GEMM_RM; i++) lines.push(`            ${Array.from({ length: GEMM_RN }, (_, j) => `acc${i}_${j} = fma(a${i}, b${j}, acc${i}_${j});`).join(' ')}`);
      lines.push('          }');
      lines.push('          workgroupBarrier();');
      lines.push('        }');
    },
  };
}

/**
 * The 128x128 form: 8x8 blocks (rows ty*4 + r and 64 + ty*4 + r, r < 4, so each half is one vec4 of
 * the k-major tile; columns likewise with tx) read from vec4<f32> tiles, and the global loads
 * double-buffered in registers (pa*, pb*). One loop iteration per K step kn: the loads of step kn
 * (the hooks under `let k0 = kn;`), then the inner product of the step before (published by the
 * previous iteration's barrier) while they are in flight, then their store to the tiles. The loads
 * appear once in the source: SwiftShader's compile time grows steeply with the kernel's branches
 * (a separate load of the first step before the loop took it minutes).
 *
 * The tiles have no padding (two of 16 KiB / 2, WebGPU's default workgroup-memory limit, where a
 * vec4 of padding per k-row would need 16,896 bytes); instead vec4 q of k-row k is stored at q ^ k,
 * which spreads the transposed stores of a k-fastest load mapping over 8 banks (2-way conflicts, as
 * one vec4 of padding would) and keeps each row's vec4s in the row for the inner product's reads.
 */
function largeForm(p: GemmTileParts, lines: string[]): TileForm {
  const BM = GEMM_LARGE_BM;
  const BK = GEMM_BK;
  const S4 = BM / 4;
  const R = LARGE_R;
  const loads = (BM * BK) / GEMM_THREADS;
  const half = BM / 2;
  const comp = ['x', 'y', 'z', 'w'];
  /** Offset within the tile of block entry i (rows or columns), `t` the invocation's ty or tx. */
  const off = (t: string, i: number): string => `${t} * 4u + ${Math.floor(i / 4) * half + (i % 4)}u`;
  const begin = p.kRange?.begin ?? '0u';
  const end = p.kRange?.end ?? 'K';
  return {
    bm: BM,
    rm: R,
    tiles: [`var<workgroup> As: array<vec4<f32>, ${S4 * BK}>;`, `var<workgroup> Bs: array<vec4<f32>, ${S4 * BK}>;`],
    row: (i) => off('ty', i),
    col: (j) => off('tx', j),
    // Not short-circuit: SwiftShader took minutes to compile the 64 stores' 128 branches.
    inBounds: '(gm < M) & (gn < N)',
    kLoop: (put) => {
      for (let i = 0; i < R; i++) lines.push(`        ${Array.from({ length: R }, (_, j) => `var acc${i}_${j} = 0.0;`).join(' ')}`);
      lines.push(`        ${Array.from({ length: loads }, (_, r) => `var pa${r} = 0.0;`).join(' ')}`);
      lines.push(`        ${Array.from({ length: loads }, (_, r) => `var pb${r} = 0.0;`).join(' ')}`);
      lines.push(`        for (var kn = ${begin}; ; kn = kn + ${BK}u) {`);
      // K step kn's loads (0 past the end), in flight during the step before's inner product.
      lines.push('          {');
      put(12, [`let k0 = kn;`, ...(p.kStep ?? [])]);
      for (let r = 0; r < loads; r++) tileLoads(p, r, BM, [`pa${r} = av; pb${r} = bv;`], put, 12);
      lines.push('          }');
      lines.push(`          if (kn != ${begin}) {`);
      lines.push(`            for (var kk = 0u; kk < ${BK}u; kk = kk + 1u) {`);
      lines.push(`              let qa = ty ^ kk; let qb = tx ^ kk;`);
      lines.push(`              let a0 = As[kk * ${S4}u + qa]; let a1 = As[kk * ${S4}u + ${half / 4}u + qa];`);
      lines.push(`              let b0 = Bs[kk * ${S4}u + qb]; let b1 = Bs[kk * ${S4}u + ${half / 4}u + qb];`);
      for (let i = 0; i < R; i++) {
        const a = `a${Math.floor(i / 4)}.${comp[i % 4]!}`;
        lines.push(`              ${Array.from({ length: R }, (_, j) => `acc${i}_${j} = fma(${a}, b${Math.floor(j / 4)}.${comp[j % 4]!}, acc${i}_${j});`).join(' ')}`);
      }
      lines.push('            }');
      lines.push('            workgroupBarrier();');
      lines.push('          }');
      lines.push(`          if (kn >= ${end}) { break; }`);
      for (let r = 0; r < loads; r++) {
        const { am, ak } = aTileCoords(p.aMajor, 'e', BM);
        const { bn, bk } = bTileCoords(p.bMajor, 'e', BM);
        lines.push(`          { let e = tid + ${r * GEMM_THREADS}u;`);
        lines.push(`            let am = ${am}; let ak = ${ak}; As[ak * ${S4}u + ((am / 4u) ^ ak)][am % 4u] = pa${r};`);
        lines.push(`            let bn = ${bn}; let bk = ${bk}; Bs[bk * ${S4}u + ((bn / 4u) ^ bk)][bn % 4u] = pb${r}; }`);
      }
      lines.push('          workgroupBarrier();');
      lines.push('        }');
    },
  };
}

/** The tiled GEMM kernel of `shape` (default 'small', 64x64) with the caller's parts. */
export function buildGemmTile(p: GemmTileParts, shape: GemmTileShape = 'small'): string {
  const T = GEMM_THREADS;
  const lines: string[] = [...p.decls];
  const put: Put = (indent, stmts) => {
    const pad = ' '.repeat(indent);
    for (const s of stmts) lines.push(pad + s.replace(/\n/g, `\n${pad}`));
  };
  const form = shape === 'large' ? largeForm(p, lines) : smallForm(p, lines);
  lines.push(...form.tiles);
  lines.push('');
  lines.push(`@compute @workgroup_size(${T})`);
  lines.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  put(2, p.prologue);
  lines.push(`  let tx = tid % ${TX}u; let ty = tid / ${TX}u;`);
  lines.push('  for (var bz = wid.z; bz < batch; bz = bz + ng.z) {');
  put(4, p.batchPrologue);
  lines.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
  lines.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  lines.push(`        let m0 = tm * ${form.bm}u; let n0 = tn * ${form.bm}u;`);
  put(8, p.tilePrologue ?? []);
  form.kLoop(put);
  put(8, p.storePrologue ?? []);
  for (let i = 0; i < form.rm; i++) {
    for (let j = 0; j < form.rm; j++) {
      lines.push(`        { let gm = m0 + ${form.row(i)}; let gn = n0 + ${form.col(j)};`);
      lines.push(`          if (${form.inBounds}) {`);
      put(12, p.store(`acc${i}_${j}`, i, j));
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

/** The row of C (a WGSL expression) that row i of an invocation's block stores in the small form, `m0` and `ty` in scope. */
export const gemmStoreRow = (i: number): string => `m0 + ty + ${i * TY}u`;
