/**
 * llm.addRmsNormLinear (residual add + RMSNorm + linear, or + silu * mul, in one op) on the cpu,
 * and the compile pass that maps [add ->] rmsNorm -> linear / llm.linearSiluAndMul onto it
 * (src/llm/add-rms-norm-linear-pass.ts): values against a float64 loop, argument errors, the pass
 * on a traced Qwen3 decode step (interpreted: logits equal the unfused graph's and eager), what it
 * must leave alone, and that it does not fire on the cpu by default. The cuda kernel:
 * cuda-add-rms-norm-linear.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import type { Graph } from '../src/compile/ir.js';
import { runPasses } from '../src/compile/passes/index.js';
import { autoRewriteRules } from '../src/llm/rewrites.js';
import { fuseAddRmsNormLinear } from '../src/llm/add-rms-norm-linear-pass.js';
import { fuseLinearSiluMul } from '../src/llm/linear-silu-mul-pass.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand } from './helpers/make.js';
import { refAddRmsNormLinear } from './helpers/add-rms-norm-linear-ref.js';
import { toBf16 } from './helpers/rounding-ref.js';

const count = (g: Graph, op: string): number => g.nodes.filter((n) => n.op === op).length;

function inputsOf(g: Graph, args: readonly Tensor[]): Tensor[] {
  return g.inputs.map((i) => (i.source.kind === 'lifted' ? i.source.tensor : args[i.source.path[0] as number]!));
}

/** max |a - b| / (1 + |b|). */
function relDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!) / (1 + Math.abs(b[i]!)));
  return m;
}


test('llm.addRmsNormLinear on the cpu equals the float64 loop (float32 / float64, residual or none, bias or none, plain or gated, 3-d input)', () => {
  for (const dtype of ['float32', 'float64'] as DType[]) {
    for (const withRes of [false, true]) {
      for (const withBias of [false, true]) {
        for (const gated of [false, true]) {
          const label = `${dtype} residual ${withRes} bias ${withBias} gated ${gated}`;
          const x = rand([2, 3, 16], 1, 'contiguous', dtype, -1, 1);
          const r = withRes ? rand([2, 3, 16], 2, 'contiguous', dtype, -1, 1) : null;
          const g = rand([16], 3, 'contiguous', dtype, 0.5, 1.5);
          const w = rand([10, 16], 4, 'contiguous', dtype, -0.5, 0.5);
          const b = withBias ? rand([10], 5, 'contiguous', dtype) : null;
          const got = kiln.llm.addRmsNormLinear(x, r, g, 1e-5, w, b, gated);
          assert.deepEqual([...got.out.shape], [2, 3, gated ? 5 : 10], label);
          assert.deepEqual([...got.residual.shape], [2, 3, 16], label);
          const want = refAddRmsNormLinear(x, r, g, 1e-5, w, b, gated);
          const tol = dtype === 'float32' ? 2e-6 : 1e-12;
          assert.ok(relDiff(got.out.toFlatArray(), want.out) <= tol, `${label}: out ${relDiff(got.out.toFlatArray(), want.out)}`);
          assert.ok(relDiff(got.residual.toFlatArray(), want.h) <= tol, `${label}: residual`);
          assert.ok(Math.max(...want.out.map(Math.abs)) > 0.1, `${label}: a real result`);
        }
      }
    }
  }
});

test('llm.addRmsNormLinear in bfloat16 on the cpu: the norm rounds once before the linear (float64 loop with bfloat16 rounding)', () => {
  const x = rand([3, 64], 1, 'contiguous', 'bfloat16', -2, 2);
  const r = rand([3, 64], 2, 'contiguous', 'bfloat16', -2, 2);
  const g = rand([64], 3, 'contiguous', 'bfloat16', 0.5, 1.5);
  const w = rand([24, 64], 4, 'contiguous', 'bfloat16', -0.3, 0.3);
  for (const gated of [false, true]) {
    const got = kiln.llm.addRmsNormLinear(x, r, g, 1e-6, w, null, gated);
    const want = refAddRmsNormLinear(x, r, g, 1e-6, w, null, gated, toBf16);
    // The output's own rounding (2^-8 relative) and float32 sums.
    assert.ok(relDiff(got.out.to('float64').toFlatArray(), want.out) <= 2 ** -7, `gated ${gated}: ${relDiff(got.out.to('float64').toFlatArray(), want.out)}`);
    assert.deepEqual(got.residual.to('float64').toFlatArray(), want.h, 'h = bf16(x + r) exactly');
  }
});

test('llm.addRmsNormLinear rejects bad arguments naming the op', () => {
  const x = rand([2, 8], 1);
  const g = rand([8], 2);
  const w = rand([6, 8], 3);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, rand([2, 4], 4), g, 1e-6, w), /llm\.addRmsNormLinear: argument 'residual' .* must have the shape of 'input'/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, rand([4], 2), 1e-6, w), /llm\.addRmsNormLinear: argument 'normWeight' must be \[8\]/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, g, 0, w), /llm\.addRmsNormLinear: argument 'eps' must be a finite number > 0/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, g, 1e-6, rand([6, 4], 3)), /llm\.addRmsNormLinear: argument 'weight' must be \[N, 8\]/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, g, 1e-6, rand([5, 8], 3), null, true), /llm\.addRmsNormLinear: argument 'weight' must be \[2I, 8\]/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, g, 1e-6, w, rand([5], 3)), /llm\.addRmsNormLinear: argument 'bias' must be \[6\]/);
  assert.throws(() => kiln.llm.addRmsNormLinear(x, null, g, 1e-6, rand([6, 8], 3, 'contiguous', 'float64')), /llm\.addRmsNormLinear: arguments 'input' .* and 'weight' .* must have the same dtype/);
});

