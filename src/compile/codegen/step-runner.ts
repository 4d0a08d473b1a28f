/**
 * The step runner: what a compiled program does with its scheduled steps, whatever its target.
 * Per call it takes the plan of every value's metadata for the inputs' layouts (layout-plan.ts,
 * memoised), keeps an environment of values, runs extern steps through the dispatcher, turns view
 * steps into tensors where an extern or the caller needs one and otherwise into Refs (metadata over
 * a base, read by kernels as strides and an offset), allocates kernel outputs exactly as the meta
 * functions describe them, reusing the storage of intermediates whose lifetime ended (same byte
 * size: `deaths`), and builds the outputs with buildOutput. `listing` is the wrapper part of
 * describe().
 *
 * The target supplies what differs (StepHooks): running a kernel step (cpu: a generated JS/C/Wasm
 * function over typed arrays; cuda: a specialised CUDA kernel launched through the CudaLauncher),
 * gemm steps (cpu only: lower/gemm.ts), and a first refusal at extern nodes (cpu: attention on the
 * Wasm GEMM). KilnProgram (codegen/js/program.ts) and CudaProgram (codegen/cuda/program.ts) run
 * on it; the piecewise CUDA-graph program shares the extern step and the argument resolution
 * (`runExternNode`, `argResolver`): its header says why not the loop.
 */
import { dispatch } from '../../ops/dispatch.js';
import { getOp } from '../../ops/registry.js';
import { itemSize, type DType } from '../../tensor/dtype.js';
import type { Storage } from '../../tensor/storage.js';
import { storageSpan, Tensor } from '../../tensor/tensor.js';
import { buildOutput } from '../interpret.js';
import type { IRArg, ValueId } from '../ir.js';
import { evalSym, outputValues } from '../ir.js';
import type { GemmStep } from '../lower/gemm.js';
import { type LNode, type Lowered, type MetaLike, nodeInputs, nodeMeta, symInputs } from '../lower/lower.js';
import type { KernelGroup, Step } from '../lower/schedule.js';
import { planValueMetas } from './layout-plan.js';

/** A view value read by kernels without building a tensor. */
export interface Ref {
  readonly ref: true;
  readonly base: Tensor;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  readonly dtype: DType;
  readonly device: Tensor['device'];
}
export type RVal = Tensor | Ref;

/** The steps a program runs: the schedule's, with float32 linears as gemm steps on the cpu. */
export type ProgramStep = Step | GemmStep;

/** One call's state, handed to the target's hooks. */
export interface RunState {
  /** Every value's metadata for this call's input layouts. */
  readonly plan: Map<ValueId, MetaLike>;
  readonly env: Map<ValueId, RVal>;
  /** Storage of dead intermediates by byte size, for `alloc`. */
  readonly pool: Map<number, Tensor[]>;
  /** An IR argument as the dispatcher takes it (Refs become tensors). */
  readonly resolve: (a: IRArg) => unknown;
}

/** What a target runs itself. */
export interface StepHooks {
  /** A fused kernel: allocate its outputs with `runner.alloc`, bind them in `env`, run it. */
  kernel(g: KernelGroup, st: RunState): void;
  /** A gemm step (targets whose programs make them). */
  gemm?(s: GemmStep, st: RunState): void;
  /** First refusal at an extern node: true when the target ran it (else it is dispatched). */
  extern?(n: LNode, st: RunState): boolean;
}

/** The counters the runner keeps in its program's stats. */
export interface RunnerStats {
  /** Kernel output buffers newly allocated / taken over from dead intermediates (cumulative). */
  buffersAllocated: number;
  buffersReused: number;
  runs: number;
}

/**
 * A step's label for profiles: a kernel's ops and its first output's shape ('pointwise mul+add
 * [128, 1024]'); an extern or GEMM step's op with its tensor inputs' shapes and its first output's
 * ('gemm matmul [128, 1024] [1024, 2048] -> [128, 2048]'), so steps of different sizes add up apart.
 */
export function stepLabel(s: ProgramStep, plan: ReadonlyMap<ValueId, MetaLike>): string {
  const shapeOf = (id: ValueId | undefined): string | undefined => {
    const shape = id === undefined ? undefined : plan.get(id)?.shape;
    return shape === undefined ? undefined : `[${shape.join(', ')}]`;
  };
  const out = shapeOf(stepOutputs(s)[0]);
  if (s.kind === 'kernel') return `${s.group.kind} ${s.group.nodes.map((n) => n.op).join('+')}${out ? ` ${out}` : ''}`;
  const ins = stepInputs(s).map(shapeOf).filter((x) => x !== undefined);
  return `${s.kind} ${s.node.op}${ins.length > 0 ? ` ${ins.join(' ')}` : ''}${out ? ` -> ${out}` : ''}`;
}

export function stepOutputs(s: ProgramStep): readonly ValueId[] {
  if (s.kind === 'kernel') return s.group.outputs;
  if (s.kind === 'gemm' && s.epilogue) return s.epilogue.outputs;
  return s.node.outputs;
}

