/**
 * Losses under kiln.compile (issue #18 item 4c): crossEntropy and nllLoss check their class
 * indices without reading them on the host while traced (the gather of the picked
 * log-probabilities range-checks them, on the device where there is one), so a compiled LM-style
 * training step (embedding -> linear -> crossEntropy, backward, optimiser step) has no graph break
 * and gives eager's gradients and parameters. The reference is eager Kiln on an identical model.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';

const F = kiln.nn.functional;
const VOCAB = 13;
const DIM = 8;

class TinyLm extends kiln.nn.Module {
  readonly emb: kiln.nn.Embedding;
  readonly head: kiln.nn.Linear;
  constructor(seed: number) {
    super();
    kiln.manualSeed(seed);
    this.emb = new kiln.nn.Embedding(VOCAB, DIM);
    this.head = new kiln.nn.Linear(DIM, VOCAB);
  }
  /** Mean next-token loss of ids [B, T] against targets [B, T] (ignoreIndex -100 skipped). */
  forward(ids: Tensor, targets: Tensor, smoothing = 0): Tensor {
    const logits = this.head.forward(this.emb.forward(ids));
    return F.crossEntropy(logits.reshape([-1, VOCAB]), targets.reshape([-1]), { labelSmoothing: smoothing });
  }
}

function assertClose(a: readonly number[], b: readonly number[], what: string, tol = 1e-5): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) <= tol + tol * Math.abs(b[i]!), `${what}[${i}]: compiled ${a[i]} vs eager ${b[i]}`);
}

const ids = kiln.tensor([[1, 5, 2, 9, 3], [4, 4, 12, 0, 7]], { dtype: 'int64' });
const targets = kiln.tensor([[5, 2, 9, 3, -100], [4, 12, 0, 7, -100]], { dtype: 'int64' });

for (const smoothing of [0, 0.1]) {
  test(`compiled LM training step with crossEntropy (labelSmoothing ${smoothing}): no graph break, eager gradients`, () => {
    const eager = new TinyLm(7);
    const compiled = new TinyLm(7);
    const step = kiln.compile((i: Tensor, t: Tensor) => compiled.forward(i, t, smoothing), { fullgraph: true });
    const optE = new kiln.optim.AdamW(eager.parameters(), { lr: 0.05 });
    const optC = new kiln.optim.AdamW(compiled.parameters(), { lr: 0.05 });
    const losses: number[] = [];
    for (let s = 0; s < 3; s++) {
      optE.zeroGrad();
      optC.zeroGrad();
      const le = eager.forward(ids, targets, smoothing);
      const lc = step(ids, targets);
      le.backward();
      lc.backward();
      assertClose([lc.item() as number], [le.item() as number], `loss at step ${s}`);
      const pe = [...eager.parameters()];
      [...compiled.parameters()].forEach((p, k) => assertClose(p.grad!.toFlatArray(), pe[k]!.grad!.toFlatArray(), `grad ${k} at step ${s}`));
      optE.step();
      optC.step();
      losses.push(le.item() as number);
    }
    assert.ok(losses[2]! < losses[0]!, 'training lowers the loss');
    assert.equal(step.counters.graphBreaks, 0);
    assert.equal(step.counters.fallbacks, 0);
    assert.equal(step.counters.eagerCalls, 0);
    assert.equal(step.counters.backwards, 3, 'every backward ran the compiled backward program');
    assert.equal(step.counters.recompiles, 0);
    assert.equal(step.counters.traces, 2, 'the variant and its joint forward+backward, traced once');
  });
}

test('compiled nllLoss and crossEntropy inference: no graph break, eager values', () => {
  const x = kiln.randn([6, 5]);
  const t = kiln.tensor([0, 4, 2, -100, 1, 3], { dtype: 'int64' });
  const w = kiln.tensor([1, 2, 0.5, 1, 3]);
  const f = kiln.compile((a: Tensor, b: Tensor, c: Tensor) => [F.nllLoss(F.logSoftmax(a, 1), b, { weight: c }), F.crossEntropy(a, b, { reduction: 'none' })], { fullgraph: true });
  const [n, ce] = f(x, t, w) as Tensor[];
  assertClose(n!.toFlatArray(), F.nllLoss(F.logSoftmax(x, 1), t, { weight: w }).toFlatArray(), 'nllLoss');
  assertClose(ce!.toFlatArray(), F.crossEntropy(x, t, { reduction: 'none' }).toFlatArray(), 'crossEntropy none');
  assert.equal(f.counters.graphBreaks, 0);
});

test('compiled crossEntropy: an out-of-range class is still an error (raised by the gather)', () => {
  const f = kiln.compile((a: Tensor, b: Tensor) => F.crossEntropy(a, b), { fullgraph: true });
  const x = kiln.randn([3, 4]);
  assert.ok(Number.isFinite(f(x, kiln.tensor([0, 1, 3], { dtype: 'int64' })).item() as number));
  assert.throws(() => f(x, kiln.tensor([0, 1, 4], { dtype: 'int64' })).item(), /index 4 is out of bounds/);
  assert.throws(() => f(x, kiln.tensor([0, -1, 2], { dtype: 'int64' })).item(), /index -1 is out of bounds/);
  // Eagerly on cpu the loss keeps its own message (test/nn-modules-loss.test.ts).
  assert.throws(() => F.crossEntropy(x, kiln.tensor([0, 1, 4], { dtype: 'int64' })), /crossEntropy: target class 4 is out of bounds for 4 classes/);
});
