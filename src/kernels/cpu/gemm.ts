/**
 * The CPU GEMM engine shared by matmul, linear, addmm, bmm and convolution (im2col / implicit GEMM):
 *
 *   C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n]
 *
 * Each operand is addressed as data[off + row * rowStride + col * colStride], so transposed and
 * strided operands need no copy. beta = 0 overwrites C (NaNs in C are not propagated).
 *
 * Owned by the linalg group, which tunes it; the signature is the contract other kernels use.
 *
 * Implementation (Goto/BLIS style, single thread):
 *  - the K dimension is cut into KC-deep slabs and N into NC-wide panels; each B slab-panel is
 *    packed into NR-wide column slivers (k-major, zero padded), each MC x KC block of A into
 *    MR-tall row slivers, both as Float64Array so loads need no conversion and integer operands
 *    (int32, int64 as float64) stay exact;
 *  - a register-blocked MR x NR micro-kernel (accumulators in locals) runs over a pair of
 *    slivers and writes its tile straight into C through C's strides; partial tiles at the edges
 *    go through the same kernel (packing pads with zeros) and a guarded write-back;
 *  - where WebAssembly SIMD is available, the macro-kernel (all tiles of one block) runs in a
 *    small f64x2 WebAssembly module (linalg-wasm.ts) over panels packed straight into its memory,
 *    and the tiles are scattered into C with alpha/beta; the JS micro-kernel is the fallback;
 *  - tiny products skip packing and use a direct loop.
 *  - float32 products on the Wasm cpu path run in the f32x4 engine of wasm-sgemm-run.ts instead
 *    (float32 accumulation, as on the native path; threads through worker_threads).
 * Accumulation is otherwise in float64 (JS numbers). For k > KC the partial sums are stored in C's own
 * element type between slabs.
 */
import { getOption, setOption } from '../../runtime/config.js';
import { createWasmGemm, type WasmGemm } from './linalg-wasm.js';
import { cpuPath, forcedCpuPath } from './native/path.js';
import type { NumArray } from './numeric.js';
import { wasmSgemm, wasmSgemmAvailable } from './wasm-sgemm-run.js';

export interface GemmOperand {
  data: NumArray;
  offset: number;
  rowStride: number;
  colStride: number;
}

const MR = 4;
const NR = 4;
const KC = 128;
const MC = 128;
const NC = 256;

let packA = new Float64Array(MC * KC);
let packB = new Float64Array(KC * NC);

let wasm: WasmGemm | undefined | null = null;

function wasmKernel(): WasmGemm | undefined {
  if (wasm === null) wasm = createWasmGemm(MC, KC, NC);
  // KILN_CPU_PATH=js (native/path.ts) turns the Wasm macro-kernel off as well.
  return getOption('cpu.gemmBackend') === 'wasm' && forcedCpuPath() !== 'js' ? wasm : undefined;
}

export type GemmBackend = 'wasm' | 'js';

/** The macro-kernel in use: 'wasm' (f64x2 SIMD) where available, else 'js'. */
export function gemmBackend(): GemmBackend {
  return wasmKernel() ? 'wasm' : 'js';
}

/** Selects the macro-kernel (tests run both); 'wasm' falls back to 'js' where unsupported. Option 'cpu.gemmBackend'. */
export function setGemmBackend(backend: GemmBackend): void {
  setOption('cpu.gemmBackend', backend === 'wasm' ? 'wasm' : 'js');
}

/** Products with at most this many multiply-adds use the direct loop. */
const SMALL = 8 * 8 * 8;

