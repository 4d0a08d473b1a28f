/**
 * Lowering: the captured graph becomes a list of classified nodes. Composite ops the code
 * generator can fuse (softmax, logSoftmax, layerNorm, rmsNorm) are expanded into primitive
 * reductions and pointwise ops here, so their decomposed forms (from the front end's passes) and
 * the undecomposed ops go through the same scheduler. Every node keeps a registered op name and
 * arguments: output metadata is always recomputed with the registered meta functions (at compile
 * time from the traced metadata, at run time from the real inputs), so compiled outputs have
 * exactly the layouts eager mode gives.
 *
 * What may be fused is the compile target's answer (`FusionRules`, fusion-rules.ts: a pointwise
 * node's template, a reduction, a row op's expansion); lowering itself tests no device.
 */
import { getOp, hasOp } from '../../ops/registry.js';
import type { OutMeta } from '../../ops/schema.js';
import { isFloating } from '../../tensor/dtype.js';
import { normalizeDim } from '../../tensor/layout.js';
import type { Graph, IRArg, IRNode, ValueId, ValueInfo } from '../ir.js';
import { argValues, evalSym } from '../ir.js';
import type { FusionRules } from './fusion-rules.js';

export type NodeKind = 'pointwise' | 'reduction' | 'view' | 'extern';

export type ReduceKind = 'sum' | 'mean' | 'amax' | 'amin' | 'prod';

export interface LNode {
  readonly id: number;
  kind: NodeKind;
  /** Registered op name: the meta function (and, for externs and views, the kernel) to call. */
  readonly op: string;
  readonly args: readonly IRArg[];
  readonly outputs: readonly ValueId[];
  /** For expansions: the original node whose meta gives the final value's layout. */
  readonly metaFrom?: IRNode;
  /** Reductions: what to compute, over which (normalised) dims of the input. */
  readonly reduce?: { readonly kind: ReduceKind; readonly input: ValueId; readonly dims: readonly number[]; readonly keepdim: boolean };
  /** Writes into one of its arguments (in-place ops, copy_, ...). */
  readonly mutates: boolean;
  /** The original graph node this came from (for listings). */
  readonly origin: number;
}

export interface Lowered {
  readonly graph: Graph;
  readonly nodes: LNode[];
  /** Metadata of every value (graph values plus those introduced by expansions). */
  readonly values: Map<ValueId, ValueInfo>;
}

export type MetaLike = OutMeta & { readonly offset: number };

/** Resolves an argument against value metadata (for meta functions). */
function metaArg(arg: IRArg, env: ReadonlyMap<ValueId, MetaLike>): unknown {
  switch (arg.kind) {
    case 'value': {
      const m = env.get(arg.id);
      if (!m) throw new Error(`kiln backend: value %${arg.id} has no metadata`);
      return m;
    }
    case 'list':
      return arg.items.map((a) => metaArg(a, env));
    case 'const':
      return arg.value;
    case 'sym':
      return evalSym(arg.expr, (id) => (metaArg({ kind: 'value', id }, env) as MetaLike).shape);
    default:
      return arg satisfies never;
  }
}

/** Runs a node's meta function on metadata; returns one MetaLike per output. */
export function nodeMeta(n: LNode, env: ReadonlyMap<ValueId, MetaLike>): MetaLike[] {
  const src = n.metaFrom ?? n;
  const op = getOp(src.op);
  const r = op.meta(...(src.args.map((a) => metaArg(a, env)) as never[])) as OutMeta | OutMeta[];
  const list = Array.isArray(r) ? r : [r];
  return list.map((m) => ({ shape: m.shape, strides: m.strides, dtype: m.dtype, device: m.device, offset: m.offset ?? 0 }));
}

const REDUCTIONS: ReadonlySet<string> = new Set(['sum', 'mean', 'amax', 'amin', 'prod']);
const ABSORBABLE_VIEWS: ReadonlySet<string> = new Set([
  'view',
  'permute',
  'transpose',
  't',
  'expand',
  'unsqueeze',
  'squeeze',
  'slice',
  'narrow',
  'select',
  'movedim',
  'diagonal',
  'unflatten',
]);

/** Whether an argument is, or holds, a symbolic size. */
export function hasSym(a: IRArg): boolean {
  return a.kind === 'sym' || (a.kind === 'list' && a.items.some(hasSym));
}

/** The graph inputs the symbolic sizes in an argument read. */
export function symInputs(a: IRArg): ValueId[] {
  return a.kind === 'sym' ? a.expr.terms.map((t) => t.id) : a.kind === 'list' ? a.items.flatMap(symInputs) : [];
}

function isTensorValue(values: ReadonlyMap<ValueId, ValueInfo>, a: IRArg | undefined): a is { kind: 'value'; id: ValueId } {
  return a?.kind === 'value' && values.has(a.id);
}