export function stepInputs(s: ProgramStep): ValueId[] {
  if (s.kind === 'kernel') return s.group.inputs;
  const ins = nodeInputs(s.node);
  if (s.kind === 'gemm') for (const e of s.epilogueInputs) ins.push(e.id);
  return ins;
}

const asTensor = (v: RVal): Tensor => ('ref' in v ? new Tensor(v.base.storage, v.dtype, v.shape, v.strides, v.offset) : v);

/** Resolves IR arguments: values through `value`, lists item by item, constants as they are. */
export function argResolver(value: (id: ValueId) => unknown): (a: IRArg) => unknown {
  const resolve = (a: IRArg): unknown => {
    switch (a.kind) {
      case 'value':
        return value(a.id);
      case 'list':
        return a.items.map(resolve);
      case 'const':
        return a.value;
      case 'sym':
        // Symbolic sizes read only graph inputs, which stay bound for the whole call.
        return evalSym(a.expr, (id) => (value(id) as { shape: readonly number[] }).shape);
      default:
        return a satisfies never;
    }
  };
  return resolve;
}

/** Calls a node's op through the dispatcher and binds its outputs in `env`; returns them. */
export function runExternNode(n: { readonly op: string; readonly args: readonly IRArg[]; readonly outputs: readonly ValueId[] }, env: { set(id: ValueId, t: Tensor): unknown }, resolve: (a: IRArg) => unknown): Tensor[] {
  const out = dispatch(getOp(n.op), ...(n.args.map(resolve) as never[])) as Tensor | Tensor[];
  const outs = Array.isArray(out) ? out : [out];
  n.outputs.forEach((id, k) => env.set(id, outs[k]!));
  return outs;
}

export class StepRunner {
  readonly outputs: Set<ValueId>;
  /** Values that must exist as real tensors (used by externs or returned). */
  readonly needsTensor = new Set<ValueId>();
  /** Per step: owned values whose storage dies after it. */
  readonly deaths: ValueId[][];
  private readonly plans = new Map<string, Map<ValueId, MetaLike>>();

  constructor(
    readonly low: Lowered,
    readonly steps: readonly ProgramStep[],
    private readonly stats: RunnerStats,
    private readonly hooks: StepHooks,
  ) {
    this.outputs = new Set(outputValues(low.graph.output));
    for (const id of this.outputs) this.needsTensor.add(id);
    for (const s of steps) if (s.kind === 'extern' || s.kind === 'gemm') for (const id of nodeInputs(s.node)) this.needsTensor.add(id);
    // The fallback of a gemm step runs its epilogue kernel on the extern's real output.
    for (const s of steps) if (s.kind === 'gemm' && s.epilogue) this.needsTensor.add(s.node.outputs[0]!);
    // A view needed as a tensor needs its base as a tensor too.
    for (let i = steps.length - 1; i >= 0; i--) {
      const s = steps[i]!;
      if (s.kind === 'view' && this.needsTensor.has(s.node.outputs[0]!)) for (const id of nodeInputs(s.node)) this.needsTensor.add(id);
    }
    this.deaths = this.planLifetimes();
  }

  /** Which storage root each value lives in, and after which step each owned root dies. */
  private planLifetimes(): ValueId[][] {
    const root = new Map<ValueId, ValueId>();
    const owned = new Set<ValueId>();
    const rootOf = (id: ValueId): ValueId => root.get(id) ?? id;
    for (const inp of this.low.graph.inputs) root.set(inp.id, inp.id);
    const last = new Map<ValueId, number>();
    this.steps.forEach((s, i) => {
      for (const o of stepOutputs(s)) {
        const info = this.low.values.get(o)!;
        if (s.kind === 'kernel' || s.kind === 'gemm') owned.add(o);
        else if (s.kind === 'view') root.set(o, rootOf(nodeInputs(s.node)[0]!));
        else if (info.aliasOf !== undefined) root.set(o, rootOf(info.aliasOf));
        else owned.add(o);
        if (!last.has(rootOf(o))) last.set(rootOf(o), i);
      }
      for (const id of stepInputs(s)) last.set(rootOf(id), Math.max(last.get(rootOf(id)) ?? i, i));
    });
    const pinned = new Set([...this.outputs].map(rootOf));
    const deaths: ValueId[][] = this.steps.map(() => []);
    for (const r of owned) {
      if (pinned.has(r) || rootOf(r) !== r) continue;
      deaths[last.get(r)!]!.push(r);
    }
    return deaths;
  }

  /** Every value's metadata for these inputs (memoised per input layout). */
  plan(inputs: readonly Tensor[]): Map<ValueId, MetaLike> {
    return planValueMetas(this.low, inputs, this.plans);
  }

