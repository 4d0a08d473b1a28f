/**
 * The 'cpu' compile target: JavaScript kernels, with C (the native path) or Wasm (the wasm path)
 * candidates, run by a KilnProgram; float32 linears become GEMM steps with folded epilogues on the
 * paths that have a compiled GEMM. Whole programs go through the on-disk program cache
 * (program-cache.ts), whose hit skips lowering and code generation. Registers itself for 'cpu'.
 */
import type { BackendOptions } from '../../backend.js';
import type { Graph } from '../../ir.js';
import { type CompileTarget, lowerFor, registerCompileTarget } from '../../target.js';
import { CPU_FUSION } from './fusion.js';
import { compileWithProgramCache } from './program-cache.js';
import { type AutotuneHook, KilnProgram } from './program.js';
import { decodeMode } from '../../mode.js';

export interface KilnBackendOptions extends BackendOptions {
  /** Chooses among each kernel's candidate configs (default: the first). */
  autotune?: AutotuneHook;
}

function program(low: KilnProgram['low'], sched: KilnProgram['sched'], options: Partial<KilnBackendOptions>): KilnProgram {
  return new KilnProgram(low, sched, options.autotune, decodeMode(options.mode).tuneOnFirstRun);
}

export const cpuTarget: CompileTarget = {
  description: 'cpu: JavaScript kernels with C (native path) or Wasm candidates, compiled GEMMs',
  symbolicSizes: true,
  fusion: CPU_FUSION,
  program: (low, sched, _device, options) => program(low, sched, options as KilnBackendOptions),
  // Whole programs are cached on disk (program-cache.ts); a hit skips lowering and codegen.
  compile: (graph, _device, options) => compileWithProgramCache(graph, options, 'kiln', (g) => compileKiln(g, options as KilnBackendOptions)),
};

registerCompileTarget('cpu', cpuTarget);

/** Lowers, schedules and generates a graph for the cpu (no program cache). */
export function compileKiln(graph: Graph, options: Partial<KilnBackendOptions> = {}): KilnProgram {
  const { low, sched } = lowerFor(graph, cpuTarget);
  const p = program(low, sched, options);
  if (options.logCode) console.log(p.describe());
  return p;
}
