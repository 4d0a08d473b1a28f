/**
 * Compiled float32 linears (lower/gemm.ts, codegen/wasm/gemm.ts): results against eager Kiln and a
 * float64 reference, epilogue folding (bias + GELU, residual add, row broadcasts) and when it must
 * not happen, odd shapes (M, N not multiples of the 4 x 8 tile, K over several K blocks), strided
 * activations, weight packing reuse and invalidation on in-place parameter updates (copy_, an SGD
 * step), the max-autotune GEMM candidates, and scaled_dot_product_attention on the compiled GEMM.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getBackend } from '../src/compile/backend.js';
import { trace } from '../src/compile/capture.js';
import '../src/compile/kiln-backend.js';
import type { KilnProgram } from '../src/compile/kiln-backend.js';
import { makeTensor, rng } from './helpers/make.js';
import type { Tensor } from '../src/tensor/tensor.js';

type Fn = (...args: Tensor[]) => Tensor;

function rand(shape: number[], seed: number, layout: 'contiguous' | 'transposed' | 'strided' = 'contiguous', scale = 2): Tensor {
  const r = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(
    Array.from({ length: n }, () => (r() - 0.5) * scale),
    shape,
    'float32',
    layout,
  );
}

function build(fn: Fn, args: Tensor[], mode: 'default' | 'max-autotune' = 'default'): { program: KilnProgram; run: (a: Tensor[]) => Tensor } {
  const { graph } = trace(fn as never, args);
  const program = getBackend('kiln').compile(graph, { mode, logCode: false }) as KilnProgram;
  const run = (a: Tensor[]): Tensor => program.run(graph.inputs.map((inp) => (inp.source.kind === 'lifted' ? inp.source.tensor : a[inp.source.path[0] as number]!))) as Tensor;
  return { program, run };
}

function close(got: Tensor, want: Tensor, tol: number, what: string): void {
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  assert.deepEqual(got.strides, want.strides, `${what}: strides`);
  const a = got.toFlatArray();
  const b = want.toFlatArray();
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) <= tol * (1 + Math.abs(b[i]!)), `${what}[${i}]: compiled ${a[i]} vs ${b[i]}`);
}

/** float64 x . w^T + b from the tensors' values. */
function linear64(x: Tensor, w: Tensor, b: Tensor | null): number[] {
  const xv = x.toFlatArray();
  const wv = w.toFlatArray();
  const bv = b?.toFlatArray();
  const [N, K] = w.shape as [number, number];
  const M = xv.length / K;
  const out: number[] = [];
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = bv ? bv[j]! : 0;
      for (let k = 0; k < K; k++) s += xv[i * K + k]! * wv[j * K + k]!;
      out.push(s);
    }
  }
  return out;
}

test('linear as compiled GEMM matches a float64 reference for odd M, N and K over several K blocks', () => {
  for (const [M, K, N] of [
    [1, 3, 1],
    [5, 7, 9],
    [13, 600, 19],
    [64, 1100, 70],
  ] as const) {
    const x = rand([M, K], M + K);
    const w = rand([N, K], N, 'contiguous', 0.5);
    const b = rand([N], N + 1);
    const { program, run } = build((t) => kiln.linear(t, w, b), [x]);
    assert.equal(program.stats.gemms, 1);
    const got = run([x]).toFlatArray();
    const ref = linear64(x, w, b);
    // float32 accumulation: error grows like sqrt(K) ulps of the partial sums.
    const tol = 4e-7 * Math.sqrt(K) * 4;
    ref.forEach((r, i) => assert.ok(Math.abs(got[i]! - r) <= tol * (1 + Math.abs(r)), `[${M},${K},${N}] ${i}: ${got[i]} vs ${r}`));
  }
});

test('bias + GELU and residual adds fold into the GEMM epilogue; results match eager', () => {
  const w1 = rand([48, 32], 1, 'contiguous', 0.4);
  const b1 = rand([48], 2);
  const w2 = rand([32, 48], 3, 'contiguous', 0.4);
  const b2 = rand([32], 4);
  const scale = rand([32], 5);
  const mlp: Fn = (x) => kiln.add(kiln.mul(kiln.linear(kiln.nn.functional.gelu(kiln.linear(x, w1, b1)), w2, b2), scale), x);
  for (const x of [rand([2, 7, 32], 6), rand([10, 32], 7, 'transposed'), rand([6, 32], 8, 'strided')]) {
    const { program, run } = build(mlp, [x]);
    assert.equal(program.stats.gemms, 2);
    assert.equal(program.stats.fusedEpilogues, 2, program.describe());
    close(run([x]), mlp(x), 2e-5, `mlp ${x.shape}`);
  }
  // tanh GELU, no bias, sigmoid gate from a row vector.
  const gate = rand([48], 9);
  const f: Fn = (x) => kiln.mul(kiln.nn.functional.gelu(kiln.linear(x, w1), 'tanh'), kiln.sigmoid(kiln.add(kiln.linear(x, w1), gate)));
  const x = rand([9, 32], 10);
  close(build(f, [x]).run([x]), f(x), 2e-5, 'gated');
});

