/**
 * What kiln.compile sees (docs/compile-semantics.md): module state reached through a closure is
 * guarded (reassigned parameters, submodules, plain tensor properties, train/eval, module.to()),
 * in-place optimizer updates never recompile, captured constant tensors warn once, verify mode
 * names the first difference of a re-trace, and unsupported return values fail at trace time.
 * Results are checked against eager runs of the same function.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

const eagerOpts = { backend: 'eager' } as const;

function close(a: Tensor, b: Tensor, tol = 1e-5): void {
  assert.deepEqual(a.shape, b.shape);
  assert.equal(a.dtype, b.dtype);
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  x.forEach((v, i) => assert.ok(Math.abs(v - y[i]!) <= tol + tol * Math.abs(y[i]!), `[${i}]: ${v} vs ${y[i]}`));
}

function captureWarnings<T>(fn: () => T): { result: T; warnings: { text: string; code: string | undefined }[] } {
  const warnings: { text: string; code: string | undefined }[] = [];
  const orig = process.emitWarning;
  process.emitWarning = ((w: string | Error, o?: { code?: string }) => void warnings.push({ text: typeof w === 'string' ? w : w.message, code: o?.code })) as typeof process.emitWarning;
  try {
    return { result: fn(), warnings };
  } finally {
    process.emitWarning = orig;
  }
}

class Net extends kiln.nn.Module {
  fc = new kiln.nn.Linear(4, 3);
  drop = new kiln.nn.Dropout(0.5);
  forward(x: Tensor): Tensor {
    return this.drop.forward(this.fc.forward(x)).relu();
  }
}

test('a closure over a model (no modules option) is guarded: reassigned parameter, submodule, train/eval', () => {
  const net = new Net().eval();
  const x = rand([2, 4], 1);
  kiln.noGrad(() => {
    const f = kiln.compile((t: Tensor) => net.forward(t), eagerOpts);
    close(f(x), net.forward(x));
    net.fc.weight = new kiln.nn.Parameter(rand([3, 4], 2));
    close(f(x), net.forward(x));
    assert.equal(f.counters.recompiles, 1, 'a reassigned parameter of a closed-over module recompiles');
    net.fc = new kiln.nn.Linear(4, 3);
    close(f(x), net.forward(x));
    assert.equal(f.counters.recompiles, 2, 'a reassigned submodule recompiles');
    net.train();
    const y = f(x);
    assert.equal(f.counters.recompiles, 3, 'train() after eval() recompiles (dropout now active)');
    const zeros = y.toFlatArray().filter((v) => v === 0).length;
    assert.ok(zeros > 0, 'dropout in training mode zeroes elements');
    net.eval();
    close(f(x), net.forward(x));
  });
});

test('a plain tensor property of a closed-over module: reassigning it recompiles', () => {
  class Scaled extends kiln.nn.Module {
    scale = rand([4], 3);
    forward(x: Tensor): Tensor {
      return x.mul(this.scale);
    }
  }
  const m = new Scaled();
  const x = rand([2, 4], 4);
  const { result: f, warnings } = captureWarnings(() => {
    const f = kiln.compile((t: Tensor) => m.forward(t), eagerOpts);
    close(f(x), m.forward(x));
    return f;
  });
  assert.deepEqual(warnings, [], 'a tensor a module holds is module state, not a captured constant');
  m.scale = rand([4], 5);
  close(f(x), m.forward(x));
  assert.equal(f.counters.recompiles, 1);
});

test('module.to(dtype) on a compiled module recompiles (same Parameter objects, new dtype)', () => {
  const lin = new kiln.nn.Linear(4, 2);
  const f = kiln.compile(lin, eagerOpts);
  const x = rand([3, 4], 6);
  kiln.noGrad(() => {
    close(f(x), lin.forward(x));
    lin.to('float64');
    const x64 = x.to('float64');
    const y = f(x64);
    assert.equal(y.dtype, 'float64');
    close(y, lin.forward(x64), 1e-12);
    assert.equal(f.counters.recompiles, 1);
  });
});

test('a training loop with a compiled model and an optimizer never recompiles and matches eager training', () => {
  const make = () => {
    const m = new kiln.nn.Sequential(new kiln.nn.Linear(4, 8), new kiln.nn.Tanh(), new kiln.nn.Linear(8, 1));
    return m;
  };
  const a = make();
  const b = make();
  b.loadStateDict(a.stateDict());
  const x = rand([16, 4], 7);
  const target = rand([16, 1], 8);
  const compiled = kiln.compile(a);
  const optA = new kiln.optim.SGD([...a.parameters()], { lr: 0.1, momentum: 0.9 });
  const optB = new kiln.optim.SGD([...b.parameters()], { lr: 0.1, momentum: 0.9 });
  const losses: number[] = [];
  for (let step = 0; step < 6; step++) {
    optA.zeroGrad();
    const la = kiln.mean(kiln.pow(kiln.sub(compiled(x), target), 2));
    la.backward();
    optA.step();
    optB.zeroGrad();
    const lb = kiln.mean(kiln.pow(kiln.sub(b.forward(x), target), 2));
    lb.backward();
    optB.step();
    losses.push(la.item() as number);
    assert.ok(Math.abs((la.item() as number) - (lb.item() as number)) <= 1e-5, `step ${step}: ${la.item()} vs ${lb.item()}`);
  }
  assert.ok(losses[5]! < losses[0]!, `the loss went down: ${losses.join(', ')}`);
  assert.equal(compiled.counters.recompiles, 0);
  assert.equal(compiled.counters.traces, 2, 'one inference trace and one joint trace');
});

test('a captured constant tensor warns once, naming the tensor, the remedies and the switch', () => {
  const w = rand([4], 9);
  const { result, warnings } = captureWarnings(() => {
    const f = kiln.compile((t: Tensor) => t.mul(w), eagerOpts);
    f(rand([2, 4], 10));
    f(rand([3, 4], 11));
    return f;
  });
  assert.equal(result.counters.traces, 2);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0]!.code, 'KILN_CAPTURED_TENSOR');
  assert.match(warnings[0]!.text, /reads a tensor float32\[4\] at .*compile-semantics\.test\.js:\d+:\d+ that is neither an argument nor a parameter or buffer of a module/);
  assert.match(warnings[0]!.text, /Pass it as an argument/);
  assert.match(warnings[0]!.text, /capturedTensors: 'allow'/);
  const quiet = captureWarnings(() => kiln.compile((t: Tensor) => t.mul(w), { ...eagerOpts, capturedTensors: 'allow' })(rand([2, 4], 12)));
  assert.deepEqual(quiet.warnings, []);
  // Tensors the function creates while tracing, and parameters, are not captured constants.
  const p = new kiln.nn.Parameter(rand([4], 20));
  const own = captureWarnings(() => kiln.noGrad(() => kiln.compile((t: Tensor) => t.add(kiln.tensor([1, 2, 3, 4])).mul(p), eagerOpts)(rand([2, 4], 13))));
  assert.deepEqual(own.warnings, []);
  assert.throws(() => kiln.compile((t: Tensor) => t, { capturedTensors: 'error' as never }), /capturedTensors must be 'warn' or 'allow', got "error"/);
});

test('verify mode: a changed closed-over number is an error naming the node', () => {
  let k = 2;
  const f = kiln.compile((t: Tensor) => t.mul(k), { ...eagerOpts, verify: true });
  const x = rand([3], 14);
  close(f(x), x.mul(2));
  close(f(x), x.mul(2));
  k = 3;
  assert.throws(() => f(x), /^Error: kiln\.compile verify: call 3 of '<anonymous>' traced a different graph than the compiled one: node 0 was mul\(arg0, 2\) and is now mul\(arg0, 3\) — a closed-over value changed .*; pass it as an argument/);
});

test('verify mode: a reassigned closed-over tensor, another path, Math.random', () => {
  const x = rand([3], 15);
  let w = rand([3], 16);
  const f = kiln.compile((t: Tensor) => t.add(w), { ...eagerOpts, verify: true, capturedTensors: 'allow' });
  f(x);
  w = rand([3], 17);
  assert.throws(() => f(x), /call 2 of .* input 1 \(captured0<float32\[3\]>\) is not the tensor the program was built with: a closed-over tensor variable now holds another tensor; pass the tensor as an argument/);
  let relu = false;
  const g = kiln.compile((t: Tensor) => (relu ? t.relu().neg() : t.neg()), { ...eagerOpts, verify: true, name: 'g' });
  g(x);
  relu = true;
  assert.throws(() => g(x), /call 2 of 'g' .*: node 0 was neg\(arg0\) and is now relu\(arg0\)/);
  const r = kiln.compile((t: Tensor) => t.mul(Math.random()), { ...eagerOpts, verify: true, name: 'r' });
  r(x);
  assert.throws(() => r(x), /call 2 of 'r' .*node 0 was mul\(arg0, 0\.\d+\) and is now mul\(arg0, 0\.\d+\)/);
});

test('verify mode passes on stable functions, runs side effects every call, and is on with KILN_COMPILE_VERIFY=1', () => {
  let calls = 0;
  const lin = new kiln.nn.Linear(3, 2);
  const fn = (t: Tensor) => {
    calls++;
    return lin.forward(t).add(kiln.tensor([1, 2]));
  };
  const saved = process.env.KILN_COMPILE_VERIFY;
  process.env.KILN_COMPILE_VERIFY = '1';
  let f;
  try {
    f = kiln.compile(fn, eagerOpts);
  } finally {
    if (saved === undefined) delete process.env.KILN_COMPILE_VERIFY;
    else process.env.KILN_COMPILE_VERIFY = saved;
  }
  const x = rand([4, 3], 18);
  kiln.noGrad(() => {
    for (let i = 0; i < 3; i++) close(f(x), fn(x));
  });
  assert.equal(calls, 6, 'each verified call traces the function once (3 calls) plus 3 eager reference calls');
  assert.equal(f.counters.traces, 1);
  assert.equal(f.counters.fastHits, 0, 'verify mode takes no fast path');
});

test('returning a Map, a class instance with tensors or a Promise is a trace-time error', () => {
  const x = rand([2], 19);
  assert.throws(() => kiln.compile((t: Tensor) => new Map([['y', t.neg()]]), eagerOpts)(x), /^TypeError: kiln\.compile: the result is a Map holding traced tensors, which would come back as placeholders without data\. a compiled function may return tensors, numbers, strings, booleans, null or undefined, and arrays and plain objects of these/);
  class Out {
    constructor(readonly y: Tensor) {}
  }
  assert.throws(() => kiln.compile((t: Tensor) => ({ a: [new Out(t.neg())] }), eagerOpts)(x), /the result\.a\[0\] is an instance of Out holding traced tensors/);
  assert.throws(() => kiln.compile(async (t: Tensor) => t.neg(), eagerOpts)(x), /the result is a Promise \(an async function\?\): kiln\.compile traces synchronous code only/);
  // Objects without tensors are constants, as before.
  const d = kiln.compile((t: Tensor) => ({ y: t.neg(), tag: new Map([['k', 1]]) }), eagerOpts)(x);
  assert.equal(d.tag.get('k'), 1);
});
