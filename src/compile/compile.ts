/**
 * kiln.compile: torch.compile for kiln.
 *
 *   const f = kiln.compile((x) => model.forward(x), { mode: 'default' });
 *   const y = f(x);              // first call: trace, optimise, compile, run
 *   f(x2);                       // same guards: run the cached program
 *
 * Each call computes the guard key of its arguments (src/compile/guards.ts). On a hit the cached
 * program runs; on a miss the function is traced with fake tensors (capture.ts), the passes run
 * (passes/), the backend compiles the graph, and the entry is cached under its guards.
 * Structure: compile() resolves its options once (resolveSettings: the mode decoded by mode.ts,
 * the backend, the pass switches and KILN_* options read at compile time) and returns a function
 * that delegates to a CompiledFn, whose methods are the steps (guard check, trace, program, call).
 *
 * Dynamic shapes. The IR records concrete sizes, so an entry whose guard has symbolic dims holds
 * one trace per concrete shape, but backend programs are cached by the graph's structural
 * signature (passes/signature.ts): traces that differ only in symbolic sizes share one program.
 * Backend contract: a CompiledProgram must read tensor sizes (and strides) from the inputs it
 * is given at run time, never from the graph it was compiled from, because `run` receives inputs
 * whose symbolic dims differ from that graph's; and it must treat every graph input (lifted ones
 * too) as a run-time input. A program may additionally implement `runGraph(graph, inputs)`
 * (GraphAwareProgram): it is then called with the concrete graph traced for these inputs.
 * Symbolic sizes (symbolic.ts): where the backend's programs evaluate them (eager, the cpu target),
 * the sizes a trace derives from symbolic dims (view/reshape sizes, arange and narrow lengths) are
 * found by probe traces and become IR 'sym' arguments, so one program serves every size; each new
 * size is still traced and reuses that program only if its trace is the generalised graph at
 * these sizes. The cuda and webgpu targets keep one program per size.
 * - dynamic: true     every dim of every argument is symbolic from the first call;
 * - dynamic: undefined (automatic) a miss that differs from a cached entry only in some sizes
 *                      marks those dims symbolic for this function and builds the symbolic entry;
 * - dynamic: false    always specialise.
 *
 * Graph breaks: with fullgraph the error names the reason and the user's file:line; otherwise a
 * warning is emitted once per function and the guard set is remembered as broken, so later calls
 * with the same guards do not trace again. Such calls run the function with its segments between
 * breaks as compiled pieces (partial graphs: pieces.ts, segments.ts); break-free functions never
 * reach that path.
 *
 * What a compiled function sees (docs/compile-semantics.md): arguments are guarded; module state
 * (parameters, buffers, submodules, training flags) is guarded for root modules and for the modules
 * found behind the tensors the trace lifted (module-state.ts), so closures over a model are
 * guarded too; a tensor read from a closure that no module holds is baked in as that object and
 * warned about once (captured-warning.ts); everything else JS cannot observe (a reassigned number
 * or flag, side effects) is baked in at trace time, which verify mode (verify.ts) re-traces every
 * call to catch.
 *
 * Grad: when grad mode is on and a tensor argument or a lifted tensor (a Parameter) requires grad,
 * the call uses the variant's joint forward+backward (joint.ts, traced once per variant): the
 * compiled forward's outputs are linked to autograd by one node whose backward runs the compiled
 * backward program (joint-program.ts). Under kiln.noGrad the same guards run the inference
 * program. A backward that cannot be captured (an op without a formula, a formula that reads
 * data, in-place writes to values that need grad) makes such calls run eagerly, counted in
 * `fallbacks`, with one warning per function (an error with fullgraph).
 */
import { emitWarning } from '../platform/index.js';
import { isGradEnabled } from '../autograd/grad-mode.js';
import { autocastDtype } from '../api/autocast.js';
import { Module } from '../nn/module.js';
import { Tensor } from '../tensor/tensor.js';
import { getBackend, listBackends, type CompileMode, type CompiledProgram } from './backend.js';
import { getOption } from '../runtime/config.js';
import { checkOptionKeys, keysOf } from '../runtime/option-keys.js';
import { freezeLlmPolicy } from '../ops/library/policy.js';
import { GraphBreak, trace, type Trace } from './capture.js';
import { generalize, matchGeneralized, MAX_SYMBOLS, probeArgs, symbolsOf, type SymbolicInputDims } from './symbolic.js';
import { capturedConstants, warnCaptured, type CapturedTensorsPolicy } from './captured-warning.js';
import { discoverModuleState } from './module-state.js';
import { traceDifference, verifyError } from './verify.js';
import {
  anyRequiresGrad,
  captureLiftedGuards,
  checkLiftedGuards,
  computeArgGuards,
  describeGuardChange,
  liftedRequireGrad,
  sizeOnlyDiff,
  SymbolicDims,
  type ArgGuards,
  type GuardLeaf,
  type LiftedGuards,
} from './guards.js';
import { recordFastCall, type FastCallRecord } from './fast-call.js';
import { formatGraph, type Graph } from './ir.js';
import { PieceCache } from './pieces.js';
import { BackwardUnsupported, traceJoint } from './joint.js';
import { inputTensor, runJoint, type JointProgram, type Runner } from './joint-program.js';
import { log, type LogArtifact } from './log.js';
import { decodeMode, type ModeOptions } from './mode.js';
import { graphSignature, registeredRewriteRules, runPasses, type PassOptions, type PipelineOptions } from './passes/index.js';

