/**
 * The `kiln` backend's path for graphs whose tensors live on a cuda device: lowering and scheduling
 * as on the cpu, CUDA C per fused kernel (src/compile/codegen/cuda), extern nodes (GEMM through
 * cuBLASLt, attention, convolution, anything not fused) through the eager cuda kernels, kernels
 * compiled in the compile worker pool, and the whole call replayed as a CUDA graph where the mode
 * asks for it or it measures faster (graph-program.ts). In mode 'max-autotune' every kernel's
 * configs are timed on its first run with kiln.Event, the L2 cache flushed before each timed run.
 */
import type { BackendOptions, CompiledProgram } from '../backend.js';
import { cudaProgram } from '../codegen/cuda/backend.js';
import { cudaRuntimeLauncher } from '../codegen/cuda/runtime-launcher.js';
import { getOp } from '../../ops/registry.js';
import type { Graph, ValueId } from '../ir.js';
import { decodeMode } from '../mode.js';
import { getOption, parseOption } from '../../runtime/config.js';
import { decisionStore } from './decision-store.js';
import { CudaGraphProgram, type GraphPolicy } from './graph-program.js';
import { HOST_SYNC_OPS, PiecewiseGraphProgram, splittable } from './piecewise.js';

/** The cuda device of a graph's values, or null when none lives on cuda. */
export function cudaDeviceOf(graph: Graph): number | null {
  for (const v of graph.values.values()) if (v.device.type === 'cuda') return v.device.index;
  return null;
}

/**
 * KILN_CUDA_GRAPHS=0 turns graphs off (every call launches its kernels one by one), =1 replays
 * them in every mode without measuring; unset: mode 'reduce-overhead' always, other modes where
 * measured faster on the first call of each input signature. `env` (tests) stands in for the
 * variable's value.
 */
export function graphPolicy(mode: BackendOptions['mode'], env?: string): GraphPolicy {
  const graphs = env === undefined ? getOption('KILN_CUDA_GRAPHS') : parseOption('KILN_CUDA_GRAPHS', env);
  if (graphs !== undefined) return graphs ? 'always' : 'off';
  return decodeMode(mode).cudaGraphs;
}

/**
 * The first op that writes a function argument in place (an arg declared \`mutated\` whose value is,
 * or views, an argument input), or null. A CUDA graph replays on static copies of the arguments
 * (and the 'measure' policy runs the call several times to time it), so such a call runs kernel
 * by kernel, writing the caller's tensors exactly once.
 */
export function argumentWriter(graph: Graph): string | null {
  const args = new Set(graph.inputs.filter((i) => i.source.kind === 'arg').map((i) => i.id));
  const root = (id: ValueId): ValueId => {
    let cur = id;
    for (let v = graph.values.get(cur); v?.aliasOf !== undefined; v = graph.values.get(cur)) cur = v.aliasOf;
    return cur;
  };
  for (const n of graph.nodes) {
    const spec = getOp(n.op).args;
    for (let i = 0; i < n.args.length; i++) {
      const a = n.args[i]!;
      if (spec[i]?.mutated === true && a.kind === 'value' && args.has(root(a.id))) return n.op;
    }
  }
  return null;
}

export function compileForCuda(graph: Graph, deviceIndex: number, options: BackendOptions): CompiledProgram {
  const launcher = cudaRuntimeLauncher(deviceIndex);
  const mode = decodeMode(options.mode);
  const program = cudaProgram(graph, launcher, { tuneOnFirstRun: mode.tuneOnFirstRun, flush: () => launcher.flushL2() });
  if (options.logCode) console.log(program.describe());
  const isArg = graph.inputs.map((i) => i.source.kind === 'arg');
  const aliasOutputs = mode.aliasOutputs;
  // Split at the known host-synchronising ops and at the op the failed whole-call capture stopped at.
  const split = (failedOp: string | undefined): PiecewiseGraphProgram | null => {
    const syncOps = failedOp === undefined ? HOST_SYNC_OPS : new Set([...HOST_SYNC_OPS, failedOp]);
    return splittable(graph, syncOps) ? new PiecewiseGraphProgram(graph, launcher, { tuneOnFirstRun: mode.tuneOnFirstRun, aliasOutputs, syncOps }) : null;
  };
  const gp = new CudaGraphProgram(program, launcher, graphPolicy(options.mode), isArg, aliasOutputs, split, () => decisionStore(options, deviceIndex));
  const writer = argumentWriter(graph);
  if (writer !== null && gp.stats.disabled === null) gp.stats.disabled = `the call writes its arguments in place (${writer}); graphs would write static copies`;
  return gp;
}
