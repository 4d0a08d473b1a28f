/**
 * llm.qkNormRotary (per-head RMSNorm + rotary embedding of q and k in one op) on the cpu, and the
 * compile pass that maps rmsNorm -> transpose -> rotate-half RoPE chains onto it
 * (src/llm/qk-norm-rotary-pass.ts): values against a float64 loop, argument errors, the pass on a
 * hand-written attention and on a 2-layer Qwen3 (graph interpreted against eager), what it must
 * leave alone, and that it does not fire on the cpu by default. The cuda kernel:
 * cuda-qk-norm-rotary.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import type { Graph } from '../src/compile/ir.js';
import { runPasses } from '../src/compile/passes/index.js';
import { autoRewriteRules } from '../src/llm/rewrites.js';
import { fuseQkNormRotary } from '../src/llm/qk-norm-rotary-pass.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';
import { refNormRotary } from './helpers/qk-norm-rotary-ref.js';

const count = (g: Graph, op: string): number => g.nodes.filter((n) => n.op === op).length;

/** Dense float64 values of `t` broadcast to `shape`. */


function maxErr(got: Tensor, want: readonly number[]): number {
  const g = got.contiguous().toFlatArray();
  assert.equal(g.length, want.length);
  let m = 0;
  for (let i = 0; i < g.length; i++) m = Math.max(m, Math.abs(g[i]! - want[i]!));
  return m;
}

test('llm.qkNormRotary on the cpu equals the float64 loop (neox and gpt-j, transposed inputs, broadcast tables, GQA shapes)', () => {
  for (const isNeox of [true, false]) {
    const q = rand([2, 5, 4, 8], 1).transpose(1, 2);
    const k = rand([2, 5, 2, 8], 2).transpose(1, 2);
    const [qw, kw] = [rand([8], 3), rand([8], 4)];
    const [cos, sin] = [rand([5, 8], 5), rand([1, 1, 5, 8], 6)];
    const { q: qo, k: ko } = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-6, cos, sin, isNeox);
    assert.deepEqual([...qo.shape], [2, 4, 5, 8]);
    assert.deepEqual([...qo.strides], [...q.strides], 'the transposed layout is kept');
    assert.ok(maxErr(qo, refNormRotary(q, qw, 1e-6, cos, sin, isNeox)) <= 1e-5, `q neox=${isNeox}`);
    assert.ok(maxErr(ko, refNormRotary(k, kw, 1e-6, cos, sin, isNeox)) <= 1e-5, `k neox=${isNeox}`);
  }
  // bfloat16: the norm rounds to bfloat16 before the rotation, as the unfused ops do.
  const q = rand([3, 2, 16], 7, 'contiguous', 'bfloat16');
  const w = rand([16], 8, 'contiguous', 'bfloat16');
  const cs = rand([3, 1, 16], 9, 'contiguous', 'bfloat16');
  const sn = rand([3, 1, 16], 10, 'contiguous', 'bfloat16');
  const { q: qo } = kiln.llm.qkNormRotary(q, q, w, w, 1e-6, cs, sn, true);
  const unfused = kiln.llm.applyRotaryEmb(kiln.llm.rmsNorm(q, w, 1e-6), cs, sn, true);
  assert.equal(maxErr(qo, unfused.toFlatArray()), 0, 'cpu reference equals the unfused library ops');
});

test('llm.qkNormRotary rejects bad arguments naming the op and the argument', () => {
  const q = rand([2, 4, 8], 1);
  const w = rand([8], 2);
  const cs = rand([4, 8], 3);
  assert.throws(() => kiln.llm.qkNormRotary(q, rand([2, 4, 6], 4), w, w, 1e-6, cs, cs), /llm\.qkNormRotary: 'q' \[2, 4, 8\] and 'k' \[2, 4, 6\] must have the same last dim/);
  assert.throws(() => kiln.llm.qkNormRotary(q, q, w, rand([4], 5), 1e-6, cs, cs), /llm\.qkNormRotary: argument 'kWeight' .*must be 1-d of the head size 8/);
  assert.throws(() => kiln.llm.qkNormRotary(q, q, w, w, 0, cs, cs), /llm\.qkNormRotary: argument 'eps' must be a finite number > 0/);
  assert.throws(() => kiln.llm.qkNormRotary(q, q, w, w, 1e-6, rand([3, 4, 8], 6), cs), /llm\.qkNormRotary: argument 'cos' .* must broadcast to 'q'/);
  assert.throws(() => kiln.llm.qkNormRotary(q, q.to('float64'), w, w, 1e-6, cs, cs), /llm\.qkNormRotary: arguments 'q' .* and 'k' .* must have the same dtype/);
});

