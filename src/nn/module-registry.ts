/**
 * The live Modules of the process, held weakly. kiln.compile asks it which modules hold the
 * tensors a traced function read, so that a function that closes over a model (rather than
 * being given it) still gets the model's parameters, buffers, submodules and training flags
 * guarded (src/compile/module-state.ts). Registration is one WeakRef per module; dead modules
 * leave the set through a FinalizationRegistry, so the registry never keeps a model alive.
 */
import type { Module } from './module.js';

const live = new Set<WeakRef<Module>>();
const finalizer = new FinalizationRegistry<WeakRef<Module>>((ref) => live.delete(ref));

/** Called by the Module constructor. */
export function trackModule(m: Module): void {
  const ref = new WeakRef(m);
  live.add(ref);
  finalizer.register(m, ref);
}

/** Every Module still alive (in creation order). */
export function* liveModules(): Generator<Module> {
  for (const ref of live) {
    const m = ref.deref();
    if (m !== undefined) yield m;
  }
}
