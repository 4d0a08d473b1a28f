/**
 * Unknown option keys are errors, not silently ignored (issue #18 item 8): each public option object
 * covered names the misspelt key and lists the valid ones; correct keys still work.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { checkOptionKeys } from '../src/runtime/option-keys.js';

test('checkOptionKeys names the key, suggests a close one and lists the valid ones', () => {
  assert.throws(() => checkOptionKeys('f', { mdoe: 1 }, ['mode', 'dynamic']), {
    name: 'TypeError',
    message: "f: unknown option 'mdoe' (did you mean 'mode'?); valid options: mode, dynamic",
  });
  assert.throws(() => checkOptionKeys('f', { zzz: 1 }, ['mode']), { message: "f: unknown option 'zzz'; valid options: mode" });
  checkOptionKeys('f', { mode: 1 }, ['mode']);
  checkOptionKeys('f', undefined, ['mode']);
});

test("kiln.compile rejects { mdoe: 'max-autotune' } and unknown pass switches", () => {
  const f = (x: kiln.Tensor): kiln.Tensor => x.add(1);
  const bad = { mdoe: 'max-autotune' } as never;
  assert.throws(() => kiln.compile(f, bad), {
    name: 'TypeError',
    message: /^kiln\.compile: unknown option 'mdoe' \(did you mean 'mode'\?\); valid options: mode, dynamic, fullgraph, backend, recompileLimit, log, modules, passes, name, verify, capturedTensors$/,
  });
  const badPass = { passes: { cse: true, dec0mpose: false } } as never;
  assert.throws(() => kiln.compile(f, badPass), /^TypeError: kiln\.compile: passes: unknown option 'dec0mpose' \(did you mean 'decompose'\?\)/);
  const ok = kiln.compile(f, { mode: 'default', backend: 'eager', passes: { cse: true } });
  assert.deepEqual(ok(kiln.tensor([1, 2])).toArray(), [2, 3]);
});

test('creation functions reject unknown options before allocating', () => {
  const bad = { dtpye: 'float64' } as never;
  assert.throws(() => kiln.zeros([2], bad), /^TypeError: zeros: unknown option 'dtpye' \(did you mean 'dtype'\?\)/);
  assert.throws(() => kiln.randn([2], bad), /^TypeError: randn: unknown option 'dtpye'/);
  assert.throws(() => kiln.full([2], 1, bad), /^TypeError: full: unknown option 'dtpye'/);
  assert.throws(() => kiln.arange(3, bad), /^TypeError: arange: unknown option 'dtpye'/);
  assert.throws(() => kiln.zerosLike(kiln.ones([2]), bad), /^TypeError: zerosLike: unknown option 'dtpye'/);
  assert.throws(() => kiln.tensor([1], { requiresgrad: true } as never), /^TypeError: tensor: unknown option 'requiresgrad' \(did you mean 'requiresGrad'\?\)/);
  assert.throws(() => kiln.ones([2]).to({ dtyp: 'float64' } as never), /^TypeError: to: unknown option 'dtyp'/);
  assert.equal(kiln.zeros([2], { dtype: 'float64', requiresGrad: true }).dtype, 'float64');
  assert.equal(kiln.ones([2]).to({ dtype: 'float64', copy: true }).dtype, 'float64');
});

test('nn layers and losses reject unknown options', () => {
  const bad = { dtpye: 'float64' } as never;
  assert.throws(() => new kiln.nn.Linear(2, 3, true, bad), /^TypeError: nn\.Linear: unknown option 'dtpye'/);
  assert.throws(() => new kiln.nn.LayerNorm([3], 1e-5, true, true, bad), /^TypeError: nn\.LayerNorm: unknown option 'dtpye'/);
  assert.throws(() => new kiln.nn.Conv2d(1, 1, 3, { strid: 2 } as never), /^TypeError: nn\.Conv2d: unknown option 'strid' \(did you mean 'stride'\?\)/);
  assert.equal(new kiln.nn.Conv2d(1, 1, 3, { stride: 2, dtype: 'float64' }).weight.dtype, 'float64');
  const logits = kiln.randn([4, 3]);
  const target = kiln.tensor([0, 1, 2, 0], { dtype: 'int64' });
  const badLoss = { labelSmothing: 0.1 } as never;
  assert.throws(() => kiln.nn.functional.crossEntropy(logits, target, badLoss), /^TypeError: crossEntropy: unknown option 'labelSmothing' \(did you mean 'labelSmoothing'\?\)/);
  assert.throws(() => kiln.nn.functional.nllLoss(logits, target, { reduce: 'sum' } as never), /^TypeError: nllLoss: unknown option 'reduce'/);
  assert.equal(kiln.nn.functional.crossEntropy(logits, target, { labelSmoothing: 0.1, reduction: 'sum' }).shape.length, 0);
});
