/**
 * The code-generating backend `kiln` for the cpu accelerator: lower (classify, expand composites),
 * schedule (fuse pointwise chains, reduction prologues and row epilogues into kernels), generate
 * JavaScript per kernel and run the steps with a wrapper that plans buffers. Graphs with nothing
 * to fuse still run (every node as an extern call through the dispatcher).
 */
import type { BackendOptions, CompiledProgram } from './backend.js';
import { registerBackend } from './backend.js';
import { type AutotuneHook, KilnProgram } from './codegen/js/program.js';
import { compileWithProgramCache } from './codegen/js/program-cache.js';
import { compileForCuda, cudaDeviceOf } from './cuda-graphs/compile-cuda.js';
import type { Graph } from './ir.js';
import { lower } from './lower/lower.js';
import { decodeMode } from './mode.js';
import { schedule } from './lower/schedule.js';

export interface KilnBackendOptions extends BackendOptions {
  /** Chooses among each kernel's candidate configs (default: the first). */
  autotune?: AutotuneHook;
}

export function compileKiln(graph: Graph, options: Partial<KilnBackendOptions> = {}): KilnProgram {
  const low = lower(graph);
  const sched = schedule(low);
  const program = new KilnProgram(low, sched, options.autotune, decodeMode(options.mode).tuneOnFirstRun);
  if (options.logCode) console.log(program.describe());
  return program;
}

registerBackend({
  name: 'kiln',
  compile(graph: Graph, options: BackendOptions): CompiledProgram {
    // Graphs on a cuda device take the CUDA C generator (and CUDA graphs): src/compile/cuda-graphs.
    const cuda = cudaDeviceOf(graph);
    if (cuda !== null) return compileForCuda(graph, cuda, options);
    // Whole programs are cached on disk (codegen/js/program-cache.ts); a hit skips lowering and codegen.
    return compileWithProgramCache(graph, options, 'kiln', (g) => compileKiln(g, options as KilnBackendOptions));
  },
});

export { KilnProgram };
