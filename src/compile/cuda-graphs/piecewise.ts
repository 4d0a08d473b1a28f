/**
 * Piecewise CUDA graphs: a call that cannot be captured whole (an op whose cuda kernel synchronises
 * with the host, e.g. scatterAdd validating its indices on the host) is split at those ops. The
 * graph's nodes become pieces in order: maximal runs of capturable nodes, each compiled as its own
 * CudaProgram and replayed as its own CUDA graph, and the synchronising nodes, run eagerly through
 * the dispatcher between them.
 *
 * A piece's inputs are the values it reads from outside it. Values made by an earlier captured
 * piece live in that piece's static output buffers, whose addresses never change, so the later
 * piece captures them in place (no copy); values made by an eager node, and the call's arguments,
 * are copied into the piece's static buffers at replay; lifted inputs are captured in place as in a
 * whole-call graph. The call's outputs come from static buffers too: lent (copied out only if still
 * alive at the piece's next replay) unless the mode is 'reduce-overhead' (then they alias the
 * buffers and the next replay overwrites them).
 *
 * Its run shares the step runner's extern step and argument resolution (codegen/step-runner.ts),
 * not its loop: the pieces are not the schedule's steps but sub-programs (each on the runner
 * itself) and eager nodes; it allocates nothing, so there is no buffer plan or reuse (reusing a
 * piece's output storage would be wrong anyway: it is a static graph buffer that the piece's next
 * replay overwrites); there are no views (they stay inside the pieces); and at the end it disposes
 * every tensor the call made that is neither returned nor an input, aliases included, where the
 * runner frees only owned storage roots.
 */
import type { Tensor } from '../../tensor/tensor.js';
import type { CompiledProgram } from '../backend.js';
import { cudaProgram } from '../codegen/cuda/backend.js';
import type { RuntimeLauncher } from '../codegen/cuda/runtime-launcher.js';
import { argResolver, runExternNode } from '../codegen/step-runner.js';
import { buildOutput } from '../interpret.js';
import { argValues, type Graph, type IRNode, outputValues, type ValueId, type ValueInfo } from '../ir.js';
import { CudaGraphProgram } from './graph-program.js';

/**
 * Ops whose cuda kernels read device data back to the host, which no CUDA graph can contain:
 * scatterAdd checks its indices there (src/kernels/cuda/scatter-add.ts), llm.fusedMoe reads its
 * per-expert counts (src/kernels/cuda/llm-moe.ts). The gathers (embedding, indexSelect, gather)
 * check their indices on the device (runtime/cuda/device-errors.ts) and are captured like any op.
 */
export const HOST_SYNC_OPS: ReadonlySet<string> = new Set(['scatterAdd', 'scatterAdd_', 'llm.fusedMoe']);

type Piece =
  | { readonly kind: 'graph'; readonly program: CudaGraphProgram; readonly inputs: readonly ValueId[]; readonly outputs: readonly ValueId[] }
  | { readonly kind: 'eager'; readonly node: IRNode };

export interface PiecewiseOptions {
  readonly tuneOnFirstRun: boolean;
  readonly aliasOutputs: boolean;
  /**
   * The ops run eagerly between pieces (default HOST_SYNC_OPS); graph-program.ts adds the op of
   * the step at which a whole-call capture failed, so an op not known to synchronise is also
   * worked around.
   */
  readonly syncOps?: ReadonlySet<string>;
}

/** True when `graph` has a node that cannot be captured and a capturable run around it. */
export function splittable(graph: Graph, syncOps: ReadonlySet<string> = HOST_SYNC_OPS): boolean {
  return graph.nodes.some((n) => syncOps.has(n.op)) && graph.nodes.some((n) => !syncOps.has(n.op));
}

export class PiecewiseGraphProgram implements CompiledProgram {
  private readonly pieces: Piece[] = [];

