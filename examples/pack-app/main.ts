/**
 * The installed-package check's app (scripts/pack-check.sh): a consumer's program that imports
 * only 'kilnjs', type-checked under a strict NodeNext tsconfig against the packed .d.ts files and
 * run against the packed JavaScript. It touches each public area a user starts with: nn + optim
 * (two Adam steps lower the loss), kiln.compile (same values as eager), kiln.io (a safetensors
 * round trip), kiln.models (a seeded tiny Qwen3 forward), so a file missing from the tarball, a
 * broken exports map or a type that does not resolve outside the repo fails here.
 * Not part of the repo's tsconfig: 'kilnjs' resolves only once the tarball is installed.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as kiln from 'kilnjs';

const { nn, optim } = kiln;

function maxAbsDiff(a: kiln.Tensor, b: kiln.Tensor): number {
  return kiln.sub(a, b).abs().max().item() as number;
}

// nn + optim: a tiny MLP, two Adam steps on a fixed batch.
kiln.manualSeed(0);
const model = new nn.Sequential(new nn.Linear(4, 16), new nn.ReLU(), new nn.Linear(16, 1));
const opt = new optim.Adam(model.parameters(), { lr: 1e-2 });
const x = kiln.randn([32, 4]);
const y = kiln.randn([32, 1]);
const losses: number[] = [];
for (let step = 0; step < 3; step++) {
  opt.zeroGrad();
  const loss = nn.functional.mseLoss(model.forward(x), y);
  losses.push(loss.item() as number);
  if (step < 2) {
    loss.backward();
    opt.step();
  }
}
assert.ok(losses[2]! < losses[0]!, `two Adam steps lower the loss: ${losses.join(' -> ')}`);

// kiln.compile: a fused pointwise + reduction function, compiled vs eager.
const f = (a: kiln.Tensor, b: kiln.Tensor): kiln.Tensor => kiln.gelu(kiln.add(kiln.mul(a, b), 1)).sum(-1);
const compiled = kiln.compile(f);
const a = kiln.randn([8, 64]);
const b = kiln.randn([8, 64]);
const diff = maxAbsDiff(compiled(a, b), f(a, b));
assert.ok(diff < 1e-4, `compiled matches eager (max |diff| ${diff})`);

// kiln.io: the model's weights through a safetensors file.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-pack-app-'));
try {
  const file = path.join(dir, 'mlp.safetensors');
  const state = model.stateDict();
  kiln.io.saveSafetensors(file, state, { note: 'pack-app' });
  const loaded = kiln.io.loadSafetensors(file);
  assert.deepEqual(Object.keys(loaded).sort(), Object.keys(state).sort());
  for (const [k, t] of Object.entries(state)) assert.equal(maxAbsDiff(loaded[k]!, t), 0, k);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}

// kiln.models: a seeded random tiny Qwen3, one forward.
const lm = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_TINY, { seed: 0 });
const ids = kiln.tensor([[1, 5, 7, 2]], { dtype: 'int64' });
const logits = kiln.noGrad(() => lm.forward(ids));
assert.deepEqual(logits.shape, [1, 4, kiln.models.QWEN3_TINY.vocabSize]);
assert.ok(Number.isFinite(logits.abs().max().item() as number), 'finite logits');

console.log(`pack-app: ok (kilnjs ${kiln.version}; loss ${losses[0]!.toFixed(4)} -> ${losses[2]!.toFixed(4)}; compiled max |diff| ${diff.toExponential(1)})`);
