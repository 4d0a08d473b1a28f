/**
 * kiln.compile end to end on the 'eager' backend (and a small counting backend): compiled results
 * match eager runs; caching, recompilation, dynamic shapes, graph breaks, grad mode and logs
 * behave as documented, checked through the counters.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { registerBackend, listBackends } from '../src/compile/backend.js';
import { interpret } from '../src/compile/interpret.js';
import type { Graph } from '../src/compile/ir.js';
import { setLogSink, type LogArtifact } from '../src/compile/log.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

function flat(x: unknown): Tensor[] {
  if (x instanceof kiln.Tensor) return [x];
  if (Array.isArray(x)) return x.flatMap(flat);
  if (x !== null && typeof x === 'object') return Object.values(x).flatMap(flat);
  return [];
}

/** Same structure (non-tensor leaves equal), tensors close pointwise. */
function assertSame(a: unknown, b: unknown, tol = 1e-5): void {
  const shape = (x: unknown): unknown =>
    x instanceof kiln.Tensor ? `T${x.dtype}[${x.shape.join(',')}]` : Array.isArray(x) ? x.map(shape) : x !== null && typeof x === 'object' ? Object.fromEntries(Object.entries(x).map(([k, v]) => [k, shape(v)])) : x;
  assert.deepEqual(shape(a), shape(b));
  const ta = flat(a);
  const tb = flat(b);
  ta.forEach((t, k) => {
    const x = t.toFlatArray();
    const y = tb[k]!.toFlatArray();
    for (let i = 0; i < x.length; i++) {
      assert.ok(Math.abs(x[i]! - y[i]!) <= tol + tol * Math.abs(y[i]!), `tensor ${k}[${i}]: ${x[i]} vs ${y[i]}`);
    }
  });
}

/** Captures process warnings synchronously. */
function captureWarnings<T>(fn: () => T): { result: T; warnings: string[] } {
  const warnings: string[] = [];
  const orig = process.emitWarning;
  process.emitWarning = ((w: string | Error) => void warnings.push(typeof w === 'string' ? w : w.message)) as typeof process.emitWarning;
  try {
    return { result: fn(), warnings };
  } finally {
    process.emitWarning = orig;
  }
}

const eagerOpts = { backend: 'eager' } as const;

test('stacked Linears: compiled module and closure match eager, second call hits the cache', () => {
  const model = new kiln.nn.Sequential(new kiln.nn.Linear(8, 16), new kiln.nn.ReLU(), new kiln.nn.Linear(16, 16), new kiln.nn.GELU(), new kiln.nn.Linear(16, 4));
  const x = rand([5, 8], 1);
  kiln.noGrad(() => {
    const want = model.forward(x);
    const f = kiln.compile(model, eagerOpts);
    assertSame(f(x), want, 1e-4);
    assertSame(f(x), want, 1e-4);
    assert.equal(f.counters.traces, 1);
    assert.equal(f.counters.compiles, 1);
    assert.equal(f.counters.cacheHits, 1);
    const g = kiln.compile((t: Tensor) => model.forward(t), { ...eagerOpts, passes: { decompose: true } });
    assertSame(g(x), want, 1e-4);
  });
});

test('LayerNorm and RMSNorm models, with and without decompositions', () => {
  const ln = new kiln.nn.LayerNorm(12);
  const rms = new kiln.nn.RMSNorm([12], 1e-6);
  kiln.noGrad(() => {
    ln.weight!.copy_(rand([12], 2));
    ln.bias!.copy_(rand([12], 3));
    rms.weight!.copy_(rand([12], 4));
    const lin = new kiln.nn.Linear(12, 12);
    const fn = (t: Tensor) => rms.forward(lin.forward(ln.forward(t)).add(t));
    const x = rand([3, 7, 12], 5);
    const want = fn(x);
    for (const decompose of [false, true]) {
      const f = kiln.compile(fn, { ...eagerOpts, passes: { decompose } });
      assertSame(f(x), want, 1e-4);
    }
  });
});

test('reductions and softmax', () => {
  const fn = (t: Tensor) => ({
    sum: t.sum([1]),
    mean: t.mean([0], true),
    amax: t.amax([1]),
    lse: kiln.logsumexp(t, [1]),
    var: t.var([1]),
    all: t.sum(),
    sm: kiln.softmax(t, -1),
    lsm: kiln.logSoftmax(t, 0),
  });
  const x = rand([6, 10], 6);
  for (const decompose of [false, true]) {
    const f = kiln.compile(fn, { ...eagerOpts, passes: { decompose } });
    assertSame(f(x), fn(x), 1e-4);
  }
});