export function gemm(m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand): void {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha === 0) {
    scaleC(m, n, beta, c);
    return;
  }
  if (m * n * k <= SMALL) {
    gemmDirect(m, n, k, alpha, a, b, beta, c);
    return;
  }
  // float32 operands on the Wasm cpu path: the f32x4 SIMD engine (float32 accumulation, threads).
  if (getOption('cpu.gemmBackend') === 'wasm' && a.data instanceof Float32Array && b.data instanceof Float32Array && c.data instanceof Float32Array && cpuPath() === 'wasm' && wasmSgemmAvailable()) {
    wasmSgemm(m, n, k, alpha, a, b, beta, c);
    return;
  }
  const w = wasmKernel();
  if (w) {
    gemmWasm(w, m, n, k, alpha, a, b, beta, c);
    return;
  }
  const ncMax = Math.min(NC, roundUp(n, NR));
  const kcMax = Math.min(KC, k);
  if (packB.length < kcMax * ncMax) packB = new Float64Array(kcMax * ncMax);
  if (packA.length < MC * kcMax) packA = new Float64Array(MC * kcMax);
  const pA = packA;
  const pB = packB;
  for (let jc = 0; jc < n; jc += NC) {
    const nc = Math.min(NC, n - jc);
    for (let pc = 0; pc < k; pc += KC) {
      const kc = Math.min(KC, k - pc);
      // The first slab applies beta; later slabs accumulate onto C.
      const betaEff = pc === 0 ? beta : 1;
      packPanelB(b, pc, kc, jc, nc, pB, 0);
      for (let ic = 0; ic < m; ic += MC) {
        const mc = Math.min(MC, m - ic);
        packBlockA(a, ic, mc, pc, kc, pA, 0);
        macroKernel(mc, nc, kc, alpha, pA, pB, betaEff, c, ic, jc);
      }
    }
  }
}

function gemmWasm(w: WasmGemm, m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand): void {
  const mem = w.f64;
  for (let jc = 0; jc < n; jc += NC) {
    const nc = Math.min(NC, n - jc);
    const nc4 = Math.ceil(nc / NR);
    const ldc = nc4 * NR;
    for (let pc = 0; pc < k; pc += KC) {
      const kc = Math.min(KC, k - pc);
      const betaEff = pc === 0 ? beta : 1;
      packPanelB(b, pc, kc, jc, nc, mem, w.bWord);
      for (let ic = 0; ic < m; ic += MC) {
        const mc = Math.min(MC, m - ic);
        packBlockA(a, ic, mc, pc, kc, mem, w.aWord);
        w.macro(Math.ceil(mc / MR), nc4, kc, ldc);
        scatterTiles(mem, w.cWord, ldc, mc, nc, alpha, betaEff, c, ic, jc);
      }
    }
  }
}

/** C[ic + i, jc + j] = alpha * buf[i, j] + beta * C[ic + i, jc + j] (beta = 0 overwrites). */
function scatterTiles(buf: Float64Array, base: number, ldc: number, mc: number, nc: number, alpha: number, beta: number, c: GemmOperand, ic: number, jc: number): void {
  const cd = c.data;
  const crs = c.rowStride;
  const ccs = c.colStride;
  for (let i = 0; i < mc; i++) {
    let q = c.offset + (ic + i) * crs + jc * ccs;
    let t = base + i * ldc;
    if (beta === 0) {
      if (alpha === 1) for (let j = 0; j < nc; j++, q += ccs) cd[q] = buf[t++]!;
      else for (let j = 0; j < nc; j++, q += ccs) cd[q] = alpha * buf[t++]!;
    } else {
      for (let j = 0; j < nc; j++, q += ccs) cd[q] = alpha * buf[t++]! + beta * cd[q]!;
    }
  }
}

function roundUp(x: number, to: number): number {
  return Math.ceil(x / to) * to;
}

function scaleC(m: number, n: number, beta: number, c: GemmOperand): void {
  const cd = c.data;
  for (let i = 0; i < m; i++) {
    let pc = c.offset + i * c.rowStride;
    for (let j = 0; j < n; j++, pc += c.colStride) cd[pc] = beta === 0 ? 0 : beta * cd[pc]!;
  }
}

