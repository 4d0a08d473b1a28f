/**
 * Training-step time, eager vs kiln.compile (joint forward+backward), for a bench workload with a
 * module (conv-stack by default): one step is zeroGrad, loss = mse(forward(x), target), backward,
 * SGD step (train-step-runner.ts, which cuda-profile.ts's 'conv-stack-train' profiles). Two copies of the model are built from one seed, one per mode, and the modes alternate
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
import type { BenchSize } from '../src/bench/workloads.js';
import { deviceInfo, machineInfo } from '../src/cli/bench.js';
import { trainRunner } from './train-step-runner.js';

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

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const eager = trainRunner({ workload, size, device, compiled: false });
const compiled = trainRunner({ workload, size, device, compiled: true });
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
