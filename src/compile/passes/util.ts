/**
 * Shared helpers for graph passes: op purity (what a pass may drop, merge or evaluate early),
 * alias roots, use counts, a stable serialisation of constant arguments, and GraphBuilder, which
 * rebuilds a graph node by node (emitting new op calls with metadata from the ops' meta functions)
 * and renames values that a pass replaced.
 */
import { getOp, hasOp } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import type { Graph, GraphInput, IRArg, IRNode, OutputTree, ValueId, ValueInfo } from '../ir.js';
import { argValues, evalSym, formatSym, outputValues } from '../ir.js';

/** Whether a node writes into one of its inputs (declared `mutated` argument or 'inplace' tag). */
export function isMutating(node: IRNode): boolean {
  if (!hasOp(node.op)) return true; // unknown op: assume the worst
  const op = getOp(node.op);
  return op.tags?.includes('inplace') === true || op.args.some((a) => a.mutated === true);
}

export function isRandom(node: IRNode): boolean {
  if (!hasOp(node.op)) return true;
  return getOp(node.op).tags?.includes('random') === true;
}

/**
 * Whether a node draws random numbers when it runs: a random op, unless its dropout probability
 * (`dropoutP` or `p`) is the constant 0 (attention in eval mode, every layer of a model forward).
 * What a recorded replay must refuse (codegen/wgsl/replay.ts); passes keep isRandom's wider rule.
 */
export function drawsRandom(node: IRNode): boolean {
  if (!isRandom(node)) return false;
  if (!hasOp(node.op)) return true;
  const i = getOp(node.op).args.findIndex((a) => a.name === 'dropoutP' || a.name === 'p');
  const arg = i >= 0 ? node.args[i] : undefined;
  return !(arg?.kind === 'const' && arg.value === 0);
}

export function hasTag(node: IRNode, tag: string): boolean {
  return hasOp(node.op) && (getOp(node.op).tags as readonly string[] | undefined)?.includes(tag) === true;
}

/** A node that must run even when its outputs are unused, and that must not be merged or folded. */
export function isImpure(node: IRNode): boolean {
  return isMutating(node) || isRandom(node);
}

/** Value ids of the tensor arguments a node mutates. */
export function mutatedValues(node: IRNode): ValueId[] {
  if (!hasOp(node.op)) return node.args.flatMap(argValues);
  const op = getOp(node.op);
  const out: ValueId[] = [];
  op.args.forEach((spec, i) => {
    if (spec.mutated && node.args[i]) out.push(...argValues(node.args[i]));
  });
  if (out.length === 0 && op.tags?.includes('inplace') && node.args[0]) out.push(...argValues(node.args[0]));
  return out;
}

/** The value whose storage `id` ultimately shares (following aliasOf). */
export function aliasRoot(g: Pick<Graph, 'values'>, id: ValueId): ValueId {
  let cur = id;
  for (let guard = 0; guard < 10_000; guard++) {
    const next = g.values.get(cur)?.aliasOf;
    if (next === undefined || next === cur) return cur;
    cur = next;
  }
  return cur;
}

/** How many times each value is read by a node or returned. */
/** Each value's producing node index and the indices of the nodes that read it (in node order). */
export function nodeIndex(g: Graph): { producer: Map<ValueId, number>; readers: Map<ValueId, number[]> } {
  const producer = new Map<ValueId, number>();
  const readers = new Map<ValueId, number[]>();
  g.nodes.forEach((n, i) => {
    for (const o of n.outputs) producer.set(o, i);
    for (const a of n.args) for (const id of argValues(a)) (readers.get(id) ?? readers.set(id, []).get(id)!).push(i);
  });
  return { producer, readers };
}

export function useCounts(g: Graph): Map<ValueId, number> {
  const uses = new Map<ValueId, number>();
  const bump = (id: ValueId): void => void uses.set(id, (uses.get(id) ?? 0) + 1);
  for (const n of g.nodes) for (const a of n.args) argValues(a).forEach(bump);
  outputValues(g.output).forEach(bump);
  return uses;
}

