/**
 * In-place library ops write two tensors (input and residual, query and key); if those share
 * elements the result depends on write order. Every implementation calls this before writing
 * (the meta function cannot: it sees metadata only, and fake tensors share one storage). Views
 * whose storage ranges interleave without sharing an element (q and k as column slices of one qkv
 * tensor, as vLLM passes them) are allowed: column slices of one matrix are proven disjoint from
 * their offsets and strides alone (O(rank), so the cuda kernels pay no per-element host loop);
 * other layouts are checked by marking a's elements in a bitmap over the common range and
 * looking for b's (linear in the elements).
 */
import { numel } from '../../tensor/layout.js';
import { storageSpan, type Tensor } from '../../tensor/tensor.js';

function forEachOffset(t: Tensor, fn: (off: number) => void): void {
  const n = numel(t.shape);
  const idx = new Array<number>(t.ndim).fill(0);
  let off = t.offset;
  for (let i = 0; i < n; i++) {
    fn(off);
    for (let d = t.ndim - 1; d >= 0; d--) {
      idx[d]!++;
      off += t.strides[d]!;
      if (idx[d]! < t.shape[d]!) break;
      off -= t.strides[d]! * t.shape[d]!;
      idx[d] = 0;
    }
  }
}

function gcd(a: number, b: number): number {
  let x = Math.abs(a);
  let y = Math.abs(b);
  while (y) [x, y] = [y, x % y];
  return x;
}

/**
 * Proves two views disjoint without visiting elements, for the common case of column slices of
 * one matrix (q and k of a qkv tensor): with a dense last dim and every other stride a multiple of
 * S, each element's offset mod S lies in [offset mod S, offset mod S + lastDim); when those
 * intervals do not wrap and do not meet, no element is shared. False means "not proven" only.
 */
export function provablyDisjoint(a: Tensor, b: Tensor): boolean {
  let S = 0;
  for (const t of [a, b]) {
    if (t.ndim === 0 || (t.shape[t.ndim - 1]! > 1 && t.strides[t.ndim - 1] !== 1)) return false;
    for (let d = 0; d < t.ndim - 1; d++) if (t.shape[d]! > 1) S = gcd(S, t.strides[d]!);
  }
  if (S === 0) return false;
  const interval = (t: Tensor): [number, number] => {
    const lo = ((t.offset % S) + S) % S;
    return [lo, lo + t.shape[t.ndim - 1]!];
  };
  const [a0, a1] = interval(a);
  const [b0, b1] = interval(b);
  return a1 <= S && b1 <= S && (a1 <= b0 || b1 <= a0);
}

export function assertNoOverlap(op: string, a: [string, Tensor], b: [string, Tensor | null]): void {
  const [an, at] = a;
  const [bn, bt] = b;
  if (!bt || at.storage !== bt.storage || numel(at.shape) === 0 || numel(bt.shape) === 0) return;
  const lo = Math.max(at.offset, bt.offset);
  const hi = Math.min(at.offset + storageSpan(at.shape, at.strides), bt.offset + storageSpan(bt.shape, bt.strides));
  if (lo >= hi || provablyDisjoint(at, bt)) return;
  const marks = new Uint8Array(hi - lo);
  forEachOffset(at, (o) => {
    if (o >= lo && o < hi) marks[o - lo] = 1;
  });
  let shared = -1;
  forEachOffset(bt, (o) => {
    if (shared < 0 && o >= lo && o < hi && marks[o - lo] === 1) shared = o;
  });
  if (shared >= 0) {
    throw new Error(
      `${op}: arguments '${an}' [${at.shape.join(', ')}] and '${bn}' [${bt.shape.join(', ')}] overlap in memory (element ${shared} of their storage); both are written in place, so pass separate tensors (clone one)`,
    );
  }
}
