/** The 'kiln' code-generating backend: compiled results vs eager, fusion counts, layouts, reuse. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { getBackend } from '../src/compile/backend.js';
import { trace } from '../src/compile/capture.js';
import '../src/compile/kiln-backend.js';
import type { KilnProgram } from '../src/compile/kiln-backend.js';
import { makeTensor, rng } from './helpers/make.js';
import type { Tensor } from '../src/tensor/tensor.js';
import type { Graph } from '../src/compile/ir.js';
import type { DType } from '../src/tensor/dtype.js';

type Fn = (...args: never[]) => unknown;

interface Compiled {
  program: KilnProgram;
  run(args: Tensor[]): unknown;
}

/** Graph inputs for a call: arguments by path, lifted tensors as captured. */
function inputsFor(graph: Graph, args: readonly unknown[]): Tensor[] {
  return graph.inputs.map((inp) => {
    if (inp.source.kind === 'lifted') return inp.source.tensor;
    let x: unknown = args;
    for (const k of inp.source.path) x = (x as Record<string | number, unknown>)[k];
    return x as Tensor;
  });
}

function compile(fn: Fn, args: Tensor[]): Compiled {
  const { graph } = trace(fn, args);
  const program = getBackend('kiln').compile(graph, { mode: 'default', logCode: false }) as KilnProgram;
  return { program, run: (a) => program.run(inputsFor(graph, a)) };
}

function flat(x: unknown): Tensor[] {
  if (x instanceof kiln.Tensor) return [x];
  if (Array.isArray(x)) return x.flatMap(flat);
  if (x && typeof x === 'object') return Object.values(x).flatMap(flat);
  return [];
}

function assertSame(actual: unknown, expected: unknown, tol: number): void {
  const a = flat(actual);
  const e = flat(expected);
  assert.equal(a.length, e.length);
  a.forEach((t, i) => {
    const r = e[i]!;
    assert.deepEqual(t.shape, r.shape, 'shape');
    assert.deepEqual(t.strides, r.strides, `strides of output ${i}`);
    assert.equal(t.dtype, r.dtype, 'dtype');
    const av = t.toFlatArray();
    const ev = r.toFlatArray();
    for (let k = 0; k < av.length; k++) {
      const x = av[k]!;
      const y = ev[k]!;
      if (Number.isNaN(y)) assert.ok(Number.isNaN(x), `element ${k}: ${x} vs NaN`);
      else assert.ok(Math.abs(x - y) <= tol + tol * Math.abs(y), `element ${k}: compiled ${x} vs eager ${y}`);
    }
  });
}

/** Compiles fn for args, runs it, and compares against eager fn. */
function compileAndRun(fn: Fn, args: Tensor[], tol = 1e-5): KilnProgram {
  const p = compile(fn, args);
  assertSame(p.run(args), fn(...(args as never[])), tol);
  return p.program;
}

function rand(shape: number[], seed = 1, dtype: DType = 'float32', layout: 'contiguous' | 'transposed' | 'channelsLast' | 'strided' = 'contiguous'): Tensor {
  const r = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return makeTensor(Array.from({ length: n }, () => r() * 4 - 2), shape, dtype, layout);
}

const elementwise = (x: Tensor): Tensor => {
  let y = x.mul(1.5).add(0.5);
  y = kiln.relu(y).mul(kiln.sigmoid(x));
  y = y.add(kiln.tanh(x.mul(0.5)));
  y = y.sub(kiln.exp(x.neg().mul(x)).mul(0.1));
  return y.mul(2).sub(1);
};

test('elementwise workload fuses into one kernel', () => {
  const p = compileAndRun(elementwise as Fn, [rand([33, 47])]);
  assert.equal(p.kernelCount, 1);
  assert.equal(p.stats.externs, 0);
  assert.match(p.describe(), /kernel0_pointwise/);
  assert.match(p.describe(), /Math\.tanh/);
});

test('broadcast bias row, transposed and channels_last inputs keep eager strides', () => {
  const bias = rand([47], 2);
  compileAndRun(((x: Tensor, b: Tensor) => kiln.relu(x.add(b)).mul(2)) as Fn, [rand([33, 47]), bias]);
  const p = compileAndRun(((x: Tensor) => kiln.sigmoid(x).mul(x).add(1)) as Fn, [rand([16, 9], 3, 'float32', 'transposed')]);
  assert.equal(p.kernelCount, 1);
  compileAndRun(((x: Tensor) => kiln.exp(x.mul(0.5)).sub(x)) as Fn, [rand([2, 3, 4, 5], 4, 'float32', 'channelsLast')]);
  compileAndRun(((x: Tensor, y: Tensor) => x.add(y).mul(y)) as Fn, [rand([6, 7], 5, 'float32', 'strided'), rand([6, 1], 6)]);
  // views absorbed as index expressions
  const v = compileAndRun(((x: Tensor) => x.t().mul(2).add(x.t())) as Fn, [rand([5, 8], 7)]);
  assert.equal(v.kernelCount, 1);
});