function gemmDirect(m: number, n: number, k: number, alpha: number, a: GemmOperand, b: GemmOperand, beta: number, c: GemmOperand): void {
  const ad = a.data;
  const bd = b.data;
  const cd = c.data;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let acc = 0;
      let pa = a.offset + i * a.rowStride;
      let pb = b.offset + j * b.colStride;
      for (let p = 0; p < k; p++, pa += a.colStride, pb += b.rowStride) acc += ad[pa]! * bd[pb]!;
      const pc = c.offset + i * c.rowStride + j * c.colStride;
      cd[pc] = beta === 0 ? alpha * acc : alpha * acc + beta * cd[pc]!;
    }
  }
}

/**
 * Packs B[pc:pc+kc, jc:jc+nc] into NR-wide slivers: sliver s holds, for each p, the NR values
 * B[pc+p, jc+s*NR .. +NR] contiguously (zero padded past n).
 */
function packPanelB(b: GemmOperand, pc: number, kc: number, jc: number, nc: number, out: Float64Array, start: number): void {
  const bd = b.data;
  const rs = b.rowStride;
  const cs = b.colStride;
  let o = start;
  for (let j0 = 0; j0 < nc; j0 += NR) {
    const w = Math.min(NR, nc - j0);
    const base = b.offset + pc * rs + (jc + j0) * cs;
    if (w === NR) {
      if (cs === 1) {
        for (let p = 0, q = base; p < kc; p++, q += rs, o += 4) {
          out[o] = bd[q]!;
          out[o + 1] = bd[q + 1]!;
          out[o + 2] = bd[q + 2]!;
          out[o + 3] = bd[q + 3]!;
        }
      } else {
        for (let p = 0, q = base; p < kc; p++, q += rs, o += 4) {
          out[o] = bd[q]!;
          out[o + 1] = bd[q + cs]!;
          out[o + 2] = bd[q + 2 * cs]!;
          out[o + 3] = bd[q + 3 * cs]!;
        }
      }
    } else {
      for (let p = 0, q = base; p < kc; p++, q += rs, o += NR) {
        for (let j = 0; j < NR; j++) out[o + j] = j < w ? bd[q + j * cs]! : 0;
      }
    }
  }
}

/**
 * Packs A[ic:ic+mc, pc:pc+kc] into MR-tall slivers: sliver s holds, for each p, the MR values
 * A[ic+s*MR .. +MR, pc+p] contiguously (zero padded past m).
 */
function packBlockA(a: GemmOperand, ic: number, mc: number, pc: number, kc: number, out: Float64Array, start: number): void {
  const ad = a.data;
  const rs = a.rowStride;
  const cs = a.colStride;
  let o = start;
  for (let i0 = 0; i0 < mc; i0 += MR) {
    const h = Math.min(MR, mc - i0);
    const base = a.offset + (ic + i0) * rs + pc * cs;
    if (h === MR) {
      if (rs === 1) {
        for (let p = 0, q = base; p < kc; p++, q += cs, o += 4) {
          out[o] = ad[q]!;
          out[o + 1] = ad[q + 1]!;
          out[o + 2] = ad[q + 2]!;
          out[o + 3] = ad[q + 3]!;
        }
      } else {
        // Row-major A: walk each of the four rows contiguously.
        for (let r = 0; r < MR; r++) {
          for (let p = 0, q = base + r * rs, t = o + r; p < kc; p++, q += cs, t += MR) out[t] = ad[q]!;
        }
        o += kc * MR;
      }
    } else {
      for (let p = 0, q = base; p < kc; p++, q += cs, o += MR) {
        for (let r = 0; r < MR; r++) out[o + r] = r < h ? ad[q + r * rs]! : 0;
      }
    }
  }
}