const objectIds = new WeakMap<object, number>();
let nextObjectId = 1;
/** A process-unique number for an object (identity in keys). */
export function objectId(o: object): number {
  let id = objectIds.get(o);
  if (id === undefined) {
    id = nextObjectId++;
    objectIds.set(o, id);
  }
  return id;
}

/** A stable string for a constant argument: equal strings mean interchangeable constants. */
export function constKey(v: unknown): string {
  if (v === undefined) return 'u';
  if (v === null) return 'n';
  switch (typeof v) {
    case 'number':
      return Object.is(v, -0) ? 'f:-0' : `f:${String(v)}`;
    case 'string':
      return `s:${JSON.stringify(v)}`;
    case 'boolean':
      return v ? 'T' : 'F';
    case 'bigint':
      return `b:${v.toString()}`;
    case 'symbol':
      return `y:${String(v)}`;
    default:
      break;
  }
  if (Array.isArray(v)) return `[${v.map(constKey).join(',')}]`;
  return `o#${objectId(v as object)}`; // generators, devices, functions: by identity
}

/** A stable string for an IR argument, with value ids passed through `rename`. */
export function argKey(a: IRArg, rename: (id: ValueId) => string | number = (id) => id): string {
  switch (a.kind) {
    case 'value':
      return `%${rename(a.id)}`;
    case 'list':
      return `[${a.items.map((x) => argKey(x, rename)).join(',')}]`;
    case 'const':
      return constKey(a.value);
    case 'sym':
      return `sym(${formatSym(a.expr, rename)})`;
    default:
      return a satisfies never;
  }
}

/** A value reference for GraphBuilder.call arguments (anything else is a constant). */
export class Val {
  constructor(readonly id: ValueId) {}
}
export type BuilderArg = Val | readonly BuilderArg[] | number | boolean | string | null | undefined | object;

function toIRArg(a: BuilderArg): IRArg {
  if (a instanceof Val) return { kind: 'value', id: a.id };
  if (Array.isArray(a)) return { kind: 'list', items: a.map(toIRArg) };
  return { kind: 'const', value: a };
}

/**
 * Rebuilds a graph: copy nodes with `keep`, emit new op calls with `call` (output metadata comes
 * from the op's meta function), replace a value by another with `replace` (later uses and the
 * output are renamed), and `finish` to get the new graph.
 */
export class GraphBuilder {
  readonly values: Map<ValueId, ValueInfo>;
  readonly nodes: IRNode[] = [];
  inputs: GraphInput[];
  private readonly subst = new Map<ValueId, ValueId>();
  private nextValue: number;
  private nextNode: number;

  constructor(readonly source: Graph) {
    this.values = new Map(source.values);
    this.inputs = [...source.inputs];
    this.nextValue = Math.max(-1, ...source.values.keys()) + 1;
    this.nextNode = Math.max(-1, ...source.nodes.map((n) => n.id)) + 1;
  }

  /** The current name of a value (after replacements). */
  resolve(id: ValueId): ValueId {
    let cur = id;
    for (let k = this.subst.get(cur); k !== undefined; k = this.subst.get(cur)) cur = k;
    return cur;
  }

  info(id: ValueId): ValueInfo {
    const v = this.values.get(this.resolve(id));
    if (!v) throw new Error(`compile passes: unknown value %${id}`);
    return v;
  }

  mapArg(a: IRArg): IRArg {
    switch (a.kind) {
      case 'value':
        return { kind: 'value', id: this.resolve(a.id) };
      case 'list':
        return { kind: 'list', items: a.items.map((x) => this.mapArg(x)) };
      case 'const':
        return a;
      case 'sym':
        return { kind: 'sym', expr: { c: a.expr.c, terms: a.expr.terms.map((t) => ({ ...t, id: this.resolve(t.id) })) } };
      default:
        return a satisfies never;
    }
  }

