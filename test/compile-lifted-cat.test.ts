/**
 * Lifted-cat constants (passes/lifted-cat.ts): a cat of lifted tensors along dim 0 (the MoE
 * block's stacked expert weights) becomes a derived constant copied once and refreshed when a
 * source is written in place. Checked against eager Kiln: values, that the cat node is gone, that
 * an in-place write to a source is seen by the next run (refresh), what must stay a cat (returned,
 * written, another dim, an argument among the sources, mixed dtypes), and the tiny Qwen3-MoE
 * checkpoint compiled on the cpu: no expert-weight cat left in its program, eager's logits, and an
 * in-place write to an expert weight seen by the next call.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import type { Graph } from '../src/compile/ir.js';
import { liftedCatConstants } from '../src/compile/passes/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Compiled tests run from dist/test; the fixtures stay in the source tree.
const fixtures = [path.join(here, 'fixtures'), path.join(here, '../../test/fixtures')].find((p) => fs.existsSync(path.join(p, 'qwen3-moe-tiny')))!;
const MOE = path.join(fixtures, 'qwen3-moe-tiny');

const count = (g: Graph, op: string): number => g.nodes.filter((n) => n.op === op).length;

function inputsOf(g: Graph, args: readonly Tensor[]): Tensor[] {
  return g.inputs.map((i) => {
    if (i.source.kind !== 'lifted') return args[i.source.path[0] as number]!;
    i.source.derived?.refresh();
    return i.source.tensor;
  });
}

function maxDiff(got: Tensor, want: Tensor): number {
  assert.deepEqual([...got.shape], [...want.shape]);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  let worst = 0;
  for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(g[i]! - w[i]!));
  return worst;
}

test('lifted cat: a cat of lifted weights becomes a derived constant, same values, refreshed after an in-place write', () => {
  const x = rand([3, 4], 1);
  const ws = [rand([2, 4, 5], 2), rand([1, 4, 5], 3), rand([3, 4, 5], 4)];
  const fn = (t: Tensor): Tensor => kiln.matmul(t, kiln.cat(ws, 0).sum(0));
  // (runPasses' constant folding would fold this small cat of tensors that need no grad outright.)
  const g = trace(fn, [x]).graph;
  assert.equal(count(g, 'cat'), 1);
  const r = liftedCatConstants(g);
  assert.equal(r.folded, 1);
  assert.equal(count(r.graph, 'cat'), 0);
  const derived = r.graph.inputs.filter((i) => i.source.kind === 'lifted' && i.source.derived !== undefined);
  assert.equal(derived.length, 1);
  assert.deepEqual(r.graph.values.get(derived[0]!.id)!.shape, [6, 4, 5]);
  assert.equal(maxDiff(interpret(r.graph, inputsOf(r.graph, [x])) as Tensor, fn(x)), 0);
  // An in-place write to a source is seen by the next run without rebuilding the graph.
  kiln.noGrad(() => ws[1]!.copy_(rand([1, 4, 5], 9)));
  const after = interpret(r.graph, inputsOf(r.graph, [x])) as Tensor;
  assert.equal(maxDiff(after, fn(x)), 0, 'the refreshed constant follows the write');
});

test('lifted cat: not for a returned cat, a cat the graph writes, another dim, an argument source, or mixed dtypes', () => {
  const x = rand([2, 3], 5);
  const [a, b] = [rand([2, 3], 6), rand([2, 3], 7)];
  const h = kiln.tensor([[1, 2, 3]], { dtype: 'float64' });
  const cases: [string, (t: Tensor) => Tensor][] = [
    ['returned', () => kiln.cat([a, b], 0)],
    ['written', (t) => kiln.cat([a, b], 0).add_(1).sum(0).add(t.sum(0))],
    ['dim 1', (t) => kiln.cat([a, b], 1).sum(1).add(t.sum(1))],
    ['argument', (t) => kiln.cat([a, t], 0).sum(0)],
    ['dtypes', (t) => kiln.cat([a, h], 0).sum(0).add(t.sum(0))],
  ];
  for (const [label, fn] of cases) {
    const g = trace(fn, [x]).graph;
    const r = liftedCatConstants(g);
    assert.equal(r.folded, 0, `${label}: left as a cat`);
    assert.equal(maxDiff(interpret(r.graph, inputsOf(r.graph, [x])) as Tensor, fn(x)), 0, `${label}: values`);
  }
});

test('lifted cat: the tiny Qwen3-MoE compiled on the cpu reads its stacked experts from a constant, eager logits, weight writes seen', () => {
  const moe = kiln.models.Qwen3MoeForCausalLM.fromPretrained(MOE);
  const ref = JSON.parse(fs.readFileSync(path.join(MOE, 'reference.json'), 'utf8')) as { input_ids: number[][] };
  const x = kiln.tensor(ref.input_ids, { dtype: 'int64' });
  const f = kiln.compile(moe, { fullgraph: true });
  assert.ok(maxDiff(kiln.noGrad(() => f(x)), kiln.noGrad(() => moe.forward(x))) <= 1e-5);
  const ops = f.programs().inference[0]!.describe();
  assert.match(ops, /llm\.fusedMoe/);
  assert.doesNotMatch(ops, /\bcat\b/, 'no cat of the expert weights left in the program');
  // A loaded (in-place written) expert weight is used by the next call, without a recompile.
  const w = moe.model.layers.at(0).mlp as unknown as { expert(e: number): { up_proj: { weight: Tensor } } };
  kiln.noGrad(() => w.expert(1).up_proj.weight.mul_(-3));
  assert.ok(maxDiff(kiln.noGrad(() => f(x)), kiln.noGrad(() => moe.forward(x))) <= 1e-5, 'the write is seen');
  assert.equal(f.counters.compiles, 1);
});
