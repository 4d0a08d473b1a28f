/**
 * Turning kernel sources into functions. Everything goes through compileKernelSources so that a
 * worker pool (compiling and caching off the main thread) can replace the in-process `new Function`
 * later without touching the code generator or the runtime.
 */
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../../../tensor/half.js';
import * as M from '../../../kernels/cpu/pointwise-math.js';
import type { NumArray } from '../../../kernels/cpu/numeric.js';
import { compileInPoolSync, kernelSourceHash, registerCompileTaskHandler, type JsKernelResult } from '../../../runtime/pool/index.js';
import { wasmBytesHash, wasmKernelTask, type WasmKernelResult } from '../wasm/task.js';
import { wasmKernelFn } from '../wasm/runtime.js';
import { cacheKey } from '../../../runtime/cache/key.js';
import { getDiskCache } from '../../../runtime/cache/disk-cache.js';
import { buildNativeKernels } from '../c/runtime.js';
import type { NativePointwise } from '../c/pointwise.js';

/** The kernel calling convention (see emit.ts). */
export type KernelFn = (
  H: KernelHelpers,
  oshape: readonly number[],
  ost: readonly (readonly number[])[],
  rshape: readonly number[],
  rst: readonly (readonly number[])[],
  offs: readonly number[],
  datas: readonly NumArray[],
) => void;

/** Scalar helpers generated code calls as H.name(...). */
export const HELPERS = {
  erf: M.erf,
  erf64: M.erf64,
  cpow: M.cpow,
  divFloorFloat: M.divFloorFloat,
  remainderFloat: M.remainderFloat,
  roundHalfEven: M.roundHalfEven,
  lerp: M.lerp,
  f16: (x: number): number => float16BitsToFloat32(float32ToFloat16Bits(x)),
  bf16: (x: number): number => bfloat16BitsToFloat32(float32ToBfloat16Bits(x)),
};
export type KernelHelpers = typeof HELPERS;

/**
 * Compiles kernel sources (each `"use strict"; return function ...`) into callable kernels. Sources
 * not seen before are checked in the shared compile worker pool, all in parallel (syntax errors come
 * back with the line and a caret), and remembered in the on-disk cache (KILN_CACHE_DIR) by content
 * hash and Kiln version, so a later process with the same kernels starts without the pool. The main
 * thread then only instantiates them: functions cannot cross threads, and this is the cheap part.
 */
export function compileKernelSources(sources: readonly string[]): KernelFn[] {
  if (sources.length === 0) return [];
  const cache = getDiskCache();
  const keys = sources.map((src) => cacheKey(['js-kernel', kernelSourceHash(src)]));
  const todo = sources.map((_, i) => i).filter((i) => cache.get(KERNEL_NAMESPACE, keys[i]!) !== true);
  if (todo.length > 0) {
    const results = compileInPoolSync<JsKernelResult>(todo.map((i) => ({ kind: 'js-kernel', payload: { source: sources[i]!, name: `kernel${i}` } })));
    todo.forEach((i, k) => {
      const r = results[k]!;
      if (!r.ok) throw new Error(`kiln backend: generated kernel does not compile: ${r.error}\n${sources[i]}`);
      cache.put(KERNEL_NAMESPACE, keys[i]!, true);
    });
  }
  return sources.map((src) => {
    try {
      return new Function(src)() as KernelFn;
    } catch (e) {
      throw new Error(`kiln backend: generated kernel does not compile: ${(e as Error).message}\n${src}`);
    }
  });
}

/** Disk-cache namespace of validated kernel sources. */
export const KERNEL_NAMESPACE = 'js-kernels';

/** Disk-cache namespace of validated Wasm kernel modules. */
export const WASM_KERNEL_NAMESPACE = 'wasm-kernels';

registerCompileTaskHandler('wasm-kernel', new URL('../wasm/task.js', import.meta.url), 'wasmKernelTask', wasmKernelTask);

/**
 * Validates and compiles Wasm modules in the worker pool (task 'wasm-kernel'); modules seen before
 * (disk cache, by content hash) are skipped. Throws with the engine's diagnostic for a bad module.
 */
export function validateWasm(modules: readonly Uint8Array[]): void {
  const cache = getDiskCache();
  const keys = modules.map((b) => cacheKey(['wasm-kernel', wasmBytesHash(b)]));
  const todo = modules.map((_, i) => i).filter((i) => cache.get(WASM_KERNEL_NAMESPACE, keys[i]!) !== true);
  if (todo.length === 0) return;
  const results = compileInPoolSync<WasmKernelResult>(todo.map((i) => ({ kind: 'wasm-kernel', payload: { bytes: modules[i]!, name: `module${i}` } })));
  todo.forEach((i, k) => {
    const r = results[k]!;
    if (!r.ok) throw new Error(`kiln backend: generated Wasm kernel does not compile: ${r.error}`);
    cache.put(WASM_KERNEL_NAMESPACE, keys[i]!, true);
  });
}

/** What compileCandidates needs of a kernel candidate (see emit.ts). */
export interface CandidateSource {
  /** JavaScript kernel (for a Wasm candidate: the fallback for short rows). */
  readonly source: string;
  /** A Wasm pointwise module run in front of `source`, and the kernel's output count. */
  readonly wasm?: { readonly bytes: Uint8Array; readonly nOutputs: number };
  /** A native C kernel (codegen/c), built in the pool as a 'cc' task; the JS source is its fallback. */
  readonly native?: NativePointwise;
}

/**
 * Compiles candidates: every JavaScript source through compileKernelSources, and every Wasm module
 * through the worker pool's 'wasm-kernel' task (validated and compiled there, remembered in the disk
 * cache by content hash), then instantiated here behind the JS calling convention.
 */
export function compileCandidates(cands: readonly CandidateSource[]): KernelFn[] {
  const fns = compileKernelSources(cands.map((c) => c.source));
  validateWasm(cands.flatMap((c) => (c.wasm ? [c.wasm.bytes] : [])));
  const natives = cands.flatMap((c, i) => (c.native ? [i] : []));
  const built = buildNativeKernels(natives.map((i) => cands[i]!.native!), natives.map((i) => fns[i]!));
  const nativeFn = new Map(natives.map((i, j) => [i, built[j]!]));
  return cands.map((c, i) => nativeFn.get(i) ?? (c.wasm ? wasmKernelFn(c.wasm.bytes, c.wasm.nOutputs, fns[i]!) : fns[i]!));
}
