/**
 * The code-generating backend for cuda devices: the same lowering and scheduling as the CPU
 * backend (kiln-backend.ts), CUDA C per kernel, and a CudaProgram that launches through a
 * CudaLauncher. `registerCudaBackend(launcher)` registers it as 'kiln-cuda' once a runtime exists.
 *
 * What lowering fuses for cuda (`CUDA_FUSION`) is, deliberately, exactly what it fuses for the cpu:
 * the template table's rules (lower/fusion-rules.ts), values on the cuda device counting as the
 * target's. Before compile targets existed the cuda path lowered its graphs relabelled as cpu values
 * so that the cpu-only device tests in lower.ts passed; these rules make the same decisions without
 * the relabelling. Values on the cpu count too, as they did under the relabelling (keeping that is
 * part of changing no decision here). The CUDA generator (generate.ts) renders every op the
 * table fuses; where it could fuse more (or must fuse less) these rules are the place to say so.
 * There are no GEMM steps on cuda: linears run cuBLASLt through dispatch.
 */
import type { BackendOptions, CompiledProgram } from '../../backend.js';
import { registerBackend } from '../../backend.js';
import type { Graph } from '../../ir.js';
import { templateFusion, type FusionRules } from '../../lower/fusion-rules.js';
import { lower } from '../../lower/lower.js';
import { schedule } from '../../lower/schedule.js';
import { decodeMode } from '../../mode.js';
import type { CudaLauncher } from './launcher.js';
import { type CudaAutotuneHook, CudaProgram, type CudaProgramOptions } from './program.js';

/** What lowering may fuse on cuda: the cpu's decisions (see the header). */
export const CUDA_FUSION: FusionRules = templateFusion((d) => d.type === 'cuda' || d.type === 'cpu', null);

/** Lowers and schedules `graph` with CUDA_FUSION and builds its CudaProgram over `launcher`. */
export function cudaProgram(graph: Graph, launcher: CudaLauncher, options: CudaProgramOptions): CudaProgram {
  const low = lower(graph, CUDA_FUSION);
  return new CudaProgram(low, schedule(low), launcher, options);
}

export interface CudaBackendOptions extends BackendOptions {
  autotune?: CudaAutotuneHook;
}

export function compileKilnCuda(graph: Graph, launcher: CudaLauncher, options: Partial<CudaBackendOptions> = {}): CudaProgram {
  const program = cudaProgram(graph, launcher, { autotune: options.autotune, tuneOnFirstRun: decodeMode(options.mode).tuneOnFirstRun });
  if (options.logCode) console.log(program.describe());
  return program;
}

/** Registers the 'kiln-cuda' backend over `launcher`. */
export function registerCudaBackend(launcher: CudaLauncher): void {
  registerBackend({
    name: 'kiln-cuda',
    compile(graph: Graph, options: BackendOptions): CompiledProgram {
      return compileKilnCuda(graph, launcher, options as CudaBackendOptions);
    },
  });
}
