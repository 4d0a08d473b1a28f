/**
 * Compile targets, in the spirit of Inductor's `register_backend_for_device`: per device type, one
 * object that says what the code generator can fuse there (`fusion`: the questions lowering asks,
 * lower/fusion-rules.ts) and how a graph on that device becomes a program (render each fused
 * group into source, compile and launch it, run the steps on the shared step runner,
 * codegen/step-runner.ts). The `kiln` backend (kiln-backend.ts) asks `targetDevice(graph)` which
 * target compiles a graph and never tests a device type itself.
 *
 * Built-in targets register themselves where their code generator lives: 'cpu' (JavaScript, C and
 * Wasm kernels) in codegen/js/target.ts, 'cuda' (CUDA C kernels, CUDA graphs) in
 * cuda-graphs/target.ts, 'webgpu' (WGSL kernels) in codegen/wgsl/target.ts; kiln-backend.ts
 * imports them. Kernel rendering is part of `program`:
 * the cpu target renders every group once when the program is built, the cuda target once per
 * layout spec (the traced one at build time, new ones at run time), so no single render-a-group
 * call would fit both.
 */
import { CPU, type Device } from '../runtime/device.js';
import type { BackendOptions, CompiledProgram } from './backend.js';
import type { Graph } from './ir.js';
import type { FusionRules } from './lower/fusion-rules.js';
import { lower, type Lowered } from './lower/lower.js';
import { schedule, type Schedule } from './lower/schedule.js';

export interface CompileTarget {
  /** What it generates, for listings and errors. */
  readonly description: string;
  /**
   * Whether its programs take symbolic sizes (IR 'sym' arguments, evaluated from the inputs at run
   * time: symbolic.ts), so one program serves every value of a dynamic dim. Without it, a dynamic
   * dim whose sizes reach op arguments gets one program per size.
   */
  readonly symbolicSizes?: boolean;
  /**
   * Composite ops (decomposition table entries) this target's renderer emits as one node, better
   * than as their decomposition: the decompose pass leaves them in graphs on its device, and its
   * fusion rules must take them (webgpu: sigmoid and silu, whose fast forms need no division
   * guard and no separate exp; the decomposition's reciprocal needs both).
   */
  readonly nativeComposites?: ReadonlySet<string>;
  /** What lowering may fuse for this target (lower.ts and lower/gemm.ts ask nothing else). */
  readonly fusion: FusionRules;
  /** The plain program (no caches, no CUDA graphs) for a graph lowered with `fusion` and scheduled. */
  program(low: Lowered, sched: Schedule, device: Device, options: BackendOptions): CompiledProgram;
  /**
   * Compiles a graph whose values live on `device`: `lowerFor`, then `program`, inside whatever the
   * target adds around them (cpu: the on-disk program cache; cuda: CUDA graphs and their pieces).
   */
  compile(graph: Graph, device: Device, options: BackendOptions): CompiledProgram;
}

/** The host's device type: its target runs any graph (what it cannot fuse goes through dispatch). */
const HOST = CPU.type;

const targets = new Map<string, CompileTarget>();

export function registerCompileTarget(deviceType: string, target: CompileTarget): void {
  if (targets.has(deviceType)) throw new Error(`registerCompileTarget: device type '${deviceType}' already has a compile target`);
  targets.set(deviceType, target);
}

/** Device types with a compile target, in registration order. */
export function listCompileTargets(): string[] {
  return [...targets.keys()];
}

export function compileTargetFor(deviceType: string): CompileTarget {
  const t = targets.get(deviceType);
  if (!t) throw new Error(`kiln.compile: no compile target for device type '${deviceType}' (registered: ${listCompileTargets().join(', ') || 'none'})`);
  return t;
}

/**
 * The device whose target compiles `graph`: the first value's device that has a target of its own
 * besides the host's, else the host (cpu). A graph on a device without a target runs on the host
 * target, which calls every node through the dispatcher, as before targets existed.
 */
export function targetDevice(graph: Graph): Device {
  for (const v of graph.values.values()) if (v.device.type !== HOST && targets.has(v.device.type)) return v.device;
  return CPU;
}

/** Lowers `graph` with the target's fusion rules and schedules it. */
export function lowerFor(graph: Graph, target: CompileTarget): { low: Lowered; sched: Schedule } {
  const low = lower(graph, target.fusion);
  return { low, sched: schedule(low) };
}
