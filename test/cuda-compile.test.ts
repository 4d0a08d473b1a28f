/**
 * kiln.compile on cuda tensors, end to end: the kiln backend's CUDA path (generated CUDA C kernels,
 * extern nodes through the eager cuda kernels) against eager Kiln on the same device, CUDA graph
 * capture and replay (mode 'reduce-overhead'), replay after the inputs' data changed, one graph per
 * size of a dynamic batch, calls that cannot be captured, and NVRTC compiles in the worker pool.
 * Every test skips with the reason where no CUDA device can be used.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { CudaGraphProgram } from '../src/compile/cuda-graphs/graph-program.js';
import { PiecewiseGraphProgram } from '../src/compile/cuda-graphs/piecewise.js';
import { compilePoolStats } from '../src/runtime/pool/index.js';
import { cudaRuntimeLauncher } from '../src/compile/codegen/cuda/runtime-launcher.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import { skipUnlessCuda } from './cuda-util.js';

const skip = skipUnlessCuda();
type Fn = (...xs: Tensor[]) => Tensor | Tensor[];

const gen = (seed: number): kiln.Generator => new kiln.Generator(seed);
const randn = (shape: number[], seed: number, dtype: kiln.DType = 'float32'): Tensor => kiln.randn(shape, { generator: gen(seed) }).to('cuda').to(dtype);

/** |got - want| <= atol + rtol |want| elementwise, both read back to the host. */
function assertClose(label: string, got: Tensor, want: Tensor, atol = 1e-4, rtol = 1e-4): void {
  assert.equal(got.device.type, 'cuda', `${label}: result on ${got.device.toString()}`);
  assert.deepEqual([...got.shape], [...want.shape], `${label}: shape`);
  assert.equal(got.dtype, want.dtype, `${label}: dtype`);
  const g = got.toFlatArray();
  const w = want.toFlatArray();
  for (let i = 0; i < w.length; i++) {
    const e = w[i]!;
    if (!(Math.abs(g[i]! - e) <= atol + rtol * Math.abs(e))) assert.fail(`${label}: element ${i}: compiled ${g[i]}, eager ${e} (atol ${atol}, rtol ${rtol})`);
  }
}

function asList(x: Tensor | Tensor[]): Tensor[] {
  return Array.isArray(x) ? x : [x];
}

function graphProgram(cf: { programs(): { inference: readonly CompiledProgram[] } }): CudaGraphProgram {
  const p = cf.programs().inference.find((q) => q instanceof CudaGraphProgram);
  assert.ok(p instanceof CudaGraphProgram, `expected the kiln backend's cuda program, got ${cf.programs().inference.map((q) => q.constructor.name).join(', ')}`);
  return p;
}

const elementwise = (x: Tensor): Tensor => {
  let y = x.mul(1.5).add(0.5);
  y = kiln.relu(y).mul(kiln.sigmoid(x));
  y = y.add(kiln.tanh(x.mul(0.5)));
  y = y.sub(kiln.exp(x.neg().mul(x)).mul(0.1));
  return y.mul(2).sub(1);
};

