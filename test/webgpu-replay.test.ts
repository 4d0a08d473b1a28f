/**
 * Recorded replay of compiled webgpu programs (mode 'reduce-overhead', compile/codegen/wgsl/replay.ts):
 * the first call runs plainly, the second is recorded, later calls with their inputs in place
 * replay it; every call's values equal a float64 CPU reference of that call's inputs (so a replay
 * reads the arguments' current contents and writes fresh results), results alias the static
 * outputs (the recorded call's result shows the next call's values), in-place writes to captured
 * tensors happen exactly once per call, moved inputs record again, and a call with a host-to-device
 * write inside (an int64 maskedFill uploads its scalar) is never replayed, with the reason in the
 * program's stats; a replay that submits after every dispatch (KILN_WEBGPU_REPLAY_SUBMIT=1) computes
 * the same. Needs a real adapter (SwiftShader in CI); skips on Dawn's null backend.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { WgslReplayProgram } from '../src/compile/codegen/wgsl/replay.js';
import type { CompiledProgram } from '../src/compile/backend.js';
import type { WebgpuAccelerator } from '../src/runtime/webgpu/webgpu-accelerator.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { webgpuSkipReason } from './helpers/webgpu.js';
import { setOption } from '../src/runtime/config.js';

const skip = webgpuSkipReason();

function replayProgram(cf: { programs(): { inference: readonly CompiledProgram[] } }): WgslReplayProgram {
  const p = cf.programs().inference.find((q) => q instanceof WgslReplayProgram);
  assert.ok(p instanceof WgslReplayProgram, `expected a webgpu replay program, got ${cf.programs().inference.map((q) => q.constructor.name).join(', ')}`);
  return p;
}

const close = (got: readonly number[], want: readonly number[], label: string): void => {
  assert.equal(got.length, want.length, label);
  got.forEach((g, i) => assert.ok(Math.abs(g - want[i]!) <= 1e-4 * (1 + Math.abs(want[i]!)), `${label}: element ${i}: ${g}, want ${want[i]}`));
};

test("webgpu reduce-overhead: call 2 is recorded, later calls replay it with the arguments' current values; results alias the static outputs", { skip }, () => {
  const acc = kiln.getAccelerator('webgpu') as unknown as WebgpuAccelerator;
  kiln.manualSeed(3);
  const wHost = kiln.randn([6, 5]);
  const w = wHost.to('webgpu');
  const x = kiln.zeros([4, 5]).to('webgpu');
  const cf = kiln.compile((a: Tensor, b: Tensor) => kiln.relu(kiln.add(kiln.nn.functional.linear(a, b), 0.5)).mul(2).sum(-1), { mode: 'reduce-overhead' });
  const results: Tensor[] = [];
  const want: number[][] = [];
  // Calls 3 and 4 replay with a submit after every dispatch (KILN_WEBGPU_REPLAY_SUBMIT), 2 with one submit.
  for (let call = 0; call < 5; call++) {
    setOption('KILN_WEBGPU_REPLAY_SUBMIT', call >= 3 ? 1 : 0);
    const xHost = kiln.randn([4, 5]);
    kiln.copy_(x, xHost.to('webgpu'));
    const ref = kiln.relu(kiln.add(kiln.nn.functional.linear(xHost.to('float64'), wHost.to('float64')), 0.5)).mul(2).sum(-1);
    const before = acc.dispatchCount;
    const r = cf(x, w);
    close(r.toFlatArray() as number[], ref.toFlatArray() as number[], `call ${call}`);
    if (call >= 2) assert.equal(acc.dispatchCount - before, replayProgram(cf).stats.dispatches, `call ${call}: a replay counts its recorded dispatches`);
    results.push(r);
    want.push(ref.toFlatArray() as number[]);
  }
  setOption('KILN_WEBGPU_REPLAY_SUBMIT', undefined);
  const p = replayProgram(cf);
  assert.deepEqual({ ...p.stats, dispatches: p.stats.dispatches > 0 }, { plainRuns: 1, recordings: 1, replays: 3, dispatches: true, disabled: null });
  // Calls 1.. return tensors over the same static output: each now reads the last call's values.
  close(results[1]!.toFlatArray() as number[], want[4]!, 'the recorded call after later replays');
  close(results[0]!.toFlatArray() as number[], want[0]!, 'the plain first call keeps its own result');
  // Another x (another buffer): recorded again, then replayed.
  const x2 = kiln.randn([4, 5]);
  const ref2 = kiln.relu(kiln.add(kiln.nn.functional.linear(x2.to('float64'), wHost.to('float64')), 0.5)).mul(2).sum(-1).toFlatArray() as number[];
  const x2d = x2.to('webgpu');
  close(cf(x2d, w).toFlatArray() as number[], ref2, 'moved input, recorded again');
  close(cf(x2d, w).toFlatArray() as number[], ref2, 'moved input, replayed');
  assert.equal(p.stats.recordings, 2);
  assert.equal(p.stats.replays, 4);
  assert.equal(p.stats.disabled, null);
});

test('webgpu reduce-overhead: captured tensors written in place get each call\'s write exactly once, replays included', { skip }, () => {
  const keys = kiln.zeros([2, 4, 1, 2]).to('webgpu');
  const values = kiln.zeros([2, 4, 1, 2]).to('webgpu');
  const cf = kiln.compile(
    (k: Tensor, slots: Tensor) => {
      const w = kiln.llm.reshapeAndCache(k, kiln.mul(k, 10), keys, values, slots);
      return kiln.add(kiln.sum(w.keyCache), kiln.sum(w.valueCache));
    },
    { mode: 'reduce-overhead', capturedTensors: 'allow' },
  );
  const k = kiln.zeros([1, 1, 2]).to('webgpu');
  const slots = kiln.zeros([1], { dtype: 'int64' }).to('webgpu');
  let total = 0;
  for (let call = 0; call < 6; call++) {
    kiln.copy_(k, kiln.full([1, 1, 2], call + 1).to('webgpu'));
    kiln.copy_(slots, kiln.tensor([call], { dtype: 'int64' }).to('webgpu'));
    total += 2 * (call + 1) * 11;
    const r = cf(k, slots);
    close(r.toFlatArray() as number[], [total], `call ${call}: the caches hold every call's row once`);
  }
  const flat = keys.reshape([-1]).toFlatArray() as number[];
  assert.deepEqual(flat, [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 0, 0, 0, 0]);
  const p = replayProgram(cf);
  assert.equal(p.stats.replays, 4);
  assert.equal(p.stats.disabled, null);
  // Not idempotent: a running sum counts every call once (the recorded call executes, it is not
  // executed again to be replayed).
  const state = kiln.zeros([3]).to('webgpu');
  const acc = kiln.compile((x: Tensor) => kiln.mul(kiln.add_(state, x), 1), { mode: 'reduce-overhead', capturedTensors: 'allow' });
  const one = kiln.ones([3]).to('webgpu');
  for (let call = 1; call <= 5; call++) assert.deepEqual(acc(one).toFlatArray(), [call, call, call], `running sum, call ${call}`);
  assert.deepEqual(state.toFlatArray(), [5, 5, 5]);
  assert.equal(replayProgram(acc).stats.replays, 3);
});

test('webgpu reduce-overhead: a call that uploads host data inside is not replayed (stats say why); every call stays right', { skip }, () => {
  const cf = kiln.compile((a: Tensor, m: Tensor, f: Tensor) => [kiln.maskedFill(a, m, 7), kiln.mul(f, 2)], { mode: 'reduce-overhead' });
  const a = kiln.zeros([5], { dtype: 'int64' }).to('webgpu');
  const m = kiln.tensor([true, false, true, false, false]).to('webgpu');
  const f = kiln.zeros([3]).to('webgpu');
  for (let call = 0; call < 4; call++) {
    kiln.copy_(a, kiln.tensor([call, call + 5, 2 * call, 3, 4], { dtype: 'int64' }).to('webgpu'));
    kiln.copy_(f, kiln.tensor([call, 1, call + 1]).to('webgpu'));
    const [filled, twice] = cf(a, m, f);
    assert.deepEqual(filled!.toFlatArray(), [7, call + 5, 7, 3, 4], `call ${call}`);
    assert.deepEqual(twice!.toFlatArray(), [2 * call, 2, 2 * call + 2], `call ${call}`);
  }
  const p = replayProgram(cf);
  assert.equal(p.stats.replays, 0);
  assert.equal(p.stats.recordings, 0);
  assert.match(p.stats.disabled ?? '', /host-to-device write/);
});

test('webgpu reduce-overhead: dispose() frees a recording (static outputs and private pool back to the allocator); later calls run plainly', { skip }, () => {
  const w = kiln.randn([64, 64]).to('webgpu');
  const x = kiln.randn([8, 64]).to('webgpu');
  const cf = kiln.compile((a: Tensor) => kiln.relu(kiln.matmul(kiln.add(a, 1), w)).mul(3), { mode: 'reduce-overhead', capturedTensors: 'allow' });
  const want = kiln.relu(kiln.matmul(kiln.add(x, 1), w)).mul(3).toFlatArray() as number[];
  const before = kiln.memoryStats('webgpu').allocatedBytes;
  for (let call = 0; call < 3; call++) cf(x).dispose();
  const p = replayProgram(cf);
  assert.equal(p.stats.replays, 1);
  assert.ok(kiln.memoryStats('webgpu').allocatedBytes > before, 'the static output is held while recorded');
  p.dispose();
  assert.equal(kiln.memoryStats('webgpu').allocatedBytes, before, 'dispose gives the static output back');
  const r = cf(x);
  close(r.toFlatArray() as number[], want, 'a call after dispose');
  assert.equal(p.stats.disabled, 'disposed');
  assert.equal(p.stats.replays, 1);
  r.dispose();
});

test('webgpu default mode: programs of at least KILN_WEBGPU_REPLAY_MIN_STEPS steps replay too, each call getting results of its own (copies)', { skip }, () => {
  kiln.manualSeed(5);
  const wHost = kiln.randn([6, 5]);
  const w = wHost.to('webgpu');
  const x = kiln.zeros([4, 5]).to('webgpu');
  const fn = (a: Tensor, b: Tensor): Tensor => kiln.relu(kiln.add(kiln.nn.functional.linear(a, b), 0.5)).mul(2).sum(-1);
  setOption('KILN_WEBGPU_REPLAY_MIN_STEPS', 2);
  const cf = kiln.compile(fn);
  const results: Tensor[] = [];
  const want: number[][] = [];
  try {
    for (let call = 0; call < 5; call++) {
      const xHost = kiln.randn([4, 5]);
      kiln.copy_(x, xHost.to('webgpu'));
      const ref = kiln.relu(kiln.add(kiln.nn.functional.linear(xHost.to('float64'), wHost.to('float64')), 0.5)).mul(2).sum(-1);
      const r = cf(x, w);
      close(r.toFlatArray() as number[], ref.toFlatArray() as number[], `call ${call}`);
      results.push(r);
      want.push(ref.toFlatArray() as number[]);
    }
  } finally {
    setOption('KILN_WEBGPU_REPLAY_MIN_STEPS', undefined);
  }
  const p = replayProgram(cf);
  assert.equal(p.aliasOutputs, false);
  assert.deepEqual({ ...p.stats, dispatches: p.stats.dispatches > 0 }, { plainRuns: 1, recordings: 1, replays: 3, dispatches: true, disabled: null });
  // Unlike 'reduce-overhead', every call's result keeps that call's values.
  results.forEach((r, i) => close(r.toFlatArray() as number[], want[i]!, `call ${i}'s result after later calls`));
  // Below the threshold (the default 32 steps) the same function compiles to a plain program.
  const small = kiln.compile(fn);
  small(x, w);
  assert.ok(!small.programs().inference.some((q) => q instanceof WgslReplayProgram), 'a program of a few steps is not replayed');
});

test('webgpu replay: attention with a dropout probability of 0 draws nothing and is replayed; with 0.5 it is refused', { skip }, () => {
  kiln.manualSeed(9);
  const [q, k, v] = [0, 1, 2].map(() => kiln.randn([1, 2, 12, 8]).to('webgpu'));
  const attn = (p: number) => (a: Tensor, b: Tensor, c: Tensor): Tensor => kiln.scaledDotProductAttention(a, b, c, null, p, true).mul(2).add(1);
  const want = kiln.scaledDotProductAttention(q!.to('cpu').to('float64'), k!.to('cpu').to('float64'), v!.to('cpu').to('float64'), null, 0, true).mul(2).add(1).toFlatArray() as number[];
  const eval0 = kiln.compile(attn(0), { mode: 'reduce-overhead' });
  for (let call = 0; call < 4; call++) close(eval0(q!, k!, v!).toFlatArray() as number[], want, `p = 0, call ${call}`);
  assert.deepEqual({ replays: replayProgram(eval0).stats.replays, disabled: replayProgram(eval0).stats.disabled }, { replays: 2, disabled: null });
  const train = kiln.compile(attn(0.5), { mode: 'reduce-overhead' });
  for (let call = 0; call < 3; call++) train(q!, k!, v!);
  assert.match(replayProgram(train).stats.disabled ?? '', /random op \(scaledDotProductAttention\)/);
});
