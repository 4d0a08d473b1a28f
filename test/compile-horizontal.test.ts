/**
 * Horizontal linear fusion (passes/horizontal.ts): linears sharing an input become one GEMM over
 * concatenated weights, with column-slice views as outputs. Checked against eager Kiln (the
 * reference, which runs the separate linears): values, the graph's structure, the concatenated
 * weight following in-place writes to its sources (without a recompile), what must not be fused
 * (returned outputs, outputs written in place, different inputs), the grad path, and Qwen3's
 * attention/MLP on cpu and (where available) cuda, including CUDA graph replay after a weight write.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import type { Graph } from '../src/compile/ir.js';
import { ConcatConstant, horizontalLinearFusion, runPasses } from '../src/compile/passes/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import { rand } from './helpers/make.js';
import { skipUnlessCuda } from './cuda-util.js';

const count = (g: Graph, op: string): number => g.nodes.filter((n) => n.op === op).length;

function inputsOf(g: Graph, args: readonly Tensor[]): Tensor[] {
  return g.inputs.map((i) => (i.source.kind === 'lifted' ? i.source.tensor : args[i.source.path[0] as number]!));
}

function assertClose(label: string, got: Tensor, want: Tensor, tol = 1e-5): void {
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  let worst = 0;
  for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(g[i]! - w[i]!) / (1 + Math.abs(w[i]!)));
  assert.ok(worst <= tol, `${label}: max relative difference ${worst} > ${tol}`);
}

/** q/k/v-like projections of one input (two with a bias group), combined so every output is used. */
function attentionLike(wq: Tensor, wk: Tensor, wv: Tensor, bk: Tensor | null = null, bv: Tensor | null = null) {
  return (x: Tensor): Tensor => {
    const q = kiln.linear(x, wq, bk === null ? null : rand([wq.shape[0]!], 40));
    const k = kiln.linear(x, wk, bk);
    const v = kiln.linear(x, wv, bv);
    return kiln.add(kiln.mul(q.narrow(-1, 0, 4), k.narrow(-1, 0, 4)), v.narrow(-1, 0, 4).relu());
  };
}

test('horizontal fusion: three linears of one input become one linear and slices, same values', () => {
  const x = rand([5, 8], 1);
  const [wq, wk, wv] = [rand([6, 8], 2), rand([4, 8], 3), rand([5, 8], 4)];
  const g = trace(attentionLike(wq, wk, wv), [x]).graph;
  const r = horizontalLinearFusion(g);
  assert.equal(r.merged, 2);
  assert.equal(count(r.graph, 'linear'), 1);
  assert.equal(count(r.graph, 'slice'), 3);
  const fusedW = r.graph.inputs.find((i) => i.source.kind === 'lifted' && i.source.derived !== undefined);
  assert.ok(fusedW, 'a derived lifted weight');
  assert.deepEqual(r.graph.values.get(fusedW.id)!.shape, [15, 8]);
  assertClose('fused', interpret(r.graph, inputsOf(r.graph, [x])) as Tensor, interpret(g, inputsOf(g, [x])) as Tensor);
});

test('horizontal fusion: biases are concatenated too; a group needs all or no biases', () => {
  const x = rand([3, 8], 5);
  const [wq, wk, wv] = [rand([6, 8], 6), rand([4, 8], 7), rand([5, 8], 8)];
  const [bk, bv] = [rand([4], 9), rand([5], 10)];
  const fn = attentionLike(wq, wk, wv, bk, bv);
  const g = trace(fn, [x]).graph;
  const r = horizontalLinearFusion(g);
  assert.equal(count(r.graph, 'linear'), 1);
  assertClose('with bias', interpret(r.graph, inputsOf(r.graph, [x])) as Tensor, fn(x));
  // One linear without a bias, two with: only the two with a bias are merged.
  const mixed = (t: Tensor): Tensor => kiln.add(kiln.add(kiln.linear(t, wk, null), kiln.linear(t, wk.mul(2), bk)), kiln.linear(t, wk.mul(3), bk));
  const m = horizontalLinearFusion(runPasses(trace(mixed, [x]).graph).graph);
  assert.equal(count(m.graph, 'linear'), 2);
  assertClose('mixed', interpret(m.graph, inputsOf(m.graph, [x])) as Tensor, mixed(x));
});

test('horizontal fusion: not across different inputs, nor for returned outputs, outputs written in place or weights the graph writes', () => {
  const x = rand([3, 8], 11);
  const y = rand([3, 8], 12);
  const [w1, w2] = [rand([4, 8], 13), rand([4, 8], 14)];
  const other = (a: Tensor, b: Tensor): Tensor => kiln.add(kiln.linear(a, w1, null), kiln.linear(b, w2, null));
  assert.equal(horizontalLinearFusion(trace(other, [x, y]).graph).merged, 0);
  // A returned linear output stays dense (eager's layout); the other two still merge.
  const w3 = rand([4, 8], 15);
  const ret = (a: Tensor): Tensor[] => [kiln.linear(a, w1, null), kiln.add(kiln.linear(a, w2, null), kiln.linear(a, w3, null))];
  const r = horizontalLinearFusion(trace(ret, [x]).graph);
  assert.equal(r.merged, 1);
  const got = interpret(r.graph, inputsOf(r.graph, [x])) as Tensor[];
  assert.ok(got[0]!.isContiguous(), 'returned output dense');
  ret(x).forEach((w, i) => assertClose(`returned ${i}`, got[i]!, w));
  // Written in place after the linear: not merged (its storage would be the fused output's).
  const inplace = (a: Tensor): Tensor => kiln.add(kiln.linear(a, w1, null).mul_(2), kiln.linear(a, w2, null));
  assert.equal(horizontalLinearFusion(trace(inplace, [x]).graph).merged, 0);
  // A weight the graph itself writes is not a constant.
  const w4 = rand([4, 8], 27);
  const writesWeight = (a: Tensor): Tensor => {
    const out = kiln.add(kiln.linear(a, w1, null), kiln.linear(a, w4, null));
    w4.mul_(1);
    return out;
  };
  assert.equal(horizontalLinearFusion(trace(writesWeight, [x]).graph).merged, 0);
});

