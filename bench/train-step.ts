/**
 * Training-step time, eager vs kiln.compile (joint forward+backward), for a bench workload with a
 * module (conv-stack by default): one step is zeroGrad, loss = mse(forward(x), target), backward,
 * SGD step. Two copies of the model are built from one seed, one per mode, and the modes alternate
 * rep by rep so machine load hits both alike; medians are reported, with the compiled function's
 * counters (fallbacks 0 means the backward was compiled too) and the largest parameter difference
 * between the copies after the same steps.
 *
 *   node dist/bench/train-step.js [--workload conv-stack] [--size cpu] [--device cpu] [--reps 20]
 *                                 [--warmup 3] [--out bench/results/<file>.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { getWorkload, type BenchSize } from '../src/bench/workloads.js';
import { deviceInfo, machineInfo } from '../src/cli/bench.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const workload = arg('workload', 'conv-stack');
const size = arg('size', 'cpu') as BenchSize;
const device = arg('device', 'cpu');
const reps = Number(arg('reps', '20'));
const warmup = Number(arg('warmup', '3'));
const out = arg('out', '');

function commit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

interface Runner {
  step(): void;
  params: Tensor[];
  counters?: Record<string, number>;
}

function runner(compiled: boolean): Runner {
  const w = getWorkload(workload).build({ size, device, dtype: 'float32', seed: 0 });
  if (!w.module) throw new Error(`train-step: workload '${workload}' has no module to train`);
  w.module.train();
  const params = [...w.module.parameters()];
  const target = kiln.noGrad(() => kiln.zeros([...w.outputShape], { device }));
  const lossOf = (t: Tensor, ...inputs: Tensor[]): Tensor => kiln.nn.functional.mseLoss(w.forward(...inputs), t);
  const fn = compiled ? kiln.compile(lossOf, { name: `${workload}-train` }) : lossOf;
  const opt = new kiln.optim.SGD(params, { lr: 0.01, momentum: 0.9 });
  return {
    params,
    get counters() {
      return compiled ? { ...(fn as kiln.CompiledFunction<typeof lossOf>).counters } : undefined;
    },
    step() {
      opt.zeroGrad();
      const loss = fn(target, ...w.inputs);
      // Says which runner gave a loss without a graph (seen once on the H200, not reproduced off it).
      if (!loss.requiresGrad) {
        const c = compiled ? JSON.stringify((fn as kiln.CompiledFunction<typeof lossOf>).counters) : 'eager';
        throw new Error(`train-step: the ${compiled ? 'compiled' : 'eager'} loss does not require grad (grad mode ${kiln.isGradEnabled()}; counters ${c})`);
      }
      loss.backward();
      opt.step();
      kiln.synchronize(device);
    },
  };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const eager = runner(false);
const compiled = runner(true);
const t0 = performance.now();
compiled.step();
const firstCompiledMs = performance.now() - t0;
eager.step();
for (let i = 1; i < warmup; i++) {
  eager.step();
  compiled.step();
}
const times = { eager: [] as number[], compiled: [] as number[] };
for (let i = 0; i < reps; i++) {
  for (const [name, r] of [['eager', eager], ['compiled', compiled]] as const) {
    const s = performance.now();
    r.step();
    times[name].push(performance.now() - s);
  }
}
let maxParamDiff = 0;
eager.params.forEach((p, i) => {
  const d = kiln.noGrad(() => p.sub(compiled.params[i]!).abs().max().item() as number);
  maxParamDiff = Math.max(maxParamDiff, d);
});
const row = {
  workload,
  size,
  device,
  step: 'mse loss, backward, SGD(momentum 0.9); module.train()',
  eager_ms: median(times.eager),
  compiled_ms: median(times.compiled),
  speedup: median(times.eager) / median(times.compiled),
  first_compiled_step_ms: firstCompiledMs,
  steps_each: warmup + reps,
  max_param_diff: maxParamDiff,
  counters: compiled.counters,
};
console.log(JSON.stringify(row, null, 1));
if (out) {
  const doc = {
    meta: { machine: machineInfo(), device: deviceInfo(device), date: new Date().toISOString(), kiln_version: kiln.version, command: process.argv.slice(1).join(' '), commit: commit(), reps, warmup },
    results: [row],
  };
  fs.writeFileSync(out, JSON.stringify(doc, null, 1) + '\n');
}
