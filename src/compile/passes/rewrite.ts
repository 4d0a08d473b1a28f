/**
 * A small pattern rewriter: match a subgraph by op names and argument structure, replace it with
 * new nodes. Patterns are trees rooted at the node being replaced:
 *
 *   const rule: RewriteRule = {
 *     name: 'silu',
 *     pattern: P.op('mul', [P.v('x'), P.op('sigmoid', [P.v('x')])], { commutative: true }),
 *     replace: (b, m) => [b.op('silu', m.value('x')).id],
 *   };
 *
 * `P.v(name)` binds a tensor value (the same name must bind the same value everywhere), `P.c(name?,
 * test?)` a constant, `P.any()` anything, and a nested `P.op` a value produced by that op. Inner
 * matched nodes are left in place (DCE removes them when nothing else reads them). Rules never
 * match through mutating or random ops.
 */
import type { Graph, IRArg, IRNode, ValueId } from '../ir.js';
import { GraphBuilder, Val, isImpure } from './util.js';

export type PatternArg =
  | { readonly kind: 'var'; readonly name: string }
  | { readonly kind: 'const'; readonly name?: string; readonly test?: (v: unknown) => boolean }
  | { readonly kind: 'any' }
  | OpPattern;

export interface OpPattern {
  readonly kind: 'op';
  readonly op: string;
  readonly args: readonly PatternArg[];
  /** Also try the first two arguments swapped (mul, add with alpha 1, ...). */
  readonly commutative?: boolean;
}

export const P = {
  op: (op: string, args: readonly PatternArg[], opts: { commutative?: boolean } = {}): OpPattern => ({ kind: 'op', op, args, commutative: opts.commutative }),
  v: (name: string): PatternArg => ({ kind: 'var', name }),
  c: (name?: string, test?: (v: unknown) => boolean): PatternArg => ({ kind: 'const', name, test }),
  any: (): PatternArg => ({ kind: 'any' }),
};

export class Match {
  readonly values = new Map<string, ValueId>();
  readonly consts = new Map<string, unknown>();
  /** Matched nodes, root first. */
  readonly nodes: IRNode[] = [];

  value(name: string): Val {
    const id = this.values.get(name);
    if (id === undefined) throw new Error(`rewrite: pattern variable '${name}' is not bound`);
    return new Val(id);
  }

  clone(): Match {
    const m = new Match();
    this.values.forEach((v, k) => m.values.set(k, v));
    this.consts.forEach((v, k) => m.consts.set(k, v));
    m.nodes.push(...this.nodes);
    return m;
  }
}

export interface RewriteRule {
  readonly name: string;
  readonly pattern: OpPattern;
  /** New values for the root node's outputs, or null to leave this match alone. */
  replace(b: GraphBuilder, m: Match, root: IRNode): ValueId[] | null;
}

function matchArg(p: PatternArg, a: IRArg, producer: ReadonlyMap<ValueId, IRNode>, m: Match): Match | null {
  switch (p.kind) {
    case 'any':
      return m;
    case 'var': {
      if (a.kind !== 'value') return null;
      const bound = m.values.get(p.name);
      if (bound !== undefined && bound !== a.id) return null;
      const r = m.clone();
      r.values.set(p.name, a.id);
      return r;
    }
    case 'const': {
      if (a.kind !== 'const' || (p.test && !p.test(a.value))) return null;
      if (!p.name) return m;
      const r = m.clone();
      r.consts.set(p.name, a.value);
      return r;
    }
    case 'op': {
      if (a.kind !== 'value') return null;
      const n = producer.get(a.id);
      return n ? matchNode(p, n, producer, m) : null;
    }
    default:
      return p satisfies never;
  }
}

function matchArgs(ps: readonly PatternArg[], args: readonly IRArg[], producer: ReadonlyMap<ValueId, IRNode>, m: Match): Match | null {
  let cur: Match | null = m;
  for (let i = 0; i < ps.length && cur; i++) {
    const a = args[i];
    cur = a ? matchArg(ps[i]!, a, producer, cur) : null;
  }
  return cur;
}

export function matchNode(p: OpPattern, n: IRNode, producer: ReadonlyMap<ValueId, IRNode>, m: Match = new Match()): Match | null {
  if (n.op !== p.op || isImpure(n) || n.args.length < p.args.length) return null;
  const withNode = m.clone();
  withNode.nodes.push(n);
  const direct = matchArgs(p.args, n.args, producer, withNode);
  if (direct || !p.commutative || n.args.length < 2) return direct;
  const swapped = [n.args[1]!, n.args[0]!, ...n.args.slice(2)];
  return matchArgs(p.args, swapped, producer, withNode);
}

/** Applies the rules to every node, in graph order (one sweep). Returns the graph and rewrite count. */
export function applyRewrites(g: Graph, rules: readonly RewriteRule[]): { graph: Graph; rewrites: number } {
  const b = new GraphBuilder(g);
  const producer = new Map<ValueId, IRNode>();
  let rewrites = 0;
  for (const node of g.nodes) {
    let done = false;
    const current: IRNode = { ...node, args: node.args.map((a) => b.mapArg(a)) };
    for (const rule of rules) {
      const m = matchNode(rule.pattern, current, producer);
      if (!m) continue;
      const outs = rule.replace(b, m, current);
      if (!outs || outs.length !== node.outputs.length) continue;
      node.outputs.forEach((o, k) => b.replace(o, outs[k]!));
      rewrites++;
      done = true;
      break;
    }
    if (!done) {
      const kept = b.keep(node);
      for (const o of kept.outputs) producer.set(o, kept);
    }
  }
  return { graph: b.finish(), rewrites };
}

/** x * sigmoid(x) -> silu(x) (either operand order). */
export const siluRule: RewriteRule = {
  name: 'mul-sigmoid-to-silu',
  pattern: P.op('mul', [P.v('x'), P.op('sigmoid', [P.v('x')])], { commutative: true }),
  replace(b, m, root) {
    const x = m.value('x');
    const out = b.op('silu', x);
    // Only when dtypes agree (silu of an integer tensor is float, like sigmoid, so they do).
    return b.info(out.id).dtype === b.info(root.outputs[0]!).dtype ? [out.id] : null;
  },
};

export const defaultRewriteRules: readonly RewriteRule[] = [siluRule];