export interface CompileOptions {
  mode?: CompileMode;
  /** true: all dims symbolic; undefined: automatic dynamic; false: always specialise. */
  dynamic?: boolean;
  /** Throw on graph breaks instead of running the call eagerly. */
  fullgraph?: boolean;
  /** Backend name (default 'kiln' if registered, else 'eager'). */
  backend?: string;
  /** Recompilations allowed before new guard sets run eagerly (default 8). */
  recompileLimit?: number;
  /** Extra log artifacts besides KILN_LOG. */
  log?: readonly LogArtifact[];
  /** Modules whose parameters/buffers/training flags are guarded (closures over a model). */
  modules?: readonly Module[];
  /** Pass pipeline switches (decompositions default to on for backends other than 'eager'). */
  passes?: PassOptions;
  /** Name in warnings and errors (default: fn.name). */
  name?: string;
  /**
   * Re-trace every call and raise an error naming the first difference from the compiled trace
   * (a closed-over value that changed). Slow: for tests and debugging. Default KILN_COMPILE_VERIFY.
   */
  verify?: boolean;
  /** Tensors read from closures that no module holds: 'warn' once at trace time (default) or 'allow'. */
  capturedTensors?: CapturedTensorsPolicy;
}

export interface CompileCounters {
  /** Backend compile calls. */
  compiles: number;
  traces: number;
  /** Calls that ran an already built program without tracing. */
  cacheHits: number;
  /** Of the cache hits, those answered by the last-call fast path (fast-call.ts) without the full guard check. */
  fastHits: number;
  /** Guard misses after the first compile of a function. */
  recompiles: number;
  graphBreaks: number;
  /** Eager runs because the backward could not be compiled or the recompile limit was hit. */
  fallbacks: number;
  /** Runs of a compiled backward program (each backward() through a compiled call). */
  backwards: number;
  /** Every call that ran the original function rather than one program (graph breaks, fallbacks). */
  eagerCalls: number;
  /** Partial graphs: segments of graph-breaking calls that ran as compiled pieces. */
  pieces: number;
  calls: number;
  /** Backend compiles answered by the on-disk program cache (lowering and codegen skipped). */
  diskHits: number;
  /** Backend compiles that found no usable program on disk and built (and stored) one. */
  diskMisses: number;
}

function zeroCounters(): CompileCounters {
  return { compiles: 0, traces: 0, cacheHits: 0, fastHits: 0, recompiles: 0, graphBreaks: 0, fallbacks: 0, backwards: 0, eagerCalls: 0, pieces: 0, calls: 0, diskHits: 0, diskMisses: 0 };
}

const globalCounters = zeroCounters();

/** Counters summed over every compiled function (a copy). */
export function compileCounters(): CompileCounters {
  return { ...globalCounters };
}

export function resetCompileCounters(): void {
  Object.assign(globalCounters, zeroCounters());
}

/** Optional program extension: receives the concrete graph traced for the inputs of this call. */
export interface GraphAwareProgram extends CompiledProgram {
  runGraph(graph: Graph, inputs: readonly Tensor[]): unknown;
}

function isGraphAware(p: CompiledProgram): p is GraphAwareProgram {
  return typeof (p as Partial<GraphAwareProgram>).runGraph === 'function';
}

/** One trace of an entry, for one concrete shape. */
interface Variant {
  readonly graph: Graph;
  readonly signature: string;
  program: CompiledProgram | undefined;
  readonly guards: LiftedGuards;
  /** Grad-mode calls: the compiled forward+backward, or why the backward runs eagerly. */
  joint?: JointProgram | { readonly eager: string };
  /** The guard key it was traced under (part of the on-disk program cache key). */
  readonly guardKey: string;
  /** The capture the program was built from (kept in verify mode only). */
  readonly trace?: Trace;
  /** Its graph has symbolic sizes (symbolic.ts): later traces of the entry may instantiate it. */
  readonly general: boolean;
}

/** The programs a compiled function holds, for inspection (tests, tools). */
export interface CompiledPrograms {
  /** Programs run under noGrad or when nothing requires grad. */
  readonly inference: readonly CompiledProgram[];
  /** Per compiled joint: its forward and backward programs. */
  readonly joint: readonly { readonly forward: CompiledProgram; readonly backward: CompiledProgram }[];
}

