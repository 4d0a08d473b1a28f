/**
 * Trains a small MLP (2 -> 32 -> 32 -> 1, ReLU) to regress a smooth function of two inputs on
 * seeded synthetic data, on the CPU, with AdamW, a warmup-then-cosine learning rate and gradient
 * clipping. Run: `npx tsc -p tsconfig.json && node dist/examples/train-mlp.js`.
 * `trainMlp` is also used by test/train-mlp.test.ts.
 */
import * as kiln from '../src/index.js';
import { Generator } from '../src/tensor/random.js';
import type { Tensor } from '../src/tensor/tensor.js';

const { nn, optim } = kiln;
const F = nn.functional;

export interface TrainOptions {
  steps?: number;
  batchSize?: number;
  lr?: number;
  seed?: number;
  /** Print (or hand to `log`) the loss every this many steps; 0 for never. */
  logEvery?: number;
  log?: (line: string) => void;
}

export interface TrainResult {
  /** Training loss of the full data set at every step, before that step's update. */
  losses: number[];
  /** Loss after the last update. */
  finalLoss: number;
  model: kiln.nn.Module;
}

/** y = sin(2 x0) cos(1.5 x1) + 0.5 x0 x1, for x uniform in [-1.5, 1.5]^2. */
export function makeData(n: number, generator: Generator): { x: Tensor; y: Tensor } {
  const x = kiln.sub(kiln.mul(kiln.rand([n, 2], { generator }), 3), 1.5);
  const x0 = x.select(1, 0);
  const x1 = x.select(1, 1);
  const y = kiln.add(kiln.mul(kiln.sin(kiln.mul(x0, 2)), kiln.cos(kiln.mul(x1, 1.5))), kiln.mul(kiln.mul(x0, x1), 0.5));
  return { x, y: y.unsqueeze(1) };
}

export function trainMlp(options: TrainOptions = {}): TrainResult {
  const steps = options.steps ?? 300;
  const batchSize = options.batchSize ?? 256;
  const log = options.log ?? ((line: string) => console.log(line));
  const logEvery = options.logEvery ?? 50;
  const gen = new Generator(options.seed ?? 0);
  const { x, y } = makeData(batchSize, gen);
  const model = new nn.Sequential(
    new nn.Linear(2, 32, true, { generator: gen }),
    new nn.ReLU(),
    new nn.Linear(32, 32, true, { generator: gen }),
    new nn.ReLU(),
    new nn.Linear(32, 1, true, { generator: gen }),
  );
  const opt = new optim.AdamW(model.parameters(), { lr: options.lr ?? 1e-2, weightDecay: 1e-4 });
  const sched = optim.warmupCosine(opt, { warmupSteps: Math.max(1, Math.floor(steps / 20)), totalSteps: steps, minLrRatio: 0.05, startFactor: 0.1 });
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    opt.zeroGrad();
    const loss = F.mseLoss(model.forward(x), y);
    loss.backward();
    const gradNorm = nn.clipGradNorm_(model.parameters(), 1.0);
    opt.step();
    sched.step();
    const l = Number(loss.item());
    losses.push(l);
    if (logEvery > 0 && (step % logEvery === 0 || step === steps - 1)) {
      log(`step ${String(step).padStart(4)}  loss ${l.toFixed(5)}  grad-norm ${Number(gradNorm.item()).toFixed(4)}  lr ${opt.paramGroups[0]!.lr.toExponential(2)}`);
    }
  }
  const finalLoss = Number(kiln.noGrad(() => F.mseLoss(model.forward(x), y)).item());
  return { losses, finalLoss, model };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const t0 = performance.now();
  const r = trainMlp();
  console.log(`initial loss ${r.losses[0]!.toFixed(5)} -> final ${r.finalLoss.toFixed(5)} in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
}