test('nested objects, arrays and numbers in arguments and results', () => {
  const fn = (inp: { a: Tensor; list: Tensor[]; scale: number }, tag: string) => ({
    tag,
    n: 3,
    parts: [inp.a.mul(inp.scale), { b: inp.list[0]!.add(inp.list[1]!), none: null }],
    total: inp.a.sum(),
  });
  const f = kiln.compile(fn, eagerOpts);
  const a = rand([2, 3], 7);
  const l0 = rand([4], 8);
  const l1 = rand([4], 9);
  assertSame(f({ a, list: [l0, l1], scale: 2 }, 'x'), fn({ a, list: [l0, l1], scale: 2 }, 'x'));
  // A different number is a different guard.
  assertSame(f({ a, list: [l0, l1], scale: 3 }, 'x'), fn({ a, list: [l0, l1], scale: 3 }, 'x'));
  assert.equal(f.counters.compiles, 2);
  assert.equal(f.counters.recompiles, 1);
  assertSame(f({ a, list: [l0, l1], scale: 2 }, 'x'), fn({ a, list: [l0, l1], scale: 2 }, 'x'));
  assert.equal(f.counters.cacheHits, 1);
});

test('module parameters are lifted: replacing one recompiles, writing values in place does not', () => {
  const lin = new kiln.nn.Linear(4, 3);
  const x = rand([2, 4], 10);
  kiln.noGrad(() => {
    const f = kiln.compile((t: Tensor) => lin.forward(t).relu(), { ...eagerOpts, modules: [lin] });
    assertSame(f(x), lin.forward(x).relu());
    // In-place update of the values: no recompile, new values used.
    lin.weight.mul_(-2);
    lin.bias!.add_(0.5);
    assertSame(f(x), lin.forward(x).relu());
    assert.equal(f.counters.compiles, 1);
    assert.equal(f.counters.recompiles, 0);
    // Replacing the Parameter object: recompiles.
    lin.weight = new kiln.nn.Parameter(rand([3, 4], 11));
    assertSame(f(x), lin.forward(x).relu());
    assert.equal(f.counters.recompiles, 1);
    assert.equal(f.counters.traces, 2);
    // Same structure: the backend program (parameters are run-time inputs) is reused.
    assert.equal(f.counters.compiles, 1);
    // Compiling the module itself guards it the same way, train/eval included.
    const m = kiln.compile(lin, eagerOpts);
    m(x);
    lin.bias = new kiln.nn.Parameter(rand([3], 12));
    assertSame(m(x), lin.forward(x));
    lin.eval();
    m(x);
    assert.equal(m.counters.recompiles, 2);
  });
});

test('closed-over constants are folded and guarded by version', () => {
  const c = rand([4], 13);
  const fn = (t: Tensor) => t.add(c.exp());
  const f = kiln.compile(fn, eagerOpts);
  const x = rand([3, 4], 14);
  assertSame(f(x), fn(x));
  kiln.noGrad(() => c.mul_(2));
  assertSame(f(x), fn(x)); // the folded exp(c) is stale: the version guard recompiles
  assert.equal(f.counters.recompiles, 1);
});

test('automatic dynamic: batch 16/32/64 compiles the backend program once after the dim turns symbolic', () => {
  const lin = new kiln.nn.Linear(8, 8);
  const fn = (t: Tensor) => kiln.softmax(lin.forward(t).relu(), -1).sum([1]);
  kiln.noGrad(() => {
    const f = kiln.compile(fn, eagerOpts);
    for (const b of [16, 32, 64, 32, 48, 16]) {
      const x = rand([b, 8], b);
      assertSame(f(x), fn(x), 1e-5);
    }
    // 16: first compile. 32: miss on the batch size only -> dim 0 symbolic, one recompile and
    // one program for the symbolic graph. 64, 48 and 16: new shapes under the symbolic entry
    // (re-traced, program reused). 32 again: cache hit.
    assert.deepEqual(f.symbolicDims(), ['arg0#0']);
    assert.equal(f.counters.compiles, 2);
    assert.equal(f.counters.recompiles, 1);
    assert.equal(f.counters.traces, 5);
    assert.equal(f.counters.cacheHits, 1);
    // A change in a non-symbolic dim is a normal recompile.
    assert.throws(() => f(rand([16, 9], 1)), /linear/);
  });
});