test('the pass on a traced Qwen3 decode step (cpu, forced on): every layer norm into its linear (one without an add); logits equal the unfused graph and eager', () => {
  const config = tinyQwen3Config().with({ numHiddenLayers: 2 });
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3 });
  model.eval();
  model.prepareDecode();
  const [NB, BS, M] = [6, 4, 3];
  const cache = { keys: [0, 1].map(() => kiln.zeros([NB, BS, config.numKeyValueHeads, config.headDim])), values: [0, 1].map(() => kiln.zeros([NB, BS, config.numKeyValueHeads, config.headDim])) };
  const fn = (ids: Tensor, positions: Tensor, slotMapping: Tensor, blockTables: Tensor, contextLens: Tensor): Tensor =>
    model.decodeStep({ inputIds: ids, positions, slotMapping, blockTables, contextLens }, cache);
  const args = [makeTensor([7, 3], [2], 'int64'), makeTensor([1, 0], [2], 'int64'), makeTensor([5, 8], [2], 'int64'), makeTensor([1, 0, 0, 2, 0, 0], [2, M], 'int32'), makeTensor([2, 1], [2], 'int32')];
  const want = kiln.noGrad(() => fn(...(args as [Tensor, Tensor, Tensor, Tensor, Tensor]))).toFlatArray();
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, args));
  const base = runPasses(graph, { rewrites: autoRewriteRules, horizontalFusion: true, dce: false });
  const gatedBase = fuseLinearSiluMul(base.graph, () => true).graph;
  assert.equal(fuseAddRmsNormLinear(gatedBase).fused, 0, 'not on the cpu by default');
  const r = fuseAddRmsNormLinear(gatedBase, () => true);
  // Layer 0: input norm (no add) -> qkv, add + post norm -> gate/up; layer 1: two adds + norms; the final add + norm -> lm_head.
  assert.equal(r.fused, 5);
  assert.equal(count(r.graph, 'llm.addRmsNormLinear'), 5);
  assert.equal(count(r.graph, 'rmsNorm'), count(gatedBase, 'rmsNorm') - 5, 'q/k norms stay');
  assert.equal(count(r.graph, 'add'), count(gatedBase, 'add') - 4, 'the residual adds are absorbed');
  const nodes = r.graph.nodes.filter((n) => n.op === 'llm.addRmsNormLinear');
  assert.deepEqual(nodes.map((n) => n.args[6]?.kind === 'const' && n.args[6].value), [false, true, false, true, false], 'qkv, gate/up, qkv, gate/up, lm_head');
  assert.equal(nodes.filter((n) => n.args[1]?.kind === 'const' && n.args[1].value === null).length, 1, 'the first norm has no residual');
  const unfused = kiln.noGrad(() => interpret(gatedBase, inputsOf(gatedBase, args)) as Tensor).toFlatArray();
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, args)) as Tensor).toFlatArray();
  assert.ok(relDiff(got, unfused) <= 1e-5, `fused vs unfused graph: ${relDiff(got, unfused)}`);
  assert.ok(relDiff(got, want) <= 1e-4, 'near eager');
  assert.ok(Math.max(...got.map(Math.abs)) > 1e-3, 'real logits');
});

test('the pass leaves a norm alone when its output is read elsewhere or returned, and keeps an add read before the linear', () => {
  const [a, res, g, w] = [rand([2, 8], 1), rand([2, 8], 2), rand([8], 3, 'contiguous', 'float32', 0.5, 1.5), rand([6, 8], 4)];
  const norm = (s: Tensor): Tensor => kiln.rmsNorm(s, [8], g, 1e-6);
  const variants: Record<string, [(x: Tensor, r: Tensor) => Tensor | Tensor[], number, number]> = {
    // name: [fn, fused, adds left]
    fuses: [(x, r) => {
      const s = kiln.add(x, r);
      return kiln.add(kiln.linear(norm(s), w), kiln.narrow(s, -1, 0, 6));
    }, 1, 1],
    noAdd: [(x) => kiln.linear(norm(x), w), 1, 0],
    normReadTwice: [(x, r) => {
      const y = norm(kiln.add(x, r));
      return kiln.add(kiln.linear(y, w), kiln.narrow(y, -1, 0, 6));
    }, 0, 2],
    normReturned: [(x, r) => {
      const y = norm(kiln.add(x, r));
      return [kiln.linear(y, w), y];
    }, 0, 1],
    sumReadBefore: [(x, r) => {
      const s = kiln.add(x, r);
      const t = kiln.mul(s, 2);
      return kiln.add(kiln.linear(norm(s), w), kiln.narrow(t, -1, 0, 6));
    }, 1, 2],
  };
  for (const [name, [fn, fused, adds]] of Object.entries(variants)) {
    const { graph } = kiln.noGrad(() => trace(fn as (...x: never[]) => unknown, [a, res]));
    const r = fuseAddRmsNormLinear(graph, () => true);
    assert.equal(r.fused, fused, name);
    assert.equal(count(r.graph, 'add'), adds, `${name}: adds left`);
    if (fused === 0) continue;
    const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [a, res])) as Tensor).toFlatArray();
    const want = (kiln.noGrad(() => fn(a, res)) as Tensor).toFlatArray();
    assert.ok(relDiff(got, want) <= 1e-6, `${name}: ${relDiff(got, want)}`);
  }
});
