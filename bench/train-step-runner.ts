/**
 * One training step of a bench workload with a module, shared by bench/train-step.ts (eager vs
 * compiled wall time) and bench/cuda-profile.ts's 'conv-stack-train' (where the device time of the
 * same step goes), so both measure exactly the same step: zeroGrad, loss = mse(forward(x), zeros),
 * backward, SGD(lr 0.01, momentum 0.9), module.train(), one model per runner from seed 0. The
 * phases are separate methods so a profiler can put events between them.
 */
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { getWorkload, type BenchSize } from '../src/bench/workloads.js';

export type LossFn = (t: Tensor, ...inputs: Tensor[]) => Tensor;

export interface TrainRunner {
  readonly params: Tensor[];
  /** The compiled loss function, or null for the eager runner. */
  readonly compiled: kiln.CompiledFunction<LossFn> | null;
  readonly counters: Record<string, number> | undefined;
  /** zeroGrad, then the loss (the compiled forward program for a compiled runner). */
  forward(): Tensor;
  /** loss.backward() (the compiled backward program, and eager autograd's glue around it). */
  backward(loss: Tensor): void;
  /** The optimizer step (eager in both runners). */
  update(): void;
  /** forward, backward, update, then a device synchronize. */
  step(): void;
}

export interface TrainRunnerOptions {
  readonly workload: string;
  readonly size: BenchSize;
  readonly device: string;
  readonly compiled: boolean;
}

export function trainRunner(o: TrainRunnerOptions): TrainRunner {
  const { device } = o;
  const w = getWorkload(o.workload).build({ size: o.size, device, dtype: 'float32', seed: 0 });
  if (!w.module) throw new Error(`train-step: workload '${o.workload}' has no module to train`);
  w.module.train();
  const params = [...w.module.parameters()];
  const target = kiln.noGrad(() => kiln.zeros([...w.outputShape], { device }));
  const lossOf: LossFn = (t, ...inputs) => kiln.nn.functional.mseLoss(w.forward(...inputs), t);
  const compiled = o.compiled ? kiln.compile(lossOf, { name: `${o.workload}-train` }) : null;
  const fn = compiled ?? lossOf;
  const opt = new kiln.optim.SGD(params, { lr: 0.01, momentum: 0.9 });
  const r: TrainRunner = {
    params,
    compiled,
    get counters() {
      return compiled ? { ...compiled.counters } : undefined;
    },
    forward() {
      opt.zeroGrad();
      const loss = fn(target, ...w.inputs);
      // Says which runner gave a loss without a graph (seen once on the H200, not reproduced off it).
      if (!loss.requiresGrad) {
        const c = compiled ? JSON.stringify(compiled.counters) : 'eager';
        throw new Error(`train-step: the ${compiled ? 'compiled' : 'eager'} loss does not require grad (grad mode ${kiln.isGradEnabled()}; counters ${c})`);
      }
      return loss;
    },
    backward(loss) {
      loss.backward();
    },
    update() {
      opt.step();
    },
    step() {
      r.backward(r.forward());
      r.update();
      kiln.synchronize(device);
    },
  };
  return r;
}