interface Entry {
  readonly key: string;
  readonly leaves: readonly GuardLeaf[];
  kind: 'compiled' | 'eager';
  breakReason?: string;
  /** A graph-breaking entry whose calls cannot run as pieces (a piece run hit a break): plain eager. */
  noPieces?: boolean;
  readonly variants: Map<string, Variant>;
}

const MAX_VARIANTS = 64;

/** What the fast path of a compiled call needs of a variant. */
interface FastTarget {
  readonly guards: LiftedGuards;
  readonly run: (inputs: readonly Tensor[]) => unknown;
}

export type CompiledFunction<F extends (...args: never[]) => unknown> = F & {
  /** This function's counters (live object). */
  readonly counters: CompileCounters;
  /** The function being compiled. */
  readonly original: F;
  /** Drops every cached entry and program (counters are kept). */
  resetCache(): void;
  /** Dims currently symbolic, as `argPath#dim`, or ['*'] with dynamic: true. */
  symbolicDims(): string[];
  /** The compiled programs held now. */
  programs(): CompiledPrograms;
};

type ForwardModule = Module & { forward(...args: never[]): unknown };

/** What a compiled function was built with, resolved once from CompileOptions. */
interface CompileSettings {
  /** The function traced (a Module's forward, bound). */
  readonly fn: (...args: never[]) => unknown;
  /** Name in warnings, errors and logs. */
  readonly fnName: string;
  /** Modules whose parameters, buffers and training flags are guarded. */
  readonly roots: readonly Module[];
  readonly mode: ModeOptions;
  readonly backendName: string;
  readonly recompileLimit: number;
  readonly dynamic: boolean | undefined;
  readonly fullgraph: boolean;
  readonly passOptions: PipelineOptions;
  readonly jointPassOptions: PipelineOptions;
  readonly logs: readonly LogArtifact[] | undefined;
  /** The last-call fast path (fast-call.ts) is on. */
  readonly fastCalls: boolean;
  readonly verify: boolean;
  readonly capturedTensors: CapturedTensorsPolicy;
}

/** The function and module roots of a compile target, and its default name. */
function resolveTarget(target: unknown, options: CompileOptions): { fn: (...args: never[]) => unknown; roots: Module[]; name: string } {
  const roots: Module[] = [...(options.modules ?? [])];
  if (target instanceof Module) {
    const m = target as ForwardModule;
    if (typeof m.forward !== 'function') throw new TypeError(`kiln.compile: module ${m.constructor.name} has no forward method`);
    roots.push(m);
    return { fn: (...args: never[]) => m.forward(...args), roots, name: options.name ?? `${m.constructor.name}.forward` };
  }
  if (typeof target === 'function') return { fn: target as (...args: never[]) => unknown, roots, name: options.name ?? (target.name || '<anonymous>') };
  throw new TypeError(`kiln.compile: expected a function or a Module, got ${target === null ? 'null' : typeof target}`);
}

const COMPILE_KEYS = keysOf<CompileOptions>({
  mode: true,
  dynamic: true,
  fullgraph: true,
  backend: true,
  recompileLimit: true,
  log: true,
  modules: true,
  passes: true,
  name: true,
  verify: true,
  capturedTensors: true,
});
const PASS_KEYS = keysOf<PassOptions>({ dce: true, cse: true, constantFolding: true, decompose: true, foldConvBn: true, rewrites: true, horizontalFusion: true, qkNormRotary: true, qkNormRotaryCache: true, linearSiluMul: true, addRmsNormLinear: true, linearGelu: true });