/** The compile test models at small sizes: name, function (closing over cuda weights), inputs. */
function models(): { name: string; fn: Fn; inputs: Tensor[]; atol?: number }[] {
  const d = 64;
  const lin = (o: number, i: number, s: number): Tensor => randn([o, i], s).mul(1 / Math.sqrt(i));
  const w1 = lin(4 * d, d, 11);
  const b1 = randn([4 * d], 12).mul(0.1);
  const w2 = lin(d, 4 * d, 13);
  const b2 = randn([d], 14).mul(0.1);
  const stack = [lin(d, d, 21), lin(d, d, 22), lin(d, d, 23)];
  const g = randn([d], 31).mul(0.1).add(1);
  const beta = randn([d], 32).mul(0.1);
  const gWide = randn([1024], 33).mul(0.1).add(1);
  const wqkv = lin(3 * d, d, 41);
  const wo = lin(d, d, 42);
  const block = (x: Tensor): Tensor => {
    const [b, t] = x.shape as [number, number, number];
    const h = 4;
    const qkv = kiln.linear(kiln.layerNorm(x, [d], g, beta), wqkv).view([b, t, 3, h, d / h]);
    const q = qkv.select(2, 0).transpose(1, 2);
    const k = qkv.select(2, 1).transpose(1, 2);
    const v = qkv.select(2, 2).transpose(1, 2);
    const a = kiln.scaledDotProductAttention(q, k, v, null, 0, true).transpose(1, 2).reshape([b, t, d]);
    const y = x.add(kiln.linear(a, wo));
    return y.add(kiln.linear(kiln.gelu(kiln.linear(kiln.layerNorm(y, [d], g, beta), w1, b1)), w2, b2));
  };
  return [
    { name: 'elementwise', fn: elementwise, inputs: [randn([64, 96], 1)] },
    { name: 'softmax', fn: (x) => kiln.softmax(x, -1), inputs: [randn([32, 1000], 2)] },
    { name: 'layerNorm', fn: (x) => kiln.layerNorm(x, [d], g, beta), inputs: [randn([4, 16, d], 3)] },
    { name: 'rmsNorm', fn: (x) => kiln.rmsNorm(x, [d], g, 1e-6), inputs: [randn([24, d], 4)] },
    // Few medium rows: the block-per-row default of the reduction config space (and its bf16 vector width).
    { name: 'add+rmsNorm [128,1024]', fn: (x, r) => [x.add(r), kiln.rmsNorm(x.add(r), [1024], gWide, 1e-6)], inputs: [randn([128, 1024], 15), randn([128, 1024], 16)] },
    { name: 'add+rmsNorm [128,1024] bf16', fn: (x, r) => kiln.rmsNorm(x.add(r), [1024], gWide.to('bfloat16'), 1e-6), inputs: [randn([128, 1024], 17, 'bfloat16'), randn([128, 1024], 18, 'bfloat16')], atol: 4e-2 },
    { name: 'reductions', fn: (x) => [kiln.sum(x, -1), kiln.amax(x, 0), kiln.mean(x.mul(x), -1, true), kiln.var(x, 0)], inputs: [randn([48, 80], 5)] },
    { name: 'stacked Linears', fn: (x) => stack.reduce((h, w) => kiln.relu(kiln.linear(h, w)), x), inputs: [randn([16, d], 6)] },
    { name: 'MLP', fn: (x) => kiln.linear(kiln.gelu(kiln.linear(x, w1, b1)), w2, b2), inputs: [randn([32, d], 7)] },
    { name: 'transformer block', fn: block, inputs: [randn([2, 16, d], 8)], atol: 5e-4 },
  ];
}

test('kiln.compile on cuda: compiled equals eager for every test model (default and reduce-overhead)', { skip }, () => {
  for (const m of models()) {
    const want = asList(kiln.noGrad(() => m.fn(...m.inputs)));
    for (const mode of ['default', 'reduce-overhead'] as const) {
      const cf = kiln.compile(m.fn, { mode, name: `${m.name} (${mode})` });
      // Twice: the first call captures (reduce-overhead), the second replays.
      for (let call = 0; call < 2; call++) {
        const got = asList(kiln.noGrad(() => cf(...m.inputs)));
        assert.equal(got.length, want.length, `${m.name}: output count`);
        got.forEach((t, i) => assertClose(`${m.name} ${mode} call ${call} output ${i}`, t, want[i]!, m.atol));
      }
      const p = graphProgram(cf);
      assert.ok(p.kernelCount > 0 || p.program.stats.externs > 0, `${m.name}: the program runs generated kernels or extern calls`);
      if (mode === 'reduce-overhead') {
        assert.equal(p.stats.disabled, null, `${m.name}: capture failed: ${p.stats.disabled}`);
        assert.equal(p.stats.captures, 1, `${m.name}: one capture`);
        assert.equal(p.stats.replays, 2, `${m.name}: both calls replay the graph`);
        assert.equal(p.stats.allocationsInCapture, 0, `${m.name}: no allocation inside capture`);
      }
    }
  }
});

test('cuda graphs: a replay after the inputs changed (same tensor mutated, new tensor) equals eager', { skip }, () => {
  const w = randn([128, 128], 50).mul(0.1);
  const fn = (x: Tensor): Tensor => kiln.softmax(kiln.linear(elementwise(x), w), -1);
  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  const x = randn([16, 128], 51);
  kiln.noGrad(() => cf(x));
  // The same tensor, new data.
  x.copy_(randn([16, 128], 52));
  assertClose('mutated input', kiln.noGrad(() => cf(x)) as Tensor, fn(x));
  // Another tensor at another address.
  const x2 = randn([16, 128], 53);
  assertClose('new input', kiln.noGrad(() => cf(x2)) as Tensor, fn(x2));
  const p = graphProgram(cf);
  // x: the in-place graph (no copies); x2 lives elsewhere: a second graph with a static buffer.
  assert.equal(p.stats.captures, 2);
  assert.equal(p.stats.replays, 3);
  assert.equal(p.stats.inputCopies, 1, 'only the call at another address copies its argument');
  assertClose('x again, after x2', kiln.noGrad(() => cf(x)) as Tensor, fn(x));
  assert.equal(p.stats.inputCopies, 1);
});

