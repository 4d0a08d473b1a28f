/**
 * Turning kernel sources into functions. Everything goes through compileKernelSources so that a
 * worker pool (compiling and caching off the main thread) can replace the in-process `new Function`
 * later without touching the code generator or the runtime.
 */
import { bfloat16BitsToFloat32, float16BitsToFloat32, float32ToBfloat16Bits, float32ToFloat16Bits } from '../../../tensor/half.js';
import * as M from '../../../kernels/cpu/pointwise-math.js';
import type { NumArray } from '../../../kernels/cpu/numeric.js';
import { compileInPoolSync, type JsKernelResult } from '../../pool/index.js';

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
 * Compiles kernel sources (each `"use strict"; return function ...`) into callable kernels. The
 * sources are first checked in the shared compile worker pool, all in parallel (syntax errors come
 * back with the line and a caret); the main thread then only instantiates them. Functions cannot
 * cross threads, so instantiation stays here; it is the cheap part.
 */
export function compileKernelSources(sources: readonly string[]): KernelFn[] {
  if (sources.length === 0) return [];
  const results = compileInPoolSync<JsKernelResult>(sources.map((source, i) => ({ kind: 'js-kernel', payload: { source, name: `kernel${i}` } })));
  return sources.map((src, i) => {
    const r = results[i]!;
    if (!r.ok) throw new Error(`kiln backend: generated kernel does not compile: ${r.error}\n${src}`);
    try {
      return new Function(src)() as KernelFn;
    } catch (e) {
      throw new Error(`kiln backend: generated kernel does not compile: ${(e as Error).message}\n${src}`);
    }
  });
}