function resolveSettings(target: unknown, options: CompileOptions): CompileSettings {
  // A misspelt key would silently compile with the default (issue #18 item 8).
  checkOptionKeys('kiln.compile', options, COMPILE_KEYS);
  checkOptionKeys('kiln.compile: passes', options.passes, PASS_KEYS);
  const { fn, roots, name } = resolveTarget(target, options);
  const mode = decodeMode(options.mode);
  if (options.capturedTensors !== undefined && options.capturedTensors !== 'warn' && options.capturedTensors !== 'allow') {
    throw new TypeError(`kiln.compile: capturedTensors must be 'warn' or 'allow', got ${JSON.stringify(options.capturedTensors)}`);
  }
  const verify = options.verify ?? getOption('KILN_COMPILE_VERIFY');
  const backendName = options.backend ?? (listBackends().includes('kiln') ? 'kiln' : 'eager');
  getBackend(backendName); // fail early on unknown names
  const codegen = backendName !== 'eager';
  // Rewrites that always pay (autoRewriteRules) run on code-generating backends unless the caller
  // picks the rules; the full library set is opt-in with passes: { rewrites: 'default' }.
  // Horizontal linear fusion (concatenated weights) applies to inference programs only; the joint
  // forward+backward keeps separate parameters for their gradients. KILN_HORIZONTAL_FUSION=0 turns
  // it off (A/B measurements). The q/k norm + rotary fusion (one library launch per attention
  // layer) likewise: inference programs only (the fused op has no backward), KILN_QK_NORM_ROTARY=0 off.
  const arl = getOption('KILN_ADD_RMSNORM_LINEAR');
  const passOptions: PipelineOptions = {
    decompose: codegen,
    rewrites: codegen ? registeredRewriteRules('auto') : [],
    horizontalFusion: codegen && getOption('KILN_HORIZONTAL_FUSION'),
    qkNormRotary: codegen && getOption('KILN_QK_NORM_ROTARY'),
    // Its decode-step sequel (rotary + paged-cache write in one launch): off until measured on a GPU.
    qkNormRotaryCache: codegen && getOption('KILN_QK_NORM_ROTARY_CACHE'),
    // And the MLP's gate/up GEMV with silu * mul in its epilogue: off until measured on a GPU.
    linearSiluMul: codegen && getOption('KILN_LINEAR_SILU_MUL'),
    // And a linear with the GELU after it, where a device has the fused kernel (webgpu).
    linearGelu: codegen && getOption('KILN_LINEAR_GELU'),
    // And the add + RMSNorm in the prologue of the GEMV after it: on webgpu at one row by default
    // (measured there), everywhere with KILN_ADD_RMSNORM_LINEAR=1 or passes: { addRmsNormLinear: true }, =0 off.
    addRmsNormLinear: codegen && arl !== false,
    ...options.passes,
    addRmsNormLinearWebgpuOnly: arl === undefined && options.passes?.addRmsNormLinear !== true,
  };
  return {
    fn,
    fnName: name,
    roots,
    mode,
    backendName,
    recompileLimit: options.recompileLimit ?? 8,
    dynamic: options.dynamic,
    fullgraph: options.fullgraph === true,
    passOptions,
    jointPassOptions: { ...passOptions, horizontalFusion: false, qkNormRotary: false, qkNormRotaryCache: false, linearSiluMul: false, addRmsNormLinear: false, linearGelu: false },
    logs: options.log,
    // KILN_COMPILE_FAST_CALL=0 takes the full guard check on every call (A/B timing, and a way out
    // should the fast path ever disagree with it); read when the function is compiled.
    // Verify mode checks every call against a fresh trace: no call may skip the slow path.
    fastCalls: getOption('KILN_COMPILE_FAST_CALL') && !verify,
    verify,
    capturedTensors: options.capturedTensors ?? 'warn',
  };
}

/**
 * The state of one compiled function and its steps: `call` (fast path, then the guard check),
 * `build` (trace and optimise a variant), `ensureProgram` (the backend's program of a variant),
 * `callJoint` / `buildJoint` (grad-mode calls), and the eager ways out.
 */
class CompiledFn {
  /** This function's counters (live: compiled.counters is this object). */
  readonly counters = zeroCounters();
  readonly symbolic: SymbolicDims;
  private readonly entries = new Map<string, Entry>();
  /** Backend programs by graph signature (shared by the variants of symbolic entries). */
  private readonly programs = new Map<string, CompiledProgram>();
  private compiledOnce = false;
  private lastLeaves: readonly GuardLeaf[] | undefined;
  private warnedBreak = false;
  private warnedLimit = false;
  private warnedBackward = false;
  private warnedCaptured = false;
  /** The variant built by the current call (verify mode does not re-trace it). */
  private justBuilt: Variant | undefined;
  /** The last call that ran an inference program (fast-call.ts); cleared by every slow call. */
  private fast: FastCallRecord<FastTarget> | undefined;
  /** Compiled pieces of graph-breaking calls (partial graphs). */
  private readonly pieces: PieceCache;

  constructor(private readonly s: CompileSettings) {
    this.symbolic = new SymbolicDims(s.dynamic === true);
    this.pieces = new PieceCache({
      passOptions: s.passOptions,
      keepComposites: (graph) => getBackend(s.backendName).nativeComposites?.(graph),
      compile: (graph) => {
        this.bump('compiles');
        const p = getBackend(s.backendName).compile(graph, { mode: s.mode.name, logCode: false });
        log('output_code', s.logs, () => `piece of '${s.fnName}' (${s.backendName} backend, ${p.kernelCount} kernels):\n${p.describe()}`);
        return p;
      },
      onPiece: () => this.bump('pieces'),
    });
  }

  private bump(k: keyof CompileCounters): void {
    this.counters[k]++;
    globalCounters[k]++;
  }

