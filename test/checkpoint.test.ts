/**
 * kiln.saveCheckpoint / loadCheckpoint: model + optimizer + scheduler in one safetensors file, and
 * a run resumed from it bit-identical to an uninterrupted run.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { Generator } from '../src/tensor/random.js';
import { randomValues } from './helpers/make.js';

const { nn, optim } = kiln;
type Setup = { model: kiln.nn.Sequential; opt: kiln.optim.Optimizer<kiln.optim.BaseOptions>; sched: kiln.optim.LRScheduler };

function tmpFile(name: string): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-ckpt-')), name);
}

function makeSetup(seed: number, kind: 'adamw' | 'sgd'): Setup {
  const g = new Generator(seed);
  const model = new nn.Sequential(new nn.Linear(4, 8, true, { generator: g }), new nn.Tanh(), new nn.Linear(8, 2, true, { generator: g }));
  const opt =
    kind === 'adamw'
      ? new optim.AdamW(model.parameters(), { lr: 1e-2, amsgrad: true })
      : new optim.SGD(model.parameters(), { lr: 5e-2, momentum: 0.9, nesterov: true, weightDecay: 1e-3 });
  const sched = new optim.WarmupCosineLR(opt as kiln.optim.Optimizer<kiln.optim.BaseOptions>, { warmupSteps: 2, totalSteps: 10, startFactor: 0.1 });
  return { model, opt: opt as kiln.optim.Optimizer<kiln.optim.BaseOptions>, sched };
}

function batch(i: number): { x: kiln.Tensor; y: kiln.Tensor } {
  return { x: kiln.tensor(randomValues(5 * 4, 100 + i)).reshape([5, 4]), y: kiln.tensor(randomValues(5 * 2, 200 + i)).reshape([5, 2]) };
}

function trainStep(s: Setup, i: number): void {
  const { x, y } = batch(i);
  s.opt.zeroGrad();
  kiln.nn.functional.mseLoss(s.model.forward(x), y).backward();
  s.opt.step();
  s.sched.step();
}

function bits(m: kiln.nn.Module): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [k, t] of Object.entries(m.stateDict())) out[k] = Array.from(new Uint32Array(new Float32Array(t.toFlatArray()).buffer));
  return out;
}

for (const kind of ['adamw', 'sgd'] as const) {
  test(`a run resumed from a checkpoint is bit-identical to an uninterrupted one (${kind}, WarmupCosineLR)`, () => {
    const full = makeSetup(1, kind);
    for (let i = 0; i < 6; i++) trainStep(full, i);

    const first = makeSetup(1, kind);
    for (let i = 0; i < 3; i++) trainStep(first, i);
    const file = tmpFile('run.safetensors');
    kiln.saveCheckpoint(file, { model: first.model, optimizer: first.opt, scheduler: first.sched, step: 3, extra: { epoch: 0, note: 'mid-run', inf: Infinity } });

    // A fresh process would build everything from other seeds: nothing may leak from `first`.
    const resumed = makeSetup(99, kind);
    const got = kiln.loadCheckpoint(file, { model: resumed.model, optimizer: resumed.opt, scheduler: resumed.sched });
    assert.equal(got.step, 3);
    assert.deepEqual(got.extra, { epoch: 0, note: 'mid-run', inf: Infinity });
    assert.deepEqual(resumed.sched.getLastLr(), first.sched.getLastLr());
    assert.equal(resumed.sched.lastEpoch, first.sched.lastEpoch);
    for (let i = 3; i < 6; i++) trainStep(resumed, i);
    assert.deepEqual(bits(resumed.model), bits(full.model));
    assert.deepEqual(resumed.sched.getLastLr(), full.sched.getLastLr());
  });
}

test('the checkpoint is a plain safetensors file: weights under model.*, optimizer moments under optimizer.state.*', () => {
  const s = makeSetup(2, 'adamw');
  trainStep(s, 0);
  const file = tmpFile('plain.safetensors');
  kiln.saveCheckpoint(file, { model: s.model, optimizer: s.opt });
  const f = kiln.io.openSafetensors(file);
  try {
    const keys = f.keys().sort();
    assert.ok(keys.includes('model.0.weight') && keys.includes('model.2.bias'));
    assert.ok(keys.includes('optimizer.state.0.expAvg') && keys.includes('optimizer.state.3.maxExpAvgSq'));
    const meta = JSON.parse(f.metadata['kiln.checkpoint']!) as { format: number; optimizer: { state: Record<string, { step: number }> }; scheduler: unknown };
    assert.equal(meta.format, 1);
    assert.equal(meta.optimizer.state['0']!.step, 1);
    assert.equal(meta.scheduler, null);
  } finally {
    f.close();
  }
});

test('loadCheckpoint errors name the function, the file and what is missing', () => {
  const s = makeSetup(3, 'adamw');
  const file = tmpFile('model-only.safetensors');
  kiln.saveCheckpoint(file, { model: s.model });
  assert.throws(() => kiln.loadCheckpoint(file, { optimizer: s.opt }), /loadCheckpoint: .*model-only\.safetensors holds no optimizer state/);
  const plain = tmpFile('plain.safetensors');
  kiln.io.saveSafetensors(plain, { w: kiln.ones([2]) });
  assert.throws(() => kiln.loadCheckpoint(plain, { model: s.model }), /without Kiln checkpoint metadata/);
  const other = new nn.Linear(4, 3);
  assert.throws(() => kiln.loadCheckpoint(file, { model: other }), /loadStateDict: missing keys: weight, bias; unexpected keys/);
  const r = kiln.loadCheckpoint(file, { model: new nn.Sequential(new nn.Linear(4, 8), new nn.Tanh(), new nn.Linear(8, 2), new nn.ReLU()) });
  assert.deepEqual(r.missingKeys, []);
});
