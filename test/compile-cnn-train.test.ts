/**
 * Compiled CNN training (#19 item 5): a kiln.compile'd loss over conv2d -> BatchNorm (training
 * mode, running statistics updated) -> ReLU -> max/avg pooling -> Linear traces its whole backward
 * (no eager fallback) and, after three SGD steps, leaves the parameters and running statistics
 * where eager training leaves them. Two copies of the model are built from one seed; one trains
 * eagerly, the other through the compiled function.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';

const nn = kiln.nn;
const F = kiln.nn.functional;

interface Variant {
  name: string;
  build: () => kiln.nn.Module & { forward(x: Tensor): Tensor };
  input: number[];
}

const VARIANTS: Variant[] = [
  {
    name: 'conv3x3 -> batchNorm -> relu -> maxPool2d -> linear',
    build: () => new nn.Sequential(new nn.Conv2d(3, 4, 3, { padding: 1 }), new nn.BatchNorm2d(4), new nn.ReLU(), new nn.MaxPool2d(2), new nn.Flatten(), new nn.Linear(4 * 4 * 4, 5)),
    input: [2, 3, 8, 8],
  },
  {
    name: 'strided grouped conv -> batchNorm -> relu -> avgPool2d(pad, ceil) -> conv -> linear',
    build: () =>
      new nn.Sequential(
        new nn.Conv2d(4, 6, 3, { stride: 2, padding: 1, groups: 2 }),
        new nn.BatchNorm2d(6),
        new nn.ReLU(),
        new nn.AvgPool2d(3, { stride: 2, padding: 1, ceilMode: true, countIncludePad: false }),
        new nn.Conv2d(6, 3, 2, { dilation: 1 }),
        new nn.Flatten(),
        new nn.Linear(3 * 3 * 3, 5),
      ),
    input: [3, 4, 11, 11],
  },
];

/** Parameters and buffers by name, as plain numbers. */
function stateOf(m: kiln.nn.Module): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const [k, v] of Object.entries(m.stateDict())) out.set(k, (v as Tensor).toFlatArray());
  return out;
}

function train(model: kiln.nn.Module & { forward(x: Tensor): Tensor }, x: Tensor, y: Tensor, compiled: boolean): kiln.CompiledFunction<(a: Tensor, t: Tensor) => Tensor> | null {
  const lossOf = (a: Tensor, t: Tensor): Tensor => F.mseLoss(model.forward(a), t);
  const step = compiled ? kiln.compile(lossOf) : null;
  const opt = new kiln.optim.SGD([...model.parameters()], { lr: 0.1, momentum: 0.9 });
  for (let i = 0; i < 3; i++) {
    opt.zeroGrad();
    const loss = step ? step(x, y) : lossOf(x, y);
    loss.backward();
    opt.step();
  }
  return step;
}

for (const v of VARIANTS) {
  test(`compiled training step of ${v.name}: no fallback, eager parameters after 3 SGD steps`, () => {
    kiln.manualSeed(0);
    const eagerModel = v.build();
    kiln.manualSeed(0);
    const compiledModel = v.build();
    kiln.manualSeed(1);
    const x = kiln.randn(v.input);
    const y = kiln.randn([v.input[0]!, 5]);
    train(eagerModel, x, y, false);
    const step = train(compiledModel, x, y, true)!;
    assert.equal(step.counters.fallbacks, 0, 'backward fell back to eager');
    assert.equal(step.counters.graphBreaks, 0);
    assert.equal(step.counters.backwards, 3);
    const want = stateOf(eagerModel);
    const got = stateOf(compiledModel);
    assert.deepEqual([...got.keys()], [...want.keys()]);
    for (const [k, w] of want) {
      const g = got.get(k)!;
      for (let i = 0; i < w.length; i++) {
        assert.ok(Math.abs(g[i]! - w[i]!) <= 1e-5 + 1e-5 * Math.abs(w[i]!), `${k}[${i}]: compiled ${g[i]} vs eager ${w[i]}`);
      }
    }
  });
}

test('eval-mode batchNorm (frozen statistics) in a compiled training step: no fallback, eager gradients', () => {
  kiln.manualSeed(3);
  const bn = new nn.BatchNorm2d(3);
  const model = new nn.Sequential(new nn.Conv2d(2, 3, 3), bn, new nn.ReLU());
  kiln.noGrad(() => {
    bn.runningMean!.copy_(kiln.randn([3]).mul(0.1));
    bn.runningVar!.copy_(kiln.rand([3]).add(0.5));
  });
  model.eval();
  const x = kiln.randn([2, 2, 5, 5]);
  const lossOf = (a: Tensor): Tensor => model.forward(a).square().mean();
  const params = [...model.parameters()];
  const grads = (f: (a: Tensor) => Tensor): number[][] => {
    for (const p of params) p.grad = null;
    f(x).backward();
    return params.map((p) => p.grad!.toFlatArray());
  };
  const step = kiln.compile(lossOf);
  const got = grads(step);
  const want = grads(lossOf);
  assert.equal(step.counters.fallbacks, 0);
  got.forEach((g, j) => g.forEach((gv, i) => assert.ok(Math.abs(gv - want[j]![i]!) <= 1e-5 + 1e-5 * Math.abs(want[j]![i]!), `param ${j}[${i}]: ${gv} vs ${want[j]![i]}`)));
});