/** Qwen3's attention entry: q/k projections, per-head norm, transpose, rotate-half RoPE. */
function attention(wq: Tensor, wk: Tensor, qw: Tensor, kw: Tensor, extraReader = false) {
  const hfRope = (x: Tensor, cos: Tensor, sin: Tensor): Tensor => {
    const h = x.shape[x.ndim - 1]! / 2;
    return kiln.add(kiln.mul(x, cos), kiln.mul(kiln.cat([kiln.neg(kiln.narrow(x, -1, h, h)), kiln.narrow(x, -1, 0, h)], -1), sin));
  };
  return (x: Tensor, cos: Tensor, sin: Tensor): Tensor => {
    const [B, T] = x.shape as [number, number];
    const qn = kiln.nn.functional.rmsNorm(kiln.linear(x, wq).view([B, T, 4, 8]), [8], qw, 1e-6);
    const kn = kiln.nn.functional.rmsNorm(kiln.linear(x, wk).view([B, T, 2, 8]), [8], kw, 1e-6);
    const q = hfRope(qn.transpose(1, 2), cos, sin);
    const k = hfRope(kn.transpose(1, 2), cos, sin);
    const o = kiln.nn.functional.scaledDotProductAttention(q, k, k, null, 0, true, null, true);
    return extraReader ? kiln.add(o.sum(), qn.sum()) : o;
  };
}

function inputsOf(g: Graph, args: readonly Tensor[]): Tensor[] {
  return g.inputs.map((i) => (i.source.kind === 'lifted' ? i.source.tensor : args[i.source.path[0] as number]!));
}

test('the pass fuses the q and k chains of an attention into one llm.qkNormRotary; the graph still computes eager values', () => {
  const [wq, wk, qw, kw] = [rand([32, 16], 1), rand([16, 16], 2), rand([8], 3), rand([8], 4)];
  const args = [rand([1, 5, 16], 5), rand([1, 1, 5, 8], 6), rand([1, 1, 5, 8], 7)];
  const fn = attention(wq, wk, qw, kw);
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, args));
  // dce: false, as in the pipeline, where the rewritten nodes stay (dead) until the final DCE.
  const base = runPasses(graph, { rewrites: autoRewriteRules, horizontalFusion: true, dce: false });
  assert.equal(count(base.graph, 'llm.applyRotaryEmb'), 2);
  // On the cpu the op's choice is its reference: the default pass leaves the graph alone.
  assert.equal(fuseQkNormRotary(base.graph).fused, 0, 'not on the cpu by default');
  const r = fuseQkNormRotary(base.graph, () => true);
  assert.equal(r.fused, 1);
  assert.equal(count(r.graph, 'llm.qkNormRotary'), 1);
  assert.equal(count(r.graph, 'rmsNorm') + count(r.graph, 'llm.applyRotaryEmb'), 0, 'both chains absorbed');
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, args))) as Tensor;
  const want = kiln.noGrad(() => fn(...(args as [Tensor, Tensor, Tensor])));
  assert.ok(maxErr(got, want.toFlatArray()) <= 1e-5);
  // A norm result read elsewhere stays (the norm would run anyway): no fusion.
  const { graph: g2 } = kiln.noGrad(() => trace(attention(wq, wk, qw, kw, true) as (...a: never[]) => unknown, args));
  assert.equal(fuseQkNormRotary(runPasses(g2, { rewrites: autoRewriteRules }).graph, () => true).fused, 0);
});

test('the pass on a 2-layer Qwen3 (cpu, forced on): one llm.qkNormRotary per layer, logits equal eager', () => {
  const config = tinyQwen3Config().with({ numHiddenLayers: 2 });
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3 });
  model.eval();
  const ids = kiln.randint(0, config.vocabSize, [1, 6], { dtype: 'int64', generator: new kiln.Generator(4) });
  const fn = (t: Tensor): Tensor => model.forward(t);
  kiln.noGrad(() => fn(ids)); // rope tables are made on the first call
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, [ids]));
  const base = runPasses(graph, { rewrites: autoRewriteRules, horizontalFusion: true, dce: false });
  const r = fuseQkNormRotary(base.graph, () => true);
  assert.equal(r.fused, 2);
  assert.equal(count(r.graph, 'llm.applyRotaryEmb'), 0);
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [ids]))) as Tensor;
  const want = kiln.noGrad(() => fn(ids));
  assert.ok(maxErr(got, want.toFlatArray()) <= 1e-4);
});

test('kiln.compile of a direct llm.qkNormRotary call on the cpu (decomposed: the choice there is the reference) equals eager', () => {
  const [qw, kw, cs, sn] = [rand([8], 1), rand([8], 2), rand([5, 8], 3), rand([5, 8], 4)];
  const fn = (q: Tensor, k: Tensor): Tensor[] => {
    const r = kiln.llm.qkNormRotary(q, k, qw, kw, 1e-5, cs, sn, false);
    return [r.q, r.k];
  };
  const args: [Tensor, Tensor] = [rand([2, 5, 8], 5), rand([1, 5, 8], 6)];
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, args));
  const ops = runPasses(graph, { decompose: true }).graph.nodes.map((n) => n.op);
  assert.ok(!ops.includes('llm.qkNormRotary') && ops.includes('llm.applyRotaryEmb'), `decomposed: ${ops.join(', ')}`);
  const got = kiln.noGrad(() => kiln.compile(fn)(...args));
  const want = fn(...args);
  for (let i = 0; i < 2; i++) assert.ok(maxErr(got[i]!, want[i]!.toFlatArray()) <= 1e-5, `output ${i}`);
});
