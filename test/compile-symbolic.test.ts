/**
 * Symbolic sizes (src/compile/symbolic.ts): sizes derived from a dynamic dim (view/reshape sizes,
 * arange lengths, narrow lengths, expand sizes) become expressions of the dim, so one program
 * serves every size. Compiled results must equal eager at every size, including sizes never seen,
 * 2 (the smallest symbolic size) and 1 (specialised); code that branches on the size, or whose
 * sizes are not affine in it, must still be right (a new trace that does not match the generalised
 * graph gets a program of its own).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { generalize, instantiate, matchGeneralized } from '../src/compile/symbolic.js';
import { formatGraph, type Graph } from '../src/compile/ir.js';
import { trace } from '../src/compile/capture.js';
import { graphSignature, runPasses } from '../src/compile/passes/index.js';

const seq = (T: number, C = 8, seed = 1): Tensor => kiln.tensor(Array.from({ length: T * C }, (_, i) => Math.sin(i * 0.37 + seed))).reshape([1, T, C]);

/** Every length, compiled vs eager (the same ops run both ways: equality up to float rounding). */
function check(f: (...a: never[]) => unknown, g: (x: Tensor) => Tensor, lengths: readonly number[], C = 8): void {
  for (const T of lengths) {
    const x = seq(T, C, T);
    const got = (f as unknown as (x: Tensor) => Tensor)(x).toFlatArray();
    const want = g(x).toFlatArray();
    assert.equal(got.length, want.length, `T=${T}: ${got.length} vs ${want.length} elements`);
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-5 * (1 + Math.abs(want[i]!)), `T=${T} [${i}]: ${v} vs ${want[i]}`));
  }
}

// Sizes derived from T: a split into heads, a position ramp of length T, a narrow of a kept table,
// a broadcast by expand, and the merge back.
const table = kiln.tensor(Array.from({ length: 64 * 8 }, (_, i) => Math.cos(i * 0.11))).reshape([64, 8]);
function block(x: Tensor): Tensor {
  const [B, T, C] = x.shape as [number, number, number];
  const heads = x.view([B, T, 2, C / 2]).transpose(1, 2);
  const pos = kiln.arange(T, { dtype: 'float32' }).view([1, 1, T, 1]).expand([B, 2, T, C / 2]);
  const rows = table.narrow(0, 0, T).view([1, T, 2, C / 2]).transpose(1, 2);
  const y = heads.mul(rows).add(pos.mul(0.01)).softmax(-1);
  return y.transpose(1, 2).reshape([B, T, C]).add(x);
}

for (const backend of ['kiln', 'eager'] as const) {
  test(`${backend} backend: one symbolic program serves every length (sizes derived from T are symbolic)`, () => {
    const f = kiln.compile(block, { backend, capturedTensors: 'allow' });
    check(f, block, [4, 6, 9, 13, 2, 31, 6]);
    assert.deepEqual(f.symbolicDims(), ['arg0#1']);
    assert.equal(f.counters.recompiles, 1, 'one recompile (the first change)');
    assert.equal(f.counters.compiles, 2, 'the static program (T=4) and one symbolic program for every later length');
    check(f, block, [1]);
    assert.equal(f.counters.compiles, 3, 'size 1 is specialised (as torch.compile does): a program of its own');
  });
}

test('generalize: the sizes that follow T become expressions of it; matchGeneralized accepts a new length and refuses a different graph', () => {
  const dims = (i: number): ReadonlySet<number> => (i === 0 ? new Set([1]) : new Set());
  const at = (T: number, fn: (x: Tensor) => Tensor = block): Graph => runPasses(trace(fn, [seq(T)]).graph, { symbolicSizes: true }).graph;
  const base = at(5);
  const gen = generalize(base, [at(6)], [{ input: 0, dim: 1 }], dims);
  assert.ok(gen, 'generalised');
  const text = formatGraph(gen);
  // view([1, T, 2, 4]): T is s(%0.1); arange(T) and narrow(table, 0, 0, T) read it too.
  assert.match(text, /view\(%\d+, \[1, s\(%0\.1\), 2, 4\]\)/);
  assert.match(text, /arange\(0, s\(%0\.1\), 1,/);
  assert.match(text, /narrow\(%\d+, 0, 0, s\(%0\.1\)\)/);
  // Instantiated at the inputs of a trace at T=9, it is that trace.
  const nine = at(9);
  assert.equal(graphSignature(instantiate(gen, (i) => nine.values.get(nine.inputs[i]!.id)!.shape), dims), graphSignature(nine, dims));
  assert.ok(matchGeneralized(gen, nine, dims));
  // A graph that differs beyond sizes is not matched.
  assert.equal(matchGeneralized(gen, at(9, (x) => block(x).mul(2)), dims), null);
});

test('code that branches on the length, and sizes not affine in it, stay right at every length', () => {
  // Even lengths scale by 2, odd by 3: the probe (T + 1) sees the other branch, so nothing is
  // generalised and each length has its own program; numbers match eager either way.
  const branchy = (x: Tensor): Tensor => (x.shape[1]! % 2 === 0 ? x.mul(2) : x.mul(3)).reshape([x.shape[1]! * 8]);
  const f = kiln.compile(branchy);
  check(f, branchy, [4, 5, 6, 7, 8, 2]);
  // T*T elements: a size quadratic in T (fitted as affine at one size, so the next size's trace does
  // not match and gets its own program).
  const square = (x: Tensor): Tensor => {
    const T = x.shape[1]!;
    const s = x.sum(-1).view([T, 1]).expand([T, T]);
    return s.reshape([T * T]).add(kiln.arange(T * T, { dtype: 'float32' }));
  };
  const g = kiln.compile(square);
  check(g, square, [3, 4, 5, 6, 3, 2]);
});

test('dynamic: true with two symbolic dims (batch and length), including their product', () => {
  const flat = (x: Tensor): Tensor => {
    const [B, T, C] = x.shape as [number, number, number];
    return x.reshape([B * T, C]).softmax(-1).reshape([B, T, C]).narrow(1, 0, T - 1);
  };
  const f = kiln.compile(flat, { dynamic: true });
  for (const [B, T] of [
    [2, 3],
    [2, 5],
    [3, 5],
    [4, 7],
    [2, 3],
  ] as const) {
    const x = kiln.tensor(Array.from({ length: B * T * 4 }, (_, i) => Math.sin(i + B + T))).reshape([B, T, 4]);
    const got = f(x).toFlatArray();
    const want = flat(x).toFlatArray();
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-6, `[${B}, ${T}] [${i}]: ${v} vs ${want[i]}`));
  }
});
