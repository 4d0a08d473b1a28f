/**
 * The compiler's graph IR: a straight-line list of op calls over SSA values, as captured from one
 * run of the user's function. Values are tensors (with full metadata from the meta functions);
 * non-tensor arguments are constants. Graph inputs are the function's tensor arguments plus the
 * real tensors it closed over (module parameters, constants), which are "lifted" and guarded by
 * identity. Ops are referenced by registered name, so a graph is plain data (hashable, cacheable,
 * transferable to compile workers).
 */
import type { Device } from '../runtime/device.js';
import type { DType } from '../tensor/dtype.js';
import type { Tensor } from '../tensor/tensor.js';

export type ValueId = number;

export interface ValueInfo {
  readonly id: ValueId;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly dtype: DType;
  readonly device: Device;
  /** Storage offset for views (relative to the storage the value aliases). */
  readonly offset: number;
  /** The value whose storage this one shares (views, in-place results), if any. */
  readonly aliasOf?: ValueId;
}

export type IRArg =
  | { readonly kind: 'value'; readonly id: ValueId }
  | { readonly kind: 'list'; readonly items: readonly IRArg[] }
  | { readonly kind: 'const'; readonly value: unknown }
  /** A symbolic integer size (symbolic.ts): evaluated from the inputs' sizes at run time. */
  | { readonly kind: 'sym'; readonly expr: SymExpr };

/**
 * A symbolic integer: `c + sum(k * size)` over dims of graph inputs (`id`: a graph input's value,
 * `dim`: which of its dims), as PyTorch's SymInt is an expression over the symbols s0, s1, ... of
 * its dynamic input dims. Only the graph inputs' sizes are read, so evaluating it needs nothing but
 * the inputs of one call (or their metadata).
 */
export interface SymExpr {
  readonly c: number;
  readonly terms: readonly { readonly id: ValueId; readonly dim: number; readonly k: number }[];
}

/** The value of a symbolic integer, given the shape of each graph input it reads. */
export function evalSym(e: SymExpr, shapeOf: (id: ValueId) => readonly number[]): number {
  let v = e.c;
  for (const t of e.terms) v += t.k * shapeOf(t.id)[t.dim]!;
  return v;
}

/** `s(%0.1)*4 + 2`-style text of a symbolic integer, with input ids through `name`. */
export function formatSym(e: SymExpr, name: (id: ValueId) => string | number = (id) => id): string {
  const parts = e.terms.map((t) => `${t.k === 1 ? '' : `${t.k}*`}s(%${name(t.id)}.${t.dim})`);
  if (e.c !== 0 || parts.length === 0) parts.push(String(e.c));
  return parts.join('+');
}

export interface IRNode {
  readonly id: number;
  /** Registered op name (src/ops/registry.ts). */
  readonly op: string;
  readonly args: readonly IRArg[];
  readonly outputs: readonly ValueId[];
}

/** Where a graph input comes from at call time. */
export type InputSource =
  /** A tensor inside the compiled function's arguments, by path (argument index, then keys). */
  | { readonly kind: 'arg'; readonly path: readonly (string | number)[] }
  /**
   * A real tensor the function closed over (parameter, buffer, constant): guarded by identity.
   * `derived`: the tensor was computed at compile time from other lifted tensors (a pass's
   * constant, e.g. concatenated weights); its refresh() runs before each call reads it.
   */
  | { readonly kind: 'lifted'; readonly tensor: Tensor; readonly derived?: DerivedTensor };

/** A compile-time constant kept equal to the tensors it was computed from (updated in place). */
export interface DerivedTensor {
  /** Recomputes the stale parts in place when a source was written since the last call. */
  refresh(): void;
}

export interface GraphInput {
  readonly id: ValueId;
  readonly source: InputSource;
}

/** The structure of the function's return value, with tensors replaced by value ids. */
export type OutputTree =
  | { readonly kind: 'tensor'; readonly id: ValueId }
  | { readonly kind: 'list'; readonly items: readonly OutputTree[] }
  | { readonly kind: 'object'; readonly entries: readonly (readonly [string, OutputTree])[] }
  | { readonly kind: 'const'; readonly value: unknown };

export interface Graph {
  readonly inputs: readonly GraphInput[];
  readonly nodes: readonly IRNode[];
  readonly values: ReadonlyMap<ValueId, ValueInfo>;
  readonly output: OutputTree;
}

/** Value ids an argument refers to, in order. */
export function argValues(arg: IRArg): ValueId[] {
  switch (arg.kind) {
    case 'value':
      return [arg.id];
    case 'list':
      return arg.items.flatMap(argValues);
    case 'const':
    case 'sym':
      return [];
    default:
      return arg satisfies never;
  }
}

export function outputValues(tree: OutputTree): ValueId[] {
  switch (tree.kind) {
    case 'tensor':
      return [tree.id];
    case 'list':
      return tree.items.flatMap(outputValues);
    case 'object':
      return tree.entries.flatMap(([, t]) => outputValues(t));
    case 'const':
      return [];
    default:
      return tree satisfies never;
  }
}

/** A readable listing of the graph (KILN_LOG=graph). */
export function formatGraph(g: Graph): string {
  const v = (id: ValueId): string => {
    const info = g.values.get(id)!;
    return `%${id}: ${info.dtype}[${info.shape.join(', ')}]`;
  };
  const a = (arg: IRArg): string => {
    switch (arg.kind) {
      case 'value':
        return `%${arg.id}`;
      case 'list':
        return `[${arg.items.map(a).join(', ')}]`;
      case 'const':
        return arg.value === undefined ? 'undefined' : typeof arg.value === 'object' && arg.value !== null ? String(arg.value) : JSON.stringify(arg.value);
      case 'sym':
        return formatSym(arg.expr);
      default:
        return arg satisfies never;
    }
  };
  const lines = g.inputs.map((i) => `input ${v(i.id)} <- ${i.source.kind === 'arg' ? `arg${JSON.stringify(i.source.path)}` : 'lifted tensor'}`);
  for (const n of g.nodes) lines.push(`${n.outputs.map(v).join(', ')} = ${n.op}(${n.args.map(a).join(', ')})`);
  lines.push(`return ${outputValues(g.output).map((id) => `%${id}`).join(', ')}`);
  return lines.join('\n');
}
