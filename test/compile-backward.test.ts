/**
 * Compiled backward (kiln.compile with inputs or parameters that require grad): the joint
 * forward+backward is traced, partitioned and compiled by the `kiln` backend, and `.backward()`
 * through a compiled call must fill every leaf's .grad as eager autograd does. The reference is
 * always eager Kiln on the same tensors (grads reset in between), plus the counters that show the
 * compiled path (not an eager fallback) ran.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { defineOp, registerKernel } from '../src/ops/registry.js';
import { dispatch } from '../src/ops/dispatch.js';
import { defineBackward } from '../src/autograd/graph.js';
import { mapUnary } from '../src/kernels/cpu/pointwise-loop.js';
import type { TensorMeta } from '../src/tensor/tensor.js';
import { rand } from './helpers/make.js';

const F = kiln.nn.functional;
const TOL = 1e-4;

function param(shape: number[], seed: number, lo = -1, hi = 1): Tensor {
  return rand(shape, seed, 'contiguous', 'float32', lo, hi).requiresGrad_();
}

/** Runs `loss().backward()` from cleared grads and returns a copy of every leaf's .grad. */
function gradsOf(leaves: readonly Tensor[], loss: () => Tensor): { value: number; grads: (number[] | null)[] } {
  for (const t of leaves) t.grad = null;
  const l = loss();
  l.backward();
  return { value: l.item() as number, grads: leaves.map((t) => (t.grad ? t.grad.toFlatArray() : null)) };
}

function assertClose(a: readonly number[], b: readonly number[], what: string, tol = TOL): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) {
    assert.ok(Math.abs(a[i]! - b[i]!) <= tol + tol * Math.abs(b[i]!), `${what}[${i}]: compiled ${a[i]} vs eager ${b[i]}`);
  }
}

/** Compiled vs eager: the loss value and the gradient of every leaf (null where eager has none). */
function assertGradParity(leaves: readonly Tensor[], names: readonly string[], compiled: () => Tensor, eager: () => Tensor): void {
  const c = gradsOf(leaves, compiled);
  const e = gradsOf(leaves, eager);
  assertClose([c.value], [e.value], 'loss');
  e.grads.forEach((g, i) => {
    if (g === null) assert.equal(c.grads[i], null, `${names[i]}: eager has no grad`);
    else {
      assert.ok(c.grads[i], `${names[i]}: compiled backward gave no grad`);
      assertClose(c.grads[i]!, g, names[i]!);
    }
  });
}

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

class Mlp {
  readonly w1 = param([16, 8], 1, -0.5, 0.5);
  readonly b1 = param([16], 2, -0.1, 0.1);
  readonly lnw = param([16], 3, 0.5, 1.5);
  readonly lnb = param([16], 4, -0.2, 0.2);
  readonly w2 = param([4, 16], 5, -0.5, 0.5);
  readonly b2 = param([4], 6, -0.1, 0.1);
  get params(): Tensor[] {
    return [this.w1, this.b1, this.lnw, this.lnb, this.w2, this.b2];
  }
  forward(x: Tensor): Tensor {
    const h = F.linear(x, this.w1, this.b1);
    const n = kiln.layerNorm(h, [16], this.lnw, this.lnb, 1e-5);
    return F.linear(F.gelu(n), this.w2, this.b2);
  }
}

test('multi-kernel backward: Linear -> LayerNorm -> GELU -> Linear, sum and mean losses match eager', () => {
  const m = new Mlp();
  const x = param([6, 8], 7, -2, 2);
  const leaves = [x, ...m.params];
  const names = ['x', 'w1', 'b1', 'lnw', 'lnb', 'w2', 'b2'];
  for (const reduce of ['sum', 'mean'] as const) {
    const fn = (t: Tensor): Tensor => (reduce === 'sum' ? m.forward(t).sum() : m.forward(t).mean());
    const f = kiln.compile(fn, { backend: 'kiln' });
    assertGradParity(leaves, names, () => f(x), () => fn(x));
    assert.equal(f.counters.fallbacks, 0);
    assert.equal(f.counters.eagerCalls, 0);
    assert.equal(f.counters.backwards, 1, 'the compiled backward ran');
    const [joint] = f.programs().joint;
    assert.ok(joint, 'a joint program was compiled');
    assert.ok(joint.backward.kernelCount > 1, `backward has ${joint.backward.kernelCount} generated kernels`);
    assert.ok(joint.forward.kernelCount >= 1);
    assert.equal(f.programs().inference.length, 0, 'no inference program is built for grad calls');
  }
});

