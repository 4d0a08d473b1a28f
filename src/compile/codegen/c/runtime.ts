/**
 * Building and running native pointwise kernels (pointwise.ts) behind the JS kernel calling
 * convention. `buildNativeKernels` compiles every not-yet-cached source in one batch of 'cc'
 * tasks (in parallel in the compile worker pool; shared objects cached on disk by source +
 * toolchain, see kernels/cpu/native/so-cache.ts) and wraps each as a KernelFn. A kernel whose C
 * does not compile is dropped for its JavaScript fallback with a warning carrying the compiler's
 * diagnostics (the architecture's rule: a failed candidate never fails the graph).
 */
import { emitWarning } from '../../../platform/index.js';
import { loadLibrary, type NativeFn } from '../../../kernels/cpu/native/koffi.js';
import { probeToolchain } from '../../../kernels/cpu/native/toolchain.js';
import { nativeThreads } from '../../../kernels/cpu/native/threads.js';
import { buildSharedObjectSync, installBuilt, lookupObject, pendingBuild, runBuildsSync } from '../../../kernels/cpu/native/so-cache.js';
import type { KernelFn } from '../js/compile.js';
import { C_MAX_RANK, type NativePointwise } from './pointwise.js';

/**
 * Iteration spaces below this many elements run the JS kernel: a koffi call plus filling `meta`
 * costs ~1-2 us, what the JS kernel needs for about a thousand elements. (It also keeps tiny
 * compiled graphs bit-identical to eager, as the Wasm candidate's short-row fallback does.)
 */
export const NATIVE_MIN_ELEMENTS = 1024;

/** Wraps a loaded kernel; small or high-rank iteration spaces and non-float32 data run `fallback`. */
function wrap(k: NativePointwise, fn: NativeFn, fallback: KernelFn): KernelFn {
  return k.kind === 'reduce' ? wrapReduce(k, fn, fallback) : wrapPointwise(k, fn, fallback);
}

/** A row kernel (reduction.ts): the row must have coalesced to one dim; rows of high outer rank or tiny calls run `fallback`. */
function wrapReduce(k: NativePointwise, fn: NativeFn, fallback: KernelFn): KernelFn {
  const nOps = k.nOutputs + k.nInputs;
  let meta = new Float64Array(0);
  return (H, oshape, ost, rshape, rst, offs, datas) => {
    const r = oshape.length;
    let total = rshape[0] ?? 0;
    for (let d = 0; d < r; d++) total *= oshape[d]!;
    if (total < NATIVE_MIN_ELEMENTS || rshape.length !== 1 || r > C_MAX_RANK || datas.length !== nOps || !datas.every((d) => d instanceof Float32Array)) {
      fallback(H, oshape, ost, rshape, rst, offs, datas);
      return;
    }
    const need = r + nOps * r + nOps + 1 + nOps;
    if (meta.length !== need) meta = new Float64Array(need);
    for (let d = 0; d < r; d++) meta[d] = oshape[d]!;
    for (let q = 0; q < nOps; q++) {
      const s = ost[q]!;
      for (let d = 0; d < r; d++) meta[r + q * r + d] = s[d]!;
      meta[r + nOps * r + q] = offs[q]!;
      meta[r + nOps * r + nOps + 1 + q] = rst[q]![0]!;
    }
    meta[r + nOps * r + nOps] = rshape[0]!;
    fn(r, meta, ...datas, nativeThreads());
  };
}

function wrapPointwise(k: NativePointwise, fn: NativeFn, fallback: KernelFn): KernelFn {
  const nOps = k.nOutputs + k.nInputs;
  let meta = new Float64Array(0);
  return (H, oshape, ost, rshape, rst, offs, datas) => {
    const r = oshape.length;
    let total = 1;
    for (let d = 0; d < r; d++) total *= oshape[d]!;
    if (total < NATIVE_MIN_ELEMENTS || r < 1 || r > C_MAX_RANK || datas.length !== nOps || !datas.every((d) => d instanceof Float32Array)) {
      fallback(H, oshape, ost, rshape, rst, offs, datas);
      return;
    }
    const need = r + nOps * r + nOps;
    if (meta.length !== need) meta = new Float64Array(need);
    for (let d = 0; d < r; d++) meta[d] = oshape[d]!;
    for (let q = 0; q < nOps; q++) {
      const s = ost[q]!;
      for (let d = 0; d < r; d++) meta[r + q * r + d] = s[d]!;
      meta[r + nOps * r + q] = offs[q]!;
    }
    fn(r, meta, ...datas, nativeThreads());
  };
}

function signature(k: NativePointwise): string {
  const ds = Array.from({ length: k.nOutputs + k.nInputs }, (_, i) => `void *d${i}`).join(', ');
  return `void ${k.symbol}(int32_t rank, void *meta, ${ds}, int32_t nthreads)`;
}

/** Builds (or loads from the cache) every kernel and returns KernelFns; fallbacks[i] replaces a kernel that fails. */
export function buildNativeKernels(kernels: readonly NativePointwise[], fallbacks: readonly KernelFn[]): KernelFn[] {
  if (kernels.length === 0) return [];
  const probe = probeToolchain();
  if (!probe.ok) {
    emitWarning(`kiln: native kernels requested but ${probe.reason}; using the JavaScript kernels`, { code: 'KILN_NATIVE_UNAVAILABLE' });
    return [...fallbacks];
  }
  const tc = probe.toolchain;
  const files: (string | undefined)[] = kernels.map((k) => lookupObject(k.source, tc));
  const todo = kernels.map((_, i) => i).filter((i) => files[i] === undefined);
  if (todo.length > 0) {
    const builds = todo.map((i) => pendingBuild(kernels[i]!.symbol, kernels[i]!.source, tc));
    const results = runBuildsSync(`${builds.length} native CPU kernel${builds.length === 1 ? '' : 's'} of a compiled program`, builds.map((b) => b.payload));
    todo.forEach((i, j) => {
      try {
        files[i] = installBuilt(builds[j]!.key, results[j]!);
      } catch (e) {
        emitWarning(`kiln: native kernel ${kernels[i]!.symbol} does not compile; using its JavaScript kernel.\n${(e as Error).message}`, { code: 'KILN_NATIVE_COMPILE' });
      }
    });
  }
  return kernels.map((k, i) => {
    const file = files[i];
    if (file === undefined) return fallbacks[i]!;
    return wrap(k, loadLibrary(file).func(signature(k)), fallbacks[i]!);
  });
}

/** One kernel (the program cache's warm start): builds it if its object is missing. */
export function nativeKernelFn(k: NativePointwise, fallback: KernelFn): KernelFn {
  const probe = probeToolchain();
  if (!probe.ok) return fallback;
  const file = buildSharedObjectSync(k.symbol, k.source, probe.toolchain);
  return wrap(k, loadLibrary(file).func(signature(k)), fallback);
}
