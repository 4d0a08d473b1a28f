/**
 * The shared skeleton of Kiln's tiled GEMM kernels on webgpu (gemm-codegen.ts for matmul,
 * conv-gemm.ts for the implicit-GEMM convolution): one workgroup of 256 invocations computes a
 * 64x64 tile of C, each invocation a 4x4 block (rows ty + 16i, columns tx + 16j, so the stores of a
 * row of invocations are consecutive), stepping K by 16 through two f32 tiles in workgroup memory
 * (stored k-major with one word of padding per row). Batches and tiles loop grid-stride (z, y, x),
 * so any size fits the 65535-workgroup grid limit.
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

/**
 * The A-tile coordinates (row am, column ak, WGSL expressions) of element index `e` (tid + r *
 * threads): the contiguous dimension walks fastest, so a row of invocations loads consecutive words.
 */
export function aTileCoords(aMajor: 'k' | 'm', e: string): { am: string; ak: string } {
  return aMajor === 'k' ? { am: `${e} / ${GEMM_BK}u`, ak: `${e} % ${GEMM_BK}u` } : { am: `${e} % ${GEMM_BM}u`, ak: `${e} / ${GEMM_BM}u` };
}

/** The B-tile coordinates (column bn, row bk) of element index `e`. */
export function bTileCoords(bMajor: 'n' | 'k', e: string): { bn: string; bk: string } {
  return bMajor === 'n' ? { bn: `${e} % ${GEMM_BN}u`, bk: `${e} / ${GEMM_BN}u` } : { bn: `${e} / ${GEMM_BK}u`, bk: `${e} % ${GEMM_BK}u` };
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

export function buildGemmTile(p: GemmTileParts): string {
  const BM = GEMM_BM;
  const BN = GEMM_BN;
  const BK = GEMM_BK;
  const T = GEMM_THREADS;
  const SA = BM + 1;
  const SB = BN + 1;
  const lines: string[] = [...p.decls];
  const put = (indent: number, stmts: readonly string[]): void => {
    const pad = ' '.repeat(indent);
    for (const s of stmts) lines.push(pad + s.replace(/\n/g, `\n${pad}`));
  };
  lines.push(`var<workgroup> As: array<f32, ${SA * BK}>;`);
  lines.push(`var<workgroup> Bs: array<f32, ${SB * BK}>;`);
  lines.push('');
  lines.push(`@compute @workgroup_size(${T})`);
  lines.push('fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) ng: vec3u) {');
  put(2, p.prologue);
  lines.push(`  let tx = tid % ${TX}u; let ty = tid / ${TX}u;`);
  lines.push('  for (var bz = wid.z; bz < batch; bz = bz + ng.z) {');
  put(4, p.batchPrologue);
  lines.push('    for (var tm = wid.y; tm < tilesM; tm = tm + ng.y) {');
  lines.push('      for (var tn = wid.x; tn < tilesN; tn = tn + ng.x) {');
  lines.push(`        let m0 = tm * ${BM}u; let n0 = tn * ${BN}u;`);
  put(8, p.tilePrologue ?? []);
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
  put(8, p.storePrologue ?? []);
  for (let i = 0; i < GEMM_RM; i++) {
    for (let j = 0; j < GEMM_RN; j++) {
      lines.push(`        { let gm = m0 + ty + ${i * TY}u; let gn = n0 + tx + ${j * TX}u;`);
      lines.push('          if (gm < M && gn < N) {');
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

/** The row of C (a WGSL expression) that row i of an invocation's block stores, `m0` and `ty` in scope. */
export const gemmStoreRow = (i: number): string => `m0 + ty + ${i * TY}u`;
