/**
 * A compiled program on a webgpu device: the step runner (codegen/step-runner.ts: buffer planning
 * and reuse, extern and view steps, outputs) with WGSL kernel steps. Each kernel group is rendered
 * by the fused-group renderer the eager webgpu kernels share (kernels/webgpu/fused/), specialised
 * per call on what its source depends on (ranks after coalescing, storage forms, which operands
 * share a buffer, the reduce strategy): sizes, strides and offsets are metadata words, so new sizes
 * reuse compiled pipelines. Launches go through the accelerator's kernel ABI (launchKernel).
 *
 * Configs (tune.ts): each kernel's launch config (workgroup size; for reductions a row per
 * workgroup or per invocation) is decided once per call shape: the default, or in mode
 * 'max-autotune' the fastest candidate timed with device timestamps. Decisions and the sources the
 * program launched are what its disk entry keeps (program-cache.ts): a program rebuilt from it in
 * another process starts with them (`seed`), so it neither renders nor re-tunes, and its pipelines
 * are created asynchronously. `onLearn` is called after a run that decided or rendered something
 * new, for the entry to be written again.
 *
 * A group the device cannot launch as one kernel (more buffers than it binds, a buffer over the
 * binding size limit) runs node by node through dispatch, the eager webgpu kernels (counted in
 * stats.fallbacks).
 */
import type { FusedGroup } from '../../../kernels/webgpu/fused/group.js';
import { groupKey } from '../../../kernels/webgpu/fused/group.js';
import { adoptFused, bindFused, type FusedConfig, type FusedLaunch, type FusedOperand, launchFused, prepareFused, renderDistinct } from '../../../kernels/webgpu/fused/run.js';
import type { FusedLayout } from '../../../kernels/webgpu/fused/layout.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { CompiledProgram, ProgramCacheStatus } from '../../backend.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { KernelGroup, Schedule } from '../../lower/schedule.js';
import { runExternNode, type RunState, StepRunner } from '../step-runner.js';
import { fusedGroup, groupLayout, type ValueLayout } from './group.js';
import { decideConfig, type ConfigPick } from './tune.js';

export interface WgslProgramStats {
  readonly kernels: number;
  readonly externs: number;
  readonly views: number;
  buffersAllocated: number;
  buffersReused: number;
  launches: number;
  /** Kernel steps run node by node through dispatch (the device could not launch the group). */
  fallbacks: number;
  runs: number;
  /** Configs timed on the device (max-autotune), and those answered by the autotuner's disk cache. */
  tuned: number;
  tuneCacheHits: number;
  /** Configs decided without timing (default, a pick hook, or no device timestamps), and seeded decisions used. */
  defaulted: number;
  seededDecisions: number;
}

/** What a disk entry hands a rebuilt program: sources by memo key, and config decisions. */
export interface WgslProgramSeed {
  readonly sources: readonly { readonly memo: string; readonly source: string; readonly label: string }[];
  readonly decisions: readonly { readonly key: string; readonly config: FusedConfig }[];
}

export interface WgslProgramOptions {
  /** Time every candidate config on a kernel's first run of each call shape (mode 'max-autotune'). */
  tuneOnFirstRun?: boolean;
  /** Picks the candidate config of a kernel (tests: every candidate in turn); overrides tuning. */
  pick?: ConfigPick;
  seed?: WgslProgramSeed;
}

interface GroupCode {
  readonly index: number;
  readonly name: string;
  readonly fused: FusedGroup;
  readonly key: string;
  /** Sources launched so far (for describe()). */
  readonly sources: Set<string>;
  /** Why the last call ran node by node, if it did. */
  fallback?: string;
}

export class WgslProgram implements CompiledProgram {
  readonly stats: WgslProgramStats;
  diskCache: ProgramCacheStatus | undefined;
  /** Called after a run that decided a config or launched a source not known before (the disk entry's writer). */
  onLearn: (() => void) | undefined;
  /** Called after each step is queued, with its label (tools: bench/webgpu-profile.ts records an event there). */
  onStep: ((step: number, label: string) => void) | undefined;
  private readonly runner: StepRunner;
  private readonly code = new Map<KernelGroup, GroupCode>();
  /** Config decisions by decision key (kernel and call shape). */
  private readonly decisions = new Map<string, FusedConfig>();
  /** Sources launched, by memo key, with their labels: what the disk entry stores. */
  private readonly launched = new Map<string, { source: string; label: string }>();
  private learned = false;
  /** Seeded decisions not used yet (counted in stats.seededDecisions at their first use). */
  private readonly unusedSeed = new Set<string>();

  constructor(
    readonly low: Lowered,
    readonly sched: Schedule,
    private readonly options: WgslProgramOptions = {},
  ) {
    this.stats = {
      kernels: sched.kernels.length,
      externs: sched.steps.filter((s) => s.kind === 'extern').length,
      views: sched.steps.filter((s) => s.kind === 'view').length,
      buffersAllocated: 0,
      buffersReused: 0,
      launches: 0,
      fallbacks: 0,
      runs: 0,
      tuned: 0,
      tuneCacheHits: 0,
      defaulted: 0,
      seededDecisions: 0,
    };
    sched.kernels.forEach((g, i) => {
      const fused = fusedGroup(g, low);
      this.code.set(g, { index: i, name: `kiln_k${i}_${g.kind}`, fused, key: groupKey(fused), sources: new Set() });
    });
    this.runner = new StepRunner(low, sched.steps, this.stats, { kernel: (g, st) => this.runKernel(g, st) });
    for (const d of options.seed?.decisions ?? []) {
      this.decisions.set(d.key, d.config);
      this.unusedSeed.add(d.key);
    }
    for (const s of options.seed?.sources ?? []) {
      adoptFused(s.memo, s.source, s.label);
      this.launched.set(s.memo, { source: s.source, label: s.label });
    }
  }

