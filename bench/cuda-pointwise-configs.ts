/**
 * Device time of every config of a compiled workload's generated kernels (issue #5: how close
 * elementwise-4096's one fused kernel gets to copy bandwidth): the workload is traced once, then
 * compiled once per config (the CudaProgram's autotune hook picks that config for every kernel
 * that has it), and each program runs back to back behind a spin kernel (__nanosleep), so the
 * time between two events over N runs is device time, not the host's launch gaps. Each config
 * is timed with the grid capped at the library's waves and at each --waves setting.
 *
 *   node dist/bench/cuda-pointwise-configs.js [workload] [dtype] [--runs 20] [--waves 4,inf] [--json out.json]
 */
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import { getWorkload } from '../src/bench/workloads.js';
import { trace } from '../src/compile/capture.js';
import { runPasses } from '../src/compile/passes/index.js';
import { compileKilnCuda } from '../src/compile/codegen/cuda/backend.js';
import { configTag, pointwiseWavesSetting, setPointwiseWaves } from '../src/compile/codegen/cuda/configs.js';
import type { CudaProgram } from '../src/compile/codegen/cuda/program.js';
import { cudaRuntimeLauncher } from '../src/compile/codegen/cuda/runtime-launcher.js';
import { kernelFromSource } from '../src/runtime/cuda/kernel-cache.js';
import { launch } from '../src/runtime/cuda/launch.js';
import type { CudaAccelerator } from '../src/runtime/cuda/cuda-accelerator.js';
import { getAccelerator } from '../src/runtime/registry.js';
import type { DType } from '../src/tensor/dtype.js';
import { itemSize } from '../src/tensor/dtype.js';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const positional = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
const workload = positional[0] ?? 'elementwise-4096';
const dtype = (positional[1] ?? 'float32') as DType;
const runs = Number(flag('--runs') ?? 20);
const wavesList = (flag('--waves') ?? '4,inf').split(',').map((w) => (w === 'inf' ? Infinity : Number(w)));

const SPIN = `extern "C" __global__ void kiln_spin(long long ns) { long long t = 0; while (t < ns) { __nanosleep(100000); t += 100000; } }`;
const w = getWorkload(workload).build({ size: 'full', device: 'cuda', dtype });
const graph = runPasses(trace(w.forward as (...a: never[]) => unknown, w.inputs).graph, { decompose: true }).graph;
const launcher = cudaRuntimeLauncher(0);
const stream = (getAccelerator('cuda') as unknown as CudaAccelerator).defaultStream(0);
const spin = kernelFromSource(0, SPIN, 'kiln_spin', ['i64']);

/** A program whose kernels all run the config tagged `tag` where they have it (else their default). */
function programFor(tag: string | null): CudaProgram {
  return compileKilnCuda(graph, launcher, { autotune: ({ candidates }) => Math.max(0, candidates.findIndex((c) => configTag(c.config) === tag)) });
}

const probe = programFor(null);
const tags = [...new Set(probe.generated().flatMap((k) => k.candidates.map((c) => configTag(c.config))))];
const defaults = probe.generated().map((k) => configTag(k.candidates[0]!.config));
const bytes = w.inputs.reduce((n, t) => n + t.numel() * itemSize(t.dtype), 0) * 2;

/** Device ms of one run of `p`: N runs queued behind a spin kernel, median of 3 such batches. */
function deviceMs(p: CudaProgram): number {
  const run = (): void => kiln.noGrad(() => kiln.scope(() => void p.run(w.inputs)));
  run();
  kiln.synchronize('cuda');
  const batches: number[] = [];
  for (let b = 0; b < 3; b++) {
    launch(spin, [2_000_000], { grid: 1, block: 1 }, stream);
    const s = new kiln.Event('cuda');
    const e = new kiln.Event('cuda');
    s.record();
    for (let i = 0; i < runs; i++) run();
    e.record();
    e.synchronize();
    batches.push(s.elapsedTime(e) / runs);
  }
  return batches.sort((a, b) => a - b)[1]!;
}

const rows: { config: string; waves: number | 'inf'; ms: number; gbps: number }[] = [];
console.log(`${workload} ${dtype}: default configs ${defaults.join(', ')}; ${(bytes / 1e6).toFixed(1)} MB moved (inputs read + same-size output written)`);
const savedWaves = pointwiseWavesSetting();
for (const tag of tags) {
  if (/v1$/.test(tag) && tags.some((t) => !/v1$/.test(t))) continue; // scalar configs: the fallback only
  const p = programFor(tag);
  for (const waves of wavesList) {
    setPointwiseWaves(waves);
    const ms = deviceMs(p);
    const gbps = bytes / (ms * 1e-3) / 1e9;
    rows.push({ config: tag, waves: Number.isFinite(waves) ? waves : 'inf', ms, gbps });
    console.log(`${tag.padEnd(12)} waves ${String(waves).padEnd(8)} ${ms.toFixed(4)} ms ${gbps.toFixed(0).padStart(6)} GB/s`);
  }
  setPointwiseWaves(savedWaves);
}
const best = [...rows].sort((a, b) => a.ms - b.ms)[0];
if (best) console.log(`fastest: ${best.config} waves ${best.waves}: ${best.ms.toFixed(4)} ms ${best.gbps.toFixed(0)} GB/s`);
const out = flag('--json');
if (out) fs.writeFileSync(out, JSON.stringify({ meta: { workload, dtype, runs, bytes, defaults }, rows }, null, 1));
