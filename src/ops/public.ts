/** `kiln.ops`: the registry as users and tools see it. */
export { listOps, getOp, hasOp, defineOp, registerKernel, setDecomposition } from './registry.js';
export { dispatch, pushDispatchMode, popDispatchMode, addPostDispatchHook, setPreDispatchHook } from './dispatch.js';
export type { DispatchMode, PostDispatchHook, PreDispatchHook } from './dispatch.js';
export type * from './schema.js';