function classify(n: IRNode, values: ReadonlyMap<ValueId, ValueInfo>, rules: FusionRules): NodeKind {
  if (!hasOp(n.op)) return 'extern';
  const op = getOp(n.op);
  const tags = op.tags ?? [];
  const mutates = op.args.some((a) => a.mutated === true);
  if (mutates || tags.includes('inplace') || tags.includes('random') || tags.includes('factory')) return 'extern';
  if (tags.includes('view') && ABSORBABLE_VIEWS.has(n.op)) return 'view';
  // A symbolic size (symbolic.ts) is known only at run time: kernels bake their scalars and dims in.
  if (n.args.some(hasSym)) return 'extern';
  if (REDUCTIONS.has(n.op)) {
    const info = values.get(n.outputs[0]!)!;
    const input = values.get((n.args[0] as { id: ValueId }).id)!;
    return rules.reduction(input, info) ? 'reduction' : 'extern';
  }
  if ((tags.includes('pointwise') || n.op === 'toDtype' || n.op === 'clone') && rules.pointwise(n, values)) return 'pointwise';
  return 'extern';
}

/** Builds internal nodes, expanding composite ops into primitives. */
class Builder {
  readonly nodes: LNode[] = [];
  readonly values: Map<ValueId, ValueInfo>;
  private nextValue: number;
  private nextNode = 0;

  constructor(
    readonly graph: Graph,
    readonly rules: FusionRules,
  ) {
    this.values = new Map(graph.values);
    this.nextValue = Math.max(-1, ...graph.values.keys()) + 1;
  }

  private env(): Map<ValueId, MetaLike> {
    return this.values as unknown as Map<ValueId, MetaLike>;
  }

  /** Adds a node with fresh (or given) outputs; computes output metadata with the meta function. */
  add(origin: IRNode, op: string, args: IRArg[], opts: { outputs?: readonly ValueId[]; metaFrom?: IRNode; kind?: NodeKind } = {}): ValueId {
    const provisional: LNode = {
      id: this.nextNode,
      kind: 'extern',
      op,
      args,
      outputs: [],
      metaFrom: opts.metaFrom,
      mutates: false,
      origin: origin.id,
    };
    let metas: ReturnType<typeof nodeMeta>;
    try {
      metas = nodeMeta(provisional, this.env());
    } catch (e) {
      if (op === origin.op) throw e;
      // The user called origin.op; an op of its expansion must not be the name in the error.
      throw new Error(`kiln.compile: ${origin.op}: ${(e as Error).message} (while expanding ${origin.op} into ${op} for the compiler)`, { cause: e });
    }
    const outputs = opts.outputs ?? metas.map(() => this.nextValue++);
    outputs.forEach((id, k) => {
      if (!this.values.has(id)) {
        const m = metas[k]!;
        this.values.set(id, { id, shape: m.shape, strides: m.strides, dtype: m.dtype, device: m.device, offset: m.offset });
      }
    });
    const irNode: IRNode = { id: -1, op, args, outputs };
    const kind = opts.kind ?? classify(irNode, this.values, this.rules);
    const node = this.finish({ ...provisional, kind, outputs });
    this.nodes.push(node);
    this.nextNode++;
    return outputs[0]!;
  }

  finish(n: LNode): LNode {
    if (n.kind !== 'reduction') return n;
    const info = this.values.get((n.args[0] as { id: ValueId }).id)!;
    const dimArg = n.args[1];
    const rank = info.shape.length;
    let dims: number[];
    const dv = dimArg?.kind === 'const' ? dimArg.value : dimArg?.kind === 'list' ? dimArg.items.map((i) => (i.kind === 'const' ? i.value : NaN)) : undefined;
    if (dv === null || dv === undefined || (Array.isArray(dv) && dv.length === 0)) dims = Array.from({ length: rank }, (_, i) => i);
    else dims = [...new Set((typeof dv === 'number' ? [dv] : (dv as number[])).map((d) => normalizeDim(n.op, d, rank)))].sort((a, b) => a - b);
    if (rank === 0) dims = [];
    const keepArg = n.args[2];
    const keepdim = keepArg?.kind === 'const' && keepArg.value === true;
    return { ...n, reduce: { kind: n.op as ReduceKind, input: (n.args[0] as { id: ValueId }).id, dims, keepdim } };
  }

  copyNode(n: IRNode): void {
    const kind = classify(n, this.values, this.rules);
    const op = hasOp(n.op) ? getOp(n.op) : undefined;
    const mutates = op?.args.some((a) => a.mutated === true) ?? true;
    this.nodes.push(this.finish({ id: this.nextNode++, kind, op: n.op, args: n.args, outputs: n.outputs, mutates, origin: n.id }));
  }

  info(id: ValueId): ValueInfo {
    return this.values.get(id)!;
  }
}

const V = (id: ValueId): IRArg => ({ kind: 'value', id });
const C = (value: unknown): IRArg => ({ kind: 'const', value });
const L = (xs: number[]): IRArg => ({ kind: 'list', items: xs.map(C) });

