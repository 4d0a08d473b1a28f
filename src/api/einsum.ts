/**
 * torch.einsum as a composition: repeated labels within an operand become diagonals, labels seen
 * by one operand only (and not in the output) are summed early, operands are contracted left to
 * right with one batched matmul each (permute to [batch, free, contracted] x [batch, contracted,
 * free], reshape, bmm), and the result is permuted to the output order. Everything is a
 * differentiable op, so autograd, kiln.compile and every device come with it. Supports '...'
 * (broadcast dims, right-aligned), the implicit output (labels seen once, sorted, after '...'),
 * and size-1 broadcasting of a label shared by operands.
 */
import { fmtShape } from '../tensor/layout.js';
import type { Tensor } from '../tensor/tensor.js';
import { bmm } from './linalg.js';
import { sum } from './reduction.js';
import { diagonal, expand, permute, reshape } from './views.js';

interface Term {
  t: Tensor;
  /** One label per dim of t; ellipsis dims get labels '0', '1', ... (right-aligned across operands). */
  labels: string[];
}

const ELLIPSIS_BASE = 0x2460; // ①..: private labels for ellipsis dims, never letters.

function parseSide(eq: string, side: string, what: string): { labels: string[]; ellipsis: number } {
  const labels: string[] = [];
  let ellipsis = -1;
  for (let i = 0; i < side.length; i++) {
    const c = side[i]!;
    if (c === ' ') continue;
    if (c === '.') {
      if (side.slice(i, i + 3) !== '...' || ellipsis >= 0) throw new Error(`einsum: invalid '.' in ${what} of equation '${eq}' (only one '...' per operand)`);
      ellipsis = labels.length;
      i += 2;
      continue;
    }
    if (!/[a-zA-Z]/.test(c)) throw new Error(`einsum: invalid subscript '${c}' in ${what} of equation '${eq}': subscripts must be letters`);
    labels.push(c);
  }
  return { labels, ellipsis };
}

function expandEllipsis(p: { labels: string[]; ellipsis: number }, n: number, total: number): string[] {
  if (p.ellipsis < 0) return p.labels;
  const e = Array.from({ length: n }, (_, k) => String.fromCharCode(ELLIPSIS_BASE + total - n + k));
  return [...p.labels.slice(0, p.ellipsis), ...e, ...p.labels.slice(p.ellipsis)];
}

/** Collapses repeated labels of one operand to one dim (the diagonal), as torch does. */
function takeDiagonals(term: Term, eq: string): Term {
  let { t, labels } = term;
  for (;;) {
    const i = labels.findIndex((l, k) => labels.indexOf(l) !== k);
    if (i < 0) return { t, labels };
    const j = labels.indexOf(labels[i]!);
    if (t.shape[i] !== t.shape[j]) {
      throw new Error(`einsum: subscript '${labels[i]}' is repeated in an operand of '${eq}' for dims of different sizes ${t.shape[j]} and ${t.shape[i]} (operand ${fmtShape(t.shape)})`);
    }
    // diagonal removes both dims and appends the diagonal as the last dim.
    t = diagonal(t, 0, j, i);
    labels = [...labels.filter((_, k) => k !== i && k !== j), labels[i]!];
  }
}

/** Sums away the dims whose labels no one else needs. */
function sumUnneeded(term: Term, needed: Set<string>): Term {
  const dims = term.labels.flatMap((l, k) => (needed.has(l) ? [] : [k]));
  if (dims.length === 0) return term;
  return { t: sum(term.t, dims), labels: term.labels.filter((l) => needed.has(l)) };
}

/** Permutes and expands `term` to the label order `order` (labels it lacks become size-1 dims). */
function arrange(term: Term, order: readonly string[], sizes: ReadonlyMap<string, number>): Tensor {
  const perm = order.filter((l) => term.labels.includes(l)).map((l) => term.labels.indexOf(l));
  let t = perm.every((p, k) => p === k) ? term.t : permute(term.t, perm);
  const present = order.filter((l) => term.labels.includes(l));
  const shape = order.map((l) => (present.includes(l) ? t.shape[present.indexOf(l)]! : 1));
  t = reshape(t, shape);
  const target = order.map((l, k) => (shape[k] === 1 ? (term.labels.includes(l) ? sizes.get(l)! : 1) : shape[k]!));
  return target.every((s, k) => s === shape[k]) ? t : expand(t, target);
}

function prod(xs: readonly number[]): number {
  return xs.reduce((a, b) => a * b, 1);
}