test('horizontal fusion: traces of other shapes (variants) share one fused weight', () => {
  const [wq, wk, wv] = [rand([6, 8], 30), rand([4, 8], 31), rand([5, 8], 32)];
  const fn = attentionLike(wq, wk, wv);
  const fused = (x: Tensor): Tensor => {
    const g = horizontalLinearFusion(trace(fn, [x]).graph).graph;
    const inp = g.inputs.find((i) => i.source.kind === 'lifted' && i.source.derived !== undefined)!;
    return (inp.source as { tensor: Tensor }).tensor;
  };
  assert.equal(fused(rand([4, 8], 33)), fused(rand([7, 8], 34)));
  // Other weights (or another order) get their own.
  assert.notEqual(fused(rand([4, 8], 35)), (() => {
    const g = horizontalLinearFusion(trace(attentionLike(wk.mul(1), wq, wv), [rand([4, 8], 36)]).graph).graph;
    return (g.inputs.find((i) => i.source.kind === 'lifted' && i.source.derived !== undefined)!.source as { tensor: Tensor }).tensor;
  })());
});

test('ConcatConstant: re-copies only the sources written in place since the last refresh', () => {
  const a = rand([2, 3], 16);
  const b = rand([3, 3], 17);
  const c = new ConcatConstant([a, b]);
  assert.deepEqual([...c.tensor.shape], [5, 3]);
  assertClose('built', c.tensor, kiln.cat([a, b], 0));
  const before = c.tensor.storage.version;
  c.refresh();
  assert.equal(c.tensor.storage.version, before, 'no write when nothing changed');
  b.mul_(-3);
  c.refresh();
  assertClose('after b.mul_', c.tensor, kiln.cat([a, b], 0));
});

test('kiln.compile (cpu): in-place weight writes after compile are seen by the fused program, without a recompile', () => {
  const x = rand([4, 8], 18);
  const [wq, wk, wv] = [rand([6, 8], 19), rand([4, 8], 20), rand([5, 8], 21)];
  const fn = attentionLike(wq, wk, wv);
  const f = kiln.compile(fn);
  kiln.noGrad(() => {
    assertClose('first call', f(x), fn(x));
    wk.copy_(rand([4, 8], 22));
    assertClose('after wk.copy_', f(x), fn(x));
    wv.mul_(0.5);
    assertClose('after wv.mul_', f(x), fn(x));
  });
  assert.equal(f.counters.traces, 1);
  assert.equal(f.counters.recompiles, 0);
});

test('kiln.compile (cpu): the grad path keeps separate weights and gives eager gradients', () => {
  const x = rand([4, 8], 23);
  const ws = [rand([6, 8], 24), rand([4, 8], 25), rand([5, 8], 26)].map((w) => w.requiresGrad_(true));
  const fn = attentionLike(ws[0]!, ws[1]!, ws[2]!);
  const f = kiln.compile(fn);
  f(x).sum().backward();
  const got = ws.map((w) => w.grad!.clone());
  ws.forEach((w) => (w.grad = null));
  fn(x).sum().backward();
  ws.forEach((w, i) => assertClose(`grad ${i}`, got[i]!, w.grad!));
  // Without grad the same compiled function runs the fused inference program.
  kiln.noGrad(() => assertClose('noGrad', f(x), fn(x)));
});

function qwen3Parity(device: 'cpu' | 'cuda', dtype: kiln.DType, mode: 'default' | 'reduce-overhead', tol: number): void {
  const config = tinyQwen3Config();
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3, dtype, device });
  model.eval();
  const ids = kiln.randint(0, config.vocabSize, [1, 8], { dtype: 'int64', generator: new kiln.Generator(4) }).to(device);
  const f = kiln.compile((t: Tensor) => model.forward(t), { mode });
  kiln.noGrad(() => {
    assertClose(`qwen3 ${device} ${dtype}`, f(ids).to('float32'), model.forward(ids).to('float32'), tol);
    // q/k/v and gate/up are fused in the program: write a k and an up projection in place.
    const layer = model.model.layers.at(0);
    layer.self_attn.k_proj.weight.mul_(-1.5);
    (layer.mlp as kiln.models.Qwen3MLP).up_proj.weight.mul_(0.25);
    for (let i = 0; i < 2; i++) assertClose(`qwen3 ${device} ${dtype} after in-place writes (call ${i})`, f(ids).to('float32'), model.forward(ids).to('float32'), tol);
  });
  assert.equal(f.counters.traces, 1, 'no retrace after the in-place writes');
}

test('Qwen3 (cpu, float32): compiled with fused q/k/v and gate/up matches eager, also after in-place weight writes', () => {
  qwen3Parity('cpu', 'float32', 'default', 1e-4);
});

const skipCuda = skipUnlessCuda();
test('Qwen3 (cuda, float32, CUDA graphs): fused program matches eager, also after in-place weight writes', { skip: skipCuda }, () => {
  qwen3Parity('cuda', 'float32', 'reduce-overhead', 1e-4);
});
test('Qwen3 (cuda, bfloat16): fused program matches eager within bfloat16 rounding', { skip: skipCuda }, () => {
  qwen3Parity('cuda', 'bfloat16', 'default', 3e-2);
});
