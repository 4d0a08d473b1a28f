/**
 * Running a Wasm pointwise kernel behind the JS kernel calling convention (codegen/js/emit.ts):
 * the returned KernelFn walks the coalesced iteration space row by row, copies up to WASM_CHUNK
 * elements of every input into the module's operand buffers (TypedArray.set for unit stride, a
 * splat for broadcast, a gather loop otherwise), calls `kern`, and copies the outputs back. Rows
 * up to half a chunk long are batched: as many as fit share one call (a channels_last tensor
 * with a per-channel operand iterates in rows of C, e.g. 64, which cost one call each before).
 * Rows shorter than MIN_ROW go to the JavaScript fallback kernel: there the copies and the call
 * cost more than the vector code saves.
 */
import type { NumArray } from '../../../kernels/cpu/numeric.js';
import { wasmApi } from '../../../kernels/cpu/wasm-asm.js';
import type { KernelFn } from '../js/compile.js';
import { WASM_CHUNK } from './pointwise.js';

/**
 * Rows below this length run the JS kernel. Per row the driver does ~3 view creations and a call
 * per operand (~0.3 us), which the vector code (~1 ns/element vs ~10-60 ns in JS for transcendental
 * chains) only wins back past a few dozen elements; 64 keeps small broadcasts on the JS path.
 */
export const MIN_ROW = 64;

/** Instantiates a validated module and wraps it as a KernelFn with `fallback` for short rows. */
export function wasmKernelFn(bytes: Uint8Array, nOutputs: number, fallback: KernelFn): KernelFn {
  const WA = wasmApi();
  if (!WA) return fallback;
  const inst = new WA.Instance(new WA.Module(bytes), {});
  const mem = inst.exports['mem'] as { buffer: ArrayBuffer };
  const kern = inst.exports['kern'] as (n: number) => void;
  const buf = new Float32Array(mem.buffer);
  const fn: KernelFn = (H, oshape, ost, rshape, rst, offs, datas) => {
    const r = oshape.length;
    const n = oshape[r - 1]!;
    if (n < MIN_ROW) {
      fallback(H, oshape, ost, rshape, rst, offs, datas);
      return;
    }
    let total = 1;
    for (let d = 0; d < r; d++) total *= oshape[d]!;
    if (total === 0) return;
    const nOps = datas.length;
    const p = offs.slice();
    const s = ost.map((st) => st[r - 1]!);
    const idx = new Int32Array(r);
    const advance = (): void => {
      for (let d = r - 2; d >= 0; d--) {
        idx[d]!++;
        for (let k = 0; k < nOps; k++) p[k]! += ost[k]![d]!;
        if (idx[d]! < oshape[d]!) break;
        for (let k = 0; k < nOps; k++) p[k]! -= ost[k]![d]! * oshape[d]!;
        idx[d] = 0;
      }
    };
    if (n * 2 <= WASM_CHUNK) {
      // Short rows (a channels_last tensor's 64 channels): several rows share one kernel call,
      // each copied to the next free place of the operand buffers; the outputs go back row by row.
      const perCall = Math.floor(WASM_CHUNK / n);
      const outAt = new Float64Array(perCall * nOutputs);
      for (let done = 0; done < total; ) {
        let rows = 0;
        for (; rows < perCall && done < total; rows++, done += n) {
          for (let k = nOutputs; k < nOps; k++) copyIn(buf, k * WASM_CHUNK + rows * n, datas[k]!, p[k]!, s[k]!, n);
          for (let k = 0; k < nOutputs; k++) outAt[rows * nOutputs + k] = p[k]!;
          advance();
        }
        kern(rows * n);
        for (let q = 0; q < rows; q++) for (let k = 0; k < nOutputs; k++) copyOut(buf, k * WASM_CHUNK + q * n, datas[k]!, outAt[q * nOutputs + k]!, s[k]!, n);
      }
      return;
    }
    for (let done = 0; done < total; done += n) {
      for (let c0 = 0; c0 < n; c0 += WASM_CHUNK) {
        const len = Math.min(WASM_CHUNK, n - c0);
        for (let k = nOutputs; k < nOps; k++) copyIn(buf, k * WASM_CHUNK, datas[k]!, p[k]! + c0 * s[k]!, s[k]!, len);
        kern(len);
        for (let k = 0; k < nOutputs; k++) copyOut(buf, k * WASM_CHUNK, datas[k]!, p[k]! + c0 * s[k]!, s[k]!, len);
      }
      advance();
    }
  };
  return fn;
}

function copyIn(buf: Float32Array, base: number, src: NumArray, at: number, stride: number, len: number): void {
  if (stride === 1) buf.set(src.subarray(at, at + len), base);
  else if (stride === 0) buf.fill(src[at]!, base, base + len);
  else for (let i = 0, q = at; i < len; i++, q += stride) buf[base + i] = src[q]!;
}

function copyOut(buf: Float32Array, base: number, dst: NumArray, at: number, stride: number, len: number): void {
  if (stride === 1) dst.set(buf.subarray(base, base + len), at);
  else for (let i = 0, q = at; i < len; i++, q += stride) dst[q] = buf[base + i]!;
}