test('softmax and logSoftmax run as one row kernel', () => {
  const x = rand([12, 37], 8);
  const p = compileAndRun(((t: Tensor) => kiln.softmax(t, -1)) as Fn, [x]);
  assert.equal(p.kernelCount, 1);
  assert.equal(p.stats.externs, 0);
  const q = compileAndRun(((t: Tensor) => kiln.logSoftmax(t, 1)) as Fn, [x]);
  assert.equal(q.kernelCount, 1);
  // softmax over a non-last dim, and the decomposed form written by hand
  compileAndRun(((t: Tensor) => kiln.softmax(t, 0)) as Fn, [x], 1e-4);
  const manual = (t: Tensor): Tensor => {
    const e = kiln.exp(t.sub(kiln.amax(t, -1, true)));
    return e.div(kiln.sum(e, -1, true));
  };
  assert.equal(compileAndRun(manual as Fn, [x], 1e-4).kernelCount, 1);
});

test('reductions with prologue fusion', () => {
  const x = rand([20, 30], 9);
  assert.equal(compileAndRun(((t: Tensor) => kiln.sum(t.mul(t), -1)) as Fn, [x], 1e-4).kernelCount, 1);
  assert.equal(compileAndRun(((t: Tensor) => kiln.mean(kiln.exp(t), 0, true)) as Fn, [x], 1e-4).kernelCount, 1);
  assert.equal(compileAndRun(((t: Tensor) => kiln.amax(t.abs(), [0, 1])) as Fn, [x], 1e-4).kernelCount, 1);
  compileAndRun(((t: Tensor) => kiln.sum(t.neg().exp())) as Fn, [rand([7, 9], 10, 'float32', 'transposed')], 1e-4);
  // an intermediate used by the reduction and returned: one kernel, two outputs
  const p = compileAndRun(((t: Tensor) => {
    const y = t.mul(3);
    return [y, kiln.amin(y, 1, true)];
  }) as Fn, [x], 1e-4);
  assert.equal(p.kernelCount, 1);
});

test('MLP: linear extern + gelu fused; layerNorm is one row kernel', () => {
  const w1 = rand([32, 16], 11).mul(0.2);
  const b1 = rand([32], 12);
  const w2 = rand([16, 32], 13).mul(0.2);
  const mlp = (x: Tensor): Tensor => kiln.linear(kiln.gelu(kiln.linear(x, w1, b1)), w2).add(x);
  const p = compileAndRun(mlp as Fn, [rand([8, 16], 14)], 1e-4);
  assert.equal(p.stats.externs, 2);
  const ln = compileAndRun(((x: Tensor) => kiln.layerNorm(x, [16], b1.narrow(0, 0, 16), w2.select(1, 0))) as Fn, [rand([8, 16], 15)], 1e-4);
  assert.equal(ln.kernelCount, 1);
});

test('transformer-block-like function', () => {
  const d = 16;
  const wq = rand([d, d], 20).mul(0.2);
  const wk = rand([d, d], 21).mul(0.2);
  const wv = rand([d, d], 22).mul(0.2);
  const g = rand([d], 23);
  const block = (x: Tensor): Tensor => {
    const h = kiln.layerNorm(x, [d], g);
    const [b, t] = x.shape as [number, number, number];
    const q = kiln.linear(h, wq).view([b, t, 2, 8]).transpose(1, 2);
    const k = kiln.linear(h, wk).view([b, t, 2, 8]).transpose(1, 2);
    const v = kiln.linear(h, wv).view([b, t, 2, 8]).transpose(1, 2);
    const a = kiln.scaledDotProductAttention(q, k, v, null, 0, true).transpose(1, 2).reshape([b, t, d]);
    const y = x.add(a);
    return y.add(kiln.gelu(kiln.layerNorm(y, [d])).mul(0.5));
  };
  const p = compileAndRun(block as Fn, [rand([2, 5, d], 24)], 1e-4);
  assert.ok(p.kernelCount >= 2);
});

test('float16 / bfloat16 inputs compute in float32 and round on store', () => {
  for (const dt of ['float16', 'bfloat16'] as const) {
    const x = rand([9, 13], 30, dt);
    compileAndRun(elementwise as Fn, [x], dt === 'float16' ? 1e-2 : 4e-2);
    compileAndRun(((t: Tensor) => kiln.softmax(t, -1)) as Fn, [x], dt === 'float16' ? 1e-2 : 4e-2);
  }
  compileAndRun(((t: Tensor) => t.to('float16').mul(3).to('float32')) as Fn, [rand([5, 6], 31)], 1e-3);
});

