/**
 * The code-generating backend `kiln`: lower (classify, expand composites), schedule (fuse
 * pointwise chains, reduction prologues and row epilogues into kernels), generate a kernel per
 * group and run the steps with a wrapper that plans buffers. Which code generator, and what it may
 * fuse, is the compile target of the graph's device (target.ts): 'cpu' (JS/C/Wasm kernels,
 * codegen/js/target.ts), 'cuda' (CUDA C kernels and CUDA graphs, cuda-graphs/target.ts) and
 * 'webgpu' (WGSL kernels, codegen/wgsl/target.ts), each registered by importing it here. Graphs with nothing to fuse still run (every node as an extern
 * call through the dispatcher).
 */
import type { BackendOptions, CompiledProgram } from './backend.js';
import { registerBackend } from './backend.js';
import './codegen/js/target.js';
import './cuda-graphs/target.js';
import './codegen/wgsl/target.js';
import type { Graph } from './ir.js';
import { compileTargetFor, targetDevice } from './target.js';

export { compileKiln, type KilnBackendOptions } from './codegen/js/target.js';

registerBackend({
  name: 'kiln',
  symbolicSizes: (graph) => compileTargetFor(targetDevice(graph).type).symbolicSizes === true,
  nativeComposites: (graph) => compileTargetFor(targetDevice(graph).type).nativeComposites,
  compile(graph: Graph, options: BackendOptions): CompiledProgram {
    const device = targetDevice(graph);
    return compileTargetFor(device.type).compile(graph, device, options);
  },
});

export { KilnProgram } from './codegen/js/program.js';