test('no folding when the linear output is also used elsewhere, returned, or the consumer has another shape', () => {
  const w = rand([16, 8], 11);
  const x = rand([4, 8], 12);
  const cases: [Fn, number][] = [
    [(t) => kiln.add(kiln.relu(kiln.linear(t, w)), kiln.linear(t, w).sum(-1, true)), 0],
    [(t) => kiln.linear(t, w), 0],
    // The consumer broadcasts against a [4, 1] column: not a 'full' or 'row' epilogue input.
    [(t) => kiln.mul(kiln.linear(t, w), kiln.sum(t, -1, true)), 0],
    [(t) => kiln.relu(kiln.linear(t, w)), 1],
  ];
  for (const [fn, fused] of cases) {
    const { program, run } = build(fn, [x]);
    assert.equal(program.stats.fusedEpilogues, fused, program.describe());
    close(run([x]), fn(x), 2e-5, 'case');
  }
});

test('packed weights are reused across calls and repacked after an in-place update (copy_, SGD step)', () => {
  const lin = new kiln.nn.Linear(24, 40);
  const x = rand([6, 24], 13);
  const fn: Fn = (t) => kiln.nn.functional.gelu(lin.forward(t));
  kiln.noGrad(() => {
    const { program, run } = build(fn, [x]);
    close(run([x]), fn(x), 2e-5, 'first');
    close(run([x]), fn(x), 2e-5, 'second');
    assert.equal(program.weightPacks, 1, 'one packing for two calls');
    lin.weight.copy_(rand([40, 24], 14));
    close(run([x]), fn(x), 2e-5, 'after copy_');
    assert.equal(program.weightPacks, 2);
    // An optimizer step writes the parameter in place.
    const opt = new kiln.optim.SGD(lin.parameters(), { lr: 0.5 });
    kiln.enableGrad(() => {
      const loss = kiln.sum(lin.forward(x));
      loss.backward();
    });
    opt.step();
    close(run([x]), fn(x), 2e-5, 'after SGD step');
    assert.equal(program.weightPacks, 3);
  });
});

test('max-autotune times the GEMM candidates (Wasm block depths, eager extern) and keeps eager results', () => {
  const w = rand([40, 300], 15, 'contiguous', 0.3);
  const b = rand([40], 16);
  const fn: Fn = (t) => kiln.nn.functional.gelu(kiln.linear(t, w, b));
  const x = rand([20, 300], 17);
  const { program, run } = build(fn, [x], 'max-autotune');
  close(run([x]), fn(x), 2e-5, 'tuned');
  assert.match(program.describe(), /gemm linear\(.*config \{"impl":"(wasm|extern)","kc":\d+\}/);
  close(run([x]), fn(x), 2e-5, 'tuned, second call');
});

test('scaled_dot_product_attention runs on the compiled GEMM (causal or not, L != S, strided views) and matches eager', () => {
  const cases: [number[], number[], boolean, number | null][] = [
    [[2, 3, 9, 12], [2, 3, 9, 12], true, null],
    [[1, 2, 5, 7], [1, 2, 11, 7], false, 0.3],
    [[1, 2, 11, 16], [1, 2, 5, 16], true, null],
  ];
  cases.forEach(([qs, ks, causal, scale], c) => {
    const q = rand(qs, 30 + c);
    const k = rand(ks, 40 + c);
    const v = rand(ks, 50 + c);
    const fn: Fn = (a, b, d) => kiln.mul(kiln.scaledDotProductAttention(a, b, d, null, 0, causal, scale), 2);
    const { program, run } = build(fn, [q, k, v]);
    close(run([q, k, v]), fn(q, k, v), 2e-5, `case ${c}`);
    assert.equal(program.attentionRuns, 1, `case ${c}`);
  });
  // q, k, v as strided views of one projection, as the transformer block makes them.
  const qkv = rand([2, 6, 3, 2, 8], 60);
  const fn: Fn = (t) => {
    const p = kiln.permute(t, [2, 0, 3, 1, 4]);
    return kiln.scaledDotProductAttention(kiln.select(p, 0, 0), kiln.select(p, 0, 1), kiln.select(p, 0, 2), null, 0, true);
  };
  const { program, run } = build(fn, [qkv]);
  close(run([qkv]), fn(qkv), 2e-5, 'strided views');
  assert.equal(program.attentionRuns, 1);
  // A mask tensor goes to the eager kernel.
  const q = rand([1, 2, 4, 8], 61);
  const mask = rand([4, 4], 62);
  const masked: Fn = (a, m) => kiln.scaledDotProductAttention(a, a, a, m, 0, false);
  const mk = build(masked, [q, mask]);
  close(mk.run([q, mask]), masked(q, mask), 1e-6, 'masked');
  assert.equal(mk.program.attentionRuns, 0);
});

test('through kiln.compile: a module serves new batch sizes (symbolic rows) and a strided activation', () => {
  const model = new kiln.nn.Sequential(new kiln.nn.Linear(20, 36), new kiln.nn.GELU(), new kiln.nn.Linear(36, 12));
  kiln.noGrad(() => {
    const f = kiln.compile(model);
    for (const rows of [3, 17, 64, 5]) {
      const x = rand([rows, 20], 70 + rows);
      close(f(x) as Tensor, model.forward(x), 2e-5, `rows ${rows}`);
    }
    // A transposed (column-major) activation: rows are gathered, results unchanged.
    const xt = rand([9, 20], 80, 'transposed');
    close(f(xt) as Tensor, model.forward(xt), 2e-5, 'transposed activation');
    // Row-broadcast epilogue input of shape [1, N].
    const w = rand([16, 20], 81);
    const shift = rand([1, 16], 82);
    const g = kiln.compile((t: Tensor) => kiln.relu(kiln.sub(kiln.linear(t, w), shift)));
    const x = rand([7, 20], 83);
    close(g(x) as Tensor, kiln.relu(kiln.sub(kiln.linear(x, w), shift)), 2e-5, 'row [1, N] input');
  });
});
