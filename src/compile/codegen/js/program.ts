/**
 * A compiled program of the cpu target: the scheduled steps run on the shared step runner
 * (codegen/step-runner.ts: value plans, buffer reuse, extern and view steps, outputs), which calls
 * back here for kernel steps (the generated JS function, or its C / Wasm candidate, over typed
 * arrays with coalesced strides), gemm steps and attention. Per-input-layout plans (all value
 * metadata) are cached, so a program serves any sizes of its traced ranks (symbolic dims).
 *
 * float32 linears run as 'gemm' steps (lower/gemm.ts, codegen/wasm/gemm.ts): a Wasm f32x4 GEMM
 * with the weight packed once per weight version and the consuming pointwise kernel folded into
 * its epilogue; attention without mask or dropout runs on the same GEMM (codegen/wasm/attention.ts).
 * Both share one Wasm memory per program (GemmArena) and fall back to the dispatcher for operands
 * they do not handle.
 */
import { broadcastStrides, coalesceDims as coalesce, isContiguousStrides } from '../../../tensor/layout.js';
import { wasmApi } from '../../../kernels/cpu/wasm-asm.js';
import { cpuPath } from '../../../kernels/cpu/native/path.js';
import type { Tensor } from '../../../tensor/tensor.js';
import { readable, writable, type NumArray } from '../../../kernels/cpu/numeric.js';
import type { CompiledProgram, ProgramCacheStatus } from '../../backend.js';
import { type LNode, type Lowered, nodeInputs } from '../../lower/lower.js';
import type { KernelGroup, Schedule } from '../../lower/schedule.js';
import { type ProgramStep, type RunState, StepRunner, stepOutputs } from '../step-runner.js';
import { compileCandidates, HELPERS, type KernelFn, validateWasm } from './compile.js';
import { fuseGemms, type GemmStep } from '../../lower/gemm.js';
import { CPU_GEMM } from './fusion.js';
import { GEMM_CONFIGS, GemmArena, GemmArenaFull, GemmRunner, gemmStepModule, type GemmConfig } from '../wasm/gemm.js';
import { wasmPointwiseModule } from '../wasm/pointwise.js';
import { WasmAttention } from '../wasm/attention.js';
import { autotune } from '../../autotune/index.js';
import { kernelSourceHash } from '../../../runtime/pool/index.js';
import { type KernelCandidate, type KernelCode, generateKernel } from './emit.js';
import { buildGemmLibraries, gemmStepCSource, NativeGemmRunner } from '../c/gemm.js';
import { cGroupBody } from '../c/pointwise.js';
import { GEMM_EPI_MAX } from '../../../kernels/cpu/native/gemm-c.js';

export interface ProgramStats {
  readonly kernels: number;
  /** Extern calls, including the linears that run as compiled GEMMs. */
  readonly externs: number;
  /** Linears run by the compiled float32 GEMM, and how many of them carry a folded epilogue kernel. */
  readonly gemms: number;
  readonly fusedEpilogues: number;
  readonly views: number;
  /** Kernel output buffers newly allocated / taken over from dead intermediates (cumulative). */
  buffersAllocated: number;
  buffersReused: number;
  runs: number;
}

/** A native candidate's C source, then a header for its JavaScript fallback (describe()); '' otherwise. */
function nativeSource(c: KernelCandidate): string {
  return c.native ? `${c.native.source}\n// JavaScript fallback (small iteration spaces):\n` : '';
}

/** Picks a candidate index for a kernel (the autotuner plugs in here). */
export type AutotuneHook = (kernel: { name: string; candidates: readonly KernelCandidate[] }) => number;

/** Kernels of a program rebuilt from a cache entry: codes in `sched.kernels` order, chosen candidates, their functions. */
export interface PrebuiltKernels {
  readonly codes: readonly KernelCode[];
  readonly chosen: readonly number[];
  readonly fns: readonly KernelFn[];
}

