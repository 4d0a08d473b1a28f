/**
 * Partial graphs (issue #18 item 4a): a call that breaks the graph runs its segments between
 * breaks as compiled pieces. Compiled results equal eager ones; the counters show pieces run,
 * pieces compiled once (a second call compiles nothing), fullgraph still refusing the break,
 * and break-free functions never taking this path.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

function close(a: Tensor, b: Tensor, tol = 1e-5): void {
  assert.deepEqual(a.shape, b.shape);
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  x.forEach((v, i) => assert.ok(Math.abs(v - y[i]!) <= tol + tol * Math.abs(y[i]!), `[${i}]: ${v} vs ${y[i]}`));
}

function quietly<T>(fn: () => T): T {
  const orig = process.emitWarning;
  process.emitWarning = (() => {}) as typeof process.emitWarning;
  try {
    return fn();
  } finally {
    process.emitWarning = orig;
  }
}

const withNonzero = (x: Tensor): Tensor => {
  const a = x.mul(2).add(1).relu();
  const n = kiln.nonzero(a).shape[0]!;
  return a.sum().add(n);
};

const withItem = (x: Tensor): Tensor => {
  const s = x.mul(3).sum().item() as number;
  const y = s > 0 ? x.exp() : x.neg();
  return y.add(x.square()).mul(2);
};

// A value read on the host and passed to an op is a constant of the next piece.
const withScale = (x: Tensor): Tensor => {
  const s = x.abs().max().item() as number;
  return x.mul(s).add(1);
};

for (const backend of ['kiln', 'eager'] as const) {
  test(`${backend}: a nonzero break runs the code around it as compiled pieces, cached across calls`, () => {
    const f = kiln.compile(withNonzero, { backend });
    // Positive inputs: the nonzero count (a constant of the piece after the break) is the same.
    const x = rand([6, 5], 1, 'contiguous', 'float32', 0.1, 1);
    quietly(() => close(f(x), withNonzero(x)));
    assert.equal(f.counters.graphBreaks, 1);
    assert.ok(f.counters.pieces >= 1, `pieces ${f.counters.pieces}`);
    const { compiles, traces, pieces } = f.counters;
    assert.ok(compiles >= 1);
    const y = rand([6, 5], 2, 'contiguous', 'float32', 0.1, 1);
    close(f(y), withNonzero(y));
    assert.equal(f.counters.compiles, compiles, 'the second call compiles nothing');
    assert.equal(f.counters.traces, traces, 'nor traces');
    assert.equal(f.counters.pieces, 2 * pieces, 'it runs the same pieces');
    assert.equal(f.counters.graphBreaks, 1);
  });

  test(`${backend}: an item() read in the middle splits the call in two pieces`, () => {
    const f = kiln.compile(withItem, { backend });
    const x = rand([4, 3], 3, 'contiguous', 'float32', 0.1, 1);
    quietly(() => close(f(x), withItem(x), 1e-4));
    assert.equal(f.counters.pieces, 2, 'before and after the read');
    const compiles = f.counters.compiles;
    assert.equal(compiles, 2);
    const y = rand([4, 3], 4, 'contiguous', 'float32', 0.1, 1);
    close(f(y), withItem(y), 1e-4);
    assert.equal(f.counters.compiles, compiles);
    // The other branch records a different second segment: one more piece compiled.
    const z = rand([4, 3], 5, 'contiguous', 'float32', -1, -0.1);
    close(f(z), withItem(z), 1e-4);
    assert.equal(f.counters.compiles, compiles + 1);
    assert.equal(f.counters.pieces, 6);
  });

  test(`${backend}: a host value used as an op argument makes one piece per value`, () => {
    const f = kiln.compile(withScale, { backend });
    const x = rand([5], 11);
    quietly(() => close(f(x), withScale(x)));
    const compiles = f.counters.compiles;
    close(f(x), withScale(x));
    assert.equal(f.counters.compiles, compiles, 'the same value: no compile');
    const y = rand([5], 12);
    close(f(y), withScale(y));
    assert.equal(f.counters.compiles, compiles + 1, 'another value: the piece after the read is built again');
  });
}

test('fullgraph: true still makes the break an error', () => {
  const f = kiln.compile(withNonzero, { fullgraph: true });
  assert.throws(() => f(rand([3, 3], 6)), /graph break in 'withNonzero' with fullgraph: true/);
  assert.equal(f.counters.pieces, 0);
});

test('a break-free function runs one program and no pieces', () => {
  const fn = (x: Tensor): Tensor => x.mul(2).add(1).relu().sum();
  const f = kiln.compile(fn);
  const x = rand([5], 7);
  close(f(x), fn(x));
  close(f(x), fn(x));
  assert.equal(f.counters.pieces, 0);
  assert.equal(f.counters.graphBreaks, 0);
  assert.equal(f.counters.eagerCalls, 0);
});

test('grad: ops on tensors that require grad run eagerly, so gradients match eager', () => {
  const fn = (x: Tensor, w: Tensor): Tensor => {
    const h = x.mul(w).tanh();
    const k = kiln.nonzero(h.gt(0)).shape[0]!;
    return h.sum().mul(k);
  };
  const f = kiln.compile(fn);
  const x = rand([4], 8);
  const w1 = rand([4], 9).requiresGrad_();
  const w2 = rand([4], 9).requiresGrad_();
  const got = quietly(() => f(x, w1));
  const want = fn(x, w2);
  close(got, want);
  got.backward();
  want.backward();
  close(w1.grad!, w2.grad!);
});

test('in-place writes to real tensors after a break and disposed lazy values stay correct', () => {
  const fn = (x: Tensor, acc: Tensor): Tensor => {
    const a = x.add(1);
    const tmp = a.mul(5);
    tmp.dispose();
    const m = a.max().item() as number;
    acc.add_(a.mul(m));
    const b = a.sub(m);
    b.mul_(2);
    return b.add(acc);
  };
  const f = kiln.compile(fn);
  const x = rand([3, 2], 10);
  const acc1 = kiln.zeros([3, 2]);
  const acc2 = kiln.zeros([3, 2]);
  const got = quietly(() => f(x, acc1));
  close(got, fn(x, acc2));
  close(acc1, acc2);
  assert.ok(f.counters.pieces >= 2);
});

test("a piece keeps the composites its target renders whole (nativeComposites), as a whole graph does", async () => {
  const { PieceCache } = await import('../src/compile/pieces.js');
  const { getBackend } = await import('../src/compile/backend.js');
  const x = rand([5, 7]);
  const fn = (t: Tensor): Tensor => kiln.sigmoid(t.mul(2)).add(1);
  const want = fn(x);
  for (const keep of [new Set(['sigmoid']), undefined]) {
    const compiled: string[][] = [];
    const cache = new PieceCache({
      passOptions: { decompose: true },
      keepComposites: () => keep,
      compile: (graph) => {
        compiled.push(graph.nodes.map((n) => n.op));
        return getBackend('kiln').compile(graph, { mode: 'default', logCode: false });
      },
      onPiece: () => {},
    });
    close(cache.call(fn as (...args: never[]) => unknown, [x]) as Tensor, want);
    assert.equal(compiled.length, 1);
    // Kept whole where the target says so; decomposed (no sigmoid node left) where it keeps nothing.
    assert.equal(compiled[0]!.includes('sigmoid'), keep !== undefined, compiled[0]!.join(' '));
  }
});
