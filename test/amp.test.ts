/**
 * Mixed precision: kiln.autocast's per-op-class dtypes (torch.autocast's lists), gradients reaching
 * float32 master weights in float32, a bfloat16 training loop that converges like float32, autocast
 * under kiln.compile and kiln.checkpoint, and kiln.amp.GradScaler against torch's documented
 * update rule (torch.amp.GradScaler / _amp_update_scale_), simulated step by step.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { getOp } from '../src/ops/registry.js';

const F = kiln.nn.functional;

test('every op named in the autocast lists is a registered op', () => {
  for (const n of [...kiln.amp.AUTOCAST_LOWER, ...kiln.amp.AUTOCAST_FLOAT32]) assert.doesNotThrow(() => getOp(n), n);
});

for (const dt of ['bfloat16', 'float16'] as const) {
  test(`autocast(${dt}): matmul/linear/conv/bmm/attention in ${dt}, softmax/norms/reductions/losses in float32`, () => {
    kiln.manualSeed(0);
    const x = kiln.randn([2, 4]);
    const w = kiln.randn([3, 4]);
    const b = kiln.randn([3]);
    const img = kiln.randn([1, 2, 5, 5]);
    const k = kiln.randn([3, 2, 3, 3]);
    const q = kiln.randn([1, 2, 4, 8]);
    kiln.autocast(dt, () => {
      const lin = F.linear(x, w, b);
      assert.equal(lin.dtype, dt, 'linear');
      assert.equal(kiln.matmul(x, w.t()).dtype, dt, 'matmul');
      assert.equal(kiln.bmm(q.reshape([2, 4, 8]), q.reshape([2, 8, 4])).dtype, dt, 'bmm');
      assert.equal(F.conv2d(img, k, null, 1, 1).dtype, dt, 'conv2d');
      assert.equal(F.scaledDotProductAttention(q, q, q).dtype, dt, 'sdpa');
      assert.equal(kiln.softmax(lin, -1).dtype, 'float32', 'softmax');
      assert.equal(kiln.logSoftmax(lin, -1).dtype, 'float32', 'logSoftmax');
      assert.equal(kiln.layerNorm(lin, [3]).dtype, 'float32', 'layerNorm');
      assert.equal(lin.sum().dtype, 'float32', 'sum');
      assert.equal(lin.exp().dtype, 'float32', 'exp');
      assert.equal(F.mseLoss(lin, kiln.zeros([2, 3])).dtype, 'float32', 'mseLoss');
      assert.equal(F.crossEntropy(lin, kiln.tensor([0, 2], { dtype: 'int64' })).dtype, 'float32', 'crossEntropy');
      // Others run in their inputs' dtype; mixed inputs promote as usual.
      assert.equal(kiln.relu(lin).dtype, dt, 'relu');
      assert.equal(lin.add(x.sum(1, true)).dtype, 'float32', 'add promotes');
      // float64 is not eligible; autocast(null) turns it off inside.
      assert.equal(kiln.matmul(x.to('float64'), w.t().to('float64')).dtype, 'float64', 'float64 matmul');
      assert.equal(kiln.autocast(null, () => F.linear(x, w, b)).dtype, 'float32', 'disabled inside');
    });
    assert.equal(F.linear(x, w, b).dtype, 'float32', 'outside');
    {
      using _ = kiln.autocastScope(dt);
      assert.equal(F.linear(x, w, b).dtype, dt, 'scope form');
    }
    assert.equal(F.linear(x, w, b).dtype, 'float32', 'after the scope');
  });
}

test('under autocast float32 parameters get float32 gradients equal to the float32 gradients of the cast ops', () => {
  kiln.manualSeed(1);
  const x = kiln.randn([4, 6]);
  const w = kiln.randn([5, 6]).mul(0.3).requiresGrad_();
  const loss = kiln.autocast('bfloat16', () => F.mseLoss(F.linear(x, w), kiln.zeros([4, 5])));
  loss.backward();
  assert.equal(w.grad!.dtype, 'float32');
  // Reference: the same math with the bf16 roundings done by hand, gradient in float64.
  const xb = x.to('bfloat16').to('float64');
  const wb = w.detach().to('bfloat16').to('float64');
  const y = kiln.matmul(xb, wb.t()).to('bfloat16').to('float64');
  const want = kiln.matmul(y.mul(2 / 20).t(), xb); // d/dW mean(y^2) = 2/N y^T x
  const got = w.grad!.toFlatArray();
  // The backward matmul runs in bf16 too (as torch's): a bf16 rounding of the sums' scale.
  const scale = Math.max(...want.toFlatArray().map(Math.abs));
  want.toFlatArray().forEach((v, i) => assert.ok(Math.abs(got[i]! - v) <= 1e-2 * scale, `dW[${i}]: ${got[i]} vs ${v}`));
});

test('a bfloat16 autocast training loop converges on a toy regression and stays close to float32', () => {
  const run = (dtype: kiln.amp.AutocastDtype | null): { first: number; last: number; params: number[] } => {
    kiln.manualSeed(2);
    const x = kiln.randn([64, 8]);
    const trueW = kiln.randn([8, 1]);
    const y = kiln.matmul(x, trueW).add(kiln.randn([64, 1]).mul(0.01));
    const model = new kiln.nn.Sequential(new kiln.nn.Linear(8, 16), new kiln.nn.Tanh(), new kiln.nn.Linear(16, 1));
    const opt = new kiln.optim.Adam([...model.parameters()], { lr: 0.02 });
    let first = NaN;
    let last = NaN;
    for (let step = 0; step < 150; step++) {
      opt.zeroGrad();
      const loss = kiln.autocast(dtype, () => F.mseLoss(model.forward(x), y));
      loss.backward();
      opt.step();
      const v = loss.item() as number;
      if (step === 0) first = v;
      last = v;
    }
    return { first, last, params: [...model.parameters()].flatMap((p) => p.toFlatArray()) };
  };
  const f32 = run(null);
  const bf16 = run('bfloat16');
  assert.ok(f32.last < 0.02 * f32.first, `float32 converges: ${f32.first} -> ${f32.last}`);
  assert.ok(bf16.last < 0.02 * bf16.first, `bfloat16 converges: ${bf16.first} -> ${bf16.last}`);
  assert.ok(Math.abs(bf16.last - f32.last) < 0.02 * f32.first, `final losses: bf16 ${bf16.last} vs float32 ${f32.last}`);
  assert.ok(Math.abs(bf16.first - f32.first) < 0.01 * f32.first, 'the first loss differs only by bf16 rounding');
});

test('kiln.compile under autocast: same dtype and values as eager autocast; the autocast state is guarded', () => {
  kiln.manualSeed(3);
  const x = kiln.randn([4, 8]);
  const w = kiln.randn([6, 8]).requiresGrad_();
  const fn = (t: Tensor): Tensor => kiln.softmax(F.linear(t, w), -1).mul(2);
  const f = kiln.compile(fn);
  const eager = kiln.noGrad(() => kiln.autocast('bfloat16', () => fn(x)));
  const comp = kiln.noGrad(() => kiln.autocast('bfloat16', () => f(x)));
  assert.equal(comp.dtype, eager.dtype);
  // The fused softmax kernel rounds differently from the eager one: float32 ulps, not bf16 ones.
  comp.toFlatArray().forEach((v, i) => assert.ok(Math.abs(v - eager.toFlatArray()[i]!) <= 1e-6 * (1 + Math.abs(v)), `compiled[${i}]`));
  // The same compiled function outside autocast: a float32 linear again (new guards), not the bf16 program.
  const plain = kiln.noGrad(() => f(x));
  const want = kiln.noGrad(() => fn(x));
  plain.toFlatArray().forEach((v, i) => assert.ok(Math.abs(v - want.toFlatArray()[i]!) < 1e-6, `plain[${i}]`));
  assert.ok(plain.toFlatArray().some((v, i) => v !== eager.toFlatArray()[i]), 'the float32 result differs from the bf16 one');
  // Compiled backward under autocast: gradients as eager autocast.
  const g = (call: (t: Tensor) => Tensor): number[] => {
    w.grad = null;
    kiln.autocast('bfloat16', () => call(x)).sum().backward();
    return w.grad!.toFlatArray();
  };
  const gc = g(f);
  const ge = g(fn);
  assert.equal(f.counters.fallbacks, 0);
  gc.forEach((v, i) => assert.ok(Math.abs(v - ge[i]!) <= 1e-5 * (1 + Math.abs(v)), `grad[${i}]: ${v} vs ${ge[i]}`));
});

test('checkpoint under autocast recomputes in the forward\'s dtype: gradients equal the plain autocast ones', () => {
  kiln.manualSeed(4);
  const x = kiln.randn([3, 8]).requiresGrad_();
  const w = kiln.randn([8, 8]).mul(0.3).requiresGrad_();
  const seg = (t: Tensor): Tensor => kiln.gelu(F.linear(t, w));
  const grads = (ckpt: boolean): number[][] => {
    x.grad = null;
    w.grad = null;
    const loss = kiln.autocast('bfloat16', () => (ckpt ? kiln.checkpoint(seg, x) : seg(x)).square().mean());
    loss.backward();
    return [x.grad!.toFlatArray(), w.grad!.toFlatArray()];
  };
  assert.deepEqual(grads(true), grads(false));
});

// ---------------------------------------------------------------------------------------------
// GradScaler

/** torch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu), as documented. */
function torchUpdate(s: { scale: number; tracker: number }, foundInf: boolean, growth: number, backoff: number, interval: number): void {
  if (foundInf) {
    s.scale *= backoff;
    s.tracker = 0;
  } else {
    const successful = s.tracker + 1;
    if (successful === interval) {
      s.scale *= growth;
      s.tracker = 0;
    } else s.tracker = successful;
  }
}

