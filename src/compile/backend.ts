/**
 * Compiler backends: a backend turns a captured (and optimised) graph into something runnable.
 * `eager` interprets the graph op by op (the reference, as torch.compile's backend='eager');
 * the code-generating backend registers itself as `kiln`. Backends are looked up by name when a
 * compiled function first needs one, so registration order does not matter.
 */
import type { Tensor } from '../tensor/tensor.js';
import type { Graph } from './ir.js';
import { interpret } from './interpret.js';
import type { CompileMode } from './mode.js';

export type { CompileMode } from './mode.js';

export interface BackendOptions {
  /** The mode's name (a cache-key part); what it means: decodeMode (mode.ts). */
  mode: CompileMode;
  /** Print generated code (KILN_LOG=output_code). */
  logCode: boolean;
  /** What identifies the graph for the on-disk program cache (from kiln.compile); absent: no disk cache. */
  cacheContext?: { readonly signature: string; readonly guardKey: string };
}

/** What the on-disk program cache did for one compile: loaded it, built and stored it, or was not used. */
export type ProgramCacheStatus = 'hit' | 'miss' | 'off';

export interface CompiledProgram {
  /** Runs on real inputs aligned with graph.inputs; returns the function's output structure. */
  run(inputs: readonly Tensor[]): unknown;
  /** Generated kernels in this program (0 for eager). */
  readonly kernelCount: number;
  /** Generated source of the kernels and of the wrapper that calls them, for KILN_LOG=output_code. */
  describe(): string;
  /** Set by backends with an on-disk program cache (counted as diskHits / diskMisses). */
  readonly diskCache?: ProgramCacheStatus;
}

export interface CompileBackend {
  readonly name: string;
  /** Whether its program for `graph` takes symbolic sizes (IR 'sym' arguments; symbolic.ts). */
  symbolicSizes?(graph: Graph): boolean;
  /**
   * Composite ops its code generator for `graph` renders as one node, better than their
   * decomposition (the decompose pass leaves them; target.ts `nativeComposites`).
   */
  nativeComposites?(graph: Graph): ReadonlySet<string> | undefined;
  compile(graph: Graph, options: BackendOptions): CompiledProgram;
}

const backends = new Map<string, CompileBackend>();

export function registerBackend(backend: CompileBackend): void {
  if (backends.has(backend.name)) throw new Error(`registerBackend: backend '${backend.name}' is already registered`);
  backends.set(backend.name, backend);
}

export function getBackend(name: string): CompileBackend {
  const b = backends.get(name);
  if (!b) throw new Error(`kiln.compile: unknown backend '${name}' (registered: ${[...backends.keys()].join(', ')})`);
  return b;
}

export function listBackends(): string[] {
  return [...backends.keys()];
}

registerBackend({
  name: 'eager',
  symbolicSizes: () => true,
  compile(graph) {
    return { run: (inputs) => interpret(graph, inputs), kernelCount: 0, describe: () => '(eager backend: ops run one by one)' };
  },
});