test('int and bool pointwise', () => {
  const a = makeTensor([1, -2, 3, 7, -9, 100000, 5, 0], [2, 4], 'int32');
  const b = makeTensor([3, 3, -1, 2, 4, 100000, 1, 1], [2, 4], 'int32');
  compileAndRun(((x: Tensor, y: Tensor) => x.mul(y).add(x).sub(3)) as Fn, [a, b]);
  compileAndRun(((x: Tensor, y: Tensor) => kiln.where(x.gt(y), x, y.neg())) as Fn, [a, b]);
  compileAndRun(((x: Tensor) => x.gt(0.5).to('int32').mul(x)) as Fn, [rand([4, 5], 32)]);
  compileAndRun(((x: Tensor) => kiln.clamp(x.mul(2), -1, 1).to('uint8')) as Fn, [rand([4, 5], 33)]);
});

test('comparisons, logical ops, rounding and casts of a fused float32 intermediate see its float32 value', () => {
  // Fuzz fixture case 1845 (torch 2.11): logicalNot(softmax(exp(uint8 x), 1)). exp(3 - 403.43) is
  // 0 in float32 but 1e-166 as the double a fused kernel keeps: torch says True at element 5.
  const x = makeTensor([8, 8, 0, 4, 7, 3, 6, 5, 6, 4], [2, 5], 'uint8');
  const f = (t: Tensor): Tensor => kiln.logicalNot(kiln.softmax(kiln.exp(t), 1));
  const torch = [0, 0, 1, 1, 1, 1, 0, 1, 0, 1];
  assert.deepEqual((compile(f as Fn, [x]).run([x]) as Tensor).toFlatArray(), torch);
  assert.deepEqual(kiln.compile(f)(x).toFlatArray(), torch);
  // float32 1.8 * 5 is exactly 9 (IEEE float32, as eager and torch round it); the double is 8.99999976.
  const a = makeTensor([1.8, 1.8], [2]);
  const cases: [(t: Tensor) => Tensor, number][] = [
    [(t) => t.mul(5).floor(), 9],
    [(t) => t.mul(5).to('int32'), 9],
    [(t) => t.mul(5).ge(9), 1],
    [(t) => t.mul(5).div(9, 'floor'), 1],
  ];
  for (const [g, want] of cases) {
    assert.deepEqual(g(a).toFlatArray(), [want, want], 'eager');
    assert.deepEqual(kiln.compile(g)(a).toFlatArray(), [want, want], String(g));
  }
  // 1e-30 * 1e-30 underflows float32 to 0 and 1e30 * 1e30 overflows it to inf.
  const u = makeTensor([1e-30, 1e30], [2]);
  assert.deepEqual(kiln.compile((t: Tensor) => t.mul(t).eq(0))(u).toFlatArray(), [1, 0]);
  assert.deepEqual(kiln.compile((t: Tensor) => t.mul(t).isinf())(u).toFlatArray(), [0, 1]);
});

test('graphs with nothing to fuse run all-extern', () => {
  const w = rand([6, 4], 40);
  const p = compileAndRun(((x: Tensor) => kiln.matmul(x, w)) as Fn, [rand([3, 6], 41)], 1e-4);
  assert.equal(p.kernelCount, 0);
});

test('one program serves another batch size', () => {
  const p = compile(((x: Tensor) => kiln.softmax(x.mul(2), -1).add(x)) as Fn, [rand([4, 10], 50)]);
  for (const n of [4, 7, 1]) {
    const x = rand([n, 10], 51 + n);
    assertSame(p.run([x]), kiln.softmax(x.mul(2), -1).add(x), 1e-4);
  }
  const q = compile(elementwise as Fn, [rand([8, 8], 52)]);
  const x = rand([3, 8], 53);
  assertSame(q.run([x]), elementwise(x), 1e-5);
});

test('buffer reuse and describe()', () => {
  const w = rand([16, 16], 60);
  const f = (x: Tensor): Tensor => {
    const a = kiln.matmul(x.mul(2).add(1), w);
    const b = kiln.matmul(kiln.relu(a).sub(0.5), w);
    return kiln.matmul(kiln.tanh(b).mul(3), w);
  };
  const p = compileAndRun(f as Fn, [rand([16, 16], 61)], 1e-4);
  assert.ok(p.stats.buffersReused > 0, `reuses: ${JSON.stringify(p.stats)}`);
  const text = p.describe();
  assert.match(text, /free-for-reuse/);
  assert.match(text, /extern matmul/);
  assert.match(text, /return function kernel0_pointwise/);
});