test('GradScaler: scales the loss, unscales gradients, skips a step with an inf gradient and backs off', () => {
  const p = kiln.tensor([1, 2]).requiresGrad_();
  const opt = new kiln.optim.SGD([p], { lr: 0.1 });
  const scaler = new kiln.amp.GradScaler({ initScale: 1024, growthInterval: 3 });
  const loss = p.square().sum();
  const scaled = scaler.scale(loss);
  assert.equal(scaled.item(), 5 * 1024);
  scaled.backward();
  assert.deepEqual(p.grad!.toFlatArray(), [2 * 1024, 4 * 1024]);
  scaler.unscale_(opt);
  assert.deepEqual(p.grad!.toFlatArray(), [2, 4]);
  assert.throws(() => scaler.unscale_(opt), /already been called/);
  assert.equal(scaler.step(opt), true);
  assert.deepEqual(p.toFlatArray().map((v) => Math.round(v * 1e6) / 1e6), [0.8, 1.6]);
  scaler.update();
  assert.equal(scaler.getScale(), 1024);
  assert.equal(scaler.getGrowthTracker(), 1);
  // An inf gradient: the step is skipped, parameters untouched, scale halves, tracker resets.
  opt.zeroGrad();
  scaler.scale(p.mul(kiln.tensor([Infinity, 1])).sum()).backward();
  const before = p.toFlatArray();
  assert.equal(scaler.step(opt), false);
  assert.deepEqual(p.toFlatArray(), before);
  scaler.update();
  assert.equal(scaler.getScale(), 512);
  assert.equal(scaler.getGrowthTracker(), 0);
  // A NaN gradient backs off too.
  opt.zeroGrad();
  scaler.scale(p.mul(kiln.tensor([NaN, 1])).sum()).backward();
  assert.equal(scaler.step(opt), false);
  scaler.update();
  assert.equal(scaler.getScale(), 256);
});