interface KernelStep {
  readonly code: KernelCode;
  fn: KernelFn;
  chosen: number;
  /** max-autotune: the candidates are timed on the first real run, then this is set. */
  tuned: boolean;
}

/** Per gemm step: its module (null: no Wasm, always the extern), runner and chosen config. */
interface GemmState {
  bytes: Uint8Array | null;
  /** The native path's runner (then `bytes` is null); null: not native, or the extern. */
  native: NativeGemmRunner | null;
  runner: GemmRunner | undefined;
  config: GemmConfig;
  /** max-autotune: configs are timed on the first real run, then this is set. */
  tuned: boolean;
}

/** Dims ordered outermost-first by `strides` (descending), stable. */
function orderBy(dims: number[], strides: readonly number[]): number[] {
  return [...dims].sort((a, b) => Math.abs(strides[b]!) - Math.abs(strides[a]!) || a - b);
}

export class KilnProgram implements CompiledProgram {
  readonly stats: ProgramStats;
  /** Whether this program came from the on-disk program cache (set by program-cache.ts). */
  diskCache: ProgramCacheStatus = 'off';
  private readonly kernelSteps = new Map<KernelGroup, KernelStep>();
  /** The schedule's steps with float32 linears as gemm steps (lower/gemm.ts). */
  readonly steps: readonly ProgramStep[];
  private readonly runner: StepRunner;
  private readonly gemms = new Map<GemmStep, GemmState>();
  private arena: GemmArena | undefined;
  private attention: WasmAttention | undefined;
  /** Attention calls run on the compiled GEMM (the rest dispatch the eager kernel). */
  attentionRuns = 0;

  constructor(
    readonly low: Lowered,
    readonly sched: Schedule,
    autotune?: AutotuneHook,
    /** Time every candidate config on the first real run (mode 'max-autotune'). */
    tuneOnFirstRun = false,
    /** Kernels already generated and instantiated (a program loaded from the disk cache: program-cache.ts). */
    prebuilt?: PrebuiltKernels,
  ) {
    const codes = prebuilt?.codes ?? sched.kernels.map((g, i) => generateKernel(g, low, `kernel${i}_${g.kind}`));
    const chosen = prebuilt?.chosen ?? codes.map((c) => (autotune ? Math.max(0, Math.min(c.candidates.length - 1, autotune({ name: c.name, candidates: c.candidates }))) : 0));
    const fns = prebuilt?.fns ?? compileCandidates(codes.map((c, i) => c.candidates[chosen[i]!]!));
    codes.forEach((c, i) => this.kernelSteps.set(c.group, { code: c, fn: fns[i]!, chosen: chosen[i]!, tuned: !tuneOnFirstRun || c.candidates.length < 2 }));
    const native = cpuPath() === 'native';
    this.steps = fuseGemms(low, sched.steps, CPU_GEMM, (g) =>
      native
        ? g.inputs.length - 1 <= GEMM_EPI_MAX &&
          cGroupBody(
            g,
            low,
            g.inputs.map((_, k) => `x${k}`),
          ) !== null
        : wasmPointwiseModule(g, low) !== null,
    );
    const modules: Uint8Array[] = [];
    const gemmSteps = this.steps.filter((s): s is GemmStep => s.kind === 'gemm');
    // Native path: every gemm step's GEMM variant, built in one batch (null: that step runs the extern).
    const sources = native ? gemmSteps.map((s) => gemmStepCSource(s, low)) : [];
    const libs = native ? buildGemmLibraries(sources.filter((x): x is string => x !== null)) : [];
    let li = 0;
    gemmSteps.forEach((s, i) => {
      const lib = native && sources[i] !== null ? libs[li++] : null;
      const bytes = native ? null : gemmStepModule(s, low);
      if (bytes) modules.push(bytes);
      this.gemms.set(s, { bytes, native: lib ? new NativeGemmRunner(lib) : null, runner: undefined, config: GEMM_CONFIGS[0]!, tuned: !tuneOnFirstRun });
    });
    validateWasm(modules);
    this.stats = {
      kernels: sched.kernels.length,
      externs: this.steps.filter((s) => s.kind === 'extern' || s.kind === 'gemm').length,
      gemms: this.gemms.size,
      fusedEpilogues: [...this.gemms.keys()].filter((s) => s.epilogue !== null).length,
      views: this.steps.filter((s) => s.kind === 'view').length,
      buffersAllocated: 0,
      buffersReused: 0,
      runs: 0,
    };
    this.runner = new StepRunner(low, this.steps, this.stats, {
      kernel: (g, st) => this.runKernel(g, st),
      gemm: (s, st) => this.runGemm(s, st),
      extern: (n, st) => n.op === 'scaledDotProductAttention' && this.runAttention(n, st),
    });
  }

