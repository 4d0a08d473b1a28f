/**
 * A compiled program on a webgpu device: the step runner (codegen/step-runner.ts: buffer planning
 * and reuse, extern and view steps, outputs) with WGSL kernel steps. Each kernel group is rendered
 * by the fused-group renderer the eager webgpu kernels share (kernels/webgpu/fused/), specialised
 * per call on what its source depends on (ranks after coalescing, storage forms, which operands
 * share a buffer, the reduce strategy): sizes, strides and offsets are metadata words, so new sizes
 * reuse compiled pipelines. Launches go through the accelerator's kernel ABI (launchKernel).
 *
 * A group the device cannot launch as one kernel (more buffers than it binds, a buffer over the
 * binding size limit) runs node by node through dispatch, the eager webgpu kernels (counted in
 * stats.fallbacks).
 */
import type { FusedGroup } from '../../../kernels/webgpu/fused/group.js';
import { groupKey } from '../../../kernels/webgpu/fused/group.js';
import { launchFused, prepareFused, renderDistinct } from '../../../kernels/webgpu/fused/run.js';
import type { Tensor } from '../../../tensor/tensor.js';
import type { CompiledProgram } from '../../backend.js';
import type { ValueId } from '../../ir.js';
import type { Lowered } from '../../lower/lower.js';
import type { KernelGroup, Schedule } from '../../lower/schedule.js';
import { runExternNode, type RunState, StepRunner } from '../step-runner.js';
import { fusedGroup, groupLayout, type ValueLayout } from './group.js';

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
}

interface GroupCode {
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
  private readonly runner: StepRunner;
  private readonly code = new Map<KernelGroup, GroupCode>();

  constructor(
    readonly low: Lowered,
    readonly sched: Schedule,
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
    };
    sched.kernels.forEach((g, i) => {
      const fused = fusedGroup(g, low);
      this.code.set(g, { name: `kiln_k${i}_${g.kind}`, fused, key: groupKey(fused), sources: new Set() });
    });
    this.runner = new StepRunner(low, sched.steps, this.stats, { kernel: (g, st) => this.runKernel(g, st) });
  }

  get kernelCount(): number {
    return this.sched.kernels.length;
  }

  run(inputs: readonly Tensor[]): unknown {
    return this.runner.run(inputs);
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
    const launch = prepareFused(code.fused, operands, L, code.key, code.name);
    if (typeof launch === 'string') {
      code.fallback = launch;
      this.nodeByNode(g, st);
      return;
    }
    code.sources.add(launch.source);
    launchFused(launch, L);
    this.stats.launches++;
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