  /** Later uses of `from` read `to` instead. */
  replace(from: ValueId, to: ValueId): void {
    if (this.resolve(to) === from) return;
    this.subst.set(from, to);
  }

  /** Copies a node of the source graph (arguments renamed). */
  keep(node: IRNode): IRNode {
    const n: IRNode = { id: node.id, op: node.op, args: node.args.map((a) => this.mapArg(a)), outputs: node.outputs };
    // An output that aliases a replaced value (a view of a decomposed op's result) aliases its
    // replacement: buffer planning follows aliasOf, and a stale id let the base's storage be
    // reused while the view was still read (wrong results in joint forward programs).
    for (const o of node.outputs) {
      const v = this.values.get(o);
      if (v?.aliasOf === undefined) continue;
      const to = this.resolve(v.aliasOf);
      if (to !== v.aliasOf) this.values.set(o, { ...v, aliasOf: to });
    }
    this.nodes.push(n);
    return n;
  }

  private realize(a: IRArg): unknown {
    switch (a.kind) {
      case 'value':
        return this.info(a.id);
      case 'list':
        return a.items.map((x) => this.realize(x));
      case 'const':
        return a.value;
      case 'sym':
        return evalSym(a.expr, (id) => this.info(id).shape);
      default:
        return a satisfies never;
    }
  }

  /** Emits `op(...args)` and returns its output values. */
  call(opName: string, args: readonly BuilderArg[]): ValueId[] {
    const op = getOp(opName);
    const irArgs = args.map((a) => this.mapArg(toIRArg(a)));
    const meta = op.meta(...(irArgs.map((a) => this.realize(a)) as never[])) as OutMeta | readonly OutMeta[];
    const metas: readonly OutMeta[] = Array.isArray(meta) ? meta : [meta as OutMeta];
    const outputs = metas.map((m, k) => {
      const spec = op.outputs[Math.min(k, op.outputs.length - 1)];
      const ai = spec?.aliasOf === undefined ? -1 : op.args.findIndex((s) => s.name === spec.aliasOf);
      const src = ai >= 0 ? irArgs[ai] : undefined;
      const id = this.nextValue++;
      this.values.set(id, {
        id,
        shape: [...m.shape],
        strides: [...m.strides],
        dtype: m.dtype,
        device: m.device,
        offset: m.offset ?? 0,
        aliasOf: src?.kind === 'value' ? src.id : undefined,
      });
      return id;
    });
    this.nodes.push({ id: this.nextNode++, op: opName, args: irArgs, outputs });
    return outputs;
  }

  /** Emits a single-output op and returns a reference to its result. */
  op(opName: string, ...args: BuilderArg[]): Val {
    return new Val(this.call(opName, args)[0]!);
  }

  mapOutput(t: OutputTree): OutputTree {
    switch (t.kind) {
      case 'tensor':
        return { kind: 'tensor', id: this.resolve(t.id) };
      case 'list':
        return { kind: 'list', items: t.items.map((x) => this.mapOutput(x)) };
      case 'object':
        return { kind: 'object', entries: t.entries.map(([k, x]) => [k, this.mapOutput(x)] as const) };
      case 'const':
        return t;
      default:
        return t satisfies never;
    }
  }

  finish(): Graph {
    const output = this.mapOutput(this.source.output);
    // Keep only values still referenced (inputs, node outputs).
    const live = new Set<ValueId>([...this.inputs.map((i) => i.id), ...this.nodes.flatMap((n) => n.outputs)]);
    const values = new Map<ValueId, ValueInfo>();
    for (const [id, v] of this.values) if (live.has(id)) values.set(id, v);
    return { inputs: this.inputs, nodes: this.nodes, values, output };
  }
}

export type Pass = (g: Graph) => Graph;