  /** One call of the compiled function. */
  call(args: unknown[]): unknown {
    this.bump('calls');
    const grad = isGradEnabled();
    // Steady state: the same metadata as the last inference call, nothing symbolic added since,
    // and its lifted tensors / module state unchanged (checked on every call, as below).
    // The fast path compares arguments only: under autocast the full guards (which hold its dtype) run.
    const f = autocastDtype() === null ? this.fast : undefined;
    if (f !== undefined && this.s.fastCalls && f.symbolicCount === this.symbolic.size && !(grad && f.needsGrad) && f.matches(args) && checkLiftedGuards(f.variant.guards) === null) {
      this.bump('cacheHits');
      this.bump('fastHits');
      return f.variant.run(f.inputs(args));
    }
    this.fast = undefined;
    const { g, entry, missReason } = this.checkGuards(args);
    if (entry?.kind === 'eager') return this.partial(entry, args);
    const found = this.variantFor(entry, g, args, missReason);
    if (found === 'eager') return this.partial(this.entries.get(g.key), args);
    if (found === 'fallback') return this.fallback(args);
    const variant = found;
    if (this.s.verify && variant !== this.justBuilt) this.verifyCall(variant, args);
    this.justBuilt = undefined;
    const needsGrad = anyRequiresGrad(g) || liftedRequireGrad(variant.guards);
    if (grad && needsGrad) return this.callJoint(variant, g, args);
    return this.runInference(variant, args, needsGrad);
  }

  /** The guards of `args`, their entry if any, and why they missed (automatic dynamic applied). */
  private checkGuards(args: readonly unknown[]): { g: ArgGuards; entry: Entry | undefined; missReason: string | undefined } {
    let g = computeArgGuards(args, this.symbolic);
    let entry = this.entries.get(g.key);
    let missReason: string | undefined;
    if (!entry) {
      missReason = describeGuardChange(this.lastLeaves, g.leaves);
      // Automatic dynamic: a miss only because of sizes marks those dims symbolic.
      if (this.s.dynamic === undefined && this.compiledOnce) {
        for (const e of this.entries.values()) {
          const dims = sizeOnlyDiff(e.leaves, g.leaves);
          if (!dims) continue;
          for (const { path, dim } of dims) this.symbolic.add(path, dim);
          g = computeArgGuards(args, this.symbolic);
          entry = this.entries.get(g.key);
          missReason = `${missReason} (now symbolic: ${dims.map((d) => `${d.path}#${d.dim}`).join(', ')})`;
          break;
        }
      }
    }
    return { g, entry, missReason };
  }

  /**
   * The variant for these guards: the cached one when its lifted guards still hold, else a new
   * trace; 'eager' after a graph break, 'fallback' when the recompile limit stops a new one.
   */
  private variantFor(found: Entry | undefined, g: ArgGuards, args: readonly unknown[], reason: string | undefined): Variant | 'eager' | 'fallback' {
    let entry = found;
    let missReason = reason;
    let variant = entry?.variants.get(g.concreteKey);
    if (variant) {
      const failed = checkLiftedGuards(variant.guards);
      if (failed) {
        entry!.variants.delete(g.concreteKey);
        variant = undefined;
        missReason = failed;
      }
    }
    if (variant) {
      this.bump('cacheHits');
      return variant;
    }
    // A new concrete shape under an existing symbolic entry is not a miss; anything else is.
    if (!entry || missReason !== undefined) {
      if (!this.allowRecompile(missReason ?? 'new guards')) return 'fallback';
    }
    if (!entry) {
      entry = { key: g.key, leaves: g.leaves, kind: 'compiled', variants: new Map() };
      this.entries.set(g.key, entry);
    }
    this.lastLeaves = g.leaves;
    try {
      return this.build(entry, g, args) ?? 'eager';
    } catch (e) {
      // A user error while tracing (shape mismatch...): leave no empty entry behind.
      if (entry.kind === 'compiled' && entry.variants.size === 0) this.entries.delete(entry.key);
      throw e;
    }
  }

  /** Runs a variant's inference program and records the call for the fast path. */
  private runInference(variant: Variant, args: readonly unknown[], needsGrad: boolean): unknown {
    const program = this.ensureProgram(variant);
    const graph = variant.graph;
    const run = isGraphAware(program) ? (inputs: readonly Tensor[]) => program.runGraph(graph, inputs) : (inputs: readonly Tensor[]) => program.run(inputs);
    // Recorded from the metadata this call was guarded with, before the program runs.
    if (autocastDtype() === null) this.fast = recordFastCall({ guards: variant.guards, run }, graph, args, this.symbolic.size, needsGrad);
    return run(inputsFor(graph, args));
  }

  private eager(args: readonly unknown[]): unknown {
    this.bump('eagerCalls');
    return this.s.fn(...(args as never[]));
  }

  /**
   * A call of a graph-breaking guard set: its segments run as compiled pieces. A break the
   * recorder cannot resume from (a kernel reaching a lazy tensor's memory outside the dispatcher)
   * makes this and later calls of the entry run plainly eagerly; the function then runs again
   * from the start, as after a failed trace.
   */
  private partial(entry: Entry | undefined, args: readonly unknown[]): unknown {
    if (entry === undefined || entry.noPieces) return this.eager(args);
    this.bump('eagerCalls');
    try {
      return this.pieces.call(this.s.fn, args);
    } catch (e) {
      if (!(e instanceof GraphBreak)) throw e;
      entry.noPieces = true;
      log('recompiles', this.s.logs, () => `'${this.s.fnName}': partial graphs off for guards ${entry.key}: ${e.reason}`);
      return this.s.fn(...(args as never[]));
    }
  }