test('cuda graphs: a compiled training loss replayed as a graph keeps its autograd node; gradients equal eager', { skip }, () => {
  // The joint program returns the loss as the user's output and among its differentiable outputs;
  // a replay must hand back ONE tensor for both, or the loss has no graph (H200, session 11).
  const w = randn([32, 64], 70).mul(0.1).requiresGrad_();
  const x = randn([16, 64], 71);
  const lossOf = (inp: Tensor): Tensor => kiln.linear(inp, w).relu().square().sum();
  const want = lossOf(x);
  want.backward();
  const wantGrad = w.grad!.clone();
  for (const mode of ['reduce-overhead', 'default'] as const) {
    const cf = kiln.compile(lossOf, { mode });
    for (let call = 0; call < 3; call++) {
      w.grad = null;
      const loss = cf(x) as Tensor;
      assert.ok(loss.requiresGrad, `${mode} call ${call}: the compiled loss requires grad`);
      assertClose(`${mode} call ${call}: loss`, loss.detach(), want.detach(), 1e-3, 1e-4);
      loss.backward();
      assertClose(`${mode} call ${call}: grad`, w.grad!, wantGrad, 1e-3, 1e-4);
    }
    assert.equal(cf.counters.backwards, 3, `${mode}: the compiled backward ran each call`);
  }
});

test("cuda graphs: reduce-overhead outputs alias the static buffers; mode 'default' lends results that never change under the caller", { skip }, () => {
  const fn = (x: Tensor): Tensor => elementwise(x).mul(3);
  const a = randn([256, 256], 60);
  const b = randn([256, 256], 61);
  const ro = kiln.compile(fn, { mode: 'reduce-overhead' });
  const ya = kiln.noGrad(() => ro(a)) as Tensor;
  // The same buffer with new data replays the same graph.
  const a0 = a.clone();
  a.copy_(b);
  const yb = kiln.noGrad(() => ro(a)) as Tensor;
  // Documented aliasing (as torch's cudagraph trees): the second replay overwrote the first result.
  assertClose('aliased first output', ya, fn(b));
  assertClose('second output', yb, fn(b));
  a.copy_(a0);
  process.env.KILN_CUDA_GRAPHS = '1';
  try {
    const df = kiln.compile(fn, { mode: 'default' });
    const da = kiln.noGrad(() => df(a)) as Tensor;
    const viewOfA = da.reshape([-1]);
    const stats = graphProgram(df).stats;
    const detached = stats.detachCopies;
    // b lives elsewhere: the copying graph runs, and da's graph is not replayed.
    (kiln.noGrad(() => df(b)) as Tensor).dispose();
    assert.equal(stats.detachCopies, detached);
    // a again: da's graph replays, and da (with its view) is still alive: copied out first, once.
    kiln.scope(() => void kiln.noGrad(() => df(a)));
    assert.equal(stats.detachCopies, detached + 1, 'one copy for the one live output storage');
    assertClose('default mode keeps the first output', da, fn(a));
    assertClose('a view of the first output follows it', viewOfA.reshape([256, 256]), fn(a));
    // Results disposed before the next call cost no copy (the usual loop under kiln.scope).
    for (let i = 0; i < 3; i++) kiln.scope(() => void kiln.noGrad(() => df(i % 2 ? a : b)));
    assert.equal(stats.detachCopies, detached + 1, 'disposed results are not copied');
    const last = kiln.noGrad(() => df(b)) as Tensor;
    assertClose('after lent replays', last, fn(b));
    assert.ok(stats.replays >= 2, 'KILN_CUDA_GRAPHS=1 replays in default mode');
  } finally {
    delete process.env.KILN_CUDA_GRAPHS;
  }
});

test('cuda graphs: dynamic batch 16/32/64 gets one graph per size, each equal to eager', { skip }, () => {
  const w = randn([96, 64], 70).mul(0.125);
  const fn = (x: Tensor): Tensor => kiln.gelu(kiln.linear(kiln.rmsNorm(x, [64], null, 1e-6), w)).sum(-1);
  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  for (const b of [16, 32, 64, 32]) {
    const x = randn([b, 64], 71 + b);
    assertClose(`batch ${b}`, kiln.noGrad(() => cf(x)) as Tensor, fn(x));
  }
  const progs = cf.programs().inference.filter((q): q is CudaGraphProgram => q instanceof CudaGraphProgram);
  const captures = progs.reduce((n, p) => n + p.stats.captures, 0);
  const replays = progs.reduce((n, p) => n + p.stats.replays, 0);
  // One in-place graph per batch size, and a copying one when batch 32 returns in another buffer.
  assert.equal(captures, 4, 'one capture per batch size, plus the copying graph of batch 32');
  assert.equal(replays, 4, 'every call replays, batch 32 twice');
});

