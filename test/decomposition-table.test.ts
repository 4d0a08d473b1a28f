/**
 * The decomposition table (src/ops/decompose.ts, entries in src/ops/decompositions.ts) as eager
 * fallback: with an op's CPU kernel taken away, dispatch runs its composition, which must give the
 * kernel's values, shape and layout; it declines (naming the op) where it does not apply; and the
 * compiler's decompose pass reads the same entries (test/compile-passes.test.ts checks the graphs).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { listDecompositions } from '../src/compile/passes/decompose.js';
import { tableDecompositionNames } from '../src/ops/decompose.js';
import { getOp } from '../src/ops/registry.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, randomValues } from './helpers/make.js';

const rand = (shape: number[], seed: number, layout: 'contiguous' | 'transposed' | 'channelsLast' = 'contiguous', lo = -3, hi = 3): Tensor =>
  makeTensor(randomValues(shape.reduce((p, q) => p * q, 1), seed, lo, hi), shape, 'float32', layout);

/** Runs fn with op `name` having no CPU kernel (so dispatch takes its decomposition). */
function withoutCpuKernel<T>(name: string, fn: () => T): T {
  const op = getOp(name);
  const kernel = op.kernels.get('cpu');
  assert.ok(kernel, `${name} has a cpu kernel to take away`);
  op.kernels.delete('cpu');
  try {
    return fn();
  } finally {
    op.kernels.set('cpu', kernel);
  }
}

test('every table decomposition is an eager fallback and a compiler rewrite', () => {
  const names = tableDecompositionNames();
  assert.ok(names.length >= 14);
  for (const n of names) {
    assert.ok(getOp(n).decomposition, `${n}: eager fallback set`);
    assert.ok(listDecompositions().includes(n), `${n}: the compiler's decompose pass has it`);
  }
});

test('with no kernel for the device, dispatch runs the decomposition: the kernel values, shape and layout', () => {
  const x = rand([4, 6], 1);
  const xt = rand([6, 4], 2, 'transposed');
  const w = rand([6], 3);
  const b = rand([6], 4);
  const cl = rand([2, 3, 4, 5], 5, 'channelsLast');
  const mean = rand([3], 6);
  const variance = rand([3], 7, 'contiguous', 0.5, 2);
  const cases: [string, () => Tensor, number][] = [
    ['softmax', () => kiln.softmax(x, -1), 1e-6],
    ['softmax', () => kiln.softmax(xt, 0), 1e-6],
    ['logSoftmax', () => kiln.logSoftmax(x, 1), 1e-5],
    ['logsumexp', () => kiln.logsumexp(x, [1]), 1e-5],
    ['var', () => x.var([1]), 1e-5],
    ['std', () => kiln.std(x, [0], 1, true), 1e-5],
    ['layerNorm', () => kiln.layerNorm(x, [6], w, b, 1e-5), 1e-5],
    ['layerNorm', () => kiln.layerNorm(xt, [4]), 1e-5],
    ['rmsNorm', () => kiln.rmsNorm(x, [6], w), 1e-5],
    ['batchNorm', () => kiln.batchNorm(cl, mean, variance, rand([3], 8), rand([3], 9), false, 0.1, 1e-5), 1e-5],
    ['gelu', () => kiln.gelu(x), 1e-6],
    ['gelu', () => kiln.gelu(x, 'tanh'), 1e-6],
    ['sigmoid', () => kiln.sigmoid(x), 1e-6],
    ['silu', () => kiln.silu(x), 1e-6],
    ['softplus', () => kiln.softplus(x, 2, 3), 1e-6],
    ['addmm', () => kiln.addmm(b, x, rand([6, 6], 10), 0.5, 2), 1e-5],
    ['dropout', () => kiln.dropout(x, 0.3, false), 0],
    ['flip', () => kiln.flip(xt, [0, 1]), 0],
    ['flip', () => kiln.flip(cl, [1, 3]), 0],
    ['roll', () => kiln.roll(xt, [2, -1], [0, 1]), 0],
    ['roll', () => kiln.roll(x, 5), 0],
    ['repeat', () => kiln.repeat(xt, [2, 1, 3]), 0],
  ];
  const covered = new Set<string>();
  for (const [name, run, tol] of cases) {
    const want = run();
    const got = withoutCpuKernel(name, run);
    assert.deepEqual(got.shape, want.shape, `${name}: shape`);
    assert.deepEqual(got.strides, want.strides, `${name}: strides`);
    assert.equal(got.dtype, want.dtype, `${name}: dtype`);
    const g = got.toFlatArray();
    want.toFlatArray().forEach((v, i) => assert.ok(Math.abs(g[i]! - v) <= tol * Math.max(1, Math.abs(v)), `${name}[${i}]: ${g[i]} vs ${v}`));
    covered.add(name);
  }
  const untested = tableDecompositionNames().filter((n) => !covered.has(n));
  assert.deepEqual(untested, [], `table decompositions without an eager fallback case: ${untested.join(', ')}`);
});

test('where a decomposition does not apply, the fallback fails naming the op', () => {
  // Float32 only: a float16 softmax has no composition (it would round every intermediate).
  const h = rand([2, 3], 11).to('float16');
  assert.throws(() => withoutCpuKernel('softmax', () => kiln.softmax(h, -1)), /softmax: no kernel for this device, and its decomposition does not apply/);
  // Dropout in training mode is not the identity.
  assert.throws(() => withoutCpuKernel('dropout', () => kiln.dropout(rand([4], 12), 0.5, true)), /dropout: no kernel for this device/);
});