  private fallback(args: readonly unknown[]): unknown {
    this.bump('fallbacks');
    return this.eager(args);
  }

  /** Returns false (and runs nothing) when the recompile limit is exhausted. */
  private allowRecompile(reason: string): boolean {
    if (!this.compiledOnce) return true;
    const { fnName, recompileLimit } = this.s;
    if (this.counters.recompiles >= recompileLimit) {
      if (!this.warnedLimit) {
        this.warnedLimit = true;
        emitWarning(
          `kiln.compile: function '${fnName}' hit the recompile limit (${recompileLimit}); new guard sets now run eagerly. ` +
            `Last changed guard: ${reason}. Consider dynamic: true or a higher recompileLimit.`,
          { type: 'KilnCompileWarning', code: 'KILN_RECOMPILE_LIMIT' },
        );
      }
      return false;
    }
    this.bump('recompiles');
    log('recompiles', this.s.logs, () => `recompiling '${fnName}' (${this.counters.recompiles}/${recompileLimit}): ${reason}`);
    return true;
  }

  /** Traces and optimises one variant; null on a graph break (the entry becomes eager). */
  private build(entry: Entry, g: ArgGuards, args: readonly unknown[]): Variant | null {
    const { fnName, logs } = this.s;
    this.bump('traces');
    // Library-op choices are pinned before the first capture (they are part of what a program means).
    freezeLlmPolicy();
    let captured: Trace;
    try {
      captured = trace(this.s.fn, args);
    } catch (e) {
      if (!(e instanceof GraphBreak)) throw e;
      if (this.s.fullgraph) {
        throw new Error(
          `kiln.compile: graph break in '${fnName}' with fullgraph: true: ${e.reason}${e.userFrame ? ` at ${e.userFrame}` : ''}`,
          { cause: e },
        );
      }
      this.bump('graphBreaks');
      entry.kind = 'eager';
      entry.breakReason = e.reason;
      entry.variants.clear();
      if (!this.warnedBreak) {
        this.warnedBreak = true;
        emitWarning(`kiln.compile: graph break in '${fnName}': ${e.reason}${e.userFrame ? ` at ${e.userFrame}` : ''}; the code around the break runs as compiled pieces`, {
          type: 'KilnCompileWarning',
          code: 'KILN_GRAPH_BREAK',
        });
      }
      return null;
    }
    const traced = captured.graph;
    log('graph', logs, () => `captured graph of '${fnName}':\n${formatGraph(traced)}`);
    // Inference graph (a grad call traces its own joint graph): conv+BatchNorm(eval) may fold.
    // Symbolic dims in the guards and a backend whose programs evaluate symbolic sizes: the
    // graph's sizes may become symbolic (symbolic.ts), so one program serves every size.
    const sized = g.leaves.some((l) => l.kind === 'tensor' && l.guard.includes('?')) && getBackend(this.s.backendName).symbolicSizes?.(traced) === true;
    const optimised = runPasses(traced, this.inferencePassOptions(sized, traced));
    const foldedSources = optimised.foldedSources;
    const dims = symbolicDimsOf(optimised.graph, g);
    const general = sized ? this.symbolicSizes(entry, optimised.graph, dims, args) : null;
    const graph = general ?? optimised.graph;
    log('graph', logs, () => `optimised graph of '${fnName}'${general ? ' (symbolic sizes)' : ''}:\n${formatGraph(graph)}`);
    log('guards', logs, () => `guards of '${fnName}': ${g.key}`);
    const signature = graphSignature(graph, dims);
    const state = discoverModuleState(liftedBefore(traced, captured.startTensorId));
    const guards = captureLiftedGuards(traced, foldedSources, [...this.s.roots, ...g.modules], state);
    this.warnCaptured(captured, state.owned);
    const variant: Variant = { graph, signature, program: this.programs.get(signature), guards, guardKey: g.key, trace: this.s.verify ? captured : undefined, general: general !== null };
    this.justBuilt = variant;
    if (entry.variants.size >= MAX_VARIANTS) entry.variants.delete(entry.variants.keys().next().value!);
    entry.variants.set(g.concreteKey, variant);
    return variant;
  }

  private inferencePassOptions(symbolicSizes: boolean, graph: Graph): Parameters<typeof runPasses>[1] {
    return { foldConvBn: this.s.backendName !== 'eager', ...this.s.passOptions, symbolicSizes, ...this.keepComposites(graph) };
  }

  /** The composites the target of `graph` renders whole (backend.ts nativeComposites), for the decompose pass. */
  private keepComposites(graph: Graph): { keepComposites?: ReadonlySet<string> } {
    const keep = getBackend(this.s.backendName).nativeComposites?.(graph);
    return keep ? { keepComposites: keep } : {};
  }