/** int64 indices [3, 32] into dim 0 of a [6, 32] tensor, on cuda (`shift` varies them). */
function scatterIds(shift: number): Tensor {
  return kiln.tensor(Array.from({ length: 3 }, (_, r) => Array.from({ length: 32 }, (_, c) => (r * 7 + c + shift) % 6)), { dtype: 'int64' }).to('cuda');
}

test('cuda graphs: a call with an op that synchronises is captured in pieces around it, equal to eager', { skip }, () => {
  const src = randn([3, 32], 80);
  // The cuda scatterAdd kernel range-checks its indices on the host first: a host sync (gathers
  // check theirs on the device and capture).
  const fn = (ids: Tensor, x: Tensor): Tensor => kiln.scatterAdd(x, 0, ids, src).add(x).mul(2);
  const ids = scatterIds(1);
  const x = randn([6, 32], 81);
  const cf = kiln.compile(fn, { mode: 'reduce-overhead' });
  for (let i = 0; i < 2; i++) assertClose(`scatterAdd call ${i}`, kiln.noGrad(() => cf(ids, x)) as Tensor, fn(ids, x));
  // New indices and data: the eager piece sees them, the captured piece copies its input.
  const ids2 = scatterIds(5);
  const x2 = randn([6, 32], 82);
  assertClose('scatterAdd with new inputs', kiln.noGrad(() => cf(ids2, x2)) as Tensor, fn(ids2, x2));
  const p = graphProgram(cf);
  assert.notEqual(p.stats.disabled, null, 'the whole-call capture failure is recorded');
  const pw = p.piecewise();
  assert.ok(pw instanceof PiecewiseGraphProgram, 'the call runs in pieces');
  const pieces = pw.graphPieces();
  assert.equal(pieces.length, 1, 'one captured piece after the scatterAdd');
  // The piece reads the scatterAdd's output, a fresh allocation: at the address captured first
  // (the caching allocator's usual reuse) it replays in place, elsewhere through a copying graph.
  assert.ok(pieces[0]!.stats.captures >= 1 && pieces[0]!.stats.captures <= 2, `captures ${pieces[0]!.stats.captures}`);
  assert.equal(pieces[0]!.stats.replays, 3);
});

test("max-autotune on cuda: configs timed with kiln.Event, result equals eager", { skip }, () => {
  const fn = (x: Tensor): Tensor => kiln.softmax(x.mul(0.7), -1).add(kiln.layerNorm(x, [512]));
  const x = randn([64, 512], 90);
  const cf = kiln.compile(fn, { mode: 'max-autotune' });
  assertClose('max-autotune', kiln.noGrad(() => cf(x)) as Tensor, fn(x));
  assertClose('max-autotune second call', kiln.noGrad(() => cf(x)) as Tensor, fn(x));
});

test('the compiled cuda path compiles its kernels with NVRTC in the worker pool', { skip }, () => {
  const saved = process.env.KILN_CACHE_DIR;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cuda-compile-'));
  process.env.KILN_CACHE_DIR = dir;
  try {
    const before = compilePoolStats().tasksCompleted;
    const pooledBefore = cudaRuntimeLauncher(0).stats.pooled;
    // Several fusion groups (pointwise, row softmax, reduction), so several sources in one batch.
    const fn = (x: Tensor): Tensor[] => [kiln.softmax(elementwise(x), -1), kiln.sum(x.mul(x), 0), kiln.tanh(x).add(1)];
    const x = randn([40, 300], 100);
    const cf = kiln.compile(fn, { mode: 'max-autotune' });
    const got = kiln.noGrad(() => cf(x));
    fn(x).forEach((t, i) => assertClose(`pooled output ${i}`, got[i]!, t));
    const p = graphProgram(cf);
    assert.equal(p.launcher, cudaRuntimeLauncher(0), 'the program launches through the device launcher');
    assert.ok(p.launcher.stats.pooled - pooledBefore >= 2, `sources compiled in the pool: ${p.launcher.stats.pooled - pooledBefore}`);
    assert.ok(compilePoolStats().tasksCompleted - before >= 2, 'the pool ran the nvrtc tasks');
  } finally {
    if (saved === undefined) delete process.env.KILN_CACHE_DIR;
    else process.env.KILN_CACHE_DIR = saved;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