test('RMSNorm-style model x * rsqrt(mean(x^2) + eps) * w: grads of x and w', () => {
  const w = param([12], 11, 0.5, 1.5);
  const proj = param([12, 12], 12, -0.4, 0.4);
  const x = param([3, 5, 12], 13, -2, 2);
  const fn = (t: Tensor): Tensor => {
    const n = t.mul(t.mul(t).mean(-1, true).add(1e-6).rsqrt()).mul(w);
    return F.linear(n, proj).square().mean();
  };
  const f = kiln.compile(fn);
  assertGradParity([x, w, proj], ['x', 'w', 'proj'], () => f(x), () => fn(x));
  assert.equal(f.counters.backwards, 1);
  assert.equal(f.counters.fallbacks, 0);
});

test('softmax and logsumexp losses', () => {
  const x = param([4, 10], 21, -3, 3);
  const wt = param([10, 10], 22, -0.5, 0.5);
  const target = rand([4, 10], 23, 'contiguous', 'float32', 0, 1);
  const fn = (t: Tensor): Tensor => {
    const z = kiln.matmul(t, wt);
    const sm = kiln.softmax(z, -1).mul(target).sum();
    const lse = kiln.logsumexp(z, -1).mean();
    const lsm = kiln.logSoftmax(t, 1).mul(target).sum().neg();
    return sm.add(lse).add(lsm);
  };
  const f = kiln.compile(fn);
  assertGradParity([x, wt], ['x', 'wt'], () => f(x), () => fn(x));
  assert.equal(f.counters.backwards, 1);
  assert.equal(f.counters.fallbacks, 0);
});

test('an input that does not require grad gets no .grad; the one that does matches eager', () => {
  const x = param([5, 6], 31);
  const y = rand([5, 6], 32); // requiresGrad false
  const fn = (a: Tensor, b: Tensor): Tensor => a.mul(b).sigmoid().add(b.exp()).sum();
  const f = kiln.compile(fn);
  assertGradParity([x, y], ['x', 'y'], () => f(x, y), () => fn(x, y));
  assert.equal(y.grad, null);
  assert.equal(f.counters.backwards, 1);
  // The mirror case: now only y requires grad (a separate guard set: a new trace).
  x.requiresGrad = false;
  x.grad = null;
  y.requiresGrad = true;
  assertGradParity([x, y], ['x', 'y'], () => f(x, y), () => fn(x, y));
  assert.equal(x.grad, null);
  assert.equal(f.counters.backwards, 2);
  assert.equal(f.programs().joint.length, 2);
});

test('an input used several times: gradients of every use are summed, and accumulate into an existing .grad', () => {
  const x = param([7, 3], 41);
  const fn = (t: Tensor): Tensor => t.mul(t).add(t.sin().mul(t)).add(t.t().matmul(t).sum()).sum();
  const f = kiln.compile(fn);
  assertGradParity([x], ['x'], () => f(x), () => fn(x));
  // Two backward passes without clearing .grad: compiled and eager add up the same way.
  x.grad = null;
  f(x).backward();
  f(x).backward();
  const twiceCompiled = x.grad!.toFlatArray();
  x.grad = null;
  fn(x).backward();
  fn(x).backward();
  assertClose(twiceCompiled, x.grad!.toFlatArray(), 'accumulated grad');
  const once = gradsOf([x], () => fn(x)).grads[0]!;
  assertClose(
    twiceCompiled,
    once.map((v) => 2 * v),
    'twice the single grad',
  );
});

test('second call hits the cache: no new trace or compile; every call runs the compiled backward', () => {
  const m = new Mlp();
  const fn = (t: Tensor): Tensor => m.forward(t).mean();
  const f = kiln.compile(fn);
  const x1 = rand([6, 8], 51);
  f(x1).backward();
  const after1 = { ...f.counters };
  assert.equal(after1.compiles, 2, 'forward and backward programs');
  assert.equal(after1.traces, 2, 'the inference trace (guards, variant) and the joint trace');
  const x2 = rand([6, 8], 52);
  const grads = gradsOf(m.params, () => f(x2)).grads;
  assert.equal(f.counters.compiles, after1.compiles);
  assert.equal(f.counters.traces, after1.traces);
  assert.equal(f.counters.cacheHits, after1.cacheHits + 1);
  assert.equal(f.counters.backwards, 2);
  const want = gradsOf(m.params, () => fn(x2)).grads;
  want.forEach((g, i) => assertClose(grads[i]!, g!, `param ${i}`));
  // noGrad uses its own (inference) program, and the result is cut from autograd.
  const y = kiln.noGrad(() => f(x2));
  assert.equal(y.requiresGrad, false);
  assert.equal(f.programs().inference.length, 1);
  assertClose([y.item() as number], [kiln.noGrad(() => fn(x2)).item() as number], 'noGrad value');
  assert.equal(f.counters.backwards, 2);
});

