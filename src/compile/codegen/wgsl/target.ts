/**
 * The 'webgpu' compile target: WGSL kernels for fused pointwise chains, reductions and row kernels
 * (softmax, logSoftmax, layerNorm, rmsNorm), rendered by the renderer the eager webgpu kernels
 * share and launched through the accelerator's launchKernel (WgslProgram); what WEBGPU_FUSION
 * refuses runs through dispatch. Programs are cached on disk with their WGSL sources and config
 * decisions (program-cache.ts); in mode 'max-autotune' each kernel's configs are timed with device
 * timestamps on its first run (tune.ts); in mode 'reduce-overhead' calls are recorded once and
 * replayed (replay.ts). Registers itself for 'webgpu'; kiln-backend.ts imports it.
 */
import type { Graph } from '../../ir.js';
import { type CompileTarget, lowerFor, registerCompileTarget } from '../../target.js';
import type { BackendOptions } from '../../backend.js';
import { WEBGPU_FUSION } from './fusion.js';
import { decodeMode } from '../../mode.js';
import { WgslProgram, type WgslProgramOptions } from './program.js';
import { compileWgslWithCache } from './program-cache.js';
import { replayRefusal, WgslReplayProgram } from './replay.js';
import type { CompiledProgram } from '../../backend.js';
import { getOption } from '../../../runtime/config.js';

const WHOLE: ReadonlySet<string> = new Set(['sigmoid', 'silu']);

export const webgpuTarget: CompileTarget = {
  description: 'webgpu: WGSL kernels (fused pointwise chains, reductions, row kernels) through Dawn',
  // sigmoid and silu whole: their fast forms (wgsl-libm/fast.ts) take one exp2 and a division whose
  // divisor is in [1, 2], where the decomposition's reciprocal needs kiln_div's range branch and
  // its exp a clamp and a NaN select of its own.
  get nativeComposites() {
    return getOption('KILN_WEBGPU_NATIVE_COMPOSITES') ? WHOLE : undefined;
  },
  fusion: WEBGPU_FUSION,
  program: (low, sched, _device, options) => new WgslProgram(low, sched, { tuneOnFirstRun: decodeMode(options.mode).tuneOnFirstRun }),
  compile: (graph, _device, options) => withReplay(graph, compileWgsl(graph, options), options),
};

/**
 * Recorded replay (replay.ts), unless KILN_WEBGPU_REPLAY=0. Mode 'reduce-overhead': every program,
 * its outputs aliasing static buffers, as a CUDA graph's do in that mode. Other modes: programs of
 * at least KILN_WEBGPU_REPLAY_MIN_STEPS kernel and extern steps (a model's forward: hundreds of
 * dispatches, each costing the host more than the GPU), each call's outputs copied out of the
 * static buffers, as cuda's default mode replays graphs; a program of a few steps gains nothing
 * from a replay and would pay the copies.
 */
function withReplay(graph: Graph, program: WgslProgram, options: Partial<BackendOptions>): CompiledProgram {
  if (!getOption('KILN_WEBGPU_REPLAY')) return program;
  if (decodeMode(options.mode).aliasOutputs) return new WgslReplayProgram(program, replayRefusal(graph), true);
  if (program.stats.kernels + program.stats.externs < getOption('KILN_WEBGPU_REPLAY_MIN_STEPS')) return program;
  return new WgslReplayProgram(program, replayRefusal(graph), false);
}

registerCompileTarget('webgpu', webgpuTarget);

/**
 * Lowers, schedules and builds a graph's WgslProgram, through the disk cache when `options` carry
 * kiln.compile's cache context. `programOptions` (tests) adds to what the mode decides.
 */
export function compileWgsl(graph: Graph, options: Partial<BackendOptions> = {}, programOptions: WgslProgramOptions = {}): WgslProgram {
  const popts: WgslProgramOptions = { tuneOnFirstRun: decodeMode(options.mode).tuneOnFirstRun, ...programOptions };
  const build = (): WgslProgram => {
    const { low, sched } = lowerFor(graph, webgpuTarget);
    return new WgslProgram(low, sched, popts);
  };
  const p = options.cacheContext ? compileWgslWithCache(graph, { mode: options.mode ?? 'default', logCode: false, ...options }, popts, build) : build();
  if (options.logCode) console.log(p.describe());
  return p;
}