  /**
   * The optimised graph with symbolic sizes (symbolic.ts) when the guards have symbolic dims and
   * the backend's program takes them: an earlier generalised variant of this entry that this trace
   * instantiates, or a new generalisation from probe traces; null: keep the numbers.
   */
  private symbolicSizes(entry: Entry, graph: Graph, dims: SymbolicInputDims, args: readonly unknown[]): Graph | null {
    const symbols = symbolsOf(graph, dims);
    if (symbols.length === 0 || symbols.length > MAX_SYMBOLS) return null;
    for (const v of entry.variants.values()) {
      if (!v.general) continue;
      const m = matchGeneralized(v.graph, graph, dims);
      if (m) return m;
    }
    const probes: Graph[] = [];
    for (const s of symbols) {
      const src = graph.inputs[s.input]!.source;
      const size = graph.values.get(graph.inputs[s.input]!.id)!.shape[s.dim]!;
      const probe = src.kind === 'arg' ? probeArgs(args, src.path, s.dim, size + 1) : null;
      if (!probe) return null;
      try {
        const probeGraph = trace(this.s.fn, probe).graph;
        probes.push(runPasses(probeGraph, this.inferencePassOptions(true, probeGraph)).graph);
      } catch {
        // The function does not trace at the probe size (it checks T, a table is too short...).
        return null;
      }
    }
    const general = generalize(graph, probes, symbols, dims);
    log('recompiles', this.s.logs, () => `'${this.s.fnName}': ${general ? `symbolic sizes: one program for every size of ${symbols.length} dynamic dim(s)` : 'sizes stay specialised (the probe traces differ beyond integer sizes)'}`);
    return general;
  }

  /** The captured-constant warning, once per function (captured-warning.ts). */
  private warnCaptured(t: Trace, owned: ReadonlySet<Tensor>): void {
    if (this.warnedCaptured || this.s.capturedTensors === 'allow') return;
    const found = capturedConstants(t, owned);
    if (found.length === 0) return;
    this.warnedCaptured = true;
    warnCaptured(this.s.fnName, found);
  }

  /** Verify mode: trace this call again and fail on any difference from the variant's trace. */
  private verifyCall(v: Variant, args: readonly unknown[]): void {
    const call = this.counters.calls;
    let now: Trace;
    try {
      now = trace(this.s.fn, args);
    } catch (e) {
      if (!(e instanceof GraphBreak)) throw e;
      throw verifyError(this.s.fnName, call, `it now breaks the graph (${e.reason}${e.userFrame ? ` at ${e.userFrame}` : ''}); a closed-over value changed`);
    }
    if (!v.trace) return;
    const diff = traceDifference(v.trace, now);
    if (diff !== null) throw verifyError(this.s.fnName, call, diff);
  }

  /** The backend program of a variant: shared by signature, compiled (or loaded from disk) once. */
  private ensureProgram(v: Variant): CompiledProgram {
    if (v.program) return v.program;
    const { fnName, backendName } = this.s;
    let p = this.programs.get(v.signature);
    if (!p) {
      this.bump('compiles');
      p = getBackend(backendName).compile(v.graph, { mode: this.s.mode.name, logCode: false, cacheContext: { signature: v.signature, guardKey: v.guardKey } });
      if (p.diskCache === 'hit') this.bump('diskHits');
      else if (p.diskCache === 'miss') this.bump('diskMisses');
      this.programs.set(v.signature, p);
      const prog = p;
      log('output_code', this.s.logs, () => `program of '${fnName}' (${backendName} backend, ${prog.kernelCount} kernels):\n${prog.describe()}`);
    }
    v.program = p;
    this.compiledOnce = true;
    return p;
  }

  /** A forward or backward program of a joint (never disk-cached: no cache context). */
  private compileRunner(graph: Graph, role: string): Runner {
    const { fnName, backendName } = this.s;
    this.bump('compiles');
    const program = getBackend(backendName).compile(graph, { mode: this.s.mode.name, logCode: false });
    log('output_code', this.s.logs, () => `${role} program of '${fnName}' (${backendName} backend, ${program.kernelCount} kernels):\n${program.describe()}`);
    return { program, run: (inputs) => (isGraphAware(program) ? program.runGraph(graph, inputs) : program.run(inputs)) };
  }