  /** Each kernel's generated code and chosen candidate, in schedule order (what program-cache.ts stores). */
  kernelChoices(): { code: KernelCode; chosen: number }[] {
    return this.sched.kernels.map((g) => {
      const ks = this.kernelSteps.get(g)!;
      return { code: ks.code, chosen: ks.chosen };
    });
  }

  get kernelCount(): number {
    return this.sched.kernels.length;
  }

  run(inputs: readonly Tensor[]): unknown {
    return this.runner.run(inputs);
  }

  /**
   * A float32 linear (plus its folded epilogue) through the compiled GEMM; operands it does not
   * handle (or the 'extern' config) run the dispatcher's linear and then the epilogue's own kernel.
   */
  private runGemm(s: GemmStep, run: RunState): void {
    const { env, plan, pool, resolve } = run;
    const st = this.gemms.get(s)!;
    const [xa, wa, ba] = s.node.args;
    const x = resolve(xa!) as Tensor;
    const w = resolve(wa!) as Tensor;
    const b = ba?.kind === 'value' ? (resolve(ba) as Tensor) : null;
    const outId = stepOutputs(s)[0]!;
    const m = plan.get(outId)!;
    const v = s.node.outputs[0]!;
    const runExtern = (): void => {
      this.runner.extern(s.node, run);
      if (!s.epilogue) return;
      this.runKernel(s.epilogue, run);
      const t = env.get(v);
      env.delete(v);
      if (t && !('ref' in t)) t.dispose();
    };
    const extras = s.epilogueInputs.map((e) => ({ t: resolve({ kind: 'value', id: e.id }) as Tensor, kind: e.kind }));
    if (st.native) {
      if (!NativeGemmRunner.operands(x, w, b, extras, m)) {
        runExtern();
        return;
      }
      const out = this.runner.alloc(m, pool);
      const wr = writable(out);
      st.native.run(x, w, b, extras, wr.data as Float32Array, wr.offset);
      wr.commit();
      env.set(outId, out);
      return;
    }
    if (!st.bytes || !GemmRunner.accepts(x, w, m) || (st.tuned && st.config.impl === 'extern')) {
      runExtern();
      return;
    }
    this.arena ??= new GemmArena();
    st.runner ??= new GemmRunner(this.arena, st.bytes);
    const runner = st.runner;
    if (!st.tuned) {
      const scratch = this.runner.alloc(m, pool);
      const sw = writable(scratch);
      const key = `gemm:${kernelSourceHash(Array.from(st.bytes, (x) => String.fromCharCode(x)).join(''))}:${x.shape.join('x')}:${w.shape.join('x')}`;
      const r = autotune({
        key,
        device: 'cpu',
        candidates: GEMM_CONFIGS.map((config) => ({
          config,
          run: () => {
            if (config.impl === 'wasm') runner.run(x, w, b, extras, sw.data, sw.offset, config.kc);
            else {
              runExtern();
              const t = env.get(outId);
              env.delete(outId);
              if (t && !('ref' in t)) t.dispose();
            }
          },
        })),
      });
      scratch.dispose();
      st.config = GEMM_CONFIGS[r.bestIndex]!;
      st.tuned = true;
      if (st.config.impl === 'extern') {
        runExtern();
        return;
      }
    }
    const out = this.runner.alloc(m, pool);
    const wr = writable(out);
    try {
      runner.run(x, w, b, extras, wr.data, wr.offset, st.config.kc);
    } catch (e) {
      if (!(e instanceof GemmArenaFull)) throw e;
      // Out of Wasm memory (weights past 4 GiB): this linear runs eagerly from now on.
      out.dispose();
      st.bytes = null;
      runExtern();
      return;
    }
    wr.commit();
    env.set(outId, out);
  }