test('backward twice with retainGraph doubles the grads; a third backward through the released node fails', () => {
  const x = param([4, 5], 61);
  const w = param([5, 3], 62);
  const fn = (t: Tensor): Tensor => t.matmul(w).tanh().square().sum();
  const f = kiln.compile(fn);
  const once = gradsOf([x, w], () => fn(x)).grads;
  x.grad = null;
  w.grad = null;
  const loss = f(x);
  loss.backward(null, { retainGraph: true });
  loss.backward();
  assertClose(
    x.grad!.toFlatArray(),
    once[0]!.map((v) => 2 * v),
    'x grad',
  );
  assertClose(
    w.grad!.toFlatArray(),
    once[1]!.map((v) => 2 * v),
    'w grad',
  );
  assert.equal(f.counters.backwards, 2);
  assert.throws(() => loss.backward(), /second time.*retainGraph/);
});

test('the output is linked through one node: upstream eager ops and downstream eager ops both get gradients', () => {
  const a = param([3, 4], 71);
  const w = param([4, 4], 72);
  const f = kiln.compile((t: Tensor) => [t.matmul(w).relu(), t.exp()] as const);
  const run = (g: (t: Tensor) => readonly [Tensor, Tensor]): Tensor => {
    const [p, q] = g(a.mul(2)); // an eager op before the compiled call
    return p.mul(q).sum().add(p.sum()); // and after it
  };
  const eagerFn = (t: Tensor): readonly [Tensor, Tensor] => [t.matmul(w).relu(), t.exp()];
  assertGradParity([a, w], ['a', 'w'], () => run(f), () => run(eagerFn));
  const [p, q] = f(a);
  assert.equal(p.gradFn, q.gradFn, 'both outputs hang off one autograd node');
  assert.ok(p.gradFn !== null);
});

