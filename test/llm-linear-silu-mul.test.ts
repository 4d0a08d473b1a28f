/**
 * llm.linearSiluAndMul (a SwiGLU MLP's gate/up projection and silu * mul in one op) on the cpu,
 * and the compile pass that maps linear -> slices -> silu * mul onto it
 * (src/llm/linear-silu-mul-pass.ts): values against a float64 loop, argument errors, the pass on a
 * traced Qwen3 decode step (interpreted: logits equal the unfused graph's and eager), what it must
 * leave alone, and that it does not fire on the cpu by default. The cuda kernel:
 * cuda-linear-silu-mul.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import { runPasses } from '../src/compile/passes/index.js';
import { autoRewriteRules } from '../src/llm/rewrites.js';
import { fuseLinearSiluMul } from '../src/llm/linear-silu-mul-pass.js';
import { tinyQwen3Config } from '../src/bench/workloads.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand } from './helpers/make.js';
import { refLinearSiluMul } from './helpers/linear-silu-mul-ref.js';
import { countOps as count, graphInputs as inputsOf, maxAbsDiff as maxDiff } from './helpers/graph-pass.js';

test('llm.linearSiluAndMul on the cpu equals the float64 loop (float32 / float64, bias or none, 3-d input)', () => {
  for (const dtype of ['float32', 'float64'] as DType[]) {
    for (const withBias of [false, true]) {
      const x = rand([2, 3, 12], 1, 'contiguous', dtype, -1, 1);
      const w = rand([10, 12], 2, 'contiguous', dtype, -0.5, 0.5);
      const b = withBias ? rand([10], 3, 'contiguous', dtype) : null;
      const out = kiln.llm.linearSiluAndMul(x, w, b);
      assert.deepEqual([...out.shape], [2, 3, 5]);
      const tol = dtype === 'float32' ? 1e-5 : 1e-12;
      assert.ok(maxDiff(out.toFlatArray(), refLinearSiluMul(x, w, b)) <= tol, `${dtype} bias ${withBias}`);
    }
  }
});

test('llm.linearSiluAndMul rejects bad arguments naming the op', () => {
  const x = rand([2, 8], 1);
  assert.throws(() => kiln.llm.linearSiluAndMul(x, rand([6, 4], 2)), /llm\.linearSiluAndMul: argument 'weight' must be \[2I, 8\]/);
  assert.throws(() => kiln.llm.linearSiluAndMul(x, rand([5, 8], 2)), /llm\.linearSiluAndMul: argument 'weight' must be \[2I, 8\]/);
  assert.throws(() => kiln.llm.linearSiluAndMul(x, rand([6, 8], 2), rand([5], 3)), /llm\.linearSiluAndMul: argument 'bias' must be \[6\]/);
  assert.throws(() => kiln.llm.linearSiluAndMul(x, rand([6, 8], 2, 'contiguous', 'float64')), /llm\.linearSiluAndMul: arguments 'input' .* and 'weight' .* must have the same dtype/);
});

test('the pass on a traced Qwen3 decode step (cpu, forced on): one llm.linearSiluAndMul per layer; logits equal the unfused graph and eager', () => {
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
  assert.equal(fuseLinearSiluMul(base.graph).fused, 0, 'not on the cpu by default');
  const r = fuseLinearSiluMul(base.graph, () => true);
  assert.equal(r.fused, 2);
  assert.equal(count(r.graph, 'llm.linearSiluAndMul'), 2);
  assert.equal(count(r.graph, 'silu'), 0, 'the activations are absorbed');
  const unfused = kiln.noGrad(() => interpret(base.graph, inputsOf(base.graph, args)) as Tensor).toFlatArray();
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, args)) as Tensor).toFlatArray();
  assert.ok(maxDiff(got, unfused) <= 1e-6, `fused vs unfused graph: ${maxDiff(got, unfused)}`);
  assert.ok(maxDiff(got, want) <= 1e-4, 'near eager');
});

test('the pass leaves an MLP alone when the projection, a half or the activation is read elsewhere, or the halves are not the gate and up halves', () => {
  const [x, w] = [rand([2, 8], 1), rand([12, 8], 2)];
  const variants: Record<string, (a: Tensor) => Tensor | Tensor[]> = {
    fuses: (a) => {
      const y = kiln.linear(a, w);
      return kiln.mul(kiln.silu(kiln.narrow(y, -1, 0, 6)), kiln.narrow(y, -1, 6, 6));
    },
    upFirst: (a) => {
      const y = kiln.linear(a, w);
      return kiln.mul(kiln.narrow(y, -1, 6, 6), kiln.silu(kiln.narrow(y, -1, 0, 6)));
    },
    projectionReturned: (a) => {
      const y = kiln.linear(a, w);
      return [kiln.mul(kiln.silu(kiln.narrow(y, -1, 0, 6)), kiln.narrow(y, -1, 6, 6)), y];
    },
    activationRead: (a) => {
      const y = kiln.linear(a, w);
      const s = kiln.silu(kiln.narrow(y, -1, 0, 6));
      return kiln.add(kiln.mul(s, kiln.narrow(y, -1, 6, 6)), s);
    },
    swappedHalves: (a) => {
      const y = kiln.linear(a, w);
      return kiln.mul(kiln.silu(kiln.narrow(y, -1, 6, 6)), kiln.narrow(y, -1, 0, 6));
    },
  };
  for (const [name, fn] of Object.entries(variants)) {
    const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, [x]));
    const r = fuseLinearSiluMul(graph, () => true);
    const fuses = name === 'fuses' || name === 'upFirst';
    assert.equal(r.fused, fuses ? 1 : 0, name);
    if (!fuses) continue;
    const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [x])) as Tensor).toFlatArray();
    assert.ok(maxDiff(got, (kiln.noGrad(() => fn(x)) as Tensor).toFlatArray()) <= 1e-6, name);
  }
});
