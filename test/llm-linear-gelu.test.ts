/**
 * llm.linearGelu (gelu(linear(x, W, b)) in one op) and the compile pass that maps linear -> gelu
 * onto it (src/llm/linear-gelu-pass.ts), on the cpu: values against a float64 loop (the erf form
 * through test/helpers/pointwise-ref.ts's erf, the tanh form written out), argument errors, the
 * pass on a traced GELU MLP (interpreted: equal to the unfused graph and eager), what it must leave
 * alone, and that it does not fire on the cpu by default (no kernel there: the op would run its
 * two parts). The webgpu kernel (the GELU in the GEMM's epilogue): webgpu-linear-gelu.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { trace } from '../src/compile/capture.js';
import { interpret } from '../src/compile/interpret.js';
import { fuseLinearGelu } from '../src/llm/linear-gelu-pass.js';
import type { DType } from '../src/tensor/dtype.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';
import { refLinearGelu } from './helpers/linear-gelu-ref.js';
import { countOps as count, graphInputs as inputsOf, maxAbsDiff as maxDiff } from './helpers/graph-pass.js';

test('llm.linearGelu on the cpu equals the float64 loop (float32 / float64, both forms, bias or none, 3-d input)', () => {
  for (const dtype of ['float32', 'float64'] as DType[]) {
    for (const approximate of ['none', 'tanh'] as const) {
      for (const withBias of [false, true]) {
        const x = rand([2, 3, 12], 1, 'contiguous', dtype, -2, 2);
        const w = rand([5, 12], 2, 'contiguous', dtype, -0.5, 0.5);
        const b = withBias ? rand([5], 3, 'contiguous', dtype) : null;
        const out = kiln.llm.linearGelu(x, w, b, approximate);
        assert.deepEqual([...out.shape], [2, 3, 5]);
        const tol = dtype === 'float32' ? 2e-6 : 1e-12;
        const d = maxDiff(out.toFlatArray(), refLinearGelu(x, w, b, approximate));
        assert.ok(d <= tol, `${dtype} ${approximate} bias ${withBias}: ${d}`);
      }
    }
  }
});

test('llm.linearGelu rejects bad arguments naming the op', () => {
  const x = rand([2, 8], 1);
  assert.throws(() => kiln.llm.linearGelu(x, rand([6, 4], 2)), /llm\.linearGelu: argument 'weight' must be \[N, 8\]/);
  assert.throws(() => kiln.llm.linearGelu(x, rand([6, 8], 2), rand([5], 3)), /llm\.linearGelu: argument 'bias' must be \[6\]/);
  assert.throws(() => kiln.llm.linearGelu(x, rand([6, 8], 2), null, 'erf' as 'none'), /llm\.linearGelu: argument 'approximate' must be one of 'none', 'tanh', got "erf"/);
  assert.throws(() => kiln.llm.linearGelu(x, rand([6, 8], 2, 'contiguous', 'float64')), /llm\.linearGelu: arguments 'input' .* and 'weight' .* must have the same dtype/);
});

test('the pass on a traced GELU MLP (cpu, forced on): the first linear and its GELU become llm.linearGelu; values equal the unfused graph and eager', () => {
  const mlp = new kiln.nn.Sequential(new kiln.nn.Linear(12, 16), new kiln.nn.GELU('tanh'), new kiln.nn.Linear(16, 12));
  mlp.eval();
  const x = rand([4, 12], 7, 'contiguous', 'float32', -2, 2);
  const fn = (t: Tensor): Tensor => mlp.forward(t);
  const want = kiln.noGrad(() => fn(x)).toFlatArray();
  const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, [x]));
  assert.equal(fuseLinearGelu(graph).fused, 0, 'not on the cpu by default');
  const r = fuseLinearGelu(graph, () => true);
  assert.equal(r.fused, 1);
  assert.equal(count(r.graph, 'llm.linearGelu'), 1);
  assert.equal(count(r.graph, 'gelu'), 0, 'the activation is absorbed');
  assert.equal(count(r.graph, 'linear'), 1, 'the second linear stays');
  const node = r.graph.nodes.find((n) => n.op === 'llm.linearGelu')!;
  assert.deepEqual(node.args[3], { kind: 'const', value: 'tanh' }, 'the form is carried');
  const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [x])) as Tensor).toFlatArray();
  assert.ok(maxDiff(got, want) <= 1e-6, `fused graph vs eager: ${maxDiff(got, want)}`);
});

test('the pass leaves a linear alone when its output is read elsewhere or returned, its weight is not 2-d, or a write sits between', () => {
  const [x, w, b] = [rand([2, 8], 1), rand([6, 8], 2), rand([6], 3)];
  const variants: Record<string, (a: Tensor) => Tensor | Tensor[]> = {
    fuses: (a) => kiln.gelu(kiln.linear(a, w, b)),
    noBias: (a) => kiln.gelu(kiln.linear(a, w)),
    projectionReturned: (a) => {
      const y = kiln.linear(a, w, b);
      return [kiln.gelu(y), y];
    },
    projectionRead: (a) => {
      const y = kiln.linear(a, w, b);
      return kiln.add(kiln.gelu(y), y);
    },
    vectorWeight: (a) => kiln.gelu(kiln.linear(a, rand([8], 4))),
    writeBetween: (a) => {
      const y = kiln.linear(a, w, b);
      a.mul_(2);
      return kiln.gelu(y);
    },
  };
  for (const [name, fn] of Object.entries(variants)) {
    const xs = x.clone();
    const { graph } = kiln.noGrad(() => trace(fn as (...a: never[]) => unknown, [xs]));
    const r = fuseLinearGelu(graph, () => true);
    const fuses = name === 'fuses' || name === 'noBias';
    assert.equal(r.fused, fuses ? 1 : 0, name);
    if (!fuses) continue;
    const got = kiln.noGrad(() => interpret(r.graph, inputsOf(r.graph, [x])) as Tensor).toFlatArray();
    assert.ok(maxDiff(got, (kiln.noGrad(() => fn(x)) as Tensor).toFlatArray()) <= 1e-6, name);
  }
});
