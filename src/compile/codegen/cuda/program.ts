/**
 * A compiled program on a CUDA device: the counterpart of the JS KilnProgram (codegen/js/program.ts)
 * on the same step runner (codegen/step-runner.ts: kernel outputs allocated as the meta functions
 * describe them, reusing the storage of dead intermediates of the same byte size; extern steps
 * (GEMM, attention, anything not fused) through the eager dispatcher on cuda tensors; views read
 * only by kernels as strides and offsets). Kernel steps come back here: generated kernels are
 * launched through a CudaLauncher.
 *
 * Per call the layout of every kernel is computed from the real tensors; its spec (ranks, broadcast
 * and unit strides, dtypes, index width) picks a generated kernel, so new sizes of symbolic dims
 * reuse compiled code and only a new spec generates and compiles again. The chosen config (by the
 * autotune hook, or timed on the first run in max-autotune mode) falls back per call to the first
 * candidate that can run the layout (vector widths need divisible sizes and aligned operands).
 */
import { itemSize } from '../../../tensor/dtype.js';
import { Tensor } from '../../../tensor/tensor.js';
import type { CompiledProgram } from '../../backend.js';
import type { ValueId } from '../../ir.js';
import type { Lowered, MetaLike } from '../../lower/lower.js';
import type { KernelGroup, Schedule } from '../../lower/schedule.js';
import { type RunState, StepRunner } from '../step-runner.js';
import { autotune } from '../../autotune/index.js';
import { kernelSourceHash } from '../../../runtime/pool/index.js';
import { packArgs } from '../../../kernels/cuda/fused/args.js';
import { intArg } from './configs.js';
import { type CudaKernelCode, type CudaVariant, generateCudaKernel } from './generate.js';
import { type KernelLayout, kernelLayout, type KernelSpec, kernelSpec, specKey, type ValueLayout } from './layout.js';
import type { CudaLauncher, KernelHandle } from './launcher.js';
import { planL2Prefetch } from './l2-prefetch-plan.js';
import { L2_PREFETCH_MAX_RANGES, prefetchToL2 } from '../../../kernels/cuda/l2-prefetch.js';
import { ptrOf, streamOf } from '../../../kernels/cuda/device.js';
import { getOption } from '../../../runtime/config.js';
import { storageSpan } from '../../../tensor/tensor.js';
import type { LNode } from '../../lower/lower.js';

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
  private readonly runner: StepRunner;

  constructor(
    readonly low: Lowered,
    readonly sched: Schedule,
    readonly launcher: CudaLauncher,
    private readonly options: CudaProgramOptions = {},
  ) {
    sched.kernels.forEach((g, i) => this.names.set(g, `kiln_k${i}_${g.kind}`));
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
    this.l2Plan = this.planPrefetch();
    this.runner = new StepRunner(low, sched.steps, this.stats, {
      kernel: (g, st) => this.runKernel(g, st),
      extern: (n, st) => {
        if (this.skipped(() => `extern ${n.op}`)) return this.skipExtern(n, st);
        this.prefetchBefore(n, st);
        return false; // the dispatcher runs the node itself
      },
    });
    // Generate for the traced layouts now, so describe() and the autotune hook see real code.
    const traced = (id: ValueId): ValueLayout => low.values.get(id)!;
    for (const g of sched.kernels) this.specialize(g, kernelLayout(g, traced));
  }

  /** Weights prefetched into L2 before an extern node (KILN_CUDA_L2_PREFETCH; l2-prefetch-plan.ts). */
  private readonly l2Plan: Map<LNode, ValueId[]>;

  private planPrefetch(): Map<LNode, ValueId[]> {
    const lifted = new Set(this.low.graph.inputs.filter((i) => i.source.kind === 'lifted').map((i) => i.id));
    const budget = { maxBytes: getOption('KILN_CUDA_L2_PREFETCH_MB') * 2 ** 20, maxRanges: L2_PREFETCH_MAX_RANGES };
    const byStep = planL2Prefetch(this.sched.steps, lifted, this.low.values, budget);
    const plan = new Map<LNode, ValueId[]>();
    for (const [i, ids] of byStep) plan.set((this.sched.steps[i] as { node: LNode }).node, ids);
    return plan;
  }

  /** Before a latency-bound extern node: the L2 prefetch of the weights read after it, where on. */
  private prefetchBefore(n: LNode, st: RunState): void {
    const ids = this.l2Plan.get(n);
    if (!ids || getOption('KILN_CUDA_L2_PREFETCH') === '0') return;
    const ts = ids.map((id) => st.env.get(id) as Tensor);
    const ranges = ts.map((t) => ({ ptr: ptrOf(t), bytes: storageSpan(t.shape, t.strides) * itemSize(t.dtype) }));
    // The device's current default stream: during CUDA-graph capture, the capturing stream.
    prefetchToL2(ts[0]!.device.index, streamOf(ts[0]!), ranges);
  }

  /**
   * KILN_CUDA_REPLAY_SKIP (measurement only: the results are wrong): whether a step whose label
   * ('extern <op>', or a fused kernel's kind and ops, as cuda-profile prints them) contains one of the
   * option's |-separated substrings is left out, so a graph replay timed with and without a class
   * of steps shows what that class costs in place (launch gaps and PDL overlap included).
   */
  private skipped(label: () => string): boolean {
    const skip = getOption('KILN_CUDA_REPLAY_SKIP');
    if (skip === undefined) return false; // the common case: no label built
    const l = label();
    return skip.split('|').some((s) => s !== '' && l.includes(s));
  }

  /** A skipped extern: its outputs bound to fresh buffers of their planned layout (aliases to what they alias). */
  private skipExtern(n: LNode, st: RunState): true {
    for (const o of n.outputs) {
      const alias = this.low.values.get(o)?.aliasOf;
      const base = alias === undefined ? undefined : st.env.get(alias);
      st.env.set(o, base ?? this.runner.alloc(st.plan.get(o)!, st.pool));
    }
    return true;
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
    const plan = this.runner.plan(inputs);
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

  run(inputs: readonly Tensor[]): unknown {
    return this.runner.run(inputs, this.onStep);
  }

  private runKernel(g: KernelGroup, run: RunState): void {
    const { env, plan, pool } = run;
    const bases: Tensor[] = [];
    for (const o of g.outputs) {
      const t = this.runner.alloc(plan.get(o)!, pool);
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
    if (this.skipped(() => `${g.kind} ${g.nodes.map((x) => x.op).join('+')}`)) return; // KILN_CUDA_REPLAY_SKIP: outputs left unwritten
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
            case 'scalar':
              throw new Error(`kiln cuda: kernel ${s.code.name} takes a host scalar ${p.name} (only eager one-node programs do)`);
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
    return [...parts, this.runner.listing('// wrapper (cuda)', (g) => `launch ${this.names.get(g)}`)].join('\n\n');
  }
}
