/**
 * A compiled program on a CUDA device: the counterpart of the JS KilnProgram (codegen/js/program.ts)
 * with the same step semantics. Kernel steps allocate their outputs as the meta functions describe
 * them (reusing the storage of dead intermediates of the same byte size), extern steps (GEMM,
 * attention, anything not fused) call the eager dispatcher on cuda tensors, and views read only by
 * kernels become strides and offsets. Generated kernels are launched through a CudaLauncher.
 *
 * Per call the layout of every kernel is computed from the real tensors; its spec (ranks, broadcast
 * and unit strides, dtypes, index width) picks a generated kernel, so new sizes of symbolic dims
 * reuse compiled code and only a new spec generates and compiles again. The chosen config (by the
 * autotune hook, or timed on the first run in max-autotune mode) falls back per call to the first
 * candidate that can run the layout (vector widths need divisible sizes and aligned operands).
 */
import { dispatch } from '../../../ops/dispatch.js';
import { getOp } from '../../../ops/registry.js';
import { itemSize, type DType } from '../../../tensor/dtype.js';
import { storageSpan, Tensor } from '../../../tensor/tensor.js';
import type { Storage } from '../../../tensor/storage.js';
import type { CompiledProgram } from '../../backend.js';
import { buildOutput } from '../../interpret.js';
import type { IRArg, ValueId } from '../../ir.js';
import { outputValues } from '../../ir.js';
import { type Lowered, type MetaLike, nodeInputs, nodeMeta } from '../../lower/lower.js';
import type { KernelGroup, Schedule, Step } from '../../lower/schedule.js';
import { planValueMetas } from '../layout-plan.js';
import { autotune } from '../../autotune/index.js';
import { kernelSourceHash } from '../../../runtime/pool/index.js';
import { packArgs } from './args.js';
import { intArg } from './configs.js';
import { type CudaKernelCode, type CudaVariant, generateCudaKernel } from './generate.js';
import { type KernelLayout, kernelLayout, type KernelSpec, kernelSpec, specKey, type ValueLayout } from './layout.js';
import type { CudaLauncher, KernelHandle } from './launcher.js';

/** A view value read by kernels without building a tensor. */
interface Ref {
  readonly ref: true;
  readonly base: Tensor;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
  readonly dtype: DType;
  readonly device: Tensor['device'];
}
type RVal = Tensor | Ref;

/** Dynamic shared memory of any generated kernel at most: one 8-byte slot per warp of a 1024-thread block. */
const MAX_DYNAMIC_SHARED = 32 * 8;

/** Picks a candidate index for a kernel (the autotuner plugs in here). */
export type CudaAutotuneHook = (kernel: { name: string; candidates: readonly CudaVariant[] }) => number;

export interface CudaProgramStats {
  readonly kernels: number;
  readonly externs: number;
  readonly views: number;
  buffersAllocated: number;
  buffersReused: number;
  /** Kernel launches issued (a split reduction counts two). */
  launches: number;
  /** Distinct (kernel, spec) pairs generated. */
  specializations: number;
  /** Calls that ran a fallback because the chosen config could not run their layout. */
  fallbacks: number;
  runs: number;
}

interface Specialized {
  readonly code: CudaKernelCode;
  chosen: number;
  tuned: boolean;
  readonly handles: Map<number, KernelHandle[] | Promise<KernelHandle[]>>;
}

export interface CudaProgramOptions {
  autotune?: CudaAutotuneHook;
  /** Time every applicable config on the first run of each kernel spec (mode 'max-autotune'). */
  tuneOnFirstRun?: boolean;
  /** Run before each timed tuning run, outside the timed region (the L2 flush; s2-cudaint). */
  flush?: () => void;
}

function sameOffsets(a: readonly number[], ts: readonly Tensor[]): boolean {
  for (let k = 0; k < a.length; k++) if (a[k] !== ts[k]!.offset) return false;
  return true;
}