/** softmax / logSoftmax(x, dim, dtype=null) into amax, sub, exp, sum, div (or log, sub). */
function expandSoftmax(b: Builder, n: IRNode): boolean {
  const [xa, dimA, dtA] = n.args;
  if (!isTensorValue(b.values, xa) || dimA?.kind !== 'const' || typeof dimA.value !== 'number') return false;
  if (dtA && !(dtA.kind === 'const' && (dtA.value === null || dtA.value === undefined))) return false;
  const x = b.info(xa.id);
  // Empty rows stay with the op's kernel (an empty result); amax over an empty dim has no identity.
  if (!isFloating(x.dtype) || !b.rules.rowOp(n.op, x) || x.shape.length === 0 || x.shape.includes(0)) return false;
  const d = normalizeDim(n.op, dimA.value, x.shape.length);
  const m = b.add(n, 'amax', [V(x.id), L([d]), C(true)]);
  const s1 = b.add(n, 'sub', [V(x.id), V(m), C(1)]);
  const e = b.add(n, 'exp', [V(s1)]);
  const s = b.add(n, 'sum', [V(e), L([d]), C(true), C(null)]);
  if (n.op === 'softmax') b.add(n, 'div', [V(e), V(s), C(null)], { outputs: n.outputs, metaFrom: n });
  else {
    const ls = b.add(n, 'log', [V(s)]);
    b.add(n, 'sub', [V(s1), V(ls), C(1)], { outputs: n.outputs, metaFrom: n });
  }
  return true;
}

/** layerNorm(x, shape, w, b, eps) / rmsNorm(x, shape, w, eps) into mean, sub, mul, rsqrt... */
function expandNorm(b: Builder, n: IRNode): boolean {
  const isLayer = n.op === 'layerNorm';
  const [xa, shapeA] = n.args;
  const wa = n.args[2];
  const ba = isLayer ? n.args[3] : undefined;
  const epsA = isLayer ? n.args[4] : n.args[3];
  if (!isTensorValue(b.values, xa) || epsA?.kind !== 'const' || typeof epsA.value !== 'number') return false;
  const x = b.info(xa.id);
  if (!isFloating(x.dtype) || !b.rules.rowOp(n.op, x) || x.shape.includes(0)) return false;
  const k = shapeA?.kind === 'list' ? shapeA.items.length : shapeA?.kind === 'const' && Array.isArray(shapeA.value) ? shapeA.value.length : -1;
  if (k <= 0 || k > x.shape.length) return false;
  const w = isTensorValue(b.values, wa) ? wa.id : undefined;
  const bias = isTensorValue(b.values, ba) ? ba.id : undefined;
  if ((w !== undefined && b.info(w).dtype !== x.dtype) || (bias !== undefined && b.info(bias).dtype !== x.dtype)) return false;
  const dims = Array.from({ length: k }, (_, i) => x.shape.length - k + i);
  const eps = epsA.value;
  let y: ValueId;
  if (isLayer) {
    const mu = b.add(n, 'mean', [V(x.id), L(dims), C(true), C(null)]);
    const xc = b.add(n, 'sub', [V(x.id), V(mu), C(1)]);
    const sq = b.add(n, 'mul', [V(xc), V(xc)]);
    const va = b.add(n, 'mean', [V(sq), L(dims), C(true), C(null)]);
    const ve = b.add(n, 'add', [V(va), C(eps), C(1)]);
    const r = b.add(n, 'rsqrt', [V(ve)]);
    y = b.add(n, 'mul', [V(xc), V(r)], w === undefined && bias === undefined ? { outputs: n.outputs, metaFrom: n } : {});
  } else {
    const sq = b.add(n, 'mul', [V(x.id), V(x.id)]);
    const ms = b.add(n, 'mean', [V(sq), L(dims), C(true), C(null)]);
    const ve = b.add(n, 'add', [V(ms), C(eps), C(1)]);
    const r = b.add(n, 'rsqrt', [V(ve)]);
    y = b.add(n, 'mul', [V(x.id), V(r)], w === undefined ? { outputs: n.outputs, metaFrom: n } : {});
  }
  if (w !== undefined) y = b.add(n, 'mul', [V(y), V(w)], bias === undefined ? { outputs: n.outputs, metaFrom: n } : {});
  if (bias !== undefined) b.add(n, 'add', [V(y), V(bias), C(1)], { outputs: n.outputs, metaFrom: n });
  return true;
}

/** Lowers `graph` for a target that fuses what `rules` allow (compile/target.ts: `target.fusion`). */
export function lower(graph: Graph, rules: FusionRules): Lowered {
  const b = new Builder(graph, rules);
  for (const n of graph.nodes) {
    if ((n.op === 'softmax' || n.op === 'logSoftmax') && expandSoftmax(b, n)) continue;
    if ((n.op === 'layerNorm' || n.op === 'rmsNorm') && expandNorm(b, n)) continue;
    b.copyNode(n);
  }
  return { graph, nodes: b.nodes, values: b.values };
}

/** Value ids a node reads. */
export function nodeInputs(n: LNode): ValueId[] {
  return n.args.flatMap(argValues);
}