/** Contracts two terms over their shared labels not needed later; batch over shared labels needed later. */
function contract(a: Term, b: Term, needed: Set<string>, eq: string): Term {
  const sizes = new Map<string, number>();
  for (const term of [a, b]) {
    term.labels.forEach((l, k) => {
      const s = term.t.shape[k]!;
      const prev = sizes.get(l);
      if (prev !== undefined && prev !== s && prev !== 1 && s !== 1) {
        throw new Error(`einsum: operands do not broadcast for subscript '${l}' in '${eq}': sizes ${prev} and ${s} (operands ${fmtShape(a.t.shape)}, ${fmtShape(b.t.shape)})`);
      }
      sizes.set(l, prev === undefined || prev === 1 ? s : prev);
    });
  }
  const inA = new Set(a.labels);
  const inB = new Set(b.labels);
  const batch = a.labels.filter((l) => inB.has(l) && needed.has(l));
  const inner = a.labels.filter((l) => inB.has(l) && !needed.has(l));
  const left = a.labels.filter((l) => !inB.has(l));
  const right = b.labels.filter((l) => !inA.has(l));
  const sz = (ls: readonly string[]): number[] => ls.map((l) => sizes.get(l)!);
  const ta = reshape(arrange(a, [...batch, ...left, ...inner], sizes), [prod(sz(batch)), prod(sz(left)), prod(sz(inner))]);
  const tb = reshape(arrange(b, [...batch, ...inner, ...right], sizes), [prod(sz(batch)), prod(sz(inner)), prod(sz(right))]);
  const out = reshape(bmm(ta, tb), [...sz(batch), ...sz(left), ...sz(right)]);
  return { t: out, labels: [...batch, ...left, ...right] };
}

/** torch.einsum(equation, ...operands); operands may also be given as one array. */
export function einsum(equation: string, ...operands: (Tensor | readonly Tensor[])[]): Tensor {
  const ops: Tensor[] = operands.length === 1 && Array.isArray(operands[0]) ? [...(operands[0] as Tensor[])] : (operands as Tensor[]);
  if (typeof equation !== 'string') throw new TypeError(`einsum: equation must be a string, got ${typeof equation}`);
  const arrow = equation.indexOf('->');
  const lhs = arrow >= 0 ? equation.slice(0, arrow) : equation;
  const inputs = lhs.split(',').map((s, i) => parseSide(equation, s, `operand ${i}`));
  if (inputs.length !== ops.length) {
    throw new Error(`einsum: equation '${equation}' has ${inputs.length} operand(s) but ${ops.length} tensor(s) were given`);
  }
  if (ops.length === 0) throw new Error('einsum: expected at least one operand');
  const nEll = inputs.map((p, i) => {
    const n = ops[i]!.ndim - p.labels.length;
    if (p.ellipsis < 0 ? n !== 0 : n < 0) {
      throw new Error(`einsum: operand ${i} ${fmtShape(ops[i]!.shape)} has ${ops[i]!.ndim} dims but subscripts '${equation.split('->')[0]!.split(',')[i]!.trim()}' name ${p.labels.length}${p.ellipsis >= 0 ? ' plus ...' : ''}`);
    }
    return p.ellipsis < 0 ? 0 : n;
  });
  const totalEll = Math.max(0, ...nEll);
  let terms: Term[] = inputs.map((p, i) => ({ t: ops[i]!, labels: expandEllipsis(p, nEll[i]!, totalEll) }));
  let outLabels: string[];
  const ellLabels = Array.from({ length: totalEll }, (_, k) => String.fromCharCode(ELLIPSIS_BASE + k));
  if (arrow >= 0) {
    const out = parseSide(equation, equation.slice(arrow + 2), 'the output');
    const all = new Set(terms.flatMap((t) => t.labels));
    for (const l of out.labels) {
      if (!all.has(l)) throw new Error(`einsum: output subscript '${l}' of '${equation}' does not appear in any operand`);
      if (out.labels.indexOf(l) !== out.labels.lastIndexOf(l)) throw new Error(`einsum: output subscript '${l}' appears more than once in '${equation}'`);
    }
    if (out.ellipsis < 0 && totalEll > 0 && inputs.some((p) => p.ellipsis >= 0)) {
      // torch sums the ellipsis dims away when the output has no '...'.
      outLabels = out.labels;
    } else {
      outLabels = expandEllipsis(out, totalEll, totalEll);
    }
  } else {
    const count = new Map<string, number>();
    for (const t of terms) for (const l of t.labels) count.set(l, (count.get(l) ?? 0) + 1);
    outLabels = [...ellLabels, ...[...count.keys()].filter((l) => l.length === 1 && /[a-zA-Z]/.test(l) && count.get(l) === 1).sort()];
  }
  terms = terms.map((t) => takeDiagonals(t, equation));
  // Left to right: before each contraction, drop labels only this term has and nobody needs.
  const neededAfter = (k: number): Set<string> => new Set([...outLabels, ...terms.slice(k).flatMap((t) => t.labels)]);
  let acc = sumUnneeded(terms[0]!, neededAfter(1));
  for (let k = 1; k < terms.length; k++) {
    const needed = neededAfter(k + 1);
    const next = sumUnneeded(terms[k]!, new Set([...needed, ...acc.labels]));
    acc = contract(sumUnneeded(acc, new Set([...needed, ...next.labels])), next, needed, equation);
  }
  acc = sumUnneeded(acc, new Set(outLabels));
  const perm = outLabels.map((l) => acc.labels.indexOf(l));
  return perm.every((p, k) => p === k) ? acc.t : permute(acc.t, perm);
}
