/**
 * Shared by the tests of the LLM library's compile passes (llm-*.test.ts): nodes of an op in a
 * graph, a traced graph's input tensors for given arguments, and the largest absolute difference.
 */
import assert from 'node:assert/strict';
import type { Graph } from '../../src/compile/ir.js';
import type { Tensor } from '../../src/tensor/tensor.js';

export const countOps = (g: Graph, op: string): number => g.nodes.filter((n) => n.op === op).length;

/** The tensors a traced graph's inputs take: lifted ones as traced, the others from `args` by position. */
export function graphInputs(g: Graph, args: readonly Tensor[]): Tensor[] {
  return g.inputs.map((i) => (i.source.kind === 'lifted' ? i.source.tensor : args[i.source.path[0] as number]!));
}

export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}