test('GradScaler follows torch\'s update rule over a sequence of clean and overflowing steps (growth after growthInterval)', () => {
  const pattern = [false, false, false, false, true, false, false, false, false, false, false, true, true, false, false, false];
  const opts = { initScale: 8, growthFactor: 2, backoffFactor: 0.5, growthInterval: 3 };
  const scaler = new kiln.amp.GradScaler(opts);
  const ref = { scale: opts.initScale, tracker: 0 };
  const p = kiln.tensor([0.5]).requiresGrad_();
  const opt = new kiln.optim.SGD([p], { lr: 0 });
  for (const [i, overflow] of pattern.entries()) {
    opt.zeroGrad();
    scaler.scale(p.mul(overflow ? Infinity : 1).sum()).backward();
    assert.equal(scaler.step(opt), !overflow, `step ${i}`);
    scaler.update();
    torchUpdate(ref, overflow, opts.growthFactor, opts.backoffFactor, opts.growthInterval);
    assert.equal(scaler.getScale(), ref.scale, `scale after step ${i}`);
    assert.equal(scaler.getGrowthTracker(), ref.tracker, `tracker after step ${i}`);
  }
  // 3 clean -> x2 (16), 1 clean + inf -> 8, 3 clean -> 16, 3 clean -> 32, inf -> 16, inf -> 8, 3 clean -> 16.
  assert.equal(scaler.getScale(), 16);
  const off = new kiln.amp.GradScaler({ enabled: false });
  assert.equal(off.scale(p), p);
  assert.equal(off.getScale(), 1);
});
