/**
 * NaN checks hoisted to the stores of a compiled pointwise kernel (KILN_WEBGPU_NAN_HOIST).
 *
 * The fast exp, sigmoid and tanh (wgsl-libm/fast.ts) and relu each test their argument for NaN,
 * because the clamp, max and min before exp2 turn a NaN into a number (GPUs' min and max return
 * the other operand). In compiled elementwise-4096 those tests are a large part of the math the
 * kernel is bound by on the H200. A kernel can instead test its inputs once, at the store, where
 * that gives the same results:
 *
 * - `clean(v)`: v is NaN only if one of the inputs it reads is NaN. Inputs are clean; so are the
 *   results of neg, abs, exp, tanh, sigmoid, relu, square and float casts of clean values, x * x,
 *   and clean values times or plus a finite constant (times a nonzero one: inf * 0 is NaN; add's
 *   alpha, which scales the second operand, nonzero too). A sum or product of two values is not
 *   (inf - inf).
 * - `strict(v)`: the inputs whose NaN makes v NaN: the union of the arguments' for ops that give
 *   NaN whenever an argument is NaN (add, sub, mul, div, neg, abs, exp, tanh, sigmoid, relu,
 *   silu, square, casts); none for the others (where, maximum, clamp, comparisons ...).
 * - A node among exp / sigmoid / tanh / relu whose argument a is clean runs unchecked when every
 *   output it reaches is strict in all of a's inputs; each such output is then stored as
 *   select(v, x, isnan(x)) over those inputs x. Where no input is NaN, a clean argument is not NaN
 *   and the unchecked form returns the checked form's bits; where one is, the output is NaN in
 *   both (torch's NaN; which NaN is not specified).
 *
 * Only whole-pointwise groups use it (every value ends at a store, none in a reduction).
 */
import { isFloating } from '../../../tensor/dtype.js';
import type { FusedGroup, FusedNode } from './group.js';

/** Ops that give NaN whenever a value argument is NaN (the WGSL table's entries). */
const STRICT = new Set(['add', 'sub', 'mul', 'div', 'neg', 'abs', 'exp', 'tanh', 'sigmoid', 'relu', 'silu', 'square', 'toDtype', 'clone']);
/** Unary ops that give NaN only for a NaN argument. */
const CLEAN_UNARY = new Set(['neg', 'abs', 'exp', 'tanh', 'sigmoid', 'relu', 'square', 'toDtype', 'clone']);
/** Ops whose NaN check can move to the stores. */
const HOISTABLE = new Set(['exp', 'tanh', 'sigmoid', 'relu']);

export interface NanHoist {
  /** Output ids of the nodes rendered without their NaN check. */
  readonly unchecked: ReadonlySet<number>;
  /** Per stored value: the inputs tested at its store (empty or absent: stored as computed). */
  readonly storeChecks: ReadonlyMap<number, readonly number[]>;
}

const finiteConst = (a: FusedNode['args'][number] | undefined): a is { kind: 'const'; value: number } => a !== undefined && a.kind === 'const' && typeof a.value === 'number' && Number.isFinite(a.value);
const valueArgs = (n: FusedNode): number[] => n.args.flatMap((a) => (a.kind === 'value' ? [a.id] : []));

function isClean(n: FusedNode, clean: (id: number) => boolean): boolean {
  const vs = valueArgs(n);
  if (!vs.every(clean)) return false;
  if (CLEAN_UNARY.has(n.op)) return vs.length === 1;
  const [a, b, alpha] = n.args;
  if (n.op === 'mul') {
    if (vs.length === 2) return a!.kind === 'value' && b!.kind === 'value' && a!.id === b!.id;
    const c = a!.kind === 'const' ? a : b;
    return finiteConst(c) && c.value !== 0;
  }
  // alpha scales the second operand: a nonzero finite one (a value times 0 is NaN at inf).
  if (n.op === 'add' || n.op === 'sub') return vs.length === 1 && (a!.kind === 'const' ? finiteConst(a) : finiteConst(b)) && (alpha === undefined || (finiteConst(alpha) && alpha.value !== 0));
  return false;
}

/** The plan for a pointwise group (null: nothing to hoist). */
export function nanHoistPlan(g: FusedGroup): NanHoist | null {
  if (g.kind !== 'pointwise' || g.nodes.some((n) => n.kind !== 'pointwise' || n.expr !== undefined)) return null;
  const float = (id: number): boolean => isFloating(g.value(id).dtype);
  const nodeOf = new Map<number, FusedNode>();
  for (const n of g.nodes) nodeOf.set(n.outputs[0]!, n);
  const clean = new Map<number, boolean>();
  const deps = new Map<number, ReadonlySet<number>>();
  const strict = new Map<number, ReadonlySet<number>>();
  for (const id of g.inputs) {
    clean.set(id, float(id));
    deps.set(id, new Set([id]));
    strict.set(id, float(id) ? new Set([id]) : new Set());
  }
  for (const n of g.nodes) {
    const out = n.outputs[0]!;
    const vs = valueArgs(n);
    deps.set(out, new Set(vs.flatMap((v) => [...deps.get(v)!])));
    clean.set(out, float(out) && isClean(n, (v) => clean.get(v) === true));
    strict.set(out, float(out) && STRICT.has(n.op) && vs.every(float) ? new Set(vs.flatMap((v) => [...strict.get(v)!])) : new Set());
  }
  // Candidates, then dropped while some output they reach is not strict in their inputs.
  const hoisted = new Set(g.nodes.filter((n) => HOISTABLE.has(n.op) && float(n.outputs[0]!) && valueArgs(n).length === 1 && clean.get(valueArgs(n)[0]!) === true).map((n) => n.outputs[0]!));
  const upstream = (id: number): number[] => {
    const seen = new Set<number>();
    const walk = (v: number): void => {
      const n = nodeOf.get(v);
      if (!n || seen.has(v)) return;
      seen.add(v);
      valueArgs(n).forEach(walk);
    };
    walk(id);
    return [...seen].filter((v) => hoisted.has(v));
  };
  const checksOf = (o: number): number[] => [...new Set(upstream(o).flatMap((h) => [...deps.get(valueArgs(nodeOf.get(h)!)[0]!)!]))].sort((a, b) => a - b);
  for (let changed = true; changed; ) {
    changed = false;
    for (const o of g.outputs) {
      const need = checksOf(o);
      if (need.every((x) => strict.get(o)!.has(x))) continue;
      for (const h of upstream(o)) hoisted.delete(h);
      changed = true;
    }
  }
  if (hoisted.size === 0) return null;
  const storeChecks = new Map<number, readonly number[]>();
  for (const o of g.outputs) {
    const c = checksOf(o);
    if (c.length > 0) storeChecks.set(o, c);
  }
  return { unchecked: hoisted, storeChecks };
}
