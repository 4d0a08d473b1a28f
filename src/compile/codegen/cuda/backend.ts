/**
 * The code-generating backend for cuda devices: the same lowering and scheduling as the CPU
 * backend (kiln-backend.ts), CUDA C per kernel, and a CudaProgram that launches through a
 * CudaLauncher. `registerCudaBackend(launcher)` registers it as 'kiln-cuda' once a runtime exists.
 *
 * Lowering only fuses values on the cpu device today (lower.ts checks `device.type === 'cpu'`, as
 * the JS generator is its only consumer). Until lowering takes the target device as a parameter,
 * the graph is lowered with its values relabelled to cpu: classification depends on ops, dtypes
 * and shapes only, and the program recomputes all metadata from the real (cuda) inputs at run time.
 */
import { CPU } from '../../../runtime/device.js';
import type { BackendOptions, CompiledProgram } from '../../backend.js';
import { registerBackend } from '../../backend.js';
import type { Graph, ValueId, ValueInfo } from '../../ir.js';
import { lower, type Lowered } from '../../lower/lower.js';
import { schedule } from '../../lower/schedule.js';
import { decodeMode } from '../../mode.js';
import type { CudaLauncher } from './launcher.js';
import { type CudaAutotuneHook, CudaProgram } from './program.js';

/** Lowers a graph of cuda values with the fusion rules of the cpu path (see the header). */
export function lowerForCuda(graph: Graph): Lowered {
  const values = new Map<ValueId, ValueInfo>();
  for (const [id, v] of graph.values) values.set(id, v.device.type === 'cuda' ? { ...v, device: CPU } : v);
  const low = lower({ ...graph, values });
  // Restore the real devices (values added by expansions take their inputs' device).
  const device = [...graph.values.values()].find((v) => v.device.type === 'cuda')?.device;
  if (device) for (const [id, v] of low.values) if (v.device.type === 'cpu') low.values.set(id, { ...v, device: graph.values.get(id)?.device ?? device });
  return low;
}

export interface CudaBackendOptions extends BackendOptions {
  autotune?: CudaAutotuneHook;
}

export function compileKilnCuda(graph: Graph, launcher: CudaLauncher, options: Partial<CudaBackendOptions> = {}): CudaProgram {
  const low = lowerForCuda(graph);
  const program = new CudaProgram(low, schedule(low), launcher, { autotune: options.autotune, tuneOnFirstRun: decodeMode(options.mode).tuneOnFirstRun });
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
