/**
 * The 'webgpu' compile target: WGSL kernels for fused pointwise chains, reductions and row kernels
 * (softmax, logSoftmax, layerNorm, rmsNorm), rendered by the renderer the eager webgpu kernels
 * share and launched through the accelerator's launchKernel (WgslProgram); what WEBGPU_FUSION
 * refuses runs through dispatch. No program cache and no graphs around it yet. Registers itself
 * for 'webgpu'; kiln-backend.ts imports it.
 */
import type { Graph } from '../../ir.js';
import { type CompileTarget, lowerFor, registerCompileTarget } from '../../target.js';
import type { BackendOptions } from '../../backend.js';
import { WEBGPU_FUSION } from './fusion.js';
import { WgslProgram } from './program.js';

export const webgpuTarget: CompileTarget = {
  description: 'webgpu: WGSL kernels (fused pointwise chains, reductions, row kernels) through Dawn',
  fusion: WEBGPU_FUSION,
  program: (low, sched) => new WgslProgram(low, sched),
  compile: (graph, _device, options) => compileWgsl(graph, options),
};

registerCompileTarget('webgpu', webgpuTarget);

/** Lowers, schedules and builds a graph's WgslProgram. */
export function compileWgsl(graph: Graph, options: Partial<BackendOptions> = {}): WgslProgram {
  const { low, sched } = lowerFor(graph, webgpuTarget);
  const p = new WgslProgram(low, sched);
  if (options.logCode) console.log(p.describe());
  return p;
}