test('dynamic: true treats every dim as symbolic from the first call', () => {
  const fn = (t: Tensor) => t.mul(2).sum([-1]);
  const f = kiln.compile(fn, { ...eagerOpts, dynamic: true });
  for (const shape of [
    [4, 5],
    [6, 7],
    [9, 2],
    [6, 7],
  ]) {
    const x = rand(shape, shape[0]!);
    assertSame(f(x), fn(x));
  }
  assert.deepEqual(f.symbolicDims(), ['*']);
  assert.equal(f.counters.compiles, 1);
  assert.equal(f.counters.recompiles, 0);
  assert.equal(f.counters.cacheHits, 1);
  // Size 1 stays specialised: its own entry.
  f(rand([1, 7], 3));
  assert.equal(f.counters.recompiles, 1);
  // dynamic: false never generalises.
  const s = kiln.compile(fn, { ...eagerOpts, dynamic: false });
  for (const b of [4, 5, 6]) s(rand([b, 3], b));
  assert.equal(s.counters.compiles, 3);
  assert.deepEqual(s.symbolicDims(), []);
});

test('recompile limit: falls back to eager with one warning naming the function and the guard', () => {
  function scaleBy(t: Tensor, k: number): Tensor {
    return t.mul(k);
  }
  const f = kiln.compile(scaleBy, { ...eagerOpts, recompileLimit: 3 });
  const x = rand([3], 15);
  const { warnings } = captureWarnings(() => {
    for (let k = 1; k <= 8; k++) assertSame(f(x, k), x.mul(k));
  });
  assert.equal(f.counters.compiles, 4);
  assert.equal(f.counters.recompiles, 3);
  assert.equal(f.counters.fallbacks, 4);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /scaleBy/);
  assert.match(warnings[0]!, /recompile limit \(3\)/);
  assert.match(warnings[0]!, /arg1: value 4 -> 5/);
  // Cached guard sets still run compiled.
  f(x, 2);
  assert.equal(f.counters.cacheHits, 1);
});

let breakLine = 0;
function lineOf(e: Error): number {
  const m = /compile-api\.test\.js:(\d+):\d+/.exec(e.stack ?? '');
  return Number(m?.[1]);
}
function dataDependent(t: Tensor): Tensor {
  let probe = new Error();
  const s = ((probe = new Error()), t.sum().item() as number);
  breakLine = lineOf(probe);
  return s > 0 ? t.mul(2) : t.neg();
}

test('graph break without fullgraph: compiled pieces around the break, one warning, guard set remembered as broken', () => {
  const f = kiln.compile(dataDependent, eagerOpts);
  const x = rand([4], 16, 'contiguous', 'float32', 0.1, 1);
  const { warnings } = captureWarnings(() => {
    assertSame(f(x), dataDependent(x));
    assertSame(f(x), dataDependent(x));
    const y = rand([5], 17);
    assertSame(f(y), dataDependent(y));
  });
  assert.equal(warnings.length, 1, 'warned once per function');
  assert.match(warnings[0]!, /graph break in 'dataDependent'/);
  assert.match(warnings[0]!, /reading the values of a traced tensor/);
  assert.equal(f.counters.graphBreaks, 2, 'one break per traced guard set');
  assert.equal(f.counters.traces, 2, 'the repeated guard set was not traced again');
  assert.equal(f.counters.eagerCalls, 3);
  // Partial graphs: per shape, a piece before the item() read and one after it, built once.
  assert.equal(f.counters.pieces, 6);
  assert.equal(f.counters.compiles, 4);
});

test('graph break with fullgraph: the error names the reason and the user file:line', () => {
  const f = kiln.compile(dataDependent, { ...eagerOpts, fullgraph: true });
  let err: unknown;
  try {
    f(rand([4], 18));
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof Error);
  assert.ok(breakLine > 0);
  assert.match(err.message, /graph break in 'dataDependent' with fullgraph: true/);
  assert.match(err.message, /reading the values of a traced tensor/);
  assert.match(err.message, new RegExp(`compile-api\\.test\\.js:${breakLine}:\\d+`));
});

test('grad mode: inputs or parameters requiring grad run the compiled forward+backward; noGrad runs the inference program', () => {
  const lin = new kiln.nn.Linear(3, 2);
  const fn = (t: Tensor) => lin.forward(t).sum();
  const f = kiln.compile(fn, eagerOpts);
  const x = rand([4, 3], 19);
  const y = f(x);
  assert.ok(y.requiresGrad, 'the compiled result is linked to autograd');
  assert.equal(f.counters.fallbacks, 0);
  assert.equal(f.counters.compiles, 2, 'forward and backward programs');
  y.backward();
  assert.equal(f.counters.backwards, 1);
  const xg = rand([4, 3], 20);
  xg.requiresGrad = true;
  const g = kiln.compile((t: Tensor) => t.mul(t).sum(), eagerOpts);
  assert.ok(g(xg).requiresGrad);
  assert.equal(g.counters.fallbacks, 0);
  assert.equal(g.counters.traces, 2, 'the guard trace and the joint trace');
  kiln.noGrad(() => {
    assertSame(f(x), fn(x), 1e-5);
    assertSame(g(xg), xg.mul(xg).sum(), 1e-5);
  });
  assert.equal(f.counters.compiles, 3);
  assert.equal(f.counters.traces, 2, 'the trace made under grad mode is reused');
  assert.equal(g.counters.compiles, 3);
});