export class CudaProgram implements CompiledProgram {
  readonly stats: CudaProgramStats;
  private readonly layoutMemo = new Map<KernelGroup, { plan: Map<ValueId, MetaLike>; offsets: number[]; L: KernelLayout; spec: KernelSpec; s: Specialized }>();
  /** Called after each step is enqueued, with its label (tools: bench/cuda-profile.ts records an event there). */
  onStep: ((step: number, label: string) => void) | undefined;
  private readonly specialized = new Map<KernelGroup, Map<string, Specialized>>();
  private readonly names = new Map<KernelGroup, string>();
  private readonly plans = new Map<string, Map<ValueId, MetaLike>>();
  private readonly needsTensor = new Set<ValueId>();
  private readonly outputs: Set<ValueId>;
  private readonly deaths: ValueId[][];

  constructor(
    readonly low: Lowered,
    readonly sched: Schedule,
    readonly launcher: CudaLauncher,
    private readonly options: CudaProgramOptions = {},
  ) {
    sched.kernels.forEach((g, i) => this.names.set(g, `kiln_k${i}_${g.kind}`));
    this.outputs = new Set(outputValues(low.graph.output));
    for (const id of this.outputs) this.needsTensor.add(id);
    for (const s of sched.steps) if (s.kind === 'extern') for (const id of nodeInputs(s.node)) this.needsTensor.add(id);
    for (let i = sched.steps.length - 1; i >= 0; i--) {
      const s = sched.steps[i]!;
      if (s.kind === 'view' && this.needsTensor.has(s.node.outputs[0]!)) for (const id of nodeInputs(s.node)) this.needsTensor.add(id);
    }
    this.deaths = this.planLifetimes();
    this.stats = {
      kernels: sched.kernels.length,
      externs: sched.steps.filter((s) => s.kind === 'extern').length,
      views: sched.steps.filter((s) => s.kind === 'view').length,
      buffersAllocated: 0,
      buffersReused: 0,
      launches: 0,
      specializations: 0,
      fallbacks: 0,
      runs: 0,
    };
    // Generate for the traced layouts now, so describe() and the autotune hook see real code.
    const traced = (id: ValueId): ValueLayout => low.values.get(id)!;
    for (const g of sched.kernels) this.specialize(g, kernelLayout(g, traced));
  }

  get kernelCount(): number {
    return this.sched.kernels.length;
  }

  /** The generated code of every kernel for every spec seen so far. */
  generated(): CudaKernelCode[] {
    return [...this.specialized.values()].flatMap((m) => [...m.values()].map((s) => s.code));
  }

  private specialize(g: KernelGroup, L: KernelLayout): Specialized {
    const key = specKey(kernelSpec(L));
    let bySpec = this.specialized.get(g);
    if (!bySpec) this.specialized.set(g, (bySpec = new Map()));
    let s = bySpec.get(key);
    if (s) return s;
    const base = this.names.get(g)!;
    const code = generateCudaKernel(g, this.low, L, bySpec.size === 0 ? base : `${base}_s${bySpec.size}`, this.launcher.target);
    const pick = this.options.autotune ? this.options.autotune({ name: code.name, candidates: code.candidates }) : 0;
    const chosen = Math.max(0, Math.min(code.candidates.length - 1, pick));
    s = { code, chosen, tuned: !this.options.tuneOnFirstRun || code.candidates.length < 2, handles: new Map() };
    bySpec.set(key, s);
    this.stats.specializations++;
    return s;
  }

  private handles(s: Specialized, i: number): KernelHandle[] {
    let h = s.handles.get(i);
    if (!h) {
      const v = s.code.candidates[i]!;
      h = this.compileVariant(v);
      s.handles.set(i, h);
      if (h instanceof Promise) void h.then((r) => s.handles.set(i, r));
    }
    if (h instanceof Promise) throw new Error(`kiln cuda: kernel ${s.code.name} is still compiling; await program.prepare(inputs) before run() with an asynchronous launcher`);
    return h;
  }

  private compileVariant(v: CudaVariant): KernelHandle[] | Promise<KernelHandle[]> {
    return this.launcher.compile(
      v.source,
      v.kernels.map((k) => k.name),
      { nvrtcOptions: v.nvrtcOptions, maxDynamicShared: MAX_DYNAMIC_SHARED, params: v.kernels.map((k) => k.args.params.map((p) => p.type)) },
    );
  }