  /**
   * scaled_dot_product_attention through WasmAttention when it accepts the arguments (wasm path;
   * the native path's extern is the native C attention kernel, faster than the Wasm one).
   */
  private runAttention(n: LNode, run: RunState): boolean {
    if (!wasmApi() || cpuPath() !== 'wasm') return false;
    const { env, plan, pool, resolve } = run;
    const [q, k, v, mask, dropout, causal, scale, gqa] = n.args.map(resolve) as [Tensor, Tensor, Tensor, unknown, unknown, unknown, unknown, unknown];
    const m = plan.get(n.outputs[0]!)!;
    if (!WasmAttention.accepts(q, k, v, mask, dropout, gqa) || !isContiguousStrides(m.shape, m.strides) || m.offset !== 0) return false;
    this.arena ??= new GemmArena();
    this.attention ??= new WasmAttention(this.arena);
    const out = this.runner.alloc(m, pool);
    const w = writable(out);
    try {
      this.attention.run(q, k, v, causal === true, typeof scale === 'number' ? scale : null, w.data, w.offset);
    } catch (e) {
      if (!(e instanceof GemmArenaFull)) throw e;
      out.dispose();
      return false;
    }
    w.commit();
    env.set(n.outputs[0]!, out);
    this.attentionRuns++;
    return true;
  }

  /** The gemm runners' weight packings so far (tests check repacking on weight updates). */
  get weightPacks(): number {
    let n = 0;
    for (const g of this.gemms.values()) n += (g.runner?.packs ?? 0) + (g.native?.packs ?? 0);
    return n;
  }

  /**
   * Times every candidate config of a kernel on this run's real buffers with kiln.Event (the
   * autotuner keeps the minimum over reps and persists the winner per kernel and shape class).
   * Kernels only write their own outputs, which no input aliases, so repeated runs are harmless.
   */
  private tune(ks: KernelStep, shape: readonly number[], call: (fn: KernelFn) => void): void {
    const fns = compileCandidates(ks.code.candidates);
    const key = `${kernelSourceHash(ks.code.candidates.map((c) => `${JSON.stringify(c.config)}${c.source}`).join('\n'))}:${shape.length}:${shape.reduce((a, b) => a * b, 1) >= 1 << 16 ? 'large' : 'small'}`;
    const r = autotune({ key, device: 'cpu', candidates: ks.code.candidates.map((c, i) => ({ config: c.config, run: () => call(fns[i]!) })) });
    ks.chosen = r.bestIndex;
    ks.fn = fns[r.bestIndex]!;
    ks.tuned = true;
  }