  /** Traces and compiles the joint forward+backward of a call; records why when it cannot. */
  private buildJoint(g: ArgGuards, args: readonly unknown[]): JointProgram | { eager: string } {
    const { fnName, logs } = this.s;
    this.bump('traces');
    let traced;
    try {
      traced = traceJoint(this.s.fn, args);
    } catch (e) {
      if (!(e instanceof GraphBreak) && !(e instanceof BackwardUnsupported)) throw e;
      const reason = e instanceof GraphBreak ? `graph break: ${e.reason}${e.userFrame ? ` at ${e.userFrame}` : ''}` : e.reason;
      if (this.s.fullgraph) throw new Error(`kiln.compile: cannot compile the backward of '${fnName}' with fullgraph: true: ${reason}`, { cause: e });
      if (!this.warnedBackward) {
        this.warnedBackward = true;
        emitWarning(`kiln.compile: the backward of '${fnName}' cannot be compiled (${reason}); calls that need gradients run eagerly`, {
          type: 'KilnCompileWarning',
          code: 'KILN_BACKWARD_FALLBACK',
        });
      }
      return { eager: reason };
    }
    log('graph', logs, () => `joint forward+backward graph of '${fnName}':\n${formatGraph(traced.joint)}`);
    const fwd = runPasses(traced.forward, { ...this.s.jointPassOptions, ...this.keepComposites(traced.forward) });
    const bwd = runPasses(traced.backward, { ...this.s.jointPassOptions, ...this.keepComposites(traced.backward) });
    log('graph', logs, () => `optimised forward of '${fnName}':\n${formatGraph(fwd.graph)}\noptimised backward:\n${formatGraph(bwd.graph)}`);
    const graphs = { ...traced, forward: fwd.graph, backward: bwd.graph };
    const state = discoverModuleState(liftedBefore(traced.joint, Infinity));
    const guards = captureLiftedGuards(traced.joint, [...fwd.foldedSources, ...bwd.foldedSources], [...this.s.roots, ...g.modules], state);
    const jp: JointProgram = { graphs, forward: this.compileRunner(fwd.graph, 'forward'), backward: this.compileRunner(bwd.graph, 'backward'), guards };
    this.compiledOnce = true;
    return jp;
  }

  /** A grad-mode call of a variant: the compiled joint, or eager when its backward cannot compile. */
  private callJoint(v: Variant, g: ArgGuards, args: readonly unknown[]): unknown {
    if (v.joint && !('eager' in v.joint)) {
      const failed = checkLiftedGuards(v.joint.guards);
      if (failed) {
        log('recompiles', this.s.logs, () => `rebuilding the joint forward+backward of '${this.s.fnName}': ${failed}`);
        v.joint = undefined;
      }
    }
    v.joint ??= this.buildJoint(g, args);
    if ('eager' in v.joint) return this.fallback(args);
    return runJoint(v.joint, args, this.s.fnName, () => this.bump('backwards'));
  }

  /** Drops every cached entry and program (counters are kept). */
  resetCache(): void {
    this.entries.clear();
    this.programs.clear();
    this.pieces.clear();
    this.fast = undefined;
    this.compiledOnce = false;
    this.lastLeaves = undefined;
  }

  compiledPrograms(): CompiledPrograms {
    const variants = [...this.entries.values()].flatMap((e) => [...e.variants.values()]);
    return {
      inference: [...this.programs.values()],
      joint: variants.flatMap((v) => (v.joint && !('eager' in v.joint) ? [{ forward: v.joint.forward.program, backward: v.joint.backward.program }] : [])),
    };
  }
}

/** For each graph input, the dims its guard made symbolic (graphSignature writes them as '?'). */
function symbolicDimsOf(graph: Graph, g: ArgGuards): SymbolicInputDims {
  const byPath = new Map<string, readonly (number | '?')[]>();
  for (const l of g.leaves) if (l.kind === 'tensor') byPath.set(l.path, l.guard);
  return (i) => {
    const src = graph.inputs[i]!.source;
    if (src.kind !== 'arg') return new Set();
    const p = src.path.map((s, k) => (typeof s === 'number' ? (k === 0 ? `arg${s}` : `[${s}]`) : `.${s}`)).join('');
    const guard = byPath.get(p) ?? [];
    return new Set(guard.flatMap((s, d) => (s === '?' ? [d] : [])));
  };
}

/** The lifted tensors of a graph that existed before its trace began (closure reads, module state). */
function liftedBefore(graph: Graph, startTensorId: number): Tensor[] {
  return graph.inputs.flatMap((i) => (i.source.kind === 'lifted' && i.source.tensor.id < startTensorId ? [i.source.tensor] : []));
}

const inputsFor = (graph: Graph, args: readonly unknown[]): Tensor[] => graph.inputs.map((inp) => inputTensor(inp, args));

export function compile<M extends ForwardModule>(model: M, options?: CompileOptions): CompiledFunction<M['forward']>;
export function compile<F extends (...args: never[]) => unknown>(fn: F, options?: CompileOptions): CompiledFunction<F>;
export function compile(target: ((...args: never[]) => unknown) | ForwardModule, options: CompileOptions = {}): CompiledFunction<(...args: never[]) => unknown> {
  const settings = resolveSettings(target, options);
  const state = new CompiledFn(settings);
  const compiled = ((...args: unknown[]): unknown => state.call(args)) as unknown as CompiledFunction<(...args: never[]) => unknown>;
  Object.defineProperties(compiled, {
    counters: { value: state.counters, enumerable: true },
    original: { value: settings.fn },
    resetCache: { value: () => state.resetCache() },
    symbolicDims: { value: () => (state.symbolic.all ? ['*'] : state.symbolic.list()) },
    programs: { value: (): CompiledPrograms => state.compiledPrograms() },
    name: { value: `compiled ${settings.fnName}` },
  });
  return compiled;
}