  constructor(
    readonly graph: Graph,
    launcher: RuntimeLauncher,
    options: PiecewiseOptions,
  ) {
    const made = new Map<ValueId, 'arg' | 'lifted' | 'graph' | 'eager'>();
    for (const inp of graph.inputs) made.set(inp.id, inp.source.kind === 'arg' ? 'arg' : 'lifted');
    // Values read after position i (by later nodes or as outputs) decide each piece's outputs.
    const finalOut = new Set(outputValues(graph.output));
    const readAfter = (from: number): Set<ValueId> => {
      const s = new Set(finalOut);
      for (let k = from; k < graph.nodes.length; k++) for (const a of graph.nodes[k]!.args) for (const id of argValues(a)) s.add(id);
      return s;
    };
    let run: IRNode[] = [];
    const closeRun = (end: number): void => {
      if (run.length === 0) return;
      const inside = new Set(run.flatMap((n) => n.outputs));
      const ins: ValueId[] = [];
      for (const n of run) for (const a of n.args) for (const id of argValues(a)) if (!inside.has(id) && !ins.includes(id)) ins.push(id);
      const later = readAfter(end);
      const outs = run.flatMap((n) => n.outputs).filter((id) => later.has(id));
      const sub = subgraph(graph, run, ins, outs);
      const program = cudaProgram(sub, launcher, { tuneOnFirstRun: options.tuneOnFirstRun, flush: () => launcher.flushL2() });
      // Graph-made values are captured in place (static addresses); the rest are copied in.
      const isArg = ins.map((id) => made.get(id) === 'arg' || made.get(id) === 'eager');
      this.pieces.push({ kind: 'graph', program: new CudaGraphProgram(program, launcher, 'always', isArg, options.aliasOutputs), inputs: ins, outputs: outs });
      for (const id of outs) made.set(id, 'graph');
      run = [];
    };
    const syncOps = options.syncOps ?? HOST_SYNC_OPS;
    graph.nodes.forEach((n, i) => {
      if (!syncOps.has(n.op)) {
        run.push(n);
        return;
      }
      closeRun(i);
      this.pieces.push({ kind: 'eager', node: n });
      for (const id of n.outputs) made.set(id, 'eager');
    });
    closeRun(graph.nodes.length);
  }

  /** The captured pieces' programs, in order. */
  graphPieces(): CudaGraphProgram[] {
    return this.pieces.flatMap((p) => (p.kind === 'graph' ? [p.program] : []));
  }

  get kernelCount(): number {
    return this.graphPieces().reduce((n, p) => n + p.kernelCount, 0);
  }

  describe(): string {
    return this.pieces
      .map((p, i) => (p.kind === 'graph' ? `// piece ${i}: CUDA graph\n${p.program.describe()}` : `// piece ${i}: eager ${p.node.op} (synchronises with the host)`))
      .join('\n\n');
  }

  run(inputs: readonly Tensor[]): unknown {
    const env = new Map<ValueId, Tensor>();
    this.graph.inputs.forEach((inp, i) => env.set(inp.id, inputs[i]!));
    const made: Tensor[] = [];
    const resolve = argResolver((id) => env.get(id));
    for (const p of this.pieces) {
      if (p.kind === 'eager') {
        made.push(...runExternNode(p.node, env, resolve));
        continue;
      }
      const outs = p.program.run(p.inputs.map((id) => env.get(id)!)) as Tensor[];
      p.outputs.forEach((id, k) => env.set(id, outs[k]!));
      made.push(...outs);
    }
    const finals = new Map<ValueId, Tensor>();
    for (const id of outputValues(this.graph.output)) {
      const t = env.get(id)!;
      // Outside 'reduce-overhead' the pieces lend their outputs (graph-program.ts): a result still
      // alive when its piece replays again is copied out first, so no clone is needed here.
      finals.set(id, t);
    }
    const keepT = new Set(finals.values());
    for (const t of made) if (!keepT.has(t) && !inputs.includes(t)) t.dispose();
    return buildOutput(this.graph.output, finals);
  }
}

/** The graph of `nodes` alone: `ins` become its inputs (as arguments), `outs` its outputs. */
function subgraph(graph: Graph, nodes: readonly IRNode[], ins: readonly ValueId[], outs: readonly ValueId[]): Graph {
  const values = new Map<ValueId, ValueInfo>();
  const add = (id: ValueId): void => {
    const v = graph.values.get(id);
    if (!v) return;
    // A view of a value outside the piece is an input of its own here: drop the alias.
    values.set(id, v.aliasOf !== undefined && !values.has(v.aliasOf) ? { ...v, aliasOf: undefined } : v);
  };
  for (const id of ins) add(id);
  for (const n of nodes) for (const id of n.outputs) add(id);
  return {
    inputs: ins.map((id, k) => ({ id, source: { kind: 'arg', path: [k] } })),
    nodes,
    values,
    output: { kind: 'list', items: outs.map((id) => ({ kind: 'tensor', id })) },
  };
}