  get kernelCount(): number {
    return this.sched.kernels.length;
  }

  run(inputs: readonly Tensor[]): unknown {
    const out = this.runner.run(inputs, this.onStep);
    if (this.learned) {
      this.learned = false;
      this.onLearn?.();
    }
    return out;
  }

  /** What the disk entry keeps beyond the lowered graph and schedule. */
  seed(): WgslProgramSeed {
    return {
      sources: [...this.launched].map(([memo, s]) => ({ memo, source: s.source, label: s.label })),
      decisions: [...this.decisions].map(([key, config]) => ({ key, config })),
    };
  }

  /** The decided config of kernel `code` for layout `L` (deciding it, and maybe tuning, on first sight). */
  private configFor(code: GroupCode, operands: readonly FusedOperand[], L: FusedLayout): FusedConfig | undefined {
    const key = `k${code.index}|${L.kind}|${L.oshape.join('x')}|${L.kind === 'reduce' ? L.rshape.join('x') : ''}`;
    const known = this.decisions.get(key);
    if (known) {
      if (this.unusedSeed.delete(key)) this.stats.seededDecisions++;
      return known;
    }
    const d = decideConfig({ name: code.name, fused: code.fused, key: code.key, operands, L, tune: this.options.tuneOnFirstRun === true, pick: this.options.pick });
    if (d === undefined) return undefined;
    this.stats[d.how]++;
    this.decisions.set(key, d.config);
    this.learned = true;
    return d.config;
  }

  private runKernel(g: KernelGroup, st: RunState): void {
    const { env, plan, pool } = st;
    const code = this.code.get(g)!;
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
    // Materialised values (views carry their real offsets) from the environment; the iteration
    // shape's source, when internal to the group, from the plan.
    const meta = (id: ValueId): ValueLayout => {
      const v = env.get(id) ?? plan.get(id)!;
      return { shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype };
    };
    const L = groupLayout(g, meta);
    const operands = bases.map((t, k) => ({ buffer: t.storage.buffer, dtype: meta(k < g.outputs.length ? g.outputs[k]! : g.inputs[k - g.outputs.length]!).dtype }));
    // A group the device cannot bind runs node by node, whatever the config.
    const unbound = bindFused(operands, g.outputs.length);
    if (typeof unbound === 'string') {
      code.fallback = unbound;
      this.nodeByNode(g, st);
      return;
    }
    const launch = prepareFused(code.fused, operands, L, code.key, code.name, this.configFor(code, operands, L));
    if (typeof launch === 'string') throw new Error(`kiln wgsl: kernel ${code.name} cannot launch: ${launch}`);
    this.remember(code, launch);
    launchFused(launch, L);
    this.stats.launches++;
  }

  private remember(code: GroupCode, launch: FusedLaunch): void {
    code.sources.add(launch.source);
    if (this.launched.has(launch.memo)) return;
    this.launched.set(launch.memo, { source: launch.source, label: code.name });
    this.learned = true;
  }

  /** The group's nodes through dispatch (eager webgpu kernels); its outputs replace the allocated ones. */
  private nodeByNode(g: KernelGroup, st: RunState): void {
    this.stats.fallbacks++;
    for (const o of g.outputs) {
      const t = st.env.get(o);
      if (t && !('ref' in t)) t.dispose();
      st.env.delete(o);
    }
    const internal: ValueId[] = [];
    for (const n of g.nodes) {
      runExternNode(n, st.env, st.resolve);
      for (const o of n.outputs) if (!g.outputs.includes(o)) internal.push(o);
    }
    for (const id of internal) {
      const t = st.env.get(id);
      if (t && !('ref' in t)) t.dispose();
      st.env.delete(id);
    }
  }

  describe(): string {
    const parts: string[] = [];
    for (const [g, c] of this.code) {
      const head = `// ${c.name}: ${g.nodes.length} ops [${g.nodes.map((n) => n.op).join(', ')}]`;
      if (c.sources.size === 0) {
        // Not launched yet: the source for the traced layout, every operand in a buffer of its own.
        const traced = (id: ValueId): ValueLayout => this.low.values.get(id)!;
        const L = groupLayout(g, traced);
        const dtypes = [...g.outputs, ...g.inputs].map((id) => traced(id).dtype);
        parts.push(c.fallback ? `${head} (node by node: ${c.fallback})` : `${head} (traced layout)\n${renderDistinct(c.fused, dtypes, L)}`);
      }
      for (const s of c.sources) parts.push(`${head}\n${s}`);
    }
    return [...parts, this.runner.listing('// wrapper (webgpu)', (g) => `launch ${this.code.get(g)!.name}`)].join('\n\n');
  }
}