test('global counters, reset, and unknown backend/mode errors', () => {
  kiln.resetCompileCounters();
  const f = kiln.compile((t: Tensor) => t.add(1), eagerOpts);
  f(rand([2], 21));
  f(rand([2], 22));
  const c = kiln.compileCounters();
  assert.equal(c.compiles, 1);
  assert.equal(c.cacheHits, 1);
  assert.equal(c.calls, 2);
  kiln.resetCompileCounters();
  assert.equal(kiln.compileCounters().compiles, 0);
  assert.equal(f.counters.compiles, 1, 'per-function counters are separate');
  assert.throws(() => kiln.compile((t: Tensor) => t, { backend: 'nope' }), /unknown backend 'nope'/);
  assert.throws(() => kiln.compile((t: Tensor) => t, { mode: 'fast' as never }), /unknown mode 'fast'/);
  assert.ok(listBackends().includes('kiln'), "the code-generating backend 'kiln' is registered and is the default");
  const d = kiln.compile((t: Tensor) => t.neg());
  d(rand([2], 23));
  assert.equal(d.counters.compiles, 1);
});

test('log option prints the graph and the output code', () => {
  const seen: [LogArtifact, string][] = [];
  const prev = setLogSink((a, t) => void seen.push([a, t]));
  try {
    const f = kiln.compile((t: Tensor) => t.exp().add(1), { ...eagerOpts, log: ['graph', 'output_code'] });
    f(rand([3], 24));
  } finally {
    setLogSink(prev);
  }
  const graphs = seen.filter(([a]) => a === 'graph').map(([, t]) => t);
  assert.ok(graphs.some((t) => /captured graph/.test(t) && /= exp\(%0\)/.test(t) && /input %0: float32\[3\]/.test(t)));
  const code = seen.filter(([a]) => a === 'output_code').map(([, t]) => t);
  assert.equal(code.length, 1);
  assert.match(code[0]!, /eager backend/);
});

test('a custom backend gets decomposed graphs, one program per structure, and inputs with varying sizes', () => {
  const compiled: Graph[] = [];
  const seenShapes: number[][] = [];
  registerBackend({
    name: 'test-recording',
    compile(graph) {
      compiled.push(graph);
      return {
        run(inputs) {
          seenShapes.push([...inputs[0]!.shape]);
          return interpret(graph, inputs);
        },
        kernelCount: 0,
        describe: () => 'recording',
      };
    },
  });
  const fn = (t: Tensor) => kiln.layerNorm(t, [6]).mul(kiln.sigmoid(t));
  const f = kiln.compile(fn, { backend: 'test-recording', dynamic: true, mode: 'max-autotune' });
  for (const b of [3, 5, 7]) {
    const x = rand([b, 6], b);
    assertSame(f(x), fn(x), 1e-4);
  }
  assert.equal(compiled.length, 1);
  assert.ok(!compiled[0]!.nodes.some((n) => n.op === 'layerNorm' || n.op === 'sigmoid'), 'decomposed for code generation');
  assert.deepEqual(seenShapes, [
    [3, 6],
    [5, 6],
    [7, 6],
  ]);
});

test('KILN_LOG=graph,output_code (read from the environment) prints the graph and the program', () => {
  const index = new URL('../src/index.js', import.meta.url).href;
  const script = `import * as kiln from '${index}';
const f = kiln.compile((t) => t.mul(3).sum(), { backend: 'eager' });
f(kiln.ones([2, 2]));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, KILN_LOG: 'graph,output_code' }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /\[kiln\.compile:graph\]/);
  assert.match(r.stderr, /= mul\(%0, 3\)/);
  assert.match(r.stderr, /\[kiln\.compile:output_code\][\s\S]*eager backend/);
  const quiet = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, KILN_LOG: '' }, encoding: 'utf8' });
  assert.doesNotMatch(quiet.stderr, /kiln\.compile/);
});

test('a user error while tracing propagates and leaves no entry behind', () => {
  const f = kiln.compile((a: Tensor, b: Tensor) => a.matmul(b), eagerOpts);
  const x = rand([2, 3], 1);
  assert.throws(() => f(x, rand([4, 2], 2)), /matmul/);
  assert.throws(() => f(x, rand([4, 2], 2)), /matmul/);
  assertSame(f(x, rand([3, 2], 3)), x.matmul(rand([3, 2], 3)));
  assert.equal(f.counters.compiles, 1);
  assert.deepEqual(f.symbolicDims(), []);
});
