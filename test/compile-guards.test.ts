/** Guards: what goes into the cache key, symbolic dims, and lifted-tensor / module guards. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import {
  captureLiftedGuards,
  checkLiftedGuards,
  computeArgGuards,
  describeGuardChange,
  layoutClass,
  sizeOnlyDiff,
  SymbolicDims,
} from '../src/compile/guards.js';
import { trace } from '../src/compile/capture.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { makeTensor, rand } from './helpers/make.js';

const none = new SymbolicDims();
const key = (...args: unknown[]): string => computeArgGuards(args, none).key;

test('tensor guards: dtype, rank, sizes, layout class with exact strides for other, requiresGrad', () => {
  const base = key(rand([2, 3], 1));
  assert.equal(key(rand([2, 3], 2)), base, 'values are not guarded');
  assert.notEqual(key(rand([2, 3], 1, 'contiguous', 'float16')), base);
  assert.notEqual(key(rand([2, 3, 1], 1)), base);
  assert.notEqual(key(rand([3, 2], 1)), base);
  const t = rand([2, 3], 1, 'transposed');
  assert.notEqual(key(t), base);
  assert.equal(layoutClass(t), `strides(${t.strides.join(',')})`);
  assert.match(key(t), /strides\(1,2\)/);
  const cl = makeTensor(new Array(2 * 3 * 4 * 5).fill(0), [2, 3, 4, 5], 'float32', 'channelsLast');
  assert.equal(layoutClass(cl), 'channelsLast');
  assert.equal(layoutClass(rand([2, 3, 4, 5], 1)), 'contiguous');
  const g = rand([2, 3], 1);
  g.requiresGrad = true;
  assert.notEqual(key(g), base);
  assert.match(key(g), /cpu/);
});

test('non-tensor leaves by value, containers by structure, objects by identity', () => {
  assert.equal(key(1, 'a', true, null), key(1, 'a', true, null));
  assert.notEqual(key(1), key(2));
  assert.notEqual(key(1), key('1'));
  assert.notEqual(key(0), key(-0));
  assert.notEqual(key(null), key(undefined));
  assert.notEqual(key(true), key(1));
  assert.notEqual(key([1, 2]), key([1, 2, 3]));
  assert.notEqual(key({ a: 1 }), key({ b: 1 }));
  assert.notEqual(key({ a: 1, b: 2 }), key({ b: 2, a: 1 }), 'key order is structure');
  const m1 = new kiln.nn.ReLU();
  const m2 = new kiln.nn.ReLU();
  assert.equal(key(m1), key(m1));
  assert.notEqual(key(m1), key(m2));
  assert.deepEqual(computeArgGuards([{ m: m1 }], none).modules, [m1]);
  assert.notEqual(key(rand([2], 1)), key(rand([2], 1), 1), 'argument count');
});

test('symbolic dims abstract sizes >= 2 only', () => {
  const sym = new SymbolicDims();
  sym.add('arg0', 0);
  const a = computeArgGuards([rand([4, 3], 1)], sym);
  const b = computeArgGuards([rand([9, 3], 1)], sym);
  assert.equal(a.key, b.key);
  assert.notEqual(a.concreteKey, b.concreteKey);
  assert.notEqual(computeArgGuards([rand([1, 3], 1)], sym).key, a.key, 'size 1 specialised');
  assert.notEqual(computeArgGuards([rand([4, 5], 1)], sym).key, a.key, 'dim 1 is not symbolic');
  const all = new SymbolicDims(true);
  assert.equal(computeArgGuards([{ x: rand([4, 3], 1) }], all).key, computeArgGuards([{ x: rand([7, 8], 1) }], all).key);
});

test('sizeOnlyDiff finds the dims that differ, and nothing else counts', () => {
  const g = (...a: unknown[]) => computeArgGuards(a, none).leaves;
  assert.deepEqual(sizeOnlyDiff(g(rand([4, 3], 1), 2), g(rand([8, 3], 1), 2)), [{ path: 'arg0', dim: 0 }]);
  assert.deepEqual(sizeOnlyDiff(g({ x: rand([4, 3], 1) }), g({ x: rand([4, 6], 1) })), [{ path: 'arg0.x', dim: 1 }]);
  assert.equal(sizeOnlyDiff(g(rand([4, 3], 1), 2), g(rand([8, 3], 1), 3)), null, 'a value differs too');
  assert.equal(sizeOnlyDiff(g(rand([4, 3], 1)), g(rand([1, 3], 1))), null, 'size 1');
  assert.equal(sizeOnlyDiff(g(rand([4, 3], 1)), g(rand([4, 3], 1, 'contiguous', 'float16'))), null, 'dtype');
  assert.equal(sizeOnlyDiff(g(rand([4, 3], 1)), g(rand([4, 3], 1))), null, 'nothing differs');
});

test('describeGuardChange names the first changed guard', () => {
  const g = (...a: unknown[]) => computeArgGuards(a, none).leaves;
  assert.equal(describeGuardChange(g(rand([4, 3], 1)), g(rand([4, 5], 1))), 'arg0: size of dim 1 3 -> 5');
  assert.equal(describeGuardChange(g(rand([4], 1)), g(rand([4], 1, 'contiguous', 'bfloat16'))), 'arg0: dtype float32 -> bfloat16');
  assert.equal(describeGuardChange(g(rand([4], 1), 'a'), g(rand([4], 1), 'b')), 'arg1: value "a" -> "b"');
  assert.match(describeGuardChange(g(rand([2, 3], 1)), g(rand([2, 3], 1, 'transposed'))), /arg0: layout contiguous -> strides/);
  assert.equal(describeGuardChange(undefined, g(1)), 'no cached entry');
});

test('lifted guards: disposal, requiresGrad, folded versions, replaced parameters, training mode', () => {
  const lin = new kiln.nn.Linear(3, 2);
  const c = rand([2], 3);
  const graph = trace((x: Tensor) => lin.forward(x).add(c), [rand([4, 3], 2)]).graph;
  const mk = () => captureLiftedGuards(graph, [{ tensor: c, version: c.storage.version }], [lin]);
  assert.equal(checkLiftedGuards(mk()), null);
  assert.equal(mk().lifted.length, 3);
  let g = mk();
  lin.weight.requiresGrad = false;
  assert.match(checkLiftedGuards(g)!, /requiresGrad/);
  lin.weight.requiresGrad = true;
  g = mk();
  kiln.noGrad(() => c.add_(1));
  assert.match(checkLiftedGuards(g)!, /folded/);
  g = mk();
  kiln.noGrad(() => lin.weight.mul_(2));
  assert.equal(checkLiftedGuards(g), null, 'parameter values are not guarded');
  lin.train(false);
  assert.match(checkLiftedGuards(g)!, /training mode/);
  g = mk();
  const old = lin.bias!;
  lin.bias = new kiln.nn.Parameter(rand([2], 4));
  assert.match(checkLiftedGuards(g)!, /Linear\.bias was replaced/);
  g = captureLiftedGuards(graph, [], []);
  old.dispose();
  assert.match(checkLiftedGuards(g)!, /disposed/);
});

test('compiled functions recompile on dtype and layout changes and stay correct', () => {
  const fn = (t: Tensor) => t.exp().sum([0]);
  const f = kiln.compile(fn, { backend: 'eager' });
  const inputs = [rand([3, 4], 1), rand([3, 4], 1, 'transposed'), rand([3, 4], 1, 'contiguous', 'float16'), rand([3, 4], 2)];
  for (const x of inputs) {
    const got = (f(x) as Tensor).toFlatArray();
    const want = fn(x).toFlatArray();
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-3 * (1 + Math.abs(want[i]!))));
  }
  assert.equal(f.counters.recompiles, 2);
  assert.equal(f.counters.cacheHits, 1);
});
