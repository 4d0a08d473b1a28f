/**
 * Memory pressure from tensors nobody disposed. V8 does not see tensor storage, so an unscoped loop
 * can drop gigabytes of tensors before its garbage collector runs, and even then the
 * FinalizationRegistry callbacks that free them run only when the loop yields to the event loop,
 * which a synchronous loop never does. So the allocators report their growth here: when the bytes
 * allocated since the last collection exceed KILN_GC_THRESHOLD_MB, or an allocation fails, the
 * reclaim hooks run synchronously (the tensor layer installs one: collect.ts forces a GC and runs
 * its registry's pending callbacks). The runtime cannot import the tensor layer, hence the hook.
 *
 * Forcing a GC: Node exposes `gc` without --expose-gc once the flag is set and a new context is
 * made (v8.setFlagsFromString + vm.runInNewContext). Running the callbacks synchronously takes
 * FinalizationRegistry.prototype.cleanupSome, which V8 installs only in contexts created after
 * --harmony-weak-refs-with-cleanup-some is set; collect.ts builds its registry from such a context's
 * constructor. Where either is unavailable (a browser, another engine) they are no-ops and memory
 * returns at the next yield as before.
 */
import { inNode, v8, vm } from '../platform/index.js';

import { getOption } from './config.js';

type Reclaim = () => void;
const hooks: Reclaim[] = [];

/** Registers a function that frees memory held by unreachable tensors (synchronously). */
export function onMemoryPressure(fn: Reclaim): void {
  hooks.push(fn);
}

let collecting = false;
let collections = 0;

/** Runs the reclaim hooks now (at most one pass at a time: a hook that allocates cannot recurse). */
export function reclaimUnreachable(): void {
  if (collecting) return;
  collecting = true;
  try {
    for (const h of hooks) h();
    collections++;
  } finally {
    collecting = false;
  }
}

/** How many reclaim passes ran (tests and benchmarks check the mechanism fired). */
export function memoryPressureCollections(): number {
  return collections;
}

/** The KILN_GC_THRESHOLD_MB threshold in bytes; 0: pressure-triggered collection is off. */
export function gcThresholdBytes(): number {
  return getOption('KILN_GC_THRESHOLD_MB') * 1024 * 1024;
}

/**
 * One allocator's trigger: it calls `grew` after an allocation that reached the system allocator
 * (a cache miss, already the slow path, so reading the option there costs nothing that matters).
 * Growth is measured from the allocated bytes after the last pass, so a loop that disposes its
 * tensors never triggers one. A pass that frees most of the growth (a loop dropping tensors) keeps
 * the step at the threshold; one that frees less than half of it (the growth was live memory: a
 * model's weights, a KV cache) doubles the step for the next, up to the memory then allocated, so
 * allocating gigabytes that stay alive costs a few passes (a forced full GC each, tens of ms)
 * rather than one per threshold (issue #17: 36 passes while a 0.6B model's server allocated its
 * 4.5 GB KV cache).  */
export class PressureTrigger {
  private base = 0;
  /** Growth that triggers the next pass (0: the threshold). */
  private step = 0;

  /** `allocatedBytes` reads the allocator's count (the allocation just made included; read again after a pass). */
  grew(allocatedBytes: () => number): void {
    const threshold = gcThresholdBytes();
    if (threshold === 0) return;
    const now = allocatedBytes();
    const step = Math.max(threshold, this.step);
    if (now - this.base <= step) return;
    reclaimUnreachable();
    const after = allocatedBytes();
    const freed = now - after;
    this.step = freed * 2 >= now - this.base ? 0 : Math.min(2 * step, Math.max(threshold, after));
    this.base = after;
  }

  /** The allocated count went down (frees): growth is measured from the lower point. */
  shrank(allocatedBytes: number): void {
    if (allocatedBytes < this.base) this.base = allocatedBytes;
  }
}

let gcFn: (() => void) | null | undefined;

/** Forces a full garbage collection where the engine allows it; returns whether it ran. */
export function forceGc(): boolean {
  if (gcFn === undefined) gcFn = loadGc();
  if (!gcFn) return false;
  gcFn();
  return true;
}

function loadGc(): (() => void) | null {
  const g = (globalThis as { gc?: unknown }).gc;
  if (typeof g === 'function') return g as () => void;
  const vmod = nodeModules();
  if (!vmod) return null;
  try {
    vmod.v8.setFlagsFromString('--expose-gc');
    const fn = vmod.vm.runInNewContext('gc') as unknown;
    return typeof fn === 'function' ? (fn as () => void) : null;
  } catch {
    return null;
  }
}

/**
 * A FinalizationRegistry constructor whose instances have cleanupSome (see the header), or the
 * global one where that cannot be had.
 */
export function finalizationRegistryWithCleanupSome(): FinalizationRegistryConstructor {
  const vmod = nodeModules();
  if (vmod) {
    try {
      vmod.v8.setFlagsFromString('--harmony-weak-refs-with-cleanup-some');
      const ctor = vmod.vm.runInNewContext('FinalizationRegistry') as FinalizationRegistryConstructor;
      if (typeof (ctor.prototype as { cleanupSome?: unknown }).cleanupSome === 'function') return ctor;
    } catch {
      // fall through to the global constructor
    }
  }
  return FinalizationRegistry;
}

// The runtime is Node-only already (config.ts hashes with node:crypto); a bundle for another engine
// that stubs these modules gets null and the no-op paths.
function nodeModules(): { v8: typeof v8; vm: typeof vm } | null {
  if (!inNode) return null;
  return typeof v8?.setFlagsFromString === 'function' && typeof vm?.runInNewContext === 'function' ? { v8, vm } : null;
}