function macroKernel(
  mc: number,
  nc: number,
  kc: number,
  alpha: number,
  pA: Float64Array,
  pB: Float64Array,
  beta: number,
  c: GemmOperand,
  ic: number,
  jc: number,
): void {
  const cd = c.data;
  const crs = c.rowStride;
  const ccs = c.colStride;
  const sliverA = kc * MR;
  const sliverB = kc * NR;
  for (let j0 = 0, ob = 0; j0 < nc; j0 += NR, ob += sliverB) {
    const w = Math.min(NR, nc - j0);
    for (let i0 = 0, oa = 0; i0 < mc; i0 += MR, oa += sliverA) {
      const h = Math.min(MR, mc - i0);
      let c00 = 0, c01 = 0, c02 = 0, c03 = 0;
      let c10 = 0, c11 = 0, c12 = 0, c13 = 0;
      let c20 = 0, c21 = 0, c22 = 0, c23 = 0;
      let c30 = 0, c31 = 0, c32 = 0, c33 = 0;
      for (let p = 0, qa = oa, qb = ob; p < kc; p++, qa += 4, qb += 4) {
        const a0 = pA[qa]!;
        const a1 = pA[qa + 1]!;
        const a2 = pA[qa + 2]!;
        const a3 = pA[qa + 3]!;
        const b0 = pB[qb]!;
        const b1 = pB[qb + 1]!;
        const b2 = pB[qb + 2]!;
        const b3 = pB[qb + 3]!;
        c00 += a0 * b0;
        c01 += a0 * b1;
        c02 += a0 * b2;
        c03 += a0 * b3;
        c10 += a1 * b0;
        c11 += a1 * b1;
        c12 += a1 * b2;
        c13 += a1 * b3;
        c20 += a2 * b0;
        c21 += a2 * b1;
        c22 += a2 * b2;
        c23 += a2 * b3;
        c30 += a3 * b0;
        c31 += a3 * b1;
        c32 += a3 * b2;
        c33 += a3 * b3;
      }
      const base = c.offset + (ic + i0) * crs + (jc + j0) * ccs;
      if (h === MR && w === NR) {
        storeRow(cd, base, ccs, alpha, beta, c00, c01, c02, c03);
        storeRow(cd, base + crs, ccs, alpha, beta, c10, c11, c12, c13);
        storeRow(cd, base + 2 * crs, ccs, alpha, beta, c20, c21, c22, c23);
        storeRow(cd, base + 3 * crs, ccs, alpha, beta, c30, c31, c32, c33);
      } else {
        storePartial(cd, base, ccs, w, alpha, beta, c00, c01, c02, c03);
        if (h > 1) storePartial(cd, base + crs, ccs, w, alpha, beta, c10, c11, c12, c13);
        if (h > 2) storePartial(cd, base + 2 * crs, ccs, w, alpha, beta, c20, c21, c22, c23);
        if (h > 3) storePartial(cd, base + 3 * crs, ccs, w, alpha, beta, c30, c31, c32, c33);
      }
    }
  }
}

function storeRow(cd: NumArray, p: number, cs: number, alpha: number, beta: number, v0: number, v1: number, v2: number, v3: number): void {
  if (beta === 0) {
    cd[p] = alpha * v0;
    cd[p + cs] = alpha * v1;
    cd[p + 2 * cs] = alpha * v2;
    cd[p + 3 * cs] = alpha * v3;
  } else {
    cd[p] = alpha * v0 + beta * cd[p]!;
    cd[p + cs] = alpha * v1 + beta * cd[p + cs]!;
    cd[p + 2 * cs] = alpha * v2 + beta * cd[p + 2 * cs]!;
    cd[p + 3 * cs] = alpha * v3 + beta * cd[p + 3 * cs]!;
  }
}

function storePartial(cd: NumArray, p: number, cs: number, w: number, alpha: number, beta: number, v0: number, v1: number, v2: number, v3: number): void {
  for (let j = 0; j < w; j++) {
    const v = j === 0 ? v0 : j === 1 ? v1 : j === 2 ? v2 : v3;
    const q = p + j * cs;
    cd[q] = beta === 0 ? alpha * v : alpha * v + beta * cd[q]!;
  }
}