  /** Compiles every kernel this call's layouts need (for launchers that compile asynchronously). */
  async prepare(inputs: readonly Tensor[]): Promise<void> {
    const plan = this.plan(inputs);
    const meta = (id: ValueId): ValueLayout => plan.get(id)!;
    const pending: Promise<unknown>[] = [];
    for (const g of this.sched.kernels) {
      const L = kernelLayout(g, meta);
      const s = this.specialize(g, L);
      let idxs = s.code.candidates.map((_, i) => i);
      if (s.tuned) {
        // The chosen config, and the first that can run this layout in case the chosen one cannot.
        const fallback = idxs.find((i) => s.code.candidates[i]!.inapplicable(L) === null);
        idxs = [s.chosen, ...(fallback !== undefined && fallback !== s.chosen ? [fallback] : [])];
      }
      for (const i of idxs) {
        if (!s.handles.has(i)) {
          const v = s.code.candidates[i]!;
          s.handles.set(i, this.compileVariant(v));
        }
        const h = s.handles.get(i)!;
        if (h instanceof Promise) pending.push(h.then((r) => s.handles.set(i, r)));
      }
    }
    await Promise.all(pending);
  }

  private planLifetimes(): ValueId[][] {
    const root = new Map<ValueId, ValueId>();
    const owned = new Set<ValueId>();
    const rootOf = (id: ValueId): ValueId => root.get(id) ?? id;
    for (const inp of this.low.graph.inputs) root.set(inp.id, inp.id);
    const steps = this.sched.steps;
    const last = new Map<ValueId, number>();
    steps.forEach((s, i) => {
      const outs = s.kind === 'kernel' ? s.group.outputs : s.node.outputs;
      for (const o of outs) {
        const info = this.low.values.get(o)!;
        if (s.kind === 'kernel') owned.add(o);
        else if (s.kind === 'view') root.set(o, rootOf(nodeInputs(s.node)[0]!));
        else if (info.aliasOf !== undefined) root.set(o, rootOf(info.aliasOf));
        else owned.add(o);
        if (!last.has(rootOf(o))) last.set(rootOf(o), i);
      }
      const ins = s.kind === 'kernel' ? s.group.inputs : nodeInputs(s.node);
      for (const id of ins) last.set(rootOf(id), Math.max(last.get(rootOf(id)) ?? i, i));
    });
    const pinned = new Set([...this.outputs].map(rootOf));
    const deaths: ValueId[][] = steps.map(() => []);
    for (const r of owned) {
      if (pinned.has(r) || rootOf(r) !== r) continue;
      deaths[last.get(r)!]!.push(r);
    }
    return deaths;
  }

  private plan(inputs: readonly Tensor[]): Map<ValueId, MetaLike> {
    return planValueMetas(this.low, inputs, this.plans);
  }

