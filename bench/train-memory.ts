/**
 * Step time and peak memory of a deep-MLP training step in three modes: float32, bfloat16 autocast
 * (float32 master weights) and gradient checkpointing (kiln.checkpoint per block of layers).
 * Peak memory is the allocator's high-water mark (kiln.memoryStats().peakAllocatedBytes) over one
 * step, reset before it; each step runs in a kiln.scope so its temporaries are freed when it ends,
 * not when the GC gets to them. Modes alternate step by step; medians over --reps.
 *
 *   node dist/bench/train-memory.js [--device cpu] [--layers 16] [--width 512] [--batch 256]
 *                                   [--every 4] [--reps 10] [--out bench/results/<file>.json]
 */
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';
import { deviceInfo, machineInfo } from '../src/cli/bench.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const device = arg('device', 'cpu');
const layers = Number(arg('layers', '16'));
const width = Number(arg('width', '512'));
const batch = Number(arg('batch', '256'));
const every = Number(arg('every', '4'));
const reps = Number(arg('reps', '10'));
const out = arg('out', '');

type Mode = 'float32' | 'bf16-autocast' | 'checkpoint';
const MODES: Mode[] = ['float32', 'bf16-autocast', 'checkpoint'];

kiln.manualSeed(0);
const blocks: kiln.nn.Sequential[] = [];
for (let i = 0; i < layers; i += every) {
  const mods: kiln.nn.Module[] = [];
  for (let j = i; j < Math.min(i + every, layers); j++) mods.push(new kiln.nn.Linear(width, width), new kiln.nn.GELU());
  blocks.push(new kiln.nn.Sequential(...mods).to(device) as kiln.nn.Sequential);
}
const params = blocks.flatMap((b) => [...b.parameters()]);
const opt = new kiln.optim.SGD(params, { lr: 1e-3 });
const x = kiln.randn([batch, width], { device });
const y = kiln.randn([batch, width], { device });

function forward(mode: Mode): Tensor {
  let h = x;
  for (const b of blocks) h = mode === 'checkpoint' ? kiln.checkpoint((t: Tensor) => b.forward(t), h) : b.forward(h);
  return kiln.nn.functional.mseLoss(h, y);
}

function step(mode: Mode): { ms: number; peak: number } {
  kiln.synchronize(device);
  kiln.resetPeakMemoryStats(device);
  const base = kiln.memoryStats(device).allocatedBytes;
  const t0 = performance.now();
  kiln.scope(() => {
    opt.zeroGrad();
    const loss = mode === 'bf16-autocast' ? kiln.autocast('bfloat16', () => forward(mode)) : forward(mode);
    loss.backward();
    opt.step();
  });
  kiln.synchronize(device);
  const ms = performance.now() - t0;
  return { ms, peak: kiln.memoryStats(device).peakAllocatedBytes - base };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
for (const m of MODES) step(m); // warm-up (kernel builds, caches)
const samples = new Map<Mode, { ms: number[]; peak: number[] }>(MODES.map((m) => [m, { ms: [], peak: [] }]));
for (let r = 0; r < reps; r++) {
  for (const m of MODES) {
    const s = step(m);
    samples.get(m)!.ms.push(s.ms);
    samples.get(m)!.peak.push(s.peak);
  }
}
const rows = MODES.map((m) => ({
  mode: m,
  device,
  model: `MLP ${layers} x Linear(${width}, ${width}) + GELU, batch ${batch}, mse, SGD; checkpoint every ${every} layers`,
  step_ms: median(samples.get(m)!.ms),
  peak_step_bytes: median(samples.get(m)!.peak),
}));
for (const r of rows) console.log(`${r.mode.padEnd(14)} ${r.step_ms.toFixed(1).padStart(8)} ms  peak +${(r.peak_step_bytes / 2 ** 20).toFixed(1)} MiB`);
if (out) {
  let commit = 'unknown';
  try {
    commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    // not a git checkout (the device machine's copy may have no .git)
  }
  const doc = { meta: { machine: machineInfo(), device: deviceInfo(device), date: new Date().toISOString(), kiln_version: kiln.version, command: process.argv.slice(1).join(' '), commit, reps }, results: rows };
  fs.writeFileSync(out, JSON.stringify(doc, null, 1) + '\n');
}