// A test op with a kernel but no backward formula.
const noFormulaOp = defineOp({
  name: 'testCompileBackwardNoFormula',
  args: [{ name: 'self', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (self: TensorMeta) => ({ shape: self.shape, strides: self.strides, dtype: self.dtype, device: self.device }),
});
registerKernel(noFormulaOp, 'cpu', (ctx, x) => mapUnary(ctx.out, x, (v) => v * 3));

test('an op without a backward formula: the call runs eagerly, counted in fallbacks, with one warning', () => {
  const x = param([4], 81);
  const fn = (t: Tensor): Tensor => (dispatch(noFormulaOp, t.mul(2)) as Tensor).sum();
  const f = kiln.compile(fn, { backend: 'eager' });
  const { warnings } = captureWarnings(() => {
    f(x);
    f(x);
  });
  assert.equal(f.counters.fallbacks, 2);
  assert.equal(f.counters.eagerCalls, 2);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /backward of 'fn' cannot be compiled/);
  assert.match(warnings[0]!, /derivative for 'testCompileBackwardNoFormula' is not implemented/);
  // Eager semantics are kept: backward fails the same way eager backward does.
  assert.throws(() => f(x).backward(), /derivative for 'testCompileBackwardNoFormula' is not implemented/);
  // Under noGrad the forward still compiles.
  kiln.noGrad(() => assertClose([f(x).item() as number], [fn(x).item() as number], 'noGrad value'));
  assert.equal(f.counters.compiles, 1);
  assert.throws(() => kiln.compile(fn, { fullgraph: true })(x), /cannot compile the backward of 'fn' with fullgraph: true/);
});

// An op whose formula reads the gradient's values (what a formula computing on host arrays does).
const readsValuesOp = defineOp({
  name: 'testCompileBackwardReadsValues',
  args: [{ name: 'self', type: 'Tensor' }],
  outputs: [{ name: 'out', type: 'Tensor' }],
  meta: (self: TensorMeta) => ({ shape: self.shape, strides: self.strides, dtype: self.dtype, device: self.device }),
});
registerKernel(readsValuesOp, 'cpu', (ctx, x) => mapUnary(ctx.out, x, (v) => v * 3));
defineBackward(readsValuesOp, (_ctx, [g]) => [kiln.tensor(g!.toFlatArray().map((v) => v * 3)).reshape([...g!.shape])]);

test('a formula that reads tensor values falls back to eager with correct grads', () => {
  const x = param([2, 3], 91);
  const fn = (t: Tensor): Tensor => (dispatch(readsValuesOp, t.mul(2)) as Tensor).square().sum();
  const f = kiln.compile(fn);
  const { result } = captureWarnings(() => {
    assertGradParity([x], ['x'], () => f(x), () => fn(x));
    return f.counters.fallbacks;
  });
  assert.equal(result, 1);
  assert.equal(f.counters.backwards, 0);
});

test('conv2d backward (input and weight gradients) is compiled, not a fallback', () => {
  const x = param([1, 2, 6, 6], 91);
  const w = param([3, 2, 3, 3], 92);
  const fn = (t: Tensor): Tensor => F.conv2d(t, w, null, 2, 1).relu().sum();
  const f = kiln.compile(fn);
  assertGradParity([x, w], ['x', 'w'], () => f(x), () => fn(x));
  assert.equal(f.counters.fallbacks, 0);
  assert.equal(f.counters.backwards, 1);
});

test('an in-place op on a value that requires grad: eager fallback (counted), gradients as eager', () => {
  const x = param([3, 4], 95);
  const fn = (t: Tensor): Tensor => {
    const h = t.mul(2);
    h.add_(t.exp());
    return h.square().sum();
  };
  const f = kiln.compile(fn);
  const { warnings } = captureWarnings(() => assertGradParity([x], ['x'], () => f(x), () => fn(x)));
  assert.equal(f.counters.fallbacks, 1);
  assert.equal(f.counters.backwards, 0);
  assert.match(warnings[0]!, /in-place op 'add_' on a tensor that requires grad/);
});

test('inside the traced function, values that need grad report requiresGrad as eagerly; detach() breaks the graph', () => {
  const x = param([4], 97);
  const seen: boolean[] = [];
  const f = kiln.compile((t: Tensor) => {
    const y = t.mul(2);
    seen.push(t.requiresGrad, y.requiresGrad);
    return y.sum();
  });
  f(x).backward();
  assert.deepEqual(seen.slice(-2), [true, true], 'the joint trace marks them as eager autograd does');
  const g = kiln.compile((t: Tensor) => t.mul(t.detach()).sum());
  const { warnings } = captureWarnings(() => assertGradParity([x], ['x'], () => g(x), () => x.mul(x.detach()).sum()));
  assert.match(warnings[0]!, /graph break in .*detach\(\) of a traced tensor/);
  assert.equal(g.counters.graphBreaks, 1);
});

test('SGD training, 3 steps: compiled and eager losses and parameters agree', () => {
  const make = (): Mlp => new Mlp();
  // One batch, three steps: the loss must go down, so a backward that did nothing would show.
  const batch = { x: rand([8, 8], 100), y: rand([8, 4], 200) };
  const data = [batch, batch, batch];
  const train = (model: Mlp, step: (x: Tensor, y: Tensor) => Tensor): number[] => {
    const opt = new kiln.optim.SGD(model.params, { lr: 0.1, momentum: 0.9 });
    return data.map(({ x, y }) => {
      opt.zeroGrad();
      const loss = step(x, y);
      loss.backward();
      opt.step();
      return loss.item() as number;
    });
  };
  const lossFn = (m: Mlp) => (x: Tensor, y: Tensor): Tensor => m.forward(x).sub(y).square().mean();
  const eagerModel = make();
  const compiledModel = make();
  const eagerLosses = train(eagerModel, lossFn(eagerModel));
  const step = kiln.compile(lossFn(compiledModel));
  const compiledLosses = train(compiledModel, step);
  assertClose(compiledLosses, eagerLosses, 'losses');
  assert.ok(eagerLosses[2]! < eagerLosses[0]!, 'training lowers the loss');
  compiledModel.params.forEach((p, i) => assertClose(p.toFlatArray(), eagerModel.params[i]!.toFlatArray(), `param ${i} after 3 steps`));
  // Parameters are written in place by the optimiser: program inputs, so no recompile.
  assert.equal(step.counters.compiles, 2);
  assert.equal(step.counters.backwards, 3);
  assert.equal(step.counters.cacheHits, 2);
});

test('a view of a decomposed op (reshape of rmsNorm) read after a buffer is reused: the joint forward keeps its base alive', () => {
  // Decomposition replaced rmsNorm's output; the reshape's alias pointed at the old value, so the
  // buffer planner freed the base right after the view and a later GEMM overwrote it.
  const w = param([64], 31, 0.5, 1.5);
  const ws = [param([32, 64], 32, -0.2, 0.2), param([64, 32], 33, -0.2, 0.2), param([32, 64], 34, -0.2, 0.2), param([64, 32], 35, -0.2, 0.2)];
  const x = rand([18, 64], 36);
  const loss = (t: Tensor): Tensor => {
    const n = kiln.rmsNorm(t, [64], w, 1e-6).reshape([-1, 64]);
    return F.linear(F.linear(n, ws[0]!), ws[1]!).add(F.linear(F.linear(n, ws[2]!), ws[3]!)).square().sum();
  };
  const f = kiln.compile(loss, { capturedTensors: 'allow' });
  assertGradParity([w, ...ws], ['w', 'w0', 'w1', 'w2', 'w3'], () => f(x), () => loss(x));
  assert.equal(f.counters.backwards, 1);
});