  /**
   * Runs every step on `inputs`; `onStep` is called after each step with its index and a label
   * (stepLabel: what it runs and the shape of its first output, for the profiling benches).
   */
  run(inputs: readonly Tensor[], onStep?: (step: number, label: string) => void): unknown {
    const plan = this.plan(inputs);
    const env = new Map<ValueId, RVal>();
    this.low.graph.inputs.forEach((inp, i) => env.set(inp.id, inputs[i]!));
    const pool = new Map<number, Tensor[]>();
    const inputSet = new Set(inputs);
    this.stats.runs++;
    const st: RunState = { plan, env, pool, resolve: argResolver((id) => asTensor(env.get(id)!)) };
    this.steps.forEach((s, i) => {
      this.runStep(s, st);
      onStep?.(i, stepLabel(s, plan));
      for (const id of this.deaths[i]!) {
        const t = env.get(id);
        if (!t || 'ref' in t || inputSet.has(t)) continue;
        const bytes = t.storage.nbytes;
        const list = pool.get(bytes) ?? [];
        list.push(t);
        pool.set(bytes, list);
        env.delete(id);
      }
    });
    const tensors = new Map<ValueId, Tensor>();
    for (const id of this.outputs) tensors.set(id, asTensor(env.get(id)!));
    for (const list of pool.values()) for (const t of list) t.dispose();
    return buildOutput(this.low.graph.output, tensors);
  }

  private runStep(s: ProgramStep, st: RunState): void {
    switch (s.kind) {
      case 'extern':
        this.extern(s.node, st);
        return;
      case 'view':
        this.view(s.node, st);
        return;
      case 'kernel':
        this.hooks.kernel(s.group, st);
        return;
      case 'gemm':
        if (!this.hooks.gemm) throw new Error(`kiln: a gemm step (${s.node.op}) in a program whose target runs none`);
        this.hooks.gemm(s, st);
        return;
      default:
        return s satisfies never;
    }
  }

  /** An extern node: the target's own way if it takes it, else the dispatcher. */
  extern(n: LNode, st: RunState): void {
    if (this.hooks.extern?.(n, st)) return;
    runExternNode(n, st.env, st.resolve);
  }

  private view(n: LNode, st: RunState): void {
    const { env } = st;
    const out = n.outputs[0]!;
    if (this.needsTensor.has(out)) {
      env.set(out, dispatch(getOp(n.op), ...(n.args.map(st.resolve) as never[])) as Tensor);
      return;
    }
    const base = env.get(nodeInputs(n)[0]!)!;
    const metas = new Map<ValueId, MetaLike>();
    // Symbolic sizes in the view's arguments read graph inputs' shapes (bound for the whole call).
    for (const id of n.args.flatMap(symInputs)) metas.set(id, env.get(id) as MetaLike);
    metas.set(nodeInputs(n)[0]!, base as MetaLike);
    const [m] = nodeMeta(n, metas);
    env.set(out, { ref: true, base: 'ref' in base ? base.base : base, shape: m!.shape, strides: m!.strides, offset: m!.offset, dtype: m!.dtype, device: m!.device });
  }

  /** A tensor laid out as `m`, over the storage of a dead intermediate of the same byte size if any. */
  alloc(m: MetaLike, pool: Map<number, Tensor[]>): Tensor {
    const bytes = storageSpan(m.shape, m.strides) * itemSize(m.dtype);
    const old = pool.get(bytes)?.pop();
    if (old) {
      const t = new Tensor(old.storage as Storage, m.dtype, m.shape, m.strides, 0);
      old.dispose();
      this.stats.buffersReused++;
      return t;
    }
    this.stats.buffersAllocated++;
    return Tensor.empty(m.shape, m.dtype, m.device, m.strides);
  }

  /**
   * The wrapper's listing for describe(): inputs, each step (kernels as `kernelCall(g)` with their
   * operands, gemm steps as `gemmLine` says), the buffers freed for reuse after it, the outputs.
   */
  listing(header: string, kernelCall: (g: KernelGroup) => string, gemmLine?: (s: GemmStep, v: (id: ValueId) => string) => string): string {
    const v = (id: ValueId): string => {
      const m = this.low.values.get(id)!;
      return `%${id}: ${m.dtype}[${m.shape.join(', ')}]`;
    };
    const lines = [header, ...this.low.graph.inputs.map((i) => `input ${v(i.id)}`)];
    this.steps.forEach((s, i) => {
      if (s.kind === 'gemm') {
        if (gemmLine) lines.push(gemmLine(s, v));
      } else if (s.kind === 'kernel') {
        lines.push(s.group.outputs.map((o) => `alloc-or-reuse ${v(o)}`).join('; '));
        lines.push(`${kernelCall(s.group)}(out: ${s.group.outputs.map((o) => `%${o}`).join(', ')}; in: ${s.group.inputs.map((o) => `%${o}`).join(', ')})`);
      } else if (s.kind === 'view') {
        lines.push(`${v(s.node.outputs[0]!)} = view ${s.node.op}(%${nodeInputs(s.node)[0]}) ${this.needsTensor.has(s.node.outputs[0]!) ? '(tensor)' : '(index expression)'}`);
      } else {
        lines.push(`${s.node.outputs.map(v).join(', ')} = extern ${s.node.op}(${nodeInputs(s.node).map((id) => `%${id}`).join(', ')})`);
      }
      if (this.deaths[i]!.length > 0) lines.push(`free-for-reuse ${this.deaths[i]!.map((id) => `%${id}`).join(', ')}`);
    });
    lines.push(`return ${[...this.outputs].map((id) => `%${id}`).join(', ')}`);
    return lines.join('\n');
  }
}