  private runKernel(g: KernelGroup, run: RunState): void {
    const { env, plan, pool } = run;
    const ks = this.kernelSteps.get(g)!;
    const S =
      g.kind === 'pointwise' ? plan.get(g.nodes[0]!.outputs[0]!)!.shape : plan.get(g.nodes.find((n) => n.kind === 'reduction')!.reduce!.input)!.shape;
    const rank = S.length;
    const datas: NumArray[] = [];
    const offs: number[] = [];
    const strides: number[][] = [];
    const commits: (() => void)[] = [];
    for (const o of g.outputs) {
      const m = plan.get(o)!;
      const t = this.runner.alloc(m, pool);
      env.set(o, t);
      const w = writable(t);
      datas.push(w.data);
      offs.push(w.offset);
      commits.push(w.commit);
      if (!g.rowScalars.has(o)) strides.push([...t.strides]);
      else if (t.shape.length === rank) strides.push(t.strides.map((st, d) => (g.dims.includes(d) || t.shape[d] === 1 ? 0 : st)));
      else {
        const st: number[] = [];
        let k = 0;
        for (let d = 0; d < rank; d++) st.push(g.dims.includes(d) ? 0 : t.strides[k++]!);
        strides.push(st);
      }
    }
    for (const id of g.inputs) {
      const v = env.get(id)!;
      const base = 'ref' in v ? v.base : v;
      const r = readable(base);
      datas.push(r.data);
      offs.push(r.offset + (v.offset - base.offset));
      strides.push(broadcastStrides(v.shape, v.strides, S));
    }
    const all = Array.from({ length: rank }, (_, d) => d);
    let oshape: number[];
    let ost: number[][];
    let rshape: number[] = [1];
    let rst: number[][] = strides.map(() => [0]);
    if (g.kind === 'pointwise') {
      const order = orderBy(all, strides[0]!);
      const c = coalesce(
        order.map((d) => S[d]!),
        strides.map((st) => order.map((d) => st[d]!)),
      );
      oshape = c.shape;
      ost = c.strides;
    } else {
      const outer = all.filter((d) => !g.dims.includes(d));
      const ref = strides[g.outputs.length] ?? strides[0]!;
      const row = orderBy([...g.dims], ref);
      const co = coalesce(
        outer.map((d) => S[d]!),
        strides.map((st) => outer.map((d) => st[d]!)),
      );
      const cr = coalesce(
        row.map((d) => S[d]!),
        strides.map((st) => row.map((d) => st[d]!)),
      );
      oshape = co.shape;
      ost = co.strides;
      rshape = cr.shape;
      rst = cr.strides;
      if (row.some((d) => S[d] === 0)) rshape = [0];
    }
    if (S.some((x) => x === 0) && g.kind === 'pointwise') oshape = [0];
    if (!ks.tuned) this.tune(ks, S, (fn) => fn(HELPERS, oshape, ost, rshape, rst, offs, datas));
    ks.fn(HELPERS, oshape, ost, rshape, rst, offs, datas);
    for (const c of commits) c();
  }

  describe(): string {
    const parts: string[] = [];
    for (const [, ks] of this.kernelSteps) {
      const c = ks.code;
      parts.push(
        `// ${c.name}: ${c.group.nodes.length} ops [${c.group.nodes.map((n) => n.op).join(', ')}], config ${JSON.stringify(c.candidates[ks.chosen]!.config)} ` +
          `(${c.candidates.length} candidates)\n${nativeSource(c.candidates[ks.chosen]!)}${c.candidates[ks.chosen]!.source}`,
      );
    }
    const wrapper = this.runner.listing(
      '// wrapper',
      (g) => `call ${this.kernelSteps.get(g)!.code.name}`,
      (s, v) => {
        const g = this.gemms.get(s)!;
        return (
          `${stepOutputs(s).map(v).join(', ')} = gemm ${s.node.op}(${nodeInputs(s.node).map((id) => `%${id}`).join(', ')})` +
          (s.epilogue ? ` + epilogue [${s.epilogue.nodes.map((n) => n.op).join(', ')}](${s.epilogueInputs.map((e) => `%${e.id}:${e.kind}`).join(', ')})` : '') +
          ` ${g.native ? 'native BLIS GEMM' : g.bytes ? `f32x4 wasm, config ${JSON.stringify(g.config)}` : 'extern (no wasm)'}`
        );
      },
    );
    return [...parts, wrapper].join('\n\n');
  }
}