  run(inputs: readonly Tensor[]): unknown {
    const plan = this.plan(inputs);
    const env = new Map<ValueId, RVal>();
    this.low.graph.inputs.forEach((inp, i) => env.set(inp.id, inputs[i]!));
    const pool = new Map<number, Tensor[]>();
    const inputSet = new Set(inputs);
    this.stats.runs++;
    const asTensor = (v: RVal): Tensor => ('ref' in v ? new Tensor(v.base.storage, v.dtype, v.shape, v.strides, v.offset) : v);
    const resolve = (a: IRArg): unknown => {
      switch (a.kind) {
        case 'value':
          return asTensor(env.get(a.id)!);
        case 'list':
          return a.items.map(resolve);
        case 'const':
          return a.value;
        default:
          return a satisfies never;
      }
    };
    const hook = this.onStep;
    this.sched.steps.forEach((s, i) => {
      this.runStep(s, env, plan, pool, resolve);
      hook?.(i, s.kind === 'kernel' ? `${s.group.kind} ${s.group.nodes.map((n) => n.op).join('+')}` : `${s.kind} ${s.node.op}`);
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

  private runStep(s: Step, env: Map<ValueId, RVal>, plan: Map<ValueId, MetaLike>, pool: Map<number, Tensor[]>, resolve: (a: IRArg) => unknown): void {
    if (s.kind === 'extern') {
      const out = dispatch(getOp(s.node.op), ...(s.node.args.map(resolve) as never[])) as Tensor | Tensor[];
      const outs = Array.isArray(out) ? out : [out];
      s.node.outputs.forEach((id, k) => env.set(id, outs[k]!));
      return;
    }
    if (s.kind === 'view') {
      const out = s.node.outputs[0]!;
      if (this.needsTensor.has(out)) {
        env.set(out, dispatch(getOp(s.node.op), ...(s.node.args.map(resolve) as never[])) as Tensor);
        return;
      }
      const base = env.get(nodeInputs(s.node)[0]!)!;
      const [m] = nodeMeta(s.node, new Map([[nodeInputs(s.node)[0]!, base as MetaLike]]));
      env.set(out, { ref: true, base: 'ref' in base ? base.base : base, shape: m!.shape, strides: m!.strides, offset: m!.offset, dtype: m!.dtype, device: m!.device });
      return;
    }
    this.runKernel(s.group, env, plan, pool);
  }

  private alloc(m: MetaLike, pool: Map<number, Tensor[]>): Tensor {
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

  private runKernel(g: KernelGroup, env: Map<ValueId, RVal>, plan: Map<ValueId, MetaLike>, pool: Map<number, Tensor[]>): void {
    const bases: Tensor[] = [];
    for (const o of g.outputs) {
      const t = this.alloc(plan.get(o)!, pool);
      env.set(o, t);
      bases.push(t);
    }
    for (const id of g.inputs) {
      const v = env.get(id)!;
      bases.push('ref' in v ? v.base : v);
    }
    // Materialised values from the environment (views carry their real offsets); values internal to
    // the group (the iteration shape's source) from the plan.
    const meta = (id: ValueId): ValueLayout => {
      const v = env.get(id) ?? plan.get(id)!;
      return { shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype };
    };
    // The layout, spec and specialisation depend only on the plan (one per input signature,
    // offsets included) and the operands' offsets: memoised per group, since recomputing them
    // was most of a call's host time (tens of us per kernel, measured on qwen3's 400 kernels).
    let m = this.layoutMemo.get(g);
    if (!m || m.plan !== plan || !sameOffsets(m.offsets, bases)) {
      const L = kernelLayout(g, meta);
      m = { plan, offsets: bases.map((t) => t.offset), L, spec: kernelSpec(L), s: this.specialize(g, L) };
      this.layoutMemo.set(g, m);
    }
    const { L, s, spec } = m;
    const ptrs = L.operands.map((o, k) => BigInt(this.launcher.address(bases[k]!)) + BigInt(o.offset * itemSize(o.dtype)));
    if (!s.tuned) this.tune(s, L, ptrs, bases[0]!);
    let i = s.chosen;
    if (!this.runnable(s.code.candidates[i]!, L, ptrs, spec)) {
      i = s.code.candidates.findIndex((v) => this.runnable(v, L, ptrs, spec));
      this.stats.fallbacks++;
      if (i < 0) throw new Error(`kiln cuda: no config of kernel ${s.code.name} can run layout ${JSON.stringify({ oshape: L.oshape, rshape: L.rshape })}`);
    }
    this.launchVariant(s, i, L, ptrs, bases[0]!);
  }

  /** Applicable to the layout, and every vector-accessed operand's address aligned to the access. */
  private runnable(v: CudaVariant, L: KernelLayout, ptrs: readonly bigint[], spec = kernelSpec(L)): boolean {
    if (v.inapplicable(L) !== null) return false;
    const V = v.config.kind === 'reduce' && v.config.strategy === 'thread' ? 1 : v.config.vec;
    if (V === 1) return true;
    // Only operands read or written with vector accesses (unit innermost stride) need alignment.
    return L.operands.every((o, k) => !spec.ops[k]!.unitInner || spec.ops[k]!.rowScalar || ptrs[k]! % BigInt(V * itemSize(o.dtype)) === 0n);
  }

  private launchVariant(s: Specialized, i: number, L: KernelLayout, ptrs: readonly bigint[], like: Tensor): void {
    const v = s.code.candidates[i]!;
    const handles = this.handles(s, i);
    const plan = v.plan(L);
    if (plan.launches.length === 0) return;
    let ws: Tensor | undefined;
    // The caching allocator is stream-ordered: the workspace may be freed as soon as the launches are enqueued.
    if (plan.workspaceBytes > 0) ws = Tensor.empty([plan.workspaceBytes], 'uint8', like.device);
    try {
      const wsPtr = ws ? BigInt(this.launcher.address(ws)) : 0n;
      for (const l of plan.launches) {
        const entry = v.kernels[l.kernel]!;
        const values = entry.args.params.map((p) => {
          switch (p.source.kind) {
            case 'operand':
              return ptrs[p.source.k]!;
            case 'workspace':
              return wsPtr;
            case 'int':
              return intArg(p.source.what, L, plan.extraInts);
            default:
              return p.source satisfies never;
          }
        });
        this.launcher.launch(handles[l.kernel]!, l.grid, l.block, l.sharedBytes, packArgs(entry.args, values));
        this.stats.launches++;
      }
    } finally {
      ws?.dispose();
    }
  }

  /** Times every runnable candidate with kiln.Event on this call's buffers (kernels only write their outputs). */
  private tune(s: Specialized, L: KernelLayout, ptrs: readonly bigint[], like: Tensor): void {
    const idx = s.code.candidates.map((_, i) => i).filter((i) => this.runnable(s.code.candidates[i]!, L, ptrs));
    const r = autotune({
      // Winners persist per generated code (its hash) and per call shape (rows x row length matter).
      key: `cuda:${kernelSourceHash(s.code.candidates.map((c) => c.source).join('\n'))}:${L.oshape.join('x')}/${L.rshape.join('x')}`,
      device: like.device,
      flush: this.options.flush,
      candidates: idx.map((i) => ({ config: s.code.candidates[i]!.config, run: () => this.launchVariant(s, i, L, ptrs, like) })),
    });
    s.chosen = idx[r.bestIndex]!;
    s.tuned = true;
  }

  describe(): string {
    const parts: string[] = [];
    for (const [, bySpec] of this.specialized) {
      for (const [key, s] of bySpec) {
        const v = s.code.candidates[s.chosen]!;
        parts.push(
          `// ${s.code.name} [${key}]: ${s.code.group.nodes.length} ops [${s.code.group.nodes.map((n) => n.op).join(', ')}], config ${JSON.stringify(v.config)} (${s.code.candidates.length} candidates)\n` +
            `// args: ${v.kernels.map((k) => `${k.name}(${k.args.params.map((p) => `${p.name}@${p.offset}:${p.size}`).join(' ')}; ${k.args.size} bytes)`).join(', ')}\n${v.body}`,
        );
      }
    }
    const val = (id: ValueId): string => {
      const m = this.low.values.get(id)!;
      return `%${id}: ${m.dtype}[${m.shape.join(', ')}]`;
    };
    const lines = ['// wrapper (cuda)', ...this.low.graph.inputs.map((i) => `input ${val(i.id)}`)];
    this.sched.steps.forEach((s, i) => {
      if (s.kind === 'kernel') {
        lines.push(s.group.outputs.map((o) => `alloc-or-reuse ${val(o)}`).join('; '));
        lines.push(`launch ${this.names.get(s.group)}(out: ${s.group.outputs.map((o) => `%${o}`).join(', ')}; in: ${s.group.inputs.map((o) => `%${o}`).join(', ')})`);
      } else if (s.kind === 'view') {
        lines.push(`${val(s.node.outputs[0]!)} = view ${s.node.op}(%${nodeInputs(s.node)[0]}) ${this.needsTensor.has(s.node.outputs[0]!) ? '(tensor)' : '(index expression)'}`);
      } else lines.push(`${s.node.outputs.map(val).join(', ')} = extern ${s.node.op}(${nodeInputs(s.node).map((id) => `%${id}`).join(', ')})`);
      if (this.deaths[i]!.length > 0) lines.push(`free-for-reuse ${this.deaths[i]!.map((id) => `%${id}`).join(', ')}`);
    });
    lines.push(`return ${[...this.outputs].map((id) => `%${id}`).join(', ')}`);
    return [...parts, lines.join('\n')].join('\n\n');
  }
}
